// attnviz-cli --model: whole GPT-2 models on the command line (the book's seeded GPTModel or a weights file).
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "config_args.hpp"

namespace attnviz {

struct ModelArgs {
  std::string model;   // empty: the chapter-3 layer
  std::string layers;  // "all", "none", or a list such as "0,5,9-11"
  std::string keep = "weights";
  int top_k = 10;
  int generate = 0;
  bool train = false;  // --train: a loaded model in train mode (a seeded one is in train mode already)
};

// Registers --model, --layers, --keep, --top-k, --generate and --train.
void add_model_options(CLI::App& app, ModelArgs& m);

// "0,5,9-11" -> {0, 5, 9, 10, 11}; "all" sets `all`; "none" gives no layers. Fails naming the bad part.
Status parse_layers(const std::string& spec, int n_layers, bool& all, std::vector<int>& layers);

// Runs a model pass (and generation) with the shared flags `a` and prints text or JSON. Returns the exit
// status.
int run_model_cli(const CLI::App& app, const ConfigArgs& a, const ModelArgs& m, const std::string& vocab_dir,
                  bool json, std::ostream& out, std::ostream& err);

}  // namespace attnviz
