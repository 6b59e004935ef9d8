// Fuzzes a training checkpoint's run state (checkpoint.hpp's parse_run_state, the "run.*" metadata that
// --resume continues from) and the generator state inside it. The input, split at NUL bytes, is read as key,
// value, key, value, ... over a valid run state's metadata (so most inputs reach the deeper checks); the raw
// bytes also go to TorchGenerator::set_state. Invariants: no exception; a refusal is one non-empty line and
// leaves the output empty (and the generator as it was); an accepted state writes back to metadata that
// parses to the same state, and its generator state reads back byte for byte.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "attnviz/io/checkpoint.hpp"
#include "split.hpp"

namespace {

void one_line(const attnviz::Status& st) {
  if (st.is_ok()) return;
  if (st.error.empty() || st.error.find('\n') != std::string::npos) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  attnviz::TorchGenerator g(7);
  const std::vector<std::uint8_t> before = g.state();
  const attnviz::Status raw = g.set_state(data, size);
  one_line(raw);
  if (!raw.is_ok() && g.state() != before) std::abort();
  if (raw.is_ok() && g.state() != std::vector<std::uint8_t>(data, data + size)) std::abort();

  attnviz::RunState base;
  base.position.epoch = 1, base.position.batch = 1, base.position.global_step = 3;
  base.position.tokens_seen = 4 * 2 * 8, base.batch_size = 2, base.train_windows = 6, base.val_windows = 1;
  base.rng = attnviz::TorchGenerator(123).state();
  std::map<std::string, std::string> meta = attnviz::run_state_metadata(base);
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
  if (again->rng != out->rng || again->data_hash != out->data_hash ||
      again->position.global_step != out->position.global_step ||
      again->position.sampler_seed != out->position.sampler_seed)
    std::abort();
  return 0;
}
