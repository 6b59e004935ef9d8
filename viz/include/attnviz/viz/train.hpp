// The Train panel's session: a model trained a slice of steps at a time between frames (both hosts), its loss
// and in-context curves, and snapshots of every head's attention on a probe, so the moment a head becomes an
// induction head can be found again with the step slider. Headless (tests/viz/test_train_session.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/head_kinds.hpp"
#include "attnviz/status.hpp"
#include "attnviz/train.hpp"

namespace attnviz {
struct RunState;  // attnviz/io/checkpoint.hpp
}

namespace attnviz::viz {

enum class TrainRecipe {
  induction,  // "Induction heads": the synthetic task on a small attention-only model
  book,       // "The book's chapter 5": the sentence box's text (or a file's), the book's loop
  custom,     // the book's loop on the text with sizes of one's own
};
const char* to_string(TrainRecipe r);

struct TrainSettings {
  TrainRecipe recipe = TrainRecipe::induction;
  TrainConfig config;  // the model (custom; the recipes set it)
  InductionTask task;
  int batch_size = 32, eval_freq = 50, snapshot_freq = 50, eval_iter = 5;
  double lr = 1e-3, weight_decay = 0.0;
  std::uint64_t seed = 123;
  // induction: the run's length a checkpoint records (run.total_steps, what attnviz-cli train --task
  // induction --resume continues to): the recipe's 5,000 steps, the CLI's --steps default. The panel itself
  // trains on past it; a checkpoint written later records the steps taken.
  int total_steps = 5000;
  std::string text;  // book and custom: the text trained on (its first 90% of characters) and validated on
  // The bytes training may take (parameters, gradients, both AdamW moments, a step's activations:
  // train_memory), checked before anything is allocated; 0: no limit.
  std::uint64_t memory_budget = 0;
};

// The settings a recipe starts from (the book's: a small model, so that a step fits between frames; the text
// is the caller's).
TrainSettings recipe_settings(TrainRecipe r);

struct TrainPoint {
  int step = 0;
  std::int64_t tokens = 0;
  double loss = 0.0;        // the step's training loss
  double val_loss = 0.0;    // book/custom: the evaluation's validation loss (NaN between evaluations)
  double in_context = 0.0;  // the in-context score (NaN between evaluations)
  // book/custom: the evaluation's training loss, the book's printed "Train loss" (over eval_iter training
  // batches in eval mode; NaN between evaluations)
  double eval_train_loss = std::numeric_limits<double>::quiet_NaN();
};

// What the probe showed at one step: every head's kind and scores, and its attention (T x T) on the probe.
struct TrainSnapshot {
  int step = 0;
  std::vector<std::vector<HeadScores>> heads;              // [layer][head]
  std::vector<std::vector<std::vector<float>>> attention;  // [layer][head], T x T row-major
};

// The loss plot's x axis, as the book's figure has it: steps below, tokens seen above. Ticks fall on round
// step counts (1, 2 or 5 times a power of ten apart, at most `max_ticks` + 1 of them, from 0 to the last
// step); each carries the tokens seen after that many steps, read from the points (0 at step 0).
struct LossAxisTick {
  int step = 0;
  std::int64_t tokens = 0;
  std::string step_label, tokens_label;  // "250", "1.02M"
};
std::vector<LossAxisTick> loss_axis_ticks(const std::vector<TrainPoint>& points, int max_ticks);
// A count in the axis's short form: 950, 9.5k, 95k, 1.02M, 3.4G.
std::string short_count(std::int64_t n);

// A text for the book's recipe from outside (a dropped or chosen file), untrusted: at most
// kMaxTrainTextBytes, not empty, well-formed UTF-8. `size`: the file's size (checked before its bytes, which
// may then be left unread). Messages name the file: "story.bin is not UTF-8 text (bad byte 0xFF at offset
// 3)".
constexpr std::uint64_t kMaxTrainTextBytes = std::uint64_t{4} << 20;
Status check_train_text(const std::string& name, std::uint64_t size, std::string_view bytes);

class TrainSession {
 public:
  // Builds the model from the settings' seed (and tokenizes the text with `tokenize` for book and custom);
  // on failure nothing changes. `tokenize`: the tokenizer of the text recipes (GPT-2's).
  Status reset(const TrainSettings& s,
               const std::function<Status(const std::string&, std::vector<int>&)>& tokenize);
  bool ready() const { return model_ != nullptr; }
  const TrainSettings& settings() const { return settings_; }

