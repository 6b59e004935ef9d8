// Head-kind scores and thumbnails on hand-built attention patterns whose scores can be worked out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attnviz/engine.hpp"
#include "attnviz/viz/colorize.hpp"
#include "attnviz/viz/head_kinds.hpp"
#include "attnviz/viz/palette.hpp"
#include "attnviz/viz/stages.hpp"

using namespace attnviz;
using namespace attnviz::viz;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A causal (T, T) matrix: cell (i, j <= i) is f(i, j), masked cells 0. Row 0 is always 1 on itself.
std::vector<float> causal(int T, const std::function<float(int, int)>& f) {
  std::vector<float> w(static_cast<std::size_t>(T) * static_cast<std::size_t>(T), 0.0f);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j) w[static_cast<std::size_t>(i * T + j)] = i == 0 ? 1.0f : f(i, j);
  return w;
}

MatrixDesc wrap(const std::vector<float>& w, int rows, int cols, bool is_causal = true) {
  MatrixDesc m;
  m.data = w.data();
  m.rows = rows;
  m.cols = cols;
  m.row_stride = cols;
  m.causal = is_causal;
  return m;
}

MatrixDesc wrap(const std::vector<float>& w, int T) {
  return wrap(w, T, T);
}

std::vector<int> distinct_ids(int T) {
  std::vector<int> ids;
  for (int i = 0; i < T; ++i) ids.push_back(100 + i);
  return ids;
}

// The induction pattern on `repeated`: positions with an earlier occurrence look at the token after it (the
// latest occurrence), the others at the first token.
std::vector<float> induction_head(int T, const std::vector<int>& repeated) {
  return causal(T, [&](int i, int j) {
    for (int k = i - 2; k >= 0; --k)
      if (repeated[static_cast<std::size_t>(k)] == repeated[static_cast<std::size_t>(i)])
        return j == k + 1 ? 1.0f : 0.0f;
    return j == 0 ? 1.0f : 0.0f;
  });
}

}  // namespace

TEST_CASE("head kinds: names, short labels, thresholds") {
  CHECK(all_head_kinds().size() == 5u);
  CHECK(all_head_kinds().front() == HeadKind::induction);  // the tie-break order
  for (HeadKind k : all_head_kinds()) {
    HeadKind back = HeadKind::none;
    CHECK(parse_head_kind(to_string(k), back));
    CHECK(back == k);
    CHECK(std::string(short_label(k)).size() <= 6u);
    CHECK_FALSE(std::string(short_label(k)).empty());
    CHECK(head_kind_threshold(k) > 0.0f);
  }
  CHECK(std::string(to_string(HeadKind::previous)) == "previous-token");
  CHECK(std::string(to_string(HeadKind::first)) == "first-token");
  CHECK(std::string(short_label(HeadKind::induction)) == "induct");
  CHECK(std::string(short_label(HeadKind::none)).empty());
  HeadKind k = HeadKind::self;
  CHECK(parse_head_kind("none", k));
  CHECK(k == HeadKind::none);
  CHECK_FALSE(parse_head_kind("prev", k));
  CHECK(head_kind_threshold(HeadKind::broad) == kBroadThreshold);
}

