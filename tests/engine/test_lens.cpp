// The causal tools (attnviz/lens.hpp) against PyTorch: the files tests/torch/make_lens_fixtures.py writes
// from the definitions in docs/lens.md, for GPT-2 and the tiny llama, qwen2, qwen3, gemma3_text (sliding
// windows, sandwich norms) and gpt_neox (parallel and sequential residual) models, on every ISA. Then the
// invariants that hold whatever the model: the lens's last point is the logits, the components sum to the
// metric, zero ablation is a zeroed slice of the output projection, patching every position of the embeddings
// gives 1, and a probe that changes nothing changes no number.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnviz/gpt.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "attnviz/lens.hpp"
#include "check.hpp"

using namespace attnviz;
using nlohmann::json;

namespace {

const std::filesystem::path kFixtures = std::filesystem::path(ATTNVIZ_FIXTURES_DIR);
const char* const kCases[] = {"gpt2", "llama", "qwen2", "qwen3", "gemma3", "pythia", "neox_sequential"};

json read_json(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return json::parse(s.str());
}

std::vector<float> floats(const json& a) {
  std::vector<float> v;
  for (const json& x : a) v.push_back(x.get<float>());
  return v;
}

std::vector<int> ints(const json& a) {
  std::vector<int> v;
  for (const json& x : a) v.push_back(x.get<int>());
  return v;
}

GptModel open(const std::filesystem::path& dir, Isa isa) {
  GptLoadOptions opts;
  opts.isa = isa;
  auto w = std::make_shared<GptWeights>();
  const Status st = load_gpt(dir.string(), opts, *w);
  INFO(st.error);
  REQUIRE(st.is_ok());
  GptOptions o;
  o.train = false;
  o.exec = Exec{isa, 2};
  return GptModel(w, TorchGenerator(0), o);
}

LensTarget target_of(const json& f) {
  LensTarget t;
  t.position = f["position"].get<int>();
  t.target = f["target"].get<int>();
  t.versus = f["versus"].is_null() ? -1 : f["versus"].get<int>();
  return t;
}

Ablation ablation_of(const json& f, AblationKind kind) {
  Ablation a;
  a.kind = kind;
  for (const json& h : f["ablate"]) a.heads.push_back({h[0].get<int>(), h[1].get<int>()});
  return a;
}

// An attribution against the fixture's: every component within 1e-4 of the metric's scale.
void check_attribution(const Attribution& got, const json& want, const std::string& what) {
  const double scale = std::max(1.0, std::fabs(want["value"].get<double>()));
  const double tol = 1e-4 * scale;
  const json& c = want["components"];
  INFO(what);
  CHECK(std::fabs(got.value - want["value"].get<double>()) <= tol);
  CHECK(std::fabs(got.sum() - got.value) <= tol);
  CHECK(std::fabs(got.embeddings - c["embeddings"].get<double>()) <= tol);
  CHECK(std::fabs(got.final_bias - c["final_bias"].get<double>()) <= tol);
  REQUIRE(got.heads.size() == c["heads"].size());
  for (std::size_t l = 0; l < got.heads.size(); ++l) {
    CAPTURE(l);
    REQUIRE(got.heads[l].size() == c["heads"][l].size());
    for (std::size_t h = 0; h < got.heads[l].size(); ++h) {
      CAPTURE(h);
      CHECK(std::fabs(got.heads[l][h] - c["heads"][l][h].get<double>()) <= tol);
    }
    CHECK(std::fabs(got.attention_bias[l] - c["attention_bias"][l].get<double>()) <= tol);
    CHECK(std::fabs(got.mlp[l] - c["mlp"][l].get<double>()) <= tol);
  }
}

// Two attributions, component by component, bit for bit.
void same_attribution(const Attribution& a, const Attribution& b) {
  CHECK(a.target == b.target);
  CHECK(a.versus == b.versus);
  CHECK(a.value == b.value);
  CHECK(a.embeddings == b.embeddings);
  CHECK(a.heads == b.heads);
  CHECK(a.attention_bias == b.attention_bias);
  CHECK(a.mlp == b.mlp);
  CHECK(a.final_bias == b.final_bias);
}

GptRequest all_logits() {
  GptRequest r;
  r.all_logits = true;
  return r;
}

}  // namespace

