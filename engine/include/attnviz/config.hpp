// What to compute: the attention variant of the book's chapter 3, its sizes and its random seed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/status.hpp"

namespace attnviz {

// The book's classes, in the order it builds them.
enum class Variant {
  simplified,  // no weights: scores = x x^T, softmax, context = weights x (no scaling, no mask)
  self_v1,     // SelfAttention_v1: W = torch.rand(d_in, d_out) parameters, q = x @ W_query
  self_v2,     // SelfAttention_v2: nn.Linear projections
  causal,      // CausalAttention: self_v2 + causal mask + dropout on the weights
  wrapper,     // MultiHeadAttentionWrapper: num_heads CausalAttention modules, outputs concatenated
  mha,         // MultiHeadAttention: one projection split into heads, then out_proj
};

// How nn.Dropout draws its mask (docs/torch-rng.md describes both).
enum class DropoutRng {
  cpu,  // PyTorch built without MKL (Debian, macOS/arm64): the book's printed outputs
  mkl,  // the official x86-64 Linux/Windows wheels
};

// Which intermediate tensors a run keeps. The attention weights, context and output are always kept.
enum Stage : unsigned {
  kStageScores = 1u << 0,   // raw q k^T
  kStageScaled = 1u << 1,   // scaled and masked scores
  kStageDropped = 1u << 2,  // weights after dropout (and the keep mask)
  kStageAll = kStageScores | kStageScaled | kStageDropped,
};

struct Config {
  Variant variant = Variant::mha;
  int d_in = 3;
  int d_out = 2;  // per head for `wrapper` (as in the book), total width for `mha`
  int num_heads = 2;
  int context_length = 1024;
  double dropout = 0.0;  // probability of dropping an attention weight, in [0, 1)
  bool qkv_bias = false;
  std::uint64_t seed = 123;  // torch.manual_seed(seed)
  bool train = true;         // modules start in training mode in PyTorch, so dropout is active by default
  bool mask = true;  // the causal mask of causal/wrapper/mha; off shows what each token would see unmasked
  DropoutRng dropout_rng = DropoutRng::cpu;
  unsigned stages = kStageAll;
};

// Sizes implied by a configuration.
struct Shape {
  int heads = 1;            // heads that compute attention weights
  int head_dim = 1;         // width of one head's q, k, v
  int width = 1;            // heads * head_dim: the merged context width
  int out_width = 1;        // width of the final output
  bool has_weights = true;  // false for `simplified`
  bool causal = false;      // causal mask applied
  bool dropout = false;     // dropout applies to this variant (and p > 0 and train)
  bool out_proj = false;
  float scale = 1.0f;  // multiplier on raw scores before softmax (1 / sqrt(head_dim) except `simplified`)
  int window = 0;      // a whole model's sliding-window layer: row i sees keys i - window + 1 .. i (0: all)
};

// Derives the shape. Only meaningful for a configuration that validate() accepts.
Shape shape_of(const Config& c);

// Checks the configuration (and a sequence length, when known: tokens <= 0 skips that check).
Status validate(const Config& c, int tokens = 0);

// causal, wrapper and mha: the variants with a causal mask and a dropout layer on the weights.
bool is_causal(Variant v);

// The configuration as PyTorch would run it: options a variant doesn't use are reset (heads 1 for single-head
// variants, dropout 0 without a dropout layer, d_out = d_in for `simplified`).
Config effective(const Config& c);

// Names as used on the command line, in the JSON format and in the UI.
const char* to_string(Variant v);
const char* to_string(DropoutRng r);
std::optional<Variant> parse_variant(std::string_view s);
std::optional<DropoutRng> parse_dropout_rng(std::string_view s);
const std::vector<Variant>& all_variants();

// Size presets: `book` (d_in 3, d_out 2, 2 heads), GPT-2 small/medium/large/xl attention layers.
struct Preset {
  const char* name;
  int d_in, d_out, num_heads, context_length;
  double dropout;
};
const std::vector<Preset>& presets();
const Preset* find_preset(std::string_view name);
// The preset whose sizes (d_in, d_out, heads, context length) the configuration has, or null.
const Preset* preset_of(const Config& c);
// Applies a preset's sizes to `c` (variant, seed and the other options stay).
void apply(const Preset& p, Config& c);

}  // namespace attnviz
