// Messages that name the real problem (issue 44): a model folder's config.json that fails strict parsing is
// refused by its own error, never read as another architecture's; a sharded model loads up to the stated cap
// of shards, and the cap is checked once; every size in a message is its real value, never "0.0 MB". The
// folders, configs and sizes are generated here.
#include <doctest/doctest.h>

#if !defined(__EMSCRIPTEN__)
#include <sys/resource.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnviz/engine.hpp"
#include "attnviz/gpt.hpp"
#include "attnviz/io/decoder.hpp"
#include "attnviz/io/files.hpp"
#include "attnviz/io/gpt_config.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "attnviz/io/hf_hub.hpp"
#include "attnviz/io/safetensors.hpp"
#include "cli_run.hpp"
#include "config_args.hpp"
#include "safetensors_writer.hpp"

using namespace attnviz;
using attnviz::test::check_refused;
using attnviz::test::cli;
using attnviz::test::Run;
using attnviz::test::TempDir;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A tiny llama (d_model 8, 2 query heads sharing 1 key/value head, feed-forward 16, 16 tokens): its
// config.json and its tensors in the order Hugging Face lists them, each with known values.
struct TinyLlama {
  int layers = 2;
  static constexpr std::uint64_t V = 16, D = 8, F = 16, KV = 4;

  json config() const {
    return {{"model_type", "llama"},    {"hidden_size", D},
            {"intermediate_size", F},   {"num_attention_heads", 2},
            {"num_key_value_heads", 1}, {"num_hidden_layers", layers},
            {"vocab_size", V},          {"max_position_embeddings", 16},
            {"rms_norm_eps", 1e-5},     {"rope_theta", 10000.0},
            {"hidden_act", "silu"},     {"tie_word_embeddings", true}};
  }
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> tensors() const {
    std::vector<std::pair<std::string, std::vector<std::uint64_t>>> t{{"model.embed_tokens.weight", {V, D}}};
    for (int i = 0; i < layers; ++i) {
      const std::string b = "model.layers." + std::to_string(i) + ".";
      t.push_back({b + "input_layernorm.weight", {D}});
      t.push_back({b + "self_attn.q_proj.weight", {D, D}});
      t.push_back({b + "self_attn.k_proj.weight", {KV, D}});
      t.push_back({b + "self_attn.v_proj.weight", {KV, D}});
      t.push_back({b + "self_attn.o_proj.weight", {D, D}});
      t.push_back({b + "post_attention_layernorm.weight", {D}});
      t.push_back({b + "mlp.gate_proj.weight", {F, D}});
      t.push_back({b + "mlp.up_proj.weight", {F, D}});
      t.push_back({b + "mlp.down_proj.weight", {D, F}});
    }
    t.push_back({"model.norm.weight", {D}});
    return t;
  }

  // config.json and the weights in `shards` files (1: one model.safetensors; more: an index and shards
  // model-NNNNN-of-MMMMM.safetensors, the tensors dealt out in turn).
  void write(const fs::path& dir, int shards) const {
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << config().dump();
    const auto all = tensors();
    REQUIRE(shards >= 1);
    REQUIRE(static_cast<std::size_t>(shards) <= all.size());
    std::vector<test::SafetensorsWriter> w(static_cast<std::size_t>(shards));
    json map = json::object();
    char name[64];
    for (std::size_t i = 0; i < all.size(); ++i) {
      std::size_t n = 1;
      for (auto s : all[i].second) n *= static_cast<std::size_t>(s);
      const std::size_t shard = i % static_cast<std::size_t>(shards);
      w[shard].add(all[i].first, Dtype::f32, all[i].second, test::known_values(n, static_cast<int>(i)));
      std::snprintf(name, sizeof name, "model-%05zu-of-%05d.safetensors", shard + 1, shards);
      map[all[i].first] = name;
    }
    const auto put = [&](const fs::path& p, const test::Bytes& b) {
      std::ofstream f(p, std::ios::binary);
      f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
      REQUIRE(f.good());
    };
    if (shards == 1) {
      put(dir / "model.safetensors", w[0].bytes());
      return;
    }
    for (std::size_t s = 0; s < w.size(); ++s) {
      std::snprintf(name, sizeof name, "model-%05zu-of-%05d.safetensors", s + 1, shards);
      put(dir / name, w[s].bytes());
    }
    std::ofstream(dir / "model.safetensors.index.json") << json{{"weight_map", map}}.dump();
  }
};

