// Training the book's chapter-4 GPTModel as chapter 5 does, step for step as PyTorch 1.13 computes it: the
// forward pass with every activation kept, the backward pass of every operation, cross-entropy, AdamW, the
// optional gradient clipping and warmup + cosine schedule of the book's appendix D, and the data pipeline
// (GPTDatasetV1's windows, DataLoader's shuffling with PyTorch's draws). docs/training.md says what each
// piece reproduces and how it is checked.
//
// Parameters live as plain float tensors in PyTorch's layouts (nn.Linear (out, in)), not in the inference
// kernels' panels: they change every step. to_weights() packs them into the GptWeights the model view runs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/config.hpp"
#include "attnviz/exec.hpp"
#include "attnviz/gpt.hpp"
#include "attnviz/head_kinds.hpp"
#include "attnviz/status.hpp"
#include "attnviz/tensor.hpp"
#include "attnviz/torch_rng.hpp"

namespace attnviz {

// The model trained: GPTModel(gpt), or with gpt.attention_only the variant whose blocks are only
// x = x + drop(att(norm1(x))) (no norm2, no feed-forward network), the small model of induction-head studies.
struct TrainConfig {
  GptConfig gpt;
};

Status validate(const TrainConfig& c);

// One tensor per parameter of GPTModel, in named_parameters() order (each() visits them in that order with
// the book's names). The same type holds parameters, gradients and AdamW's two moments.
struct GptTensors {
  struct Block {
    Tensor query_w, query_b, key_w, key_b, value_w, value_b;  // (d, d), (d) when qkv_bias
    Tensor out_w, out_b;                                      // (d, d), (d)
    Tensor fc_w, fc_b, proj_w, proj_b;  // (4d, d), (4d), (d, 4d), (d); empty attention-only
    Tensor norm1_scale, norm1_shift, norm2_scale, norm2_shift;  // (d); norm2 empty attention-only
  };
  Tensor tok_emb, pos_emb;  // (vocab, d), (context, d)
  std::vector<Block> blocks;
  Tensor final_scale, final_shift;  // (d)
  Tensor out_head;                  // (vocab, d)

  // fn(name, tensor) for every non-empty tensor, in named_parameters() order ("tok_emb.weight",
  // "trf_blocks.0.att.W_query.weight", ..., "out_head.weight").
  void each(const std::function<void(const std::string& name, Tensor& t)>& fn);
  void each(const std::function<void(const std::string& name, const Tensor& t)>& fn) const;
  // The same shapes, zero-filled.
  GptTensors zeros_like() const;
  std::int64_t count() const;  // floats
};

// Where a training step's time went, for the benchmark and the progress line.
struct StepFlops {
  double forward = 0.0, backward = 0.0;
};
StepFlops train_step_flops(const TrainConfig& c, int batch, int tokens);

// Memory training holds at its peak for (batch, tokens): parameters, gradients, both AdamW moments, and the
// activations one step keeps for its backward pass (logits included), in bytes. Known before anything is
// allocated; saturating.
struct TrainMemory {
  std::uint64_t params = 0, grads = 0, moments = 0, activations = 0;
  std::uint64_t total() const;
};
TrainMemory train_memory(const TrainConfig& c, int batch, int tokens);

class TrainModel {
 public:
  // torch.manual_seed(seed); GPTModel(cfg): the parameters drawn from `g` in the book's construction order
  // (the attention-only variant draws tok_emb, pos_emb, each block's attention, then out_head).
  static Status build(const TrainConfig& c, TorchGenerator& g, TrainModel& out);
  // A model with the given parameters (a checkpoint); their shapes must be `c`'s.
  static Status from_tensors(const TrainConfig& c, GptTensors params, TrainModel& out);

  const TrainConfig& config() const { return config_; }
  GptTensors& params() { return params_; }
  const GptTensors& params() const { return params_; }
  GptTensors& grads() { return grads_; }
  const GptTensors& grads() const { return grads_; }

  // optimizer.zero_grad() (set_to_none=False: the gradients become zeros).
  void zero_grad();
  // The mean cross-entropy of the logits of `inputs` (batch, tokens) against `targets` (the same shape): in
  // train mode with dropout drawn from `g` in PyTorch's order (drop_emb; per block the attention weights,
  // then drop_shortcut after attention, then after the feed-forward network), in eval mode drawing nothing.
  // With `for_backward` the activations are kept for backward().
  Status loss(const std::vector<int>& inputs, const std::vector<int>& targets, int batch, int tokens,
              bool train, TorchGenerator& g, float& out, bool for_backward = true);
  // loss.backward(): adds the gradient of the last loss(..., for_backward = true) to grads().
  Status backward();

