#include "attnviz/io/gpt_json.hpp"

#include <cstdio>
#include <string_view>

#include "attnviz/head_kinds.hpp"
#include "attnviz/io/json_writer.hpp"
#include "attnviz/text.hpp"

namespace attnviz {
namespace {

// Opens a token's object with its id, piece and label; the caller may add fields, then closes it.
void open_token(JsonWriter& w, const Bpe& bpe, int id, bool id_labels) {
  if (id_labels) {
    w.out += "{\"id\":" + std::to_string(id) + ",\"piece\":null,\"label\":\"#" + std::to_string(id) + "\"";
    return;
  }
  const std::string& bytes = bpe.bytes(id);
  w.out += "{\"id\":" + std::to_string(id) + ",\"piece\":";
  if (check_utf8(bytes).is_ok()) {
    w.string(bytes);
  } else {
    w.out += "null,\"bytes\":[";
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      if (i) w.out += ',';
      w.out += std::to_string(static_cast<unsigned char>(bytes[i]));
    }
    w.out += ']';
  }
  w.out += ",\"label\":";
  w.string(bpe.label(id));
}

void tokens(JsonWriter& w, const Bpe& bpe, const std::vector<int>& ids, bool id_labels) {
  w.out += '[';
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) w.out += ',';
    open_token(w, bpe, ids[i], id_labels);
    w.out += '}';
  }
  w.out += ']';
}

// A double as JSON: 9 significant digits (the float32 activations it comes from hold no more), null where
// not finite.
void number(JsonWriter& w, double x) {
  if (!std::isfinite(x)) {
    w.out += "null";
    return;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  w.out += buf;
}

void numbers(JsonWriter& w, const std::vector<double>& xs) {
  w.out += '[';
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (i) w.out += ',';
    number(w, xs[i]);
  }
  w.out += ']';
}

void number_rows(JsonWriter& w, const std::vector<std::vector<double>>& rows) {
  w.out += '[';
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i) w.out += ',';
    numbers(w, rows[i]);
  }
  w.out += ']';
}

// {id, piece, label} or null for -1
void token_or_null(JsonWriter& w, const Bpe& bpe, int id, bool id_labels) {
  if (id < 0) {
    w.out += "null";
    return;
  }
  open_token(w, bpe, id, id_labels);
  w.out += '}';
}

// "position":P,"target":{...},"versus":{...}|null: what a metric measures
void metric_keys(JsonWriter& w, const Bpe& bpe, const LensTarget& t, bool id_labels) {
  w.out += "\"position\":" + std::to_string(t.position) + ",\"target\":";
  token_or_null(w, bpe, t.target, id_labels);
  w.out += ",\"versus\":";
  token_or_null(w, bpe, t.versus, id_labels);
}

void lens_keys(JsonWriter& w, const GptJsonLens& lens, const Bpe& bpe, bool id_labels) {
  if (lens.result && !lens.result->lens.empty()) {
    w.out += ",\"lens\":[";
    for (std::size_t k = 0; k < lens.result->lens.size(); ++k) {
      const LensPoint& p = lens.result->lens[k];
      if (k) w.out += ',';
      w.out += "{\"after\":";
      w.string(p.after);
      w.out += ",\"positions\":[";
      for (std::size_t t = 0; t < p.positions.size(); ++t) {
        if (t) w.out += ',';
        w.out += "{\"top\":[";
        const LensPosition& lp = p.positions[t];
        for (std::size_t i = 0; i < lp.top.size(); ++i) {
          if (i) w.out += ',';
          open_token(w, bpe, lp.top[i].id, id_labels);
          w.out += ",\"probability\":";
          number(w, lp.top[i].probability);
          w.out += ",\"logit\":";
          w.number(lp.top[i].logit);
          w.out += '}';
        }
        w.out += ']';
        if (!std::isnan(lp.target_probability)) {
          w.out += ",\"target_probability\":";
          number(w, lp.target_probability);
        }
        w.out += '}';
      }
      w.out += "]}";
    }
    w.out += ']';
  }
  if (lens.result && lens.result->attributed) {
    const Attribution& a = lens.result->attribution;
    w.out += ",\"attribution\":{";
    metric_keys(w, bpe, LensTarget{a.position, a.target, a.versus}, id_labels);
    w.out += ",\"value\":";
    number(w, a.value);
    w.out += ",\"sum\":";
    number(w, a.sum());
    w.out += ",\"components\":{\"embeddings\":";
    number(w, a.embeddings);
    w.out += ",\"heads\":";
    number_rows(w, a.heads);
    w.out += ",\"attention_bias\":";
    numbers(w, a.attention_bias);
    w.out += ",\"mlp\":";
    numbers(w, a.mlp);
    w.out += ",\"final_bias\":";
    number(w, a.final_bias);
    w.out += "}}";
  }
  if (lens.ablation && !lens.ablation->empty()) {
    w.out += ",\"ablated\":[";
    for (std::size_t i = 0; i < lens.ablation->heads.size(); ++i) {
      if (i) w.out += ',';
      const HeadRef& h = lens.ablation->heads[i];
      w.out += "{\"layer\":" + std::to_string(h.layer) + ",\"head\":" + std::to_string(h.head) + "}";
    }
    w.out += "],\"ablation\":";
    w.string(to_string(lens.ablation->kind));
  }
  if (lens.patching) {
    const Patching& p = *lens.patching;
    w.out += ",\"patching\":{\"metric\":";
    w.string(p.difference ? "logit_difference" : "logit");
    w.out += ',';
    metric_keys(w, bpe, lens.patched, id_labels);
    w.out += ",\"clean\":";
    number(w, p.clean);
    w.out += ",\"corrupted\":";
    number(w, p.corrupted);
    w.out += ",\"residual\":";
    number_rows(w, p.residual);
    w.out += ",\"heads\":";
    number_rows(w, p.heads);
    w.out += '}';
  }
}

}  // namespace

