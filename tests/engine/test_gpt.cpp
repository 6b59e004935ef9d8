// Whole GPT-2 models: sizes, packing, the fast kernels of every ISA against the scalar reference, the
// incremental path against full passes (bit for bit), and greedy generation.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "attnviz/gpt.hpp"
#include "check.hpp"

using namespace attnviz;

namespace {

GptConfig tiny(bool qkv_bias = false) {
  GptConfig c;
  c.vocab_size = 97, c.context_length = 40, c.d_model = 48, c.n_heads = 3, c.n_layers = 2;
  c.drop_rate = 0.1, c.qkv_bias = qkv_bias;
  return c;
}

GptModel seeded(const GptConfig& c, std::uint64_t seed, bool train, Isa isa) {
  GptOptions o;
  o.train = train;
  o.exec.isa = isa;
  o.exec.threads = 2;
  GptModel m;
  REQUIRE(seeded_gpt(c, seed, o, m).is_ok());
  return m;
}

std::vector<int> some_ids(int n, int vocab, unsigned seed) {
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<int>((seed * 2654435761u + 40503u * i) % vocab));
  return ids;
}

// One float or double, bit for bit (NaN equals the same NaN).
template <class T, class = std::enable_if_t<std::is_floating_point_v<T>>>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape == b.shape && a.size() == b.size() &&
         (a.empty() || std::memcmp(a.ptr(), b.ptr(), a.size() * sizeof(float)) == 0);
}

// The same cells, bit for bit, whatever the row strides (an incremental pass pads its rows).
bool same_bits(const HeadSquares& a, const HeadSquares& b) {
  if (a.heads != b.heads || a.n != b.n || a.empty() != b.empty()) return false;
  for (int h = 0; h < a.heads && !a.empty(); ++h)
    for (int i = 0; i < a.n; ++i)
      if (std::memcmp(a.row(h, i), b.row(h, i), static_cast<std::size_t>(a.n) * sizeof(float)) != 0)
        return false;
  return true;
}

void check_same(const GptResult& a, const GptResult& b) {
  CHECK(same_bits(a.logits, b.logits));
  REQUIRE(a.layers.size() == b.layers.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    INFO("layer " << l);
    const Result& x = a.layers[l].attention;
    const Result& y = b.layers[l].attention;
    CHECK(same_bits(x.weights, y.weights));
    CHECK(same_bits(x.scores, y.scores));
    CHECK(same_bits(x.scaled, y.scaled));
    CHECK(same_bits(x.dropped, y.dropped));
    CHECK(same_bits(x.q, y.q));
    CHECK(same_bits(x.k, y.k));
    CHECK(same_bits(x.v, y.v));
    CHECK(same_bits(x.context, y.context));
    CHECK(same_bits(x.output, y.output));
    CHECK(same_bits(x.inputs, y.inputs));
    CHECK(same_bits(a.layers[l].resid_in, b.layers[l].resid_in));
    CHECK(same_bits(a.layers[l].resid_out, b.layers[l].resid_out));
  }
  REQUIRE(a.next.size() == b.next.size());
  for (std::size_t i = 0; i < a.next.size(); ++i) CHECK(a.next[i].id == b.next[i].id);
}

// The panels' columns past `out` are zeros: the kernels multiply them like any other column. (Packing writes
// them into storage it does not zero first; ASan builds fill such small allocations with 0xbe.)
bool padding_is_zero(const PackedMatrix& m) {
  const int padded = (m.out + m.nr - 1) / m.nr * m.nr;
  for (int o = m.out; o < padded; ++o)
    for (int i = 0; i < m.in; ++i) {
      const float x = m.data.data()[static_cast<std::size_t>(o / m.nr) * m.in * m.nr +
                                    static_cast<std::size_t>(i) * m.nr + o % m.nr];
      if (x != 0.0f || std::signbit(x)) return false;
    }
  return true;
}

}  // namespace

