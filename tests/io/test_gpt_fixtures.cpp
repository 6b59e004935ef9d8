// Whole GPT-2 models against PyTorch: the fixtures tests/torch/make_gpt_fixtures.py writes with the book's
// GPTModel (seeded, both modes, both dropout flavours) and with weights files in both naming schemes and
// three dtypes. Seeded parameters must match bit for bit (a hash of every tensor), every attention weight and
// logit within 1e-5 relative, greedy generations exactly, and the truncated vocabulary must give the
// fixture's ids.
#include <doctest/doctest.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnviz/gpt.hpp"
#include "attnviz/io/bpe.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "check.hpp"

using namespace attnviz;
using nlohmann::json;

namespace {

const std::filesystem::path kDir = std::filesystem::path(ATTNVIZ_FIXTURES_DIR) / "gpt";
constexpr double kTolerance = 1e-5;  // the chapter-3 fixtures' measure (check.hpp's max_rel_error)

json read_json(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return json::parse(s.str());
}

std::vector<std::filesystem::path> cases() {
  std::vector<std::filesystem::path> v;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(kDir, ec))
    if (e.path().extension() == ".json" &&
        std::isdigit(static_cast<unsigned char>(e.path().filename().string()[0])))
      v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

std::uint64_t fnv1a(const Tensor& t) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = reinterpret_cast<const unsigned char*>(t.ptr());
  for (std::size_t i = 0; i < t.size() * sizeof(float); ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::string hex(std::uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The book's state_dict() names for the engine's weights (PyTorch layouts: Linear (out, in)).
std::vector<std::pair<std::string, Tensor>> book_state_dict(const GptWeights& w) {
  std::vector<std::pair<std::string, Tensor>> sd;
  sd.emplace_back("tok_emb.weight", unpack(w.tok_emb));
  sd.emplace_back("pos_emb.weight", w.pos_emb);
  for (std::size_t i = 0; i < w.blocks.size(); ++i) {
    const GptBlock& b = w.blocks[i];
    const std::string p = "trf_blocks." + std::to_string(i) + ".";
    const auto linear = [&](const std::string& name, const PackedLinear& l) {
      sd.emplace_back(p + name + ".weight", unpack(l.weight));
      if (!l.bias.empty()) sd.emplace_back(p + name + ".bias", l.bias);
    };
    linear("att.W_query", b.query);
    linear("att.W_key", b.key);
    linear("att.W_value", b.value);
    linear("att.out_proj", b.out_proj);
    linear("ff.layers.0", b.fc);
    linear("ff.layers.2", b.proj);
    sd.emplace_back(p + "norm1.scale", b.norm1_scale);
    sd.emplace_back(p + "norm1.shift", b.norm1_shift);
    sd.emplace_back(p + "norm2.scale", b.norm2_scale);
    sd.emplace_back(p + "norm2.shift", b.norm2_shift);
  }
  sd.emplace_back("final_norm.scale", w.final_scale);
  sd.emplace_back("final_norm.shift", w.final_shift);
  if (!w.tied()) sd.emplace_back("out_head.weight", unpack(w.out_head));
  return sd;
}

GptConfig config_of(const json& j) {
  GptConfig c;
  c.vocab_size = j.at("vocab_size"), c.context_length = j.at("context_length"), c.d_model = j.at("emb_dim");
  c.n_heads = j.at("n_heads"), c.n_layers = j.at("n_layers"), c.drop_rate = j.at("drop_rate");
  c.qkv_bias = j.at("qkv_bias");
  return c;
}

void check_parameters(const json& params, const GptWeights& w) {
  const auto sd = book_state_dict(w);
  for (const auto& entry : sd) {
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    INFO(name);
    if (!params.contains(name)) continue;  // gpt2-small's fixture lists a few tensors only
    const json& want = params.at(name);
    // every parameter bit for bit, the normal-drawn embeddings included (torch_rng.hpp)
    CHECK(hex(fnv1a(t)) == want.at("fnv1a64").get<std::string>());
    CHECK(t.data[0] == want.at("first")[0].get<float>());
  }
}

// A bare safetensors file does not say how many heads it has: the case's config does (a folder has
// config.json).
GptLoadOptions load_options(const json& f, Isa isa) {
  GptLoadOptions lo;
  lo.isa = isa;
  if (f.at("source").at("path") != "hf-folder") lo.heads = f.at("config").at("n_heads").get<int>();
  return lo;
}

std::vector<float> flat(const json& rows) {
  std::vector<float> v;
  for (const auto& row : rows)
    for (const auto& x : row) v.push_back(x.get<float>());
  return v;
}

double worst_attention(const json& att, const GptResult& r, int H) {
  double worst = 0.0;
  const std::size_t T = r.ids.size();
  REQUIRE(att.size() == r.layers.size());
  for (std::size_t l = 0; l < att.size(); ++l)
    for (int h = 0; h < H; ++h) {
      const std::vector<float> want = flat(att[l][static_cast<std::size_t>(h)]);
      REQUIRE(want.size() == T * T);
      const Tensor got = r.layers[l].attention.weights.to_tensor();
      worst = std::max(worst, test::max_rel_error(got.slice(h), want.data(), want.size()));
    }
  return worst;
}

}  // namespace

TEST_CASE("GPT-2 fixtures: seeded and loaded models match PyTorch") {
  const std::vector<std::filesystem::path> all = cases();
  REQUIRE(all.size() >= 6);
  Bpe vocab;
  REQUIRE(Bpe::load_dir((kDir / "vocab").string(), vocab).is_ok());
  for (const auto& path : all) {
    const json f = read_json(path);
    if (!f.contains("logits")) continue;  // gpt2-small's few numbers: the next test case
    const std::string name = path.filename().string();
    INFO(name);
    const GptConfig c = config_of(f.at("config"));
    GptOptions o;
    o.train = f.at("train");
    o.dropout_rng = *parse_dropout_rng(f.at("dropout_rng").get<std::string>());
    o.exec.threads = 2;
    const json& src = f.at("source");
    GptModel m;
    if (src.at("kind") == "seeded") {
      REQUIRE(seeded_gpt(c, src.at("seed").get<std::uint64_t>(), o, m).is_ok());
      check_parameters(f.at("params"), m.weights());
    } else {
      auto w = std::make_shared<GptWeights>();
      const Status st =
          load_gpt((kDir / src.at("path").get<std::string>()).string(), load_options(f, o.exec.isa), *w);
      REQUIRE_MESSAGE(st.is_ok(), st.error);
      CHECK(w->config.n_layers == c.n_layers);
      CHECK(w->config.n_heads == c.n_heads);
      CHECK(w->config.d_model == c.d_model);
      m = GptModel(std::move(w), TorchGenerator(0), o);
    }
    const std::vector<int> ids = f.at("ids").get<std::vector<int>>();
    std::vector<int> encoded;
    REQUIRE(vocab.encode(f.at("text").get<std::string>(), encoded).is_ok());
    CHECK(encoded == ids);

    for (Isa isa : available_isas()) {
      INFO(std::string(to_string(isa)));
      GptOptions oi = o;
      oi.exec.isa = isa;
      GptModel mi;
      if (src.at("kind") == "seeded") {
        REQUIRE(seeded_gpt(c, src.at("seed").get<std::uint64_t>(), oi, mi).is_ok());
      } else {
        auto w = std::make_shared<GptWeights>();
        REQUIRE(
            load_gpt((kDir / src.at("path").get<std::string>()).string(), load_options(f, isa), *w).is_ok());
        mi = GptModel(std::move(w), TorchGenerator(0), oi);
      }
      GptRequest req;
      req.all_logits = true;
      GptResult r;
      REQUIRE(mi.forward(ids, req, r).is_ok());
      const double worst = worst_attention(f.at("attention"), r, c.n_heads);
      const std::vector<float> logits = flat(f.at("logits"));
      REQUIRE(logits.size() == r.logits.size());
      const double lw = test::max_rel_error(r.logits.ptr(), logits.data(), logits.size());
      MESSAGE(name << " " << std::string(to_string(isa)) << ": weights " << worst << ", logits " << lw);
      CHECK(worst <= kTolerance);
      CHECK(lw <= kTolerance);

      for (const char* key : {"generate", "generate_long"}) {
        if (!f.contains(key)) continue;
        INFO(key);
        const json& gen = f.at(key);
        std::vector<int> generated;
        GptResult g;
        REQUIRE(mi.generate(ids, gen.at("max_new_tokens").get<int>(), GptRequest{}, generated, g).is_ok());
        std::vector<int> all_ids = ids;
        all_ids.insert(all_ids.end(), generated.begin(), generated.end());
        CHECK(all_ids == gen.at("ids").get<std::vector<int>>());
      }
    }
  }
}

TEST_CASE("GPT-2 fixtures: the book's seeded gpt2-small (163,009,536 parameters) at T = 4") {
  const GptConfig small = *find_gpt_preset("gpt2-small");
  CHECK(parameter_count(small, false) == 163009536);
  CHECK(parameter_count(small, true) == 124412160);
  // One draw of the weights serves the three cases (eval, train cpu, train mkl): they differ only in the
  // pass.
  TorchGenerator g(123);
  auto w = std::make_shared<GptWeights>();
  REQUIRE(build_gpt(small, g, *w).is_ok());
  bool checked_params = false;
  for (const auto& path : cases()) {
    const json f = read_json(path);
    if (f.contains("logits") || f.at("config").at("vocab_size") != 50257) continue;
    const std::string name = path.filename().string();
    INFO(name);
    CHECK(f.at("param_count").at("total").get<std::int64_t>() == parameter_count(small, false));
    if (!checked_params) {
      check_parameters(f.at("params"), *w);
      checked_params = true;
    }
    GptOptions o;
    o.train = f.at("train");
    o.dropout_rng = *parse_dropout_rng(f.at("dropout_rng").get<std::string>());
    o.exec.threads = 2;
    GptModel m(w, g, o);
    const std::vector<int> ids = f.at("ids").get<std::vector<int>>();
    CHECK(ids == std::vector<int>{6109, 3626, 6100, 345});
    GptRequest req;
    req.all_logits = true;
    GptResult r;
    REQUIRE(m.forward(ids, req, r).is_ok());
    const double weights = worst_attention(f.at("attention"), r, small.n_heads);
    double logits = 0.0;
    const json& first16 = f.at("logits_first16");
    for (std::size_t t = 0; t < ids.size(); ++t) {
      std::vector<float> want, got;
      for (const auto& x : first16[t]) want.push_back(x.get<float>());
      got.assign(r.logits.ptr() + t * 50257, r.logits.ptr() + t * 50257 + 16);
      logits = std::max(logits, test::max_rel_error(got.data(), want.data(), 16));
      const float* row = r.logits.ptr() + t * 50257;
      const int argmax = static_cast<int>(std::max_element(row, row + 50257) - row);
      CHECK(argmax == f.at("argmax")[t].get<int>());
      CHECK(row[argmax] == doctest::Approx(f.at("argmax_logit")[t].get<double>()).epsilon(1e-5));
    }
    MESSAGE(name << ": weights " << weights << ", first logits " << logits);
    CHECK(weights <= kTolerance);
    CHECK(logits <= kTolerance);
    for (const char* key : {"generate", "generate_hello"}) {
      if (!f.contains(key)) continue;
      INFO(key);
      const json& gen = f.at(key);
      const std::vector<int> all_ids = gen.at("ids").get<std::vector<int>>();
      const std::vector<int> prompt(all_ids.begin(), all_ids.end() - gen.at("max_new_tokens").get<int>());
      std::vector<int> generated;
      GptResult out;
      REQUIRE(m.generate(prompt, gen.at("max_new_tokens").get<int>(), GptRequest{}, generated, out).is_ok());
      std::vector<int> got = prompt;
      got.insert(got.end(), generated.begin(), generated.end());
      CHECK(got == all_ids);
    }
  }
  CHECK(checked_params);
}

TEST_CASE("GPT-2 fixtures: the tokenizer gives the fixture script's ids, full and truncated vocabulary") {
  const json f = read_json(kDir / "tokenizer.json");
  Bpe full, truncated;
  REQUIRE(Bpe::load_dir(ATTNVIZ_GPT2_DIR, full).is_ok());
  REQUIRE(Bpe::load_dir((kDir / "vocab").string(), truncated).is_ok());
  CHECK(full.size() == f.at("vocab_size_full").get<int>());
  CHECK(truncated.size() == f.at("vocab_size_truncated").get<int>());
  REQUIRE(f.at("cases").size() >= 10);
  for (const json& c : f.at("cases")) {
    const std::string text = c.at("text");
    INFO(text);
    std::vector<int> a, b;
    REQUIRE(full.encode(text, a).is_ok());
    REQUIRE(truncated.encode(text, b).is_ok());
    CHECK(a == c.at("ids_full").get<std::vector<int>>());
    CHECK(b == c.at("ids_truncated").get<std::vector<int>>());
    CHECK(full.decode(a) == text);
    CHECK(truncated.decode(b) == text);
  }
}