std::string gpt_result_to_json(const GptResult& r, const GptWeights& weights, const GptJsonModel& model,
                               const Bpe& bpe, const std::vector<int>* generated, const GptJsonLens* lens) {
  const GptConfig& c = r.config;
  const int T = static_cast<int>(r.ids.size()), H = c.n_heads, hd = c.head_dim(), group = H / c.kv_heads();
  JsonWriter w;
  std::size_t floats = r.logits.size();
  for (const GptLayer& l : r.layers)
    floats += l.attention.weights.size() + l.attention.scores.size() + l.attention.dropped.size() +
              l.attention.context.size() + l.resid_in.size() + l.resid_out.size();
  w.out.reserve(1024 + floats * 14);
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "{\"model\":{\"vocab_size\":%d,\"context_length\":%d,\"d_model\":%d,\"n_heads\":%d,\"n_layers\":%d,"
      "\"drop_rate\":%.15g,\"qkv_bias\":%s,\"attention_only\":%s,\"tied_head\":%s,\"parameters\":%lld",
      c.vocab_size, c.context_length, c.d_model, c.n_heads, c.n_layers, c.drop_rate,
      c.qkv_bias ? "true" : "false", c.attention_only ? "true" : "false", weights.tied() ? "true" : "false",
      static_cast<long long>(parameter_count(c, weights.tied())));
  w.out += buf;
  // The architecture: config.json's model_type and the description its blocks follow (gpt.hpp's GptArch).
  const GptArch& arch = c.arch;
  std::snprintf(
      buf, sizeof buf,
      ",\"architecture\":\"%s\",\"kv_heads\":%d,\"head_dim\":%d,\"blocks\":{\"norm\":\"%s\","
      "\"norm_plus_one\":%s,\"positions\":\"%s\",\"mlp\":\"%s\",\"activation\":\"%s\",\"mlp_width\":%d,"
      "\"residual\":\"%s\",\"qk_norm\":%s,\"embed_scale\":%s",
      arch.name.c_str(), c.kv_heads(), hd, to_string(arch.norm), arch.norm_plus_one ? "true" : "false",
      arch.rotary ? "rotary" : "learned", to_string(arch.mlp), to_string(arch.act), c.ff_width(),
      to_string(arch.residual), arch.qk_norm ? "true" : "false", arch.embed_scale ? "true" : "false");
  w.out += buf;
  if (arch.rotary) {
    std::snprintf(
        buf, sizeof buf,
        ",\"rope_theta\":%.17g,\"rope_local_theta\":%.17g,\"rotary_dims\":%d,\"rope_scaling\":\"%s\"",
        arch.rope_theta, arch.rope_local_theta > 0.0 ? arch.rope_local_theta : arch.rope_theta,
        arch.rotary_dims > 0 ? arch.rotary_dims : hd, to_string(arch.rope_scaling));
    w.out += buf;
  }
  w.out += "}";
  w.out += ",\"source\":";
  w.string(model.source);
  if (!weights.config_from.empty()) {  // loaded weights: the config.json used, and what none could check
    w.out += ",\"config\":";
    w.string(weights.config_from);
  }
  if (!weights.note.empty()) {
    w.out += ",\"note\":";
    w.string(weights.note);
  }
  if (model.seeded) w.out += ",\"seed\":" + std::to_string(model.seed);
  std::snprintf(buf, sizeof buf, "},\"options\":{\"train\":%s,\"dropout_rng\":\"%s\"},",
                r.options.train ? "true" : "false", to_string(r.options.dropout_rng));
  w.out += buf;
  w.key("tokens");
  tokens(w, bpe, r.ids, model.id_labels);
  w.out += ',';
  w.key("layers");
  w.out += '[';
  for (std::size_t li = 0; li < r.layers.size(); ++li) {
    const GptLayer& l = r.layers[li];
    const Result& a = l.attention;
    if (li) w.out += ',';
    // The layer's mask (causal, or a sliding window of `window` keys) and how much of its attention goes to
    // the first token (each head's mean weight on key 0, averaged): attention sinks, layer by layer.
    double sink = 0.0;
    for (int h = 0; h < H; ++h)
      sink += score_head(head_view(a.weights, h), r.ids).first / static_cast<double>(H);
    w.out += "{\"index\":" + std::to_string(l.index) + ",\"mask\":";
    w.out +=
        a.shape.window > 0 ? "\"sliding_window\",\"window\":" + std::to_string(a.shape.window) : "\"causal\"";
    w.out += ",\"first_token\":";
    w.number(static_cast<float>(sink));
    w.out += ",\"heads\":[";
    for (int h = 0; h < H; ++h) {
      if (h) w.out += ',';
      // what the head does, as the model view labels it (attnviz/head_kinds.hpp), from its weights
      const HeadScores k = score_head(head_view(a.weights, h), r.ids);
      w.out += "{\"kv_head\":" + std::to_string(h / group) + ",\"kind\":";
      w.string(to_string(k.kind));
      w.out += ",\"kind_scores\":{";
      for (const auto& [name, x] : {std::pair{"previous", k.previous},
                                    {"first", k.first},
                                    {"self", k.self},
                                    {"broad", k.broad},
                                    {"induction", k.induction}}) {
        if (name[0] != 'p') w.out += ',';
        w.key(name);
        if (std::string_view(name) == "induction" && !k.induction_defined)
          w.out += "null";
        else
          w.number(x);
      }
      w.out += '}';
      bool first = false;
      const auto stage = [&](const char* name, const HeadSquares& t) {
        if (t.empty()) return;
        if (!first) w.out += ',';
        first = false;
        w.key(name);
        w.matrix(t.row(h, 0), T, T, t.stride);
      };
      stage("weights", a.weights);
      stage("scores", a.scores);
      if (a.shape.dropout) stage("dropped", a.dropped);
      if (!a.context.empty()) {
        w.out += ',';
        w.key("context");
        w.matrix(a.context.ptr() + static_cast<std::size_t>(h) * hd, T, hd, c.q_width());
      }
      w.out += '}';
    }
    w.out += ']';
    if (!l.resid_in.empty()) {
      w.out += ",\"resid_in\":";
      w.tensor(l.resid_in);
      w.out += ",\"resid_out\":";
      w.tensor(l.resid_out);
    }
    w.out += '}';
  }
  w.out += "],";
  w.key("logits");
  if (r.logits.shape[0] == 1) {
    w.out += '[';
    for (int v = 0; v < r.logits.shape[1]; ++v) {
      if (v) w.out += ',';
      w.number(r.logits.at(0, v));
    }
    w.out += ']';
  } else {
    w.tensor(r.logits);
  }
  w.out += ',';
  w.key("next");
  w.out += '[';
  for (std::size_t i = 0; i < r.next.size(); ++i) {
    if (i) w.out += ',';
    open_token(w, bpe, r.next[i].id, model.id_labels);
    std::snprintf(buf, sizeof buf, ",\"probability\":%.9g,\"logit\":", r.next[i].probability);
    w.out += buf;
    w.number(r.next[i].logit);
    w.out += '}';
  }
  w.out += ']';
  if (generated) {
    w.out += ',';
    w.key("generated");
    tokens(w, bpe, *generated, model.id_labels);
    w.out += ',';
    w.key("generated_text");
    // The generated bytes as text, as the tokenizer's decode gives them (errors="replace"): a character cut
    // at the end, or never whole, is one U+FFFD for each of its maximal subparts.
    if (model.id_labels)
      w.out += "null";
    else
      w.string(to_valid_utf8(bpe.decode(*generated)));
  }
  if (lens) lens_keys(w, *lens, bpe, model.id_labels);
  // "backend": "cpu" for this engine's kernels (named by "isa"), else who computed it (e.g. "webgpu").
  std::snprintf(buf, sizeof buf,
                ",\"engine\":{\"backend\":\"%s\",\"isa\":\"%s\",\"threads\":%d,\"ms\":%.4f,\"reused\":%d}}",
                r.backend.empty() ? "cpu" : r.backend.c_str(), r.backend.empty() ? to_string(r.isa) : "none",
                r.threads, r.seconds * 1e3, r.reused);
  w.out += buf;
  return std::move(w.out);
}

}  // namespace attnviz
