// config.json beside GPT-2 weights, read strictly, as Hugging Face's GPT2Config is read for GPT2LMHeadModel,
// plus the book's own keys (emb_dim, n_heads, n_layers, context_length, drop_rate, qkv_bias). Every
// top-level key is one of three kinds:
//   honoured: it must agree with the weights (sizes, n_inner, n_ctx, qkv_bias, tie_word_embeddings) or it
//     sets what the engine computes (the head count, the dropout rate);
//   checked: it names arithmetic the engine has one form of (activation_function, layer_norm_epsilon,
//     scale_attn_weights, model_type, ...) and must state that form;
//   accepted: bookkeeping that changes no value of a forward pass (architectures, token ids, the summary
//     heads of other GPT-2 models, generation defaults, ...).
// Anything else is refused by name: a wrong model that runs is worse than a refusal. Duplicate keys (at any
// depth) are refused too, since JSON readers disagree on which one counts. The table of keys is in
// gpt_config.cpp; a new architecture adds its keys there.
#pragma once

#include <string>
#include <string_view>

#include "attnviz/gpt.hpp"
#include "attnviz/status.hpp"

namespace attnviz {

// What the weights hold, found from the tensors before config.json is read.
struct GptWeightFacts {
  GptConfig sizes;           // vocab_size, d_model, context_length, n_layers and qkv_bias (n_heads unused)
  bool tied = true;          // no separate output head (or one identical to the token embedding)
  bool head_tensor = false;  // the file holds an output head tensor (lm_head.weight, out_head.weight)
};

// What config.json states beyond the checks.
struct GptConfigStated {
  int heads = 0;               // 0: no head count stated (nor implied by GPT2Config's default)
  bool heads_default = false;  // `heads` is GPT2Config's default n_head (a "gpt2" config without one)
  double drop_rate = -1.0;     // < 0: no dropout rate stated
  bool layers = false;         // the layer count was stated (or implied by GPT2Config's default) and agrees
};

// The largest config.json read (a real one is under 2 kB).
constexpr std::size_t kMaxConfigBytes = 1 << 20;

// Reads `text`, checks it against `weights` and fills `out`. Messages are one line starting "WHERE: " and
// name the key.
Status read_gpt_config(const std::string& where, std::string_view text, const GptWeightFacts& weights,
                       GptConfigStated& out);

}  // namespace attnviz
