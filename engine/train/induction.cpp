// The synthetic induction task (train.hpp): repeated random segments, probes, and the in-context score.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "attnviz/train.hpp"

namespace attnviz {

namespace {

// A uniform integer in [lo, hi] from one 32-bit draw (the task's own draws, not PyTorch's: nothing here has a
// notebook to match).
int uniform(TorchGenerator& g, int lo, int hi) {
  return lo + static_cast<int>(g.random() % static_cast<std::uint32_t>(hi - lo + 1));
}

// Random tokens without repeats while the vocabulary lasts: a Fisher-Yates shuffle of 0 .. vocab - 1 drawn
// one card at a time, the cards moved kept in a small map (O(draws), not O(vocab)). After `vocab` draws the
// deck starts over. The probes draw their tokens this way, so a token recurs only where the probe plants its
// copy: Olsson et al.'s repeated random tokens, whose vocabulary of 50,000 makes chance recurrences rare.
// With the recipe's 128 tokens drawn with replacement, nearly half the recurrences in a 64-token probe would
// be chance (about 14 against the 16 it plants), and a head that also checks the token before (as the trained
// heads learn to) rightly looks less at their successors, which would count against it. (Training keeps the
// draws with replacement: without chance recurrences the model first learns that a token seen before is
// unlikely to come next, and the induction phase change comes much later.)
class Deck {
 public:
  explicit Deck(int vocab) : vocab_(vocab) {}
  int draw(TorchGenerator& g) {
    if (dealt_ == vocab_) dealt_ = 0, moved_.clear();
    const int j = uniform(g, dealt_, vocab_ - 1);
    const int card = at(j);
    moved_[j] = at(dealt_);
    ++dealt_;
    return card;
  }