TEST_CASE("causal lens: the lens, attribution and ablation equal PyTorch's for every architecture and ISA") {
  for (const char* name : kCases) {
    const json f = read_json(kFixtures / "lens" / (std::string(name) + ".json"));
    const std::vector<int> ids = ints(f["ids"]);
    const int T = static_cast<int>(ids.size()), L = f["n_layers"].get<int>(), V = f["vocab_size"].get<int>();
    for (Isa isa : available_isas()) {
      const std::string what = std::string(name) + " on " + to_string(isa);
      CAPTURE(what);
      GptModel model = open(kFixtures / f["model"].get<std::string>(), isa);
      LensRequest lr;
      lr.lens = lr.attribute = true;
      lr.top_k = 3;
      lr.target = target_of(f);
      CausalLens lens;
      GptResult pass;
      LensResult out;
      const Status st = lens.run(model, ids, all_logits(), lr, pass, out);
      INFO(st.error);
      REQUIRE(st.is_ok());
      // The pass's logits, and every residual point's lens logits.
      const std::vector<float> logits = floats(f["logits"]);
      REQUIRE(pass.logits.size() == logits.size());
      CHECK(test::max_rel_error(pass.logits.ptr(), logits.data(), logits.size()) <= 1e-5);
      const std::vector<float> want_lens = floats(f["lens_logits"]);
      REQUIRE(lens.probe().resid.size() == static_cast<std::size_t>(L + 1));
      REQUIRE(out.lens.size() == static_cast<std::size_t>(L + 1));
      for (int k = 0; k <= L; ++k) {
        CAPTURE(k);
        std::vector<float> got(static_cast<std::size_t>(T) * V);
        final_logits(model.weights(), model.options().exec,
                     lens.probe().resid[static_cast<std::size_t>(k)].ptr(), T, got.data());
        const float* want = want_lens.data() + static_cast<std::size_t>(k) * T * V;
        CHECK(test::max_rel_error(got.data(), want, got.size()) <= 1e-5);
        // the lens's top token at each position is PyTorch's argmax, where no runner-up is within rounding
        for (int t = 0; t < T; ++t) {
          const float* row = want + static_cast<std::size_t>(t) * V;
          int best = 0;
          for (int v = 1; v < V; ++v) best = row[v] > row[best] ? v : best;
          float second = -INFINITY;
          for (int v = 0; v < V; ++v)
            if (v != best) second = std::max(second, row[v]);
          const LensPosition& lp =
              out.lens[static_cast<std::size_t>(k)].positions[static_cast<std::size_t>(t)];
          REQUIRE(lp.top.size() == 3u);
          if (row[best] - second > 1e-3f * std::max(1.0f, std::fabs(row[best]))) CHECK(lp.top[0].id == best);
          CHECK(lp.target_probability >= 0.0);
          CHECK(lp.target_probability <= 1.0);
        }
      }
      CHECK(out.lens[0].after == "embeddings");
      CHECK(out.lens[static_cast<std::size_t>(L)].after == "block " + std::to_string(L - 1));
      REQUIRE(out.attributed);
      check_attribution(out.attribution, f["attribution"], what + ": attribution");

      for (const AblationKind kind : {AblationKind::zero, AblationKind::mean}) {
        const std::string kind_name = to_string(kind);
        const json& want = f["ablated"][kind_name];
        lr.ablation = ablation_of(f, kind);
        const Status sa = lens.run(model, ids, all_logits(), lr, pass, out);
        INFO(sa.error);
        REQUIRE(sa.is_ok());
        const std::vector<float> ablated = floats(want["logits"]);
        REQUIRE(pass.logits.size() == ablated.size());
        INFO(what << ": " << kind_name << " ablation");
        CHECK(test::max_rel_error(pass.logits.ptr(), ablated.data(), ablated.size()) <= 1e-5);
        check_attribution(out.attribution, want["attribution"],
                          what + ": " + kind_name + " ablation's attribution");
        for (const HeadRef& h : lr.ablation.heads)  // a head switched off to zero writes nothing
          if (kind == AblationKind::zero)
            CHECK(
                out.attribution.heads[static_cast<std::size_t>(h.layer)][static_cast<std::size_t>(h.head)] ==
                0.0);
      }
    }
  }
}

TEST_CASE("causal lens: activation patching equals PyTorch's for every architecture") {
  for (const char* name : kCases) {
    const json f = read_json(kFixtures / "lens" / (std::string(name) + ".json"));
    CAPTURE(name);
    const GptModel model = open(kFixtures / f["model"].get<std::string>(), Isa::automatic);
    Patching p;
    const Status st = patch(model, ints(f["ids"]), ints(f["patch_ids"]), target_of(f), Ablation(), p);
    INFO(st.error);
    REQUIRE(st.is_ok());
    const json& want = f["patching"];
    CHECK(p.difference == (want["metric"] == "logit_difference"));
    const double tol = 1e-4 * std::max(1.0, std::fabs(want["clean"].get<double>()));
    CHECK(std::fabs(p.clean - want["clean"].get<double>()) <= tol);
    CHECK(std::fabs(p.corrupted - want["corrupted"].get<double>()) <= tol);
    for (const auto& entry : {std::pair{&p.residual, "residual"}, std::pair{&p.heads, "heads"}}) {
      const std::vector<std::vector<double>>* map = entry.first;
      const char* key = entry.second;
      const json& w = want[key];
      REQUIRE(map->size() == w.size());
      for (std::size_t l = 0; l < map->size(); ++l) {
        REQUIRE((*map)[l].size() == w[l].size());
        for (std::size_t j = 0; j < (*map)[l].size(); ++j) {
          INFO(key << "[" << l << "][" << j << "]");
          CHECK(std::fabs((*map)[l][j] - w[l][j].get<double>()) <= 1e-3);
        }
      }
    }
  }
}

