// GPT-2 weights files: tiny models written in both naming schemes and all three dtypes load with every
// weight exactly where the engine expects it (Conv1D transposed, c_attn split into q, k, v), and every
// inconsistency is refused with one message naming the tensor and both shapes.
#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <string>

#if !defined(__EMSCRIPTEN__)
#include <unistd.h>
#endif

#include "attnviz/io/gpt_file.hpp"
#include "safetensors_writer.hpp"

namespace attnviz {
namespace {

using test::Bytes;
using test::TinyGpt;
using Scheme = TinyGpt::Scheme;

const std::optional<std::string> kHeads2 = std::string(R"({"n_head": 2})");

Status load_bytes(const Bytes& b, GptWeights& w, const std::optional<std::string>& config = kHeads2,
                  GptLoadOptions opts = {}) {
  return load_gpt(test::shared(b), "model.safetensors", config, opts, w);
}

std::string error_of(const Bytes& b, const std::optional<std::string>& config = kHeads2,
                     GptLoadOptions opts = {}) {
  GptWeights w;
  w.source = "untouched";
  const Status s = load_bytes(b, w, config, opts);
  CHECK_FALSE(s.is_ok());
  CHECK(w.source == "untouched");  // a failed load leaves the output alone
  CHECK(s.error.find('\n') == std::string::npos);
  return s.error;
}

// Every element of the packed (out, in) matrix equals want(o, i).
template <class F>
void check_matrix(const PackedMatrix& m, int out, int in, F want, const std::string& what) {
  REQUIRE(m.out == out);
  REQUIRE(m.in == in);
  int wrong = 0;
  for (int o = 0; o < out; ++o)
    for (int i = 0; i < in; ++i)
      if (m.at(o, i) != want(static_cast<std::size_t>(o), static_cast<std::size_t>(i))) ++wrong;
  INFO(what);
  CHECK(wrong == 0);
  const Tensor t = unpack(m);
  CHECK(t.at(out - 1, in - 1) == want(static_cast<std::size_t>(out - 1), static_cast<std::size_t>(in - 1)));
}

void check_vector(const Tensor& t, const std::vector<float>& want, const std::string& what) {
  INFO(what);
  CHECK(t.data == want);
}

// The loaded weights hold exactly the Hugging Face file's values.
void check_hf(const TinyGpt& m, const GptWeights& w) {
  const std::size_t d = static_cast<std::size_t>(m.d);
  const std::string& p = m.prefix;
  check_matrix(
      w.tok_emb, m.vocab, m.d, [&](auto o, auto i) { return m.at(p + "wte.weight", o, i); }, "wte");
  REQUIRE(w.pos_emb.shape[0] == m.context);
  check_vector(w.pos_emb, m[p + "wpe.weight"].values, "wpe");
  REQUIRE(w.blocks.size() == static_cast<std::size_t>(m.layers));
  for (int l = 0; l < m.layers; ++l) {
    const std::string b = p + "h." + std::to_string(l) + ".";
    const GptBlock& g = w.blocks[static_cast<std::size_t>(l)];
    const auto& qkv_bias = m[b + "attn.c_attn.bias"].values;
    const PackedLinear* parts[] = {&g.query, &g.key, &g.value};
    for (std::size_t k = 0; k < 3; ++k) {
      // c_attn is (in, out) with q | k | v along the output columns
      check_matrix(
          parts[k]->weight, m.d, m.d,
          [&](auto o, auto i) { return m.at(b + "attn.c_attn.weight", i, k * d + o); },
          b + "c_attn part " + std::to_string(k));
      check_vector(parts[k]->bias,
                   std::vector<float>(qkv_bias.begin() + static_cast<long>(k * d),
                                      qkv_bias.begin() + static_cast<long>((k + 1) * d)),
                   b + "c_attn.bias part " + std::to_string(k));
    }
    check_matrix(
        g.out_proj.weight, m.d, m.d, [&](auto o, auto i) { return m.at(b + "attn.c_proj.weight", i, o); },
        b + "attn.c_proj");
    check_vector(g.out_proj.bias, m[b + "attn.c_proj.bias"].values, b + "attn.c_proj.bias");
    check_matrix(
        g.fc.weight, 4 * m.d, m.d, [&](auto o, auto i) { return m.at(b + "mlp.c_fc.weight", i, o); },
        b + "mlp.c_fc");
    check_vector(g.fc.bias, m[b + "mlp.c_fc.bias"].values, b + "mlp.c_fc.bias");
    check_matrix(
        g.proj.weight, m.d, 4 * m.d, [&](auto o, auto i) { return m.at(b + "mlp.c_proj.weight", i, o); },
        b + "mlp.c_proj");
    check_vector(g.proj.bias, m[b + "mlp.c_proj.bias"].values, b + "mlp.c_proj.bias");
    check_vector(g.norm1_scale, m[b + "ln_1.weight"].values, b + "ln_1.weight");
    check_vector(g.norm1_shift, m[b + "ln_1.bias"].values, b + "ln_1.bias");
    check_vector(g.norm2_scale, m[b + "ln_2.weight"].values, b + "ln_2.weight");
    check_vector(g.norm2_shift, m[b + "ln_2.bias"].values, b + "ln_2.bias");
  }
  check_vector(w.final_scale, m[p + "ln_f.weight"].values, "ln_f.weight");
  check_vector(w.final_shift, m[p + "ln_f.bias"].values, "ln_f.bias");
}

void check_book(const TinyGpt& m, const GptWeights& w) {
  check_matrix(
      w.tok_emb, m.vocab, m.d, [&](auto o, auto i) { return m.at("tok_emb.weight", o, i); }, "tok_emb");
  check_vector(w.pos_emb, m["pos_emb.weight"].values, "pos_emb");
  REQUIRE(w.blocks.size() == static_cast<std::size_t>(m.layers));
  for (int l = 0; l < m.layers; ++l) {
    const std::string b = "trf_blocks." + std::to_string(l) + ".";
    const GptBlock& g = w.blocks[static_cast<std::size_t>(l)];
    const std::pair<const PackedLinear*, std::string> linears[] = {
        {&g.query, "att.W_query"},     {&g.key, "att.W_key"},  {&g.value, "att.W_value"},
        {&g.out_proj, "att.out_proj"}, {&g.fc, "ff.layers.0"}, {&g.proj, "ff.layers.2"}};
    for (const auto& entry : linears) {
      const PackedLinear* lin = entry.first;
      const std::string& name = entry.second;  // (a structured binding cannot be captured in C++17)
      const auto& shape = m[b + name + ".weight"].shape;
      // nn.Linear: stored (out, in) already
      check_matrix(
          lin->weight, static_cast<int>(shape[0]), static_cast<int>(shape[1]),
          [&](auto o, auto i) { return m.at(b + name + ".weight", o, i); }, b + name);
      const bool has_bias = m.tensors.count(b + name + ".bias") != 0;
      CHECK(lin->bias.empty() == !has_bias);
      if (has_bias) check_vector(lin->bias, m[b + name + ".bias"].values, b + name + ".bias");
    }
    check_vector(g.norm1_scale, m[b + "norm1.scale"].values, b + "norm1.scale");
    check_vector(g.norm1_shift, m[b + "norm1.shift"].values, b + "norm1.shift");
    check_vector(g.norm2_scale, m[b + "norm2.scale"].values, b + "norm2.scale");
    check_vector(g.norm2_shift, m[b + "norm2.shift"].values, b + "norm2.shift");
  }
  check_vector(w.final_scale, m["final_norm.scale"].values, "final_norm.scale");
  check_vector(w.final_shift, m["final_norm.shift"].values, "final_norm.shift");
  REQUIRE_FALSE(w.tied());
  check_matrix(
      w.out_head, m.vocab, m.d, [&](auto o, auto i) { return m.at("out_head.weight", o, i); }, "out_head");
}

}  // namespace

TEST_CASE("gpt file: Hugging Face GPT-2 in every dtype loads exactly") {
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    CAPTURE(to_string(dt));
    TinyGpt m;
    m.dtype = dt;
    m.build();
    const Bytes bytes = m.bytes();

    GptFileInfo info;
    SafetensorsFile file;
    REQUIRE(SafetensorsFile::from_memory(test::shared(bytes), "model.safetensors", file).is_ok());
    REQUIRE(inspect_gpt(file, kHeads2, {}, info).is_ok());
    CHECK(info.naming == GptNaming::hugging_face);
    CHECK(info.prefix.empty());
    CHECK(info.tied);

    GptWeights w;
    REQUIRE(load_bytes(bytes, w).is_ok());
    CHECK(w.config.vocab_size == 11);
    CHECK(w.config.context_length == 5);
    CHECK(w.config.d_model == 8);
    CHECK(w.config.n_heads == 2);
    CHECK(w.config.n_layers == 2);
    CHECK(w.config.qkv_bias);
    CHECK(w.config.drop_rate == 0.1);
    CHECK(w.tied());
    CHECK(&w.head() == &w.tok_emb);
    CHECK(w.source == "model.safetensors");
    CHECK(w.isa == resolve(Isa::automatic));
    check_hf(m, w);
    // The size computed before packing is what the packed weights hold.
    CHECK(w.bytes() == info.packed_bytes);
  }
}