 private:
  int at(int i) const {
    const auto it = moved_.find(i);
    return it == moved_.end() ? i : it->second;
  }
  int vocab_, dealt_ = 0;
  std::unordered_map<int, int> moved_;
};

// One sequence of `n` tokens: random tokens in which a random segment recurs, copy after copy, each copy a
// random gap (0 .. its length) after the previous one, from a random first position, until the sequence is
// full. With fixed_distance, every copy starts that far after the previous one instead (the segment no longer
// than that distance). The layout is drawn first, then the tokens outside the copies (Deck).
void sequence(const InductionTask& t, int n, TorchGenerator& g, int* out) {
  const int fixed = t.fixed_distance;
  const int repeat = uniform(g, t.min_repeat, std::min({t.max_repeat, n / 2, fixed > 0 ? fixed : n}));
  const int first = uniform(g, 0, n - (fixed > 0 ? fixed + repeat : 2 * repeat));
  std::vector<char> copied(static_cast<std::size_t>(n), 0);
  std::vector<int> starts;
  int at = first;
  for (int copy = 0;; ++copy) {
    // a random gap of 0 .. repeat tokens, the first one short enough that one copy always fits
    const int room = copy == 0 ? std::min(repeat, n - first - 2 * repeat) : repeat;
    const int next = at + (fixed > 0 ? fixed : repeat + uniform(g, 0, room));
    if (next + repeat > n) break;
    starts.push_back(next);
    std::fill(copied.begin() + next, copied.begin() + next + repeat, 1);
    at = next;
  }
  for (int i = 0; i < n; ++i)
    if (!copied[static_cast<std::size_t>(i)]) out[i] = uniform(g, 0, t.vocab - 1);
  for (int s : starts)
    for (int i = 0; i < repeat; ++i) out[s + i] = out[first + i];
}

}  // namespace

Status validate(const InductionTask& t) {
  if (t.vocab < 2 || t.vocab > (1 << 20))
    return Status::fail("the task's vocabulary must be 2 .. 1048576 tokens");
  if (t.tokens < 8 || t.tokens > 8192) return Status::fail("the task's sequences must be 8 .. 8192 tokens");
  if (t.min_repeat < 1 || t.max_repeat < t.min_repeat || 2 * t.min_repeat > t.tokens + 1)
    return Status::fail("the repeat lengths must satisfy 1 <= min <= max and 2 min <= tokens + 1");
  if (t.fixed_distance < 0 || (t.fixed_distance > 0 && (t.fixed_distance < t.min_repeat ||
                                                        t.fixed_distance + t.min_repeat > t.tokens + 1)))
    return Status::fail("a fixed distance must be at least the shortest repeat (" +
                        std::to_string(t.min_repeat) + ") and leave room for one copy in " +
                        std::to_string(t.tokens) + " tokens");
  return Status::ok();
}

void induction_batch(const InductionTask& t, int batch, TorchGenerator& g, std::vector<int>& inputs,
                     std::vector<int>& targets) {
  const int n = t.tokens + 1;  // inputs and the targets one ahead
  std::vector<int> seq(static_cast<std::size_t>(n));
  inputs.clear(), targets.clear();
  for (int b = 0; b < batch; ++b) {
    sequence(t, n, g, seq.data());
    inputs.insert(inputs.end(), seq.begin(), seq.end() - 1);
    targets.insert(targets.end(), seq.begin() + 1, seq.end());
  }
}

GptConfig induction_model() {
  GptConfig c{128, 64, 128, 4, 2, 0.0, false};
  c.attention_only = true;
  return c;
}

int induction_probe_repeat(const InductionTask& t) {
  return std::max(1, t.tokens / 4);
}

std::vector<int> induction_probe(const InductionTask& t, int repeat, int distance, std::uint64_t seed) {
  TorchGenerator g(seed);
  std::vector<int> ids(static_cast<std::size_t>(t.tokens));
  Deck deck(t.vocab);
  for (int& id : ids) id = deck.draw(g);
  repeat = std::clamp(repeat, 1, t.tokens / 2);
  distance = std::clamp(distance, repeat, t.tokens - repeat);
  const int first = uniform(g, 0, t.tokens - repeat - distance);
  for (int i = 0; i < repeat; ++i)
    ids[static_cast<std::size_t>(first + distance + i)] = ids[static_cast<std::size_t>(first + i)];
  return ids;
}

Status in_context_score(TrainModel& m, const std::vector<int>& inputs, const std::vector<int>& targets,
                        int batch, int tokens, double& out) {
  TorchGenerator unused;
  float loss = 0.0f;
  if (Status st = m.loss(inputs, targets, batch, tokens, false, unused, loss, false); !st.is_ok()) return st;
  out = in_context_of(m.position_losses());
  return Status::ok();
}

double in_context_of(const std::vector<double>& per) {
  const int tokens = static_cast<int>(per.size());
  if (tokens == 0) return std::numeric_limits<double>::quiet_NaN();
  const int q = std::max(1, tokens / 4);
  double early = 0.0, late = 0.0;
  for (int i = 0; i < q; ++i) {
    early += per[static_cast<std::size_t>(i)];
    late += per[static_cast<std::size_t>(tokens - q + i)];
  }
  return (late - early) / q;
}

}  // namespace attnviz

