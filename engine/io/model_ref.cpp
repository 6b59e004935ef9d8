#include "attnviz/io/model_ref.hpp"

#include <filesystem>
#include <optional>

#include "attnviz/text.hpp"

namespace attnviz {
namespace {

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// Whether `s` reads as a hub name at all: ORG/NAME with one slash (and an optional @REV), nothing that looks
// like a path ("./x", "/x", "~/x", "a/b/c", "x.safetensors", "dir/config.json"). Whether it is a valid one is
// parse_hub_name's to say.
bool hub_shaped(std::string_view s) {
  const std::string_view repo = s.substr(0, s.find('@'));
  const std::size_t slash = repo.find('/');
  if (slash == std::string_view::npos || repo.find('/', slash + 1) != std::string_view::npos) return false;
  if (repo.front() == '.' || repo.front() == '/' || repo.front() == '~') return false;
  return !ends_with(repo, ".safetensors") && !ends_with(repo, ".json");
}

}  // namespace

ModelRef classify_model(std::string_view model) {
  ModelRef r;
  r.text = std::string(model);
  if (const std::optional<GptConfig> preset = find_gpt_preset(model)) {
    r.kind = ModelRefKind::preset;
    r.preset = *preset;
    return r;
  }
  std::error_code ec;
  r.exists = std::filesystem::exists(std::filesystem::symlink_status(r.text, ec));
  if (r.exists || !hub_shaped(model)) return r;  // a path
  r.kind = ModelRefKind::hub;
  if (Status st = parse_hub_name(model, r.hub); !st.is_ok()) r.error = st.error;
  return r;
}

Status resolve_model_path(const ModelRef& ref, std::string& resolved) {
  switch (ref.kind) {
    case ModelRefKind::preset:
      return Status::fail(quote(ref.text) +
                          " is a preset (the book's seeded GPTModel), not a file or folder");
    case ModelRefKind::path:
      resolved = ref.text;
      return Status::ok();
    case ModelRefKind::hub:
      if (!ref.ok()) return Status::fail(ref.error);
      return find_in_hub_cache(ref.hub, hub_cache_dir(), resolved);
  }
  return Status::fail("unknown model reference");
}

}  // namespace attnviz
