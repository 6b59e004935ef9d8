// What a model string names, told apart in one place for every host: attnviz-cli's and the app's --model, the
// page's links and its hub models, --download. A string is one of three things, in this order:
//   a preset  the book's seeded GPTModel at a GPT-2 size (gpt_presets(): gpt2-small .. gpt2-xl);
//   a path    a .safetensors file or a model folder: anything that exists here (a file, a folder, a link,
//             even a dangling one), and anything that is not shaped like a hub name ("./x", "/x", "~/x",
//             "a/b/c", "x.safetensors", "dir/config.json", "gpt2"), which opening then names as missing;
//   a hub     a Hugging Face name ORG/NAME or ORG/NAME@REV that is no path here, checked by parse_hub_name
//             (the one validator of hub names): a malformed one carries its one-line refusal.
#pragma once

#include <string>
#include <string_view>

#include "attnviz/gpt.hpp"
#include "attnviz/io/hf_hub.hpp"
#include "attnviz/status.hpp"

namespace attnviz {

enum class ModelRefKind { preset, path, hub };

struct ModelRef {
  ModelRefKind kind = ModelRefKind::path;
  std::string text;     // the string as given
  GptConfig preset;     // preset: its sizes
  bool exists = false;  // path: it exists here (else opening it names it as missing)
  HubName hub;          // hub: ORG, NAME and the revision ("main" when no @REV is given)
  std::string error;    // hub: why the name is not a valid one, in one line ("" when it is)

  bool ok() const { return error.empty(); }
};

// Classifies `model` as above. Never fails: a malformed hub name is a hub with `error` set, for the caller to
// refuse when it means to open or fetch it.
ModelRef classify_model(std::string_view model);

// The path to open for `ref`: a path's text, or a hub name's snapshot in hub_cache_dir() (find_in_hub_cache).
// Fails in one line: a malformed hub name (its error), one not in the cache (saying how to download it), and
// a preset, which is no file. `resolved` is untouched on failure.
Status resolve_model_path(const ModelRef& ref, std::string& resolved);

}  // namespace attnviz