namespace attnviz {

Status probe_heads(TrainModel& m, const InductionTask& t, std::vector<std::vector<HeadScores>>& heads) {
  // repeats of a quarter of the sequence at distances spread over it, none of them a multiple of another
  const int repeat = induction_probe_repeat(t);
  const int distances[] = {repeat + 1, repeat + (t.tokens - 2 * repeat) / 3,
                           repeat + (t.tokens - 2 * repeat) / 2, t.tokens - repeat - 1};
  const int L = m.config().gpt.n_layers, H = m.config().gpt.n_heads;
  std::vector<std::vector<HeadScores>> sum(static_cast<std::size_t>(L), std::vector<HeadScores>(H));
  std::vector<std::vector<std::vector<float>>> maps;
  int probes = 0;
  for (int distance : distances) {
    const std::vector<int> ids =
        induction_probe(t, repeat, distance, 7919u + static_cast<std::uint64_t>(distance));
    if (Status st = m.attention_maps(ids, maps); !st.is_ok()) return st;
    const int T = static_cast<int>(ids.size());
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        const HeadScores s = score_head(WeightsView{maps[l][h].data(), T, T, T, 1.0f}, ids);
        HeadScores& a = sum[l][h];
        a.previous += s.previous, a.first += s.first, a.self += s.self, a.broad += s.broad;
        a.induction += s.induction;
        a.induction_defined = a.induction_defined || s.induction_defined;
      }
    ++probes;
  }
  for (auto& layer : sum)
    for (HeadScores& a : layer) {
      const float n = static_cast<float>(probes);
      a.previous /= n, a.first /= n, a.self /= n, a.broad /= n, a.induction /= n;
      a.kind = label_of(a);
    }
  heads = std::move(sum);
  return Status::ok();
}

Status train_induction(TrainModel& m, AdamW& opt, const InductionRun& run, TorchGenerator& g,
                       TorchGenerator& data, const std::function<bool(const InductionPoint&)>& point,
                       const std::function<bool(int steps)>& after_step) {
  if (Status st = validate(run.task); !st.is_ok()) return st;
  if (run.batch_size < 1 || run.eval_freq < 1)
    return Status::fail("the run's batch size and evaluation frequency must be at least 1");
  if (run.start_step < 0 || run.start_step >= run.steps)
    return Status::fail("the run has taken " + std::to_string(run.start_step) + " of its " +
                        std::to_string(run.steps) + " steps: nothing is left to take");
  if (run.task.tokens > m.config().gpt.context_length || run.task.vocab > m.config().gpt.vocab_size)
    return Status::fail("the task's sequences or tokens do not fit the model's context or vocabulary");
  opt.lr = run.lr;
  opt.weight_decay = run.weight_decay;
  opt.threads = m.exec.threads;
  // a held-out batch for the in-context score, drawn first from its own generator
  TorchGenerator held_out(0x5eed);
  std::vector<int> eval_in, eval_out, inputs, targets;
  induction_batch(run.task, run.batch_size, held_out, eval_in, eval_out);
  const auto report = [&](int step, double loss) -> std::optional<bool> {
    InductionPoint p;
    p.step = step, p.loss = loss;
    if (Status st = in_context_score(m, eval_in, eval_out, run.batch_size, run.task.tokens, p.in_context);
        !st.is_ok())
      return std::nullopt;
    if (Status st = probe_heads(m, run.task, p.heads); !st.is_ok()) return std::nullopt;
    return point ? point(p) : true;
  };
  float loss = 0.0f;
  if (run.start_step == 0) {
    TorchGenerator unused;
    if (Status st = m.loss(eval_in, eval_out, run.batch_size, run.task.tokens, false, unused, loss, false);
        !st.is_ok())
      return st;
    const std::optional<bool> go = report(0, loss);
    if (!go) return Status::fail("the probe failed");
    if (!*go) return Status::ok();
  }
  for (int step = run.start_step + 1; step <= run.steps; ++step) {
    induction_batch(run.task, run.batch_size, data, inputs, targets);
    m.zero_grad();
    if (Status st = m.loss(inputs, targets, run.batch_size, run.task.tokens, true, g, loss); !st.is_ok())
      return st;
    if (Status st = m.backward(); !st.is_ok()) return st;
    opt.step(m.params(), m.grads());
    if (step % run.eval_freq == 0 || step == run.steps) {
      const std::optional<bool> go = report(step, loss);
      if (!go) return Status::fail("the probe failed");
      if (!*go) break;
    }
    if (after_step && !after_step(step)) break;
  }
  return Status::ok();
}

}  // namespace attnviz
