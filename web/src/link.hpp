// What a link (the page's URL hash) or attnviz.setState may hold. The state is the desktop app's flags
// (shell/view_args.hpp); these checks are the page's own, made before a state is applied, so that every
// refusal names the value in one short line: names the page does not know (many are counted, not listed),
// a flag given no value, numbers that are not plain decimals or out of their range, a cell that is not
// ROW,COL, a text longer than the page takes. Once applied, the head and the locked cell it names are
// checked against the view.
#pragma once

#include <string>
#include <vector>

#include "attnviz/status.hpp"
#include "attnviz/viz/app.hpp"
#include "view_args.hpp"

namespace attnviz::web {

// Checks every [name, value] pair, and rewrites numbers as the plain decimals CLI11 then reads (it takes
// "010" as octal). Fails with the first problem, naming the setting and its value.
Status check_link(std::vector<StateArg>& args);

// The view's head (--head) and locked cell (--lock) against the state just computed: a head the
// configuration has, a cell inside the stage's matrix.
Status check_view_ranges(const viz::App& app);

// A value as a message quotes it: at most 40 bytes, control bytes as \xNN.
std::string quote_value(const std::string& value);

}  // namespace attnviz::web
