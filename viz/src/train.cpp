// The Train panel's session (train.hpp).
#include "attnviz/viz/train.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>

#include "attnviz/enum_names.hpp"
#include "attnviz/io/checkpoint.hpp"
#include "attnviz/text.hpp"

namespace attnviz::viz {

namespace {

constexpr EnumName<TrainRecipe> kRecipeNames[] = {
    {TrainRecipe::induction, "Induction heads"},
    {TrainRecipe::book, "The book's chapter 5"},
    {TrainRecipe::custom, "Custom sizes"},
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const char* to_string(TrainRecipe r) {
  return name_in(kRecipeNames, r);
}

TrainSettings recipe_settings(TrainRecipe r) {
  TrainSettings s;
  s.recipe = r;
  if (r == TrainRecipe::induction) {
    // attnviz-cli train --task induction's model (induction_model): attention-only, 2 layers of 4 heads
    s.config.gpt = induction_model();
    s.batch_size = 32, s.eval_freq = 50, s.snapshot_freq = 50;
    s.lr = 2e-3, s.weight_decay = 0.0;
    return s;
  }
  // The book's loop and optimizer (AdamW 4e-4, weight decay 0.1, batch 2, evaluation every 5 steps over 5
  // batches) on GPT-2's vocabulary, with a model small enough that a step fits between frames.
  s.config.gpt = GptConfig{50257, 64, 128, 4, 2, 0.1, false};
  s.batch_size = 2, s.eval_freq = 5, s.snapshot_freq = 5, s.eval_iter = 5;
  s.lr = 4e-4, s.weight_decay = 0.1;
  return s;
}

std::string short_count(std::int64_t n) {
  if (n < 1000) return std::to_string(n);
  // three significant digits, in the largest unit that keeps the value under 1000 once rounded
  static constexpr const char* kUnits[] = {"k", "M", "G", "T", "P", "E"};
  double v = static_cast<double>(n) / 1e3;
  std::size_t u = 0;
  while (v >= 999.5 && u + 1 < std::size(kUnits)) v /= 1e3, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 9.995 ? "%.2f%s" : v < 99.95 ? "%.1f%s" : "%.0f%s", v, kUnits[u]);
  return buf;
}

std::vector<LossAxisTick> loss_axis_ticks(const std::vector<TrainPoint>& points, int max_ticks) {
  const int last = points.empty() ? 0 : points.back().step;
  max_ticks = std::max(max_ticks, 1);
  // the smallest of 1, 2, 5, 10, 20, 50, ... that gives at most max_ticks intervals
  std::int64_t every = 1;
  for (std::int64_t decade = 1;; decade *= 10) {
    const std::int64_t choices[] = {decade, 2 * decade, 5 * decade};
    const std::int64_t* fit = std::find_if(std::begin(choices), std::end(choices),
                                           [&](std::int64_t c) { return last / c <= max_ticks; });
    if (fit != std::end(choices)) {
      every = *fit;
      break;
    }
  }
  std::vector<LossAxisTick> ticks;
  for (std::int64_t at = 0; at <= last; at += every) {
    LossAxisTick t;
    t.step = static_cast<int>(at);
    if (at > 0) {
      // the points hold steps 1, 2, ... in order; tokens seen after step `at`
      const auto p = std::lower_bound(points.begin(), points.end(), at,
                                      [](const TrainPoint& q, std::int64_t s) { return q.step < s; });
      t.tokens = p == points.end() ? points.back().tokens : p->tokens;
    }
    t.step_label = std::to_string(t.step);
    t.tokens_label = short_count(t.tokens);
    ticks.push_back(std::move(t));
  }
  return ticks;
}

Status check_train_text(const std::string& name, std::uint64_t size, std::string_view bytes) {
  if (size > kMaxTrainTextBytes) {
    const BytesApart b = format_bytes_apart(size, kMaxTrainTextBytes);
    return Status::fail(name + " is " + b.first + ": a text to train on may be at most " + b.second);
  }
  if (size == 0 || bytes.empty()) return Status::fail(name + " is empty: there is no text to train on");
  if (bytes.size() != size)
    return Status::fail(name + ": read " + std::to_string(bytes.size()) + " of its " + std::to_string(size) +
                        " bytes");
  if (Status st = check_utf8(bytes); !st.is_ok()) {
    // "the text is not valid UTF-8 (bad byte ...)" -> "NAME is not UTF-8 text (bad byte ...)"
    const std::size_t paren = st.error.find(" (");
    return Status::fail(name + " is not UTF-8 text" +
                        (paren == std::string::npos ? std::string() : st.error.substr(paren)));
  }
  return Status::ok();
}

Status TrainSession::reset(const TrainSettings& s,
                           const std::function<Status(const std::string&, std::vector<int>&)>& tokenize) {
  if (Status st = validate(s.config); !st.is_ok()) return st;
  if (s.batch_size < 1 || s.batch_size > 4096 || s.eval_freq < 1 || s.snapshot_freq < 1 || !(s.lr > 0))
    return Status::fail(
        "the batch size (1 to 4096), evaluation and snapshot intervals and learning rate must be "
        "positive");
  const TrainMemory need = train_memory(s.config, s.batch_size, s.config.gpt.context_length);
  if (s.memory_budget && need.total() > s.memory_budget) {
    const BytesApart b = format_bytes_apart(need.total(), s.memory_budget);
    return Status::fail("training this model needs " + b.first + " (parameters " + format_bytes(need.params) +
                        ", gradients and AdamW's moments " + format_bytes(need.grads + need.moments) +
                        ", activations " + format_bytes(need.activations) + "), more than the " + b.second +
                        " available");
  }
  auto model = std::make_unique<TrainModel>();
  TorchGenerator g(s.seed), data(s.seed + 1);
  if (Status st = TrainModel::build(s.config, g, *model); !st.is_ok()) return st;
  std::vector<int> train_ids, val_ids, eval_in, eval_out, probe;
  TrainSettings next = s;
  if (s.recipe == TrainRecipe::induction) {
    InductionTask& t = next.task;
    t.vocab = s.config.gpt.vocab_size;
    t.tokens = s.config.gpt.context_length;
    t.max_repeat = std::min(t.max_repeat, t.tokens / 2);
    t.min_repeat = std::min(t.min_repeat, t.max_repeat);
    if (Status st = validate(t); !st.is_ok()) return st;
    TorchGenerator held_out(0x5eed);
    induction_batch(t, s.batch_size, held_out, eval_in, eval_out);
    probe = induction_probe(t, induction_probe_repeat(t), t.tokens / 3, 7919u);
  } else {
    std::string text, first, second;
    if (Status st = read_text_universal(s.text, text); !st.is_ok()) return st;
    split_text(text, 0.9, first, second);
    if (!tokenize) return Status::fail("no tokenizer for the text");
    if (Status st = tokenize(first, train_ids); !st.is_ok()) return st;
    if (Status st = tokenize(second, val_ids); !st.is_ok()) return st;
    for (const std::vector<int>* ids : {&train_ids, &val_ids})
      for (int id : *ids)
        if (id >= s.config.gpt.vocab_size)
          return Status::fail("the tokenizer gives id " + std::to_string(id) +
                              ", past the model's vocabulary");
    const int ctx = s.config.gpt.context_length;
    if (make_windows(train_ids, ctx, ctx).size() < s.batch_size)
      return Status::fail("the text is too short: its first 90% (" + std::to_string(train_ids.size()) +
                          " tokens) needs one batch of " + std::to_string(s.batch_size) + " windows of " +
                          std::to_string(ctx + 1) + " tokens");
    if (make_windows(val_ids, ctx, ctx).size() < 1)
      return Status::fail("the text is too short: its last 10% (" + std::to_string(val_ids.size()) +
                          " tokens) needs one window of " + std::to_string(ctx + 1) + " tokens");
    probe.assign(val_ids.begin(), val_ids.begin() + ctx);
  }
  settings_ = std::move(next);
  model_ = std::move(model);
  opt_ = AdamW{};
  opt_.lr = s.lr, opt_.weight_decay = s.weight_decay;
  // AdamW's moments, the zeros its first step would make: allocated and written here, not in the first
  // update's slice (which took 80 ms for the book recipe's 6.5 million parameters)
  if (moments_at_reset_)
    opt_.exp_avg = model_->params().zeros_like(), opt_.exp_avg_sq = model_->params().zeros_like();
  // and the head's probabilities (51 MB for the book recipe's batches), which its first forward pass
  // allocated
  model_->reserve_step(settings_.batch_size, settings_.recipe == TrainRecipe::induction
                                                 ? settings_.task.tokens
                                                 : settings_.config.gpt.context_length);
  g_ = g, data_ = data;
  train_ids_ = std::move(train_ids), val_ids_ = std::move(val_ids);
  const int ctx = s.config.gpt.context_length;
  train_ = make_windows(train_ids_, ctx, ctx), val_ = make_windows(val_ids_, ctx, ctx);
  loader_ = Loader(train_.size(), s.batch_size, true, true);
  batch_in_epoch_ = loader_.batches();  // the first step starts an epoch
  eval_in_ = std::move(eval_in), eval_out_ = std::move(eval_out), probe_ = std::move(probe);
  steps_ = 0, tokens_ = 0, ms_per_step_ = 0.0;
  phase_ = Phase::forward, index_ = 0, step_ms_ = 0.0;
  eval_batches_.clear(), eval_batch_ = 0;
  forward_ms_.clear(), backward_ms_.clear(), eval_ms_.clear();  // never run
  forward_names_.clear(), backward_names_.clear(), eval_names_.clear();
  update_ms_ = -1.0, snapshot_ms_ = -1.0;
  slice_ms_.clear();
  points_.clear(), snapshots_.clear();
  continued_from_ = 0, run_first_induction_ = -1, continued_run_.reset();
  epochs_ = 10, use_schedule_ = false, schedule_ = LrSchedule{};
  return snapshot();  // step 0: the untrained heads
}

namespace {

// A list of piece times grown to `n` pieces (new ones never run), with their names. The evaluation's last
// batch may be smaller (fewer head pieces): its stages share the first ones' times and names.
void fit(std::vector<double>& ms, std::vector<std::string>& names, int n,
         const std::function<std::string(int)>& name) {
  if (ms.size() >= static_cast<std::size_t>(n)) return;
  ms.resize(static_cast<std::size_t>(n), -1.0);
  names.clear();
  for (int i = 0; i < n; ++i) names.push_back(name(i));
}

double at_or_unknown(const std::vector<double>& ms, int i) {
  return i >= 0 && static_cast<std::size_t>(i) < ms.size() ? ms[static_cast<std::size_t>(i)] : -1.0;
}

}  // namespace

Status TrainSession::run_stage() {
  const double t0 = now_ms();
  const TrainSettings& s = settings_;
  // run_state() ran the model on the probes in the middle of an evaluation batch: that batch starts again
  // (an evaluation draws nothing, so its numbers are the same)
  if (phase_ == Phase::evaluate && forward_interrupted_) index_ = 0;
  forward_interrupted_ = false;
  const Phase phase = phase_;
  const int index = index_;
  double* timed = nullptr;  // where this piece's time goes
  if (phase == Phase::forward) {
    if (index == 0) {  // a new step: the batch, zero_grad, and the forward pass begun
      if (use_schedule_ && steps_ >= epochs_ * loader_.batches())
        return Status::fail("the run is done: its learning-rate schedule ends after its " +
                            std::to_string(epochs_) + " epochs (" + std::to_string(steps_) + " steps)");
      keep_step_start();
      std::vector<int> inputs, targets;
      int batch = s.batch_size, tokens = s.config.gpt.context_length;
      if (s.recipe == TrainRecipe::induction) {
        induction_batch(s.task, batch, data_, inputs, targets);
        tokens = s.task.tokens;
      } else {
        if (batch_in_epoch_ >= loader_.batches()) {
          loader_.begin(g_);  // a new epoch: the loader's draws, as `for ... in train_loader` makes them
          batch_in_epoch_ = 0;
        }
        const std::vector<int> indices = loader_.batch(batch_in_epoch_++);
        gather_batch(train_, indices, inputs, targets);
        batch = static_cast<int>(indices.size());
      }
      model_->zero_grad();
      if (Status st = model_->start_loss(inputs, targets, batch, tokens, true); !st.is_ok()) return st;
      pending_tokens_ = static_cast<std::int64_t>(inputs.size());
      step_ms_ = 0.0;
      fit(forward_ms_, forward_names_, model_->forward_stages(),
          [&](int i) { return "forward " + model_->forward_stage_name(i); });
    }
    if (Status st = model_->forward_stage(index, g_, pending_loss_); !st.is_ok()) return st;
    timed = &forward_ms_[static_cast<std::size_t>(index)];
    if (++index_ == model_->forward_stages()) {
      phase_ = Phase::backward, index_ = 0;
      fit(backward_ms_, backward_names_, model_->backward_stages(),
          [&](int i) { return "backward " + model_->backward_stage_name(i); });
    }
  } else if (phase == Phase::backward) {
    if (Status st = model_->backward_stage(index); !st.is_ok()) return st;
    timed = &backward_ms_[static_cast<std::size_t>(index)];
    if (++index_ == model_->backward_stages()) phase_ = Phase::update, index_ = 0;
  } else if (phase == Phase::update) {
    // train_book's appendix-D update: the schedule's lr at this 0-based step, clipping after the warmup
    if (use_schedule_) {
      opt_.lr = schedule_.lr(steps_, epochs_ * loader_.batches(), s.lr);
      if (schedule_.max_norm > 0.0 && steps_ > schedule_.warmup_steps)
        clip_grad_norm(model_->grads(), schedule_.max_norm);
    }
    opt_.step(model_->params(), model_->grads());
    ++steps_;
    tokens_ += pending_tokens_;
    points_.push_back({steps_, tokens_, static_cast<double>(pending_loss_), kNaN, kNaN});
    // as train_model_simple: after the steps whose 0-based global_step is a multiple of eval_freq (the 1st,
    // the (eval_freq + 1)th, ...)
    const bool evaluate_due = (steps_ - 1) % s.eval_freq == 0;
    snapshot_due_ = steps_ % s.snapshot_freq == 0;
    phase_ = evaluate_due ? Phase::evaluate : snapshot_due_ ? Phase::snapshot : Phase::forward;
    if (evaluate_due) begin_evaluation();
    timed = &update_ms_;
  } else if (phase == Phase::evaluate) {
    if (Status st = evaluate_stage(); !st.is_ok()) return st;
    timed = &eval_ms_[static_cast<std::size_t>(index)];
  } else {
    if (Status st = snapshot(); !st.is_ok()) return st;
    phase_ = Phase::forward, index_ = 0;
    timed = &snapshot_ms_;
  }
  const double ms = now_ms() - t0;
  *timed = ms;
  if (phase == Phase::forward || phase == Phase::backward || phase == Phase::update) step_ms_ += ms;
  if (phase == Phase::update)
    ms_per_step_ = ms_per_step_ == 0.0 ? step_ms_ : 0.9 * ms_per_step_ + 0.1 * step_ms_;
  return Status::ok();
}

double TrainSession::predicted_ms() const {
  switch (phase_) {
    case Phase::forward:
      return at_or_unknown(forward_ms_, index_);
    case Phase::backward:
      return at_or_unknown(backward_ms_, index_);
    case Phase::update:
      return update_ms_;
    case Phase::evaluate:
      return at_or_unknown(eval_ms_, index_);
    case Phase::snapshot:
      return snapshot_ms_;
  }
  return -1.0;
}

std::vector<double> TrainSession::piece_ms() const {
  std::vector<double> out = forward_ms_;
  out.insert(out.end(), backward_ms_.begin(), backward_ms_.end());
  out.push_back(update_ms_);
  out.insert(out.end(), eval_ms_.begin(), eval_ms_.end());
  out.push_back(snapshot_ms_);
  return out;
}

std::vector<std::string> TrainSession::piece_names() const {
  std::vector<std::string> out = forward_names_;
  out.insert(out.end(), backward_names_.begin(), backward_names_.end());
  out.push_back("update");
  out.insert(out.end(), eval_names_.begin(), eval_names_.end());
  out.push_back("snapshot");
  return out;
}

Status TrainSession::step() {
  if (!model_) return Status::fail("nothing to train: reset first");
  do {
    if (Status st = run_stage(); !st.is_ok()) return st;
  } while (mid_step());
  return Status::ok();
}

Status TrainSession::advance(double budget_ms) {
  if (!model_) return Status::fail("nothing to train: reset first");
  const double t0 = now_ms(), until = t0 + budget_ms;
  Status st = Status::ok();
  for (;;) {
    if (st = run_stage(); !st.is_ok()) break;
    // the next piece only if its last run says it fits (one never run yet waits for the next slice)
    const double next = predicted_ms();
    if (next < 0.0 || now_ms() + next >= until) break;
  }
  slice_ms_.push_back(now_ms() - t0);
  return st;
}

void TrainSession::begin_evaluation() {
  const TrainSettings& s = settings_;
  eval_batches_.clear(), eval_batch_ = 0, index_ = 0;
  eval_sum_[0] = eval_sum_[1] = 0.0, eval_count_[0] = eval_count_[1] = 0;
  if (s.recipe == TrainRecipe::induction) {  // in_context_score on the held-out batch
    eval_batches_.push_back({eval_in_, eval_out_, s.batch_size, 0});
    return;
  }
  // loader_loss over the training loader (a new iteration of it), then over the validation one: their
  // draws, in that order, are all an evaluation draws (eval mode draws no dropout)
  const Loader val(val_.size(), s.batch_size, false, false);
  int side = 0;
  for (const auto& [w, of] : {std::pair<const Windows*, const Loader*>{&train_, &loader_}, {&val_, &val}}) {
    Loader loader = *of;
    const int len = loader.batches();
    if (len > 0) {  // an empty loader's loss is NaN, with nothing drawn
      const int n = s.eval_iter < 0 ? len : std::min(s.eval_iter, len);
      loader.begin(g_);
      for (int i = 0; i < n; ++i) {
        EvalBatch b;
        const std::vector<int> indices = loader.batch(i);
        gather_batch(*w, indices, b.inputs, b.targets);
        b.batch = static_cast<int>(indices.size()), b.side = side;
        eval_batches_.push_back(std::move(b));
      }
    }
    ++side;
  }
  if (eval_batches_.empty()) phase_ = snapshot_due_ ? Phase::snapshot : Phase::forward;
}

Status TrainSession::evaluate_stage() {
  const TrainSettings& s = settings_;
  const EvalBatch& b = eval_batches_[eval_batch_];
  const int tokens = s.recipe == TrainRecipe::induction ? s.task.tokens : s.config.gpt.context_length;
  if (index_ == 0) {
    if (Status st = model_->start_loss(b.inputs, b.targets, b.batch, tokens, false, false); !st.is_ok())
      return st;
    fit(eval_ms_, eval_names_, model_->forward_stages(),
        [&](int i) { return "evaluation " + model_->forward_stage_name(i); });
  }
  float loss = 0.0f;
  if (Status st = model_->forward_stage(index_, g_, loss); !st.is_ok()) return st;
  if (++index_ < model_->forward_stages()) return Status::ok();
  // the batch's last stage
  index_ = 0;
  TrainPoint& p = points_.back();
  if (s.recipe == TrainRecipe::induction) {
    p.in_context = in_context_of(model_->position_losses());
  } else {
    eval_sum_[b.side] += static_cast<double>(loss);  // loss.item()
    ++eval_count_[b.side];
  }
  if (++eval_batch_ < eval_batches_.size()) return Status::ok();
  // the book's printed Train loss and Val loss: the means over the training and validation batches
  if (s.recipe != TrainRecipe::induction) {
    p.eval_train_loss = eval_count_[0] ? eval_sum_[0] / eval_count_[0] : kNaN;
    p.val_loss = eval_count_[1] ? eval_sum_[1] / eval_count_[1] : kNaN;
  }
  eval_batches_.clear(), eval_batch_ = 0;
  phase_ = snapshot_due_ ? Phase::snapshot : Phase::forward;
  return Status::ok();
}

Status TrainSession::snapshot() {
  TrainSnapshot snap;
  snap.step = steps_;
  if (Status st = model_->attention_maps(probe_, snap.attention); !st.is_ok()) return st;
  if (settings_.recipe == TrainRecipe::induction) {
    if (Status st = probe_heads(*model_, settings_.task, snap.heads); !st.is_ok()) return st;
  } else {
    const int T = static_cast<int>(probe_.size());
    for (const auto& layer : snap.attention) {
      snap.heads.emplace_back();
      for (const std::vector<float>& a : layer)
        snap.heads.back().push_back(score_head(WeightsView{a.data(), T, T, T, 1.0f}, probe_));
    }
  }
  snapshots_.push_back(std::move(snap));
  return Status::ok();
}

int TrainSession::first_induction() const {
  for (std::size_t i = 0; i < snapshots_.size(); ++i)
    for (const auto& layer : snapshots_[i].heads)
      for (const HeadScores& h : layer)
        if (h.kind == HeadKind::induction) return static_cast<int>(i);
  return -1;
}

Status TrainSession::weights(std::shared_ptr<GptWeights>& out) const {
  if (!model_) return Status::fail("nothing trained yet");
  auto w = std::make_shared<GptWeights>(model_->to_weights());
  w->source =
      std::string("trained (") + to_string(settings_.recipe) + ", " + std::to_string(steps_) + " steps)";
  out = std::move(w);
  return Status::ok();
}

Status TrainSession::write_checkpoint(const std::string& dir) const {
  if (!model_) return Status::fail("nothing trained yet");
  // before the first step there is no optimizer state, and so no run state, to write
  RunState run;
  if (steps_ > 0)
    if (Status st = run_state(run); !st.is_ok()) return st;
  return attnviz::write_checkpoint(dir, *model_, opt_, "", steps_ > 0 ? &run : nullptr);
}

void TrainSession::keep_step_start() {
  start_g_ = g_, start_data_ = data_;
  start_sampler_seed_ = loader_.sampler_seed();
}

namespace {

bool has_induction_head(const std::vector<std::vector<HeadScores>>& heads) {
  for (const auto& layer : heads)
    for (const HeadScores& h : layer)
      if (h.kind == HeadKind::induction) return true;
  return false;
}

bool same_sizes(const GptConfig& a, const GptConfig& b) {
  return a.vocab_size == b.vocab_size && a.context_length == b.context_length && a.d_model == b.d_model &&
         a.n_heads == b.n_heads && a.n_layers == b.n_layers && a.drop_rate == b.drop_rate &&
         a.qkv_bias == b.qkv_bias && a.attention_only == b.attention_only;
}

}  // namespace

Status TrainSession::run_state(RunState& out) const {
  if (!model_) return Status::fail("nothing trained yet");
  if (steps_ == 0) return Status::fail("no step taken yet: a run state begins with the first");
  // A continued session that has not finished a step since stands where its checkpoint's run stood.
  if (continued_run_ && steps_ == continued_from_) {
    out = *continued_run_;
    return Status::ok();
  }
  const TrainSettings& s = settings_;
  // A half step before its update: the run stands where that step began. After the update, the evaluation
  // due has made its draws (when it begins, in the update's piece), and a snapshot still due is accounted for
  // by the step's heads.
  const bool before_update =
      mid_step() && (phase_ == Phase::forward || phase_ == Phase::backward || phase_ == Phase::update);
  const bool snapshot_due = phase_ == Phase::snapshot || (phase_ == Phase::evaluate && snapshot_due_);
  TorchGenerator g = before_update ? start_g_ : g_;
  RunState r;
  r.dropout_rng = model_->dropout_rng;
  r.batch_size = s.batch_size;
  if (s.recipe == TrainRecipe::induction) {
    // attnviz-cli train --task induction's run: its reports (and so its first induction step) are the
    // panel's snapshots
    r.task = RunTask::induction;
    InductionRunState& n = r.induction;
    n.task = s.task;
    n.steps = steps_;
    n.total_steps = std::max(s.total_steps, steps_);
    n.eval_freq = s.snapshot_freq;
    n.lr = s.lr, n.weight_decay = s.weight_decay;
    n.first_induction = run_first_induction_;
    for (std::size_t i = continued_run_ ? 1 : 0; n.first_induction < 0 && i < snapshots_.size(); ++i)
      if (has_induction_head(snapshots_[i].heads)) n.first_induction = snapshots_[i].step;
    if (n.first_induction < 0 && snapshot_due) {
      std::vector<std::vector<HeadScores>> heads;  // what the snapshot still due will label
      forward_interrupted_ = true;
      if (Status st = probe_heads(*model_, s.task, heads); !st.is_ok()) return st;
      if (has_induction_head(heads)) n.first_induction = steps_;
    }
    n.data_rng = (before_update ? start_data_ : data_).state();
  } else {
    // attnviz-cli train's book run over the same windows (the panel's stride is the context length)
    const int batches = loader_.batches();
    TrainPosition& p = r.position;
    p.epoch = (steps_ - 1) / batches;
    p.batch = steps_ - p.epoch * batches;  // 1 .. batches: an epoch's last step leaves its sample to print
    p.global_step = steps_ - 1;
    p.tokens_seen = tokens_;
    p.sampler_seed = before_update ? start_sampler_seed_ : loader_.sampler_seed();
    r.train_windows = train_.size(), r.val_windows = val_.size();
    r.data_hash = run_data_hash(train_, val_);
    // the run's total: a schedule's, or the panel's (which trains on past it) grown to the steps taken
    const int epochs = use_schedule_ ? epochs_ : std::max(epochs_, (steps_ + batches - 1) / batches);
    r.settings =
        BookRunSettings{epochs, s.eval_freq, s.eval_iter, s.lr, s.weight_decay, use_schedule_, schedule_};
  }
  r.rng = g.state();
  out = std::move(r);
  return Status::ok();
}

Status TrainSession::continue_from(
    const std::string& dir, const TrainSettings& s,
    const std::function<Status(const std::string&, std::vector<int>&)>& tokenize) {
  TrainModel model;
  AdamW opt;
  bool has_optimizer = false;
  std::optional<RunState> run;
  if (Status st = read_checkpoint(dir, model, opt, has_optimizer, run); !st.is_ok()) return st;
  if (!run)
    return Status::fail(quote(dir) + " holds no run to continue: " +
                        (has_optimizer ? "its optimizer.safetensors has no run state (an older checkpoint)"
                                       : "it has no optimizer.safetensors") +
                        "; Reset starts a new run");
  // The settings: the run state's, the model's sizes, and from `s` the text, the seed (unused) and the
  // memory budget. A book run's learning rate and weight decay are its optimizer's.
  TrainSettings next = s;
  next.config = model.config();
  next.batch_size = run->batch_size;
  if (run->task == RunTask::induction) {
    const InductionRunState& n = run->induction;
    next.recipe = TrainRecipe::induction;
    next.task = n.task;
    next.lr = n.lr, next.weight_decay = n.weight_decay;
    next.eval_freq = next.snapshot_freq = n.eval_freq;
    next.total_steps = n.total_steps;
  } else {
    const TrainSettings book = recipe_settings(TrainRecipe::book);
    next.recipe = same_sizes(next.config.gpt, book.config.gpt) ? TrainRecipe::book : TrainRecipe::custom;
    next.lr = opt.lr, next.weight_decay = opt.weight_decay;
    if (s.recipe == TrainRecipe::induction)
      next.eval_freq = book.eval_freq, next.snapshot_freq = book.snapshot_freq,
      next.eval_iter = book.eval_iter;
    if (const std::optional<BookRunSettings>& b = run->settings) {  // version 2: the run's own
      next.lr = b->lr, next.weight_decay = b->weight_decay;
      next.eval_freq = b->eval_freq, next.eval_iter = b->eval_iter;
    }
  }
  // A session as Reset makes it (the text's windows and probe, or the task's held-out batch; the memory
  // check), then the checkpoint's model, optimizer, generators and place in the run.
  TrainSession c;
  c.moments_at_reset_ = false;
  if (Status st = c.reset(next, tokenize); !st.is_ok()) return Status::fail(quote(dir) + ": " + st.error);
  c.moments_at_reset_ = true;  // a later Reset of the continued session starts a run of its own
  if (Status st = c.g_.set_state(run->rng.data(), run->rng.size()); !st.is_ok()) return st;
  if (run->task == RunTask::induction) {
    const InductionRunState& n = run->induction;
    c.settings_.task = n.task;  // as written (Reset fits the task to the sizes; the CLI's run keeps its own)
    TorchGenerator held_out(0x5eed);
    induction_batch(n.task, next.batch_size, held_out, c.eval_in_, c.eval_out_);
    c.probe_ = induction_probe(n.task, induction_probe_repeat(n.task), n.task.tokens / 3, 7919u);
    if (Status st = c.data_.set_state(n.data_rng.data(), n.data_rng.size()); !st.is_ok()) return st;
    c.steps_ = n.steps;
    c.tokens_ = static_cast<std::int64_t>(n.steps) * next.batch_size * n.task.tokens;
    c.run_first_induction_ = n.first_induction;
  } else {
    if (run->train_windows != c.train_.size() || run->val_windows != c.val_.size() ||
        run->data_hash != run_data_hash(c.train_, c.val_))
      return Status::fail(quote(dir) + "'s run was over other data (" + std::to_string(run->train_windows) +
                          " training and " + std::to_string(run->val_windows) +
                          " validation windows, against " + std::to_string(c.train_.size()) + " and " +
                          std::to_string(c.val_.size()) +
                          " in this text, or other tokens): give the Train panel the text it trained on");
    const TrainPosition& p = run->position;
    c.steps_ = p.global_step + 1;
    c.tokens_ = p.tokens_seen;
    if (p.batch > 0) c.loader_.resume(p.sampler_seed);  // the epoch it stopped in, its draws made
    c.batch_in_epoch_ = p.batch > 0 ? p.batch : c.loader_.batches();  // 0: the next step begins an epoch
    if (const std::optional<BookRunSettings>& b = run->settings)
      c.epochs_ = b->epochs, c.use_schedule_ = b->use_schedule, c.schedule_ = b->schedule;
  }
  model.dropout_rng = run->dropout_rng;
  *c.model_ = std::move(model);
  c.opt_ = std::move(opt);
  // a schedule's optimizer keeps the last step's lr, as the CLI's does; the next step sets its own
  if (!c.use_schedule_) c.opt_.lr = next.lr;
  c.opt_.weight_decay = next.weight_decay;
  c.continued_from_ = c.steps_;
  c.continued_run_ = std::make_shared<const RunState>(*run);
  c.snapshots_.clear();
  if (Status st = c.snapshot(); !st.is_ok()) return st;  // the model as loaded
  *this = std::move(c);
  train_.ids = &train_ids_, val_.ids = &val_ids_;  // the windows cut this session's ids, not `c`'s
  return Status::ok();
}

std::string TrainSession::loss_csv() const {
  std::string csv = "step,tokens,loss,eval_train_loss,val_loss,in_context\n";
  char buf[160];
  const auto cell = [](double x) {
    char b[32];
    if (std::isnan(x)) return std::string();
    std::snprintf(b, sizeof b, "%.6f", x);
    return std::string(b);
  };
  for (const TrainPoint& p : points_) {
    std::snprintf(buf, sizeof buf, "%d,%lld,%.6f,", p.step, static_cast<long long>(p.tokens), p.loss);
    csv += buf + cell(p.eval_train_loss) + "," + cell(p.val_loss) + "," + cell(p.in_context) + "\n";
  }
  return csv;
}

}  // namespace attnviz::viz
