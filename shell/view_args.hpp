// The view flags of the desktop app (--stage, --palette, --compare, ...) and the whole state of the UI as
// flags: the browser page keeps the same state in its URL (#text=...&variant=...&stage=...), with the
// flags' long names as keys, so a link and a command line say the same thing.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attnviz/status.hpp"
#include "attnviz/viz/app.hpp"
#include "config_args.hpp"

namespace attnviz {

// How the view looks, beyond the engine configuration.
struct ViewArgs {
  std::string stage = "weights", palette = "blues", norm = "head", aggregate = "none", compare = "off";
  std::string compare_text = "Your journey ends with one step";
  std::uint64_t compare_seed = 456;
  int compare_layer = 0;
  int head = -1;
  std::vector<int> lock;  // row, column (and head)
  // The whole model: "" (the chapter-3 layer), a GPT-2 size (seeded), a weights file or folder, or in a link
  // "file:NAME" (the page asks for the file).
  std::string model;
  std::uint64_t model_seed = 123;
  bool model_train = false;
  int layer = -1;                  // the layer opened in the full view; -1: every layer's heads
  std::string head_kind = "none";  // show only heads of this kind
  // The model view's causal tools (attnviz-cli's flags of the same names): the lens strip, the grid coloured
  // by attribution, the metric's target and versus tokens ("#ID"), its position, ablated heads ("L.H,...")
  // zeroed or replaced by their mean, and the corrupted text of activation patching.
  bool lens = false, attribute = false;
  std::string target, versus;
  int position = -1;
  std::string ablate, ablation = "zero", patch;
};

// What --model names: the chapter-3 layer, a seeded size, or a file ("file:NAME" keeps NAME as the path).
viz::ModelChoice model_choice(const ViewArgs& a);

// Registers --stage, --palette, --normalize, --aggregate, --head, --lock, --compare, --compare-text,
// --compare-seed, and the whole model's --model, --model-seed, --model-train, --layer and --head-kind on
// `cli`, and the causal tools' --lens, --attribute, --target, --versus, --position, --ablate, --ablation and
// --patch.
void add_view_options(CLI::App& cli, ViewArgs& v);

// Applies parsed view flags to the app's view and compare state, and the model flags to the Model panel's
// choice (opening it is the host's call: open_model). Fails with one line naming the bad value.
Status apply_view(const ViewArgs& a, viz::App& app);

// The view flags against the first view computed (after viz::start): --head must name one of its heads,
// --lock a cell of the stage shown, --compare mask a variant that has a mask, and --compare's B must compute
// (a bad --compare-text is an error, as a bad --text is). Fails with one line naming the flag and the range.
Status check_view(const viz::App& app);

// The part of check_view a link needs (the page shows a B that cannot be computed in B's place): --head,
// --compare-layer and --lock against the view.
Status check_head_and_cell(const viz::App& app);

// One flag of the UI state: its long name without dashes, and its value ("" for a flag without one).
using StateArg = std::pair<std::string, std::string>;

// The app's sentence, configuration and view as flags, leaving out those at their defaults, in a fixed
// order. Parsing them back (apply_state_args) restores the same state.
std::vector<StateArg> state_args(const viz::App& app);

// Sets the app's sentence, configuration and view from flags (names without dashes; a flag without a value
// takes "" or "1", and "0" or "false" leaves it off), starting from the defaults, and recomputes. A flag
// that does not parse changes nothing and the error names it; a configuration the engine rejects is taken
// like an edit in the app: the last good result stays and the session's error() explains.
Status apply_state_args(const std::vector<StateArg>& args, viz::App& app);

}  // namespace attnviz