TEST_CASE("GPT-2 sizes: the book's parameter count and the presets") {
  const GptConfig small = *find_gpt_preset("gpt2-small");
  CHECK(parameter_count(small, false) == 163009536);  // the book prints 163,009,536
  CHECK(parameter_count(small, true) == 163009536 - 50257 * 768);
  const GptConfig xl = *find_gpt_preset("gpt2-xl");
  CHECK(xl.n_layers == 48);
  CHECK(xl.d_model == 1600);
  CHECK(xl.n_heads == 25);
  CHECK(validate(xl).is_ok());
  GptConfig bad = small;
  bad.n_heads = 7;
  CHECK(validate(bad).error == "d_model 768 is not divisible by 7 heads");
  CHECK(!find_gpt_preset("gpt2-tiny"));
}

TEST_CASE("file element types widen exactly") {
  const unsigned char f16[] = {0x00, 0x3C, 0x01, 0x00, 0x00, 0x7C, 0x00, 0xC0, 0xFF, 0x7B, 0x00, 0x80};
  CHECK(load_element(f16, Dtype::f16, 0) == 1.0f);
  CHECK(load_element(f16, Dtype::f16, 1) == 0x1p-24f);  // the smallest subnormal
  CHECK(load_element(f16, Dtype::f16, 2) == INFINITY);
  CHECK(load_element(f16, Dtype::f16, 3) == -2.0f);
  CHECK(load_element(f16, Dtype::f16, 4) == 65504.0f);
  CHECK(std::signbit(load_element(f16, Dtype::f16, 5)));
  const unsigned char bf16[] = {0x80, 0x3F, 0xC0, 0x7F};
  CHECK(load_element(bf16, Dtype::bf16, 0) == 1.0f);
  CHECK(std::isnan(load_element(bf16, Dtype::bf16, 1)));
  const unsigned char f32[] = {0, 0, 0, 0, 0, 0, 0xC0, 0x3F};  // unaligned reads are fine
  float out[1];
  widen(f32 + 4, Dtype::f32, 0, 1, out);
  CHECK(out[0] == 1.5f);
}

TEST_CASE("packing keeps every element, from either stored layout, for every panel width") {
  Tensor w(37, 11);
  for (std::size_t i = 0; i < w.size(); ++i) w.data[i] = static_cast<float>(i) * 0.5f - 3.0f;
  Tensor t(11, 37);  // the same matrix stored (in, out), as GPT-2's Conv1D
  for (int o = 0; o < 37; ++o)
    for (int i = 0; i < 11; ++i) t.at(i, o) = w.at(o, i);
  for (Isa isa : available_isas()) {
    INFO(std::string(to_string(isa)));
    const PackedMatrix a = pack_matrix(w, isa);
    const PackedMatrix b = pack_matrix(
        MatrixSource{reinterpret_cast<const unsigned char*>(t.ptr()), Dtype::f32, 11, 37}, true, isa);
    const PackedMatrix c = pack_matrix(
        MatrixSource{reinterpret_cast<const unsigned char*>(w.ptr()), Dtype::f32, 37, 11}, false, isa);
    CHECK(same_bits(unpack(a), w));
    CHECK(same_bits(unpack(b), w));
    CHECK(same_bits(unpack(c), w));
    for (const PackedMatrix* m : {&a, &b, &c}) CHECK(padding_is_zero(*m));
    for (Isa other : available_isas()) {
      const PackedMatrix r = repack(a, other);
      CHECK(same_bits(unpack(r), w));
      CHECK(padding_is_zero(r));
    }
  }
}