  // One optimizer step, and the evaluation and snapshot its step count calls for; a step a slice had begun
  // is finished instead.
  Status step();
  // One slice: the next pieces of work (at least one) that fit in `budget_ms`, each piece's time predicted
  // from its last runs; what a host runs once a frame while training. A step is cut into pieces: the model's
  // forward stages (the batch with the embeddings, one per block, the head in pieces of rows), its backward
  // stages (the head in pieces, each block's feed-forward and attention halves, the embeddings), the AdamW
  // update (which counts the step), then the evaluation it calls for (each evaluation batch's forward
  // stages, one a piece) and the snapshot. So a slice takes about one piece when a whole step would not fit
  // the frame, and the results are those of whole steps, bit for bit. A paused session keeps its half step:
  // Start or Step finishes it, Reset discards it; the parameters are always those of the last whole step.
  Status advance(double budget_ms);
  // Whether a step is half done (some of its pieces ran, the update not yet or its evaluation or snapshot).
  bool mid_step() const { return phase_ != Phase::forward || index_ != 0; }

  int steps_done() const { return steps_; }
  // The last steps' time (a running mean), their forward, backward and update pieces added up: the time
  // between slices, the evaluations and the snapshots are not counted.
  double ms_per_step() const { return ms_per_step_; }
  // Every advance() call's time since the reset, in order (a slice that failed included).
  const std::vector<double>& slice_ms() const { return slice_ms_; }
  // Each piece's last time in ms (-1: not run yet) and its name, in a step's order: the forward stages
  // ("forward block 1"), the backward stages ("backward head dW rows 0-8192"), "update", one evaluation
  // batch's forward stages ("evaluation head rows 0-20"), "snapshot".
  std::vector<double> piece_ms() const;
  std::vector<std::string> piece_names() const;
  const std::vector<TrainPoint>& points() const { return points_; }
  const std::vector<TrainSnapshot>& snapshots() const { return snapshots_; }
  const std::vector<int>& probe() const { return probe_; }
  // The first snapshot with an induction head, or -1.
  int first_induction() const;

  // The model as the model view runs it (GPT-2 blocks only: not the attention-only variant).
  Status weights(std::shared_ptr<GptWeights>& out) const;
  // A checkpoint folder (checkpoint.hpp) with the run state (run_state), the loss log as CSV
  // (step,tokens,loss,eval_train_loss,val_loss,in_context).
  Status write_checkpoint(const std::string& dir) const;
  std::string loss_csv() const;

  // The run state a checkpoint carries (checkpoint.hpp's RunState, the one attnviz-cli train writes), so that
  // `attnviz-cli train --resume` and continue_from() go on draw for draw: where the run stands after its last
  // whole step, its evaluation included, whatever half step is in progress (the parameters are that step's
  // too). The induction recipe's is the CLI's induction run (run.eval_freq: the snapshot interval, the steps
  // whose heads are labelled; run.total_steps: TrainSettings::total_steps, or the steps taken if more);
  // the text recipes' is the CLI's book run over the same windows. Fails before the first step.
  Status run_state(RunState& out) const;
  // Continues the run a checkpoint folder holds (this panel's Save model, or attnviz-cli train --out): its
  // model, AdamW's moments and step count, the generators, the step count and the run's settings from its run
  // state; the loss curve starts empty at that step (a checkpoint keeps no curve) and the first snapshot is
  // the model as loaded. A book run needs the text it trained on (`s.text`, tokenized by `tokenize`: the same
  // windows, checked by their hash); `s` also gives the memory budget and, for a text recipe, the evaluation
  // settings (a book run's own, when its run state records them: its lr, weight decay, evaluations and
  // appendix-D schedule, which the steps then follow, to the end of its epochs). A folder without run state,
  // or whose run does not fit (another text, a batch the panel refuses), is refused in one line; on any
  // failure nothing changes.
  Status continue_from(const std::string& dir, const TrainSettings& s,
                       const std::function<Status(const std::string&, std::vector<int>&)>& tokenize);
  // The step a continued session started from (0: a session from Reset).
  int continued_from() const { return continued_from_; }