TEST_CASE("causal lens: the invariants hold on every ISA") {
  for (const char* name : kCases) {
    const json f = read_json(kFixtures / "lens" / (std::string(name) + ".json"));
    const std::vector<int> ids = ints(f["ids"]), corrupted = ints(f["patch_ids"]);
    const int T = static_cast<int>(ids.size());
    for (Isa isa : available_isas()) {
      const std::string what = std::string(name) + " on " + to_string(isa);
      CAPTURE(what);
      GptModel model = open(kFixtures / f["model"].get<std::string>(), isa);
      const GptConfig& c = model.weights().config;
      const int V = c.vocab_size;
      GptResult plain;
      REQUIRE(model.forward(ids, all_logits(), plain).is_ok());

      // A probe that only captures, or changes nothing, gives forward()'s numbers bit for bit; and the lens's
      // last point, the final residual through the final norm and head, is the model's logits.
      PassProbe probe;
      probe.capture = true;
      probe.edit_context = [](int, Tensor&) { return false; };
      GptResult probed;
      REQUIRE(model.forward(ids, all_logits(), probe, probed).is_ok());
      REQUIRE(probed.logits.size() == plain.logits.size());
      CHECK(std::memcmp(probed.logits.ptr(), plain.logits.ptr(), plain.logits.size() * sizeof(float)) == 0);
      std::vector<float> last(static_cast<std::size_t>(T) * V);
      final_logits(model.weights(), model.options().exec, probe.resid.back().ptr(), T, last.data());
      CHECK(test::max_rel_error(last.data(), plain.logits.ptr(), last.size()) <= 1e-6);
      for (int t = 0; t < T; ++t) {
        const std::vector<float> one = logits_at(model.weights(), model.options().exec, probe, t);
        CHECK(test::max_rel_error(one.data(), plain.logits.ptr() + static_cast<std::size_t>(t) * V,
                                  one.size()) <= 1e-6);
      }

      // A capture that extends the previous keystroke's pass holds the full pass's numbers bit for bit.
      if (isa != Isa::scalar) {
        GptModel typing = model.fork();
        PassProbe kept;
        kept.capture = true;
        GptResult r;
        REQUIRE(typing.forward(std::vector<int>(ids.begin(), ids.end() - 1), all_logits(), kept, r).is_ok());
        REQUIRE(typing.forward(ids, all_logits(), kept, r).is_ok());
        CHECK(r.reused == T - 1);
        for (auto points :
             {&PassProbe::resid, &PassProbe::context, &PassProbe::attn_out, &PassProbe::mlp_out})
          for (std::size_t l = 0; l < (probe.*points).size(); ++l) {
            const Tensor& a = (kept.*points)[l];
            const Tensor& b = (probe.*points)[l];
            REQUIRE(a.size() == b.size());
            CHECK(std::memcmp(a.ptr(), b.ptr(), a.size() * sizeof(float)) == 0);
          }
      }

      // The lens of a keystroke that extends the previous pass computes the new position only, and equals a
      // fresh lens.
      if (isa != Isa::scalar) {
        GptModel typing = model.fork(), fresh = model.fork();
        LensRequest lr;
        lr.lens = lr.attribute = true, lr.top_k = 4;
        lr.target.target = 1;  // a fixed target
        CausalLens kept, anew;
        GptResult r1, r2;
        LensResult typed, whole;
        REQUIRE(kept.run(typing, std::vector<int>(ids.begin(), ids.end() - 2), GptRequest(), lr, r1, typed)
                    .is_ok());
        REQUIRE(kept.run(typing, std::vector<int>(ids.begin(), ids.end() - 1), GptRequest(), lr, r1, typed)
                    .is_ok());
        REQUIRE(kept.run(typing, ids, GptRequest(), lr, r1, typed).is_ok());
        CHECK(r1.reused == T - 1);
        REQUIRE(anew.run(fresh, ids, GptRequest(), lr, r2, whole).is_ok());
        CHECK(r2.reused == 0);
        REQUIRE(typed.lens.size() == whole.lens.size());
        for (std::size_t k = 0; k < whole.lens.size(); ++k)
          for (int t = 0; t < T; ++t) {
            const LensPosition& a = typed.lens[k].positions[static_cast<std::size_t>(t)];
            const LensPosition& b = whole.lens[k].positions[static_cast<std::size_t>(t)];
            REQUIRE(a.top.size() == b.top.size());
            for (std::size_t i = 0; i < a.top.size(); ++i) {
              CHECK(a.top[i].id == b.top[i].id);
              CHECK(a.top[i].logit == b.top[i].logit);
              CHECK(a.top[i].probability == b.top[i].probability);
            }
          }
        REQUIRE(typed.attributed);
        REQUIRE(whole.attributed);
        same_attribution(typed.attribution, whole.attribution);

        // Attribution follows a new target and versus, and other weights with the same ids.
        lr.target.target = 2, lr.target.versus = 1;
        REQUIRE(kept.run(typing, ids, GptRequest(), lr, r1, typed).is_ok());
        REQUIRE(anew.run(fresh, ids, GptRequest(), lr, r2, whole).is_ok());
        same_attribution(typed.attribution, whole.attribution);
        auto changed = std::make_shared<GptWeights>(repacked(model.weights(), isa));
        for (float& v : changed->final_scale.data) v *= 2.0f;
        GptModel other(changed, TorchGenerator(0), model.options());
        const Attribution before = typed.attribution;
        REQUIRE(kept.run(other, ids, GptRequest(), lr, r1, typed).is_ok());
        const Attribution after =
            attribute(other.weights(), other.options().exec, kept.probe(), typed.target);
        same_attribution(typed.attribution, after);
        // A doubled final scale doubles the direction every component is dotted with (the frozen 1/sigma or
        // 1/rms is the residual's, which stays): each head's part doubles, exactly, in binary.
        for (int l = 0; l < c.n_layers; ++l)
          for (int h = 0; h < c.n_heads; ++h)
            CHECK(typed.attribution.heads[l][h] == 2.0 * before.heads[l][h]);
      }

      // The components sum to the metric, at every position.
      for (int t = 0; t < T; ++t) {
        LensTarget lt{t, 0, -1};
        lt.target = top_tokens(plain.logits.ptr() + static_cast<std::size_t>(t) * V, V, 1)[0].id;
        const Attribution a = attribute(model.weights(), model.options().exec, probe, lt);
        CHECK(std::fabs(a.sum() - a.value) <= 1e-4 * std::max(1.0, std::fabs(a.value)));
      }

      // Zeroing a head's context is zeroing its slice of the output projection.
      const HeadRef head{c.n_layers - 1, c.n_heads - 1};
      PassProbe off;
      Ablation zero;
      zero.heads = {head};
      off.edit_context = ablation_edit(c, zero);
      GptResult ablated;
      REQUIRE(model.forward(ids, all_logits(), off, ablated).is_ok());
      auto sliced = std::make_shared<GptWeights>(repacked(model.weights(), model.weights().isa));
      {
        const Tensor w = unpack(sliced->blocks[static_cast<std::size_t>(head.layer)].out_proj.weight);
        Tensor cut = w;
        const int hd = c.head_dim();
        for (int o = 0; o < c.d_model; ++o)
          for (int x = head.head * hd; x < (head.head + 1) * hd; ++x) cut.at(o, x) = 0.0f;
        PackedMatrix& m = sliced->blocks[static_cast<std::size_t>(head.layer)].out_proj.weight;
        const Dtype dtype = m.dtype;
        m = pack_matrix(cut, model.weights().isa);
        CHECK(dtype == Dtype::f32);
      }
      GptModel sliced_model(sliced, TorchGenerator(0), model.options());
      GptResult by_slice;
      REQUIRE(sliced_model.forward(ids, all_logits(), by_slice).is_ok());
      CHECK(test::max_rel_error(ablated.logits.ptr(), by_slice.logits.ptr(), by_slice.logits.size()) <= 1e-5);
      CHECK(std::memcmp(ablated.logits.ptr(), plain.logits.ptr(), plain.logits.size() * sizeof(float)) != 0);

      // Patching every position of the residual entering block 0 is the clean run: exactly 1.
      const LensTarget t = target_of(f);
      Patching p;
      REQUIRE(patch(model, ids, corrupted, t, Ablation(), p).is_ok());
      PassProbe from_clean;
      from_clean.start = &probe.resid[0];
      from_clean.logits_row = t.position;
      GptResult r;
      REQUIRE(model.fork().forward(corrupted, GptRequest(), from_clean, r).is_ok());
      CHECK((metric_of(r.logits.ptr(), t) - p.corrupted) / (p.clean - p.corrupted) == 1.0);
      // After the measured position nothing the metric reads changes.
      for (int l = 0; l < c.n_layers; ++l)
        for (int pos = t.position + 1; pos < T; ++pos)
          CHECK(p.residual[static_cast<std::size_t>(l)][static_cast<std::size_t>(pos)] == 0.0);
    }
  }
}