  // The same passes in stages, for a caller that spreads a step over several frames (the Train panel); run
  // in order, the stages compute exactly what loss() and backward() compute (loss() and backward() are
  // these stages run in a row). start_loss() checks the batch and keeps it, drawing and computing nothing;
  // forward_stage(0), (1), ... (forward_stages() - 1) then run the forward pass: the embeddings and
  // drop_emb, one stage per block, the final norm with the head's weight packed, then the head and the
  // cross-entropy in pieces of rows (one unless the vocabulary is large). Dropout is drawn from `g` in
  // loss()'s order; the last stage sets `out`. After a forward pass kept for backward, backward_stage(0), ...
  // (backward_stages() - 1): the head's weight packed, the head in pieces (its dx by rows, the final norm
  // with the last, then its weight's gradient by vocabulary rows), then each block from the last (the
  // feed-forward half, then the attention half), then the embeddings. A stage out of order, or after another
  // start_loss(), is refused.
  Status start_loss(const std::vector<int>& inputs, const std::vector<int>& targets, int batch, int tokens,
                    bool train, bool for_backward = true);
  // Allocates and writes the forward pass's largest buffer (the head's probabilities, batch x tokens x
  // vocabulary) for batches of this size, so that the first step's head stage costs what later ones do
  // (computes nothing, changes no result).
  void reserve_step(int batch, int tokens);
  int forward_stages() const;   // of the batch start_loss() kept (0 before any)
  int backward_stages() const;  // of the last forward pass kept for backward (0 before any)
  Status forward_stage(int stage, TorchGenerator& g, float& out);
  Status backward_stage(int stage);
  // What a stage computes, for the Train panel's figures: "block 2", "head rows 0-40", "block 1 ff", ...
  std::string forward_stage_name(int stage) const;
  std::string backward_stage_name(int stage) const;

  // Every head's attention weights (eval mode, no dropout) on `ids`: out[layer][head], each (T, T) row-major.
  Status attention_maps(const std::vector<int>& ids, std::vector<std::vector<std::vector<float>>>& out);
  // The loss of each position of the last loss() call, averaged over its batch (empty while that forward
  // pass is unfinished).
  std::vector<double> position_losses() const;
  // softmax of the last position's logits for `ids` in eval mode (no dropout), what generate_text_simple
  // takes the argmax of.
  Status last_probabilities(const std::vector<int>& ids, std::vector<float>& out);

  // The model as the inference engine holds it (packed for `isa`), for the model view and generation.
  GptWeights to_weights(Isa isa = Isa::automatic) const;

  Exec exec;  // the kernels: Isa::scalar runs the readable reference (double sums), other ISAs the fast GEMMs
  DropoutRng dropout_rng = DropoutRng::cpu;
  // The size of the head's pieces (forward_stage, backward_stage), in multiply-adds: with GPT-2's vocabulary
  // at d_model 128 (the book recipe), 20 rows of logits or 8,192 rows of the weight's gradient, 10 to 15 ms
  // each in the page on one thread. Any size gives the same numbers; a small vocabulary's head is one piece
  // each way.
  double head_piece_macs = 1 << 27;

 private:
  struct Activations;
  TrainConfig config_;
  GptTensors params_, grads_;
  std::shared_ptr<Activations> acts_;
};

// torch.optim.AdamW, the single-tensor path PyTorch 1.13 runs on the CPU, in float32: per parameter
// p *= 1 - lr wd; m = m b1 + (1 - b1) g; v = v b2 + (1 - b2) g g; p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) +
// eps).
struct AdamW {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
  std::int64_t steps = 0;  // steps taken (every parameter's `step`)
  int threads = 0;         // worker threads (0: every hardware thread); the result is the same for any count
  GptTensors exp_avg, exp_avg_sq;

