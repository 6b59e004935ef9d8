// What a whole-model pass checks and keeps, shared by the engine's own pass (gpt_forward.cpp) and a pass
// computed elsewhere (begin_gpt_forward / end_gpt_forward, gpt_pass.cpp), so the two cannot drift apart.
#pragma once

#include <string>
#include <vector>

#include "attnviz/gpt.hpp"

namespace attnviz::gpt_pass {

// Checks a pass's ids and request against the configuration; `kept` says which layers the pass keeps.
Status check_pass(const GptConfig& c, const std::vector<int>& ids, const GptRequest& request,
                  std::vector<char>& kept);

// What kept layer l keeps: the request's stages, or all of them (and q, k, v) for the detail layer.
unsigned stages_of(const GptRequest& request, int l);
bool qkv_of(const GptRequest& request, int l);

// The chapter-3 configuration of a block's attention.
Config attention_config(const GptWeights& w, const GptOptions& o, unsigned stages);

// The shape of layer l's attention: the configuration's, with the model's scale, output width and window
// (a sliding-window layer's).
Shape layer_shape(const GptConfig& c, const Config& ac, int l);

// The row stride a pass that extends another gives its kept (H, T, T) squares when T outgrows the old one: T
// grown by an eighth, rounded up to 16 floats, at most the context length (never below T). pass_bytes counts
// the squares at this stride, so a budget check covers the padding typing at the end can add.
inline int grown_square_stride(int T, int context) {
  const long long grown = (static_cast<long long>(T) + T / 8 + 15) / 16 * 16;  // no int overflow near INT_MAX
  return grown > context ? (T > context ? T : context) : static_cast<int>(grown);
}

// The heatmaps' labels until the caller names the tokens: their ids.
std::vector<std::string> id_labels(const std::vector<int>& ids);

}  // namespace attnviz::gpt_pass
