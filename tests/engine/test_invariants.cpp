// Properties every result must have, whatever the configuration, and the engine's bad-input answers.
#include <doctest/doctest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>

#include "attnviz/engine.hpp"
#include "check.hpp"

using namespace attnviz;
using attnviz::test::random_input;

namespace {

Config make(Variant v, int d_in, int d_out, int heads, double p, bool bias = false) {
  Config c;
  c.variant = v;
  c.d_in = d_in, c.d_out = d_out, c.num_heads = heads, c.dropout = p, c.qkv_bias = bias;
  return c;
}

}  // namespace

TEST_CASE("invariants: rows sum to 1, masked cells are exactly 0, dropout keeps 1/(1-p)") {
  for (Variant v : all_variants()) {
    for (double p : {0.0, 0.3}) {
      for (int T : {1, 5, 17}) {
        const int heads = (v == Variant::wrapper || v == Variant::mha) ? 3 : 1;
        const Config c = make(v, 7, 6, heads, p, true);
        const Input in = random_input(T, 7, static_cast<std::uint64_t>(T) * 31 + 1);
        Result r;
        REQUIRE(run(c, in, r).is_ok());
        CAPTURE(to_string(v));
        CAPTURE(p);
        CAPTURE(T);
        const Shape& s = r.shape;
        CHECK(s.causal == (v == Variant::causal || v == Variant::wrapper || v == Variant::mha));
        for (int h = 0; h < s.heads; ++h) {
          for (int i = 0; i < T; ++i) {
            double sum = 0;
            for (int j = 0; j < T; ++j) {
              const float w = r.weights.at(h, i, j);
              sum += w;
              if (r.masked(i, j)) {
                CHECK(w == 0.0f);
                CHECK(std::isinf(r.scaled.at(h, i, j)));
              } else {
                CHECK(r.scaled.at(h, i, j) == doctest::Approx(r.scores.at(h, i, j) * s.scale).epsilon(1e-6));
              }
              const float d = r.dropped.at(h, i, j);
              if (!s.dropout) {
                CHECK(d == w);
              } else {
                const bool kept = r.keep[(static_cast<std::size_t>(h) * T + i) * T + j] != 0;
                CHECK(d == (kept ? w * dropout_scale(c.dropout) : 0.0f));
              }
            }
            CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
          }
        }
        CHECK(s.dropout == (p > 0 && s.causal));
      }
    }
  }
}

TEST_CASE("dropout keeps its rate and scale on a large tensor, and eval mode turns it off") {
  Config c = make(Variant::mha, 16, 16, 4, 0.25);
  const Input in = random_input(64, 16, 3);
  Result r;
  REQUIRE(run(c, in, r).is_ok());
  double kept = 0;
  for (auto k : r.keep) kept += k;
  CHECK(kept / static_cast<double>(r.keep.size()) == doctest::Approx(0.75).epsilon(0.03));
  CHECK(dropout_scale(0.25) == doctest::Approx(4.0 / 3.0));
  c.train = false;
  Result e;
  REQUIRE(run(c, in, e).is_ok());
  CHECK(e.keep.empty());
  CHECK(e.dropped == e.weights);
}

TEST_CASE("a wrapper of H heads equals H causal modules built in a row") {
  // The wrapper draws head after head, so head h's parameters are what a causal module gets after h others.
  Config w = make(Variant::wrapper, 5, 3, 3, 0.0, true);
  const Input in = random_input(9, 5, 11);
  Result wr;
  Params wp;
  REQUIRE(run(w, in, wr, &wp).is_ok());
  TorchGenerator g(w.seed);
  Config one = make(Variant::causal, 5, 3, 1, 0.0, true);
  for (int h = 0; h < 3; ++h) {
    Params p;
    REQUIRE(build_params(one, g, p).is_ok());
    Result r;
    TorchGenerator unused(0);
    REQUIRE(forward(one, p, in, unused, r).is_ok());
    for (int i = 0; i < 9; ++i)
      for (int d = 0; d < 3; ++d) CHECK(wr.output.at(i, h * 3 + d) == r.output.at(i, d));
  }
}

TEST_CASE("stages not asked for are not kept") {
  Config c = make(Variant::mha, 8, 8, 2, 0.1);
  c.stages = 0;
  Result r;
  REQUIRE(run(c, random_input(4, 8, 1), r).is_ok());
  CHECK(r.scores.empty());
  CHECK(r.scaled.empty());
  CHECK(r.dropped.empty());
  CHECK(r.weights.size() == 2u * 4 * 4);
  CHECK(r.output.size() == 4u * 8);
}

