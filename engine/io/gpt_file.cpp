#include "attnviz/io/gpt_file.hpp"

#include "attnviz/io/decoder.hpp"

#include "attnviz/io/files.hpp"
#include "attnviz/io/gpt_config.hpp"
#include "attnviz/saturating.hpp"
#include "attnviz/text.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace attnviz {
namespace {

using Shape = std::vector<std::uint64_t>;

// One scheme's tensor names. Every name but Hugging Face's lm_head carries `prefix`.
struct Names {
  GptNaming naming;
  std::string prefix;
  std::string tok, pos, final_scale, final_shift, head;
  bool head_required;
  std::string block;  // "h." or "trf_blocks.", then the index and a suffix
  std::vector<std::string_view> block_suffixes;
  std::vector<std::string_view> block_ignored;  // buffers saved with the weights: the causal mask
};

Names hugging_face_names(std::string prefix) {
  return Names{GptNaming::hugging_face,
               prefix,
               prefix + "wte.weight",
               prefix + "wpe.weight",
               prefix + "ln_f.weight",
               prefix + "ln_f.bias",
               "lm_head.weight",
               false,
               prefix + "h.",
               {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                "mlp.c_proj.weight", "mlp.c_proj.bias"},
               {"attn.bias", "attn.masked_bias"}};
}

Names book_names() {
  return Names{GptNaming::book,
               "",
               "tok_emb.weight",
               "pos_emb.weight",
               "final_norm.scale",
               "final_norm.shift",
               "out_head.weight",
               true,
               "trf_blocks.",
               {"att.W_query.weight", "att.W_query.bias", "att.W_key.weight", "att.W_key.bias",
                "att.W_value.weight", "att.W_value.bias", "att.out_proj.weight", "att.out_proj.bias",
                "ff.layers.0.weight", "ff.layers.0.bias", "ff.layers.2.weight", "ff.layers.2.bias",
                "norm1.scale", "norm1.shift", "norm2.scale", "norm2.shift"},
               {"att.mask"}};
}

// The block index of `name` when it is `block` + index + "." + suffix (index without leading zeros), else -1.
int block_index(std::string_view name, std::string_view block, std::string_view& suffix) {
  if (name.substr(0, block.size()) != block) return -1;
  name.remove_prefix(block.size());
  const std::size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 9 || (name[0] == '0' && dot > 1)) return -1;
  int index = 0;
  for (std::size_t i = 0; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    index = index * 10 + (name[i] - '0');
  }
  suffix = name.substr(dot + 1);
  return index;
}

