// GPT-2 configurations and the book's seeded GPTModel, drawn in PyTorch's construction order.
#include <algorithm>
#include <cstdio>

#include "attnviz/gpt.hpp"
#include "attnviz/saturating.hpp"
#include "gpt_pass.hpp"

namespace attnviz {

const std::vector<GptPreset>& gpt_presets() {
  static const std::vector<GptPreset> presets = {
      {"gpt2-small", {50257, 1024, 768, 12, 12, 0.1, false}},
      {"gpt2-medium", {50257, 1024, 1024, 16, 24, 0.1, false}},
      {"gpt2-large", {50257, 1024, 1280, 20, 36, 0.1, false}},
      {"gpt2-xl", {50257, 1024, 1600, 25, 48, 0.1, false}},
  };
  return presets;
}

std::optional<GptConfig> find_gpt_preset(std::string_view name) {
  for (const GptPreset& p : gpt_presets())
    if (name == p.name) return p.config;
  return std::nullopt;
}

const char* to_string(NormKind k) {
  return k == NormKind::layer_norm ? "layer_norm" : "rms_norm";
}
const char* to_string(MlpKind k) {
  return k == MlpKind::plain ? "plain" : "gated";
}
const char* to_string(Activation a) {
  switch (a) {
    case Activation::gelu_tanh:
      return "gelu_tanh";
    case Activation::gelu_erf:
      return "gelu_erf";
    default:
      return "silu";
  }
}
const char* to_string(ResidualKind k) {
  switch (k) {
    case ResidualKind::sequential:
      return "sequential";
    case ResidualKind::parallel:
      return "parallel";
    default:
      return "sandwich";
  }
}
const char* to_string(RopeScaling s) {
  switch (s) {
    case RopeScaling::none:
      return "none";
    case RopeScaling::linear:
      return "linear";
    default:
      return "llama3";
  }
}

namespace {

// The description's own bounds (other architectures than GPT-2's).
Status validate_arch(const GptConfig& c) {
  const GptArch& a = c.arch;
  char buf[240];
  auto fail = [&](const char* what, double value, const char* limit) {
    std::snprintf(buf, sizeof buf, "%s is %g: it must be %s", what, value, limit);
    return Status::fail(buf);
  };
  if (a.kv_heads < 0 || a.kv_heads > c.n_heads)
    return fail("the key/value head count", a.kv_heads, "in 1..n_heads");
  if (c.n_heads % c.kv_heads() != 0) {
    std::snprintf(buf, sizeof buf, "%d query heads do not share %d key/value heads evenly", c.n_heads,
                  c.kv_heads());
    return Status::fail(buf);
  }
  if (a.head_dim < 0 || a.head_dim > 1024) return fail("head_dim", a.head_dim, "in 1..1024");
  if (a.head_dim == 0 && c.d_model % c.n_heads != 0) {
    std::snprintf(buf, sizeof buf, "d_model %d is not divisible by %d heads", c.d_model, c.n_heads);
    return Status::fail(buf);
  }
  if (c.head_dim() < 1) return fail("head_dim", c.head_dim(), "at least 1");
  if (static_cast<std::int64_t>(c.n_heads) * c.head_dim() > 65536)
    return fail("n_heads x head_dim", static_cast<double>(c.n_heads) * c.head_dim(), "at most 65536");
  if (a.d_ff < 0 || a.d_ff > (1 << 18)) return fail("the MLP width", a.d_ff, "in 1..262144");
  if (!(a.norm_eps > 0.0 && a.norm_eps < 1.0)) return fail("the norm epsilon", a.norm_eps, "in (0, 1)");
  if (a.rotary) {
    if (!(a.rope_theta > 1.0 && a.rope_theta < 1e12)) return fail("rope_theta", a.rope_theta, "in (1, 1e12)");
    if (!(a.rope_local_theta == 0.0 || (a.rope_local_theta > 1.0 && a.rope_local_theta < 1e12)))
      return fail("the local rope base", a.rope_local_theta, "in (1, 1e12)");
    if (a.rotary_dims < 0 || a.rotary_dims > c.head_dim() || a.rotary_dims % 2 != 0)
      return fail("the rotary dimensions", a.rotary_dims, "even and at most head_dim");
    if (c.head_dim() % 2 != 0 && a.rotary_dims == 0)
      return fail("head_dim", c.head_dim(), "even for rotary positions");
    if (!(a.rope_factor > 0.0 && a.rope_factor < 1e6))
      return fail("the rope scaling factor", a.rope_factor, "in (0, 1e6)");
    if (a.rope_scaling == RopeScaling::llama3 &&
        (!(a.rope_low_freq > 0.0) || !(a.rope_high_freq > a.rope_low_freq) || a.rope_original_context < 1))
      return Status::fail(
          "llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor and "
          "original_max_position_embeddings >= 1");
  }
  if (!(a.attn_scale >= 0.0 && a.attn_scale < 1e6))
    return fail("the attention scale", a.attn_scale, "in [0, 1e6)");
  if (a.window < 0) return fail("the sliding window", a.window, "at least 0");
  if (!a.local.empty() && a.local.size() != static_cast<std::size_t>(c.n_layers))
    return fail("the layer types' count", static_cast<double>(a.local.size()), "n_layers");
  for (char l : a.local)
    if (l && a.window < 1) return Status::fail("a sliding-window layer needs a window of at least 1");
  return Status::ok();
}

}  // namespace

Status validate(const GptConfig& c) {
  char buf[200];
  auto fail = [&](const char* what, long long value, const char* limit) {
    std::snprintf(buf, sizeof buf, "%s is %lld: it must be %s", what, value, limit);
    return Status::fail(buf);
  };
  // Bounds that keep every (rows x cols) and (heads x T x T) count of one tensor far inside 2^31 elements.
  if (c.vocab_size < 1 || c.vocab_size > (1 << 20)) return fail("vocab_size", c.vocab_size, "in 1..1048576");
  // A learned position table holds context_length rows; rotary positions hold none, and a pass's tokens are
  // bounded by its memory check instead.
  const int max_context = c.arch.rotary ? (1 << 20) : 8192;
  if (c.context_length < 1 || c.context_length > max_context)
    return fail("context_length", c.context_length, c.arch.rotary ? "in 1..1048576" : "in 1..8192");
  if (c.d_model < 1 || c.d_model > 16384) return fail("d_model", c.d_model, "in 1..16384");
  // Heads that share d_model (no explicit head width) are at most d_model of them; heads of their own width
  // at most 1024.
  const bool derived = c.arch.head_dim == 0;
  if (c.n_heads < 1 || c.n_heads > (derived ? c.d_model : 1024))
    return fail("n_heads", c.n_heads, derived ? "in 1..d_model" : "in 1..1024");
  if (Status st = validate_arch(c); !st.is_ok()) return st;
  if (c.n_layers < 1 || c.n_layers > 256) return fail("n_layers", c.n_layers, "in 1..256");
  if (!(c.drop_rate >= 0.0 && c.drop_rate < 1.0)) return Status::fail("drop_rate must be in [0, 1)");
  return Status::ok();
}

std::int64_t parameter_count(const GptConfig& c, bool tied_head) {
  const std::int64_t d = c.d_model, V = c.vocab_size;
  const GptArch& a = c.arch;
  const std::int64_t qw = c.q_width(), kw = c.kv_width(), f = c.ff_width(), hd = c.head_dim();
  const std::int64_t norm = a.norm == NormKind::layer_norm ? 2 * d : d;  // scale (and shift)
  const std::int64_t attention = d * qw + 2 * d * kw + (c.qkv_bias ? qw + 2 * kw : 0) + qw * d +
                                 (a.out_bias ? d : 0) + (a.qk_norm ? 2 * hd : 0);
  // An attention-only block has norm1 (and, with sandwich norms, the post-attention one) and no MLP.
  const std::int64_t mlp =
      c.attention_only ? 0 : (a.mlp == MlpKind::gated ? 3 : 2) * d * f + (a.mlp_bias ? f + d : 0);
  const std::int64_t norms =
      (c.attention_only ? 1 : 2) * norm * (a.residual == ResidualKind::sandwich ? 2 : 1);
  const std::int64_t block = attention + mlp + norms;
  return V * d + (a.rotary ? 0 : static_cast<std::int64_t>(c.context_length) * d) + c.n_layers * block +
         norm + (tied_head ? 0 : V * d);
}

bool GptConfig::gpt2_blocks() const {
  const GptArch& a = arch;
  const GptArch g;  // GPT-2's choices
  return a.norm == g.norm && a.norm_plus_one == g.norm_plus_one && a.norm_eps == g.norm_eps &&
         a.rotary == g.rotary && a.kv_heads == g.kv_heads && a.head_dim == g.head_dim &&
         a.qk_norm == g.qk_norm && a.attn_scale == g.attn_scale && a.out_bias == g.out_bias &&
         a.window == g.window && a.local.empty() && a.mlp == g.mlp && a.act == g.act &&
         (a.d_ff == 0 || a.d_ff == 4 * d_model) && a.mlp_bias == g.mlp_bias && a.residual == g.residual &&
         a.embed_scale == g.embed_scale;
}

std::size_t GptWeights::bytes() const {
  std::size_t n =
      tok_emb.bytes() + out_head.bytes() + (pos_emb.size() + final_scale.size() + final_shift.size()) * 4;
  for (const GptBlock& b : blocks) {
    for (const PackedLinear* l : {&b.query, &b.key, &b.value, &b.out_proj, &b.fc, &b.proj, &b.gate})
      n += l->weight.bytes() + l->bias.size() * 4;
    n += (b.norm1_scale.size() + b.norm1_shift.size() + b.norm2_scale.size() + b.norm2_shift.size() +
          b.q_norm.size() + b.k_norm.size() + b.post_attn_norm.size() + b.post_ff_norm.size()) *
         4;
  }
  return n;
}

namespace {

PackedLinear packed_linear(TorchGenerator& g, int in, int out, bool bias, Isa isa) {
  Linear l = torch_linear(g, in, out, bias);
  PackedLinear p;
  p.weight = pack_matrix(l.weight, isa);
  p.bias = std::move(l.bias);
  return p;
}

Tensor filled(int n, float value) {
  return Tensor::vector(n, value);
}

// nn.Embedding's init: normal_(0, 1), the same draws as torch.randn of its size.
void normal_fill(TorchGenerator& g, Tensor& t) {
  torch_normal_(g, t.ptr(), t.size(), 0.0, 1.0);
}

}  // namespace

Status build_gpt(const GptConfig& c, TorchGenerator& g, GptWeights& out, Isa isa) {
  if (Status st = validate(c); !st.is_ok()) return st;
  isa = resolve(isa);
  const int d = c.d_model;
  GptWeights w;
  w.config = c;
  w.isa = isa;
  {
    // nn.Embedding(vocab, d) and nn.Embedding(context, d): normal(0, 1), in that order
    Tensor tok(c.vocab_size, d);
    normal_fill(g, tok);
    w.tok_emb = pack_matrix(tok, isa);
  }
  w.pos_emb = Tensor(c.context_length, d);
  normal_fill(g, w.pos_emb);
  // TransformerBlock: att (W_query, W_key, W_value, out_proj), ff (Linear d -> 4d, GELU, Linear 4d -> d),
  // then norm1 and norm2, which draw nothing
  w.blocks.resize(static_cast<std::size_t>(c.n_layers));
  for (GptBlock& b : w.blocks) {
    b.query = packed_linear(g, d, d, c.qkv_bias, isa);
    b.key = packed_linear(g, d, d, c.qkv_bias, isa);
    b.value = packed_linear(g, d, d, c.qkv_bias, isa);
    b.out_proj = packed_linear(g, d, d, true, isa);
    b.norm1_scale = filled(d, 1.0f), b.norm1_shift = filled(d, 0.0f);
    if (c.attention_only) continue;
    b.fc = packed_linear(g, d, 4 * d, true, isa);
    b.proj = packed_linear(g, 4 * d, d, true, isa);
    b.norm2_scale = filled(d, 1.0f), b.norm2_shift = filled(d, 0.0f);
  }
  w.final_scale = filled(d, 1.0f), w.final_shift = filled(d, 0.0f);
  w.out_head = packed_linear(g, d, c.vocab_size, false, isa).weight;
  out = std::move(w);
  return Status::ok();
}

GptWeights repacked(const GptWeights& w, Isa isa) {
  GptWeights r;
  r.config = w.config;
  r.tok_emb = repack(w.tok_emb, isa);
  r.pos_emb = w.pos_emb;
  for (const GptBlock& b : w.blocks) {
    GptBlock n;
    n.norm1_scale = b.norm1_scale, n.norm1_shift = b.norm1_shift;
    n.norm2_scale = b.norm2_scale, n.norm2_shift = b.norm2_shift;
    n.q_norm = b.q_norm, n.k_norm = b.k_norm;
    n.post_attn_norm = b.post_attn_norm, n.post_ff_norm = b.post_ff_norm;
    for (auto [from, to] : {std::pair{&b.query, &n.query},
                            {&b.key, &n.key},
                            {&b.value, &n.value},
                            {&b.out_proj, &n.out_proj},
                            {&b.fc, &n.fc},
                            {&b.proj, &n.proj},
                            {&b.gate, &n.gate}}) {
      if (from->weight.data.empty()) continue;  // an attention-only block's feed-forward network
      to->weight = repack(from->weight, isa);
      to->bias = from->bias;
    }
    r.blocks.push_back(std::move(n));
  }
  r.final_scale = w.final_scale, r.final_shift = w.final_shift;
  if (!w.tied()) r.out_head = repack(w.out_head, isa);
  r.isa = resolve(isa);
  r.source = w.source;
  r.config_from = w.config_from;
  r.note = w.note;
  return r;
}

const GptLayer* GptResult::layer(int index) const {
  for (const GptLayer& l : layers)
    if (l.index == index) return &l;
  return nullptr;
}

Status seeded_gpt(const GptConfig& c, std::uint64_t seed, const GptOptions& options, GptModel& out) {
  TorchGenerator g(seed);
  auto w = std::make_shared<GptWeights>();
  if (Status st = build_gpt(c, g, *w, options.exec.isa); !st.is_ok()) return st;
  std::string name = "seeded";
  for (const GptPreset& p : gpt_presets())
    if (p.config.vocab_size == c.vocab_size && p.config.d_model == c.d_model &&
        p.config.n_layers == c.n_layers && p.config.n_heads == c.n_heads &&
        p.config.context_length == c.context_length)
      name += std::string(" ") + p.name;
  w->source = name + ", seed " + std::to_string(seed);
  out = GptModel(std::move(w), g, options);
  return Status::ok();
}

std::uint64_t pass_bytes(const GptConfig& c, int tokens, const GptRequest& r) {
  const std::uint64_t T = static_cast<std::uint64_t>(std::max(tokens, 0)),
                      L = static_cast<std::uint64_t>(c.n_layers);
  // a kept square's rows are padded when typing at the end extends a pass (gpt_pass::grown_square_stride)
  const std::uint64_t padded = static_cast<std::uint64_t>(
      gpt_pass::grown_square_stride(std::max(tokens, 0), std::max(c.context_length, 0)));
  const std::uint64_t square = sat_mul(sat_mul(static_cast<std::uint64_t>(c.n_heads), padded), padded);
  // rows of the wider of d_model and the heads' width
  const std::uint64_t width = static_cast<std::uint64_t>(std::max(c.d_model, c.q_width()));
  const std::uint64_t rows = sat_mul(T, width);
  std::uint64_t kept = r.all_layers ? L : 0;
  if (!r.all_layers) {
    std::vector<int> layers = r.layers;
    if (r.detail_layer >= 0) layers.push_back(r.detail_layer);
    std::sort(layers.begin(), layers.end());
    kept = static_cast<std::uint64_t>(std::unique(layers.begin(), layers.end()) - layers.begin());
  }
  const auto stages = [](unsigned s) {
    return std::uint64_t{1} + ((s & kStageScores) != 0) + ((s & kStageScaled) != 0) +
           ((s & kStageDropped) != 0);
  };
  const std::uint64_t per_layer =
      sat_add(sat_mul(square, stages(r.stages)),
              sat_add(r.qkv ? sat_mul(rows, 6) : 0, r.residuals ? sat_mul(rows, 2) : 0));
  std::uint64_t floats = sat_mul(per_layer, kept);
  if (r.detail_layer >= 0)  // the detail layer keeps everything, whatever the rest keep
    floats = sat_add(floats, sat_add(sat_mul(square, 4 - stages(r.stages)), r.qkv ? 0 : sat_mul(rows, 6)));
  floats = sat_add(floats, sat_mul(sat_mul(rows, 2), L));  // keys and values of every layer
  // and the same packed for the attention's GEMMs, with the squares' padding (panels of up to 32 floats)
  const auto up32 = [](std::uint64_t n) { return sat_mul(sat_add(n, 31) / 32, 32); };
  const std::uint64_t packed_kv = sat_mul(sat_mul(up32(padded), static_cast<std::uint64_t>(c.kv_heads())),
                                          up32(static_cast<std::uint64_t>(c.head_dim())));
  floats = sat_add(floats, sat_mul(sat_mul(packed_kv, 2), L));
  floats = sat_add(floats, sat_add(sat_mul(rows, 6), square));  // working buffers, one layer's weights
  floats = sat_add(floats, sat_mul(sat_mul(T, static_cast<std::uint64_t>(c.ff_width())),
                                   c.arch.mlp == MlpKind::gated ? 2 : 1));  // the MLP's
  floats = sat_add(floats, sat_mul(r.all_logits ? T : 1, static_cast<std::uint64_t>(c.vocab_size)));
  return sat_mul(floats, sizeof(float));
}

}  // namespace attnviz