TEST_CASE("gpt file: the book's GPTModel in every dtype loads exactly, with and without q/k/v biases") {
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16})
    for (bool bias : {false, true}) {
      CAPTURE(to_string(dt));
      CAPTURE(bias);
      TinyGpt m;
      m.scheme = Scheme::book;
      m.dtype = dt;
      m.qkv_bias = bias;
      m.layers = 3;
      m.build();
      GptWeights w;
      REQUIRE(
          load_bytes(m.bytes(), w, std::string(R"({"n_heads": 4, "emb_dim": 8, "n_layers": 3})")).is_ok());
      CHECK(w.config.n_heads == 4);
      CHECK(w.config.n_layers == 3);
      CHECK(w.config.qkv_bias == bias);
      check_book(m, w);
      GptFileInfo info;
      SafetensorsFile file;
      REQUIRE(SafetensorsFile::from_memory(test::shared(m.bytes()), "m", file).is_ok());
      REQUIRE(inspect_gpt(file, kHeads2, {}, info).is_ok());
      CHECK(info.naming == GptNaming::book);
      CHECK_FALSE(info.tied);
      CHECK(w.bytes() == info.packed_bytes);
    }
}

TEST_CASE("gpt file: every ISA's panel width holds the same values, and the size is known up front") {
  TinyGpt m;
  m.d = 40;  // panels of 8, 16 and 32 all pad
  m.vocab = 37;
  m.layers = 1;
  m.build();
  for (Isa isa : available_isas()) {
    CAPTURE(to_string(isa));
    GptLoadOptions opts;
    opts.isa = isa;
    GptWeights w;
    REQUIRE(load_bytes(m.bytes(), w, std::string(R"({"n_head": 5})"), opts).is_ok());
    CHECK(w.isa == isa);
    CHECK(w.config.n_heads == 5);
    check_hf(m, w);
    SafetensorsFile file;
    REQUIRE(SafetensorsFile::from_memory(test::shared(m.bytes()), "m", file).is_ok());
    GptFileInfo info;
    REQUIRE(inspect_gpt(file, std::string(R"({"n_head": 5})"), opts, info).is_ok());
    CHECK(w.bytes() == info.packed_bytes);
  }
}

