// What a link (the page's URL hash) or attnviz.setState may hold, checked before the state is applied.
// The state is the desktop app's flags (shell/view_args.hpp), whose CLI11 validators check the numbers
// (decimal, in range, torch.manual_seed's range for seeds) and whose check_head_and_cell checks the head and
// locked cell once computed. The page adds what a link needs besides: names it does not know (many are
// counted, not listed), a flag given no value, a cell that is not ROW,COL, a value or text longer than the
// page takes. Every refusal names the value, in one short line.
#pragma once

#include <string>
#include <vector>

#include "attnviz/status.hpp"
#include "view_args.hpp"

namespace attnviz::web {

// Checks every [name, value] pair. Fails with the first problem, naming the setting and its value.
Status check_link(const std::vector<StateArg>& args);

}  // namespace attnviz::web