bool contains(const std::vector<std::string_view>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

struct Linear {
  const SafeTensor* w = nullptr;
  const SafeTensor* b = nullptr;
};

struct BlockPlan {
  const SafeTensor *norm1_scale = nullptr, *norm1_shift = nullptr, *norm2_scale = nullptr,
                   *norm2_shift = nullptr;
  const SafeTensor* qkv = nullptr;  // Hugging Face's c_attn (d, 3d) = q | k | v, and its bias
  const SafeTensor* qkv_bias = nullptr;
  Linear q, k, v;  // the book's W_query, W_key, W_value
  Linear out_proj, fc, proj;
};

// Where every weight is in the file, checked; nothing read yet but the head's comparison with the embedding.
struct Plan {
  GptFileInfo info;
  bool conv1d = false;  // Hugging Face's Conv1D matrices are stored (in, out)
  const SafeTensor *tok = nullptr, *pos = nullptr, *final_scale = nullptr, *final_shift = nullptr,
                   *head = nullptr;
  std::vector<BlockPlan> blocks;
};

// Looks tensors up by name and shape; the first problem is kept and every later lookup gives nullptr.
class Lookup {
 public:
  explicit Lookup(const SafetensorsFile& f) : f_(f) {}
  std::string error;

  const SafeTensor* need(const std::string& name, const Shape& want) {
    if (!error.empty()) return nullptr;
    const SafeTensor* t = f_.find(name);
    if (!t) {
      error = "tensor " + quote(name) + " is missing";
      return nullptr;
    }
    if (t->shape != want) {
      error = "tensor " + quote(name) + " has shape " + shape_string(t->shape) + ", expected " +
              shape_string(want);
      return nullptr;
    }
    return t;
  }
  const SafeTensor* optional(const std::string& name, const Shape& want) {
    return f_.find(name) ? need(name, want) : nullptr;
  }

 private:
  const SafetensorsFile& f_;
};

std::string names_list(const std::vector<std::string>& names) {
  std::string s;
  for (std::size_t i = 0; i < names.size() && i < 4; ++i) s += (i ? ", " : "") + quote(names[i]);
  if (names.size() > 4) s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s;
}

// A path for the output: its last two parts ("gpt2/config.json"), as the weights' source is shown.
std::string short_path(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return path;
  const auto prev = path.rfind('/', slash - 1);
  return path.substr(prev == std::string::npos ? 0 : prev + 1);
}

Status make_plan(const SafetensorsFile& file, const std::optional<std::string>& config_json,
                 const std::string& config_where, const GptLoadOptions& opts, Plan& plan) {
  const auto fail = [&](const std::string& m) {
    return Status::fail(quote(file.name(), kQuoteCap, '\0') + ": " + m);
  };
  if (opts.heads < 0) return Status::fail("the head count " + std::to_string(opts.heads) + " is negative");

  // Which naming scheme.
  const bool hf = file.find("wte.weight") || file.find("transformer.wte.weight");
  const bool book = file.find("tok_emb.weight") != nullptr;
  if (hf && book) return fail("holds both 'wte.weight' and 'tok_emb.weight': not one GPT-2 model");
  if (!hf && !book) {
    std::vector<std::string> some;
    for (const auto& t : file.tensors()) some.push_back(t.name);
    return fail(
        "has neither 'wte.weight' (Hugging Face GPT-2) nor 'tok_emb.weight' (the book's GPTModel)" +
        (some.empty() ? std::string(" (no tensors at all)") : " (it holds " + names_list(some) + ")"));
  }
  const Names n =
      hf ? hugging_face_names(file.find("transformer.wte.weight") ? "transformer." : "") : book_names();
  plan.info.naming = n.naming;
  plan.info.prefix = n.prefix;
  plan.conv1d = hf;

  // Every tensor must be one this scheme names: another architecture's tensors are refused, not skipped.
  std::vector<std::string> unknown;
  int max_block = -1;
  for (const auto& t : file.tensors()) {
    if (t.name == n.tok || t.name == n.pos || t.name == n.final_scale || t.name == n.final_shift ||
        t.name == n.head)
      continue;
    std::string_view suffix;
    const int i = block_index(t.name, n.block, suffix);
    if (i >= 0 && (contains(n.block_suffixes, suffix) || contains(n.block_ignored, suffix))) {
      max_block = std::max(max_block, i);
      continue;
    }
    unknown.push_back(t.name);
  }
  if (!unknown.empty())
    return fail((unknown.size() == 1 ? "tensor " : std::to_string(unknown.size()) + " tensors ") +
                names_list(unknown) + (unknown.size() == 1 ? " is" : " are") +
                " not part of a GPT-2 model in " + (hf ? "Hugging Face's" : "the book's") +
                " naming (another architecture?)");

  // Sizes from the embeddings.
  const SafeTensor* tok = file.find(n.tok);
  if (tok->rank() != 2 || tok->shape[0] == 0 || tok->shape[1] == 0 || tok->shape[0] > INT_MAX ||
      tok->shape[1] > INT_MAX / 4)
    return fail("tensor " + quote(n.tok) + " has shape " + shape_string(tok->shape) +
                ", not (vocab, d_model) with sizes the engine can hold");
  const std::uint64_t V = tok->shape[0], D = tok->shape[1];
  const SafeTensor* pos = file.find(n.pos);
  if (pos && (pos->rank() != 2 || pos->shape[0] == 0 || pos->shape[0] > INT_MAX))
    return fail("tensor " + quote(n.pos) + " has shape " + shape_string(pos->shape) +
                ", not (context_length, d_model)");
  Lookup look(file);
  plan.tok = tok;
  plan.pos = look.need(n.pos, {pos ? pos->shape[0] : 1, D});
  const std::uint64_t T = pos ? pos->shape[0] : 0;

  // The blocks, 0 .. highest index, each complete (a file without any reports block 0's first tensor).
  const int layers = std::max(max_block + 1, 1);
  bool qkv_bias = true, attention_only = false;
  for (int i = 0; i < layers && look.error.empty(); ++i) {
    const std::string b = n.block + std::to_string(i) + ".";
    BlockPlan p;
    if (hf) {
      p.norm1_scale = look.need(b + "ln_1.weight", {D});
      p.norm1_shift = look.need(b + "ln_1.bias", {D});
      p.qkv = look.need(b + "attn.c_attn.weight", {D, 3 * D});
      p.qkv_bias = look.need(b + "attn.c_attn.bias", {3 * D});
      p.out_proj = {look.need(b + "attn.c_proj.weight", {D, D}), look.need(b + "attn.c_proj.bias", {D})};
      p.norm2_scale = look.need(b + "ln_2.weight", {D});
      p.norm2_shift = look.need(b + "ln_2.bias", {D});
      p.fc = {look.need(b + "mlp.c_fc.weight", {D, 4 * D}), look.need(b + "mlp.c_fc.bias", {4 * D})};
      p.proj = {look.need(b + "mlp.c_proj.weight", {4 * D, D}), look.need(b + "mlp.c_proj.bias", {D})};
    } else {
      // The q/k/v biases go together, in every block or in none (block 0's W_query.bias decides).
      if (i == 0) qkv_bias = file.find(b + "att.W_query.bias") != nullptr;
      Linear* qkv[] = {&p.q, &p.k, &p.v};
      const char* names[] = {"att.W_query", "att.W_key", "att.W_value"};
      for (int m = 0; m < 3; ++m) {
        const std::string bias = b + names[m] + ".bias";
        qkv[m]->w = look.need(b + names[m] + ".weight", {D, D});
        if (look.error.empty() && (file.find(bias) != nullptr) != qkv_bias)
          look.error = "tensor " + quote(bias) + (qkv_bias ? " is missing" : " is present") +
                       " but 'trf_blocks.0.att.W_query.bias' is " + (qkv_bias ? "present" : "not") +
                       " (the q, k and v biases go together)";
        if (qkv_bias) qkv[m]->b = look.need(bias, {D});
      }
      p.out_proj = {look.need(b + "att.out_proj.weight", {D, D}), look.need(b + "att.out_proj.bias", {D})};
      p.norm1_scale = look.need(b + "norm1.scale", {D});
      p.norm1_shift = look.need(b + "norm1.shift", {D});
      // Attention-only blocks (no norm2, no feed-forward network) go together: block 0 decides.
      if (i == 0) attention_only = file.find(b + "ff.layers.0.weight") == nullptr;
      if (attention_only) {
        for (const char* part : {"ff.layers.0.weight", "ff.layers.0.bias", "ff.layers.2.weight",
                                 "ff.layers.2.bias", "norm2.scale", "norm2.shift"})
          if (look.error.empty() && file.find(b + part) != nullptr)
            look.error =
                "tensor " + quote(b + part) +
                " is present but block 0 has no feed-forward network (attention-only blocks go together)";
        if (look.error.empty()) plan.blocks.push_back(p);
        continue;
      }
      p.fc = {look.need(b + "ff.layers.0.weight", {4 * D, D}), look.need(b + "ff.layers.0.bias", {4 * D})};
      p.proj = {look.need(b + "ff.layers.2.weight", {D, 4 * D}), look.need(b + "ff.layers.2.bias", {D})};
      p.norm2_scale = look.need(b + "norm2.scale", {D});
      p.norm2_shift = look.need(b + "norm2.shift", {D});
    }
    if (look.error.empty()) plan.blocks.push_back(p);
  }
  plan.final_scale = look.need(n.final_scale, {D});
  plan.final_shift = look.need(n.final_shift, {D});
  plan.head = n.head_required ? look.need(n.head, {V, D}) : look.optional(n.head, {V, D});
  if (!look.error.empty()) return fail(look.error);

  // A head identical to the embedding is the same model tied: keep one copy.
  if (plan.head && plan.head->dtype == tok->dtype &&
      std::memcmp(plan.head->data, tok->data, tok->bytes()) == 0) {
    file.release(*plan.head);
    plan.head = nullptr;
  }
  plan.info.tied = plan.head == nullptr;

  GptConfig& c = plan.info.config;
  c.vocab_size = static_cast<int>(V);
  c.d_model = static_cast<int>(D);
  c.context_length = static_cast<int>(T);
  c.n_layers = layers;
  c.drop_rate = 0.1;  // GPT-2's; files do not record it
  c.qkv_bias = qkv_bias;
  c.attention_only = attention_only;

  // config.json: every key agrees with the weights or is refused; it may set the heads and the dropout rate.
  GptConfigStated stated;
  if (config_json) {
    const GptWeightFacts facts{c, plan.info.tied, file.find(n.head) != nullptr};
    if (Status s = read_gpt_config(config_where, *config_json, facts, stated); !s.is_ok()) return s;
    if (stated.drop_rate >= 0.0) c.drop_rate = stated.drop_rate;
  }

  // Heads: the option, else config.json, else d_model / 64.
  std::string heads_from;
  if (opts.heads > 0 && stated.heads > 0 && !stated.heads_default && opts.heads != stated.heads)
    return fail("the heads option (--heads) gives " + std::to_string(opts.heads) + " heads but " +
                quote(config_where) + " gives " + std::to_string(stated.heads) + ": leave the option out");
  if (opts.heads > 0) {
    c.n_heads = opts.heads;
    heads_from = "the heads option, --heads";
  } else if (stated.heads > 0) {
    c.n_heads = stated.heads;
    heads_from = config_where + (stated.heads_default ? " (GPT2Config's default n_head)" : "");
  } else if (D % 64 == 0) {
    c.n_heads = static_cast<int>(D / 64);
    heads_from = "d_model / 64";
  } else {
    return fail(
        "d_model " + std::to_string(D) +
        " is not a multiple of 64 and no head count was given (config.json's n_head or the heads option)");
  }
  if (D % static_cast<std::uint64_t>(c.n_heads) != 0)
    return fail("d_model " + std::to_string(D) + " does not split into " + std::to_string(c.n_heads) +
                " heads (from " + heads_from + ")");
  if (Status s = validate(c); !s.is_ok()) return fail(s.error);

  // What the output says about where the configuration came from, and what nothing could check.
  const std::string config_name = short_path(config_where);
  if (!config_json)
    plan.info.config_from = "none (sizes from the tensors, heads from " + heads_from + ")";
  else
    plan.info.config_from = config_name + (opts.heads > 0 ? " (heads from the heads option)" : "");
  if (!stated.layers)
    plan.info.note = std::to_string(layers) + (layers == 1 ? " layer" : " layers") + " found in the file; " +
                     (config_json ? config_name + " states no n_layer" : "no config.json") +
                     " to check the count against";

  plan.info.packed_bytes = packed_bytes(c, plan.info.tied, opts.isa);
  return Status::ok();
}

Tensor vector_of(const SafeTensor& t) {
  Tensor v = Tensor::vector(static_cast<int>(t.numel));
  widen(t.data, t.dtype, 0, t.numel, v.ptr());
  return v;
}

// The file's (rows, cols) matrix packed as logical (out, in): stored (out, in), or (in, out) for Conv1D.
PackedMatrix matrix_of(const SafeTensor& t, bool conv1d, Isa isa) {
  return pack_matrix(
      MatrixSource{t.data, t.dtype, static_cast<int>(t.shape[0]), static_cast<int>(t.shape[1])}, conv1d, isa);
}

// Thrown when the file shrank under the load, caught in load(): nothing leaves this file as an exception.
struct FileChanged : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string source_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const auto slash = p.rfind('/');
  const std::string base = slash == std::string::npos ? p : p.substr(slash + 1);
  if (base != "model.safetensors" || slash == std::string::npos || slash == 0) return base;
  const auto prev = p.rfind('/', slash - 1);
  return p.substr(prev == std::string::npos ? 0 : prev + 1);  // "gpt2/model.safetensors"
}

