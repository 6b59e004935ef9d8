// Today's open decoders (decoder.hpp): config.json's keys, the weights' names, one GptWeights.
#include "attnviz/io/decoder.hpp"

#include <sys/stat.h>
#if !defined(__EMSCRIPTEN__)
#include <sys/resource.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "attnviz/io/files.hpp"
#include "attnviz/io/gpt_config.hpp"
#include "attnviz/saturating.hpp"
#include "attnviz/text.hpp"
#include "strict_json.hpp"

namespace attnviz {
namespace {

using json = nlohmann::json;

// The architectures, as bits of a key's `archs` mask.
enum Arch : unsigned { kLlama = 1, kQwen2 = 2, kQwen3 = 4, kGemma3 = 8, kNeox = 16 };
constexpr unsigned kAll = kLlama | kQwen2 | kQwen3 | kGemma3 | kNeox;
constexpr unsigned kLlamaLike = kLlama | kQwen2 | kQwen3 | kGemma3;

struct ArchName {
  const char* name;
  Arch arch;
};
constexpr ArchName kArchs[] = {
    {"llama", kLlama}, {"qwen2", kQwen2}, {"qwen3", kQwen3}, {"gemma3_text", kGemma3}, {"gpt_neox", kNeox}};

// What has been read so far.
struct Reading {
  Arch arch;
  DecoderConfig& out;
  bool sizes[6] = {};  // vocab, hidden, layers, heads, intermediate, positions: stated
  bool tie_stated = false;
  double rotary_pct = -1.0;
  int sliding_pattern = 0;
  bool layer_types = false;
  bool use_sliding_window = false;
  json rope_scaling;  // null, or the object that sets the scaling (rope_scaling or rope_parameters)
};

struct Key {
  const char* name;
  unsigned archs;
  std::string (*check)(Reading& r, const Key& k, const json& v);
  int which = -1;                // sizes: which of Reading::sizes
  const char* detail = nullptr;  // a rule's explanation
};

std::string accept(Reading&, const Key&, const json&) {
  return {};
}

bool positive_int(const json& v, std::uint64_t max) {
  return v.is_number_unsigned() && v.get<std::uint64_t>() >= 1 && v.get<std::uint64_t>() <= max;
}

std::string size(Reading& r, const Key& k, const json& v) {
  // Far above any real model, far below what would overflow the engine's ints.
  constexpr std::uint64_t kMax[] = {1u << 20, 16384, 256, 1024, 1u << 18, 1u << 20};
  if (!positive_int(v, kMax[k.which]))
    return std::string(k.name) + " is " + shown(v) + ", not an integer in 1.." +
           std::to_string(kMax[k.which]);
  const int n = static_cast<int>(v.get<std::uint64_t>());
  GptConfig& c = r.out.config;
  int* field[] = {&c.vocab_size, &c.d_model, &c.n_layers, &c.n_heads, &c.arch.d_ff, &c.context_length};
  *field[k.which] = n;
  r.sizes[k.which] = true;
  return {};
}

std::string optional_size(Reading& r, const Key& k, const json& v, int& field, std::uint64_t max) {
  (void)r;
  if (v.is_null()) return {};
  if (!positive_int(v, max))
    return std::string(k.name) + " is " + shown(v) + ", not an integer in 1.." + std::to_string(max);
  field = static_cast<int>(v.get<std::uint64_t>());
  return {};
}
std::string kv_heads(Reading& r, const Key& k, const json& v) {
  return optional_size(r, k, v, r.out.config.arch.kv_heads, 1024);
}
std::string head_dim(Reading& r, const Key& k, const json& v) {
  return optional_size(r, k, v, r.out.config.arch.head_dim, 1024);
}

std::string eps(Reading& r, const Key& k, const json& v) {
  if (!v.is_number() || !(v.get<double>() > 0.0 && v.get<double>() < 1.0))
    return std::string(k.name) + " is " + shown(v) + ", not a number in (0, 1)";
  r.out.config.arch.norm_eps = v.get<double>();
  return {};
}

std::string activation(Reading& r, const Key& k, const json& v) {
  const std::string a = v.is_string() ? v.get<std::string>() : "";
  Activation& act = r.out.config.arch.act;
  if (a == "silu" || a == "swish")
    act = Activation::silu;
  else if (a == "gelu")
    act = Activation::gelu_erf;
  else if (a == "gelu_new" || a == "gelu_pytorch_tanh" || a == "gelu_fast")
    act = Activation::gelu_tanh;
  else
    return std::string(k.name) + " is " + shown(v) +
           ": the engine computes \"silu\", \"gelu\" (erf) and GELU's tanh form (\"gelu_pytorch_tanh\", "
           "\"gelu_new\", \"gelu_fast\")";
  return {};
}

std::string theta(Reading& r, const Key& k, const json& v) {
  if (!v.is_number() || !(v.get<double>() > 1.0 && v.get<double>() < 1e12))
    return std::string(k.name) + " is " + shown(v) + ", not a rotary base in (1, 1e12)";
  (std::strcmp(k.name, "rope_local_base_freq") == 0 ? r.out.config.arch.rope_local_theta
                                                    : r.out.config.arch.rope_theta) = v.get<double>();
  return {};
}

std::string zero_dropout(Reading&, const Key& k, const json& v) {
  if (v.is_number() && v.get<double>() == 0.0) return {};
  return std::string(k.name) + " is " + shown(v) +
         ": the engine runs these models as Hugging Face does in eval mode, without dropout (only 0 is "
         "accepted)";
}

std::string must_be_false(Reading&, const Key& k, const json& v) {
  if (v.is_null() || (v.is_boolean() && !v.get<bool>())) return {};
  return std::string(k.name) + " is " + shown(v) + ": " + k.detail;
}
std::string must_be_null(Reading&, const Key& k, const json& v) {
  if (v.is_null()) return {};
  return std::string(k.name) + " is " + shown(v) + ": " + k.detail;
}
std::string must_be_one(Reading&, const Key& k, const json& v) {
  if (v.is_number() && v.get<double>() == 1.0) return {};
  return std::string(k.name) + " is " + shown(v) + ": " + k.detail;
}

std::string boolean(const Key& k, const json& v, bool& field) {
  if (!v.is_boolean()) return std::string(k.name) + " is " + shown(v) + ", not true or false";
  field = v.get<bool>();
  return {};
}
std::string tie(Reading& r, const Key& k, const json& v) {
  r.tie_stated = true;
  return boolean(k, v, r.out.tied);
}
std::string attention_bias(Reading& r, const Key& k, const json& v) {
  bool b = false;
  if (std::string m = boolean(k, v, b); !m.empty()) return m;
  r.out.config.qkv_bias = b;
  r.out.config.arch.out_bias = b;
  return {};
}
std::string mlp_bias(Reading& r, const Key& k, const json& v) {
  return boolean(k, v, r.out.config.arch.mlp_bias);
}
std::string parallel_residual(Reading& r, const Key& k, const json& v) {
  bool b = true;
  if (std::string m = boolean(k, v, b); !m.empty()) return m;
  r.out.config.arch.residual = b ? ResidualKind::parallel : ResidualKind::sequential;
  return {};
}
std::string use_sliding_window(Reading& r, const Key& k, const json& v) {
  if (std::string m = boolean(k, v, r.use_sliding_window); !m.empty()) return m;
  if (r.use_sliding_window)
    return std::string(k.name) +
           " is true: the engine runs Qwen's full attention only (its sliding-window variant is not "
           "supported)";
  return {};
}

std::string rotary_pct(Reading& r, const Key& k, const json& v) {
  if (!v.is_number() || !(v.get<double>() > 0.0 && v.get<double>() <= 1.0))
    return std::string(k.name) + " is " + shown(v) + ", not a fraction in (0, 1]";
  r.rotary_pct = v.get<double>();
  return {};
}

std::string sliding_window(Reading& r, const Key& k, const json& v) {
  if (r.arch != kGemma3) return {};  // Qwen's, unused while use_sliding_window is false
  if (!positive_int(v, 1u << 20)) return std::string(k.name) + " is " + shown(v) + ", not a positive integer";
  r.out.config.arch.window = static_cast<int>(v.get<std::uint64_t>());
  return {};
}
std::string sliding_pattern(Reading& r, const Key& k, const json& v) {
  if (!positive_int(v, 1024)) return std::string(k.name) + " is " + shown(v) + ", not a positive integer";
  r.sliding_pattern = static_cast<int>(v.get<std::uint64_t>());
  return {};
}

std::string layer_types(Reading& r, const Key& k, const json& v) {
  if (!v.is_array() || v.size() > 256)
    return std::string(k.name) + " is " + shown(v) + ", not a list of layer types";
  std::vector<char>& local = r.out.config.arch.local;
  local.clear();
  for (const json& t : v) {
    const std::string s = t.is_string() ? t.get<std::string>() : "";
    if (s == "full_attention")
      local.push_back(0);
    else if (s == "sliding_attention" && r.arch == kGemma3)
      local.push_back(1);
    else
      return std::string(k.name) + " holds " + shown(t) +
             (r.arch == kGemma3 ? ": the engine knows \"full_attention\" and \"sliding_attention\""
                                : ": the engine runs this architecture's full attention only");
  }
  r.layer_types = true;
  return {};
}

std::string query_pre_attn_scalar(Reading& r, const Key& k, const json& v) {
  if (!v.is_number() || !(v.get<double>() > 0.0 && v.get<double>() < 1e9))
    return std::string(k.name) + " is " + shown(v) + ", not a positive number";
  r.out.config.arch.attn_scale = 1.0 / std::sqrt(v.get<double>());
  return {};
}

// rope_scaling (older configs) or rope_parameters (newer: the base too, and for Gemma 3 one object per layer
// type). Read once every key is known (finish()).
std::string rope_scaling(Reading& r, const Key& k, const json& v) {
  if (!v.is_null() && !v.is_object())
    return std::string(k.name) + " is " + shown(v) + ", not an object or null";
  if (v.is_null()) return {};
  if (std::strcmp(k.name, "rope_parameters") == 0) {
    json p = v;
    if (r.arch == kGemma3 && (v.contains("full_attention") || v.contains("sliding_attention"))) {
      if (const auto s = v.find("sliding_attention"); s != v.end() && s->is_object()) {
        if (const auto t = s->find("rope_theta"); t != s->end()) {
          Key local{"rope_parameters.sliding_attention.rope_theta", kGemma3, theta};
          local.name = "rope_local_base_freq";
          if (std::string m = theta(r, local, *t); !m.empty()) return "rope_parameters: " + m;
        }
      }
      const auto f = v.find("full_attention");
      p = f != v.end() ? *f : json::object();
    }
    if (const auto t = p.find("rope_theta"); t != p.end()) {
      Key base{"rope_parameters.rope_theta", kAll, theta};
      if (std::string m = theta(r, base, *t); !m.empty()) return m;
    }
    r.rope_scaling = p;
    return {};
  }
  r.rope_scaling = v;
  return {};
}

std::string model_type(Reading&, const Key&, const json&) {
  return {};  // read before the table (read_decoder_config)
}

// Generation defaults, bookkeeping and other models' parts: accepted, changing no value of a forward pass.
const Key kKeys[] = {
    {"_name_or_path", kAll, accept},
    {"_sliding_window_pattern", kGemma3, sliding_pattern},
    {"architectures", kAll, accept},
    {"attention_bias", kLlama | kQwen3 | kGemma3 | kNeox, attention_bias},
    {"attention_dropout", kAll, zero_dropout},
    {"attn_implementation", kAll, accept},
    {"attn_logit_softcapping", kGemma3, must_be_null, -1,
     "the engine does not soft-cap the scores (only null)"},
    {"bos_token_id", kAll, accept},
    {"cache_implementation", kGemma3, accept},
    {"classifier_dropout", kNeox, accept},  // a classification head's, not the language model's
    {"dtype", kAll, accept},                // the weights are widened to float32 either way
    {"eos_token_id", kAll, accept},
    {"final_logit_softcapping", kGemma3, must_be_null, -1,
     "the engine does not soft-cap the logits (only null)"},
    {"gradient_checkpointing", kAll, accept},
    {"head_dim", kLlama | kQwen3 | kGemma3, head_dim},
    {"hidden_act", kAll, activation},
    {"hidden_activation", kGemma3, activation},
    {"hidden_dropout", kNeox, zero_dropout},
    {"hidden_size", kAll, size, 1},
    {"initializer_range", kAll, accept},
    {"intermediate_size", kAll, size, 4},
    {"is_llama_config", kLlama, accept},  // SmolLM2's marker
    {"layer_norm_eps", kNeox, eps},
    {"layer_types", kQwen2 | kQwen3 | kGemma3, layer_types},
    {"max_position_embeddings", kAll, size, 5},
    {"max_window_layers", kQwen2 | kQwen3, accept},  // used only with use_sliding_window
    {"mlp_bias", kLlama, mlp_bias},
    {"model_type", kAll, model_type},
    {"num_attention_heads", kAll, size, 3},
    {"num_hidden_layers", kAll, size, 2},
    {"num_key_value_heads", kLlamaLike, kv_heads},
    {"pad_token_id", kAll, accept},
    {"pretraining_tp", kLlama, must_be_one, -1,
     "the engine does not split the projections (only 1 is accepted)"},
    {"query_pre_attn_scalar", kGemma3, query_pre_attn_scalar},
    {"rms_norm_eps", kLlamaLike, eps},
    {"rope_interleaved", kLlama, must_be_false, -1,
     "the engine rotates halves (rotate_half), not interleaved pairs (only false is accepted)"},
    {"rope_local_base_freq", kGemma3, theta},
    {"rope_parameters", kAll, rope_scaling},
    {"rope_scaling", kAll, rope_scaling},
    {"rope_theta", kAll, theta},
    {"rotary_emb_base", kNeox, theta},
    {"partial_rotary_factor", kNeox, rotary_pct},
    {"rotary_pct", kNeox, rotary_pct},
    {"sliding_window", kQwen2 | kQwen3 | kGemma3, sliding_window},
    {"sliding_window_pattern", kGemma3, sliding_pattern},
    {"tie_word_embeddings", kAll, tie},
    {"torch_dtype", kAll, accept},
    {"transformers.js_config", kAll, accept},
    {"transformers_version", kAll, accept},
    {"use_bidirectional_attention", kGemma3, must_be_false, -1,
     "the engine runs causal attention (only false is accepted)"},
    {"use_cache", kAll, accept},
    {"use_mrope", kQwen2, must_be_false, -1, "the engine has no multimodal rotary positions (only false)"},
    {"use_parallel_residual", kNeox, parallel_residual},
    {"use_sliding_window", kQwen2 | kQwen3, use_sliding_window},
    {"vocab_size", kAll, size, 0},
};

const Key* find_key(const std::string& name) {
  for (const Key& k : kKeys)
    if (name == k.name) return &k;
  return nullptr;
}

// The architecture's defaults (Hugging Face's configuration classes) before the keys are read.
void defaults(Arch a, DecoderConfig& d) {
  GptConfig& c = d.config;
  GptArch& x = c.arch;
  c.drop_rate = 0.0;
  c.qkv_bias = a == kQwen2 || a == kNeox;
  x.rotary = true;
  x.out_bias = a == kNeox;
  x.mlp_bias = a == kNeox;
  x.norm = a == kNeox ? NormKind::layer_norm : NormKind::rms_norm;
  x.norm_eps = a == kNeox ? 1e-5 : 1e-6;
  x.mlp = a == kNeox ? MlpKind::plain : MlpKind::gated;
  x.act = a == kNeox ? Activation::gelu_erf : a == kGemma3 ? Activation::gelu_tanh : Activation::silu;
  x.residual = a == kNeox     ? ResidualKind::parallel
               : a == kGemma3 ? ResidualKind::sandwich
                              : ResidualKind::sequential;
  x.qk_norm = a == kQwen3 || a == kGemma3;
  x.rope_theta = a == kGemma3 ? 1e6 : 10000.0;
  x.norm_plus_one = a == kGemma3;
  x.embed_scale = a == kGemma3;
  d.tied = a == kGemma3;
  if (a == kGemma3) {
    x.head_dim = 256;
    x.window = 4096;
    x.rope_local_theta = 10000.0;
    x.attn_scale = 1.0 / std::sqrt(256.0);
  }
}

// rope_scaling / rope_parameters: none ("default"), linear, llama3; anything else refused by name.
std::string read_scaling(Reading& r) {
  const json& s = r.rope_scaling;
  if (s.is_null()) return {};
  GptArch& a = r.out.config.arch;
  std::string type;
  for (const char* key : {"rope_type", "type"})
    if (const auto t = s.find(key); t != s.end() && t->is_string()) type = t->get<std::string>();
  const auto number = [&](const char* key, double& field, bool required) -> std::string {
    const auto it = s.find(key);
    if (it == s.end()) return required ? std::string("rope scaling \"") + type + "\" needs " + key : "";
    if (!it->is_number() || !(it->get<double>() > 0.0 && it->get<double>() < 1e9))
      return std::string("rope scaling's ") + key + " is " + shown(*it) + ", not a positive number";
    field = it->get<double>();
    return {};
  };
  for (const auto& [key, value] : s.items()) {
    static const std::set<std::string> known = {"rope_type",        "type",
                                                "factor",           "low_freq_factor",
                                                "high_freq_factor", "original_max_position_embeddings",
                                                "rope_theta"};
    if (!known.count(key))
      return "rope scaling's key " + quote(key) +
             " is not one the engine knows (refused rather than ignored)";
    (void)value;
  }
  if (type.empty() || type == "default") return {};
  if (type == "linear") {
    a.rope_scaling = RopeScaling::linear;
    return number("factor", a.rope_factor, true);
  }
  if (type == "llama3") {
    a.rope_scaling = RopeScaling::llama3;
    double original = 0.0;
    for (auto [key, field] : {std::pair{"factor", &a.rope_factor},
                              {"low_freq_factor", &a.rope_low_freq},
                              {"high_freq_factor", &a.rope_high_freq},
                              {"original_max_position_embeddings", &original}})
      if (std::string m = number(key, *field, true); !m.empty()) return m;
    if (original > (1 << 24)) return "rope scaling's original_max_position_embeddings is too large";
    a.rope_original_context = static_cast<int>(original);
    return {};
  }
  return "rope scaling type " + quote(type) +
         " is not one the engine computes (\"default\", \"linear\" and \"llama3\" are)";
}

}  // namespace

const std::vector<std::string>& decoder_architectures() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const ArchName& a : kArchs) n.push_back(a.name);
    return n;
  }();
  return names;
}