Status load(const fs::path& dir, GptWeights& w) {
  return load_gpt(dir.string(), {}, w);
}

// The texts of config.json that fail strict parsing, each in place of a valid config `base` (an object's
// text): what each must be refused for (a piece of the message). Generated from the base, so that the same
// kinds of breakage reach every architecture's folder.
std::vector<std::pair<std::string, std::string>> broken_configs(const json& base, const std::string& key) {
  std::string text = base.dump();
  REQUIRE(text.back() == '}');
  const std::string body = text.substr(1, text.size() - 2);  // the members, without the braces
  const json v = base.at(key);
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* literal : {"NaN", "-NaN", "Infinity", "-Infinity", "nan", "inf"})
    out.push_back({"{" + body + ", \"layer_norm_eps\": " + literal + "}", "not JSON"});
  for (const char* literal : {"1e999", "-1e400"})
    out.push_back({"{" + body + ", \"layer_norm_eps\": " + literal + "}",
                   std::string("not JSON (number overflow parsing '") + literal + "')"});
  // NaN in place of a size the architecture reads
  {
    json b = base;
    b.erase(key);
    std::string t = b.dump();
    out.push_back({t.substr(0, t.size() - 1) + ", \"" + key + "\": NaN}", "not JSON"});
  }
  out.push_back({"{" + body + ", \"" + key + "\": " + v.dump() + "}", "key '" + key + "' appears twice"});
  out.push_back({"{\"" + key + "\": " + v.dump() + ", " + body + "}", "key '" + key + "' appears twice"});
  out.push_back(
      {"{" + body + ", \"nested\": {\"a\": 1, \"b\": {\"c\": 2, \"c\": 3}}}", "key 'c' appears twice"});
  out.push_back({text + " {}", "not JSON"});
  out.push_back({text + "garbage", "not JSON"});
  out.push_back({text + std::string(1, '\0') + "{\"model_type\": \"gpt2\"}", "NUL byte at offset"});
  out.push_back({std::string(200, '[') + std::string(200, ']'), "nested deeper than 64"});
  out.push_back({"{" + body + ", \"deep\": " + std::string(80, '[') + std::string(80, ']') + "}",
                 "nested deeper than 64"});
  out.push_back({"[" + text + "]", "not a JSON object"});
  out.push_back({"\"llama\"", "not a JSON object"});
  out.push_back({"", "not JSON"});
  out.push_back({"{" + body, "not JSON"});
  out.push_back({"{" + body + ", \"pad\": \"" + std::string(kMaxConfigBytes, 'x') + "\"}",
                 "more than the"});  // read_untrusted_file's cap, or the parser's for a text in hand
  for (const json& type : {json(42), json(nullptr), json::array({"llama"}), json::object(), json(true)}) {
    json b = base;
    b["model_type"] = type;
    out.push_back({b.dump(), "model_type is " +
                                 (type.is_array()    ? std::string("an array")
                                  : type.is_object() ? std::string("an object")
                                                     : type.dump()) +
                                 ", not a string"});
  }
  return out;
}

}  // namespace

