// config.json beside GPT-2 weights: every key is honoured as Hugging Face's GPT2Config is, or refused in one
// line naming it. Each case loads a tiny model (tests/safetensors_writer.hpp) with a config.json text.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "attnviz/io/gpt_config.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "safetensors_writer.hpp"

namespace attnviz {
namespace {

using test::Bytes;
using test::TinyGpt;

// The tiny Hugging Face model: vocabulary 11, context 5, d_model 8, 2 layers, tied.
TinyGpt tiny_hf() {
  TinyGpt m;
  m.build();
  return m;
}

Status load_with(const std::string& config, GptWeights& w, const TinyGpt& m = tiny_hf()) {
  return load_gpt(test::shared(m.bytes()), "model.safetensors", config, {}, w);
}

// The message a config.json gets; the load must fail in one line and leave the output alone.
std::string refused(const std::string& config, const TinyGpt& m = tiny_hf()) {
  GptWeights w;
  w.source = "untouched";
  const Status s = load_with(config, w, m);
  CAPTURE(config);
  CHECK_FALSE(s.is_ok());
  CHECK(w.source == "untouched");
  CHECK(s.error.find('\n') == std::string::npos);
  return s.error;
}

GptWeights loaded(const std::string& config, const TinyGpt& m = tiny_hf()) {
  GptWeights w;
  const Status s = load_with(config, w, m);
  CAPTURE(config);
  CHECK(s.error == "");
  REQUIRE(s.is_ok());
  return w;
}

// A config.json object with `extra` added: the head count the tiny model needs, then the keys under test.
std::string with(const std::string& extra) {
  return R"({"n_head": 2)" + (extra.empty() ? "" : ", " + extra) + "}";
}

// Hugging Face's gpt2/config.json, every key kept, the sizes made the tiny model's, plus the keys newer
// versions of transformers write.
const char* const kRealShaped = R"({
  "activation_function": "gelu_new",
  "architectures": ["GPT2LMHeadModel"],
  "attn_pdrop": 0.1,
  "bos_token_id": 50256,
  "embd_pdrop": 0.1,
  "eos_token_id": 50256,
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2",
  "n_ctx": 5,
  "n_embd": 8,
  "n_head": 2,
  "n_inner": null,
  "n_layer": 2,
  "n_positions": 5,
  "n_special": 0,
  "predict_special_tokens": true,
  "reorder_and_upcast_attn": false,
  "resid_pdrop": 0.1,
  "scale_attn_by_inverse_layer_idx": false,
  "scale_attn_weights": true,
  "summary_activation": null,
  "summary_first_dropout": 0.1,
  "summary_proj_to_labels": true,
  "summary_type": "cls_index",
  "summary_use_proj": true,
  "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
  "torch_dtype": "float32",
  "transformers_version": "4.44.0",
  "use_cache": true,
  "vocab_size": 11
})";

}  // namespace

TEST_CASE("gpt config: a real GPT-2 config.json and the book's configuration load") {
  const GptWeights w = loaded(kRealShaped);
  CHECK(w.config.n_heads == 2);
  CHECK(w.config.n_layers == 2);
  CHECK(w.config.drop_rate == 0.1);
  CHECK(w.config_from == "config.json");
  CHECK(w.note.empty());  // n_layer confirmed the layer count

  TinyGpt book;
  book.scheme = TinyGpt::Scheme::book;
  book.qkv_bias = false;
  book.build();
  const GptWeights b = loaded(R"({"vocab_size": 11, "context_length": 5, "emb_dim": 8, "n_heads": 4,
                                  "n_layers": 2, "drop_rate": 0.0, "qkv_bias": false})",
                              book);
  CHECK(b.config.n_heads == 4);
  CHECK(b.config.drop_rate == 0.0);  // the book's drop_rate is honoured
  CHECK_FALSE(b.config.qkv_bias);
  CHECK(refused(R"({"n_heads": 4, "qkv_bias": true})", book) ==
        "config.json: qkv_bias is true but the weights have no q, k and v biases");
  CHECK(refused(with(R"("qkv_bias": false)")) ==
        "config.json: qkv_bias is false but the weights have q, k and v biases");
}

TEST_CASE("gpt config: the activation must be GELU's tanh approximation") {
  for (const char* name : {"gelu_new", "gelu_pytorch_tanh", "gelu_fast"})
    CHECK(loaded(with(std::string(R"("activation_function": ")") + name + "\"")).config.n_heads == 2);
  CHECK(refused(with(R"("activation_function": "relu")")) ==
        "config.json: activation_function is 'relu': the engine computes GELU's tanh approximation only "
        "(\"gelu_new\", \"gelu_pytorch_tanh\" or \"gelu_fast\")");
  CHECK(refused(with(R"("activation_function": "gelu")")) ==
        "config.json: activation_function is 'gelu' (GELU's exact erf form): the engine computes GELU's "
        "tanh approximation only (\"gelu_new\", \"gelu_pytorch_tanh\" or \"gelu_fast\")");
  CHECK(refused(with(R"("activation_function": 1)"))
            .rfind("config.json: activation_function is 1: the engine computes", 0) == 0);
}