TEST_CASE("causal lens: a view that types, ablates and stops ablating keeps a fresh view's numbers") {
  // One CausalLens kept across keystrokes (an ablated pass borrows the clean capture's earlier points, which
  // go back at the next run) against a fresh one at every step.
  for (const char* name : kCases) {
    const json f = read_json(kFixtures / "lens" / (std::string(name) + ".json"));
    const std::vector<int> ids = ints(f["ids"]);
    const int T = static_cast<int>(ids.size());
    CAPTURE(name);
    GptModel model = open(kFixtures / f["model"].get<std::string>(), Isa::automatic);
    const GptConfig& c = model.weights().config;
    GptModel typing = model.fork();
    CausalLens kept;
    GptResult kept_pass;
    LensResult kept_out;
    struct Step {
      int tokens;
      std::vector<HeadRef> heads;
    };
    const std::vector<Step> steps = {{T - 2, {}},
                                     {T - 1, {{c.n_layers / 2, 0}}},
                                     {T, {{0, c.n_heads - 1}}},
                                     {T, {{c.n_layers - 1, 0}}},
                                     {T, {}}};
    for (std::size_t i = 0; i < steps.size(); ++i) {
      CAPTURE(i);
      const std::vector<int> text(ids.begin(), ids.begin() + steps[i].tokens);
      LensRequest lr;
      lr.lens = lr.attribute = true, lr.top_k = 3;
      lr.target.target = 1;
      lr.ablation.heads = steps[i].heads;
      REQUIRE(kept.run(typing, text, GptRequest(), lr, kept_pass, kept_out).is_ok());
      GptModel fresh_model = model.fork();
      CausalLens fresh;
      GptResult fresh_pass;
      LensResult fresh_out;
      REQUIRE(fresh.run(fresh_model, text, GptRequest(), lr, fresh_pass, fresh_out).is_ok());
      for (auto points :
           {&PassProbe::resid, &PassProbe::context, &PassProbe::attn_out, &PassProbe::mlp_out}) {
        const std::vector<Tensor>& a = kept.probe().*points;
        const std::vector<Tensor>& b = fresh.probe().*points;
        REQUIRE(a.size() == b.size());
        for (std::size_t l = 0; l < a.size(); ++l) {
          REQUIRE(a[l].size() == b[l].size());
          CHECK(std::memcmp(a[l].ptr(), b[l].ptr(), a[l].size() * sizeof(float)) == 0);
        }
      }
      REQUIRE(kept_pass.logits.size() == fresh_pass.logits.size());
      CHECK(std::memcmp(kept_pass.logits.ptr(), fresh_pass.logits.ptr(),
                        kept_pass.logits.size() * sizeof(float)) == 0);
      REQUIRE(kept_out.lens.size() == fresh_out.lens.size());
      for (std::size_t k = 0; k < kept_out.lens.size(); ++k)
        for (std::size_t t = 0; t < text.size(); ++t) {
          const LensPosition& a = kept_out.lens[k].positions[t];
          const LensPosition& b = fresh_out.lens[k].positions[t];
          REQUIRE(a.top.size() == b.top.size());
          for (std::size_t j = 0; j < a.top.size(); ++j) {
            CHECK(a.top[j].id == b.top[j].id);
            CHECK(a.top[j].probability == b.top[j].probability);
          }
          CHECK(a.target_probability == b.target_probability);
        }
      same_attribution(kept_out.attribution, fresh_out.attribution);
    }
  }
}