TEST_CASE("gpt file: the transformer. prefix, an unaligned data section, and lm_head") {
  TinyGpt m;
  m.prefix = "transformer.";
  m.lm_head = true;
  m.build();
  for (std::size_t pad = 0; pad < 4; ++pad) {
    auto wr = m.writer();
    wr.header_pad = pad;
    GptWeights w;
    REQUIRE(load_bytes(wr.bytes(), w).is_ok());
    check_hf(m, w);
    // An lm_head of its own is the output head.
    REQUIRE_FALSE(w.tied());
    check_matrix(
        w.out_head, m.vocab, m.d, [&](auto o, auto i) { return m.at("lm_head.weight", o, i); }, "lm_head");
  }
  // An lm_head equal to the embedding is the tied model: one copy is kept.
  m.tensors["lm_head.weight"].values = m["transformer.wte.weight"].values;
  GptWeights w;
  REQUIRE(load_bytes(m.bytes(), w).is_ok());
  CHECK(w.tied());
  check_hf(m, w);
}

TEST_CASE("gpt file: the head count") {
  TinyGpt m;
  m.d = 128;
  m.layers = 1;
  m.build();
  const Bytes b = m.bytes();
  GptWeights w;
  SUBCASE("d_model / 64 without a config") {
    REQUIRE(load_bytes(b, w, std::nullopt).is_ok());
    CHECK(w.config.n_heads == 2);
  }
  SUBCASE("config.json's n_head, num_heads or n_heads") {
    for (const char* key : {"n_head", "num_heads", "n_heads"}) {
      REQUIRE(load_bytes(b, w, "{\"" + std::string(key) + "\": 4, \"n_embd\": 128}").is_ok());
      CHECK(w.config.n_heads == 4);
    }
  }
  SUBCASE("the option gives the count a file lacks, and must agree with config.json's") {
    GptLoadOptions opts;
    opts.heads = 8;
    REQUIRE(load_bytes(b, w, std::nullopt, opts).is_ok());
    CHECK(w.config.n_heads == 8);
    REQUIRE(load_bytes(b, w, std::string(R"({"n_head": 8})"), opts).is_ok());
    CHECK(w.config.n_heads == 8);
    CHECK(error_of(b, std::string(R"({"n_head": 4})"), opts) ==
          "model.safetensors: the heads option (--heads) gives 8 heads but 'config.json' gives 4: leave the "
          "option out");
  }
  SUBCASE("d_model must split into the heads") {
    CHECK(error_of(b, std::string(R"({"n_head": 3})")) ==
          "model.safetensors: d_model 128 does not split into 3 heads (from config.json)");
    GptLoadOptions opts;
    opts.heads = 5;
    CHECK(error_of(b, std::nullopt, opts) ==
          "model.safetensors: d_model 128 does not split into 5 heads (from the heads option, --heads)");
    TinyGpt small;
    small.build();  // d_model 8
    CHECK(error_of(small.bytes(), std::nullopt) ==
          "model.safetensors: d_model 8 is not a multiple of 64 and no head count was given (config.json's "
          "n_head or the heads option)");
  }
  SUBCASE("config.json must agree with the weights") {
    CHECK(error_of(b, std::string(R"({"n_head": 2, "n_layer": 12})")) ==
          "config.json: n_layer is 12 but the weights' layer count is 1");
    CHECK(error_of(b, std::string(R"({"n_embd": 768})")) ==
          "config.json: n_embd is 768 but the weights' d_model is 128");
    CHECK(error_of(b, std::string(R"({"vocab_size": 50257})")) ==
          "config.json: vocab_size is 50257 but the weights' vocabulary size is 11");
    CHECK(error_of(b, std::string(R"({"n_positions": 1024})")) ==
          "config.json: n_positions is 1024 but the weights' context length is 5");
    CHECK(error_of(b, std::string(R"({"n_head": 2, "num_heads": 4})")) ==
          "config.json: head counts disagree (num_heads is 4, n_head is 2)");
    CHECK(error_of(b, std::string(R"({"n_head": 0})")) == "config.json: n_head is not a positive integer");
    CHECK(error_of(b, std::string(R"({"n_head": "12"})")) == "config.json: n_head is not a positive integer");
    CHECK(error_of(b, std::string(R"([12])")) == "config.json: not a JSON object");
    CHECK(error_of(b, std::string("{n_head")).rfind("config.json: not JSON (parse error", 0) == 0);
  }
}

