#include "attnviz/viz/arch.hpp"

#include <cmath>
#include <cstdio>

namespace attnviz::viz {
namespace {

constexpr const char* kDot = " \xC2\xB7 ";  // U+00B7, in ImGui's default font (Latin-1)

// Whole numbers in full ("1000000", never "1e+06": RoPE bases are read as written in config.json).
std::string num(double x) {
  char buf[48];
  std::snprintf(buf, sizeof buf, x == std::floor(x) && std::fabs(x) < 1e15 ? "%.0f" : "%g", x);
  return buf;
}

std::string plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string rope_scaling_text(const GptArch& a) {
  switch (a.rope_scaling) {
    case RopeScaling::linear:
      return ", linear x" + num(a.rope_factor);
    case RopeScaling::llama3:
      return ", llama3 x" + num(a.rope_factor);
    case RopeScaling::none:
      break;
  }
  return "";
}

// The rotated dimensions of a head: "all 64 dims" or "the first 16 of 64 dims" (GPT-NeoX's rotary_pct).
std::string rotated_dims(const GptConfig& c) {
  const int hd = c.head_dim(), r = c.arch.rotary_dims;
  return r > 0 && r < hd ? "the first " + std::to_string(r) + " of " + std::to_string(hd) + " dims"
                         : "all " + std::to_string(hd) + " dims";
}

int local_layers(const GptConfig& c) {
  int n = 0;
  for (int l = 0; l < c.n_layers; ++l) n += c.local_layer(l) ? 1 : 0;
  return n;
}

}  // namespace

bool grouped_heads(const GptConfig& c) {
  return c.kv_heads() < c.n_heads;
}

int kv_head_of(const GptConfig& c, int head) {
  const int kv = c.kv_heads();
  return kv > 0 && kv <= c.n_heads && c.n_heads % kv == 0 ? head / (c.n_heads / kv) : head;
}

std::string head_label(const GptConfig& c, int head) {
  if (!grouped_heads(c)) return "h" + std::to_string(head);
  return "q" + std::to_string(head) + kDot + "kv" + std::to_string(kv_head_of(c, head));
}

std::string head_sharing(const GptConfig& c, int head) {
  if (!grouped_heads(c) || c.kv_heads() < 1 || c.n_heads % c.kv_heads() != 0) return "";
  const int group = c.n_heads / c.kv_heads(), kv = kv_head_of(c, head);
  const std::string line = "query head " + std::to_string(head) + " shares key/value head " +
                           std::to_string(kv) + " with query heads ";
  return line + std::to_string(kv * group) + " to " + std::to_string(kv * group + group - 1);
}

std::string mask_label(const GptConfig& c, int layer) {
  return c.local_layer(layer) && c.arch.window > 0 ? "sliding window " + std::to_string(c.arch.window)
                                                   : "causal";
}

std::string mask_label(const Shape& s) {
  if (!s.causal) return "no mask";
  return s.window > 0 ? "sliding window " + std::to_string(s.window) : "causal";
}

std::string arch_line(const GptConfig& c) {
  const GptArch& a = c.arch;
  std::string s = a.name + kDot + plural(c.n_layers, "layer", "layers") + kDot;
  s += grouped_heads(c) ? plural(c.n_heads, "query head", "query heads") + " on " +
                              plural(c.kv_heads(), "key/value head", "key/value heads")
                        : plural(c.n_heads, "head", "heads");
  if (c.head_dim() * c.n_heads != c.d_model)
    s += kDot + std::string("head dim ") + std::to_string(c.head_dim());
  if (a.rotary) {
    s += kDot + std::string("RoPE theta ") + num(a.rope_theta) + rope_scaling_text(a);
    if (a.rotary_dims > 0 && a.rotary_dims < c.head_dim()) s += " on " + rotated_dims(c);
    if (a.rope_local_theta > 0.0 && a.rope_local_theta != a.rope_theta && local_layers(c) > 0)
      s += " (local layers: theta " + num(a.rope_local_theta) + ")";
  } else {
    s += kDot + std::string("learned positions");
  }
  if (const int local = local_layers(c); local > 0 && a.window > 0)
    s += kDot + std::string("sliding window ") + std::to_string(a.window) + " on " + std::to_string(local) +
         " of " + std::to_string(c.n_layers) + " layers";
  if (a.qk_norm) s += kDot + std::string("q/k norm");
  if (a.attn_scale > 0.0 &&
      static_cast<float>(a.attn_scale) != 1.0f / static_cast<float>(std::sqrt(double(c.head_dim()))))
    s += kDot + std::string("scale 1/sqrt(") + num(1.0 / (a.attn_scale * a.attn_scale)) + ")";
  if (!c.attention_only) {
    const bool silu = a.act == Activation::silu;
    s += kDot + std::string(a.mlp == MlpKind::gated ? (silu ? "SwiGLU" : "GeGLU")
                                                    : (silu ? "SiLU MLP" : "GELU MLP"));
  }
  s += kDot + std::string(a.norm == NormKind::rms_norm ? "RMSNorm" : "LayerNorm") +
       (a.norm_plus_one ? " (1 + w)" : "");
  if (a.residual == ResidualKind::parallel) s += kDot + std::string("parallel attention and MLP");
  if (a.residual == ResidualKind::sandwich) s += kDot + std::string("sandwich norms");
  return s;
}

std::string format_parameters(std::int64_t n) {
  char buf[48];
  if (n >= 100'000) {
    std::snprintf(buf, sizeof buf, "%.1f M parameters", static_cast<double>(n) / 1e6);
    return buf;
  }
  std::string digits = std::to_string(n);
  for (int at = static_cast<int>(digits.size()) - 3;
       at > 0 && digits[static_cast<std::size_t>(at - 1)] != '-'; at -= 3)
    digits.insert(static_cast<std::size_t>(at), ",");
  return digits + (n == 1 ? " parameter" : " parameters");
}

std::vector<float> sink_per_layer(const std::vector<std::vector<HeadScores>>& kinds) {
  std::vector<float> out;
  out.reserve(kinds.size());
  for (const std::vector<HeadScores>& layer : kinds) {
    double sum = 0.0;
    for (const HeadScores& h : layer) sum += static_cast<double>(h.first);
    out.push_back(layer.empty() ? 0.0f : static_cast<float>(sum / static_cast<double>(layer.size())));
  }
  return out;
}

LayerSteps layer_steps(const GptConfig& c, const GptLayer& l) {
  LayerSteps s;
  const GptArch& a = c.arch;
  if (!a.rotary) return s;
  s.rotary = true;
  s.kv_heads = c.kv_heads();
  s.q_proj = &l.q_proj;
  s.k_proj = &l.k_proj;
  if (!l.q_normed.empty() && !l.k_normed.empty()) {
    s.q_normed = &l.q_normed;
    s.k_normed = &l.k_normed;
  }
  s.norm = std::string(a.norm == NormKind::rms_norm ? "RMSNorm" : "LayerNorm") + " over each head's " +
           std::to_string(c.head_dim()) + " dims, scale " + (a.norm_plus_one ? "(1 + w)" : "w");
  // A sliding-window layer rotates with its own base (Gemma 3's rope_local_base_freq), never scaled.
  const bool local = c.local_layer(l.index);
  const double base = local && a.rope_local_theta > 0.0 ? a.rope_local_theta : a.rope_theta;
  s.rope = "RoPE theta " + num(base) + (local ? "" : rope_scaling_text(a)) + " on " + rotated_dims(c) +
           " at each token's position";
  return s;
}

}  // namespace attnviz::viz