TEST_CASE(
    "causal lens: attribution at a position chosen earlier keeps a fresh view's numbers while typing and "
    "editing") {
  // The heads' outputs at the position are computed once and kept while the text is extended or edited after
  // the position (PassProbe::head_out), computed again when an edit reaches it, and the ablated pass borrows
  // the clean pass's for the layers before the first ablated one: each step against a fresh view.
  for (const char* name : {"gpt2", "llama", "gemma3"}) {
    const json f = read_json(kFixtures / "lens" / (std::string(name) + ".json"));
    const std::vector<int> ids = ints(f["ids"]);
    const int T = static_cast<int>(ids.size());
    REQUIRE(T >= 4);
    CAPTURE(name);
    GptModel model = open(kFixtures / f["model"].get<std::string>(), Isa::automatic);
    const GptConfig& c = model.weights().config;
    GptModel typing = model.fork();
    CausalLens kept;
    GptResult kept_pass;
    LensResult kept_out;
    std::vector<int> after = ids, before = ids;
    after[static_cast<std::size_t>(T - 1)] = (after[static_cast<std::size_t>(T - 1)] + 1) % c.vocab_size;
    before[0] = (before[0] + 1) % c.vocab_size;
    struct Step {
      std::vector<int> text;
      bool ablate;
    };
    const std::vector<Step> steps = {{{ids.begin(), ids.end() - 2}, false},
                                     {{ids.begin(), ids.end() - 1}, false},
                                     {ids, false},
                                     {after, false},
                                     {after, true},
                                     {before, false},
                                     {ids, true}};
    for (std::size_t i = 0; i < steps.size(); ++i) {
      CAPTURE(i);
      LensRequest lr;
      lr.attribute = true;
      lr.target.target = 1, lr.target.position = 1;
      if (steps[i].ablate) lr.ablation.heads = {{c.n_layers - 1, 0}};
      REQUIRE(kept.run(typing, steps[i].text, GptRequest(), lr, kept_pass, kept_out).is_ok());
      CHECK(kept.probe().head_out_position == 1);
      GptModel fresh_model = model.fork();
      CausalLens fresh;
      GptResult fresh_pass;
      LensResult fresh_out;
      REQUIRE(fresh.run(fresh_model, steps[i].text, GptRequest(), lr, fresh_pass, fresh_out).is_ok());
      REQUIRE(kept_out.attributed);
      CHECK(kept_out.attribution.position == 1);
      same_attribution(kept_out.attribution, fresh_out.attribution);
    }
  }
}