Status config_model_type(const std::string& where, std::string_view text, std::string& type) {
  type.clear();
  json j;
  if (Status st = parse_strict_json(where, text, j); !st.is_ok()) return st;
  const auto it = j.find("model_type");
  if (it == j.end()) return Status::ok();
  if (!it->is_string())
    return Status::fail(quote(where, kQuoteCap, '\0') + ": model_type is " + shown(*it) +
                        ", not a string naming the architecture");
  type = it->get<std::string>();
  return Status::ok();
}

Status read_decoder_config(const std::string& where, std::string_view text, DecoderConfig& out) {
  const auto fail = [&](const std::string& m) {
    return Status::fail(quote(where, kQuoteCap, '\0') + ": " + m);
  };
  json j;
  if (Status st = parse_strict_json(where, text, j); !st.is_ok()) return st;
  const auto mt = j.find("model_type");
  if (mt == j.end()) return fail("states no model_type");
  if (!mt->is_string()) return fail("model_type is " + shown(*mt) + ", not a string naming the architecture");
  const std::string type = mt->get<std::string>();
  const ArchName* arch = nullptr;
  for (const ArchName& a : kArchs)
    if (type == a.name) arch = &a;
  if (!arch)
    return fail("model_type " + quote(type) +
                " is not an architecture attnviz runs (gpt2, llama, qwen2, qwen3, gemma3_text, gpt_neox)");
  DecoderConfig d;
  d.config.arch.name = type;
  defaults(arch->arch, d);
  Reading r{arch->arch, d, {}, false, -1.0, 0, false, false, json()};
  for (const auto& [name, value] : j.items()) {
    const Key* k = find_key(name);
    if (!k || !(k->archs & arch->arch))
      return fail("key " + quote(name) + " is not one the engine knows for " + type +
                  " (refused rather than ignored: it may change the model)");
    if (std::string m = k->check(r, *k, value); !m.empty()) return fail(m);
  }
  static const char* const kSizeKeys[] = {"vocab_size",        "hidden_size",
                                          "num_hidden_layers", "num_attention_heads",
                                          "intermediate_size", "max_position_embeddings"};
  for (int i = 0; i < 6; ++i)
    if (!r.sizes[i]) return fail(std::string("states no ") + kSizeKeys[i]);
  if (std::string m = read_scaling(r); !m.empty()) return fail(m);
  GptConfig& c = d.config;
  GptArch& a = c.arch;
  if (arch->arch == kGemma3) {
    if (!r.layer_types) {  // every sliding_window_pattern-th layer is global
      const int pattern = r.sliding_pattern > 0 ? r.sliding_pattern : 6;
      a.local.assign(static_cast<std::size_t>(c.n_layers), 1);
      for (int l = 0; l < c.n_layers; ++l)
        if ((l + 1) % pattern == 0) a.local[static_cast<std::size_t>(l)] = 0;
    }
    if (!j.contains("query_pre_attn_scalar"))
      a.attn_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim()));
  } else if (!r.layer_types || std::none_of(a.local.begin(), a.local.end(), [](char x) { return x != 0; })) {
    a.local.clear();
  }
  if (!a.local.empty() && a.local.size() != static_cast<std::size_t>(c.n_layers))
    return fail("layer_types lists " + std::to_string(a.local.size()) + " layers but num_hidden_layers is " +
                std::to_string(c.n_layers));
  if (arch->arch == kNeox && c.n_heads > 0 && c.d_model % c.n_heads == 0) {
    const int hd = c.d_model / c.n_heads;
    a.rotary_dims = static_cast<int>(hd * (r.rotary_pct >= 0.0 ? r.rotary_pct : 0.25));
    if (a.rotary_dims % 2 != 0) --a.rotary_dims;  // an odd count rotates one fewer, as inv_freq's arange does
    if (a.rotary_dims < 2) return fail("rotary_pct leaves fewer than 2 rotated dimensions per head");
  }
  if (Status st = validate(c); !st.is_ok()) return fail(st.error);
  out = std::move(d);
  return Status::ok();
}