Status load(const SafetensorsFile& file, const std::optional<std::string>& config_json,
            const std::string& config_where, const GptLoadOptions& opts, GptWeights& out) {
  Plan plan;
  if (Status s = make_plan(file, config_json, config_where, opts, plan); !s.is_ok()) return s;
  const GptConfig& c = plan.info.config;
  const std::uint64_t mapping = opts.count_mapping && file.mapped() ? file.file_size() : 0;
  if (opts.memory_budget && sat_add(plan.info.packed_bytes, mapping) > opts.memory_budget) {
    const BytesApart b = format_bytes_apart(plan.info.packed_bytes, opts.memory_budget);
    return Status::fail(
        quote(file.name(), kQuoteCap, '\0') + ": the weights need " + b.first + " as float32" +
        (mapping ? " and the mapped file " + format_bytes(mapping) + " of address space" : "") +
        ", the budget is " + b.second);
  }

  const Isa isa = resolve(opts.isa);
  const bool conv1d = plan.conv1d;
  GptWeights w;
  w.config = c;
  w.isa = isa;
  w.source = source_name(file.name());
  w.config_from = plan.info.config_from;
  w.note = plan.info.note;
  // Each tensor's file pages go back once it is packed, so the mapping never stays resident beside the copy;
  // a file that shrank while it was read stops the load there (its bytes past the new end read as zeros).
  const auto done = [&](const SafeTensor* t) {
    if (t) file.release(*t);
    if (Status s = file.intact(); !s.is_ok()) throw FileChanged(s.error);
  };
  const auto linear = [&](const Linear& l) {
    PackedLinear p{matrix_of(*l.w, conv1d, isa), l.b ? vector_of(*l.b) : Tensor()};
    done(l.w);
    done(l.b);
    return p;
  };
  try {
    w.tok_emb = matrix_of(*plan.tok, false, isa);
    done(plan.tok);
    w.pos_emb = Tensor(c.context_length, c.d_model);
    widen(plan.pos->data, plan.pos->dtype, 0, plan.pos->numel, w.pos_emb.ptr());
    done(plan.pos);
    const auto D = static_cast<std::size_t>(c.d_model);
    for (const BlockPlan& p : plan.blocks) {
      GptBlock b;
      b.norm1_scale = vector_of(*p.norm1_scale);
      b.norm1_shift = vector_of(*p.norm1_shift);
      if (p.qkv) {
        // c_attn's (in, out) columns are q | k | v: transpose each third into its (out, in) Linear weight.
        Tensor parts[3] = {Tensor(c.d_model, c.d_model), Tensor(c.d_model, c.d_model),
                           Tensor(c.d_model, c.d_model)};
        std::vector<float> row(3 * D);
        for (std::size_t i = 0; i < D; ++i) {
          widen(p.qkv->data, p.qkv->dtype, i * 3 * D, 3 * D, row.data());
          for (std::size_t o = 0; o < 3 * D; ++o) parts[o / D].data[(o % D) * D + i] = row[o];  // (out, in)
        }
        const Tensor bias = vector_of(*p.qkv_bias);
        PackedLinear* dst[] = {&b.query, &b.key, &b.value};
        for (std::size_t m = 0; m < 3; ++m) {
          dst[m]->weight = pack_matrix(parts[m], isa);
          dst[m]->bias = Tensor::vector(c.d_model);
          std::copy_n(bias.data.begin() + static_cast<std::ptrdiff_t>(m * D), D, dst[m]->bias.data.begin());
        }
        done(p.qkv);
        done(p.qkv_bias);
      } else {
        b.query = linear(p.q);
        b.key = linear(p.k);
        b.value = linear(p.v);
      }
      b.out_proj = linear(p.out_proj);
      if (!c.attention_only) {
        b.norm2_scale = vector_of(*p.norm2_scale);
        b.norm2_shift = vector_of(*p.norm2_shift);
        b.fc = linear(p.fc);
        b.proj = linear(p.proj);
        done(p.norm2_scale), done(p.norm2_shift);
      }
      done(p.norm1_scale), done(p.norm1_shift);
      w.blocks.push_back(std::move(b));
    }
    w.final_scale = vector_of(*plan.final_scale);
    w.final_shift = vector_of(*plan.final_shift);
    if (plan.head) {
      w.out_head = matrix_of(*plan.head, false, isa);
      done(plan.head);
    }
  } catch (const std::bad_alloc&) {
    return Status::fail(quote(file.name(), kQuoteCap, '\0') +
                        ": out of memory packing the weights (they need " +
                        format_bytes(plan.info.packed_bytes) + ")");
  } catch (const FileChanged& e) {
    return Status::fail(e.what());
  }
  if (Status s = file.intact(); !s.is_ok()) return s;
  out = std::move(w);
  return Status::ok();
}

}  // namespace

