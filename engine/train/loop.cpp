// The book's chapter-5 loop (train_model_simple, calc_loss_loader, evaluate_model, generate_text_simple),
// with the generator draws in the order the Python code makes them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "attnviz/train.hpp"

namespace attnviz {

Status loader_loss(TrainModel& m, const Windows& w, const Loader& of, int num_batches, TorchGenerator& g,
                   double& out) {
  Loader loader = of;  // a new iter(loader): the caller's own iteration (an epoch's order) is untouched
  const int len = loader.batches();
  if (len == 0) {  // calc_loss_loader returns nan before iterating
    out = std::numeric_limits<double>::quiet_NaN();
    return Status::ok();
  }
  const int n = num_batches < 0 ? len : std::min(num_batches, len);
  loader.begin(g);
  double total = 0.0;
  std::vector<int> inputs, targets;
  for (int i = 0; i < n; ++i) {
    const std::vector<int> indices = loader.batch(i);
    gather_batch(w, indices, inputs, targets);
    float loss = 0.0f;
    if (Status st =
            m.loss(inputs, targets, static_cast<int>(indices.size()), w.max_length, false, g, loss, false);
        !st.is_ok())
      return st;
    total += static_cast<double>(loss);  // loss.item()
  }
  out = total / n;
  return Status::ok();
}

Status generate_greedy(TrainModel& m, std::vector<int> ids, int steps, std::vector<int>& out) {
  const int context = m.config().gpt.context_length;
  std::vector<float> probs;
  for (int s = 0; s < steps; ++s) {
    const std::size_t from = ids.size() > static_cast<std::size_t>(context) ? ids.size() - context : 0;
    const std::vector<int> window(ids.begin() + static_cast<std::ptrdiff_t>(from), ids.end());
    if (Status st = m.last_probabilities(window, probs); !st.is_ok()) return st;
    // torch.argmax: the first of equal maxima
    ids.push_back(static_cast<int>(std::max_element(probs.begin(), probs.end()) - probs.begin()));
  }
  out = std::move(ids);
  return Status::ok();
}

Status train_book(TrainModel& m, AdamW& opt, const Windows& train, const Windows& val, const TrainRun& run,
                  TorchGenerator& g, const TrainEvents& events) {
  TrainPosition start;
  return train_book(m, opt, train, val, run, g, events, start);
}

Status train_book(TrainModel& m, AdamW& opt, const Windows& train, const Windows& val, const TrainRun& run,
                  TorchGenerator& g, const TrainEvents& events, TrainPosition& at) {
  Loader train_loader(train.size(), run.batch_size, true, true);
  Loader val_loader(val.size(), run.batch_size, false, false);
  opt.lr = run.lr;
  opt.weight_decay = run.weight_decay;
  opt.threads = m.exec.threads;
  const int batches = train_loader.batches();
  const int total_steps = batches * run.epochs;
  if (at.epoch < 0 || at.batch < 0 || at.batch > batches ||
      at.global_step + 1 != at.epoch * batches + at.batch)
    return Status::fail("the run's position (epoch " + std::to_string(at.epoch) + ", batch " +
                        std::to_string(at.batch) + ", step " + std::to_string(at.global_step) +
                        ") does not fit " + std::to_string(batches) + " batches an epoch");
  std::vector<int> inputs, targets;
  for (; at.epoch < run.epochs; ++at.epoch, at.batch = 0) {
    if (at.batch == 0) {
      train_loader.begin(g);  // `for input_batch, target_batch in train_loader`: a new iteration
      at.sampler_seed = train_loader.sampler_seed();
    } else {
      train_loader.resume(at.sampler_seed);  // the epoch a checkpoint stopped in, its draws already made
    }
    while (at.batch < batches) {
      const std::vector<int> indices = train_loader.batch(at.batch);
      gather_batch(train, indices, inputs, targets);
      m.zero_grad();
      const int step = at.global_step + 1;
      if (run.use_schedule) opt.lr = run.schedule.lr(step, total_steps, run.lr);
      float loss = 0.0f;
      if (Status st =
              m.loss(inputs, targets, static_cast<int>(indices.size()), train.max_length, true, g, loss);
          !st.is_ok())
        return st;
      if (Status st = m.backward(); !st.is_ok()) return st;
      if (run.use_schedule && run.schedule.max_norm > 0.0 && step > run.schedule.warmup_steps)
        clip_grad_norm(m.grads(), run.schedule.max_norm);
      opt.step(m.params(), m.grads());
      at.tokens_seen += static_cast<std::int64_t>(inputs.size());
      at.global_step = step;
      ++at.batch;
      if (run.eval_freq > 0 && step % run.eval_freq == 0) {
        double train_loss = 0.0, val_loss = 0.0;
        if (Status st = loader_loss(m, train, train_loader, run.eval_iter, g, train_loss); !st.is_ok())
          return st;
        if (Status st = loader_loss(m, val, val_loader, run.eval_iter, g, val_loss); !st.is_ok()) return st;
        if (events.eval) events.eval(at.epoch + 1, step, train_loss, val_loss, at.tokens_seen);
      }
      if (events.step && !events.step(at.epoch + 1, step, loss, at.tokens_seen)) return Status::ok();
    }
    if (events.sample && run.new_tokens > 0 && !run.start_ids.empty()) {
      std::vector<int> ids;
      if (Status st = generate_greedy(m, run.start_ids, run.new_tokens, ids); !st.is_ok()) return st;
      events.sample(at.epoch + 1, ids);
    }
  }
  return Status::ok();
}

}  // namespace attnviz