TEST_CASE("head kinds: pure patterns score 1 on their own kind") {
  const int T = 8;
  const std::vector<int> ids = distinct_ids(T);

  SUBCASE("previous token") {
    const auto w = causal(T, [](int i, int j) { return j == i - 1 ? 1.0f : 0.0f; });
    const HeadScores s = score_head(wrap(w, T), ids);
    CHECK(s.previous == 1.0f);
    CHECK(s.first == doctest::Approx(1.0 / 7).epsilon(1e-6));  // row 1's previous token is the first
    CHECK(s.self == 0.0f);
    CHECK(s.broad == 0.0f);
    CHECK_FALSE(s.induction_defined);
    CHECK(s.induction == 0.0f);
    CHECK(s.kind == HeadKind::previous);
    CHECK(s.score(HeadKind::previous) == s.previous);
    CHECK(s.score(HeadKind::none) == 0.0f);
  }
  SUBCASE("first token (sink)") {
    const auto w = causal(T, [](int, int j) { return j == 0 ? 1.0f : 0.0f; });
    const HeadScores s = score_head(wrap(w, T), ids);
    CHECK(s.first == 1.0f);
    CHECK(s.previous == doctest::Approx(1.0 / 7).epsilon(1e-6));
    CHECK(s.self == 0.0f);
    CHECK(s.broad == 0.0f);
    CHECK(s.kind == HeadKind::first);
  }
  SUBCASE("diagonal") {
    const auto w = causal(T, [](int i, int j) { return j == i ? 1.0f : 0.0f; });
    const HeadScores s = score_head(wrap(w, T), ids);
    CHECK(s.self == 1.0f);
    CHECK(s.previous == 0.0f);
    CHECK(s.first == 0.0f);
    CHECK(s.broad == 0.0f);
    CHECK(s.kind == HeadKind::self);
  }
  SUBCASE("uniform over the visible cells") {
    const auto w = causal(T, [](int i, int) { return 1.0f / static_cast<float>(i + 1); });
    const HeadScores s = score_head(wrap(w, T), ids);
    CHECK(s.broad == doctest::Approx(1.0).epsilon(1e-6));
    // previous = first = self = (1/2 + 1/3 + ... + 1/8) / 7
    const double h = (1.0 / 2 + 1.0 / 3 + 1.0 / 4 + 1.0 / 5 + 1.0 / 6 + 1.0 / 7 + 1.0 / 8) / 7;
    CHECK(s.previous == doctest::Approx(h).epsilon(1e-6));
    CHECK(s.first == doctest::Approx(h).epsilon(1e-6));
    CHECK(s.self == doctest::Approx(h).epsilon(1e-6));
    CHECK(s.kind == HeadKind::broad);
  }
  SUBCASE("two tokens back is none of the kinds") {
    const auto w = causal(T, [](int i, int j) { return j == std::max(i - 2, 0) ? 1.0f : 0.0f; });
    const HeadScores s = score_head(wrap(w, T), ids);
    CHECK(s.first == doctest::Approx(2.0 / 7).epsilon(1e-6));     // rows 1 and 2
    CHECK(s.previous == doctest::Approx(1.0 / 7).epsilon(1e-6));  // row 1
    CHECK(s.self == 0.0f);
    CHECK(s.broad == 0.0f);
    CHECK(s.kind == HeadKind::none);
  }
}

TEST_CASE("head kinds: induction on repeated tokens") {
  const std::vector<int> repeated = {10, 11, 12, 13, 10, 11, 12, 13};  // A B C D A B C D
  const int T = 8;
  const auto w = induction_head(T, repeated);
  const MatrixDesc m = wrap(w, T);
  CHECK(m.at(5, 2) == 1.0f);  // the second B looks at the first C

  const HeadScores s = score_head(m, repeated);
  REQUIRE(s.induction_defined);
  CHECK(s.induction == 1.0f);
  CHECK(s.first == doctest::Approx(3.0 / 7).epsilon(1e-6));  // rows 1..3 look at the first token
  CHECK(s.kind == HeadKind::induction);

  // The same head on text without repeats: induction is not defined and the sink (3/7 >= 0.4) is the label.
  const HeadScores plain = score_head(m, distinct_ids(T));
  CHECK_FALSE(plain.induction_defined);
  CHECK(plain.induction == 0.0f);
  CHECK(plain.first == s.first);
  CHECK(plain.kind == HeadKind::first);

  // Fewer ids than rows: only positions with an id count. Two repeats are enough, one is not.
  const HeadScores six = score_head(m, std::vector<int>(repeated.begin(), repeated.begin() + 6));
  CHECK(six.induction_defined);
  CHECK(six.induction == 1.0f);
  const HeadScores five = score_head(m, std::vector<int>(repeated.begin(), repeated.begin() + 5));
  CHECK_FALSE(five.induction_defined);
  CHECK(five.kind == HeadKind::first);
  const HeadScores none = score_head(m, {});
  CHECK_FALSE(none.induction_defined);
  CHECK(none.first == s.first);  // the matrix alone still scores
}