const char* to_string(GptNaming n) {
  return n == GptNaming::hugging_face ? "Hugging Face GPT-2" : "the book's GPTModel";
}

Status inspect_gpt(const SafetensorsFile& file, const std::optional<std::string>& config_json,
                   const GptLoadOptions& opts, GptFileInfo& out) {
  Plan plan;
  if (Status s = make_plan(file, config_json, "config.json", opts, plan); !s.is_ok()) return s;
  if (Status s = file.intact(); !s.is_ok()) return s;  // the tie check read both embeddings
  out = plan.info;
  return Status::ok();
}

namespace {

// Whether config.json names another architecture than GPT-2's: then the decoder reader (decoder.hpp) loads
// it. A config.json that fails strict parsing is refused here with its own error: read as GPT-2's instead, it
// was blamed on the weights ("has neither 'wte.weight' ...", a missing tensor).
Status other_architecture(const std::string& where, const std::optional<std::string>& config_json,
                          bool& other) {
  other = false;
  if (!config_json) return Status::ok();
  std::string type;
  if (Status s = config_model_type(where, *config_json, type); !s.is_ok()) return s;
  other = !type.empty() && type != "gpt2";
  return Status::ok();
}

}  // namespace

Status load_gpt(const SafetensorsFile& file, const std::optional<std::string>& config_json,
                const GptLoadOptions& opts, GptWeights& out) {
  bool other = false;
  if (Status s = other_architecture("config.json", config_json, other); !s.is_ok()) return s;
  if (other) return load_decoder(WeightFiles::single(file), "config.json", *config_json, opts, out);
  return load(file, config_json, "config.json", opts, out);
}

