// What each head does to the prediction: the causal tools of interpretability research on one pass of any
// architecture the engine opens (docs/lens.md). The definitions are TransformerLens's:
// - the logit lens: each residual point (the embeddings, then the stream after each block) through the final
//   norm, with that vector's own statistics, and the unembedding. The point after the last block gives the
//   model's own logits.
// - direct logit attribution: the metric (the target's logit at a position, or its difference with a second
//   token's) split into the embeddings, each head (its context vectors through its own slice of the output
//   projection), each layer's attention bias and MLP, and a final bias, with every norm between them and the
//   logits frozen at the pass's own statistics: the final norm's 1/sigma or 1/rms at that position (a
//   LayerNorm centres each component on its own), and Gemma 3's post-attention and post-feed-forward norms
//   at their value for the block's whole output. The components add up to the metric.
// - ablation: named heads' context vectors replaced at every position by zero or by their mean over the
//   text's positions, in the ablated pass itself; everything after them is computed again.
// - activation patching: a corrupted text of the same length, run with one activation taken from the clean
//   (typed) text's run: (m_patched - m_corrupted) / (m_clean - m_corrupted), for the residual stream entering
//   each block at each position, and for each head's context vectors at every position.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attnviz/gpt.hpp"
#include "attnviz/status.hpp"

namespace attnviz {

struct HeadRef {
  int layer = 0, head = 0;
  bool operator==(const HeadRef& o) const { return layer == o.layer && head == o.head; }
};

enum class AblationKind { zero, mean };
const char* to_string(AblationKind k);

struct Ablation {
  std::vector<HeadRef> heads;  // query heads, also where key/value heads are grouped
  AblationKind kind = AblationKind::zero;
  bool empty() const { return heads.empty(); }
  int first_layer() const;  // the lowest ablated layer (-1 when none)
};
// Fails naming a head outside the model or named twice.
Status check_ablation(const GptConfig& c, const Ablation& a);
// "3.1,0.7" -> heads {3, 1}, {0, 7}; fails naming the part that is not LAYER.HEAD.
Status parse_heads(const std::string& spec, std::vector<HeadRef>& heads);
// A PassProbe::edit_context that ablates `a`'s heads of each layer it is called with.
std::function<bool(int layer, Tensor& context)> ablation_edit(const GptConfig& c, const Ablation& a);
// The layers `a` ablates heads in: a PassProbe::edits for ablation_edit.
std::function<bool(int layer)> ablation_layers(const Ablation& a);

// The metric: the target's logit at a position, minus the versus token's when there is one.
struct LensTarget {
  int position = -1;  // 0-based; -1: the last
  int target = -1;    // a token id; -1: the top next token at the position
  int versus = -1;    // a token id; -1: none
};
// Fails naming a position past the text, a token outside the vocabulary, or a versus token equal to the
// target.
Status check_target(const GptConfig& c, int tokens, const LensTarget& t);

// One point of the logit lens: the top tokens at each position, and the target's probability when a target
// was given (NaN otherwise).
struct LensPosition {
  std::vector<TopToken> top;
  double target_probability = 0.0;
};
struct LensPoint {
  std::string after;  // "embeddings", "block 0", ...
  std::vector<LensPosition> positions;
};

struct Attribution {
  int position = 0, target = 0, versus = -1;
  double value = 0.0;  // the metric from the model's own logits
  double embeddings = 0.0;
  std::vector<std::vector<double>> heads;   // [layer][head]
  std::vector<double> attention_bias, mlp;  // [layer]
  double final_bias = 0.0;
  double sum() const;  // of the components: the value, up to rounding
};

struct Patching {
  bool difference = false;  // the metric is a logit difference (versus given)
  double clean = 0.0, corrupted = 0.0;
  std::vector<std::vector<double>> residual;  // [layer][position]: the residual stream entering the block
  std::vector<std::vector<double>> heads;     // [layer][head]: the head's context vectors at every position
};

// The logits at `position` of the final residual a probe captured (final_logits over that one row).
std::vector<float> logits_at(const GptWeights& w, const Exec& exec, const PassProbe& probe, int position);
// The metric of `t` (resolved: position and target set) over one row of logits.
double metric_of(const float* logits, const LensTarget& t);

// The lens of every residual point `probe` captured, positions [first, T) (earlier positions are left out of
// `out[k].positions`' storage as empty entries; a host that extends an earlier lens keeps them).
// `target` < 0: no target probability. `own`: the model's logits at `own_position` where the caller has them
// (the pass's own row), the last point there, not computed again.
void logit_lens(const GptWeights& w, const Exec& exec, const PassProbe& probe, int top_k, int target,
                std::vector<LensPoint>& out, int first = 0, const float* own = nullptr,
                int own_position = -1);

// The components of `t`'s metric (resolved) from what `probe` captured: each head's output at the position
// is the probe's own where the pass computed it there (PassProbe::head_position), else computed here from the
// captured context vectors (head_outputs(), the same numbers). `logits`: the model's logits at the position
// where the caller has them (the pass's own row), for the value; null: the final residual through the final
// norm and head.
Attribution attribute(const GptWeights& w, const Exec& exec, const PassProbe& probe, const LensTarget& t,
                      const float* logits = nullptr);

// What a host asks of the causal tools besides the pass itself.
struct LensRequest {
  bool lens = false;  // the logit lens
  int top_k = 5;      // its top tokens per point and position
  bool attribute = false;
  LensTarget target;
  Ablation ablation;
};

struct LensResult {
  LensTarget target;  // resolved: the position, the target (the top next token when none was given)
  std::vector<LensPoint> lens;
  bool attributed = false;
  Attribution attribution;
};

// The bytes the captures of `request` hold for a pass over `tokens` tokens that keeps `pass`, beside
// pass_bytes(): a capturing probe; where heads are ablated, a second one and a second pass (the clean pass
// is kept to extend); and the lens's top tokens (with their JSON).
std::uint64_t lens_bytes(const GptConfig& c, int tokens, const LensRequest& request, const GptRequest& pass);
// The bytes activation patching holds over `tokens` tokens: the clean and the corrupted runs' captures, and a
// patched run's starting residual and pass.
std::uint64_t patching_bytes(const GptConfig& c, int tokens);

// A model view's causal tools, kept between keystrokes: the pass captures its named points (extending the
// previous keystroke's pass as forward() does), and with heads ablated a second pass runs from the first
// ablated block on. `pass` receives the pass as the view shows it: with the heads ablated, the kept layers
// before the first ablated block are the clean pass's (the same numbers), the rest and the logits the ablated
// pass's.
class CausalLens {
 public:
  // On failure `pass` may be left empty (as forward() leaves a pass that fails after checking its input).
  Status run(GptModel& model, const std::vector<int>& ids, const GptRequest& request, const LensRequest& lr,
             GptResult& pass, LensResult& out);
  // The probe of the pass the view shows (the ablated one where heads are ablated).
  const PassProbe& probe() const { return ablated_active_ ? ablated_ : clean_; }