TEST_CASE("every ISA's whole-model pass agrees with the scalar reference") {
  // float32 kernels against double accumulation; the measured worst is printed
  for (bool train : {false, true}) {
    for (bool bias : {false, true}) {
      const GptConfig c = tiny(bias);
      const std::vector<int> ids = some_ids(29, c.vocab_size, 3);
      GptRequest req;
      req.stages = kStageAll;
      req.qkv = true;
      req.all_logits = true;
      GptModel ref = seeded(c, 123, train, Isa::scalar);
      GptResult want;
      REQUIRE(ref.forward(ids, req, want).is_ok());
      for (Isa isa : available_isas()) {
        if (isa == Isa::scalar) continue;
        INFO(std::string(to_string(isa)) << (train ? " train" : " eval") << (bias ? " bias" : ""));
        GptModel m = seeded(c, 123, train, isa);
        GptResult got;
        REQUIRE(m.forward(ids, req, got).is_ok());
        CHECK(got.isa == isa);
        const double logits = test::max_rel_error(got.logits.ptr(), want.logits.ptr(), got.logits.size());
        double weights = 0.0;
        for (std::size_t l = 0; l < got.layers.size(); ++l) {
          const Result& a = got.layers[l].attention;
          const Result& b = want.layers[l].attention;
          const Tensor aw = a.weights.to_tensor(), bw = b.weights.to_tensor();
          weights = std::max(weights, test::max_rel_error(aw.ptr(), bw.ptr(), aw.size()));
          if (train) {
            CHECK(a.keep == b.keep);
            const Tensor ad = a.dropped.to_tensor(), bd = b.dropped.to_tensor();
            CHECK(test::max_rel_error(ad.ptr(), bd.ptr(), ad.size()) < 1e-4);
          }
          CHECK(test::max_rel_error(a.context.ptr(), b.context.ptr(), a.context.size()) < 1e-4);
        }
        MESSAGE(std::string(to_string(isa)) << ": logits " << logits << ", weights " << weights);
        CHECK(logits < 1e-4);
        CHECK(weights < 1e-4);
        REQUIRE(got.next.size() == 10);
        CHECK(got.next[0].id == want.next[0].id);
        double p = 0.0;
        for (const TopToken& t : got.next) p += t.probability;
        CHECK(p <= 1.0 + 1e-9);
        CHECK(got.next[0].probability >= got.next[9].probability);
      }
    }
  }
}

TEST_CASE("every ISA's top tokens are the scalar rule's, its softmax to float's precision") {
  // Rows shorter than a vector, with a ragged tail, GPT-2's vocabulary; ties (values on a coarse grid); a
  // range wide enough that float's exp underflows where double's does not; each k up to past the row.
  std::uint64_t state = 7;
  const auto uniform = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) / 9007199254740992.0;
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (const int V : {1, 3, 17, 33, 100, 50257})
    for (const int spread : {0, 1, 2}) {
      std::vector<float> row(static_cast<std::size_t>(V));
      for (float& x : row) {
        const double u = uniform();
        x = spread == 0   ? static_cast<float>(std::floor(u * 8.0))  // few distinct values: ties everywhere
            : spread == 1 ? static_cast<float>(u * 20.0 - 10.0)
                          : static_cast<float>(u * 300.0 - 250.0);
      }
      std::vector<std::vector<float>> rows = {row};
      if (V >
          2) {  // a value that is not finite sends the row to the scalar rule: the same answer bit for bit
        for (const float bad : {inf, -inf, std::numeric_limits<float>::quiet_NaN()}) {
          rows.push_back(row);
          rows.back()[static_cast<std::size_t>(V / 2)] = bad;
        }
      }
      for (std::size_t r = 0; r < rows.size(); ++r)
        for (const int k : {0, 1, 5, 10, 64, 65, V, V + 3}) {
          double want_lse = 0.0;
          const std::vector<TopToken> want = top_tokens(rows[r].data(), V, k, &want_lse, Isa::scalar);
          for (const Isa isa : available_isas()) {
            if (isa == Isa::scalar) continue;
            INFO(to_string(isa) << " V " << V << " spread " << spread << " row " << r << " k " << k);
            double lse = 0.0;
            const std::vector<TopToken> got = top_tokens(rows[r].data(), V, k, &lse, isa);
            REQUIRE(got.size() == want.size());
            for (std::size_t i = 0; i < got.size(); ++i) {
              CHECK(got[i].id == want[i].id);
              CHECK(same_bits(got[i].logit, want[i].logit));
              if (r == 0) {
                // float's softmax, as PyTorch's: exp(x - max) with x - max rounded to float (its error grows
                // with the distance from the top logit) and exp to about 2 ulp; 0 past float's range
                const double below = static_cast<double>(want[0].logit) - want[i].logit;
                CHECK(std::abs(got[i].probability - want[i].probability) <=
                      want[i].probability * (2e-6 + 2.4e-7 * below) + 1e-37);
              } else
                CHECK(same_bits(got[i].probability, want[i].probability));
            }
            if (r == 0)
              CHECK(std::abs(lse - want_lse) <= 2e-6);
            else
              CHECK(same_bits(lse, want_lse));
            // a target's probability is the top tokens' rule: a top token's own number, bit for bit
            for (const int target : {0, V - 1, V / 2}) {
              double p = -1.0;
              const std::vector<TopToken> again = top_tokens(rows[r].data(), V, k, nullptr, isa, target, &p);
              REQUIRE(again.size() == got.size());
              for (const TopToken& t : again)
                if (t.id == target) CHECK(same_bits(p, t.probability));
              if (r == 0) CHECK((p >= 0.0 && p <= 1.0));
            }
            // every token's probability, each term as the sum took it: never past 1 but for double's rounding
            if (r == 0 && k >= V) {
              double total = 0.0;
              for (const TopToken& t : got) total += t.probability;
              CHECK(total <= 1.0 + 1e-12);
            }
          }
        }
    }
}

