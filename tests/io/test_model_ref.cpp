// What a model string names (classify_model, attnviz/io/model_ref.hpp): a preset, a path or a Hugging Face
// name, told apart in one place for every host, with the hub name checked by the one validator and every
// refusal one line. The cache lookup behind a hub name is test_hf_hub.cpp's.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "attnviz/gpt.hpp"
#include "attnviz/io/model_ref.hpp"
#include "safetensors_writer.hpp"

namespace fs = std::filesystem;
using attnviz::classify_model;
using attnviz::ModelRef;
using attnviz::ModelRefKind;

namespace {

const std::string kFolder = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt/hf-folder";
const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

const char* kind_name(ModelRefKind k) {
  return k == ModelRefKind::preset ? "preset" : k == ModelRefKind::path ? "path" : "hub";
}

// `model` is classified as `kind`, and a hub name as a valid one.
void check_kind(const std::string& model, ModelRefKind kind) {
  const ModelRef r = classify_model(model);
  CAPTURE(model);
  CAPTURE(r.error);
  CHECK(std::string(kind_name(r.kind)) == kind_name(kind));
  CHECK(r.text == model);
  CHECK(r.ok());
}

// `model` reads as a hub name but is not a valid one: refused in one line that holds `needle`, by
// classify_model and by resolve_model_path alike.
void check_bad_hub(const std::string& model, const std::string& needle) {
  const ModelRef r = classify_model(model);
  CAPTURE(model);
  CAPTURE(r.error);
  CHECK(r.kind == ModelRefKind::hub);
  CHECK(!r.ok());
  CHECK(r.error.find(needle) != std::string::npos);
  CHECK(r.error.find('\n') == std::string::npos);
  CHECK(r.error.find('\r') == std::string::npos);
  std::string path = "untouched";
  CHECK(attnviz::resolve_model_path(r, path).error == r.error);
  CHECK(path == "untouched");
}

}  // namespace

TEST_CASE("model references: every seeded preset is a preset with its sizes, and nothing else is") {
  for (const attnviz::GptPreset& p : attnviz::gpt_presets()) {
    const ModelRef r = classify_model(p.name);
    CAPTURE(p.name);
    REQUIRE(r.kind == ModelRefKind::preset);
    CHECK(r.preset.d_model == p.config.d_model);
    CHECK(r.preset.n_layers == p.config.n_layers);
    CHECK(r.preset.n_heads == p.config.n_heads);
    std::string path;
    const attnviz::Status st = attnviz::resolve_model_path(r, path);
    CHECK(st.error.find("is a preset") != std::string::npos);  // a preset is no file
    CHECK(st.error.find('\n') == std::string::npos);
  }
  // Near misses are paths (which opening then names as missing), never a preset or a hub name.
  for (const char* s : {"gpt2", "gpt2-tiny", "GPT2-SMALL", "gpt2-small ", " gpt2-small", "book"})
    check_kind(s, ModelRefKind::path);
}

TEST_CASE("model references: relative and absolute paths, existing or missing") {
  attnviz::test::TempDir tmp("model_ref_paths");
  fs::create_directories(tmp.path / "org" / "name");
  tmp.write("org/weights.safetensors", std::string("x"));
  fs::create_symlink("missing-target", tmp.path / "org" / "dangling");

  // Absolute: an existing folder, a missing path and a file are paths; whether each exists is said.
  const ModelRef folder = classify_model(kFolder);
  CHECK(folder.kind == ModelRefKind::path);
  CHECK(folder.exists);
  const ModelRef missing = classify_model("/nonexistent/m");
  CHECK(missing.kind == ModelRefKind::path);
  CHECK(!missing.exists);
  CHECK(classify_model((tmp.path / "org" / "weights.safetensors").string()).exists);
  std::string path;
  REQUIRE(attnviz::resolve_model_path(missing, path).is_ok());  // opening it names what is missing
  CHECK(path == "/nonexistent/m");

  // Relative: whatever exists here is a path, even when it reads as ORG/NAME (a dangling link too).
  const attnviz::test::InDirectory here(tmp.path);
  for (const char* s :
       {"org/name", "org/name/", "org/dangling", "org", "./org/name", "org/weights.safetensors"}) {
    const ModelRef r = classify_model(s);
    CAPTURE(s);
    CHECK(r.kind == ModelRefKind::path);
    CHECK(r.exists);
    REQUIRE(attnviz::resolve_model_path(r, path).is_ok());
    CHECK(path == s);
  }
  // Missing, and not shaped like a hub name: paths, for opening to name as missing.
  for (const char* s : {"./org/absent", "../x", "./x", "~/x", "x.safetensors", "dir/model.safetensors",
                        "dir/config.json", "a/b/c", "org/name/absent", "/abs/name", "absent", "", "@main"}) {
    const ModelRef r = classify_model(s);
    CAPTURE(s);
    CHECK(r.kind == ModelRefKind::path);
    CHECK(!r.exists);
    CHECK(r.ok());
  }
  // Missing and shaped like one: a hub name.
  check_kind("org/absent", ModelRefKind::hub);
}

