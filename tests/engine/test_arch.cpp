// Today's open decoders against PyTorch: the folders tests/torch/make_arch_fixtures.py writes (tiny random
// llama, qwen2, qwen3, gemma3_text and gpt_neox models in Hugging Face's layout, one BF16, one sharded) and
// what its reference, written from the published modeling code, computes. Every layer's attention weights and
// the logits must equal it within 1e-5 relative on every ISA, layer 0's rotated queries and keys too, and a
// pass that extends the previous one (a typed token) must give the full pass's numbers bit for bit.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnviz/gpt.hpp"
#include "attnviz/io/decoder.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "attnviz/io/model_source.hpp"
#include "check.hpp"

using namespace attnviz;
using nlohmann::json;

namespace {

const std::filesystem::path kDir = std::filesystem::path(ATTNVIZ_FIXTURES_DIR) / "arch";
constexpr double kTolerance = 1e-5;

json read_json(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return json::parse(s.str());
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const char* const kCases[] = {"llama", "llama3_scaled", "llama_bf16", "qwen2",          "qwen2_sharded",
                              "qwen3", "gemma3",        "pythia",     "neox_sequential"};

std::vector<float> floats(const json& a) {
  std::vector<float> v;
  v.reserve(a.size());
  for (const json& x : a) v.push_back(x.get<float>());
  return v;
}

GptRequest everything() {
  GptRequest r;
  r.all_logits = true;
  r.qkv = true;
  r.stages = kStageAll;
  return r;
}

void check_against(const GptResult& r, const json& want, const GptConfig& c, const std::string& what) {
  const int T = static_cast<int>(r.ids.size());
  REQUIRE(r.layers.size() == static_cast<std::size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    const std::vector<float> w = floats(want["weights"][static_cast<std::size_t>(l)]);
    const Tensor got = r.layers[static_cast<std::size_t>(l)].attention.weights.to_tensor();
    REQUIRE(got.size() == w.size());
    INFO(what << ": layer " << l << "'s attention weights");
    CHECK(test::max_rel_error(got.ptr(), w.data(), w.size()) <= kTolerance);
  }
  const std::vector<float> logits = floats(want["logits"]);
  REQUIRE(r.logits.size() == logits.size());
  INFO(what << ": logits");
  CHECK(test::max_rel_error(r.logits.ptr(), logits.data(), logits.size()) <= kTolerance);
  // layer 0's queries after their norm and rotation, and its keys (kept per query head: head h shows
  // key/value head h / (H / KV))
  const Result& a0 = r.layers[0].attention;
  const std::vector<float> q = floats(want["q_rot"]), k = floats(want["k_rot"]);
  REQUIRE(a0.q.size() == q.size());
  CHECK(test::max_rel_error(a0.q.ptr(), q.data(), q.size()) <= kTolerance);
  const int H = c.n_heads, KV = c.kv_heads(), hd = c.head_dim();
  std::vector<float> k_per_head(static_cast<std::size_t>(T) * H * hd);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h)
      for (int x = 0; x < hd; ++x)
        k_per_head[(static_cast<std::size_t>(t) * H + h) * hd + x] =
            k[(static_cast<std::size_t>(t) * KV + h / (H / KV)) * hd + x];
  REQUIRE(a0.k.size() == k_per_head.size());
  CHECK(test::max_rel_error(a0.k.ptr(), k_per_head.data(), k_per_head.size()) <= kTolerance);
}

}  // namespace