TEST_CASE("the incremental path gives the full pass's bits") {
  const GptConfig c = tiny(true);
  const std::vector<int> ids = some_ids(40, c.vocab_size, 11);
  GptRequest everything;
  everything.stages = kStageAll;
  everything.qkv = true;
  everything.residuals = true;
  everything.all_logits = true;
  GptRequest weights_only;
  weights_only.all_layers = false;
  weights_only.layers = {1};
  GptRequest detail;  // the model view: every layer's weights, one layer's everything
  detail.detail_layer = 1;
  for (const GptRequest& req : {everything, weights_only, GptRequest{}, detail}) {
    for (Isa isa : available_isas()) {
      if (isa == Isa::scalar) continue;
      INFO(std::string(to_string(isa)));
      GptModel m = seeded(c, 5, false, isa);
      GptResult live;
      // typing at the end, one token and several, deleting, editing the middle, the same text again
      const std::vector<std::vector<int>> edits = {
          {ids.begin(), ids.begin() + 1},  {ids.begin(), ids.begin() + 9},  {ids.begin(), ids.begin() + 10},
          {ids.begin(), ids.begin() + 33}, {ids.begin(), ids.begin() + 30}, {ids.begin(), ids.begin() + 40},
          {ids.begin(), ids.begin() + 40},
      };
      std::vector<int> middle = ids;
      middle[20] = (middle[20] + 1) % c.vocab_size;
      std::vector<int> expected_reuse = {0, 1, 9, 10, 30, 30, 40, 20};
      auto all = edits;
      all.push_back(middle);
      for (std::size_t e = 0; e < all.size(); ++e) {
        INFO("edit " << e);
        REQUIRE(m.forward(all[e], req, live).is_ok());
        CHECK(live.reused == expected_reuse[e]);
        GptModel fresh = seeded(c, 5, false, isa);
        GptResult full;
        REQUIRE(fresh.forward(all[e], req, full).is_ok());
        CHECK(full.reused == 0);
        check_same(live, full);
      }
    }
  }
}