TEST_CASE("causal lens: bad requests are refused in one line") {
  const GptModel model = open(kFixtures / "arch" / "llama", Isa::automatic);
  GptModel m = model.fork();
  const GptConfig& c = model.weights().config;
  const std::vector<int> ids = {1, 2, 3, 4};
  const auto refused = [&](const LensRequest& lr, const std::string& needle) {
    CausalLens lens;
    GptResult pass;
    LensResult out;
    const Status st = lens.run(m, ids, GptRequest(), lr, pass, out);
    CAPTURE(st.error);
    CHECK(st.error.find(needle) != std::string::npos);
  };
  LensRequest lr;
  lr.target.position = 4;
  refused(lr, "position 4 is past the text's 4 tokens");
  lr.target = LensTarget{-1, c.vocab_size, -1};
  refused(lr, "outside the vocabulary");
  lr.target = LensTarget{-1, 5, 5};
  refused(lr, "the versus token is the target itself");
  lr.target = LensTarget();
  lr.ablation.heads = {{c.n_layers, 0}};
  refused(lr, "head 2.0 is not in the model");
  lr.ablation.heads = {{0, 1}, {0, 1}};
  refused(lr, "head 0.1 is named twice");

  // A versus token that turns out to be the top next token (the target resolved after the pass) is refused,
  // and the pass is left empty, as forward() leaves one it refuses, so a view restores its last good one.
  {
    CausalLens lens;
    GptResult pass;
    LensResult out;
    LensRequest plain;
    plain.attribute = true;
    REQUIRE(lens.run(m, ids, GptRequest(), plain, pass, out).is_ok());
    plain.target.versus = out.target.target;
    const Status st = lens.run(m, ids, GptRequest(), plain, pass, out);
    CHECK(st.error.find("the versus token is the top next token") != std::string::npos);
    CHECK(pass.layers.empty());
    CHECK(pass.logits.empty());
  }
  // The lens's top tokens are counted before a pass: k of them at every point and position.
  {
    LensRequest none, lens;
    lens.lens = true, lens.top_k = 1000;
    none.lens = true, none.top_k = 0;
    const std::uint64_t entries =
        static_cast<std::uint64_t>(c.n_layers + 1) * 4 * std::min(1000, c.vocab_size);
    CHECK(lens_bytes(c, 4, lens, GptRequest()) - lens_bytes(c, 4, none, GptRequest()) == entries * 128);
    // ... and the logits it computes: L + 1 rows kept (a keystroke's, with the pass's own), 32 at a time
    LensRequest attribute;
    attribute.attribute = true;
    CHECK(lens_bytes(c, 4, none, GptRequest()) - lens_bytes(c, 4, attribute, GptRequest()) ==
          static_cast<std::uint64_t>(c.n_layers + 1 + 32) * c.vocab_size * sizeof(float));
    // Heads ablated: a second capture and a second pass
    LensRequest ablated = none;
    ablated.ablation.heads = {{0, 0}};
    CHECK(lens_bytes(c, 4, ablated, GptRequest()) - lens_bytes(c, 4, none, GptRequest()) ==
          probe_bytes(c, 4) + pass_bytes(c, 4, GptRequest()));
  }

  std::vector<HeadRef> heads;
  CHECK(parse_heads("3.1,0.7", heads).is_ok());
  CHECK(heads == std::vector<HeadRef>{{3, 1}, {0, 7}});
  CHECK(parse_heads("3", heads).error.find("\"3\" is not a head") != std::string::npos);
  CHECK(parse_heads("3.1,", heads).error.find("is not a head") != std::string::npos);
  CHECK(parse_heads("-1.2", heads).error.find("is not a head") != std::string::npos);

  Patching p;
  const LensTarget t{-1, 7, -1};
  CHECK(patch(model, ids, {1, 2, 3}, t, Ablation(), p).error.find("patching needs the same count") !=
        std::string::npos);
  CHECK(patch(model, ids, ids, t, Ablation(), p).error.find("there is nothing to patch") !=
        std::string::npos);
  CHECK(patch(model, ids, {1, 2, 9, 4}, LensTarget(), Ablation(), p).error.find("needs a target") !=
        std::string::npos);
  // Cancelled after the first patched run
  const Status cancelled =
      patch(model, ids, {1, 2, 9, 4}, t, Ablation(), p, [](int done, int) { return done < 1; });
  CHECK(cancelled.error == "patching was cancelled");

  // A model in train mode, with dropout, has no named points: the lens needs eval mode.
  GptModel seeded;
  GptConfig small = *find_gpt_preset("gpt2-small");
  small.n_layers = 1, small.d_model = 64, small.n_heads = 2, small.vocab_size = 50, small.context_length = 16;
  REQUIRE(seeded_gpt(small, 123, GptOptions(), seeded).is_ok());
  PassProbe probe;
  probe.capture = true;
  GptResult r;
  CHECK(seeded.forward({1, 2}, GptRequest(), probe, r).error.find("need eval mode") != std::string::npos);
}

