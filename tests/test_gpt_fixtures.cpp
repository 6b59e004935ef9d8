// Whole GPT-2 models against PyTorch: the fixtures tests/torch/make_gpt_fixtures.py writes with the book's
// GPTModel (seeded, both modes, both dropout flavours) and with weights files in both naming schemes and three
// dtypes. Seeded parameters must match bit for bit (a hash of every tensor), every attention weight and logit
// within 1e-5 relative, greedy generations exactly, and the truncated vocabulary must give the fixture's ids.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnviz/gpt.hpp"
#include "bpe.hpp"
#include "check.hpp"
#include "gpt_file.hpp"

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
    if (e.path().extension() == ".json") v.push_back(e.path());
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
  for (const auto& [name, t] : sd) {
    INFO(name);
    if (!params.contains(name)) continue;  // gpt2-small's fixture lists a few tensors only
    const json& want = params.at(name);
    if (name == "tok_emb.weight" || name == "pos_emb.weight") {
      // normal_: the Box-Muller transform (see the README on how exact it is)
      double sum = 0.0;
      for (float x : t.data) sum += x;
      CHECK(sum == doctest::Approx(want.at("sum").get<double>()).epsilon(1e-6).scale(std::sqrt(double(t.size()))));
      const auto& first = want.at("first");
      for (std::size_t i = 0; i < first.size(); ++i)
        CHECK(t.data[i] == doctest::Approx(first[i].get<double>()).epsilon(1e-6));
      MESSAGE(name << (hex(fnv1a(t)) == want.at("fnv1a64").get<std::string>() ? ": bit for bit" : ": within 1e-6"));
    } else {
      CHECK(hex(fnv1a(t)) == want.at("fnv1a64").get<std::string>());
    }
  }
}

}  // namespace

TEST_CASE("GPT-2 fixtures: seeded and loaded models match PyTorch") {
  const std::vector<std::filesystem::path> all = cases();
  REQUIRE(all.size() >= 6);
  Bpe vocab;
  REQUIRE(Bpe::load_dir((kDir / "vocab").string(), vocab).is_ok());
  for (const auto& path : all) {
    const json f = read_json(path);
    if (!f.contains("attention")) continue;  // gpt2-small's few numbers: the next test case
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
      const Status st = load_gpt((kDir / src.at("path").get<std::string>()).string(), GptLoadOptions{}, *w);
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
        GptLoadOptions lo;
        lo.isa = isa;
        REQUIRE(load_gpt((kDir / src.at("path").get<std::string>()).string(), lo, *w).is_ok());
        mi = GptModel(std::move(w), TorchGenerator(0), oi);
      }
      GptRequest req;
      req.all_logits = true;
      GptResult r;
      REQUIRE(mi.forward(ids, req, r).is_ok());
      const int T = static_cast<int>(ids.size());
      const json& att = f.at("attention");
      REQUIRE(att.size() == r.layers.size());
      double worst = 0.0;
      for (std::size_t l = 0; l < att.size(); ++l)
        for (int h = 0; h < c.n_heads; ++h) {
          std::vector<float> want;
          for (const auto& row : att[l][static_cast<std::size_t>(h)])
            for (const auto& x : row) want.push_back(x.get<float>());
          REQUIRE(want.size() == static_cast<std::size_t>(T) * T);
          worst = std::max(worst, test::max_rel_error(r.layers[l].attention.weights.slice(h), want.data(), want.size()));
        }
      std::vector<float> logits;
      for (const auto& row : f.at("logits"))
        for (const auto& x : row) logits.push_back(x.get<float>());
      REQUIRE(logits.size() == r.logits.size());
      const double lw = test::max_rel_error(r.logits.ptr(), logits.data(), logits.size());
      MESSAGE(name << " " << std::string(to_string(isa)) << ": weights " << worst << ", logits " << lw);
      CHECK(worst <= kTolerance);
      CHECK(lw <= kTolerance);

      const json& gen = f.at("generate");
      std::vector<int> generated;
      GptResult g;
      REQUIRE(mi.generate(ids, gen.at("max_new_tokens").get<int>(), GptRequest{}, generated, g).is_ok());
      std::vector<int> all_ids = ids;
      all_ids.insert(all_ids.end(), generated.begin(), generated.end());
      CHECK(all_ids == gen.at("ids").get<std::vector<int>>());
    }
  }
}