TEST_CASE("typing token by token grows the kept squares in place and keeps the full pass's bits") {
  const GptConfig c = tiny(true);
  const std::vector<int> ids = some_ids(c.context_length, c.vocab_size, 3);
  GptRequest detail;  // the model view: every layer's weights, one layer's every stage
  detail.detail_layer = 0;
  const Isa isa = available_isas().front();
  if (isa == Isa::scalar) return;
  GptModel m = seeded(c, 5, false, isa);
  GptResult live;
  int copies = 0;
  const float* storage = nullptr;
  int stride = 0;
  for (int T = 1; T <= c.context_length; ++T) {
    INFO("T = " << T);
    REQUIRE(m.forward({ids.begin(), ids.begin() + T}, detail, live).is_ok());
    CHECK(live.reused == T - 1);
    const HeadSquares& w = live.layers[1].attention.weights;
    CHECK(w.n == T);
    CHECK(w.stride >= T);
    CHECK(w.stride <= c.context_length);
    const Result& a = live.layers[0].attention;
    for (const HeadSquares* sq : {&a.scores, &a.scaled, &a.dropped}) CHECK(sq->stride == a.weights.stride);
    if (w.stride == stride)
      CHECK(w.ptr() == storage);  // the same storage, written in place
    else
      ++copies;
    storage = w.ptr(), stride = w.stride;
    if (T % 7 == 0 || T == c.context_length) {
      GptResult full;
      REQUIRE(seeded(c, 5, false, isa).forward(live.ids, detail, full).is_ok());
      CHECK(full.layers[1].attention.weights.dense());
      check_same(live, full);
    }
  }
  // strides 1, 16, 32, 40 (the context length): grown by an eighth, rounded up to 16 floats
  CHECK(copies == 4);
}

TEST_CASE("the detail layer keeps every stage, the other layers their weights, in both modes") {
  const GptConfig c = tiny(true);
  const std::vector<int> ids = some_ids(17, c.vocab_size, 3);
  GptRequest everything;
  everything.stages = kStageAll;
  everything.qkv = true;
  GptRequest detail;
  detail.detail_layer = 1;
  for (bool train : {false, true})
    for (Isa isa : available_isas()) {
      INFO(std::string(to_string(isa)) << (train ? " train" : " eval"));
      GptResult all, one;
      REQUIRE(seeded(c, 9, train, isa).forward(ids, everything, all).is_ok());
      REQUIRE(seeded(c, 9, train, isa).forward(ids, detail, one).is_ok());
      REQUIRE(one.layers.size() == 2);
      const Result& x = all.layers[1].attention;
      const Result& y = one.layers[1].attention;
      for (const auto& [a, b] : {std::pair{&x.scores, &y.scores},
                                 {&x.scaled, &y.scaled},
                                 {&x.weights, &y.weights},
                                 {&x.dropped, &y.dropped}}) {
        CHECK_FALSE(b->empty());
        CHECK(same_bits(*a, *b));
      }
      for (const auto& [a, b] : {std::pair{&x.q, &y.q},
                                 {&x.k, &y.k},
                                 {&x.v, &y.v},
                                 {&x.context, &y.context},
                                 {&x.output, &y.output},
                                 {&x.inputs, &y.inputs}}) {
        CHECK_FALSE(b->empty());
        CHECK(same_bits(*a, *b));
      }
      CHECK(y.config.stages == kStageAll);
      const Result& other = one.layers[0].attention;
      CHECK(same_bits(other.weights, all.layers[0].attention.weights));
      CHECK(other.scores.empty());
      CHECK(other.q.empty());
      CHECK(same_bits(one.logits, GptResult(all).logits));
    }
  GptModel m = seeded(c, 9, false, Isa::scalar);
  GptResult r;
  detail.detail_layer = 2;
  const Status st = m.forward(ids, detail, r);
  CHECK(st.error == "layer 2 does not exist: the model has layers 0..1");
}

// What a pass computed elsewhere (the page's WebGPU) is handed: the shapes forward() keeps, nothing more.
bool same_layout(const Tensor& a, const Tensor& b) {
  return a.shape == b.shape && a.rank == b.rank && a.size() == b.size();
}
bool same_layout(const HeadSquares& a, const HeadSquares& b) {
  return a.heads == b.heads && a.n == b.n && a.stride == b.stride && a.data.size() == b.data.size();
}