TEST_CASE("causal lens: each head's output is its slice's sums on every ISA, and a pass computes the same") {
  // head_outputs() on each ISA's kernels (float sums) against the scalar loop (double sums) on the same
  // panels, float32 and BF16, within float summation's bound; the outputs a capturing pass keeps at its
  // position against head_outputs() from the context vectors it captured, bit for bit; and the heads' outputs
  // plus the bias against the pass's own output projection at that position.
  const double eps = std::numeric_limits<float>::epsilon();
  for (const std::filesystem::path& dir :
       {kFixtures / "arch" / "llama_bf16", kFixtures / "gpt" / "hf-folder", kFixtures / "arch" / "gemma3"})
    for (Isa isa : available_isas()) {
      CAPTURE(dir.string() + " on " + to_string(isa));
      GptModel model = open(dir, isa);
      const GptWeights& w = model.weights();
      const GptConfig& c = w.config;
      const int H = c.n_heads, d = c.d_model, hd = c.head_dim(), QW = c.q_width(), at = 3;
      PassProbe probe;
      probe.capture = true;
      probe.head_position = at;
      GptResult r;
      REQUIRE(model.forward({5, 1, 4, 2, 3}, GptRequest(), probe, r).is_ok());
      REQUIRE(probe.head_out_position == at);
      REQUIRE(probe.head_out.size() == static_cast<std::size_t>(c.n_layers));
      int outside = 0, differ = 0, total = 0;
      for (int l = 0; l < c.n_layers; ++l) {
        const PackedLinear& o = w.blocks[static_cast<std::size_t>(l)].out_proj;
        const float* ctx =
            probe.context[static_cast<std::size_t>(l)].ptr() + static_cast<std::size_t>(at) * QW;
        std::vector<float> fast(static_cast<std::size_t>(H) * d), plain(fast.size());
        head_outputs(w, Exec{isa, 2}, l, ctx, fast.data());
        head_outputs(w, Exec{Isa::scalar, 1}, l, ctx, plain.data());
        REQUIRE(probe.head_out[static_cast<std::size_t>(l)].size() == fast.size());
        differ += std::memcmp(probe.head_out[static_cast<std::size_t>(l)].ptr(), fast.data(),
                              fast.size() * sizeof(float)) != 0;
        const float* attn =
            probe.attn_out[static_cast<std::size_t>(l)].ptr() + static_cast<std::size_t>(at) * d;
        for (int j = 0; j < d; ++j) {
          double all = o.bias.empty() ? 0.0 : o.bias.data[static_cast<std::size_t>(j)],
                 all_abs = std::fabs(all);
          for (int h = 0; h < H; ++h) {
            double magnitude = 0.0;
            for (int i = h * hd; i < (h + 1) * hd; ++i)
              magnitude += std::fabs(static_cast<double>(ctx[i]) * o.weight.at(j, i));
            const std::size_t k = static_cast<std::size_t>(h) * d + j;
            outside += std::fabs(fast[k] - plain[k]) > (hd + 2) * eps * magnitude;
            all += fast[k], all_abs += magnitude;
            ++total;
          }
          outside += std::fabs(all - attn[j]) > (QW + H + 2) * eps * all_abs;
        }
      }
      CHECK(total > 0);
      CHECK(differ == 0);
      CHECK(outside == 0);
    }
}