// -- the weights
// ----------------------------------------------------------------------------------------------

WeightFiles WeightFiles::single(SafetensorsFile file) {
  WeightFiles w;
  w.name_ = file.name();
  w.files_.push_back(std::make_shared<SafetensorsFile>(std::move(file)));
  return w;
}

Status WeightFiles::open_dir(const std::string& dir_in, WeightFiles& out) {
  const std::string dir = dir_in.empty() || dir_in.back() == '/' ? dir_in : dir_in + "/";
  struct stat st {};
  WeightFiles w;
  if (::stat((dir + "model.safetensors").c_str(), &st) == 0) {
    SafetensorsFile f;
    if (Status s = SafetensorsFile::open(dir + "model.safetensors", f); !s.is_ok()) return s;
    out = single(std::move(f));
    return Status::ok();
  }
  const std::string index_path = dir + "model.safetensors.index.json";
  if (::stat(index_path.c_str(), &st) != 0)
    return Status::fail(quote(dir_in, kQuoteCap, '\0') +
                        ": holds neither model.safetensors nor model.safetensors.index.json");
  const auto fail = [&](const std::string& m) {
    return Status::fail(quote(index_path, kQuoteCap, '\0') + ": " + m);
  };
  std::string text;
  constexpr std::size_t kMaxIndexBytes = std::size_t{64} << 20;
  if (Status s = read_untrusted_file(index_path, kMaxIndexBytes, text); !s.is_ok()) return s;
  // Strictly, as config.json: a tensor named twice (nlohmann keeps the last silently), NaN, trailing text.
  json j;
  if (Status s = parse_strict_json(index_path, text, j, kMaxIndexBytes); !s.is_ok()) return s;
  const auto map = j.find("weight_map");
  if (map == j.end() || !map->is_object() || map->empty()) return fail("has no weight_map object");
  // The shards' names first, checked and counted before any is opened.
  std::vector<std::string> order;
  std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string()) return fail("weight_map's entry for " + quote(tensor) + " is not a file name");
    const std::string f = file.get<std::string>();
    // A shard is a file beside the index, never a path: nothing outside the model's folder is read.
    if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "." ||
        f == ".." || f.find('\0') != std::string::npos)
      return fail("weight_map names " + quote(f) + ", not a file name in the model's folder");
    if (shards.emplace(f, nullptr).second) {
      if (order.size() == kMaxWeightShards)
        return fail("names more than " + std::to_string(kMaxWeightShards) +
                    " shards, the most attnviz reads");
      order.push_back(f);
    }
  }
