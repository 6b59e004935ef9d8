// The UI's model, without any window: stage descriptors, colours, aggregates, explanations, the session and
// exports, against the engine's own tensors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "attnviz/engine.hpp"
#include "attnviz/viz/colorize.hpp"
#include "attnviz/viz/explain.hpp"
#include "attnviz/viz/export.hpp"
#include "attnviz/viz/palette.hpp"
#include "attnviz/viz/session.hpp"
#include "attnviz/viz/stages.hpp"

#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#include <stb/stb_image.h>

using namespace attnviz;
using namespace attnviz::viz;

namespace {

Result book_result(Variant v = Variant::mha, double dropout = 0.0, bool train = true) {
  Config c;
  apply(*find_preset("book"), c);
  c.variant = v;
  c.dropout = dropout;
  c.train = train;
  Result r;
  REQUIRE(run_text(c, kDefaultText, r).is_ok());
  return r;
}

std::filesystem::path temp_dir(const char* name) {
  const auto dir = std::filesystem::temp_directory_path() / (std::string("attnviz_viz_") + name);
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace

TEST_CASE("palettes: matplotlib's end points, linear in between, NaN is the masked colour") {
  CHECK(color_at(Palette::viridis, 0.0f) == rgba(0x44, 0x01, 0x54));
  CHECK(color_at(Palette::viridis, 1.0f) == rgba(0xFD, 0xE7, 0x25));
  CHECK(color_at(Palette::cividis, 0.0f) == rgba(0x00, 0x22, 0x4E));
  CHECK(color_at(Palette::cividis, 1.0f) == rgba(0xFE, 0xE8, 0x38));
  CHECK(color_at(Palette::viridis, -3.0f) == color_at(Palette::viridis, 0.0f));  // clamped
  CHECK(color_at(Palette::viridis, 7.0f) == color_at(Palette::viridis, 1.0f));
  CHECK(color_at(Palette::diverging, 0.5f) == rgba(0xF7, 0xF7, 0xF7));  // white at the centre
  CHECK(color_at(Palette::blues, std::nanf("")) == kMaskedColor);
  // Halfway between two anchors is the mean of their channels.
  const std::uint32_t mid = color_at(Palette::viridis, 1.0f / 32.0f);
  CHECK((mid & 0xFF) == (0x44 + 0x48 + 1) / 2);
  for (Palette p : all_palettes()) CHECK(parse_palette(to_string(p)) == p);
  CHECK_FALSE(parse_palette("rainbow"));
}

TEST_CASE("palettes: a row's colours are color_at's, each channel its anchors' blend rounded half away") {
  // The reference rounds with std::lround; the 17 anchors are color_at at k / 16 (no blend there).
  const int n = 200001;
  std::vector<float> t(static_cast<std::size_t>(n) + 1);
  for (int j = 0; j < n; ++j) t[static_cast<std::size_t>(j)] = -0.1f + 1.2f * static_cast<float>(j) / (n - 1);
  t.back() = std::nanf("");
  for (Palette p : all_palettes()) {
    CAPTURE(to_string(p));
    std::uint32_t anchor[17];
    for (int k = 0; k <= 16; ++k) anchor[k] = color_at(p, static_cast<float>(k) / 16.0f);
    std::vector<std::uint32_t> row(t.size());
    color_row(p, t.data(), static_cast<int>(t.size()), row.data());
    int wrong = 0;
    for (std::size_t j = 0; j < t.size(); ++j) {
      std::uint32_t want = kMaskedColor;
      if (!std::isnan(t[j])) {
        const float x = std::fmin(std::fmax(t[j], 0.0f), 1.0f) * 16.0f;
        const int i = std::min(static_cast<int>(x), 15);
        const float f = x - static_cast<float>(i);
        unsigned ch[3];
        for (int c = 0; c < 3; ++c) {
          const float lo = static_cast<float>((anchor[i] >> (8 * c)) & 0xFFu);
          const float hi = static_cast<float>((anchor[i + 1] >> (8 * c)) & 0xFFu);
          ch[c] = static_cast<unsigned>(std::lround(lo + (hi - lo) * f));
        }
        want = rgba(ch[0], ch[1], ch[2]);
      }
      if (row[j] != want || color_at(p, t[j]) != want) ++wrong;
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("colorize: every texel is the cell's own colour, over random matrices, masks, ranges and options") {
  // The reference takes each cell alone, through the public per-cell steps (masked, dropped, at, normalize,
  // color_at) and ranges widened cell by cell, so that colorize's row loops and row_range's run are held to
  // them: causal masks with and without windows, dropout, NaN, infinities, signed zeros and huge values.
  std::uint32_t seed = 2463534242u;  // xorshift32
  const auto next = [&] {
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    return seed;
  };
  const auto uniform = [&] { return static_cast<float>(next() % 2000001u) / 1e6f - 1.0f; };
  const float kInf = std::numeric_limits<float>::infinity(), kNaN = std::nanf("");
  const float specials[] = {kNaN, kInf, -kInf, 0.0f, -0.0f, 3e38f, -3e38f, 1e-40f};
  const auto reference_range = [](const MatrixDesc& m, int i0, int i1) {
    Range r{std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
    for (int i = i0; i < i1; ++i)
      for (int j = 0; j < m.cols; ++j) {
        const float x = m.at(i, j);
        if (m.masked(i, j) || m.dropped(i, j) || !std::isfinite(x)) continue;
        r.lo = std::min(r.lo, x);
        r.hi = std::max(r.hi, x);
      }
    return r;
  };
  const auto same = [](Range a, Range b) {
    return std::memcmp(&a.lo, &b.lo, sizeof(float)) == 0 && std::memcmp(&a.hi, &b.hi, sizeof(float)) == 0;
  };
  int cases = 0, wrong_texels = 0, wrong_ranges = 0;
  for (int c = 0; c < 3000; ++c) {
    MatrixDesc m;
    m.rows = 1 + static_cast<int>(next() % 24);
    m.cols = 1 + static_cast<int>(next() % 24);
    m.row_stride = m.cols + static_cast<int>(next() % 3);
    m.causal = next() % 2 == 0;
    m.window = m.causal && next() % 2 == 0 ? 1 + static_cast<int>(next() % 6) : 0;
    const float multipliers[] = {1.0f, 0.125f, -2.0f};
    m.multiplier = multipliers[next() % 3];
    std::vector<float> data(static_cast<std::size_t>(m.rows) * static_cast<std::size_t>(m.row_stride));
    for (float& x : data) x = next() % 10 == 0 ? specials[next() % 8] : uniform();
    if (next() % 7 == 0) std::fill(data.begin(), data.end(), 0.25f);  // one value: an empty range
    std::vector<std::uint8_t> keep(static_cast<std::size_t>(m.rows) * static_cast<std::size_t>(m.cols));
    for (std::uint8_t& k : keep) k = next() % 3 != 0;
    m.data = data.data();
    if (next() % 3 == 0) m.keep = keep.data();
    ColorOptions o;
    o.palette = all_palettes()[next() % all_palettes().size()];
    o.norm = all_norms()[next() % all_norms().size()];
    o.centered = next() % 2 == 0;
    const Range ranges[] = {{0.0f, 1.0f},  {-0.5f, 0.5f}, {0.25f, 0.25f}, {1.0f, -1.0f},
                            {-kInf, 0.5f}, {0.0f, kInf},  {-0.0f, 0.0f},  {kInf, -kInf}};
    o.fixed = ranges[next() % 8];
    const Range shared = ranges[next() % 8];
    std::vector<std::uint32_t> px;
    colorize(m, o, shared, px);
    ++cases;
    if (px.size() !=
        data.size() / static_cast<std::size_t>(m.row_stride) * static_cast<std::size_t>(m.cols)) {
      ++wrong_texels;
      continue;
    }
    const Range head = reference_range(m, 0, m.rows);
    if (!same(finite_range(m), head)) ++wrong_ranges;
    for (int i = 0; i < m.rows; ++i) {
      const Range row = reference_range(m, i, i + 1);
      if (!same(row_range(m, i), row)) ++wrong_ranges;
      const Range r = o.norm == Norm::head    ? head
                      : o.norm == Norm::row   ? row
                      : o.norm == Norm::fixed ? o.fixed
                                              : shared;
      for (int j = 0; j < m.cols; ++j) {
        std::uint32_t want =
            m.masked(i, j) ? kMaskedColor : color_at(o.palette, normalize(m.at(i, j), r, o.centered));
        if (m.dropped(i, j)) want = kDroppedColor;
        if (px[static_cast<std::size_t>(i * m.cols + j)] != want) ++wrong_texels;
      }
    }
  }
  CHECK(cases == 3000);
  CHECK(wrong_ranges == 0);
  CHECK(wrong_texels == 0);
}

TEST_CASE("labels thin in 1-2-5 steps so they never overlap") {
  CHECK(label_step(20.0f, 15.0f) == 1);
  CHECK(label_step(10.0f, 15.0f) == 2);
  CHECK(label_step(4.0f, 15.0f) == 5);
  CHECK(label_step(0.5f, 15.0f) == 50);
  CHECK(label_step(0.0f, 15.0f) > 1000000);
  for (float cell : {0.3f, 1.0f, 2.7f, 9.0f, 31.0f})
    CHECK(static_cast<float>(label_step(cell, 15.0f)) * cell >= 15.0f);
}

TEST_CASE("stage descriptors read the engine's tensors") {
  const Result r = book_result();
  const int T = r.tokens_count();
  REQUIRE(T == 6);
  const MatrixDesc w1 = stage_matrix(r, StageId::weights, 1);
  REQUIRE(w1.rows == T);
  REQUIRE(w1.cols == T);
  CHECK(w1.causal);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j) CHECK(w1.at(i, j) == r.weights.at(1, i, j));

  const MatrixDesc scaled = stage_matrix(r, StageId::scaled, 0);
  const MatrixDesc masked = stage_matrix(r, StageId::masked, 0);
  CHECK_FALSE(scaled.causal);
  for (int i = 0; i < T; ++i) {
    for (int j = 0; j < T; ++j) {
      CHECK(scaled.at(i, j) == doctest::Approx(r.scores.at(0, i, j) * r.shape.scale).epsilon(1e-6));
      if (j > i)
        CHECK(std::isinf(masked.at(i, j)));
      else
        CHECK(masked.at(i, j) == doctest::Approx(scaled.at(i, j)).epsilon(1e-6));
    }
  }
  // Head 1's queries are columns [hd, 2 hd) of q.
  const MatrixDesc q1 = stage_matrix(r, StageId::queries, 1);
  CHECK(q1.cols == r.shape.head_dim);
  CHECK_FALSE(q1.square);
  for (int i = 0; i < T; ++i) CHECK(q1.at(i, 0) == r.q.at(i, r.shape.head_dim));
  // Shared stages have one matrix.
  CHECK(stage_heads(r, StageId::output) == 1);
  CHECK(stage_heads(r, StageId::weights) == 2);
  CHECK(stage_matrix(r, StageId::output, 1).empty());
  CHECK(stage_info(r, StageId::weights).shape == "(b, H, T, T) = (1, 2, 6, 6)");

  const std::vector<ShapeStep> strip = shape_strip(r);
  REQUIRE(strip.size() == 9);  // x, projections, split, scores, mask, softmax, context, merge, out_proj
  CHECK(strip.front().shape == "(1, 6, 3)");
  CHECK(strip.back().label == "out_proj");
}

TEST_CASE("stages a variant does not have are explained, not shown") {
  const Result simple = book_result(Variant::simplified);
  CHECK_FALSE(stage_info(simple, StageId::queries).available);
  CHECK(stage_info(simple, StageId::queries).why_not.find("no weights") != std::string::npos);
  CHECK_FALSE(stage_info(simple, StageId::scaled).available);
  CHECK_FALSE(stage_info(simple, StageId::masked).available);
  CHECK(stage_matrix(simple, StageId::queries, 0).empty());
  CHECK(stage_info(simple, StageId::scores).formula == "x x^T");

  CHECK_FALSE(stage_info(book_result(Variant::mha, 0.5, false), StageId::dropped).available);
  CHECK(stage_info(book_result(Variant::mha, 0.5, false), StageId::dropped).why_not.find("eval") !=
        std::string::npos);
  CHECK_FALSE(stage_info(book_result(Variant::self_v2, 0.5), StageId::dropped).available);
  CHECK(stage_info(book_result(Variant::causal, 0.5), StageId::dropped).available);
}

TEST_CASE("dropout cells: dropped ones are flagged, kept ones carry the 1/(1-p) rescale") {
  const Result r = book_result(Variant::mha, 0.5);
  const MatrixDesc d = stage_matrix(r, StageId::dropped, 0);
  REQUIRE(d.keep != nullptr);
  int dropped = 0, kept = 0;
  for (int i = 0; i < d.rows; ++i)
    for (int j = 0; j <= i; ++j) {
      if (d.dropped(i, j)) {
        ++dropped;
        CHECK(d.at(i, j) == 0.0f);
      } else {
        ++kept;
        CHECK(d.at(i, j) == doctest::Approx(r.weights.at(0, i, j) * 2.0f).epsilon(1e-6));
        const CellExplain e = explain(r, StageId::dropped, 0, i, j);
        CHECK(e.keep_scale == doctest::Approx(2.0));
      }
    }
  CHECK(dropped > 0);
  CHECK(kept > 0);
}

TEST_CASE("colorize: ranges per head, per row, shared and fixed, and masked and dropped colours") {
  const Result r = book_result(Variant::mha, 0.5);
  const MatrixDesc w = stage_matrix(r, StageId::weights, 0);
  std::vector<std::uint32_t> px;
  ColorOptions o;
  o.palette = Palette::viridis;
  colorize(w, o, {}, px);
  REQUIRE(px.size() == 36u);
  CHECK(px[0 * 6 + 0] ==
        color_at(Palette::viridis, 1.0f));  // row 0 attends only to itself: weight 1, the max
  CHECK(px[0 * 6 + 5] == kMaskedColor);
  const Range range = finite_range(w);
  CHECK(range.hi == 1.0f);
  CHECK(range.lo > 0.0f);
  // Per row: every row's largest unmasked weight is the top colour.
  o.norm = Norm::row;
  colorize(w, o, {}, px);
  for (int i = 0; i < 6; ++i) {
    int best = 0;
    for (int j = 1; j <= i; ++j)
      if (w.at(i, j) > w.at(i, best)) best = j;
    CHECK(px[static_cast<std::size_t>(i * 6 + best)] == color_at(Palette::viridis, i == 0 ? 0.5f : 1.0f));
  }
  // Fixed range [0, 2]: weight 1 sits in the middle.
  o.norm = Norm::fixed;
  o.fixed = {0.0f, 2.0f};
  colorize(w, o, {}, px);
  CHECK(px[0] == color_at(Palette::viridis, 0.5f));
  // Dropout stage: dropped cells have their own colour.
  const MatrixDesc d = stage_matrix(r, StageId::dropped, 0);
  o.norm = Norm::head;
  colorize(d, o, {}, px);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j <= i; ++j)
      if (d.dropped(i, j)) CHECK(px[static_cast<std::size_t>(i * 6 + j)] == kDroppedColor);
  // Centred: zero is the middle colour whatever the range.
  CHECK(normalize(0.0f, {-1.0f, 3.0f}, true) == doctest::Approx(0.5f));
  CHECK(normalize(3.0f, {-1.0f, 3.0f}, true) == doctest::Approx(1.0f));
  CHECK(std::isnan(normalize(-HUGE_VALF, {0.0f, 1.0f}, false)));
}

TEST_CASE("aggregates: mean and max over all heads or a subset, and differences") {
  Config c;
  apply(*find_preset("book"), c);
  c.num_heads = 3;
  c.d_out = 6;
  Result r;
  REQUIRE(run_text(c, kDefaultText, r).is_ok());
  const MatrixDesc mean = aggregate(r, StageId::weights, Aggregate::mean, {});
  const MatrixDesc max02 = aggregate(r, StageId::weights, Aggregate::max, {0, 2});
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      const float a = r.weights.at(0, i, j), b = r.weights.at(1, i, j), cc = r.weights.at(2, i, j);
      CHECK(mean.at(i, j) == doctest::Approx((a + b + cc) / 3.0f).epsilon(1e-6));
      CHECK(max02.at(i, j) == std::max(a, cc));
    }
  const MatrixDesc copy = mean;  // descriptors share their storage safely
  CHECK(copy.at(3, 1) == mean.at(3, 1));
  // Rows of a mean of softmaxes still sum to 1.
  for (int i = 0; i < 6; ++i) {
    double s = 0;
    for (int j = 0; j < 6; ++j) s += mean.at(i, j);
    CHECK(s == doctest::Approx(1.0).epsilon(1e-6));
  }
  const MatrixDesc d = difference(stage_matrix(r, StageId::weights, 0), stage_matrix(r, StageId::weights, 1));
  CHECK(d.at(4, 2) == r.weights.at(0, 4, 2) - r.weights.at(1, 4, 2));
}

TEST_CASE("explain: the dot product, the scale and the softmax normalizer reproduce the engine's cell") {
  Config c;
  apply(*find_preset("gpt2-small"), c);
  c.dropout = 0.0;
  Result r;
  REQUIRE(run_text(c, "the quick brown fox jumps over the lazy dog", r).is_ok());
  const CellExplain e = explain(r, StageId::weights, 5, 6, 3);
  REQUIRE(e.valid);
  CHECK(e.terms.size() == 64u);
  CHECK(e.row_token == "the");
  CHECK(e.col_token == "fox");
  CHECK(e.dot == doctest::Approx(r.scores.at(5, 6, 3)).epsilon(1e-4));
  CHECK(e.scale == doctest::Approx(0.125f));
  CHECK(e.weight == doctest::Approx(r.weights.at(5, 6, 3)).epsilon(1e-5));
  CHECK(e.value == r.weights.at(5, 6, 3));
  // A masked cell says so.
  const CellExplain m = explain(r, StageId::masked, 0, 2, 6);
  CHECK(m.masked);
  CHECK(std::isinf(m.value));
  CHECK(m.text.find("-inf") != std::string::npos);
  CHECK_FALSE(explain(r, StageId::weights, 0, 9, 0).valid);  // out of range
}

TEST_CASE("session: live recompute, the last good view kept on bad input, parameters cached") {
  Session s;
  REQUIRE(s.recompute().is_ok());
  CHECK(s.result().tokens_count() == 6);
  const int gen = s.generation();
  const float w = s.result().weights.at(0, 3, 1);

  // Same numbers as the one-call engine for the same configuration and seed, dropout included.
  s.config.dropout = 0.3;
  REQUIRE(s.recompute().is_ok());
  Result ref;
  REQUIRE(run_text(s.config, s.text, ref).is_ok());
  CHECK(s.result().dropped == ref.dropped);
  CHECK(s.result().output.data == ref.output.data);
  s.config.dropout = 0.0;
  REQUIRE(s.recompute().is_ok());

  s.text = "Your journey starts with one step today";  // a keystroke: parameters are not drawn again
  REQUIRE(s.recompute().is_ok());
  CHECK(s.params_ms() == 0.0);
  CHECK(s.result().tokens_count() == 7);

  for (const char* bad : {"", "   ", "caf\xC3"}) {
    s.text = bad;
    const int before = s.generation();
    CHECK_FALSE(s.recompute().is_ok());
    CHECK_FALSE(s.error().empty());
    CHECK(s.generation() == before);
    CHECK(s.result().tokens_count() == 7);  // still the last good view
  }
  s.text = kDefaultText;
  s.config.num_heads = 4;  // d_out 2 does not split into 4 heads
  CHECK_FALSE(s.recompute().is_ok());
  CHECK(s.error().find("divisible") != std::string::npos);
  s.config.num_heads = 2;
  s.config.context_length = 4;  // 6 tokens do not fit
  CHECK_FALSE(s.recompute().is_ok());
  CHECK(s.error().find("context") != std::string::npos);
  s.config.context_length = 1024;
  REQUIRE(s.recompute().is_ok());
  CHECK(s.error().empty());
  CHECK(s.generation() > gen);
  CHECK(s.result().weights.at(0, 3, 1) == w);
}

namespace {

// An offload that computes nothing until told: finish() fills the job from the one-call engine (what a real
// backend must match) and delivers it.
struct FakeOffload : Offload {
  Session* session = nullptr;
  bool want = true;
  int started = 0, ticket = 0;
  Config config;
  Result* job = nullptr;
  bool wants(const Config&, int) override { return want; }
  void start(int t, const Config& c, const Params&, int, Result& r) override {
    ++started;
    ticket = t, config = c, job = &r;
  }
  void finish(Status outcome = Status::ok()) {
    Result full;
    Input in{job->tokens, job->inputs};
    REQUIRE(run(config, in, full).is_ok());
    CHECK(job->keep == full.keep);  // begin_forward drew the mask forward() draws
    for (auto [dst, src] : {std::pair{&job->scores, &full.scores},
                            {&job->scaled, &full.scaled},
                            {&job->weights, &full.weights},
                            {&job->dropped, &full.dropped}})
      *dst = *src;
    for (auto [dst, src] : {std::pair{&job->q, &full.q},
                            {&job->k, &full.k},
                            {&job->v, &full.v},
                            {&job->context, &full.context},
                            {&job->output, &full.output}})
      *dst = *src;
    job->backend = "fake";
    session->deliver(ticket, outcome, 1.5);
  }
};

}  // namespace

TEST_CASE(
    "session: an offloaded job lands later, edits meanwhile follow it, and failure falls back with a note") {
  Session s;
  s.config.dropout = 0.25;
  REQUIRE(s.recompute().is_ok());  // on the CPU: no offload yet
  FakeOffload fake;
  fake.session = &s;
  s.offload = &fake;
  const int gen = s.generation();

  s.text = "Your journey starts";
  REQUIRE(s.recompute().is_ok());
  CHECK(s.computing());
  CHECK(fake.started == 1);
  CHECK(s.generation() == gen);  // the view keeps the last result meanwhile
  s.text = "Your journey starts with one step today";
  REQUIRE(s.recompute().is_ok());
  CHECK(fake.started == 1);  // one job at a time

  fake.finish();  // lands (3 tokens), and the edit made meanwhile goes out at once
  CHECK(s.generation() == gen + 1);
  CHECK(s.result().tokens_count() == 3);
  CHECK(s.result().seconds == doctest::Approx(1.5e-3));
  CHECK(fake.started == 2);
  CHECK(s.computing());
  fake.finish();
  CHECK_FALSE(s.computing());
  CHECK(s.result().tokens_count() == 7);
  CHECK(s.result().backend == "fake");
  Result ref;
  REQUIRE(run_text(s.config, s.text, ref).is_ok());
  CHECK(s.result().output.data == ref.output.data);
  CHECK(s.result().dropped == ref.dropped);
  CHECK(s.note().empty());

  // A job overtaken by a result computed here is dropped when it lands.
  s.text = "one";
  REQUIRE(s.recompute().is_ok());
  fake.want = false;
  s.text = "one two";
  REQUIRE(s.recompute().is_ok());
  CHECK(s.result().tokens_count() == 2);
  const int after_cpu = s.generation();
  fake.finish();
  CHECK(s.generation() == after_cpu);
  CHECK(s.result().tokens_count() == 2);

  // A failed job: the CPU computes the view, and the note says why.
  fake.want = true;
  s.text = "one two three";
  REQUIRE(s.recompute().is_ok());
  fake.finish(Status::fail("WebGPU: the device was lost"));
  CHECK_FALSE(s.computing());
  CHECK(s.result().tokens_count() == 3);
  CHECK(s.result().backend.empty());
  CHECK(s.note().find("device was lost") != std::string::npos);
  CHECK(s.generation() == after_cpu + 1);
  fake.want = false;  // a view computed here by choice clears the note
  s.text = "one two three four";
  REQUIRE(s.recompute().is_ok());
  CHECK(s.note().empty());
}

TEST_CASE("exports: CSV per head, PNG per head, JSON in the CLI's format") {
  Session s;
  REQUIRE(s.recompute().is_ok());
  const Result& r = s.result();
  const auto dir = temp_dir("export");
  Written w;
  REQUIRE(export_csv(dir.string(), "t", r, StageId::weights, w).is_ok());
  REQUIRE(w.paths.size() == 2u);
  std::ifstream f(w.paths[1]);
  std::string header, line;
  std::getline(f, header);
  CHECK(header == "token,Your,journey,starts,with,one,step");
  for (int i = 0; i < 4; ++i) std::getline(f, line);  // row 3: "with"
  std::stringstream ss(line);
  std::string cell;
  std::getline(ss, cell, ',');
  CHECK(cell == "with");
  for (int j = 0; j < 6; ++j) {
    std::getline(ss, cell, ',');
    CHECK(std::stof(cell) == r.weights.at(1, 3, j));  // %.9g reads back to the same float
  }

  // The panel's "PNG heads" size: short sentences get the largest cells, long ones at least a pixel.
  CHECK(default_cell_px(6, 6) == kMaxCellPx);
  CHECK(default_cell_px(256, 256) == 2);
  CHECK(default_cell_px(4096, 4096) == 1);
  REQUIRE(
      export_png(dir.string(), "t", r, StageId::weights, ColorOptions{}, default_cell_px(6, 6), w).is_ok());
  CHECK_FALSE(export_png(dir.string(), "t", r, StageId::weights, ColorOptions{}, kMaxCellPx + 1, w).is_ok());
  REQUIRE(export_png(dir.string(), "t", r, StageId::weights, ColorOptions{}, 10, w).is_ok());
  int iw = 0, ih = 0, n = 0;
  unsigned char* px = stbi_load(w.paths.back().c_str(), &iw, &ih, &n, 4);
  REQUIRE(px != nullptr);
  CHECK(iw == 60);
  CHECK(ih == 60);
  // Cell (0, 0) (weight 1, the top of the range) is the palette's last colour; cell (0, 5) is masked.
  const std::uint32_t top = color_at(Palette::blues, 1.0f);
  CHECK(px[0] == (top & 0xFF));
  CHECK(px[(5 * 60 + 55) * 4] == (kMaskedColor & 0xFF));
  stbi_image_free(px);

  REQUIRE(export_json(dir.string(), "t", r, s.params(), w).is_ok());
  std::ifstream jf(w.paths.back());
  const nlohmann::json j = nlohmann::json::parse(jf);
  CHECK(j.at("tokens").size() == 6u);
  CHECK(j.at("heads").size() == 2u);
  CHECK(j.at("params").contains("W_query.weight"));

  CHECK_FALSE(export_csv(dir.string(), "t", r, StageId::dropped, w).is_ok());  // no dropout in this view
  CHECK_FALSE(
      export_png("/proc/attnviz-cannot-write", "t", r, StageId::weights, ColorOptions{}, 4, w).is_ok());
  std::filesystem::remove_all(dir);
}

TEST_CASE("exports: a PNG that cannot be written is an error, not a short file") {
  // stbi_write_png ignored failed writes: onto /dev/full (a full disk) the Export panel said "wrote ...".
  const std::vector<std::uint32_t> rgba(64 * 64, 0xFF336699u);
  const Status full = write_png("/dev/full", 64, 64, rgba);
  CHECK(full.error == "cannot write '/dev/full': No space left on device");
  CHECK_FALSE(write_png("/nonexistent-folder/a.png", 64, 64, rgba).is_ok());
  const std::string path = (std::filesystem::temp_directory_path() / "attnviz_write_png.png").string();
  REQUIRE(write_png(path, 64, 64, rgba).is_ok());
  int w = 0, h = 0, n = 0;
  stbi_uc* px = stbi_load(path.c_str(), &w, &h, &n, 4);
  REQUIRE(px != nullptr);
  CHECK(w == 64);
  CHECK(h == 64);
  CHECK(px[0] == 0x99);  // R is the texel's low byte
  CHECK(px[2] == 0x33);
  stbi_image_free(px);
  std::filesystem::remove(path);
}
