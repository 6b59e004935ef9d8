// attnviz-cli --model: whole GPT-2 models on the command line (the book's seeded GPTModel or a weights file).
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "attnviz/io/model_source.hpp"
#include "config_args.hpp"

namespace attnviz {

// What the program around the command line gives a long generation: a flag that Ctrl-C sets (generation
// then stops and prints what it has), a flag saying that one runs (Ctrl-C at any other time ends the program
// as usual), and whether stderr is a terminal (the progress is shown there).
struct GenerateControl {
  const std::atomic<bool>* stop = nullptr;
  std::atomic<bool>* generating = nullptr;
  bool progress = false;
};

// The exit status of a generation stopped by Ctrl-C: the shell's for SIGINT (128 + 2), so that a script can
// tell the shorter text from a whole one; the output itself is whole (the text so far, its pass, its JSON).
inline constexpr int kStoppedStatus = 130;

// How far --generate may take the text: this many context lengths. Past one, each new token reruns the model
// over the last context_length tokens (generate_text_simple's crop): gpt2-small's 100000 tokens would be
// about 99000 full passes, some 40 hours.
inline constexpr int kGenerateContexts = 4;

// Fails when `prompt` tokens and `generate` more exceed kGenerateContexts x `context_length`, naming the
// full passes it would take and the most that may be asked.
Status check_generation(std::int64_t prompt, std::int64_t generate, int context_length);

struct ModelArgs {
  std::string model;   // empty: the chapter-3 layer
  std::string layers;  // "all", "none", or a list such as "0,5,9-11"
  std::string ids;     // --ids "3,17,5": the token ids themselves, for a model without a tokenizer of its own
  std::string keep = "weights";
  int top_k = 10;
  int generate = 0;
  bool train = false;     // --train: a loaded model in train mode (a seeded one is in train mode already)
  bool download = false;  // --download: a hub name is fetched into the Hugging Face cache first
  // The causal tools (attnviz/lens.hpp, docs/lens.md)
  bool lens = false, attribute = false;
  std::string target, versus;  // a piece that is one token, or #ID
  int position = -1;           // -1: the last
  std::string ablate;          // "L.H,L.H"
  std::string ablation = "zero";
  std::string patch, patch_ids;  // the corrupted text, or its ids
  GenerateControl control;
};

// Registers --model, --layers, --keep, --top-k, --generate, --train, --download and the causal tools' --lens,
// --target, --versus, --position, --attribute, --ablate, --ablation, --patch and --patch-ids.
void add_model_options(CLI::App& app, ModelArgs& m);

// "0,5,9-11" -> {0, 5, 9, 10, 11}; "all" sets `all`; "none" gives no layers. Fails naming the bad part.
Status parse_layers(const std::string& spec, int n_layers, bool& all, std::vector<int>& layers);

// "3,17,5" -> {3, 17, 5}: decimal ids in [0, vocab_size), at most context_length of them. Fails naming the
// bad part.
Status parse_ids(const std::string& spec, int vocab_size, int context_length, std::vector<int>& ids);

// The token `spec` names for `flag` (--target, --versus): "#ID", or a piece of text that the model's
// tokenizer makes exactly one token. Fails naming how the piece tokenizes otherwise.
Status parse_token(const OpenedModel& m, const std::string& spec, const char* flag, int& id);

// Runs a model pass (and generation) with the shared flags `a` and prints text or JSON. Returns the exit
// status.
int run_model_cli(const CLI::App& app, const ConfigArgs& a, const ModelArgs& m, const std::string& vocab_dir,
                  bool json, std::ostream& out, std::ostream& err);

}  // namespace attnviz