#if !defined(__EMSCRIPTEN__)
  // Every shard stays open while the model loads (its mapping is guarded against a file that shrinks): the
  // soft limit on open files (often 1,024) is raised toward the hard one when the shards need it.
  const rlim_t need = static_cast<rlim_t>(order.size() + 64);
  struct rlimit files {};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY && files.rlim_cur < need) {
    struct rlimit raised = files;
    raised.rlim_cur = files.rlim_max == RLIM_INFINITY ? need : std::min(need, files.rlim_max);
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) files = raised;
    if (files.rlim_cur < need)
      return fail("names " + std::to_string(order.size()) + " shards, but this process may open only " +
                  std::to_string(files.rlim_cur) + " files at once (ulimit -n): it needs " +
                  std::to_string(need));
  }
#endif
  for (const std::string& f : order) {
    auto sf = std::make_shared<SafetensorsFile>();
    if (Status s = SafetensorsFile::open(dir + f, *sf); !s.is_ok()) return s;
    shards[f] = std::move(sf);
  }
  std::set<std::string> claimed;
  for (const auto& [tensor, file] : map->items()) {
    const std::string& f = file.get_ref<const std::string&>();
    if (!shards[f]->find(tensor))
      return fail("weight_map puts " + quote(tensor) + " in " + quote(f) + ", which does not hold it");
    claimed.insert(tensor);
  }
  for (const auto& [name, sf] : shards) {
    for (const SafeTensor& t : sf->tensors())
      if (!claimed.count(t.name))
        return fail(quote(name) + " holds " + quote(t.name) + ", which weight_map does not list");
    w.files_.push_back(sf);
  }
  // A tensor in two shards would be ambiguous.
  std::set<std::string> seen;
  for (const auto& f : w.files_)
    for (const SafeTensor& t : f->tensors())
      if (!seen.insert(t.name).second) return fail("tensor " + quote(t.name) + " is in two shards");
  w.name_ = index_path;
  out = std::move(w);
  return Status::ok();
}