TEST_CASE("gpt file: from disk, a file or a folder with config.json") {
  test::TempDir dir("gptdir");
  TinyGpt m;
  m.build();
  const std::string file = dir.write("model.safetensors", m.bytes());
  GptWeights w;
  // a bare file: no config, and d_model 8 needs a head count
  CHECK(load_gpt(file, {}, w).error == file +
                                           ": d_model 8 is not a multiple of 64 and no head count was given "
                                           "(config.json's n_head or the heads option)");
  GptLoadOptions opts;
  opts.heads = 4;
  REQUIRE(load_gpt(file, opts, w).is_ok());
  CHECK(w.config.n_heads == 4);
  CHECK(w.source == "attnviz_st_gptdir/model.safetensors");
  check_hf(m, w);

  // the folder: config.json next to the weights gives the head count
  dir.write("config.json", std::string(R"({"n_head": 2, "n_layer": 2, "n_embd": 8, "vocab_size": 11})"));
  GptWeights v;
  REQUIRE(load_gpt(dir.path.string(), {}, v).is_ok());
  CHECK(v.config.n_heads == 2);
  check_hf(m, v);
  REQUIRE(load_gpt(dir.path.string() + "/", {}, v).is_ok());

  // a broken config.json is named by its path
  dir.write("config.json", std::string(R"({"n_head": 2, "n_layer": 3})"));
  CHECK(load_gpt(dir.path.string(), {}, v).error ==
        dir.path.string() + "/config.json: n_layer is 3 but the weights' layer count is 2");

  // a folder without the weights
  test::TempDir empty("gptempty");
  CHECK(load_gpt(empty.path.string(), {}, v).error ==
        empty.path.string() + "/model.safetensors: cannot open (No such file or directory)");
}