  void step(GptTensors& params, const GptTensors& grads);
};

// torch.nn.utils.clip_grad_norm_(params, max_norm): scales every gradient by max_norm / (norm + 1e-6) when
// that is below 1; returns the total 2-norm before clipping.
double clip_grad_norm(GptTensors& grads, double max_norm);

// The book's appendix D: linear warmup from initial_lr to the peak over warmup_steps, then cosine decay to
// min_lr at total_steps; clipping (max_norm > 0) on steps after the warmup.
struct LrSchedule {
  int warmup_steps = 0;
  double initial_lr = 0.0, min_lr = 0.0, max_norm = 0.0;
  double lr(int step, int total_steps, double peak) const;
};

// --- Data, as the book builds it ---------------------------------------------------------------------------

// Python's open(path, encoding="utf-8").read(): "\r\n" and "\r" become "\n". Fails on invalid UTF-8, naming
// the byte offset.
Status read_text_universal(std::string_view bytes, std::string& out);
// text[:int(ratio * len(text))] and the rest, where len counts characters (code points), as Python does.
void split_text(std::string_view utf8, double ratio, std::string& first, std::string& second);

// GPTDatasetV1: windows of max_length tokens starting at 0, stride, 2 stride, ... while start + max_length <
// ids.size(); each target window is the input shifted by one.
struct Windows {
  int max_length = 0;
  std::vector<int> starts;
  const std::vector<int>* ids = nullptr;  // the token ids the windows cut (not owned)
  int size() const { return static_cast<int>(starts.size()); }
};
Windows make_windows(const std::vector<int>& ids, int max_length, int stride);

// torch.randperm(n, generator) of PyTorch 1.13's CPU build.
std::vector<int> torch_randperm(TorchGenerator& g, int n);

// DataLoader(dataset, batch_size, shuffle, drop_last, num_workers=0) without a generator of its own. begin()
// is `iter(loader)` plus its first draw: the iterator's base seed (two 32-bit draws from the global
// generator, shuffled or not), and for a shuffled loader the sampler's seed (two more) and the permutation it
// seeds.
class Loader {
 public:
  Loader() = default;
  Loader(int windows, int batch_size, bool shuffle, bool drop_last);
  int batches() const;  // len(loader)
  void begin(TorchGenerator& g);
  // The sampler's seed of the current iteration (0 for a plain loader), and the iteration begin() made with
  // it, rebuilt without drawing: what a resumed run continues its epoch with.
  std::uint64_t sampler_seed() const { return sampler_seed_; }
  void resume(std::uint64_t sampler_seed);
  // Window indices of batch i of the current iteration.
  std::vector<int> batch(int i) const;

 private:
  int windows_ = 0, batch_size_ = 1;
  bool shuffle_ = false, drop_last_ = false;
  std::uint64_t sampler_seed_ = 0;
  std::vector<int> order_;
};

// One batch as (inputs, targets), each batch x max_length ids, row-major.
void gather_batch(const Windows& w, const std::vector<int>& indices, std::vector<int>& inputs,
                  std::vector<int>& targets);

// --- The book's loop
// ----------------------------------------------------------------------------------------

struct TrainRun {
  int batch_size = 2, epochs = 10, eval_freq = 5, eval_iter = 5, new_tokens = 50;
  double lr = 4e-4, weight_decay = 0.1;
  LrSchedule schedule;  // warmup_steps 0 and max_norm 0: the book's train_model_simple (constant lr)
  bool use_schedule = false;
  std::vector<int> start_ids;  // the sample's start context, tokenized
};

struct TrainEvents {
  // Every eval_freq steps: "Ep E (Step S): Train loss X, Val loss Y".
  std::function<void(int epoch, int step, double train_loss, double val_loss, std::int64_t tokens_seen)> eval;
  // After each epoch: the greedy sample (start ids and the new ones).
  std::function<void(int epoch, const std::vector<int>& ids)> sample;
  // After every step, with its loss; returning false stops the run after this step.
  std::function<bool(int epoch, int step, double loss, std::int64_t tokens_seen)> step;
};

// Where a book run stands between two steps: with the global generator's state, what continues it exactly
// (a checkpoint's run state, docs/training.md "Checkpoints").
struct TrainPosition {
  int epoch = 0;  // the epoch of the next step (0-based)
  // The next batch of that epoch: 0 when its iteration has not begun (begin() still to draw); the loader's
  // batch count when every step is done but the epoch's sample is still to print.
  int batch = 0;
  int global_step = -1;  // the book's global_step: the last step taken
  std::int64_t tokens_seen = 0;
  std::uint64_t sampler_seed = 0;  // the epoch's shuffle (Loader::sampler_seed) once it has begun
};

// calc_loss_loader: the mean loss of the first num_batches batches (all when < 0) in eval mode. It iterates a
// copy of `of` (a new iter(loader)), drawing as DataLoader does. NaN for an empty loader (nothing drawn).
Status loader_loss(TrainModel& m, const Windows& w, const Loader& of, int num_batches, TorchGenerator& g,
                   double& out);

// train_model_simple (or, with run.use_schedule, the appendix-D loop's schedule and clipping) from the
// generator state `g` (the one the model was built from, as after torch.manual_seed(seed); GPTModel(cfg)).
Status train_book(TrainModel& m, AdamW& opt, const Windows& train, const Windows& val, const TrainRun& run,
                  TorchGenerator& g, const TrainEvents& events);
// The same from `at` (a fresh TrainPosition: the start), which follows the run: when it returns (at the end,
// or stopped by events.step) it says where the run stands, for a checkpoint to continue it. The schedule's
// position is at.global_step.
Status train_book(TrainModel& m, AdamW& opt, const Windows& train, const Windows& val, const TrainRun& run,
                  TorchGenerator& g, const TrainEvents& events, TrainPosition& at);

// generate_text_simple in eval mode: `steps` greedy tokens, the context cropped to context_length.
Status generate_greedy(TrainModel& m, std::vector<int> ids, int steps, std::vector<int>& out);

}  // namespace attnviz

