// Fuzzes a training checkpoint's run state (checkpoint.hpp's parse_run_state, the "run.*" metadata that
// --resume continues from) and the generator states inside it. The input, split at NUL bytes, is read as key,
// value, key, value, ... over the union of a valid book run state's metadata and a valid induction run
// state's (their shared keys agree, so "run.task" "induction" alone gives a valid induction state, and most
// inputs reach the deeper checks of either; the book's is version 2, with its settings and schedule, and
// "run.version" "1" gives the older form); the raw bytes also go to TorchGenerator::set_state. Invariants:
// no exception; a refusal is one non-empty line and leaves the output empty (and the generator as it was); an
// accepted state writes back to metadata that parses to the same state (a book run's settings within range
// and consistent with its position), and its generator state reads back
// byte for byte except the bytes PyTorch's set_rng_state ignores too, which read back as zeros.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnviz/io/checkpoint.hpp"
#include "split.hpp"

namespace {

void one_line(const attnviz::Status& st) {
  if (st.is_ok()) return;
  if (st.error.empty() || st.error.find('\n') != std::string::npos) std::abort();
}

// The state as set_state keeps it: CPUGeneratorImplState's padding, its legacy normal_x (at 5016) and
// normal_rho (5032), normal_y (5024) while normal_is_valid (5040) is 0 and the float sample (5048) zeroed.
std::vector<std::uint8_t> kept(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint8_t> b(data, data + size);
  const auto zero = [&](std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) b[i] = 0;
  };
  zero(5016, 5024), zero(5032, 5040), zero(5044, 5052), zero(5053, 5056);
  if (b[5040] == 0) zero(5024, 5032);
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  attnviz::TorchGenerator g(7);
  const std::vector<std::uint8_t> before = g.state();
  const attnviz::Status raw = g.set_state(data, size);
  one_line(raw);
  if (!raw.is_ok() && g.state() != before) std::abort();
  if (raw.is_ok() && g.state() != kept(data, size)) std::abort();

  attnviz::RunState base;
  base.position.epoch = 1, base.position.batch = 1, base.position.global_step = 3;
  base.position.tokens_seen = 4 * 2 * 8, base.batch_size = 2, base.train_windows = 6, base.val_windows = 1;
  base.rng = attnviz::TorchGenerator(123).state();
  // version 2's settings, agreeing with the induction state's shared keys (eval_freq, lr, weight_decay)
  attnviz::BookRunSettings settings;
  settings.epochs = 3, settings.eval_freq = 10, settings.eval_iter = 2, settings.lr = 2e-3;
  settings.weight_decay = 0.0, settings.use_schedule = true, settings.schedule.warmup_steps = 2;
  settings.schedule.initial_lr = 1e-4, settings.schedule.min_lr = 1e-5, settings.schedule.max_norm = 1.0;
  base.settings = settings;
  std::map<std::string, std::string> meta = attnviz::run_state_metadata(base);
  attnviz::RunState induction = base;  // the same steps (4), batch size, generator and dropout flavour
  induction.task = attnviz::RunTask::induction;
  induction.induction.steps = 4, induction.induction.total_steps = 40, induction.induction.eval_freq = 10;
  induction.induction.task.vocab = 16, induction.induction.task.tokens = 16;
  induction.induction.task.max_repeat = 8, induction.induction.first_induction = 2;
  induction.induction.data_rng = attnviz::TorchGenerator(124).state();
  induction.settings.reset();
  meta.merge(attnviz::run_state_metadata(induction));
  meta.erase("run.task");
  const std::vector<std::string> parts = attnviz::fuzz::split_at_nul(data, size);
  for (std::size_t i = 0; i + 1 < parts.size(); i += 2) meta[parts[i]] = parts[i + 1];
  std::optional<attnviz::RunState> out;
  const attnviz::Status st = attnviz::parse_run_state(meta, out);
  one_line(st);
  if (!st.is_ok()) {
    if (out) std::abort();
    return 0;
  }
  if (!out) return 0;  // no run.version: an older checkpoint
  std::optional<attnviz::RunState> again;
  if (!attnviz::parse_run_state(attnviz::run_state_metadata(*out), again).is_ok() || !again) std::abort();
  if (again->task != out->task || again->rng != out->rng || again->dropout_rng != out->dropout_rng ||
      again->batch_size != out->batch_size)
    std::abort();
  if (out->task == attnviz::RunTask::book &&
      (again->data_hash != out->data_hash || again->position.global_step != out->position.global_step ||
       again->position.sampler_seed != out->position.sampler_seed))
    std::abort();
  // a book run's settings: read back the same, and consistent (its steps and warmup within its total)
  if (out->task == attnviz::RunTask::book && out->settings.has_value() != again->settings.has_value())
    std::abort();
  if (out->task == attnviz::RunTask::book && out->settings) {
    const attnviz::BookRunSettings &x = *out->settings, &y = *again->settings;
    if (x.epochs != y.epochs || x.eval_freq != y.eval_freq || x.eval_iter != y.eval_iter || x.lr != y.lr ||
        x.weight_decay != y.weight_decay || x.use_schedule != y.use_schedule ||
        x.schedule.warmup_steps != y.schedule.warmup_steps ||
        x.schedule.initial_lr != y.schedule.initial_lr || x.schedule.min_lr != y.schedule.min_lr ||
        x.schedule.max_norm != y.schedule.max_norm)
      std::abort();
    const std::int64_t total = static_cast<std::int64_t>(x.epochs) * (out->train_windows / out->batch_size);
    if (x.epochs < 1 || x.eval_freq < 1 || x.eval_iter < 1 || !(x.lr > 0) || !(x.weight_decay >= 0) ||
        total > 0x7FFFFFFF || out->position.global_step + 1 > total ||
        (x.use_schedule && (x.schedule.warmup_steps > total || !(x.schedule.initial_lr >= 0) ||
                            !(x.schedule.min_lr >= 0) || !(x.schedule.max_norm >= 0))))
      std::abort();
    if (!x.use_schedule && (x.schedule.warmup_steps != 0 || x.schedule.max_norm != 0)) std::abort();
  }
  const attnviz::InductionRunState &a = again->induction, &b = out->induction;
  if (out->task == attnviz::RunTask::induction &&
      (a.steps != b.steps || a.total_steps != b.total_steps || a.eval_freq != b.eval_freq || a.lr != b.lr ||
       a.weight_decay != b.weight_decay || a.first_induction != b.first_induction ||
       a.data_rng != b.data_rng || a.task.vocab != b.task.vocab || a.task.tokens != b.task.tokens ||
       a.task.min_repeat != b.task.min_repeat || a.task.max_repeat != b.task.max_repeat ||
       a.task.fixed_distance != b.task.fixed_distance))
    std::abort();
  return 0;
}