 private:
  // The evaluation's batches, drawn when it begins (what in_context_score or loader_loss would run).
  struct EvalBatch {
    std::vector<int> inputs, targets;
    int batch = 0, side = 0;  // side: 0 the training loader's, 1 the validation loader's (book and custom)
  };
  void begin_evaluation();
  // Runs the evaluation's next forward stage (of batch eval_batch_), and what follows a batch's last.
  Status evaluate_stage();
  Status snapshot();
  // Runs the piece of the step in progress that phase_ and index_ name, then moves on.
  Status run_stage();
  // The last time of the piece phase_ and index_ name (-1: not run yet).
  double predicted_ms() const;

  TrainSettings settings_;
  std::unique_ptr<TrainModel> model_;
  AdamW opt_;
  TorchGenerator g_, data_;
  std::vector<int> train_ids_, val_ids_;
  Windows train_, val_;
  Loader loader_;
  int batch_in_epoch_ = 0;
  std::vector<int> eval_in_, eval_out_, probe_;
  int steps_ = 0;
  std::int64_t tokens_ = 0;
  double ms_per_step_ = 0.0;
  // The next piece: phase_'s piece index_ (forward and backward: the model's stage; evaluate: the forward
  // stage of eval_batch_). Forward 0 begins a new step.
  enum class Phase { forward, backward, update, evaluate, snapshot };
  Phase phase_ = Phase::forward;
  int index_ = 0;
  float pending_loss_ = 0.0f;
  std::int64_t pending_tokens_ = 0;
  bool snapshot_due_ = false;
  std::vector<EvalBatch> eval_batches_;
  std::size_t eval_batch_ = 0;
  // run_state() ran the model on other inputs (the probes): an evaluation batch's forward stages in progress
  // are gone
  mutable bool forward_interrupted_ = false;
  double eval_sum_[2] = {0.0, 0.0};
  int eval_count_[2] = {0, 0};
  double step_ms_ = 0.0;  // the step in progress's pieces so far
  // each piece's last time (-1: never run), what advance() predicts from, and names, by phase
  std::vector<double> forward_ms_, backward_ms_, eval_ms_;
  double update_ms_ = -1.0, snapshot_ms_ = -1.0;
  std::vector<std::string> forward_names_, backward_names_, eval_names_;
  std::vector<double> slice_ms_;
  std::vector<TrainPoint> points_;
  std::vector<TrainSnapshot> snapshots_;

  // What a checkpoint's run state needs while a step is half done (run_state): the generators and the
  // loader's place as the step in progress found them, kept when it begins.
  void keep_step_start();
  TorchGenerator start_g_, start_data_;
  std::uint64_t start_sampler_seed_ = 0;
  // A continued session: the step it continued from, its checkpoint's run state, and that run's first step
  // with an induction head (-1: none before it).
  int continued_from_ = 0, run_first_induction_ = -1;
  std::shared_ptr<const RunState> continued_run_;
  // reset() makes AdamW's zero moments (continue_from's session, which takes its checkpoint's, does not: a
  // third copy of the moments would raise the peak of continuing a large model)
  bool moments_at_reset_ = true;
  // A text recipe's run as its checkpoint records it (RunState::settings): its total in epochs (the CLI's
  // --epochs default for the panel's own runs, grown to the steps taken), and a continued CLI run's
  // appendix-D schedule, which the update follows as train_book does (the panel's own runs have none).
  int epochs_ = 10;
  bool use_schedule_ = false;
  LrSchedule schedule_;
};

}  // namespace attnviz::viz