const SafeTensor* WeightFiles::find(std::string_view name) const {
  for (const auto& f : files_)
    if (const SafeTensor* t = f->find(name)) return t;
  return nullptr;
}

const SafetensorsFile* WeightFiles::file_of(std::string_view name) const {
  for (const auto& f : files_)
    if (f->find(name)) return f.get();
  return nullptr;
}

std::vector<std::string> WeightFiles::names() const {
  std::vector<std::string> n;
  for (const auto& f : files_)
    for (const SafeTensor& t : f->tensors()) n.push_back(t.name);
  return n;
}

std::uint64_t WeightFiles::mapped_bytes() const {
  std::uint64_t n = 0;
  for (const auto& f : files_)
    if (f->mapped()) n = sat_add(n, f->file_size());
  return n;
}

namespace {

struct FileChanged : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Finds each tensor a description needs, checks its shape, and packs it.
class Loader {
 public:
  Loader(const WeightFiles& files, const std::string& type, Isa isa, bool keep_16bit)
      : files_(files), type_(type), isa_(isa), keep_16bit_(keep_16bit) {}
  std::string error;
  std::set<std::string> used;

  const SafeTensor* need(const std::string& name, std::vector<std::uint64_t> shape) {
    if (!error.empty()) return nullptr;
    const SafeTensor* t = files_.find(name);
    if (!t) {
      error = "tensor " + quote(name) + " is missing (a " + type_ + " model of this config.json needs it)";
      return nullptr;
    }
    if (t->shape != shape) {
      error =
          "tensor " + quote(name) + " has shape " + shape_string(t->shape) + ", not " + shape_string(shape);
      return nullptr;
    }
    used.insert(name);
    return t;
  }
  Tensor vector(const std::string& name, int n, float add = 0.0f) {
    const SafeTensor* t = need(name, {static_cast<std::uint64_t>(n)});
    if (!t) return Tensor();
    Tensor v = Tensor::vector(n);
    widen(t->data, t->dtype, 0, t->numel, v.ptr());
    if (add != 0.0f)
      for (float& x : v.data) x = add + x;  // Gemma's (1 + w), in float as PyTorch adds it
    done(t);
    return v;
  }
  PackedMatrix matrix(const std::string& name, int out, int in) {
    const SafeTensor* t = need(name, {static_cast<std::uint64_t>(out), static_cast<std::uint64_t>(in)});
    if (!t) return PackedMatrix();
    PackedMatrix m = pack_matrix(MatrixSource{t->data, t->dtype, out, in}, false, isa_, keep_16bit_);
    done(t);
    return m;
  }
  PackedLinear linear(const std::string& name, int out, int in, bool bias) {
    PackedLinear l;
    l.weight = matrix(name + ".weight", out, in);
    if (bias) l.bias = vector(name + ".bias", out);
    return l;
  }
  void done(const SafeTensor* t) {
    const SafetensorsFile* f = files_.file_of(t->name);
    f->release(*t);
    if (Status s = f->intact(); !s.is_ok()) throw FileChanged(s.error);
  }