namespace attnviz {

// --- The synthetic induction task
// ------------------------------------------------------------------------------
//
// Sequences of random tokens in which one segment appears twice (the prefix-matching setup of Olsson et al.
// 2022, "In-context learning and induction heads"): the second copy can only be predicted by finding the
// earlier occurrence of the current token and copying the token that followed it, which an induction head
// (with a previous-token head in an earlier layer) does. Repeat lengths and both positions are drawn at
// random per sequence, so that looking back a fixed distance does not work; `fixed_distance` > 0 instead
// always puts the copy that far after the original, which teaches a head to look back that distance and not
// an induction head (docs/training.md: "Induction heads").
struct InductionTask {
  int vocab = 128;  // tokens 0 .. vocab - 1
  int tokens = 64;  // positions per sequence (the model's context length)
  int min_repeat = 4, max_repeat = 24;
  int fixed_distance = 0;  // 0: random distances; else every copy this far after the last (repeats <= it)
};
Status validate(const InductionTask& t);

// One batch of `batch` sequences (inputs and next-token targets, batch x tokens each) drawn from `g`.
void induction_batch(const InductionTask& t, int batch, TorchGenerator& g, std::vector<int>& inputs,
                     std::vector<int>& targets);

// The recipe's model ("Induction heads in a minute", attnviz-cli train --task induction): attention-only, 2
// layers of 4 heads of 32 dimensions (d_model 128), no dropout, 64 tokens of context, a vocabulary of 128.
// With 64 tokens a chance recurrence is so common in training that the heads hedge at a copy's first token
// (0.87 to 0.9 on the probes); with 128 the best head holds 0.92 to 0.97 from step 4,000 on. Heads of 16
// dimensions (d_model 64) form induction heads too, but later and blurred: about 0.65 on the probes
// (docs/training.md, "Induction heads").
GptConfig induction_model();

// A probe the model never trained on: random tokens, none repeated while the vocabulary lasts, with a
// segment of `repeat` tokens repeated `distance` positions later (drawn from its own seed), `tokens` long.
std::vector<int> induction_probe(const InductionTask& t, int repeat, int distance, std::uint64_t seed);
// The probes' repeat length: a quarter of the sequence (16 tokens of 64).
int induction_probe_repeat(const InductionTask& t);

// Olsson et al.'s in-context learning score over a batch (eval mode): the mean loss at the last quarter of
// the positions minus the mean loss at the first quarter. It falls below zero as the model learns to use the
// context (at the induction phase change).
Status in_context_score(TrainModel& m, const std::vector<int>& inputs, const std::vector<int>& targets,
                        int batch, int tokens, double& out);
// The same score from the losses of each position (TrainModel::position_losses).
double in_context_of(const std::vector<double>& position_losses);

// Each head's scores on the task's probes (induction_probe at several distances the task does not fix), the
// scores averaged over the probes and labelled by label_of: heads[layer][head].
Status probe_heads(TrainModel& m, const InductionTask& t, std::vector<std::vector<HeadScores>>& heads);

struct InductionRun {
  InductionTask task;
  int batch_size = 32, steps = 5000, eval_freq = 50;
  double lr = 2e-3, weight_decay = 0.0;
  // Steps already taken (a resumed run, with `g`, `data`, the model and the optimizer as the checkpoint left
  // them): the loop goes on from step start_step + 1, with no report at start_step.
  int start_step = 0;
};

struct InductionPoint {
  int step = 0;                                // steps done
  double loss = 0.0;                           // this step's training loss
  double in_context = 0.0;                     // in_context_score on a held-out batch
  std::vector<std::vector<HeadScores>> heads;  // probe_heads
};

// AdamW on fresh task batches from `data`, dropout (if any) from `g`. `point` is called at step 0 (before
// any update, unless run.start_step > 0), every eval_freq steps and after the last; returning false stops
// the run there. `after_step` (when given) is called after every step, its report included, with the steps
// taken; returning false stops the run there too (--stop-after, Ctrl-C between reports).
Status train_induction(TrainModel& m, AdamW& opt, const InductionRun& run, TorchGenerator& g,
                       TorchGenerator& data, const std::function<bool(const InductionPoint&)>& point,
                       const std::function<bool(int steps)>& after_step = {});

}  // namespace attnviz
