// attnviz-cli: the engine on the command line. Kept as a function over streams so tests can run it
// in-process.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace attnviz {

// Runs the command line `args` (without the program name). Returns the exit status: 0 on success, 1 on bad
// input (one line on `err`), 0 for --help.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace attnviz