TEST_CASE("bad configurations and inputs give a clear message") {
  const Input in = random_input(4, 3, 1);
  auto error_of = [&](const Config& c, const Input& input) {
    Result out;
    out.tokens = {"kept"};
    const Status st = run(c, input, out);
    CHECK(out.tokens == std::vector<std::string>{"kept"});  // a failed run leaves the old result alone
    return st.error;
  };
  CHECK(error_of(make(Variant::mha, 3, 7, 2, 0.0), in) == "d_out (7) must be divisible by num_heads (2)");
  CHECK(error_of(make(Variant::mha, 3, 4, 0, 0.0), in).find("num_heads") != std::string::npos);
  CHECK(error_of(make(Variant::causal, 0, 2, 1, 0.0), in).find("d_in") != std::string::npos);
  CHECK(error_of(make(Variant::causal, 3, -2, 1, 0.0), in).find("d_out") != std::string::npos);
  CHECK(error_of(make(Variant::causal, 3, 2, 1, 1.0), in) == "dropout must be in [0, 1) (got 1)");
  CHECK(error_of(make(Variant::causal, 3, 2, 1, -0.1), in) == "dropout must be in [0, 1) (got -0.1)");
  CHECK(error_of(make(Variant::causal, 3, 2, 1, NAN), in).find("dropout must be in [0, 1)") == 0);
  CHECK(error_of(make(Variant::causal, 4, 2, 1, 0.0), in) == "the inputs have 3 columns but d_in is 4");
  Config short_ctx = make(Variant::causal, 3, 2, 1, 0.0);
  short_ctx.context_length = 3;
  CHECK(error_of(short_ctx, in) == "the text has 4 tokens, more than the context length 3");
  Config huge = make(Variant::mha, 1600, 1600, 25, 0.0);
  huge.context_length = 60000;
  CHECK(validate(huge, 20000).error.find("GB of memory (parameters 81.9 MB, tensors ") != std::string::npos);

  // Inputs whose products overflow float32 are refused, not shown as NaN.
  Input big;
  REQUIRE(input_from_rows({{3e38, 3e38, 3e38}, {1, 2, 3}}, big).is_ok());
  CHECK(error_of(make(Variant::simplified, 3, 3, 1, 0.0), big).find("not finite") != std::string::npos);
  // Non-finite or out-of-range explicit inputs never reach the engine.
  Input bad;
  CHECK(input_from_rows({{1, NAN}}, bad).error == "input row 1, column 2 is not a finite float (nan)");
  CHECK(input_from_rows({{1, 1e300}}, bad).error.find("not a finite float") != std::string::npos);
  CHECK(input_from_rows({{1, 2}, {3}}, bad).error == "input row 2 has 1 numbers, row 1 has 2");
  CHECK(input_from_rows({}, bad).error.find("empty") != std::string::npos);
  // Every double that rounds to a finite float32 is an input: FLT_MAX as 9 digits (3.4028235e38, a little
  // above it) and up to half its last place beyond; from there on it rounds to infinity.
  Input edge;
  REQUIRE(input_from_rows({{3.4028235e38, -3.4028235e38, 0x1.fffffefffffffp+127}}, edge).is_ok());
  CHECK(edge.x.at(0, 0) == std::numeric_limits<float>::max());
  CHECK(edge.x.at(0, 1) == -std::numeric_limits<float>::max());
  CHECK(edge.x.at(0, 2) == std::numeric_limits<float>::max());
  CHECK(input_from_rows({{0x1.ffffffp+127}}, bad).error.find("not a finite float") != std::string::npos);
  CHECK(input_from_rows({{-3.4028236e38}}, bad).error.find("not a finite float") != std::string::npos);
}

