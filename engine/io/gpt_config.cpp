#include "attnviz/io/gpt_config.hpp"

#include "strict_json.hpp"

#include <cstdint>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

#include "attnviz/io/safetensors.hpp"
#include "attnviz/text.hpp"

namespace attnviz {
namespace {

using json = nlohmann::json;

// Checks the text's structure before the document is built: no key twice in one object (nlohmann and
// Python keep the last silently, other readers the first, or refuse) and no nesting past kMaxDepth.
// Each object's keys go into a hash set that is dropped when the object ends, so the cost is linear.
class KeyChecker {
 public:
  static constexpr std::size_t kMaxDepth = 64;
  std::string error;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) {
    objects_.emplace_back();
    return enter();
  }
  bool key(json::string_t& k) {
    if (!objects_.back().insert(k).second) return fail("key " + quote(k) + " appears twice");
    return true;
  }
  bool end_object() {
    objects_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) { return enter(); }
  bool end_array() {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    return fail("not JSON (" + json_error_text(e) + ")");
  }

 private:
  std::vector<std::unordered_set<std::string>> objects_;
  std::size_t depth_ = 0;

  bool enter() {
    if (++depth_ > kMaxDepth) return fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    return true;
  }
  bool fail(std::string m) {
    if (error.empty()) error = std::move(m);
    return false;
  }
};

// The state of one reading: what the weights hold, what has been stated so far.
struct Reading {
  const GptWeightFacts& w;
  GptConfigStated& out;
  std::string heads_key, drop_key;
  bool stated[5] = {};  // vocab, d_model, layers, positions, heads: stated by some key
};

// One key of the table. `check` returns "" when the value is accepted, else the message after "WHERE: ".
struct Key {
  const char* name;
  std::string (*check)(Reading& r, const Key& k, const json& v);
  int size = -1;                 // size keys: which of Reading::stated (and of the weights' sizes)
  const char* detail = nullptr;  // a rule's explanation, or a size's name
};

enum Size { kVocab, kDModel, kLayers, kPositions, kHeads };

int weights_size(const GptWeightFacts& w, int which) {
  switch (which) {
    case kVocab:
      return w.sizes.vocab_size;
    case kDModel:
      return w.sizes.d_model;
    case kLayers:
      return w.sizes.n_layers;
    default:
      return w.sizes.context_length;
  }
}

std::string accept(Reading&, const Key&, const json&) {
  return {};
}

std::string not_positive(const Key& k) {
  return std::string(k.name) + " is not a positive integer";
}

// A size the weights determine: it must agree with them.
std::string size(Reading& r, const Key& k, const json& v) {
  if (!v.is_number_unsigned() || v.get<std::uint64_t>() == 0) return not_positive(k);
  const std::uint64_t stated = v.get<std::uint64_t>();
  const int file = weights_size(r.w, k.size);
  if (stated != static_cast<std::uint64_t>(file))
    return std::string(k.name) + " is " + std::to_string(stated) + " but the weights' " + k.detail + " is " +
           std::to_string(file);
  r.stated[k.size] = true;
  if (k.size == kLayers) r.out.layers = true;
  return {};
}

// The head count: the weights do not say it, so the keys that state it must agree with each other.
std::string heads(Reading& r, const Key& k, const json& v) {
  if (!v.is_number_unsigned() || v.get<std::uint64_t>() == 0) return not_positive(k);
  const std::uint64_t h = v.get<std::uint64_t>();
  if (h > static_cast<std::uint64_t>(r.w.sizes.d_model))
    return std::string(k.name) + " is " + std::to_string(h) + ", more heads than d_model " +
           std::to_string(r.w.sizes.d_model);
  if (r.out.heads && static_cast<int>(h) != r.out.heads)
    return "head counts disagree (" + std::string(k.name) + " is " + std::to_string(h) + ", " + r.heads_key +
           " is " + std::to_string(r.out.heads) + ")";
  r.out.heads = static_cast<int>(h);
  r.heads_key = k.name;
  r.stated[kHeads] = true;
  return {};
}

// GPT-2's MLP width: null means 4 * d_model, the only width the engine's blocks have.
std::string n_inner(Reading& r, const Key& k, const json& v) {
  if (v.is_null()) return {};
  const std::uint64_t want = 4 * static_cast<std::uint64_t>(r.w.sizes.d_model);
  if (!v.is_number_unsigned() || v.get<std::uint64_t>() == 0) return not_positive(k) + " or null";
  if (v.get<std::uint64_t>() != want)
    return std::string(k.name) + " is " + v.dump() + " but the weights' feed-forward width is " +
           std::to_string(want) + " (4 x d_model)";
  return {};
}

// The one dropout rate the engine applies (to the embeddings, the attention weights and both residual
// branches): every key that states one must state the same.
std::string dropout(Reading& r, const Key& k, const json& v) {
  if (!v.is_number() || !(v.get<double>() >= 0.0 && v.get<double>() < 1.0))
    return std::string(k.name) + " is " + shown(v) + ", not a probability in [0, 1)";
  const double p = v.get<double>();
  if (r.out.drop_rate >= 0.0 && p != r.out.drop_rate)
    return std::string(k.name) + " is " + v.dump() + " but " + r.drop_key + " is " +
           json(r.out.drop_rate).dump() +
           ": the engine has one dropout rate for the embeddings, the attention weights and the residuals";
  r.out.drop_rate = p;
  r.drop_key = k.name;
  return {};
}

// Names of GELU's tanh approximation, the only activation the engine computes. Hugging Face's "gelu" is
// the exact (erf) form, a different function.
constexpr const char* kTanhGelu[] = {"gelu_new", "gelu_pytorch_tanh", "gelu_fast"};

std::string activation(Reading&, const Key& k, const json& v) {
  if (v.is_string())
    for (const char* name : kTanhGelu)
      if (v.get_ref<const std::string&>() == name) return {};
  const bool erf = v.is_string() && v.get_ref<const std::string&>() == "gelu";
  return std::string(k.name) + " is " + shown(v) + (erf ? " (GELU's exact erf form)" : "") +
         ": the engine computes GELU's tanh approximation only (\"gelu_new\", \"gelu_pytorch_tanh\" or "
         "\"gelu_fast\")";
}

// The engine's LayerNorm epsilon is fixed at GPT-2's (and the book's) 1e-5.
std::string epsilon(Reading&, const Key& k, const json& v) {
  if (v.is_number() && v.get<double>() == 1e-5) return {};
  return std::string(k.name) + " is " + shown(v) + ": the engine's LayerNorm uses 1e-05";
}

// A flag the engine has one setting of: `detail` says what the other setting would do.
std::string must_be_true(Reading&, const Key& k, const json& v) {
  if (v.is_boolean() && v.get<bool>()) return {};
  return std::string(k.name) + " is " + shown(v) + ": " + k.detail;
}
std::string must_be_false(Reading&, const Key& k, const json& v) {
  if (v.is_boolean() && !v.get<bool>()) return {};
  return std::string(k.name) + " is " + shown(v) + ": " + k.detail;
}

std::string model_type(Reading&, const Key& k, const json& v) {
  if (v.is_string() && v.get_ref<const std::string&>() == "gpt2") return {};
  return std::string(k.name) + " is " + shown(v) + ": the engine runs GPT-2 models (\"gpt2\") only";
}

std::string qkv_bias(Reading& r, const Key& k, const json& v) {
  if (!v.is_boolean()) return std::string(k.name) + " is " + shown(v) + ", not true or false";
  if (v.get<bool>() != r.w.sizes.qkv_bias)
    return std::string(k.name) + " is " + v.dump() + " but the weights have " +
           (r.w.sizes.qkv_bias ? "" : "no ") + "q, k and v biases";
  return {};
}

std::string attention_only(Reading& r, const Key& k, const json& v) {
  if (!v.is_boolean()) return std::string(k.name) + " is " + shown(v) + ", not true or false";
  if (v.get<bool>() != r.w.sizes.attention_only)
    return std::string(k.name) + " is " + v.dump() + " but the weights' blocks " +
           (r.w.sizes.attention_only ? "have no" : "have a") + " feed-forward network";
  return {};
}

std::string tie_word_embeddings(Reading& r, const Key& k, const json& v) {
  if (!v.is_boolean()) return std::string(k.name) + " is " + shown(v) + ", not true or false";
  if (v.get<bool>() && !r.w.tied)
    return std::string(k.name) +
           " is true but the file's output head differs from its token embedding (Hugging Face would use the "
           "embedding)";
  if (!v.get<bool>() && !r.w.head_tensor)
    return std::string(k.name) + " is false but the file has no output head of its own";
  return {};
}

std::string pruned_heads(Reading&, const Key& k, const json& v) {
  if (v.is_null() || (v.is_object() && v.empty())) return {};
  return std::string(k.name) + " is " + shown(v) + ": the engine runs every head of every layer";
}

// Every top-level key the reader knows, sorted by name. Adding an architecture's keys means adding rows.
const Key kKeys[] = {
    // bookkeeping and other models' parts (accepted, ignored)
    {"_name_or_path", accept},
    {"_num_labels", accept},
    {"activation_function", activation},
    {"add_cross_attention", must_be_false, -1, "the engine's blocks have no cross-attention"},
    {"architectures", accept},
    {"attn_implementation", accept},     // eager, sdpa, flash: the same attention
    {"attention_only", attention_only},  // attnviz's induction recipe: blocks without norm2 and feed-forward
    {"attn_pdrop", dropout},
    {"bad_words_ids", accept},  // generation defaults from here: only Hugging Face's generate() reads them
    {"begin_suppress_tokens", accept},
    {"bos_token_id", accept},
    {"chunk_size_feed_forward", accept},                     // chunks the MLP, same values
    {"context_length", size, kPositions, "context length"},  // the book's
    {"decoder_start_token_id", accept},
    {"diversity_penalty", accept},
    {"do_sample", accept},
    {"drop_rate", dropout},  // the book's
    {"dtype", accept},       // the weights are widened to float32 either way
    {"early_stopping", accept},
    {"emb_dim", size, kDModel, "d_model"},  // the book's
    {"embd_pdrop", dropout},
    {"encoder_no_repeat_ngram_size", accept},
    {"eos_token_id", accept},
    {"exponential_decay_length_penalty", accept},
    {"finetuning_task", accept},
    {"forced_bos_token_id", accept},
    {"forced_eos_token_id", accept},
    {"gradient_checkpointing", accept},
    {"hidden_size", size, kDModel, "d_model"},  // GPT2Config's alias of n_embd
    {"id2label", accept},
    {"initializer_range", accept},
    {"is_decoder", accept},
    {"is_encoder_decoder", must_be_false, -1, "the engine runs decoder-only models"},
    {"label2id", accept},
    {"layer_norm_epsilon", epsilon},
    {"length_penalty", accept},
    {"max_length", accept},
    {"max_position_embeddings", size, kPositions, "context length"},  // alias of n_positions
    {"min_length", accept},
    {"model_type", model_type},
    {"n_ctx", size, kPositions, "context length"},
    {"n_embd", size, kDModel, "d_model"},
    {"n_head", heads},
    {"n_heads", heads},  // the book's
    {"n_inner", n_inner},
    {"n_layer", size, kLayers, "layer count"},
    {"n_layers", size, kLayers, "layer count"},  // the book's
    {"n_positions", size, kPositions, "context length"},
    {"n_special", accept},  // OpenAI GPT's: GPT-2 ignores it
    {"no_repeat_ngram_size", accept},
    {"num_attention_heads", heads},  // alias of n_head
    {"num_beam_groups", accept},
    {"num_beams", accept},
    {"num_heads", heads},
    {"num_hidden_layers", size, kLayers, "layer count"},  // alias of n_layer
    {"num_labels", accept},
    {"num_return_sequences", accept},
    {"output_attentions", accept},
    {"output_hidden_states", accept},
    {"output_past", accept},
    {"output_scores", accept},
    {"pad_token_id", accept},
    {"predict_special_tokens", accept},  // OpenAI GPT's: GPT-2 ignores it
    {"prefix", accept},
    {"problem_type", accept},
    {"pruned_heads", pruned_heads},
    {"qkv_bias", qkv_bias},  // the book's
    {"remove_invalid_values", accept},
    {"reorder_and_upcast_attn", must_be_false, -1,
     "the engine does not reorder and upcast the attention product (only false is accepted)"},
    {"repetition_penalty", accept},
    {"resid_pdrop", dropout},
    {"return_dict", accept},
    {"return_dict_in_generate", accept},
    {"scale_attn_by_inverse_layer_idx", must_be_false, -1,
     "the engine does not scale layer i's scores by 1 / (i + 1)"},
    {"scale_attn_weights", must_be_true, -1, "the engine always scales the scores by 1 / sqrt(head_dim)"},
    {"sep_token_id", accept},
    {"summary_activation", accept},  // summary_*: GPT2DoubleHeadsModel's head, not the language model's
    {"summary_first_dropout", accept},
    {"summary_proj_to_labels", accept},
    {"summary_type", accept},
    {"summary_use_proj", accept},
    {"suppress_tokens", accept},
    {"task_specific_params", accept},
    {"temperature", accept},
    {"tf_legacy_loss", accept},
    {"tie_encoder_decoder", must_be_false, -1, "the engine runs decoder-only models"},
    {"tie_word_embeddings", tie_word_embeddings},
    {"tokenizer_class", accept},
    {"top_k", accept},
    {"top_p", accept},
    {"torch_dtype", accept},  // the weights are widened to float32 either way
    {"torchscript", accept},
    {"transformers_version", accept},
    {"typical_p", accept},
    {"use_bfloat16", accept},
    {"use_cache", accept},
    {"vocab_size", size, kVocab, "vocabulary size"},
    {"xla_device", accept},
};

const Key* find_key(const std::string& name) {
  for (const Key& k : kKeys)
    if (name == k.name) return &k;
  return nullptr;
}

// GPT2Config's defaults, which Hugging Face uses for a size a "gpt2" config.json leaves out.
struct Default {
  int which;
  const char* key;
  int value;
};
constexpr Default kGpt2Defaults[] = {{kVocab, "vocab_size", 50257},
                                     {kDModel, "n_embd", 768},
                                     {kLayers, "n_layer", 12},
                                     {kPositions, "n_positions", 1024},
                                     {kHeads, "n_head", 12}};

}  // namespace