TEST_CASE("gpt config: settings the engine has one form of are refused in any other") {
  CHECK(loaded(with(R"("layer_norm_epsilon": 1e-05)")).config.n_heads == 2);
  CHECK(loaded(with(R"("layer_norm_epsilon": 0.00001)")).config.n_heads == 2);
  CHECK(refused(with(R"("layer_norm_epsilon": 1e-06)")) ==
        "config.json: layer_norm_epsilon is 1e-06: the engine's LayerNorm uses 1e-05");
  CHECK(refused(with(R"("layer_norm_epsilon": "1e-5")")) ==
        "config.json: layer_norm_epsilon is '1e-5': the engine's LayerNorm uses 1e-05");
  CHECK(
      refused(with(R"("scale_attn_weights": false)")) ==
      "config.json: scale_attn_weights is false: the engine always scales the scores by 1 / sqrt(head_dim)");
  CHECK(refused(with(R"("scale_attn_by_inverse_layer_idx": true)")) ==
        "config.json: scale_attn_by_inverse_layer_idx is true: the engine does not scale layer i's scores by "
        "1 / (i + 1)");
  CHECK(refused(with(R"("reorder_and_upcast_attn": true)")) ==
        "config.json: reorder_and_upcast_attn is true: the engine does not reorder and upcast the attention "
        "product (only false is accepted)");
  CHECK(refused(with(R"("scale_attn_weights": null)")).rfind("config.json: scale_attn_weights is null:", 0) ==
        0);
  CHECK(refused(with(R"("pruned_heads": {"0": [1]})")) ==
        "config.json: pruned_heads is an object: the engine runs every head of every layer");
  CHECK(loaded(with(R"("pruned_heads": {})")).config.n_heads == 2);
  CHECK(refused(with(R"("add_cross_attention": true)")) ==
        "config.json: add_cross_attention is true: the engine's blocks have no cross-attention");
}

TEST_CASE("gpt config: another architecture and unknown keys are refused by name") {
  // Another architecture's config.json goes to its own reader (decoder.hpp), which needs its sizes; a
  // model_type the engine does not run is refused by name.
  CHECK(
      refused(R"({"model_type": "llama", "hidden_size": 8, "rope_theta": 10000.0, "rms_norm_eps": 1e-06})") ==
      "config.json: states no vocab_size");
  CHECK(refused(R"({"model_type": "bert", "hidden_size": 8})") ==
        "config.json: model_type 'bert' is not an architecture attnviz runs (gpt2, llama, qwen2, qwen3, "
        "gemma3_text, gpt_neox)");
  CHECK(refused(with(R"("rope_theta": 10000.0)")) ==
        "config.json: key 'rope_theta' is not one the engine knows for GPT-2 (refused rather than ignored: "
        "it may change the model)");
  // a key with a control character is quoted, the message stays one line
  CHECK(refused(with("\"a\\nb\": 1")).rfind("config.json: key 'a\\x0Ab' is not one", 0) == 0);
}

TEST_CASE("gpt config: sizes must agree with the weights, n_inner and n_ctx included") {
  CHECK(loaded(with(R"("n_inner": 32)")).config.n_heads == 2);
  CHECK(loaded(with(R"("n_inner": null)")).config.n_heads == 2);
  CHECK(refused(with(R"("n_inner": 100)")) ==
        "config.json: n_inner is 100 but the weights' feed-forward width is 32 (4 x d_model)");
  CHECK(refused(with(R"("n_inner": 0)")) == "config.json: n_inner is not a positive integer or null");
  CHECK(refused(with(R"("n_ctx": 0)")) == "config.json: n_ctx is not a positive integer");
  CHECK(refused(with(R"("n_ctx": 1000000000)")) ==
        "config.json: n_ctx is 1000000000 but the weights' context length is 5");
  CHECK(refused(with(R"("n_ctx": 18446744073709551615)")) ==
        "config.json: n_ctx is 18446744073709551615 but the weights' context length is 5");
  CHECK(loaded(with(R"("n_ctx": 5)")).config.context_length == 5);
  // Hugging Face's aliases are the same keys
  CHECK(refused(with(R"("hidden_size": 16)")) ==
        "config.json: hidden_size is 16 but the weights' d_model is 8");
  CHECK(refused(with(R"("num_hidden_layers": 3)")) ==
        "config.json: num_hidden_layers is 3 but the weights' layer count is 2");
  CHECK(refused(with(R"("max_position_embeddings": 1024)")) ==
        "config.json: max_position_embeddings is 1024 but the weights' context length is 5");
  CHECK(refused(R"({"n_head": 2, "num_attention_heads": 4})") ==
        "config.json: head counts disagree (num_attention_heads is 4, n_head is 2)");
  CHECK(refused(R"({"n_head": 16})") == "config.json: n_head is 16, more heads than d_model 8");
  // a "gpt2" config that leaves a size out means GPT2Config's default, as in Hugging Face
  CHECK(
      refused(R"({"model_type": "gpt2", "n_head": 2, "n_embd": 8, "n_positions": 5, "vocab_size": 11})") ==
      "config.json: states no n_layer, so GPT2Config's default 12 holds, but the weights' layer count is 2");
  CHECK(refused(R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 8, "n_positions": 5, "vocab_size": 11})") ==
        "model.safetensors: d_model 8 does not split into 12 heads (from config.json (GPT2Config's default "
        "n_head))");
}