TEST_CASE("config.json that fails strict parsing is refused by name, never read as another architecture") {
  TempDir tmp("strict_config");
  // A llama folder (one file, and sharded), a GPT-2 folder (Hugging Face's and the book's naming), and a
  // weights file given by path beside its folder's config.json.
  TinyLlama llama;
  llama.write(tmp.path / "llama", 1);
  llama.write(tmp.path / "llama_split", 3);
  test::TinyGpt gpt;
  gpt.build();
  fs::create_directories(tmp.path / "gpt2");
  tmp.write("gpt2/model.safetensors", gpt.bytes());
  test::TinyGpt book;
  book.scheme = test::TinyGpt::Scheme::book;
  book.build();
  fs::create_directories(tmp.path / "book");
  tmp.write("book/model.safetensors", book.bytes());
  const json gpt2_config = {{"model_type", "gpt2"},       {"n_embd", gpt.d},
                            {"n_layer", gpt.layers},      {"n_head", 2},
                            {"n_positions", gpt.context}, {"vocab_size", gpt.vocab}};
  const json book_config = {{"emb_dim", book.d},
                            {"n_layers", book.layers},
                            {"n_heads", 2},
                            {"context_length", book.context},
                            {"vocab_size", book.vocab}};
  struct Folder {
    std::string dir, path;  // the folder holding config.json, and what is loaded
    json config;
    std::string key;  // a size key of its architecture
  };
  const Folder folders[] = {
      {"llama", "llama", llama.config(), "hidden_size"},
      {"llama_split", "llama_split", llama.config(), "num_hidden_layers"},
      {"gpt2", "gpt2", gpt2_config, "n_embd"},
      {"book", "book", book_config, "emb_dim"},
      {"gpt2", "gpt2/model.safetensors", gpt2_config, "n_layer"},
  };
  for (const Folder& f : folders) {
    const fs::path dir = tmp.path / f.dir;
    const std::string where = (dir / "config.json").string();
    // The valid config loads: the breakage below is the config's alone.
    std::ofstream(dir / "config.json") << f.config.dump();
    GptWeights w;
    {
      const Status st = load(tmp.path / f.path, w);
      INFO(f.path, ": ", st.error);
      REQUIRE(st.is_ok());
    }
    int n = 0;
    for (const auto& [text, why] : broken_configs(f.config, f.key)) {
      {
        std::ofstream c(dir / "config.json", std::ios::binary | std::ios::trunc);
        c.write(text.data(), static_cast<std::streamsize>(text.size()));
      }
      CAPTURE(f.path);
      CAPTURE(n++);
      const Status st = load(tmp.path / f.path, w);
      INFO(st.error);
      CHECK(!st.is_ok());
      // The config's own error: it names the file and the problem, in one line, and nothing of the weights.
      CHECK(
          (st.error.rfind(where + ": ", 0) == 0 || st.error.rfind("cannot read '" + where + "': ", 0) == 0));
      CHECK(st.error.find(why) != std::string::npos);
      CHECK(st.error.find('\n') == std::string::npos);
      for (const char* other : {"tensor", "wte.weight", "tok_emb", "sharded", "GPT-2 weights"})
        CHECK(st.error.find(other) == std::string::npos);
    }
    std::ofstream(dir / "config.json") << f.config.dump();
  }
  // The engine's own entry: the text decides nothing when it fails, and says why.
  std::string type = "stale";
  const Status st = config_model_type("x/config.json", "{\"model_type\": \"llama\", \"a\": NaN}", type);
  CHECK(st.error.rfind("x/config.json: not JSON", 0) == 0);
  CHECK(type.empty());
  REQUIRE(config_model_type("x/config.json", "{\"model_type\": \"qwen3\"}", type).is_ok());
  CHECK(type == "qwen3");
  REQUIRE(config_model_type("x/config.json", "{\"n_layer\": 2}", type).is_ok());
  CHECK(type.empty());
  // The page's entry (bytes and a config text): the same refusal, naming config.json.
  const test::Bytes bytes = gpt.bytes();
  GptWeights w;
  const Status page =
      load_gpt(test::shared(bytes), "model.safetensors",
               std::string("{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_embd\": 8}"), {}, w);
  CHECK(page.error == "config.json: key 'n_embd' appears twice");
}