Status load_gpt(std::shared_ptr<const std::vector<unsigned char>> bytes, const std::string& name,
                const std::optional<std::string>& config_json, const GptLoadOptions& opts, GptWeights& out) {
  bool other = false;
  if (Status s = other_architecture("config.json", config_json, other); !s.is_ok()) return s;
  SafetensorsFile file;
  if (Status s = SafetensorsFile::from_memory(std::move(bytes), name, file); !s.is_ok()) return s;
  if (other)
    return load_decoder(WeightFiles::single(std::move(file)), "config.json", *config_json, opts, out);
  return load(file, config_json, "config.json", opts, out);
}

Status load_gpt(const std::string& path, const GptLoadOptions& opts, GptWeights& out) {
  std::string file_path = path;
  std::optional<std::string> config;
  std::string config_path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    const std::string dir = path.empty() || path.back() == '/' ? path : path + "/";
    file_path = dir + "model.safetensors";
    config_path = dir + "config.json";
  } else {
    // A weights file in a model's folder comes with that folder's config.json, as Hugging Face's does.
    const auto slash = path.rfind('/');
    config_path = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + "config.json";
  }
  if (::stat(config_path.c_str(), &st) == 0) {
    config.emplace();
    if (Status s = read_untrusted_file(config_path, kMaxConfigBytes, *config); !s.is_ok()) return s;
  }
  // Another architecture (config.json's model_type), or weights sharded through an index: the decoder reader.
  bool other = false;
  if (Status s = other_architecture(config_path, config, other); !s.is_ok()) return s;
  const bool sharded = file_path != path && ::stat(file_path.c_str(), &st) != 0 &&
                       ::stat((path + "/model.safetensors.index.json").c_str(), &st) == 0;
  if (other || sharded) {
    if (!config)
      return Status::fail(quote(path, kQuoteCap, '\0') +
                          ": sharded weights need the folder's config.json to say what model they are");
    if (!other)
      return Status::fail(
          quote(path, kQuoteCap, '\0') +
          ": GPT-2 weights sharded over several files are not read (one model.safetensors is); "
          "sharded weights are read for llama, qwen2, qwen3, gemma3_text and gpt_neox");
    WeightFiles files;
    if (file_path != path) {
      if (Status s = WeightFiles::open_dir(path, files); !s.is_ok()) return s;
    } else {
      SafetensorsFile one;
      if (Status s = SafetensorsFile::open(file_path, one); !s.is_ok()) return s;
      files = WeightFiles::single(std::move(one));
    }
    return load_decoder(files, config_path, *config, opts, out);
  }
  SafetensorsFile file;
  if (Status s = SafetensorsFile::open(file_path, file); !s.is_ok()) return s;
  return load(file, config, config_path, opts, out);
}

}  // namespace attnviz