TEST_CASE("head kinds: induction sums every earlier successor and skips an occurrence right before") {
  // ids: X X p p X p. Positions 1 and 3 repeat the token right before them (its successor would be the
  // position itself): not counted. Position 4 (X) has successors 1 and 2 of the earlier X's; position 5 (p)
  // has successors 3 and 4 of the p's at 2 and 3.
  const std::vector<int> ids = {7, 7, 1, 1, 7, 1};
  const int T = 6;
  std::vector<float> w = causal(T, [](int i, int j) { return j == i ? 1.0f : 0.0f; });  // rows 1..3: self
  auto set_row = [&](int i, std::vector<float> row) {
    for (int j = 0; j < T; ++j) w[static_cast<std::size_t>(i * T + j)] = row[static_cast<std::size_t>(j)];
  };
  set_row(4, {0.0f, 0.25f, 0.25f, 0.0f, 0.5f, 0.0f});  // induction mass 0.5
  set_row(5, {0.0f, 0.0f, 0.0f, 0.25f, 0.75f, 0.0f});  // induction mass 1
  const HeadScores s = score_head(wrap(w, T), ids);
  REQUIRE(s.induction_defined);
  CHECK(s.induction == doctest::Approx(0.75).epsilon(1e-6));  // (0.5 + 1) / 2
  CHECK(s.self == doctest::Approx(0.7).epsilon(1e-6));        // (1 + 1 + 1 + 0.5 + 0) / 5
  CHECK(s.previous == doctest::Approx(0.15).epsilon(1e-6));   // row 5: 0.75 / 5
  CHECK(s.first == 0.0f);
  CHECK(s.kind == HeadKind::induction);  // 0.75 > 0.7

  // Two X's in a row and nothing else: no position counts, so induction is not defined.
  const HeadScores adjacent = score_head(wrap(w, T), {7, 7, 1, 2, 3, 4});
  CHECK_FALSE(adjacent.induction_defined);
  CHECK(adjacent.kind == HeadKind::self);
}

TEST_CASE("head kinds: mixtures score by hand and ties go to the earlier kind") {
  const int T = 6;
  const std::vector<int> ids = distinct_ids(T);

  SUBCASE("half previous, half first") {
    // Row 1's previous token is the first: 1 there; rows 2..5: 0.5 on each.
    const auto w = causal(T, [](int i, int j) {
      if (i == 1) return j == 0 ? 1.0f : 0.0f;
      return j == 0 || j == i - 1 ? 0.5f : 0.0f;
    });
    const HeadScores s = score_head(wrap(w, T), ids);
    CHECK(s.previous == doctest::Approx(0.6).epsilon(1e-6));  // (1 + 4 x 0.5) / 5
    CHECK(s.first == s.previous);
    CHECK(s.self == 0.0f);
    // Rows 2..5 have entropy log 2 over log(i + 1) visible cells.
    const double broad = (std::log(2.0) / std::log(3.0) + std::log(2.0) / std::log(4.0) +
                          std::log(2.0) / std::log(5.0) + std::log(2.0) / std::log(6.0)) /
                         4;
    CHECK(s.broad == doctest::Approx(broad).epsilon(1e-6));
    CHECK(s.broad < kBroadThreshold);
    CHECK(s.kind == HeadKind::previous);  // tied with first: previous comes earlier
  }
  SUBCASE("0.6 self, 0.4 previous: both reach their threshold, the higher wins") {
    const auto w = causal(T, [](int i, int j) { return j == i ? 0.6f : j == i - 1 ? 0.4f : 0.0f; });
    const HeadScores s = score_head(wrap(w, T), ids);
    CHECK(s.self == doctest::Approx(0.6).epsilon(1e-6));
    CHECK(s.previous == doctest::Approx(0.4).epsilon(1e-6));
    CHECK(s.previous >= kPreviousThreshold);
    CHECK(s.first == doctest::Approx(0.4 / 5).epsilon(1e-6));
    CHECK(s.kind == HeadKind::self);
  }
}