TEST_CASE("a pass computed elsewhere: begin_gpt_forward lays out what forward keeps, end completes it") {
  const GptConfig c = tiny(true);
  const std::vector<int> ids = some_ids(13, c.vocab_size, 5);
  GptModel m = seeded(c, 11, false, Isa::automatic);
  std::vector<GptRequest> requests(6);
  requests[0].detail_layer = 1;  // the model view: every layer's weights, every stage of one
  requests[1].stages = kStageScores, requests[1].qkv = true;
  requests[2].residuals = true, requests[2].all_logits = true;
  requests[3].all_layers = false, requests[3].layers = {1}, requests[3].detail_layer = 0;
  requests[4].top_k = 3;
  requests[5].stages = kStageDropped;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    INFO("request " << i);
    const GptRequest& req = requests[i];
    GptResult cpu, ext;
    REQUIRE(m.forward(ids, req, cpu).is_ok());
    REQUIRE(begin_gpt_forward(m.weights(), m.options(), ids, req, ext).is_ok());
    CHECK(ext.ids == ids);
    CHECK(ext.reused == 0);
    CHECK(ext.stamp == 0);  // never extended by the engine's incremental path
    REQUIRE(ext.layers.size() == cpu.layers.size());
    CHECK(same_layout(ext.logits, cpu.logits));
    std::memcpy(ext.logits.ptr(), cpu.logits.ptr(), cpu.logits.size() * sizeof(float));
    for (std::size_t l = 0; l < cpu.layers.size(); ++l) {
      GptLayer& e = ext.layers[l];
      const GptLayer& k = cpu.layers[l];
      CHECK(e.index == k.index);
      CHECK(e.attention.config.stages == k.attention.config.stages);
      CHECK(e.attention.shape.heads == k.attention.shape.heads);
      CHECK(e.attention.shape.scale == k.attention.shape.scale);
      CHECK(e.attention.tokens == k.attention.tokens);
      CHECK(e.attention.dropped.empty());  // end_gpt_forward's part
      Result& a = e.attention;
      const Result& b = k.attention;
      // the backend fills every tensor begun, with the engine's numbers here
      for (auto [to, from] :
           {std::pair{&a.weights, &b.weights}, {&a.scores, &b.scores}, {&a.scaled, &b.scaled}}) {
        REQUIRE(same_layout(*to, *from));
        if (!to->empty()) std::memcpy(to->ptr(), from->ptr(), from->data.size() * sizeof(float));
      }
      for (auto [to, from] : {std::pair{&a.inputs, &b.inputs},
                              {&a.q, &b.q},
                              {&a.k, &b.k},
                              {&a.v, &b.v},
                              {&a.context, &b.context},
                              {&a.output, &b.output},
                              {&e.resid_in, &k.resid_in},
                              {&e.resid_out, &k.resid_out}}) {
        REQUIRE(same_layout(*to, *from));
        if (!to->empty()) std::memcpy(to->ptr(), from->ptr(), from->size() * sizeof(float));
      }
    }
    REQUIRE(end_gpt_forward(req, ext).is_ok());
    check_same(cpu, ext);
    for (std::size_t l = 0; l < cpu.layers.size(); ++l)
      CHECK(same_bits(ext.layers[l].attention.dropped, cpu.layers[l].attention.dropped));
    REQUIRE(ext.next.size() == cpu.next.size());
    for (std::size_t k = 0; k < cpu.next.size(); ++k)
      CHECK(ext.next[k].probability == cpu.next[k].probability);
  }
  GptResult ext;
  CHECK(begin_gpt_forward(m.weights(), m.options(), {1, 97}, GptRequest{}, ext).error ==
        "token id 97 is outside the vocabulary (0..96)");
  GptModel train = seeded(c, 11, true, Isa::automatic);
  CHECK_FALSE(begin_gpt_forward(train.weights(), train.options(), ids, GptRequest{}, ext).is_ok());
  // an attention-only model (the induction task's): its blocks have no MLP, which the GPU kernels would run
  GptConfig attention_only = c;
  attention_only.attention_only = true;
  GptModel induction = seeded(attention_only, 11, false, Isa::automatic);
  CHECK(begin_gpt_forward(induction.weights(), induction.options(), ids, GptRequest{}, ext).error ==
        "only the engine computes attention-only models (the GPU kernels run every block's MLP)");
  // non-finite logits are refused as forward() refuses them
  REQUIRE(begin_gpt_forward(m.weights(), m.options(), ids, GptRequest{}, ext).is_ok());
  ext.logits.data[3] = INFINITY;
  CHECK(end_gpt_forward(GptRequest{}, ext).error ==
        "the logits are not finite: the weights overflow float32");
  // and so is a kept stage that is not finite, with the line the engine's own passes give
  GptRequest scores;
  scores.stages = kStageScores;
  REQUIRE(begin_gpt_forward(m.weights(), m.options(), ids, scores, ext).is_ok());
  ext.layers[1].attention.scores.at(0, 0, 1) = INFINITY;  // a masked cell
  CHECK(end_gpt_forward(scores, ext).error ==
        "the result is not finite (raw scores): the inputs are too large for float32 arithmetic");
}