TEST_CASE("attnviz-cli --model: a config.json that fails strict parsing is refused by name") {
  TempDir tmp("strict_config_cli");
  TinyLlama llama;
  llama.write(tmp.path / "llama", 1);
  test::TinyGpt gpt;
  gpt.build();
  fs::create_directories(tmp.path / "gpt2");
  tmp.write("gpt2/model.safetensors", gpt.bytes());
  const json gpt2_config = {{"model_type", "gpt2"},       {"n_embd", gpt.d},
                            {"n_layer", gpt.layers},      {"n_head", 2},
                            {"n_positions", gpt.context}, {"vocab_size", gpt.vocab}};
  const std::pair<std::string, json> folders[] = {{"llama", llama.config()}, {"gpt2", gpt2_config}};
  for (const auto& [name, config] : folders) {
    const fs::path dir = tmp.path / name;
    std::ofstream(dir / "config.json") << config.dump();
    const Run ok = cli({"--model", dir.string(), "--ids", "1,2,3", "--json"});
    CAPTURE(ok.err);
    REQUIRE(ok.status == 0);
    const std::string where = (dir / "config.json").string();
    const std::string key = name == "llama" ? "hidden_size" : "n_embd";
    for (const auto& [text, why] : broken_configs(config, key)) {
      {
        std::ofstream c(dir / "config.json", std::ios::binary | std::ios::trunc);
        c.write(text.data(), static_cast<std::streamsize>(text.size()));
      }
      check_refused({"--model", dir.string(), "--ids", "1,2,3"}, where);
      check_refused({"--model", dir.string(), "--ids", "1,2,3"}, why);
    }
  }
}

