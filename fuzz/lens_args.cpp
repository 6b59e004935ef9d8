// Fuzzes the causal tools' flags of attnviz-cli --model (--lens, --target, --versus, --position, --attribute,
// --ablate, --ablation, --patch, --patch-ids, --top-k): the input, split at NUL bytes into arguments, is run
// in-process through run_cli after `--model` (the tiny llama of tests/fixtures/arch, opened without a
// tokenizer, so a piece of text reaches --target's "give #ID" refusal) and `--ids` of four tokens. Whatever
// the arguments, run_cli must return 0 or 1 and never throw; a refusal is exactly one line on stderr and
// nothing on stdout. Arguments naming another model or files, and a memory budget of the input's own, are
// skipped; an 8 MB budget comes last.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "split.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args = attnviz::fuzz::split_at_nul(data, size);
  for (const std::string& a : args)
    for (const char* skipped : {"--inputs", "--vocab", "--tokenize", "--model", "--memory-budget",
                                "--download", "--ids", "--text", "--generate", "train", "download"})
      if (a.rfind(skipped, 0) == 0) return -1;  // not added to the corpus
  std::vector<std::string> run = {"--model", ATTNVIZ_FIXTURES_DIR "/arch/llama", "--ids", "5,17,3,60"};
  run.insert(run.end(), args.begin(), args.end());
  run.insert(run.end(), {"--memory-budget", "8MB"});

  std::ostringstream out, err;
  const int status = attnviz::run_cli(run, out, err);
  const std::string e = err.str();
  if (status == 0 && !e.empty() && e.rfind("attnviz-cli: note: ", 0) != 0) std::abort();
  if (status == 1) {
    if (!out.str().empty() || e.empty() || e.back() != '\n' || e.find('\n') != e.size() - 1) std::abort();
    if (e.rfind("attnviz-cli: ", 0) != 0) std::abort();
  }
  if (status != 0 && status != 1) std::abort();
  return 0;
}