std::string shown(const nlohmann::json& v) {
  if (v.is_string()) return quote(v.get_ref<const std::string&>());
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  return v.dump();
}

Status parse_strict_json(const std::string& where, std::string_view text, nlohmann::json& out,
                         std::size_t max_bytes) {
  const auto fail = [&](const std::string& m) {
    return Status::fail(quote(where, kQuoteCap, '\0') + ": " + m);
  };
  if (text.size() > max_bytes)
    return fail("holds " + std::to_string(text.size()) + " bytes, more than the " +
                std::to_string(max_bytes) + " such a file may hold");
  // nlohmann's parser takes a NUL as the end of the text: what follows one would be silently ignored.
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos)
    return fail("not JSON (a NUL byte at offset " + std::to_string(nul) + ")");
  json j;
  try {
    KeyChecker keys;
    if (!json::sax_parse(text.begin(), text.end(), &keys) || !keys.error.empty())
      return fail(keys.error.empty() ? "not JSON" : keys.error);
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return fail("not JSON (" + json_error_text(e) + ")");
  } catch (const std::bad_alloc&) {
    return fail("needs more memory than is available");
  }
  if (!j.is_object()) return fail("not a JSON object");
  out = std::move(j);
  return Status::ok();
}

Status read_gpt_config(const std::string& where, std::string_view text, const GptWeightFacts& weights,
                       GptConfigStated& out) {
  const auto fail = [&](const std::string& m) {
    return Status::fail(quote(where, kQuoteCap, '\0') + ": " + m);
  };
  out = GptConfigStated{};
  json j;
  if (Status st = parse_strict_json(where, text, j); !st.is_ok()) return st;

  Reading r{weights, out, {}, {}, {}};
  // model_type first: another architecture's config has many unknown keys, and this says why at once.
  if (const auto it = j.find("model_type"); it != j.end())
    if (std::string m = model_type(r, *find_key("model_type"), *it); !m.empty()) return fail(m);
  for (const auto& [name, value] : j.items()) {
    const Key* k = find_key(name);
    if (!k)
      return fail("key " + quote(name) +
                  " is not one the engine knows for GPT-2 (refused rather than ignored: it may change the "
                  "model)");
    if (std::string m = k->check(r, *k, value); !m.empty()) return fail(m);
  }
  if (j.contains("model_type")) {
    for (const Default& d : kGpt2Defaults) {
      if (r.stated[d.which]) continue;
      if (d.which == kHeads) {
        out.heads = d.value;
        out.heads_default = true;
        continue;
      }
      const int file = weights_size(weights, d.which);
      if (file != d.value)
        return fail(std::string("states no ") + d.key + ", so GPT2Config's default " +
                    std::to_string(d.value) + " holds, but the weights' " +
                    (d.which == kVocab    ? "vocabulary size"
                     : d.which == kDModel ? "d_model"
                     : d.which == kLayers ? "layer count"
                                          : "context length") +
                    " is " + std::to_string(file));
      if (d.which == kLayers) out.layers = true;
    }
    // GPT2Config's dropout rates default to 0.1 each: one stated alone must be 0.1 too.
    for (const char* key : {"attn_pdrop", "embd_pdrop", "resid_pdrop"})
      if (!j.contains(key) && out.drop_rate >= 0.0 && out.drop_rate != 0.1)
        return fail(r.drop_key + " is " + json(out.drop_rate).dump() + " but " + key +
                    " is not stated, so GPT2Config's default 0.1 holds: the engine has one dropout rate");
  }
  return Status::ok();
}

}  // namespace attnviz
