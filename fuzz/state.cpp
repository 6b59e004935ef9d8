// Fuzzes the UI state parser the desktop app and the page share (shell/view_args: apply_state_args, what a
// link or attnviz.setState holds, and state_args, what the page writes into its URL). The input, split at NUL
// bytes, is read as name, value, name, value, ... and applied to a fresh app whose views are admitted within
// an 8 MB budget (a model opened within 8 MB too, so only the refusal runs: drawing gpt2-small's 163 M
// numbers costs seconds a run). Invariants: no exception; a refusal is one non-empty line; and a link is
// what it says: the state written back (state_args) applied to another fresh app gives that app the same
// state, and the same outcome.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "attnviz/engine.hpp"
#include "split.hpp"
#include "view_args.hpp"

namespace {

constexpr std::uint64_t kBudget = 8'000'000;

attnviz::Status admit(const attnviz::Config& c, const attnviz::Input& in, bool) {
  const std::uint64_t need = attnviz::run_memory(c, in.x.shape[0]).total();
  if (need <= kBudget) return attnviz::Status::ok();
  return attnviz::Status::fail("this view needs " + attnviz::format_bytes(need) + ", more than the budget");
}

void host(attnviz::viz::App& app) {
  app.session.admit = admit;
  app.compare.b.admit = admit;
  app.model.free_memory = [] { return kBudget; };
  app.model_view.files_dir = "/nonexistent/attnviz-fuzz";  // a file a link names is asked for, not read
}

void check_one_line(const attnviz::Status& st) {
  if (!st.is_ok() && (st.error.empty() || st.error.find('\n') != std::string::npos)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> parts = attnviz::fuzz::split_at_nul(data, size);
  std::vector<attnviz::StateArg> args;
  for (std::size_t i = 0; i + 1 < parts.size(); i += 2) {
    // A model path outside a link ("--model PATH") would read the file system: links name files as file:NAME.
    if (parts[i] == "model" && !parts[i + 1].empty() && parts[i + 1].rfind("file:", 0) != 0 &&
        parts[i + 1].rfind("gpt2", 0) != 0)
      return -1;
    args.emplace_back(parts[i], parts[i + 1]);
  }

  attnviz::viz::App app;
  host(app);
  const attnviz::Status st = attnviz::apply_state_args(args, app);
  check_one_line(st);
  const std::vector<attnviz::StateArg> written = attnviz::state_args(app);

  attnviz::viz::App reopened;
  host(reopened);
  const attnviz::Status again = attnviz::apply_state_args(written, reopened);
  check_one_line(again);
  if (attnviz::state_args(reopened) != written) std::abort();
  if (st.is_ok() && !again.is_ok()) std::abort();
  return 0;
}
