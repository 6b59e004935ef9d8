#include "attnviz/io/model_source.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "attnviz/io/checkpoint.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "attnviz/io/model_ref.hpp"
#include "attnviz/saturating.hpp"
#include "attnviz/text.hpp"

#if !defined(__EMSCRIPTEN__)
#include <sys/resource.h>
#include <unistd.h>
#endif

namespace attnviz {
namespace {

// Whether an address-space limit (ulimit -v) applies: then a mapped file counts against it as a whole.
bool address_space_limited() {
#if defined(__EMSCRIPTEN__)
  return false;
#else
  struct rlimit limit {};
  return getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
#endif
}

}  // namespace

Status open_model(const ModelSpec& spec, OpenedModel& out) {
  OpenedModel m;
  std::string vocab_dir = spec.vocab_dir;
  const ModelRef ref = classify_model(spec.model);
  if (ref.kind == ModelRefKind::preset) {
    const std::uint64_t bytes = packed_bytes(ref.preset, false, spec.options.exec.isa);
    if (spec.memory_budget && bytes > spec.memory_budget) {
      const BytesApart b = format_bytes_apart(bytes, spec.memory_budget);
      return Status::fail(spec.model + " needs " + b.first + " as float32, more than the " + b.second +
                          " available");
    }
    if (Status st = seeded_gpt(ref.preset, spec.seed, spec.options, m.model); !st.is_ok()) return st;
    m.seeded = true;
    m.seed = spec.seed;
  } else {
    std::string path = spec.model;
#if !defined(__EMSCRIPTEN__)
    // ORG/NAME[@REV] that is no path here: the Hugging Face cache's snapshot (the page has no such cache)
    if (Status st = resolve_model_path(ref, path); !st.is_ok()) return st;
#endif
    GptLoadOptions opts;
    opts.isa = spec.options.exec.isa;
    opts.heads = spec.heads;
    opts.memory_budget = spec.memory_budget;
    opts.count_mapping = address_space_limited();
    std::error_code ec;
    // a training checkpoint's folder: its set whole, and no file there it does not list (a stale
    // tokenizer.json read as its own)
    if (std::filesystem::is_directory(path, ec))
      if (Status st = check_checkpoint_folder(path); !st.is_ok()) return st;
    auto w = std::make_shared<GptWeights>();
    if (Status st = load_gpt(path, opts, *w); !st.is_ok()) return st;
    if (vocab_dir.empty() && std::filesystem::is_directory(path, ec) && holds_vocabulary(path))
      vocab_dir = path;
    m.model = GptModel(std::move(w), TorchGenerator(spec.seed), spec.options);
  }
  if (spec.ids_only) {
    m.ids_only = true;
    out = std::move(m);
    return Status::ok();
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

std::uint64_t pass_memory(const GptConfig& c, int tokens, const GptRequest& request, bool json) {
  const std::uint64_t pass = pass_bytes(c, tokens, request);
  return json ? sat_add(pass, sat_mul(pass / sizeof(float), 16)) : pass;
}

int tokens_that_fit(const GptConfig& c, const GptRequest& request, bool json, std::uint64_t budget,
                    int max_tokens) {
  // pass_memory grows with the tokens: the last count that fits, by bisection.
  int lo = 0, hi = std::max(max_tokens, 0);
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (pass_memory(c, mid, request, json) <= budget)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

Status check_pass_memory(const GptConfig& c, int tokens, const GptRequest& request, bool json,
                         std::uint64_t budget, bool given) {
  const std::uint64_t need = pass_memory(c, tokens, request, json);
  if (!budget || need <= budget) return Status::ok();
  const std::uint64_t pass = pass_bytes(c, tokens, request);
  const int fit = tokens_that_fit(c, request, json, budget, tokens);
  const BytesApart b = format_bytes_apart(need, budget);
  return Status::fail(std::to_string(tokens) + (tokens == 1 ? " token needs " : " tokens need ") + b.first +
                      " of memory (the pass " + format_bytes(pass) +
                      (json ? ", its JSON " + format_bytes(need - pass) : "") + "), more than the " +
                      b.second + (given ? " of --memory-budget" : " available") +
                      (fit ? ": about " + std::to_string(fit) + (fit == 1 ? " token fits" : " tokens fit")
                           : ": not even 1 token fits"));
}

std::string OpenedModel::decode(const std::vector<int>& ids) const {
  if (!ids_only) return bpe.decode(ids);
  std::string s;
  for (int id : ids) s += " " + std::to_string(id);
  return s;
}

Status encode_for(const OpenedModel& m, const std::string& text, std::vector<int>& ids) {
  std::vector<int> got;
  if (m.ids_only) {  // "3 17 5" or "3,17,5": the ids themselves, each inside the vocabulary
    const int V = m.model.weights().config.vocab_size;
    std::string item;
    for (std::size_t i = 0; i <= text.size(); ++i) {
      const char c = i < text.size() ? text[i] : ' ';
      if (c != ' ' && c != ',' && c != '\n' && c != '\t') {
        if (item.size() > 12)
          return Status::fail("the text is token ids, and " + quote(item.substr(0, 12)) + "... is not one");
        item += c;
        continue;
      }
      if (item.empty()) continue;
      std::optional<int> id;
      if (item.size() <= 9 && item.find_first_not_of("0123456789") == std::string::npos) id = std::stoi(item);
      if (!id || *id >= V)
        return Status::fail("the text is token ids (this model has no tokenizer): " + quote(item) +
                            " is not one of 0.." + std::to_string(V - 1));
      got.push_back(*id);
      item.clear();
    }
  } else if (Status st = m.bpe.encode(text, got); !st.is_ok()) {
    return st;
  }
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
