#include "attnviz/head_kinds.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <unordered_map>

#include "attnviz/enum_names.hpp"

namespace attnviz {
namespace {

// Cell j of a row, 0 when not finite.
float cell(const float* row, int j, float multiplier) {
  const float x = row[j] * multiplier;
  return std::isfinite(x) ? x : 0.0f;
}

// log(x) for a normal positive float without a call, so that a loop of it vectorizes (with std::log a head
// took twice as long at T = 1024): x = 2^k m with m in [sqrt(1/2), sqrt(2)) and log m = 2 atanh(s),
// s = (m - 1) / (m + 1), |s| < 0.172, by its series to s^9 (truncation error below 1e-9). Finite for x = 0.
float log_normal(float x) {
  std::uint32_t ix;
  std::memcpy(&ix, &x, sizeof ix);
  ix += 0x3f800000u - 0x3f3504f3u;  // carry into the exponent from m = sqrt(1/2) up
  const int k = static_cast<int>(ix >> 23) - 0x7f;
  ix = (ix & 0x007fffffu) + 0x3f3504f3u;
  float m;
  std::memcpy(&m, &ix, sizeof m);
  const float s = (m - 1.0f) / (m + 1.0f), z = s * s;
  const float series = 1.0f + z * (1.0f / 3 + z * (1.0f / 5 + z * (1.0f / 7 + z * (1.0f / 9))));
  return static_cast<float>(k) * 0.693147180559945f + 2.0f * s * series;
}

// H / log(n) of a row's n visible cells, over its positive cells as probabilities (cells below the smallest
// normal float, about 1e-38, and non-finite ones count as 0). `a` and `a_log_a` are n floats of scratch.
// Not inlined: inlined into score_head's row loop, clang 14 (Emscripten) no longer vectorized pass 1 ("value
// that could not be identified as reduction"), and gpt2-small's 144 heads at T = 512 took 62 ms in
// WebAssembly instead of 28 (the same bits either way).
[[gnu::noinline]] double normalized_entropy(const float* row, int n, float multiplier, float* a,
                                            float* a_log_a) {
  // pass 1: the cells and a log a, without branches so that it vectorizes: a cell that does not count is
  // masked to 0 in the integer domain (GCC turns a select of the constant 0 back into a branch around the
  // division in log_normal, and then does not vectorize); 0 x log_normal(0) = 0.
  for (int j = 0; j < n; ++j) {
    const float x = row[j] * multiplier;
    std::uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    // sign 0 and a biased exponent in [1, 254]: positive, normal and finite
    const bool counts = bits - 0x00800000u < 0x7f800000u - 0x00800000u;
    bits &= 0u - static_cast<std::uint32_t>(counts);
    float c;
    std::memcpy(&c, &bits, sizeof c);
    a[j] = c;
    a_log_a[j] = c * log_normal(c);
  }
  // pass 2: both sums in double, four independent chains
  double sum[4] = {}, sum_a_log_a[4] = {};
  int j = 0;
  for (; j + 4 <= n; j += 4)
    for (int l = 0; l < 4; ++l) {
      sum[l] += a[j + l];
      sum_a_log_a[l] += a_log_a[j + l];
    }
  for (; j < n; ++j) {
    sum[0] += a[j];
    sum_a_log_a[0] += a_log_a[j];
  }
  const double s = (sum[0] + sum[1]) + (sum[2] + sum[3]);
  const double t = (sum_a_log_a[0] + sum_a_log_a[1]) + (sum_a_log_a[2] + sum_a_log_a[3]);
  if (!(s > 0.0)) return 0.0;
  // -sum_j (a_j / s) log(a_j / s) = log s - (sum_j a_j log a_j) / s
  return (std::log(s) - t / s) / std::log(static_cast<double>(n));
}

// earlier[i]: the last position j < i with the same id, or -1. Chained, it lists every earlier occurrence.
std::vector<int> earlier_occurrences(const std::vector<int>& ids, int n) {
  std::vector<int> earlier(static_cast<std::size_t>(n), -1);
  std::unordered_map<int, int> last;
  last.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto [it, inserted] = last.try_emplace(ids[static_cast<std::size_t>(i)], i);
    if (!inserted) {
      earlier[static_cast<std::size_t>(i)] = it->second;
      it->second = i;
    }
  }
  return earlier;
}

float clamp01(double x) {
  return static_cast<float>(std::clamp(x, 0.0, 1.0));
}

}  // namespace

float head_kind_threshold(HeadKind k) {
  switch (k) {
    case HeadKind::previous:
      return kPreviousThreshold;
    case HeadKind::first:
      return kFirstThreshold;
    case HeadKind::self:
      return kSelfThreshold;
    case HeadKind::broad:
      return kBroadThreshold;
    case HeadKind::induction:
      return kInductionThreshold;
    case HeadKind::none:
      break;
  }
  return 0.0f;
}

namespace {

constexpr EnumName<HeadKind> kHeadKindNames[] = {
    {HeadKind::none, "none"},         {HeadKind::previous, "previous-token"},
    {HeadKind::first, "first-token"}, {HeadKind::self, "self"},
    {HeadKind::broad, "broad"},       {HeadKind::induction, "induction"},
};

}  // namespace

