#include "model_source.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "attnviz/text.hpp"
#include "gpt_file.hpp"

#if !defined(__EMSCRIPTEN__)
#include <sys/resource.h>
#include <unistd.h>
#endif

namespace attnviz {

Status open_model(const ModelSpec& spec, OpenedModel& out) {
  OpenedModel m;
  std::string vocab_dir = spec.vocab_dir;
  if (std::optional<GptConfig> preset = find_gpt_preset(spec.model)) {
    const std::uint64_t bytes = packed_bytes(*preset, false, spec.options.exec.isa);
    if (spec.memory_budget && bytes > spec.memory_budget)
      return Status::fail(spec.model + " needs " + format_bytes(bytes) + " as float32, more than the " +
                          format_bytes(spec.memory_budget) + " available");
    if (Status st = seeded_gpt(*preset, spec.seed, spec.options, m.model); !st.is_ok()) return st;
    m.seeded = true;
    m.seed = spec.seed;
  } else {
    GptLoadOptions opts;
    opts.isa = spec.options.exec.isa;
    opts.heads = spec.heads;
    opts.memory_budget = spec.memory_budget;
    auto w = std::make_shared<GptWeights>();
    if (Status st = load_gpt(spec.model, opts, *w); !st.is_ok()) return st;
    std::error_code ec;
    if (vocab_dir.empty() && std::filesystem::is_directory(spec.model, ec) && holds_vocabulary(spec.model))
      vocab_dir = spec.model;
    m.model = GptModel(std::move(w), TorchGenerator(spec.seed), spec.options);
  }
  if (vocab_dir.empty()) vocab_dir = default_vocab_dir();
  if (vocab_dir.empty())
    return Status::fail(
        "GPT-2's vocabulary was not found beside the program: set ATTNVIZ_VOCAB_DIR or give --vocab DIR "
        "(a folder with encoder.json and vocab.bpe, or vocab.json and merges.txt)");
  if (Status st = Bpe::load_dir(vocab_dir, m.bpe); !st.is_ok()) return st;
  const int V = m.model.weights().config.vocab_size;
  if (m.bpe.size() > V) {
    return Status::fail("the tokenizer in " + quote(vocab_dir) + " makes ids up to " +
                        std::to_string(m.bpe.size() - 1) + " but the model has " + std::to_string(V) +
                        " tokens: give the model's own vocabulary with --vocab DIR");
  }
  m.vocab_from = vocab_dir;
  out = std::move(m);
  return Status::ok();
}

std::uint64_t available_memory_bytes() {
#if defined(__EMSCRIPTEN__)
  return 0;
#else
  std::uint64_t available = 0;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kb = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    std::fclose(f);
    available = static_cast<std::uint64_t>(kb) * 1024;
  }
  // An address-space limit (ulimit -v) caps what this process may still map, whatever the system has free.
  struct rlimit limit {};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    unsigned long long pages = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const std::uint64_t mapped =
        static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
    const std::uint64_t cap = static_cast<std::uint64_t>(limit.rlim_cur);
    const std::uint64_t room = cap > mapped ? cap - mapped : 1;  // 0 would mean "unknown"
    available = available ? std::min(available, room) : room;
  }
  return available;
#endif
}

Status encode_for(const OpenedModel& m, const std::string& text, std::vector<int>& ids) {
  std::vector<int> got;
  if (Status st = m.bpe.encode(text, got); !st.is_ok()) return st;
  if (got.empty()) return Status::fail("the text is empty: give at least one token");
  const GptConfig& c = m.model.weights().config;
  if (static_cast<int>(got.size()) > c.context_length) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "the text has %zu tokens, more than the context length %d", got.size(),
                  c.context_length);
    return Status::fail(buf);
  }
  ids = std::move(got);
  return Status::ok();
}

}  // namespace attnviz