TEST_CASE("model references: hub names ORG/NAME[@REV], valid and malformed, each refusal one line") {
  const ModelRef r = classify_model("HuggingFaceTB/SmolLM2-135M");
  REQUIRE(r.kind == ModelRefKind::hub);
  CHECK(r.ok());
  CHECK(r.hub.org == "HuggingFaceTB");
  CHECK(r.hub.name == "SmolLM2-135M");
  CHECK(r.hub.revision == "main");
  const ModelRef rev = classify_model("Qwen/Qwen3-0.6B@v1.0");
  REQUIRE(rev.kind == ModelRefKind::hub);
  CHECK(rev.hub.repo_id() == "Qwen/Qwen3-0.6B");
  CHECK(rev.hub.revision == "v1.0");
  CHECK(classify_model("openai-community/gpt2@refs/pr/1").hub.revision == "refs/pr/1");
  CHECK(classify_model("a_b/c.d@" + kCommit).hub.revision == kCommit);
  for (const std::string& s :
       {std::string("a/b"), std::string("a/b@main"), std::string("a1/b_2"),
        std::string(96, 'o') + "/" + std::string(96, 'n'), "a/b@" + std::string(128, 'r')})
    check_kind(s, ModelRefKind::hub);

  check_bad_hub("a/", "its name is empty");
  check_bad_hub("a/b@", "the revision after '@' is empty");
  check_bad_hub("a/" + std::string(97, 'n'), "is longer than 96 characters");
  check_bad_hub(std::string(97, 'o') + "/b", "its organization is longer than 96 characters");
  check_bad_hub("a/b@" + std::string(129, 'r'), "is longer than 128 characters");
  check_bad_hub("a/b c", "may hold only letters, digits, '-', '_' and '.'");
  check_bad_hub("a/b$", "may hold only");
  check_bad_hub("a/b\n", "may hold only");
  check_bad_hub("a/b\r\nx", "may hold only");
  check_bad_hub(std::string("a/b\0c", 5), "may hold only");
  check_bad_hub("\xC3\xA4/b", "may hold only");  // "ä/b"
  check_bad_hub("a--b/c", "may not hold \"--\" or \"..\"");
  check_bad_hub("a/..b", "may not hold \"--\" or \"..\"");
  check_bad_hub("-a/b", "must start with a letter or a digit");
  check_bad_hub("_a/b", "must start with a letter or a digit");
  check_bad_hub("a/b-", "may not end with '-' or '.'");
  check_bad_hub("a/b@../../x", "\"..\"");
  check_bad_hub("a/b@x//y", "\"//\"");
  check_bad_hub("a/b@x/", "end with '/'");
  check_bad_hub("a/b@-x", "must start with a letter or a digit");
  check_bad_hub("a/b@x@y", "may hold only letters, digits, '-', '_', '.' and '/'");
  check_bad_hub("a/b@x y", "may hold only");
}

TEST_CASE("model references: a refusal quotes a long or hostile name in one short line") {
  const std::string hostile = "a/" + std::string(5000, 'x') + "\n\x1b[2J";
  const ModelRef r = classify_model(hostile);
  REQUIRE(r.kind == ModelRefKind::hub);
  CHECK(!r.ok());
  CHECK(r.error.find('\n') == std::string::npos);
  CHECK(r.error.find('\x1b') == std::string::npos);
  CHECK(r.error.size() < 400);
}