TEST_CASE("reusable() names the rows the incremental path takes, and FLOPs count only the rows computed") {
  const GptConfig c = tiny();
  GptModel m = seeded(c, 2, false, Isa::automatic);
  const std::vector<int> ids = some_ids(20, c.vocab_size, 6);
  GptResult r;
  CHECK(m.reusable(ids, GptRequest{}, r) == 0);
  REQUIRE(m.forward({ids.begin(), ids.begin() + 15}, GptRequest{}, r).is_ok());
  CHECK(m.reusable(ids, GptRequest{}, r) == 15);
  GptRequest other;
  other.detail_layer = 0;
  CHECK(m.reusable(ids, other, r) == 0);  // another request: a full pass
  REQUIRE(m.forward(ids, GptRequest{}, r).is_ok());
  CHECK(r.reused == 15);
  CHECK(forward_flops(c, 20, 15) < forward_flops(c, 20, 0));
  // one layer at first = 0 counts what the chapter-3 layer counts, plus the feed-forward and the head
  GptConfig one = c;
  one.n_layers = 1;
  Config layer;
  layer.variant = Variant::mha, layer.d_in = layer.d_out = c.d_model, layer.num_heads = c.n_heads;
  const double d = c.d_model;
  CHECK(forward_flops(one, 20) ==
        doctest::Approx(forward_flops(layer, 20) + 2.0 * d * 20 + 2 * 20 * 8 * d * d + 2 * d * c.vocab_size));
}

TEST_CASE("a fork shares the weights and gives the same passes, with a cache of its own") {
  const GptConfig c = tiny();
  for (bool train : {false, true}) {
    GptModel m = seeded(c, 4, train, Isa::scalar);
    GptModel f = m.fork();
    CHECK(&f.weights() == &m.weights());
    const std::vector<int> ids = some_ids(12, c.vocab_size, 8);
    GptResult a, b;
    REQUIRE(m.forward(ids, GptRequest{}, a).is_ok());
    REQUIRE(f.forward(ids, GptRequest{}, b).is_ok());
    check_same(a, b);
  }
}

TEST_CASE("train mode never reuses rows: fresh dropout masks over the whole sequence") {
  const GptConfig c = tiny();
  GptModel m = seeded(c, 9, true, Isa::automatic);
  GptResult r;
  const std::vector<int> ids = some_ids(12, c.vocab_size, 2);
  REQUIRE(m.forward({ids.begin(), ids.begin() + 11}, GptRequest{}, r).is_ok());
  REQUIRE(m.forward(ids, GptRequest{}, r).is_ok());
  CHECK(r.reused == 0);
  GptResult again;
  REQUIRE(m.forward(ids, GptRequest{}, again).is_ok());
  check_same(r, again);  // the same masks: each pass starts from the generator right after construction
}