 private:
  const WeightFiles& files_;
  std::string type_;
  Isa isa_;
  bool keep_16bit_;
};

// Buffers that old files keep beside the weights, computed again by the engine.
bool derived_buffer(const std::string& name) {
  for (const char* end : {".rotary_emb.inv_freq", ".attention.bias", ".attention.masked_bias"})
    if (name.size() > std::strlen(end) &&
        name.compare(name.size() - std::strlen(end), std::string::npos, end) == 0)
      return true;
  return false;
}

}  // namespace

Status load_decoder(const WeightFiles& files, const std::string& config_where, std::string_view config_json,
                    const GptLoadOptions& opts, GptWeights& out) {
  DecoderConfig dc;
  if (Status s = read_decoder_config(config_where, config_json, dc); !s.is_ok()) return s;
  GptConfig& c = dc.config;
  const GptArch& a = c.arch;
  const bool neox = a.name == "gpt_neox", gemma = a.name == "gemma3_text";
  const std::string where = quote(files.name(), kQuoteCap, '\0');
  const auto fail = [&](const std::string& m) { return Status::fail(where + ": " + m); };

  const std::string head_name = neox ? "embed_out.weight" : "lm_head.weight";
  const std::string embed_name = neox ? "gpt_neox.embed_in.weight" : "model.embed_tokens.weight";
  const SafeTensor* head = files.find(head_name);
  if (dc.tied && head) {
    const SafeTensor* embed = files.find(embed_name);
    if (!embed || embed->dtype != head->dtype || embed->bytes() != head->bytes() ||
        std::memcmp(embed->data, head->data, head->bytes()) != 0)
      return fail("tie_word_embeddings is true but " + quote(head_name) +
                  " differs from the token embedding");
  }
  if (!dc.tied && !head)
    return fail("tie_word_embeddings is false but the weights have no " + quote(head_name) +
                " (the output head)");

  const Isa isa = resolve(opts.isa);
  const SafeTensor* embed_tensor = files.find(embed_name);
  const Dtype matrices = opts.keep_16bit && embed_tensor ? embed_tensor->dtype : Dtype::f32;
  const std::uint64_t bytes = packed_bytes(c, dc.tied, isa, matrices);
  const std::uint64_t mapping = opts.count_mapping ? files.mapped_bytes() : 0;
  if (opts.memory_budget && sat_add(bytes, mapping) > opts.memory_budget) {
    const BytesApart b = format_bytes_apart(bytes, opts.memory_budget);  // without a mapping, bytes > budget
    return fail("the weights need " + b.first +
                (matrices == Dtype::f32 ? " as float32" : " with 16-bit matrices") +
                (mapping ? " and the mapped files " + format_bytes(mapping) + " of address space" : "") +
                ", the budget is " + b.second);
  }

  const int V = c.vocab_size, d = c.d_model, hd = c.head_dim(), QW = c.q_width(), KW = c.kv_width(),
            F = c.ff_width();
  GptWeights w;
  w.config = c;
  w.isa = isa;
  Loader ld(files, a.name, isa, opts.keep_16bit);
  const float plus = a.norm_plus_one ? 1.0f : 0.0f;
  try {
    w.tok_emb = ld.matrix(embed_name, V, d);
    for (int l = 0; l < c.n_layers && ld.error.empty(); ++l) {
      GptBlock b;
      if (neox) {
        const std::string p = "gpt_neox.layers." + std::to_string(l) + ".";
        b.norm1_scale = ld.vector(p + "input_layernorm.weight", d);
        b.norm1_shift = ld.vector(p + "input_layernorm.bias", d);
        b.norm2_scale = ld.vector(p + "post_attention_layernorm.weight", d);
        b.norm2_shift = ld.vector(p + "post_attention_layernorm.bias", d);
        // query_key_value (3d, d): per head h, rows [h 3hd, h 3hd + hd) are q, then k, then v.
        const SafeTensor* qkv = ld.need(p + "attention.query_key_value.weight",
                                        {3 * static_cast<std::uint64_t>(d), static_cast<std::uint64_t>(d)});
        const SafeTensor* qkv_b =
            c.qkv_bias ? ld.need(p + "attention.query_key_value.bias", {3 * static_cast<std::uint64_t>(d)})
                       : nullptr;
        if (qkv) {
          Tensor parts[3] = {Tensor(d, d), Tensor(d, d), Tensor(d, d)};
          Tensor bias[3] = {Tensor::vector(d), Tensor::vector(d), Tensor::vector(d)};
          std::vector<float> row(static_cast<std::size_t>(d));
          for (int o = 0; o < 3 * d; ++o) {
            const int h = o / (3 * hd), part = (o % (3 * hd)) / hd, j = o % hd;
            widen(qkv->data, qkv->dtype, static_cast<std::size_t>(o) * static_cast<std::size_t>(d),
                  static_cast<std::size_t>(d), parts[part].ptr() + static_cast<std::size_t>(h * hd + j) * d);
            if (qkv_b)
              bias[part].data[static_cast<std::size_t>(h * hd + j)] =
                  load_element(qkv_b->data, qkv_b->dtype, static_cast<std::size_t>(o));
          }
          PackedLinear* dst[] = {&b.query, &b.key, &b.value};
          for (int m = 0; m < 3; ++m) {
            dst[m]->weight = pack_matrix(parts[m], isa);
            if (qkv_b) dst[m]->bias = std::move(bias[m]);
          }
          ld.done(qkv);
          if (qkv_b) ld.done(qkv_b);
        }
        b.out_proj = ld.linear(p + "attention.dense", d, d, a.out_bias);
        b.fc = ld.linear(p + "mlp.dense_h_to_4h", F, d, a.mlp_bias);
        b.proj = ld.linear(p + "mlp.dense_4h_to_h", d, F, a.mlp_bias);
      } else {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        b.norm1_scale = ld.vector(p + "input_layernorm.weight", d, plus);
        b.query = ld.linear(p + "self_attn.q_proj", QW, d, c.qkv_bias);
        b.key = ld.linear(p + "self_attn.k_proj", KW, d, c.qkv_bias);
        b.value = ld.linear(p + "self_attn.v_proj", KW, d, c.qkv_bias);
        b.out_proj = ld.linear(p + "self_attn.o_proj", d, QW, a.out_bias);
        if (a.qk_norm) {
          b.q_norm = ld.vector(p + "self_attn.q_norm.weight", hd, plus);
          b.k_norm = ld.vector(p + "self_attn.k_norm.weight", hd, plus);
        }
        if (gemma) {
          b.post_attn_norm = ld.vector(p + "post_attention_layernorm.weight", d, plus);
          b.norm2_scale = ld.vector(p + "pre_feedforward_layernorm.weight", d, plus);
          b.post_ff_norm = ld.vector(p + "post_feedforward_layernorm.weight", d, plus);
        } else {
          b.norm2_scale = ld.vector(p + "post_attention_layernorm.weight", d, plus);
        }
        b.gate = ld.linear(p + "mlp.gate_proj", F, d, a.mlp_bias);
        b.fc = ld.linear(p + "mlp.up_proj", F, d, a.mlp_bias);
        b.proj = ld.linear(p + "mlp.down_proj", d, F, a.mlp_bias);
      }
      w.blocks.push_back(std::move(b));
    }
    if (neox) {
      w.final_scale = ld.vector("gpt_neox.final_layer_norm.weight", d);
      w.final_shift = ld.vector("gpt_neox.final_layer_norm.bias", d);
    } else {
      w.final_scale = ld.vector("model.norm.weight", d, plus);
    }
    if (!dc.tied) w.out_head = ld.matrix(head_name, V, d);
    if (dc.tied && head) ld.used.insert(head_name);
  } catch (const std::bad_alloc&) {
    return fail("out of memory packing the weights (they need " + format_bytes(bytes) + ")");
  } catch (const FileChanged& e) {
    return Status::fail(e.what());
  }
  if (!ld.error.empty()) return fail(ld.error);
  // Every tensor of the files is part of the model: another model's (or another layer count's) are refused.
  for (const std::string& n : files.names())
    if (!ld.used.count(n) && !derived_buffer(n))
      return fail("tensor " + quote(n) + " is not part of a " + a.name + " model of this config.json (" +
                  std::to_string(c.n_layers) + " layers)");
  w.source = files.name();
  if (const auto slash = w.source.rfind('/'); slash != std::string::npos && slash > 0) {
    const auto prev = w.source.rfind('/', slash - 1);
    w.source = w.source.substr(prev == std::string::npos ? 0 : prev + 1);
  }
  w.config_from = config_where;
  out = std::move(w);
  return Status::ok();
}

}  // namespace attnviz