TEST_CASE("decoders: every architecture's attention and logits equal PyTorch's on every ISA") {
  for (const char* name : kCases) {
    const std::filesystem::path dir = kDir / name;
    const json want = read_json(dir / "expected.json");
    std::vector<int> ids;
    for (const json& id : want["ids"]) ids.push_back(id.get<int>());
    for (Isa isa : available_isas()) {
      CAPTURE(name);
      CAPTURE(to_string(isa));
      GptLoadOptions opts;
      opts.isa = isa;
      auto w = std::make_shared<GptWeights>();
      const Status st = load_gpt(dir.string(), opts, *w);
      INFO(st.error);
      REQUIRE(st.is_ok());
      CHECK(w->config.arch.name == read_json(dir / "config.json")["model_type"].get<std::string>());
      const GptConfig c = w->config;
      GptOptions o;
      o.train = false;
      o.exec = Exec{isa, 2};
      GptModel m(w, TorchGenerator(0), o);
      GptResult r;
      const Status fs = m.forward(ids, everything(), r);
      INFO(fs.error);
      REQUIRE(fs.is_ok());
      check_against(r, want, c, std::string(name) + " on " + to_string(isa));
      // Sliding-window layers mask the keys before the window: exactly 0 there, and every row sums to 1.
      for (int l = 0; l < c.n_layers; ++l) {
        const Result& a = r.layers[static_cast<std::size_t>(l)].attention;
        CHECK(a.shape.window == (c.local_layer(l) ? c.arch.window : 0));
        const int T = static_cast<int>(ids.size());
        for (int h = 0; h < c.n_heads; ++h)
          for (int i = 0; i < T; ++i) {
            double sum = 0.0;
            for (int j = 0; j < T; ++j) {
              const float v = a.weights.at(h, i, j);
              if (a.masked(i, j)) CHECK(v == 0.0f);
              sum += v;
            }
            CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
          }
      }
      // The q/k steps kept for the stepper: the projections, the normed q and k where the model has q/k
      // norms, and the rotation, which at position 0 turns by angle 0 (row 0 unchanged, bit for bit).
      const GptLayer& l0 = r.layers[0];
      REQUIRE(l0.q_proj.size() == static_cast<std::size_t>(ids.size()) * c.q_width());
      REQUIRE(l0.k_proj.size() == static_cast<std::size_t>(ids.size()) * c.kv_width());
      CHECK(l0.q_normed.empty() == !c.arch.qk_norm);
      const Tensor& before_rotation = c.arch.qk_norm ? l0.q_normed : l0.q_proj;
      CHECK(std::memcmp(before_rotation.ptr(), l0.attention.q.ptr(),
                        static_cast<std::size_t>(c.q_width()) * 4) == 0);
      if (isa == Isa::scalar) continue;
      // Typing: the pass over all but the last 3 tokens, then the whole text, reuses the prefix's rows and
      // gives the full pass's numbers exactly.
      GptModel typing(w, TorchGenerator(0), o);
      GptResult t;
      REQUIRE(typing.forward(std::vector<int>(ids.begin(), ids.end() - 3), everything(), t).is_ok());
      REQUIRE(typing.forward(ids, everything(), t).is_ok());
      CHECK(t.reused == static_cast<int>(ids.size()) - 3);
      REQUIRE(t.logits.size() == r.logits.size());
      CHECK(std::memcmp(t.logits.ptr(), r.logits.ptr(), r.logits.size() * sizeof(float)) == 0);
      for (int l = 0; l < c.n_layers; ++l) {
        const Result& a = t.layers[static_cast<std::size_t>(l)].attention;
        const Result& b = r.layers[static_cast<std::size_t>(l)].attention;
        const GptLayer& tl = t.layers[static_cast<std::size_t>(l)];
        const GptLayer& rl = r.layers[static_cast<std::size_t>(l)];
        for (auto [x, y] : {std::pair{&a.weights, &b.weights}, {&a.scores, &b.scores}}) {
          const Tensor xt = x->to_tensor(), yt = y->to_tensor();
          REQUIRE(xt.size() == yt.size());
          if (!xt.empty()) CHECK(std::memcmp(xt.ptr(), yt.ptr(), xt.size() * sizeof(float)) == 0);
        }
        for (auto [x, y] : {std::pair{&tl.q_proj, &rl.q_proj},
                            {&tl.k_normed, &rl.k_normed},
                            {&a.q, &b.q},
                            {&a.k, &b.k},
                            {&a.context, &b.context}}) {
          REQUIRE(x->size() == y->size());
          if (!x->empty()) CHECK(std::memcmp(x->ptr(), y->ptr(), x->size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("decoders: config.json's description of each architecture") {
  DecoderConfig d;
  REQUIRE(read_decoder_config("gemma3", read_text(kDir / "gemma3" / "config.json"), d).is_ok());
  const GptArch& g = d.config.arch;
  CHECK(g.norm == NormKind::rms_norm);
  CHECK(g.norm_plus_one);
  CHECK(g.embed_scale);
  CHECK(g.residual == ResidualKind::sandwich);
  CHECK(g.mlp == MlpKind::gated);
  CHECK(g.act == Activation::gelu_tanh);
  CHECK(g.qk_norm);
  CHECK(d.config.kv_heads() == 1);
  CHECK(d.config.head_dim() == 16);
  CHECK(g.window == 5);
  CHECK(g.local == std::vector<char>{1, 1, 0});
  CHECK(g.rope_scaling == RopeScaling::linear);
  CHECK(g.rope_factor == 8.0);
  CHECK(g.rope_local_theta == 10000.0);
  CHECK(g.attn_scale == doctest::Approx(1.0 / std::sqrt(24.0)));
  CHECK(d.tied);

  REQUIRE(read_decoder_config("pythia", read_text(kDir / "pythia" / "config.json"), d).is_ok());
  CHECK(d.config.arch.norm == NormKind::layer_norm);
  CHECK(d.config.arch.residual == ResidualKind::parallel);
  CHECK(d.config.arch.act == Activation::gelu_erf);
  CHECK(d.config.arch.rotary_dims == 2);  // 25% of a head of 8
  CHECK(!d.tied);

  REQUIRE(read_decoder_config("llama3", read_text(kDir / "llama3_scaled" / "config.json"), d).is_ok());
  CHECK(d.config.arch.rope_scaling == RopeScaling::llama3);
  CHECK(d.config.arch.rope_theta == 500000.0);
  CHECK(d.config.arch.rope_original_context == 16);
  CHECK(d.config.kv_heads() == 2);
}

TEST_CASE("decoders: a config key or value the engine does not honour is refused by name") {
  const std::string base = read_text(kDir / "llama" / "config.json");
  json j = json::parse(base);
  const auto refused = [](const json& cfg, const std::string& needle) {
    DecoderConfig d;
    const Status st = read_decoder_config("config.json", cfg.dump(), d);
    INFO(st.error);
    CHECK(!st.is_ok());
    CHECK(st.error.find(needle) != std::string::npos);
    CHECK(st.error.find('\n') == std::string::npos);
  };
  json x = j;
  x["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  refused(x, "'yarn'");
  x = j;
  x["some_new_key"] = 1;
  refused(x, "'some_new_key'");
  x = j;
  x["num_hidden_layers"] = 1000000000;
  refused(x, "num_hidden_layers");
  x = j;
  x["num_key_value_heads"] = 4;  // 6 query heads cannot share 4
  refused(x, "key/value heads");
  x = j;
  x["hidden_act"] = "relu";
  refused(x, "hidden_act");
  x = j;
  x["attention_dropout"] = 0.1;
  refused(x, "attention_dropout");
  x = j;
  x["model_type"] = "mamba";
  refused(x, "'mamba'");
  x = j;
  x["rotary_pct"] = 0.5;  // GPT-NeoX's key in a llama config
  refused(x, "'rotary_pct'");
  x = j;
  x.erase("hidden_size");
  refused(x, "hidden_size");
  json gemma = json::parse(read_text(kDir / "gemma3" / "config.json"));
  gemma["final_logit_softcapping"] = 30.0;
  refused(gemma, "final_logit_softcapping");
  gemma = json::parse(read_text(kDir / "gemma3" / "config.json"));
  gemma["layer_types"] = {"sliding_attention"};
  refused(gemma, "layer_types");
  json qwen = json::parse(read_text(kDir / "qwen2" / "config.json"));
  qwen["use_sliding_window"] = true;
  refused(qwen, "use_sliding_window");
}

TEST_CASE("decoders: a missing or misshapen tensor, or another model's, is refused in one line") {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("attnviz_arch_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  // The llama fixture's weights with a config naming 3 layers: layer 2's tensors are missing.
  fs::copy_file(kDir / "llama" / "model.safetensors", tmp / "model.safetensors");
  json cfg = json::parse(read_text(kDir / "llama" / "config.json"));
  cfg["num_hidden_layers"] = 3;
  std::ofstream(tmp / "config.json") << cfg.dump();
  GptWeights w;
  Status st = load_gpt(tmp.string(), {}, w);
  CHECK(!st.is_ok());
  CHECK(st.error.find("'model.layers.2.input_layernorm.weight' is missing") != std::string::npos);
  // One layer: layer 1's tensors are not part of the model.
  cfg["num_hidden_layers"] = 1;
  std::ofstream(tmp / "config.json") << cfg.dump();
  st = load_gpt(tmp.string(), {}, w);
  CHECK(!st.is_ok());
  CHECK(st.error.find("'model.layers.1.") != std::string::npos);
  // Another width: a shape names the tensor.
  cfg["num_hidden_layers"] = 2;
  cfg["intermediate_size"] = 81;
  std::ofstream(tmp / "config.json") << cfg.dump();
  st = load_gpt(tmp.string(), {}, w);
  CHECK(!st.is_ok());
  CHECK(st.error.find("gate_proj.weight' has shape [80, 48], not [81, 48]") != std::string::npos);
  // An index naming a shard outside the folder.
  fs::remove(tmp / "model.safetensors");
  cfg["intermediate_size"] = 80;
  std::ofstream(tmp / "config.json") << cfg.dump();
  std::ofstream(tmp / "model.safetensors.index.json")
      << R"({"weight_map": {"model.embed_tokens.weight": "../llama/model.safetensors"}})";
  st = load_gpt(tmp.string(), {}, w);
  CHECK(!st.is_ok());
  CHECK(st.error.find("not a file name in the model's folder") != std::string::npos);
  // A budget the weights do not fit: refused with both sizes before anything is packed.
  fs::copy_file(kDir / "llama" / "model.safetensors", tmp / "model.safetensors");
  GptLoadOptions small;
  small.memory_budget = 1000;
  st = load_gpt(tmp.string(), small, w);
  CHECK(!st.is_ok());
  CHECK(st.error.find("the budget is 1.0 kB") != std::string::npos);
  fs::remove_all(tmp);
}

TEST_CASE("decoders: open_model opens a folder without a tokenizer by ids, and the counts agree") {
  ModelSpec spec;
  spec.model = (kDir / "qwen3").string();
  spec.ids_only = true;
  spec.options.train = false;
  OpenedModel m;
  const Status st = open_model(spec, m);
  INFO(st.error);
  REQUIRE(st.is_ok());
  const GptWeights& w = m.model.weights();
  // packed_bytes before loading says what the loaded weights hold
  CHECK(packed_bytes(w.config, w.tied(), w.isa) == w.bytes());
  // the parameter count is the file's: every tensor's elements
  SafetensorsFile f;
  REQUIRE(SafetensorsFile::open((kDir / "qwen3" / "model.safetensors").string(), f).is_ok());
  std::int64_t n = 0;
  for (const SafeTensor& t : f.tensors()) n += static_cast<std::int64_t>(t.numel);
  CHECK(parameter_count(w.config, w.tied()) == n);
}

TEST_CASE("decoders: BF16 weights stay 16-bit in memory and give the numbers of their float32 copy") {
  const std::filesystem::path dir = kDir / "llama_bf16";
  const json want = read_json(dir / "expected.json");
  std::vector<int> ids;
  for (const json& id : want["ids"]) ids.push_back(id.get<int>());
  for (Isa isa : available_isas()) {
    CAPTURE(to_string(isa));
    GptLoadOptions kept, widened;
    kept.isa = widened.isa = isa;
    widened.keep_16bit = false;
    auto a = std::make_shared<GptWeights>(), b = std::make_shared<GptWeights>();
    REQUIRE(load_gpt(dir.string(), kept, *a).is_ok());
    REQUIRE(load_gpt(dir.string(), widened, *b).is_ok());
    CHECK(a->tok_emb.dtype == Dtype::bf16);
    CHECK(a->blocks[0].gate.weight.dtype == Dtype::bf16);
    CHECK(b->tok_emb.dtype == Dtype::f32);
    // the matrices take half the memory; what packed_bytes says before loading is what the load holds
    CHECK(a->bytes() < b->bytes() * 6 / 10);
    CHECK(packed_bytes(a->config, a->tied(), a->isa, Dtype::bf16) == a->bytes());
    CHECK(packed_bytes(b->config, b->tied(), b->isa) == b->bytes());
    GptOptions o;
    o.train = false;
    o.exec = Exec{isa, 2};
    GptModel ma(a, TorchGenerator(0), o), mb(b, TorchGenerator(0), o);
    GptResult ra, rb;
    REQUIRE(ma.forward(ids, everything(), ra).is_ok());
    REQUIRE(mb.forward(ids, everything(), rb).is_ok());
    REQUIRE(ra.logits.size() == rb.logits.size());
    CHECK(std::memcmp(ra.logits.ptr(), rb.logits.ptr(), ra.logits.size() * sizeof(float)) == 0);
    check_against(ra, want, a->config, std::string("llama_bf16 kept 16-bit on ") + to_string(isa));
    // another ISA's panel width: the 16-bit panels repack exactly
    if (isa != Isa::scalar) {
      const GptWeights r = repacked(*a, Isa::scalar);
      CHECK(r.tok_emb.dtype == Dtype::bf16);
      for (int o2 : {0, 5, a->config.vocab_size - 1})
        for (int i : {0, 7, a->config.d_model - 1}) CHECK(r.tok_emb.at(o2, i) == a->tok_emb.at(o2, i));
    }
  }
}