TEST_CASE("a sharded model loads in up to kMaxWeightShards shards, and more are refused naming the cap") {
  TempDir tmp("shards");
  // 74 shards (64 files could be mapped at once: this model was refused), and the same tensors in one file.
  TinyLlama llama;
  llama.layers = 8;  // 74 tensors
  REQUIRE(llama.tensors().size() == 74);
  llama.write(tmp.path / "one", 1);
  llama.write(tmp.path / "s74", 74);
  const std::vector<int> ids = {1, 5, 9, 2, 15};
  GptRequest request;
  request.all_logits = true;
  request.stages = kStageAll;
  const auto run = [&](const fs::path& dir, GptResult& r) {
    auto w = std::make_shared<GptWeights>();
    const Status st = load(dir, *w);
    INFO(dir.string(), ": ", st.error);
    REQUIRE(st.is_ok());
    GptOptions o;
    o.train = false;
    GptModel m(w, TorchGenerator(0), o);
    REQUIRE(m.forward(ids, request, r).is_ok());
  };
  GptResult one, s74;
  run(tmp.path / "one", one);
  run(tmp.path / "s74", s74);
  REQUIRE(one.logits.data.size() == ids.size() * TinyLlama::V);
  CHECK(s74.logits.data == one.logits.data);
  REQUIRE(one.layers.size() == 8);
  for (std::size_t l = 0; l < 8; ++l)
    CHECK(s74.layers[l].attention.weights.data == one.layers[l].attention.weights.data);
  // The CLI too.
  const Run a = cli({"--model", (tmp.path / "one").string(), "--ids", "1,5,9", "--json"});
  const Run b = cli({"--model", (tmp.path / "s74").string(), "--ids", "1,5,9", "--json"});
  CAPTURE(b.err);
  REQUIRE(a.status == 0);
  REQUIRE(b.status == 0);
  CHECK(json::parse(a.out).at("logits") == json::parse(b.out).at("logits"));

  // The cap itself: 1,000 shards load (111 layers: 1,001 tensors, two in the first shard).
  static_assert(kMaxWeightShards == 1000);
  static_assert(SafetensorsFile::kMaxMappedFiles >= kMaxWeightShards);
  llama.layers = 111;
  REQUIRE(llama.tensors().size() == 1001);
  llama.write(tmp.path / "s1000", 1000);
#if defined(__EMSCRIPTEN__)
  {
    GptWeights w;
    const Status st = load(tmp.path / "s1000", w);
    INFO(st.error);
    CHECK(st.is_ok());
    CHECK(w.config.n_layers == 111);
  }
#else
  {
    // Under a soft limit on open files below the shards (often 1,024 elsewhere; 256 here), the loader raises
    // it toward the hard limit.
    struct rlimit before {};
    REQUIRE(getrlimit(RLIMIT_NOFILE, &before) == 0);
    struct rlimit low = before;
    low.rlim_cur = std::min<rlim_t>(before.rlim_cur, 256);
    REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
    GptWeights w;
    const Status st = load(tmp.path / "s1000", w);
    struct rlimit after {};
    REQUIRE(getrlimit(RLIMIT_NOFILE, &after) == 0);
    setrlimit(RLIMIT_NOFILE, &before);
    INFO(st.error);
    if (before.rlim_max == RLIM_INFINITY || before.rlim_max >= 1064) {
      CHECK(st.is_ok());
      CHECK(w.config.n_layers == 111);
      CHECK(after.rlim_cur >= 1064);
    } else {  // a hard limit too low: refused, naming it
      CHECK(st.error.find("ulimit -n") != std::string::npos);
    }
  }
#endif
  // One over: refused from the index alone, naming the cap, before any shard is opened (none exists).
  {
    json map = json::object();
    char name[64];
    for (int i = 0; i <= static_cast<int>(kMaxWeightShards); ++i) {
      std::snprintf(name, sizeof name, "model-%05d-of-01001.safetensors", i + 1);
      map["t" + std::to_string(i)] = name;
    }
    fs::create_directories(tmp.path / "s1001");
    std::ofstream(tmp.path / "s1001" / "config.json") << llama.config().dump();
    std::ofstream(tmp.path / "s1001" / "model.safetensors.index.json") << json{{"weight_map", map}}.dump();
    GptWeights w;
    const Status st = load(tmp.path / "s1001", w);
    CHECK(st.error == (tmp.path / "s1001" / "model.safetensors.index.json").string() +
                          ": names more than 1000 shards, the most attnviz reads");
    check_refused({"--model", (tmp.path / "s1001").string(), "--ids", "1"}, "names more than 1000 shards");
  }
  // The index is read as strictly as config.json: a tensor named twice is refused, not the last one kept.
  {
    const fs::path dir = tmp.path / "s74";
    std::string index;
    REQUIRE(read_untrusted_file((dir / "model.safetensors.index.json").string(), 1 << 20, index).is_ok());
    const std::string dup =
        index.substr(0, index.size() - 2) + ",\"model.norm.weight\":\"model-00001-of-00074.safetensors\"}}";
    std::ofstream(dir / "model.safetensors.index.json", std::ios::trunc) << dup;
    GptWeights w;
    CHECK(load(dir, w).error ==
          (dir / "model.safetensors.index.json").string() + ": key 'model.norm.weight' appears twice");
  }
  // The hub's downloader takes the same cap, before anything is downloaded.
  {
    json map = json::object();
    for (int i = 0; i <= static_cast<int>(kMaxWeightShards); ++i)
      map["t" + std::to_string(i)] = "m-" + std::to_string(i) + ".safetensors";
    std::vector<std::string> shards;
    std::uint64_t total = 0;
    CHECK(parse_shard_index(json{{"weight_map", map}}.dump(), shards, total).error ==
          "names more than 1000 shards, the most attnviz reads");
  }
}