TEST_CASE("gpt file: a weights file in a folder is read with the folder's config.json, and says so") {
  test::TempDir dir("gptsibling");
  TinyGpt m;
  m.build();  // d_model 8: without a head count from somewhere it does not load
  const std::string file = dir.write("weights.safetensors", m.bytes());
  GptWeights w;
  CHECK(load_gpt(file, {}, w).error == file +
                                           ": d_model 8 is not a multiple of 64 and no head count was given "
                                           "(config.json's n_head or the heads option)");
  GptLoadOptions opts;
  opts.heads = 2;
  REQUIRE(load_gpt(file, opts, w).is_ok());
  CHECK(w.config_from == "none (sizes from the tensors, heads from the heads option, --heads)");

  dir.write("config.json", std::string(R"({"n_head": 4, "n_layer": 2})"));
  REQUIRE(load_gpt(file, {}, w).is_ok());
  CHECK(w.config.n_heads == 4);  // the sibling's head count
  CHECK(w.config_from == "attnviz_st_gptsibling/config.json");
  CHECK(w.note.empty());
  check_hf(m, w);
  // the heads option may not contradict the sibling's n_head
  CHECK(load_gpt(file, opts, w).error.find("the heads option (--heads) gives 2 heads but '") !=
        std::string::npos);

  // the sibling is checked like a folder's, and named by its path
  dir.write("config.json", std::string(R"({"n_head": 4, "activation_function": "relu"})"));
  CHECK(load_gpt(file, {}, w).error ==
        dir.path.string() +
            "/config.json: activation_function is 'relu': the engine computes GELU's tanh approximation only "
            "(\"gelu_new\", \"gelu_pytorch_tanh\" or \"gelu_fast\")");
  // a missing weights file is reported before any config.json
  CHECK(load_gpt(dir.path.string() + "/absent.safetensors", {}, w).error ==
        dir.path.string() + "/absent.safetensors: cannot open (No such file or directory)");
}

TEST_CASE("gpt file: the layer count is confirmed by config.json, or the load says nothing checked it") {
  TinyGpt m;
  m.layers = 3;
  m.build();
  // The last block missing entirely: nothing in the file says it should be there.
  auto w = m.writer();
  w.entries.erase(std::remove_if(w.entries.begin(), w.entries.end(),
                                 [](const auto& e) { return e.name.rfind("h.2.", 0) == 0; }),
                  w.entries.end());
  const Bytes two = w.bytes();
  GptWeights g;
  REQUIRE(load_bytes(two, g, kHeads2).is_ok());
  CHECK(g.config.n_layers == 2);
  CHECK(g.note == "2 layers found in the file; config.json states no n_layer to check the count against");
  GptLoadOptions opts;
  opts.heads = 2;
  REQUIRE(load_bytes(two, g, std::nullopt, opts).is_ok());
  CHECK(g.note == "2 layers found in the file; no config.json to check the count against");
  CHECK(g.config_from == "none (sizes from the tensors, heads from the heads option, --heads)");
  // With the layer count stated, the missing block is refused.
  CHECK(error_of(two, std::string(R"({"n_head": 2, "n_layer": 3})")) ==
        "config.json: n_layer is 3 but the weights' layer count is 2");
  REQUIRE(load_bytes(m.bytes(), g, std::string(R"({"n_head": 2, "n_layer": 3})")).is_ok());
  CHECK(g.note.empty());
  CHECK(g.config_from == "config.json");
  // A block partly there, or one missing before another, names the first tensor not found (the note is for
  // the case no tensor can settle).
  CHECK(error_of(m.bytes("h.2.ln_2.bias"), std::nullopt, opts) ==
        "model.safetensors: tensor 'h.2.ln_2.bias' is missing");
  auto gap = m.writer();
  gap.entries.erase(std::remove_if(gap.entries.begin(), gap.entries.end(),
                                   [](const auto& e) { return e.name.rfind("h.1.", 0) == 0; }),
                    gap.entries.end());
  CHECK(error_of(gap.bytes(), std::nullopt, opts) ==
        "model.safetensors: tensor 'h.1.ln_1.weight' is missing");
}