 private:
  PassProbe clean_, ablated_;
  GptResult clean_pass_;
  bool ablated_active_ = false;
  int lent_ = 0;  // the clean capture's layers [0, lent_) are in ablated_ (the view's) until the next run
  void lend(int layers);  // takes back what was lent, and lends layers [0, layers)
  // The last lens, and what it was computed from: the clean capture's stamp (0: none, or an ablated pass's),
  // its top k and its target (-1: none).
  std::vector<LensPoint> lens_;
  std::uint64_t lens_stamp_ = 0;
  int lens_top_k_ = -1, lens_target_ = -1;
};

// Activation patching of `clean` by `corrupted` (the same length) for a target's metric, with an ablation's
// heads ablated in every run, in slices a host can spread over its frames: begin() checks the request, then
// each step() runs up to that many runs: first the clean and the corrupted texts, once each, then the patched
// runs, each from the patched block on, from the corrupted run's residual entering it. The maps fill in order
// (the residual stream's, layer by layer, then the heads'); the entries not yet computed are NaN, as are
// `clean` and `corrupted` before their runs. The work runs on a fork of the model (its cache is left alone),
// which shares its weights: keep the model alive while the job runs.
class PatchJob {
 public:
  // Fails naming a corrupted text of another length, or a position, target or head outside the model.
  Status begin(const GptModel& model, const std::vector<int>& clean, const std::vector<int>& corrupted,
               const LensTarget& target, const Ablation& ablation);
  // Fails, and ends the job, on two texts whose metrics are equal: there is nothing to patch.
  Status step(int runs);
  // done() and total() count the patched runs; the two runs before them count in neither.
  bool finished() const { return based_ == 2 && done_ >= total_; }
  bool measured() const { return based_ == 2; }  // the clean and the corrupted texts ran, and differ
  int done() const { return done_; }
  int total() const { return total_; }
  const Patching& result() const { return out_; }
  const LensTarget& target() const { return target_; }  // resolved: the position set

 private:
  Status base_run(int i);
  Status run_from(int l, const Tensor& start, int patched_head, double& entry);
  std::unique_ptr<GptModel> runner_;
  std::vector<int> clean_, corrupted_;
  int based_ = 0;  // the clean and the corrupted runs done
  LensTarget target_;
  std::function<bool(int, Tensor&)> ablate_;
  std::function<bool(int)> ablates_;  // the layers ablate_ changes
  PassProbe runs_[2];                 // the clean and the corrupted runs' captures
  Tensor start_;
  Patching out_;
  double span_ = 0.0;
  bool mean_ = false;  // a mean ablation: every position reaches every other through the heads' means
  int done_ = 0, total_ = 0;
};

// The whole of a PatchJob in one call. `progress(done, total)` is called after each run (the clean and the
// corrupted texts' first, with done 0); returning false cancels (the status says so).
Status patch(const GptModel& model, const std::vector<int>& clean, const std::vector<int>& corrupted,
             const LensTarget& t, const Ablation& ablation, Patching& out,
             const std::function<bool(int done, int total)>& progress = {});

}  // namespace attnviz
