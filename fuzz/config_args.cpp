// Fuzzes attnviz-cli's command line: the input, split at NUL bytes into arguments, runs in-process through
// run_cli (CLI11 and the flags' checks, the configuration's validation, the memory count and, for what
// passes, a small run and its output). Whatever the arguments, run_cli must return 0 or 1 and never throw;
// a refusal is exactly one line on stderr and nothing on stdout. Arguments naming files or the tokenizer
// (--inputs, --vocab, --tokenize, --model: their readers have fuzzers of their own, and loading GPT-2's
// vocabulary or a model costs seconds a run) and a --memory-budget of the input's own are skipped; an 8 MB
// budget comes last, so that no run allocates more than that. `attnviz-cli train` is skipped too: it reads a
// text and a tokenizer and trains for as many epochs as asked (its text path has the train_text fuzzer, its
// refusals tests/cli/test_train_cli.cpp). `attnviz-cli download` reaches the network: never run here (its
// parsers have the hub fuzzer, its answers tests/hub_test.py's local server).
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "split.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args = attnviz::fuzz::split_at_nul(data, size);
  if (!args.empty() && (args[0] == "train" || args[0] == "download")) return -1;
  for (const std::string& a : args)
    for (const char* skipped : {"--inputs", "--vocab", "--tokenize", "--model", "--memory-budget"})
      if (a.rfind(skipped, 0) == 0) return -1;  // not added to the corpus
  args.insert(args.end(), {"--memory-budget", "8MB"});

  std::ostringstream out, err;
  const int status = attnviz::run_cli(args, out, err);
  const std::string e = err.str();
  if (status == 0 && !e.empty()) std::abort();
  if (status == 1) {
    if (!out.str().empty() || e.empty() || e.back() != '\n' || e.find('\n') != e.size() - 1) std::abort();
    if (e.rfind("attnviz-cli: ", 0) != 0) std::abort();
  }
  if (status != 0 && status != 1) std::abort();
  return 0;
}