TEST_CASE("gpt file: the memory budget is checked before anything is packed") {
  TinyGpt m;
  m.build();
  SafetensorsFile file;
  REQUIRE(SafetensorsFile::from_memory(test::shared(m.bytes()), "model.safetensors", file).is_ok());
  GptFileInfo info;
  REQUIRE(inspect_gpt(file, kHeads2, {}, info).is_ok());
  GptLoadOptions opts;
  opts.memory_budget = info.packed_bytes - 1;
  // A byte apart, the two sizes are written to the byte (both read "20.5 kB" before). (The packed layout's
  // size depends on the ISA: 20.5 kB natively, 7.7 kB in WebAssembly.)
  REQUIRE(info.packed_bytes >= 1'000);
  REQUIRE(info.packed_bytes < 1'000'000);
  const auto kb = [](std::uint64_t n) {
    const std::string frac = std::to_string(1000 + n % 1000).substr(1);
    return std::to_string(n / 1000) + "." + frac + " kB";
  };
  CHECK(error_of(m.bytes(), kHeads2, opts) == "model.safetensors: the weights need " + kb(info.packed_bytes) +
                                                  " as float32, the budget is " + kb(opts.memory_budget));
  opts.memory_budget = info.packed_bytes - 300;  // apart in the first decimal: written as format_bytes does
  CHECK(error_of(m.bytes(), kHeads2, opts) ==
        "model.safetensors: the weights need " + format_bytes(info.packed_bytes) +
            " as float32, the budget is " + format_bytes(opts.memory_budget));
  CHECK(format_bytes(info.packed_bytes) != format_bytes(opts.memory_budget));
  opts.memory_budget = info.packed_bytes;
  GptWeights w;
  REQUIRE(load_bytes(m.bytes(), w, kHeads2, opts).is_ok());
  CHECK(w.bytes() == info.packed_bytes);

  CHECK(format_bytes(6'200'000'000) == "6.2 GB");
  CHECK(format_bytes(4'000'000'000) == "4.0 GB");
  CHECK(format_bytes(497'759'232) == "497.8 MB");
  CHECK(format_bytes(13'312) == "13.3 kB");
  CHECK(format_bytes(999) == "999 bytes");
}

TEST_CASE("gpt file: under an address-space limit the mapped file counts against the budget") {
  // A sparse F16 gpt2-xl passed the 6.2 GB check under ulimit -v 8GB: its 3.1 GB mapping was not counted.
  test::TempDir dir("gptmapping");
  TinyGpt m;
  m.build();
  const std::string path = dir.write("model.safetensors", m.bytes());
  SafetensorsFile file;
  REQUIRE(SafetensorsFile::open(path, file).is_ok());
  GptFileInfo info;
  REQUIRE(inspect_gpt(file, kHeads2, {}, info).is_ok());
  GptLoadOptions opts;
  opts.memory_budget = info.packed_bytes + file.file_size() - 1;
  GptWeights w;
  REQUIRE(load_gpt(file, kHeads2, opts, w).is_ok());  // no address-space limit: the mapping is page cache
  opts.count_mapping = true;
  GptWeights v;
  if (file.mapped()) {  // WebAssembly reads the file into memory instead: nothing is mapped there
    CHECK(load_gpt(file, kHeads2, opts, v).error ==
          path + ": the weights need " + format_bytes(info.packed_bytes) +
              " as float32 and the mapped file " + format_bytes(file.file_size()) +
              " of address space, the budget is " + format_bytes(opts.memory_budget));
  }
  opts.memory_budget += 1;
  REQUIRE(load_gpt(file, kHeads2, opts, v).is_ok());
  // Bytes in memory are counted with the packed weights already (the page holds them).
  opts.memory_budget = info.packed_bytes;
  REQUIRE(load_bytes(m.bytes(), v, kHeads2, opts).is_ok());
}

#if !defined(__EMSCRIPTEN__)
TEST_CASE("gpt file: a file that shrinks while it is loaded is refused, not a SIGBUS") {
  test::TempDir dir("gptshrink");
  TinyGpt m;
  m.vocab = 1000;  // wte, the first tensor in the file: 1000 x 8 floats, 32 kB (whole pages)
  m.build();
  GptWeights w;
  w.source = "untouched";
  for (const std::size_t cut : {std::size_t{100}, std::size_t{0}}) {
    const std::string path = dir.write("model.safetensors", m.bytes());
    SafetensorsFile file;
    REQUIRE(SafetensorsFile::open(path, file).is_ok());  // validated and mapped; nothing read yet
    const std::size_t kept = cut ? file.data_start() + cut : file.file_size() - 1;
    REQUIRE(truncate(path.c_str(), static_cast<off_t>(kept)) == 0);
    INFO("cut to " << kept);
    const Status s = load_gpt(file, kHeads2, {}, w);
    CHECK(s.error == path + ": the file shrank to " + std::to_string(kept) + " of its " +
                         std::to_string(file.file_size()) + " bytes while it was being read");
    CHECK(w.source == "untouched");
    GptFileInfo info;
    CHECK_FALSE(inspect_gpt(file, kHeads2, {}, info).is_ok());
  }
}
#endif

TEST_CASE("gpt file: missing tensors, shape disagreements and unknown tensors are refused by name") {
  TinyGpt m;
  m.build();
  SUBCASE("a missing tensor") {
    CHECK(error_of(m.bytes("h.1.mlp.c_fc.bias")) ==
          "model.safetensors: tensor 'h.1.mlp.c_fc.bias' is missing");
    CHECK(error_of(m.bytes("ln_f.weight")) == "model.safetensors: tensor 'ln_f.weight' is missing");
    CHECK(error_of(m.bytes("wpe.weight")) == "model.safetensors: tensor 'wpe.weight' is missing");
    // a block index with a gap before it
    auto w = m.writer();
    w.entries.erase(std::remove_if(w.entries.begin(), w.entries.end(),
                                   [](const auto& e) { return e.name.rfind("h.1.", 0) == 0; }),
                    w.entries.end());
    w.add("h.2.ln_1.weight", Dtype::f32, {8}, test::known_values(8, 5));
    CHECK(error_of(w.bytes()) == "model.safetensors: tensor 'h.1.ln_1.weight' is missing");
  }
  SUBCASE("no blocks at all") {
    test::SafetensorsWriter w;
    w.add("wte.weight", Dtype::f32, {3, 4}, test::known_values(12, 1));
    CHECK(error_of(w.bytes()) == "model.safetensors: tensor 'wpe.weight' is missing");
    w.add("wpe.weight", Dtype::f32, {2, 4}, test::known_values(8, 1));
    CHECK(error_of(w.bytes()) == "model.safetensors: tensor 'h.0.ln_1.weight' is missing");
  }
  SUBCASE("a shape that disagrees between layers") {
    m.tensors["h.1.mlp.c_fc.weight"] = {{8, 30}, test::known_values(240, 3)};
    CHECK(error_of(m.bytes()) ==
          "model.safetensors: tensor 'h.1.mlp.c_fc.weight' has shape [8, 30], expected [8, 32]");
  }
  SUBCASE("position embedding of another width") {
    m.tensors["wpe.weight"] = {{5, 6}, test::known_values(30, 3)};
    CHECK(error_of(m.bytes()) == "model.safetensors: tensor 'wpe.weight' has shape [5, 6], expected [5, 8]");
  }
  SUBCASE("an embedding that is not a matrix") {
    m.tensors["wte.weight"] = {{88}, test::known_values(88, 3)};
    CHECK(error_of(m.bytes()) ==
          "model.safetensors: tensor 'wte.weight' has shape [88], not (vocab, d_model) with sizes the engine "
          "can hold");
    m.tensors["wte.weight"] = {{0, 8}, {}};
    CHECK(error_of(m.bytes()) ==
          "model.safetensors: tensor 'wte.weight' has shape [0, 8], not (vocab, d_model) with sizes the "
          "engine "
          "can hold");
  }
  SUBCASE("lm_head of another shape") {
    m.lm_head = true;
    m.build();
    m.tensors["lm_head.weight"] = {{10, 8}, test::known_values(80, 3)};
    CHECK(error_of(m.bytes()) ==
          "model.safetensors: tensor 'lm_head.weight' has shape [10, 8], expected [11, 8]");
  }
  SUBCASE("unknown tensors") {
    auto w = m.writer();
    w.add("h.0.attn.q_proj.weight", Dtype::f32, {8, 8}, test::known_values(64, 1));
    CHECK(error_of(w.bytes()) ==
          "model.safetensors: tensor 'h.0.attn.q_proj.weight' is not part of a GPT-2 model in Hugging Face's "
          "naming (another architecture?)");
    for (const char* extra : {"h.00.ln_1.weight", "h.x.ln_1.weight", "lm_head.bias", "wte.bias", "h.0.",
                              "h.1234567890.ln_1.weight"})
      w.add(extra, Dtype::f32, {1}, {0.5f});
    CHECK(error_of(w.bytes()) ==
          "model.safetensors: 7 tensors 'h.0.attn.q_proj.weight', 'h.00.ln_1.weight', 'h.x.ln_1.weight', "
          "'lm_head.bias', ... (7 in all) are not part of a GPT-2 model in Hugging Face's naming (another "
          "architecture?)");
  }
  SUBCASE("names without the prefix beside prefixed ones") {
    m.prefix = "transformer.";
    m.build();
    auto w = m.writer();
    w.add("ln_f.weight", Dtype::f32, {8}, test::known_values(8, 1));
    CHECK(error_of(w.bytes()) ==
          "model.safetensors: tensor 'ln_f.weight' is not part of a GPT-2 model in Hugging Face's naming "
          "(another architecture?)");
  }
  SUBCASE("neither scheme, or both") {
    test::SafetensorsWriter w;
    w.add("embed.weight", Dtype::f32, {2, 2}, {1, 2, 3, 4});
    CHECK(error_of(w.bytes()) ==
          "model.safetensors: has neither 'wte.weight' (Hugging Face GPT-2) nor 'tok_emb.weight' (the "
          "book's "
          "GPTModel) (it holds 'embed.weight')");
    CHECK(error_of(test::SafetensorsWriter::file("{}", {})) ==
          "model.safetensors: has neither 'wte.weight' (Hugging Face GPT-2) nor 'tok_emb.weight' (the "
          "book's "
          "GPTModel) (no tensors at all)");
    auto both = m.writer();
    both.add("tok_emb.weight", Dtype::f32, {11, 8}, test::known_values(88, 1));
    CHECK(error_of(both.bytes()) ==
          "model.safetensors: holds both 'wte.weight' and 'tok_emb.weight': not one GPT-2 model");
  }
  SUBCASE("a file the safetensors rules refuse never reaches the loader") {
    auto w = m.writer();
    w.add_raw("h.0.extra", "F64", {1}, Bytes(8, 0));
    CHECK(error_of(w.bytes()) ==
          "model.safetensors: tensor 'h.0.extra': dtype F64 is not supported (only F32, F16 and BF16 are)");
  }
}

TEST_CASE("gpt file: the book's q, k and v biases go together") {
  TinyGpt m;
  m.scheme = Scheme::book;
  m.qkv_bias = true;
  m.build();
  CHECK(error_of(m.bytes("trf_blocks.1.att.W_key.bias")) ==
        "model.safetensors: tensor 'trf_blocks.1.att.W_key.bias' is missing but "
        "'trf_blocks.0.att.W_query.bias' is present (the q, k and v biases go together)");
  CHECK(error_of(m.bytes("trf_blocks.0.att.W_query.bias")) ==
        "model.safetensors: tensor 'trf_blocks.0.att.W_key.bias' is present but "
        "'trf_blocks.0.att.W_query.bias' is not (the q, k and v biases go together)");
  CHECK(error_of(m.bytes("out_head.weight")) == "model.safetensors: tensor 'out_head.weight' is missing");
  m.tensors["trf_blocks.0.ff.layers.2.weight"] = {{8, 30}, test::known_values(240, 3)};
  CHECK(error_of(m.bytes()) ==
        "model.safetensors: tensor 'trf_blocks.0.ff.layers.2.weight' has shape [8, 30], expected [8, 32]");
}

TEST_CASE("gpt file: sizes the engine refuses are refused with its reason") {
  TinyGpt m;
  m.context = 9000;
  m.d = 64;
  m.vocab = 2;
  m.layers = 1;
  m.mask_buffers = false;
  m.build();
  CHECK(error_of(m.bytes(), std::nullopt) ==
        "model.safetensors: context_length is 9000: it must be in 1..8192");
}

}  // namespace attnviz
