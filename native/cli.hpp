// attnviz-cli: the engine on the command line. Kept as a function over streams so tests can run it
// in-process.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "model_cli.hpp"

namespace attnviz {

// Runs the command line `args` (without the program name). Returns the exit status: 0 on success, 1 on bad
// input (one line on `err`), 0 for --help, kStoppedStatus (130) for a generation `control` stopped (its
// output printed, and one line on `err` saying so).
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
            const GenerateControl& control = {});

}  // namespace attnviz