const std::vector<HeadKind>& all_head_kinds() {
  static const std::vector<HeadKind> all = {HeadKind::induction, HeadKind::previous, HeadKind::first,
                                            HeadKind::self, HeadKind::broad};
  return all;
}

const char* to_string(HeadKind k) {
  return name_in(kHeadKindNames, k);
}

const char* short_label(HeadKind k) {
  switch (k) {
    case HeadKind::previous:
      return "prev";
    case HeadKind::first:
      return "first";
    case HeadKind::self:
      return "self";
    case HeadKind::broad:
      return "broad";
    case HeadKind::induction:
      return "induct";
    case HeadKind::none:
      break;
  }
  return "";
}

bool parse_head_kind(const std::string& s, HeadKind& out) {
  const std::optional<HeadKind> k = value_in(kHeadKindNames, s);
  if (k) out = *k;
  return k.has_value();
}

float HeadScores::score(HeadKind k) const {
  switch (k) {
    case HeadKind::previous:
      return previous;
    case HeadKind::first:
      return first;
    case HeadKind::self:
      return self;
    case HeadKind::broad:
      return broad;
    case HeadKind::induction:
      return induction;
    case HeadKind::none:
      break;
  }
  return 0.0f;
}

HeadScores score_head(const WeightsView& weights, const std::vector<int>& ids) {
  HeadSums sums;
  return score_head(weights, ids, sums);
}

HeadScores score_head(const WeightsView& weights, const std::vector<int>& ids, HeadSums& sums) {
  HeadScores s;
  const WeightsView& m = weights;
  const int T = m.rows;
  if (m.data == nullptr || T < 2 || m.cols != T || sums.rows > T || sums.rows < 0) sums = HeadSums();
  if (m.data == nullptr || T < 2 || m.cols != T) return s;
  const float mul = m.multiplier;
  auto row = [&m](int i) { return m.data + static_cast<std::ptrdiff_t>(i) * m.row_stride; };
  const int from = sums.rows;

  // previous, first, self: one cell a row; broad: the whole visible row
  double previous = sums.previous, first = sums.first, self = sums.self, broad = sums.broad;
  std::vector<float> scratch(2 * static_cast<std::size_t>(T));
  for (int i = std::max(1, from); i < T; ++i) {
    const float* r = row(i);
    previous += cell(r, i - 1, mul);
    first += cell(r, 0, mul);
    self += cell(r, i, mul);
    if (i >= 2) broad += normalized_entropy(r, i + 1, mul, scratch.data(), scratch.data() + T);
  }
  s.previous = clamp01(previous / (T - 1));
  s.first = clamp01(first / (T - 1));
  s.self = clamp01(self / (T - 1));
  s.broad = T > 2 ? clamp01(broad / (T - 2)) : 0.0f;

  // induction: walk each position's chain of earlier occurrences of its token
  const int n = static_cast<int>(std::min(ids.size(), static_cast<std::size_t>(T)));
  const std::vector<int> earlier = earlier_occurrences(ids, n);
  double induction = sums.induction;
  int positions = sums.positions;
  // induction walks only the rows with an id: its sums continue from its own count
  int induction_from = sums.induction_rows;
  if (induction_from > n) induction = 0.0, positions = 0, induction_from = 0;
  for (int i = std::max(2, induction_from); i < n; ++i) {
    const float* r = row(i);
    double mass = 0.0;
    bool any = false;
    for (int j = earlier[static_cast<std::size_t>(i)]; j >= 0; j = earlier[static_cast<std::size_t>(j)]) {
      if (j + 1 >= i) continue;  // an occurrence right before i: its successor is i itself
      mass += cell(r, j + 1, mul);
      any = true;
    }
    if (any) {
      induction += mass;
      ++positions;
    }
  }
  s.induction_defined = positions >= 2;
  s.induction = s.induction_defined ? clamp01(induction / positions) : 0.0f;
  sums = HeadSums{T, previous, first, self, broad, induction, positions, n};

  s.kind = label_of(s);
  return s;
}

HeadKind label_of(const HeadScores& s) {
  // the highest score reaching its threshold, ties to the earlier kind
  HeadKind kind = HeadKind::none;
  for (HeadKind k : all_head_kinds()) {
    if (k == HeadKind::induction && !s.induction_defined) continue;
    const float x = s.score(k);
    if (x >= head_kind_threshold(k) && (kind == HeadKind::none || x > s.score(kind))) kind = k;
  }
  return kind;
}

void score_heads(const std::vector<HeadTask>& tasks, const std::vector<int>& ids, const Exec& how) {
  run_tasks(
      static_cast<int>(tasks.size()),
      [&](int t) {
        const HeadTask& task = tasks[static_cast<std::size_t>(t)];
        HeadSums fresh;
        *task.out = score_head(task.weights, ids, task.sums ? *task.sums : fresh);
      },
      how);
}

}  // namespace attnviz