TEST_CASE("gpt config: the dropout rates set the engine's one rate, or are refused when they differ") {
  CHECK(loaded(with(R"("resid_pdrop": 0.25, "embd_pdrop": 0.25, "attn_pdrop": 0.25)")).config.drop_rate ==
        0.25);
  CHECK(loaded(with(R"("drop_rate": 0.0)")).config.drop_rate == 0.0);
  CHECK(loaded(with("")).config.drop_rate == 0.1);  // GPT-2's, when nothing says
  CHECK(refused(with(R"("resid_pdrop": 0.1, "attn_pdrop": 0.2)")) ==
        "config.json: resid_pdrop is 0.1 but attn_pdrop is 0.2: the engine has one dropout rate for the "
        "embeddings, the attention weights and the residuals");
  CHECK(refused(with(R"("attn_pdrop": 1.0)")) ==
        "config.json: attn_pdrop is 1.0, not a probability in [0, 1)");
  CHECK(refused(with(R"("attn_pdrop": -0.1)")) ==
        "config.json: attn_pdrop is -0.1, not a probability in [0, 1)");
  // in a "gpt2" config an unstated rate is GPT2Config's 0.1
  CHECK(
      refused(R"({"model_type": "gpt2", "n_head": 2, "n_embd": 8, "n_layer": 2, "n_positions": 5,
                    "vocab_size": 11, "resid_pdrop": 0.3})") ==
      "config.json: resid_pdrop is 0.3 but attn_pdrop is not stated, so GPT2Config's default 0.1 holds: the "
      "engine has one dropout rate");
}

TEST_CASE("gpt config: tie_word_embeddings must describe the file's output head") {
  CHECK(loaded(with(R"("tie_word_embeddings": true)")).tied());
  CHECK(refused(with(R"("tie_word_embeddings": false)")) ==
        "config.json: tie_word_embeddings is false but the file has no output head of its own");
  TinyGpt untied = tiny_hf();
  untied.lm_head = true;
  untied.build();
  CHECK_FALSE(loaded(with(R"("tie_word_embeddings": false)"), untied).tied());
  CHECK(
      refused(with(R"("tie_word_embeddings": true)"), untied) ==
      "config.json: tie_word_embeddings is true but the file's output head differs from its token embedding "
      "(Hugging Face would use the embedding)");
}

TEST_CASE("gpt config: duplicate keys, deep nesting and a NUL are refused") {
  CHECK(refused(R"({"n_head": 2, "n_head": 4})") == "config.json: key 'n_head' appears twice");
  CHECK(
      refused(with(R"("task_specific_params": {"text-generation": {"max_length": 50, "max_length": 9}})")) ==
      "config.json: key 'max_length' appears twice");
  // the same key in two objects is no duplicate
  CHECK(
      loaded(
          with(
              R"("id2label": {"0": "a"}, "label2id": {"0": 0}, "task_specific_params": [{"0": 1}, {"0": 2}])"))
          .config.n_heads == 2);
  CHECK(refused(with(R"("task_specific_params": )" + std::string(100, '[') + std::string(100, ']'))) ==
        "config.json: nested deeper than 64 levels");
  CHECK(refused(std::string(R"({"n_head": 2})") + '\0' + R"({"n_head": 4})") ==
        "config.json: not JSON (a NUL byte at offset 13)");
  CHECK(refused(R"({"n_head": 2,})").rfind("config.json: not JSON (parse error", 0) == 0);
  CHECK(refused("[2]") == "config.json: not a JSON object");

  // A 1 MB config.json of 60,000 distinct keys with a duplicate at its very end: every key is checked (the
  // duplicate is found), each object's keys in a hash set.
  std::string big = "{\"n_head\": 2, \"task_specific_params\": {";
  for (int i = 0; i < 60000; ++i) big += "\"key" + std::to_string(i) + "\": 0, ";
  big += "\"key7\": 1}}";
  REQUIRE(big.size() <= kMaxConfigBytes);
  CHECK(refused(big) == "config.json: key 'key7' appears twice");
  big.replace(big.size() - 10, 4, "last");
  CHECK(loaded(big).config.n_heads == 2);
}

}  // namespace attnviz