TEST_CASE("head kinds: broad is the mean normalized entropy, computed in double here") {
  // Rows of skewed random weights (u^4, normalized), from nearly one-hot to nearly uniform, at T = 200.
  const int T = 200;
  std::mt19937 g(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<float> w(static_cast<std::size_t>(T * T), 0.0f);
  w[0] = 1.0f;
  double expected = 0.0;
  for (int i = 1; i < T; ++i) {
    std::vector<double> row(static_cast<std::size_t>(i + 1));
    double sum = 0.0;
    for (double& x : row) sum += x = std::pow(u(g), 4.0 * (i % 5));  // i % 5 == 0: uniform
    double h = 0.0;
    for (int j = 0; j <= i; ++j) {
      const float a = static_cast<float>(row[static_cast<std::size_t>(j)] / sum);
      w[static_cast<std::size_t>(i * T + j)] = a;
      row[static_cast<std::size_t>(j)] = a;
    }
    sum = 0.0;
    for (double x : row) sum += x;
    for (double x : row)
      if (x > 0.0) h -= x / sum * std::log(x / sum);
    if (i >= 2) expected += h / std::log(i + 1.0);
  }
  expected /= T - 2;
  const HeadScores s = score_head(wrap(w, T), distinct_ids(T));
  CHECK(s.broad == doctest::Approx(expected).epsilon(1e-6));
  CHECK(s.broad > 0.5f);
  CHECK(s.broad < 0.99f);
}

TEST_CASE("head kinds: small, empty, odd and broken inputs") {
  const std::vector<float> one = {1.0f};
  const HeadScores t1 = score_head(wrap(one, 1), {5});
  CHECK(t1.previous == 0.0f);
  CHECK(t1.first == 0.0f);
  CHECK(t1.self == 0.0f);
  CHECK(t1.broad == 0.0f);
  CHECK(t1.kind == HeadKind::none);

  const HeadScores t0 = score_head(MatrixDesc{}, {});
  CHECK(t0.first == 0.0f);
  CHECK(t0.kind == HeadKind::none);

  // T = 2 has no row with more than two cells: broad is 0, the rest still score.
  const std::vector<float> two = {1.0f, 0.0f, 1.0f, 0.0f};
  const HeadScores t2 = score_head(wrap(two, 2), {1, 2});
  CHECK(t2.first == 1.0f);
  CHECK(t2.previous == 1.0f);
  CHECK(t2.broad == 0.0f);
  CHECK(t2.kind == HeadKind::previous);

  // A non-square matrix is not an attention matrix.
  const std::vector<float> wide(12, 0.25f);
  const HeadScores ns = score_head(wrap(wide, 3, 4, false), {1, 2, 3});
  CHECK(ns.first == 0.0f);
  CHECK(ns.kind == HeadKind::none);

  // A NaN and an inf read as 0.
  const int T = 8;
  auto w = causal(T, [](int i, int j) { return j == i - 1 ? 1.0f : 0.0f; });
  w[3 * T + 2] = kNaN;
  w[5 * T + 4] = std::numeric_limits<float>::infinity();
  const HeadScores s = score_head(wrap(w, T), distinct_ids(T));
  CHECK(s.previous == doctest::Approx(5.0 / 7).epsilon(1e-6));
  CHECK(s.broad == 0.0f);
  for (HeadKind k : all_head_kinds()) CHECK(std::isfinite(s.score(k)));
  CHECK(s.kind == HeadKind::previous);
}

TEST_CASE("head kinds: a strided view with a multiplier reads the same cells") {
  // The pure previous-token head inside a wider buffer whose padding is NaN, stored at half its value.
  const int T = 5, stride = 7;
  std::vector<float> buf(static_cast<std::size_t>(T * stride), kNaN);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j)
      buf[static_cast<std::size_t>(i * stride + j)] = j == std::max(i - 1, 0) ? 0.5f : 0.0f;
  MatrixDesc m = wrap(buf, T);
  m.row_stride = stride;
  m.multiplier = 2.0f;
  const HeadScores s = score_head(m, distinct_ids(T));
  CHECK(s.previous == 1.0f);
  CHECK(s.first == doctest::Approx(0.25).epsilon(1e-6));
  CHECK(s.kind == HeadKind::previous);
}

TEST_CASE("head kinds: running sums continued over appended rows give score_head's bits") {
  // Random causal rows over ids with repeats (induction defined), summed in pieces as typing does.
  const int T = 30;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.01f, 1.0f);
  std::vector<float> w = causal(T, [&](int, int) { return u(rng); });
  for (int i = 1; i < T; ++i) {  // rows sum to 1
    float sum = 0.0f;
    for (int j = 0; j <= i; ++j) sum += w[static_cast<std::size_t>(i * T + j)];
    for (int j = 0; j <= i; ++j) w[static_cast<std::size_t>(i * T + j)] /= sum;
  }
  std::vector<int> ids;
  for (int i = 0; i < T; ++i) ids.push_back(i % 4);
  const auto same = [](const HeadScores& a, const HeadScores& b) {
    return a.previous == b.previous && a.first == b.first && a.self == b.self && a.broad == b.broad &&
           a.induction == b.induction && a.induction_defined == b.induction_defined && a.kind == b.kind;
  };
  // the first n rows of the same matrix are the (n, n) view with the full row stride
  const auto view = [&](int n) { return WeightsView{w.data(), n, n, T, 1.0f}; };
  attnviz::HeadSums sums;
  for (int n : {1, 2, 3, 10, 11, 12, 29, 30}) {
    INFO("n = " << n);
    const std::vector<int> prefix(ids.begin(), ids.begin() + n);
    const HeadScores whole = attnviz::score_head(view(n), prefix);
    CHECK(same(attnviz::score_head(view(n), prefix, sums), whole));
    CHECK(sums.rows == (n < 2 ? 0 : n));
  }
  CHECK(sums.positions >= 2);
  // sums past the matrix start over; fewer ids than rows walk induction only as far as the ids go
  attnviz::HeadSums ahead = sums;
  CHECK(same(attnviz::score_head(view(12), {ids.begin(), ids.begin() + 12}, ahead),
             attnviz::score_head(view(12), {ids.begin(), ids.begin() + 12})));
  attnviz::HeadSums short_ids;
  const std::vector<int> few(ids.begin(), ids.begin() + 8);
  attnviz::score_head(view(20), few, short_ids);
  CHECK(short_ids.induction_rows == 8);
  CHECK(same(attnviz::score_head(view(T), ids, short_ids), attnviz::score_head(view(T), ids)));
}

