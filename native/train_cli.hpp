// attnviz-cli train: the book's chapter-5 pretraining run on the command line, printing the book's lines
// ("Ep 1 (Step 000000): Train loss N.NNN, Val loss N.NNN" every --eval-freq steps, a greedy sample after each
// epoch), or JSON lines with --json; --out writes a checkpoint folder that --model opens.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "model_cli.hpp"

namespace attnviz {

// `args` without "train". Returns the exit status: 0, 1 after one line on `err`, or kStoppedStatus when
// Ctrl-C (`control`) stopped the run after a step (the checkpoint, if asked for, is written first).
int run_train_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                  const GenerateControl& control = {});

}  // namespace attnviz