namespace {

// The value a format_bytes text stands for, and the half-unit of its last digit: "13.3 kB" is 13,300 +- 50.
struct Parsed {
  double number = -1.0, value = -1.0, half_unit = 0.0;
};
Parsed parse_size(const std::string& s) {
  Parsed p;
  char unit[8] = {};
  double v = 0.0;
  if (std::sscanf(s.c_str(), "%lf %7s", &v, unit) != 2) return p;
  const std::string u = unit;
  const double scale = u == "kB"                       ? 1e3
                       : u == "MB"                     ? 1e6
                       : u == "GB"                     ? 1e9
                       : (u == "byte" || u == "bytes") ? 1
                                                       : 0;
  if (scale == 0) return p;
  const std::size_t dot = s.find('.');
  const std::size_t space = s.find(' ');
  const int decimals = dot == std::string::npos || dot > space ? 0 : static_cast<int>(space - dot - 1);
  p.number = v;
  p.value = v * scale;
  p.half_unit = scale * 0.5 * std::pow(10.0, -decimals);
  return p;
}

}  // namespace

TEST_CASE("format_bytes: every size reads as its real value, at every unit's edges") {
  CHECK(format_bytes(0) == "0 bytes");
  CHECK(format_bytes(1) == "1 byte");
  CHECK(format_bytes(999) == "999 bytes");
  CHECK(format_bytes(1000) == "1.0 kB");
  CHECK(format_bytes(4096) == "4.1 kB");
  CHECK(format_bytes(999'949) == "999.9 kB");
  CHECK(format_bytes(999'950) == "1.0 MB");      // was "1000.0 kB"
  CHECK(format_bytes(999'999'999) == "1.0 GB");  // was "1000.0 MB"
  CHECK(format_bytes(std::uint64_t{64} << 20) == "67.1 MB");
  CHECK(format_bytes(UINT64_MAX) == "18446744073.7 GB");
  // Generated: every power of two and ten and their neighbours, and a sweep of each unit's range. The text
  // stands for the size within half its last digit, shows no 0 for a size that is not 0, and keeps its number
  // under 1000 below the top unit.
  std::vector<std::uint64_t> sizes;
  for (int b = 0; b < 64; ++b)
    for (std::uint64_t d : {0, 1, 2}) sizes.push_back((std::uint64_t{1} << b) + d - 1);
  for (std::uint64_t p = 1; p <= 10'000'000'000'000'000'000u / 10; p *= 10)
    for (std::uint64_t k :
         {p - 1, p, p + 1, 5 * p, 9 * p + 9 * p / 10 + 5 * p / 100, 9 * p + 9 * p / 10 + 5 * p / 100 - 1})
      sizes.push_back(k);
  for (std::uint64_t n = 1; n < 5'000'000'000; n = n * 1009 / 1000 + 1) sizes.push_back(n);
  for (std::uint64_t n : sizes) {
    const std::string s = format_bytes(n);
    CAPTURE(n);
    CAPTURE(s);
    const Parsed p = parse_size(s);
    REQUIRE(p.value >= 0.0);
    CHECK(std::fabs(p.value - static_cast<double>(n)) <=
          p.half_unit * (1 + 1e-9) + static_cast<double>(n) * 1e-15);
    if (n > 0) CHECK(p.value > 0.0);
    if (s.find("GB") == std::string::npos) CHECK(p.number < 1000.0);
  }
}

TEST_CASE("format_bytes_apart: two different sizes never read the same, and each is its real value") {
  CHECK(format_bytes_apart(70'000'000, 67'108'864).first == "70.0 MB");
  CHECK(format_bytes_apart(70'000'000, 67'108'864).second == "67.1 MB");
  CHECK(format_bytes_apart(67'108'865, 67'108'864).first == "67.108865 MB");
  CHECK(format_bytes_apart(67'108'865, 67'108'864).second == "67.108864 MB");
  CHECK(format_bytes_apart(2'040'000, 2'000'000).first == "2.04 MB");
  CHECK(format_bytes_apart(2'040'000, 2'000'000).second == "2.00 MB");
  CHECK(format_bytes_apart(4097, 4096).first == "4.097 kB");
  CHECK(format_bytes_apart(5, 5).first == "5 bytes");
  // The hosts' memory check (attnviz-cli, the app): a budget a hundred bytes short reads short.
  CHECK(check_memory(1'000'100, 1'000'000, true, "parameters 1.0 MB").error ==
        "this configuration needs 1.0001 MB of memory (parameters 1.0 MB), more than the 1.0000 MB of "
        "--memory-budget: use smaller sizes, fewer heads or fewer tokens");
  CHECK(format_bytes_apart(UINT64_MAX, UINT64_MAX - 1).first == "18446744073709551615 bytes");
  std::vector<std::uint64_t> bases;
  for (std::uint64_t p = 1; p <= 100'000'000'000'000; p *= 10)
    for (std::uint64_t k : {p, 2 * p - 1, 4 * p + p / 3, 9 * p + 9 * p / 10 + p / 20}) bases.push_back(k);
  for (std::uint64_t a : bases)
    for (std::uint64_t d :
         {std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{49}, std::uint64_t{51}, a / 1000 + 1}) {
      const std::uint64_t b = a + d;
      const BytesApart t = format_bytes_apart(b, a);
      CAPTURE(a);
      CAPTURE(b);
      CAPTURE(t.first);
      CAPTURE(t.second);
      CHECK(t.first != t.second);
      const Parsed pb = parse_size(t.first), pa = parse_size(t.second);
      REQUIRE(pa.value >= 0.0);
      REQUIRE(pb.value >= 0.0);
      CHECK(pb.value > pa.value);  // the larger reads larger
      CHECK(std::fabs(pb.value - static_cast<double>(b)) <= pb.half_unit * (1 + 1e-9));
      CHECK(std::fabs(pa.value - static_cast<double>(a)) <= pa.half_unit * (1 + 1e-9));
    }
}

TEST_CASE("a file over its size limit is refused with both sizes as they are, never 0.0 MB") {
  TempDir tmp("size_limits");
  // Limits from a byte to a mebibyte; the file one byte over each, and a tenth over.
  for (std::size_t limit :
       {std::size_t{1}, std::size_t{10}, std::size_t{999}, std::size_t{1000}, std::size_t{4096},
        std::size_t{49'999}, std::size_t{999'999}, std::size_t{1} << 20}) {
    for (std::size_t size : {limit + 1, limit + limit / 10 + 1}) {
      const std::string path = tmp.write("f", std::string(size, 'x'));
      std::string out;
      const Status st = read_untrusted_file(path, limit, out);
      const BytesApart b = format_bytes_apart(size, limit);
      CAPTURE(limit);
      CAPTURE(size);
      CHECK(st.error == "cannot read '" + path + "': " + b.first + ", more than the " + b.second + " limit");
      CHECK(st.error.find(" 0.0 ") == std::string::npos);
      CHECK(parse_size(b.second).value > 0.0);
      CHECK(std::fabs(parse_size(b.second).value - static_cast<double>(limit)) <=
            parse_size(b.second).half_unit * (1 + 1e-9));
    }
  }
#if !defined(__EMSCRIPTEN__)  // the page has no hub cache
  // The message that printed "0.0 MB, more than the 0.0 MB limit": a hub cache's ref past its 4 kB.
  const fs::path repo = tmp.path / "hub" / "models--tiny--llama";
  fs::create_directories(repo / "refs");
  tmp.write("hub/models--tiny--llama/refs/main", std::string(5000, 'a'));
  const char* before = std::getenv("HF_HUB_CACHE");
  const std::string saved = before ? before : "";
  setenv("HF_HUB_CACHE", (tmp.path / "hub").c_str(), 1);
  check_refused({"--model", "tiny/llama", "--ids", "1"}, "refs/main': 5.0 kB, more than the 4.1 kB limit");
  tmp.write("hub/models--tiny--llama/refs/main", std::string(4097, 'a'));
  check_refused({"--model", "tiny/llama", "--ids", "1"},
                "refs/main': 4.097 kB, more than the 4.096 kB limit");
  if (before)
    setenv("HF_HUB_CACHE", saved.c_str(), 1);
  else
    unsetenv("HF_HUB_CACHE");
#endif
}