TEST_CASE("head kinds: score_heads gives each head score_head's bits on any thread count") {
  // 13 random heads of different sizes, some continuing sums over appended rows, scored one after another
  // and then spread over 1, 2 and 3 threads on every ISA
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.01f, 1.0f);
  const int T = 40;
  std::vector<std::vector<float>> w;
  std::vector<int> ids;
  for (int i = 0; i < T; ++i) ids.push_back(i % 5);
  for (int h = 0; h < 13; ++h) w.push_back(causal(T, [&](int, int) { return u(rng); }));
  const auto view = [&](int h) {
    return WeightsView{w[static_cast<std::size_t>(h)].data(), T - h, T - h, T, 1.0f};
  };
  const auto same = [](const HeadScores& a, const HeadScores& b) {
    return a.previous == b.previous && a.first == b.first && a.self == b.self && a.broad == b.broad &&
           a.induction == b.induction && a.induction_defined == b.induction_defined && a.kind == b.kind;
  };
  std::vector<HeadScores> want;
  for (int h = 0; h < 13; ++h) want.push_back(attnviz::score_head(view(h), ids));
  for (const Isa isa : {Isa::scalar, Isa::automatic})
    for (int threads : {1, 2, 3}) {
      CAPTURE(threads);
      std::vector<attnviz::HeadSums> sums(13);
      // the odd heads have their first 7 rows summed already, as after an earlier keystroke
      for (int h = 1; h < 13; h += 2)
        attnviz::score_head(WeightsView{w[static_cast<std::size_t>(h)].data(), 7, 7, T, 1.0f}, ids,
                            sums[static_cast<std::size_t>(h)]);
      std::vector<HeadScores> got(13);
      std::vector<attnviz::HeadTask> tasks;
      for (int h = 0; h < 13; ++h)
        tasks.push_back({view(h), h == 12 ? nullptr : &sums[static_cast<std::size_t>(h)],
                         &got[static_cast<std::size_t>(h)]});
      attnviz::score_heads(tasks, ids, Exec{isa, threads});
      for (int h = 0; h < 13; ++h) {
        CAPTURE(h);
        CHECK(same(got[static_cast<std::size_t>(h)], want[static_cast<std::size_t>(h)]));
        if (h < 12 && T - h >= 2) CHECK(sums[static_cast<std::size_t>(h)].rows == T - h);
      }
    }
  attnviz::score_heads({}, ids, Exec{});  // nothing to score
}

TEST_CASE("head kinds: the engine's weights score as their definitions") {
  Config c;
  apply(*find_preset("book"), c);
  c.variant = Variant::mha;
  c.num_heads = 2;
  c.d_out = 4;
  c.dropout = 0.0;
  Result r;
  REQUIRE(run_text(c, kDefaultText, r).is_ok());
  const int T = r.tokens_count();
  REQUIRE(T == 6);
  for (int h = 0; h < 2; ++h) {
    const HeadScores s = score_head(stage_matrix(r, StageId::weights, h), distinct_ids(T));
    double previous = 0, first = 0, self = 0;
    for (int i = 1; i < T; ++i) {
      previous += r.weights.at(h, i, i - 1);
      first += r.weights.at(h, i, 0);
      self += r.weights.at(h, i, i);
    }
    CHECK(s.previous == doctest::Approx(previous / (T - 1)).epsilon(1e-6));
    CHECK(s.first == doctest::Approx(first / (T - 1)).epsilon(1e-6));
    CHECK(s.self == doctest::Approx(self / (T - 1)).epsilon(1e-6));
    CHECK(s.broad > 0.0f);
    CHECK(s.broad <= 1.0f);
  }
}

