// A whole-model pass as JSON (attnviz-cli --model ... --json; the page's per-layer export). Every key is
// described in docs/cli.md ("Whole models"):
//   model      {vocab_size, context_length, d_model, n_heads, n_layers, drop_rate, qkv_bias, tied_head,
//               parameters, source, seed (seeded models only), config and note (loaded weights only: the
//               config.json used, or "none (...)"; what nothing could check, when something)}
//   options    {train, dropout_rng}: train is the mode the pass ran in (dropout when drop_rate > 0)
//   tokens     [{id, piece, label}]: piece is the token's text, or null with "bytes" when it holds part of
//              a multi-byte character; label is the display form (bpe.hpp)
//   layers     [{index, heads: [{weights, scores?, dropped?, context?}], resid_in?, resid_out?}]: the kept
//              layers
//   logits     the last position's (vocab), or every position's (T x vocab) when they were kept
//   next       [{id, piece, label, probability, logit}], most probable first
//   generated  [{id, piece, label}] and generated_text (U+FFFD for each broken part of a character, as
//              the tokenizer's decode with errors="replace"), when tokens were generated
//   engine     {backend, isa, threads, ms, reused}
// and, where the causal tools were asked for (attnviz/lens.hpp, docs/lens.md):
//   lens        [{after: "embeddings" | "block N", positions: [{top: [{id, piece, label, probability,
//   logit}],
//                target_probability?}]}]: L + 1 points; target_probability only where a target was given
//   attribution {position, target: {id, piece, label}, versus: {...} | null, value, sum, components:
//                {embeddings, heads: [L][H], attention_bias: [L], mlp: [L], final_bias}}
//   ablated     [{layer, head}] and ablation: "zero" | "mean": every other key is computed with them ablated
//   patching    {metric: "logit" | "logit_difference", position, target, versus, clean, corrupted,
//                residual: [L][T], heads: [L][H]}
// Every number is finite: the engine refuses a pass that is not.
#pragma once

#include <string>
#include <vector>

#include "attnviz/gpt.hpp"
#include "attnviz/io/bpe.hpp"
#include "attnviz/lens.hpp"

namespace attnviz {

struct GptJsonModel {
  std::string source;
  bool seeded = false;
  std::uint64_t seed = 0;
  // The ids came as ids (attnviz-cli --ids): tokens carry "piece": null and the label "#ID", and
  // "generated_text" is null, whatever the tokenizer would say.
  bool id_labels = false;
};

// What the causal tools computed, for the keys above (null or empty: the key is left out).
struct GptJsonLens {
  const LensResult* result = nullptr;  // "lens" where it holds one, "attribution" where attributed
  const Ablation* ablation = nullptr;  // "ablated" where it names heads
  const Patching* patching = nullptr;  // "patching"
  LensTarget patched;                  // the patching metric's target (resolved)
};

std::string gpt_result_to_json(const GptResult& r, const GptWeights& w, const GptJsonModel& model,
                               const Bpe& bpe, const std::vector<int>* generated = nullptr,
                               const GptJsonLens* lens = nullptr);

}  // namespace attnviz
