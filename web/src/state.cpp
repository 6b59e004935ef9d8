// The view's state as the page's link (the URL hash) and its API (getState, setState) hand it over:
// [name, value] pairs of the desktop app's flags.
#include <string>
#include <utility>
#include <vector>

#include "link.hpp"
#include "page.hpp"
#include "view_args.hpp"

namespace attnviz::web {

namespace {

// Text is text on every path: the page script hands the module well-formed UTF-8 (a lone surrogate is
// U+FFFD), and a NUL, which a C string cannot carry, becomes U+FFFD here as it does there.
std::string without_nul(std::string s) {
  for (std::size_t at = s.find('\0'); at != std::string::npos; at = s.find('\0', at + 3))
    s.replace(at, 1, "\xEF\xBF\xBD");
  return s;
}

}  // namespace

std::string state_json(const viz::App& app) {
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& [name, value] : state_args(app)) pairs.push_back({name, value});
  return pairs.dump();
}

nlohmann::json choice_json(const viz::ModelChoice& c) {
  return {{"kind", viz::to_string(c.kind)},
          {"size", c.size},
          {"seed", c.seed},
          {"path", c.path},
          {"train", c.train}};
}

// Applies [name, value] pairs as a link gives them: the page's own checks first (link.hpp), then the state,
// then its head and locked cell against what was computed (a bad one puts the previous state back).
Applied apply_state_json(const char* json, viz::App& app) {
  const auto refuse = [](std::string why) { return Applied{Status::fail(std::move(why)), true}; };
  const nlohmann::json pairs = nlohmann::json::parse(json, nullptr, false);
  if (pairs.is_discarded() || !pairs.is_array()) return refuse("the state is not a JSON array");
  std::vector<StateArg> args;
  for (const nlohmann::json& p : pairs) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_string())
      return refuse("each setting is a [name, value] pair of strings");
    args.emplace_back(without_nul(p[0].get<std::string>()), without_nul(p[1].get<std::string>()));
  }
  if (Status st = check_link(args); !st.is_ok()) return refuse(st.error);
  const std::vector<StateArg> before = state_args(app);
  const Status st = apply_state_args(args, app);
  // apply_state_args changes nothing when a flag does not parse; a state it applied but cannot compute
  // fails with the view's own error.
  const bool computed_error = st.error == app.session.error() || st.error == app.model.error() ||
                              st.error == app.model_view.open_error;
  if (!st.is_ok() && state_args(app) == before && !computed_error) return refuse(st.error);
  // The head and the locked cell must be in the view (a link to a model file not chosen yet waits for it).
  const bool waiting = !app.model.is_open() && !app.model_view.wanted_file.empty();
  if (Status range = check_head_and_cell(app); !waiting && !range.is_ok()) {
    (void)apply_state_args(before,
                           app);  // the state applied before this call: back to it, and the range is the news
    return refuse(range.error);
  }
  return {st, false};
}

}  // namespace attnviz::web
