// attnviz, the desktop app: the UI in a window, or headless (--screenshot) for tests and scripts. Kept as a
// function over arguments so tests can run it in-process.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace attnviz {

// Runs the app with `args` (without the program name). Returns the exit status: 0 on success, 1 on bad input
// (one line on `err`).
int run_app(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace attnviz
