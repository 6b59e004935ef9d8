// What the views say about a whole model's architecture (GptConfig::arch, docs/models.md): the grid's head
// labels with their shared key/value heads, each layer's mask, the Model panel's one line and parameter
// count, the attention-sink summary per layer, and a rotary layer's q/k steps for the stepper. Pure and
// headless; GPT-2's labels are the ones the views always had.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnviz/gpt.hpp"
#include "attnviz/viz/head_kinds.hpp"
#include "attnviz/viz/stages.hpp"

namespace attnviz::viz {

// Whether query heads share key/value heads (kv_heads < n_heads: Llama, Qwen, Gemma's grouped attention).
bool grouped_heads(const GptConfig& c);
// The key/value head query head `head` reads: head / (n_heads / kv_heads), as repeat_kv lays them out.
int kv_head_of(const GptConfig& c, int head);
// The grid's column label: "h7", or "q7 · kv1" with grouped heads.
std::string head_label(const GptConfig& c, int head);
// The hover text's line on sharing: "query head 7 shares key/value head 1 with query heads 6 to 8"; ""
// without grouped heads.
std::string head_sharing(const GptConfig& c, int head);

// A layer's mask as its header says it: "sliding window 512" (GptConfig::local_layer) or "causal".
std::string mask_label(const GptConfig& c, int layer);
std::string mask_label(const Shape& s);  // the same from a layer's result ("no mask" when it has none)

// The Model panel's line: "llama · 30 layers · 9 query heads on 3 key/value heads · RoPE theta 100000 ·
// SwiGLU · RMSNorm", with what else the description chooses (head width, rope scaling, sliding windows, q/k
// norms, the scale, residual layout).
std::string arch_line(const GptConfig& c);
// "124.4 M parameters" from 0.1 M on (as the description always said), "31,712 parameters" below (a test
// model's "0.0 M" said nothing).
std::string format_parameters(std::int64_t n);

// The attention sink per layer: the mean over the layer's heads of HeadScores::first (each head's mean over
// rows i >= 1 of A[i][0]); 0 for a layer with no heads.
std::vector<float> sink_per_layer(const std::vector<std::vector<HeadScores>>& kinds);

// A rotary layer's q/k steps (GptLayer::q_proj ..., borrowed from `l`) with the words for its norm and its
// rotation; empty for learned positions (GPT-2).
LayerSteps layer_steps(const GptConfig& c, const GptLayer& l);

}  // namespace attnviz::viz