TEST_CASE("memory: the parameters count in the engine's limit, and the count bounds every run") {
  // 16384 x 16384 is within the size limits, but the parameters and their packed copy need 8.6 GB: refused
  // before anything is drawn (build_params validates without tokens), as the app's fields may ask for it.
  const Config wide = make(Variant::mha, 16384, 16384, 1, 0.0);
  const Status st = validate(wide);
  CHECK(st.error.find("this configuration needs 8.6 GB of memory (parameters 8.6 GB, tensors 0 bytes)") == 0);
  Params p;
  TorchGenerator g(1);
  CHECK(build_params(wide, g, p).error == st.error);

  // The count is never below what a run holds: parameters (before packing) and every tensor kept.
  for (Variant v : all_variants())
    for (bool bias : {false, true})
      for (unsigned stages : {0u, unsigned{kStageAll}})
        for (Isa isa : {Isa::automatic, Isa::scalar}) {
          Config c = make(v, 13, 6, v == Variant::wrapper || v == Variant::mha ? 3 : 1, 0.2, bias);
          c.stages = stages;
          const Exec exec{isa, 2};
          const int T = 37;
          Result r;
          Params params;
          REQUIRE(run(c, random_input(T, 13, 5), r, &params, exec).is_ok());
          const RunMemory m = run_memory(c, T, exec);
          CAPTURE(std::string(to_string(v)));
          CAPTURE(stages);
          std::uint64_t weights = 0;
          for (const NamedTensor& t : state_dict(c, params)) weights += t.value.size();
          CHECK(weights == parameter_count(c));
          CHECK(4 * weights <= m.params);
          std::uint64_t kept = r.keep.size();
          for (const Tensor* t : {&r.inputs, &r.q, &r.k, &r.v, &r.context, &r.output}) kept += 4 * t->size();
          for (const HeadSquares* t : {&r.scores, &r.scaled, &r.weights, &r.dropped})
            kept += 4 * t->data.size();
          CHECK(kept <= m.tensors);
          CHECK(m.total() == m.params + m.tensors);
        }
  // Sizes no configuration reaches saturate instead of wrapping around to something small: 65536 heads of
  // INT_MAX x INT_MAX cells are 2^78 floats.
  const Config absurd = make(Variant::wrapper, 1, 1, 65536, 0.5);
  CHECK(run_memory(absurd, INT_MAX).tensors == UINT64_MAX);
  CHECK(run_memory(absurd, INT_MAX).total() == UINT64_MAX);
  CHECK(format_bytes(UINT64_MAX) == "18446744073.7 GB");
}

TEST_CASE("a result keeps no infinity or NaN in any stage") {
  // A raw score that overflows float32 in a masked cell only: q0 . k1 = 1e40, every other score 0. The
  // weights are exact, but the raw scores hold inf, which no JSON can carry: refused, naming the stage.
  Config c = make(Variant::causal, 2, 2, 1, 0.0);
  Params p;
  p.query.weight = Tensor(2, 2);
  p.query.weight.at(0, 0) = 1;
  p.key.weight = Tensor(2, 2);
  p.key.weight.at(0, 1) = p.key.weight.at(1, 0) = 1;
  p.value.weight = Tensor(2, 2);
  p.value.weight.at(0, 0) = p.value.weight.at(1, 1) = 1;
  Input in;
  REQUIRE(input_from_rows({{1e20, 0}, {0, 1e20}}, in).is_ok());
  for (Isa isa : {Isa::automatic, Isa::scalar}) {
    CAPTURE(std::string(to_string(isa)));
    Result r;
    TorchGenerator g(0);
    CHECK(forward(c, p, in, g, r, Exec{isa, 1}).error ==
          "the result is not finite (raw scores): the inputs are too large for float32 arithmetic");
    c.stages = kStageDropped;  // without the raw scores kept, the result is whole
    REQUIRE(forward(c, p, in, g, r, Exec{isa, 1}).is_ok());
    CHECK(r.weights.at(0, 0, 0) == 1.0f);
    CHECK(r.weights.at(0, 1, 0) == 0.5f);
    c.stages = kStageAll;
  }
}

TEST_CASE("presets: sizes as published, every head count divides d_out") {
  for (const Preset& p : presets()) {
    Config c;
    apply(p, c);
    CHECK(c.d_out % c.num_heads == 0);
    CHECK(c.context_length == 1024);
    CHECK(validate(c).is_ok());
    CHECK(preset_of(c) == &p);  // the sizes name the preset back
    c.num_heads = 1;
    CHECK(preset_of(c) == nullptr);
  }
  CHECK(find_preset("gpt2-small")->num_heads == 12);
  CHECK(find_preset("gpt2-medium")->num_heads == 16);
  CHECK(find_preset("gpt2-large")->num_heads == 20);
  CHECK(find_preset("gpt2-xl")->num_heads == 25);
  CHECK(shape_of([] {
          Config c;
          apply(*find_preset("gpt2-xl"), c);
          return c;
        }())
            .head_dim == 64);
  CHECK(find_preset("gpt3") == nullptr);
}