TEST_CASE("causal lens: a 16-bit model's attribution reads its BF16 panels as their float32 copy does") {
  const std::filesystem::path dir = kFixtures / "arch" / "llama_bf16";
  const json want = read_json(dir / "expected.json");
  std::vector<int> ids = ints(want["ids"]);
  for (Isa isa : available_isas()) {
    CAPTURE(to_string(isa));
    GptModel kept = open(dir, isa);  // BF16 matrices kept 16-bit (GptLoadOptions::keep_16bit)
    REQUIRE(kept.weights().blocks[0].out_proj.weight.dtype == Dtype::bf16);
    GptLoadOptions opts;
    opts.isa = isa, opts.keep_16bit = false;
    auto widened = std::make_shared<GptWeights>();
    REQUIRE(load_gpt(dir.string(), opts, *widened).is_ok());
    REQUIRE(widened->blocks[0].out_proj.weight.dtype == Dtype::f32);
    GptModel wide(widened, TorchGenerator(0), kept.options());
    LensRequest lr;
    lr.attribute = true;
    CausalLens a, b;
    GptResult ra, rb;
    LensResult la, lb;
    REQUIRE(a.run(kept, ids, GptRequest(), lr, ra, la).is_ok());
    REQUIRE(b.run(wide, ids, GptRequest(), lr, rb, lb).is_ok());
    CHECK(la.attribution.value == lb.attribution.value);
    for (std::size_t l = 0; l < la.attribution.heads.size(); ++l)
      for (std::size_t h = 0; h < la.attribution.heads[l].size(); ++h)
        CHECK(la.attribution.heads[l][h] == lb.attribution.heads[l][h]);
    CHECK(std::fabs(la.attribution.sum() - la.attribution.value) <=
          1e-4 * std::max(1.0, std::fabs(la.attribution.value)));
  }
}

TEST_CASE("causal lens: with a mean ablation, patching a position after the measured one is no longer 0") {
  // A head's mean runs over every position, so a later token reaches the measured one through it: the
  // residual map's entries past the position must be computed, not taken as 0 (the causal mask alone would).
  const json f = read_json(kFixtures / "lens" / "qwen2.json");
  const std::vector<int> ids = ints(f["ids"]);
  const GptModel model = open(kFixtures / f["model"].get<std::string>(), Isa::automatic);
  const GptConfig& c = model.weights().config;
  const LensTarget t = target_of(f);  // position 4 of 10
  const int T = static_cast<int>(ids.size());
  REQUIRE(t.position < T - 2);
  std::vector<int> corrupted = ids;
  corrupted[static_cast<std::size_t>(T - 1)] =
      (corrupted[static_cast<std::size_t>(T - 1)] + 7) % c.vocab_size;
  Ablation mean = ablation_of(f, AblationKind::mean);
  Patching p;
  const Status st = patch(model, ids, corrupted, t, mean, p);
  INFO(st.error);
  REQUIRE(st.is_ok());
  // The oracle: the corrupted text run with the last position's embeddings taken from the clean text, the
  // same heads mean-ablated, nothing skipped.
  GptModel runner = model.fork();
  PassProbe clean, from;
  clean.capture = true;
  clean.edit_context = ablation_edit(c, mean);
  GptResult r;
  REQUIRE(runner.forward(ids, GptRequest(), clean, r).is_ok());
  Tensor start;
  {
    PassProbe bad;
    bad.capture = true;
    bad.edit_context = ablation_edit(c, mean);
    REQUIRE(runner.forward(corrupted, GptRequest(), bad, r).is_ok());
    start = bad.resid[0];
  }
  std::copy_n(clean.resid[0].ptr() + static_cast<std::size_t>(T - 1) * c.d_model, c.d_model,
              start.ptr() + static_cast<std::size_t>(T - 1) * c.d_model);
  from.start = &start;
  from.edit_context = ablation_edit(c, mean);
  from.logits_row = t.position;
  REQUIRE(runner.forward(corrupted, GptRequest(), from, r).is_ok());
  const double want = (metric_of(r.logits.ptr(), t) - p.corrupted) / (p.clean - p.corrupted);
  CHECK(want != 0.0);
  CHECK(p.residual[0][static_cast<std::size_t>(T - 1)] == doctest::Approx(want).epsilon(1e-9));
  // With the zero ablation the causal mask holds: a token after the position cannot move the metric at all.
  Patching z;
  CHECK(
      patch(model, ids, corrupted, t, ablation_of(f, AblationKind::zero), z).error.find("nothing to patch") !=
      std::string::npos);
}