TEST_CASE("greedy generation appends the argmax, as generate_text_simple") {
  const GptConfig c = tiny();
  for (bool train : {false, true}) {
    INFO((train ? "train" : "eval"));
    GptModel m = seeded(c, 21, train, Isa::automatic);
    const std::vector<int> prompt = some_ids(6, c.vocab_size, 4);
    std::vector<int> generated;
    GptResult out;
    REQUIRE(m.generate(prompt, 5, GptRequest{}, generated, out).is_ok());
    REQUIRE(generated.size() == 5);
    if (!train) {
      // each step by hand with full passes
      std::vector<int> ids = prompt;
      for (int step = 0; step < 5; ++step) {
        GptModel fresh = seeded(c, 21, false, Isa::automatic);
        GptResult r;
        REQUIRE(fresh.forward(ids, GptRequest{}, r).is_ok());
        CHECK(generated[static_cast<std::size_t>(step)] == r.next[0].id);
        ids.push_back(r.next[0].id);
      }
      CHECK(out.ids == ids);
    }
  }
  // past the context length the window slides (idx[:, -context_size:])
  GptModel m = seeded(c, 21, false, Isa::automatic);
  std::vector<int> generated;
  GptResult out;
  REQUIRE(m.generate(some_ids(38, c.vocab_size, 4), 5, GptRequest{}, generated, out).is_ok());
  CHECK(out.ids.size() == static_cast<std::size_t>(c.context_length));
}

TEST_CASE("bad ids, lengths and layers are refused with one line") {
  const GptConfig c = tiny();
  GptModel m = seeded(c, 1, false, Isa::automatic);
  GptResult r;
  CHECK(m.forward({}, GptRequest{}, r).error == "the text is empty: give at least one token");
  CHECK(m.forward({1, 97}, GptRequest{}, r).error == "token id 97 is outside the vocabulary (0..96)");
  CHECK(m.forward(some_ids(41, 97, 1), GptRequest{}, r).error ==
        "the text has 41 tokens, more than the context length 40");
  GptRequest req;
  req.all_layers = false;
  req.layers = {2};
  CHECK(m.forward({1, 2}, req, r).error == "layer 2 does not exist: the model has layers 0..1");
  GptModel empty;
  CHECK(empty.forward({1}, GptRequest{}, r).error == "no model is loaded");
}

TEST_CASE("weights that overflow float32 are reported, and the result they would have reused is emptied") {
  const GptConfig c = tiny();
  for (Isa isa : available_isas()) {
    INFO(std::string(to_string(isa)));
    TorchGenerator g(3);
    auto w = std::make_shared<GptWeights>();
    REQUIRE(build_gpt(c, g, *w, isa).is_ok());
    for (float& x : w->final_scale.data) x = 3e38f;  // the final norm's output and the logits overflow
    GptOptions o;
    o.train = false;
    o.exec.isa = isa;
    GptModel m(w, g, o);
    GptResult r;
    CHECK(m.forward({1, 2, 3}, GptRequest{}, r).error ==
          "the logits are not finite: the weights overflow float32");
    CHECK(r.ids.empty());
    CHECK(r.layers.empty());
  }
}

TEST_CASE("packed_bytes says beforehand what the weights will hold, on every ISA") {
  for (bool bias : {false, true})
    for (bool attention_only : {false, true}) {
      GptConfig c = tiny(bias);
      c.attention_only = attention_only;
      for (Isa isa : available_isas()) {
        INFO(std::string(to_string(isa)) << (attention_only ? " attention-only" : ""));
        TorchGenerator g(1);
        GptWeights w;
        REQUIRE(build_gpt(c, g, w, isa).is_ok());
        CHECK(w.bytes() == packed_bytes(c, false, isa));
      }
      // an attention-only block lacks the MLP (fc 4d x d and its bias, proj d x 4d and its bias) and norm2
      if (attention_only) {
        GptConfig full = c;
        full.attention_only = false;
        const std::int64_t d = c.d_model;
        CHECK(parameter_count(full, false) - parameter_count(c, false) ==
              c.n_layers * (4 * d * d + 4 * d + 4 * d * d + d + 2 * d));
      }
    }
}