TEST_CASE("thumbnail: average pooling over the unmasked cells") {
  SUBCASE("5x5 causal by 2 into 3x3, by hand") {
    std::vector<float> w(25);
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j)
        w[static_cast<std::size_t>(i * 5 + j)] = j > i ? -100.0f : static_cast<float>(10 * i + j);
    const MatrixDesc t = thumbnail(wrap(w, 5), 3);
    REQUIRE(t.rows == 3);
    REQUIRE(t.cols == 3);
    CHECK_FALSE(t.causal);
    const bool owns = t.owned != nullptr && t.data == t.owned->data() && t.keep == nullptr;
    CHECK(owns);
    CHECK(t.at(0, 0) == doctest::Approx((0 + 10 + 11) / 3.0).epsilon(1e-6));  // (0, 1) is masked
    CHECK(t.at(1, 0) == doctest::Approx((20 + 21 + 30 + 31) / 4.0).epsilon(1e-6));
    CHECK(t.at(1, 1) == doctest::Approx((22 + 32 + 33) / 3.0).epsilon(1e-6));  // (2, 3) is masked
    CHECK(t.at(2, 0) == doctest::Approx(40.5).epsilon(1e-6));                  // row 4 only
    CHECK(t.at(2, 1) == doctest::Approx(42.5).epsilon(1e-6));
    CHECK(t.at(2, 2) == 44.0f);  // the corner cell alone
    CHECK(std::isnan(t.at(0, 1)));
    CHECK(std::isnan(t.at(0, 2)));
    CHECK(std::isnan(t.at(1, 2)));
    // colorize draws NaN in the masked colour.
    std::vector<std::uint32_t> px;
    colorize(t, ColorOptions{}, Range{}, px);
    REQUIRE(px.size() == 9u);
    CHECK(px[1] == kMaskedColor);
    CHECK(px[5] == kMaskedColor);
    CHECK(px[0] != kMaskedColor);
  }
  SUBCASE("small enough: the matrix itself") {
    std::vector<float> w(25, 0.5f);
    const MatrixDesc m = wrap(w, 5);
    const MatrixDesc t = thumbnail(m, 5);
    CHECK(t.data == m.data);
    CHECK(t.rows == 5);
    CHECK(t.causal);
    CHECK(thumbnail(MatrixDesc{}, 4).empty());
  }
  SUBCASE("sizes") {
    const std::vector<float> ones(1024 * 1024, 1.0f);
    const MatrixDesc big = thumbnail(wrap(ones, 1024), 128);
    CHECK(big.rows == 128);
    CHECK(big.cols == 128);
    // An all-ones causal matrix pools to 1 wherever a block has an unmasked cell, NaN above the diagonal.
    int ones_seen = 0, nans = 0;
    for (int i = 0; i < big.rows; ++i)
      for (int j = 0; j < big.cols; ++j) {
        if (j > i) {
          nans += std::isnan(big.at(i, j)) ? 1 : 0;
        } else {
          ones_seen += big.at(i, j) == 1.0f ? 1 : 0;
        }
      }
    CHECK(ones_seen == 128 * 129 / 2);
    CHECK(nans == 128 * 127 / 2);
    CHECK(thumbnail(wrap(ones, 1000), 128).rows == 125);  // f = 8
    const MatrixDesc wide = thumbnail(wrap(ones, 6, 1024, false), 128);
    CHECK(wide.rows == 1);
    CHECK(wide.cols == 128);
    CHECK(wide.at(0, 127) == 1.0f);
    const MatrixDesc dot = thumbnail(wrap(ones, 3, 3), 0);  // max_side < 1 counts as 1: f = 3
    CHECK(dot.rows == 1);
    CHECK(dot.cols == 1);
    CHECK(dot.at(0, 0) == 1.0f);
  }
  SUBCASE("NaN sources carry no value; the multiplier applies") {
    std::vector<float> w = {1.0f, kNaN, 3.0f, 5.0f};
    MatrixDesc m = wrap(w, 2, 2, false);
    m.multiplier = 2.0f;
    const MatrixDesc t = thumbnail(m, 1);
    REQUIRE(t.rows == 1);
    CHECK(t.at(0, 0) == doctest::Approx(6.0).epsilon(1e-6));  // (2 + 6 + 10) / 3
  }
}
