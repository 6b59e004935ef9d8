// The desktop app rendered for real (OpenGL 3.3 on Mesa, under Xvfb): screenshots have the window's size, are
// not blank, change where the heatmaps are when the text changes, and stay close to the reference images kept
// in tests/ui/reference (set ATTNVIZ_UPDATE_REFERENCES=1 to rewrite them after an intended change).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app.hpp"
#include "config_args.hpp"
#include "window.hpp"

#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#include <stb/stb_image.h>

namespace {

struct Png {
  int width = 0, height = 0;
  std::vector<std::uint8_t> rgba;
  std::uint8_t at(int x, int y, int c) const {
    return rgba[(static_cast<std::size_t>(y) * static_cast<std::size_t>(width) +
                 static_cast<std::size_t>(x)) *
                    4 +
                static_cast<std::size_t>(c)];
  }
};

Png load(const std::string& path) {
  Png p;
  int n = 0;
  unsigned char* data = stbi_load(path.c_str(), &p.width, &p.height, &n, 4);
  REQUIRE_MESSAGE(data != nullptr, "cannot read " << path);
  p.rgba.assign(data, data + static_cast<std::size_t>(p.width) * static_cast<std::size_t>(p.height) * 4);
  stbi_image_free(data);
  return p;
}

std::string out_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "attnviz_ui";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// Runs `attnviz ... --screenshot <name>` in-process and loads the PNG.
Png shoot(const std::string& name, std::vector<std::string> args) {
  const std::string path = out_path(name);
  args.insert(args.end(), {"--screenshot", path, "--frames", "3"});
  std::ostringstream out, err;
  const int rc = attnviz::run_app(args, out, err);
  INFO(err.str());
  REQUIRE(rc == 0);
  return load(path);
}

std::size_t distinct_colours(const Png& p) {
  std::set<std::uint32_t> seen;
  for (std::size_t i = 0; i + 3 < p.rgba.size(); i += 4)
    seen.insert(static_cast<std::uint32_t>(p.rgba[i]) | p.rgba[i + 1] << 8 | p.rgba[i + 2] << 16);
  return seen.size();
}

// Fraction of pixels in [x0, x1) x [y0, y1) whose colour differs by more than `tol` in some channel.
double changed(const Png& a, const Png& b, int x0, int y0, int x1, int y1, int tol) {
  long n = 0, diff = 0;
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x, ++n)
      for (int c = 0; c < 3; ++c)
        if (std::abs(a.at(x, y, c) - b.at(x, y, c)) > tol) {
          ++diff;
          break;
        }
  return n ? static_cast<double>(diff) / static_cast<double>(n) : 0.0;
}

void compare_with_reference(const Png& got, const std::string& name) {
  const std::string ref = std::string(ATTNVIZ_REFERENCE_DIR) + "/" + name;
  if (std::getenv("ATTNVIZ_UPDATE_REFERENCES")) {
    std::filesystem::copy_file(out_path(name), ref, std::filesystem::copy_options::overwrite_existing);
    MESSAGE("updated " << ref);
    return;
  }
  const Png want = load(ref);
  REQUIRE(want.width == got.width);
  REQUIRE(want.height == got.height);
  // Loose: timings in the status line and rasterizer details may differ; the picture may not.
  const double frac = changed(got, want, 0, 0, got.width, got.height, 40);
  INFO(name << ": " << frac * 100 << "% of pixels differ");
  CHECK(frac < 0.01);
}

const char* kLong256() {
  static std::string text;
  if (text.empty()) {
    const char* words[] = {"the",     "model", "reads", "every", "token", "and",
                           "attends", "to",    "what",  "came",  "before"};
    for (int i = 0; i < 256; ++i) text += std::string(i ? " " : "") + words[(i * 7 + i / 11) % 11];
  }
  return text.c_str();
}

}  // namespace

TEST_CASE("the default view: the book sentence, sized, not blank, as the reference") {
  const Png p = shoot("book.png", {});
  CHECK(p.width == 1280);
  CHECK(p.height == 800);
  CHECK(distinct_colours(p) > 200);  // text, heatmaps, widgets: far from a blank frame
  compare_with_reference(p, "book.png");
}

TEST_CASE("a 256-token, 12-head gpt2-small view renders every head") {
  const Png p = shoot("gpt2_small_256.png", {"--preset", "gpt2-small", "--text", kLong256(), "--eval"});
  CHECK(p.width == 1280);
  CHECK(p.height == 800);
  CHECK(distinct_colours(p) > 200);
  compare_with_reference(p, "gpt2_small_256.png");
}

TEST_CASE("heatmap pixels change with the text, the controls do not move") {
  const std::vector<std::string> common = {"--palette", "viridis", "--width", "1024", "--height", "700"};
  std::vector<std::string> a = common, b = common;
  a.insert(a.end(), {"--text", "Your journey starts with one step"});
  b.insert(b.end(), {"--text", "Every journey begins with a single step"});
  const Png pa = shoot("text_a.png", a), pb = shoot("text_b.png", b);
  REQUIRE(pa.width == 1024);
  REQUIRE(pa.height == 700);
  // The heatmap area (right of the control column, below the stepper) changes...
  CHECK(changed(pa, pb, 400, 120, 1000, 500, 24) > 0.05);
  // ...the configuration panel below the sentence box does not.
  CHECK(changed(pa, pb, 10, 140, 300, 400, 24) < 0.001);
}

TEST_CASE("every stage, palette and view mode renders") {
  for (const char* stage :
       {"inputs", "queries", "scores", "scaled", "masked", "dropped", "context", "output"}) {
    CAPTURE(stage);
    const Png p = shoot("stage.png", {"--stage", stage, "--dropout", "0.5", "--palette", "cividis"});
    CHECK(distinct_colours(p) > 100);
  }
  CHECK(distinct_colours(shoot("compare.png", {"--compare", "mask", "--lock", "4", "2"})) > 100);
  CHECK(distinct_colours(shoot("mean.png", {"--aggregate", "mean", "--normalize", "row"})) > 100);
  CHECK(distinct_colours(shoot("head.png", {"--head", "1", "--lock", "5", "3"})) > 100);
}

TEST_CASE("bad arguments fail with one line, never a crash") {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{{"--stage", "nope"},
                                                                                    {"--palette", "rainbow"},
                                                                                    {"--heads", "3"},
                                                                                    {"--text", ""},
                                                                                    {"--context-length", "3"},
                                                                                    {"--frames", "0"},
                                                                                    {"--lock", "1"}}) {
    std::ostringstream out, err;
    CHECK(attnviz::run_app(args, out, err) == 1);
    const std::string e = err.str();
    CHECK(e.rfind("attnviz: ", 0) == 0);
    CHECK(std::count(e.begin(), e.end(), '\n') == 1);
  }
}

TEST_CASE("the model view: every layer's heads of a GPT-2 file, and one layer opened, as the references") {
  // Named relative to the fixtures' folder, so that the path on screen is the same in every checkout.
  struct Cwd {
    std::filesystem::path was = std::filesystem::current_path();
    ~Cwd() { std::filesystem::current_path(was); }
  } cwd;
  std::filesystem::current_path(std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt");
  const std::string folder = "hf-folder";
  const std::string text = "A rose is a rose is a rose. In the heart of the city stood a rose";
  const Png grid = shoot("model_view.png", {"--model", folder, "--text", text});
  CHECK(distinct_colours(grid) > 200);
  compare_with_reference(grid, "model_view.png");
  const Png layer = shoot("model_layer.png", {"--model", folder, "--text", text, "--layer", "1", "--head",
                                              "2", "--stage", "scores", "--lock", "9", "4"});
  CHECK(distinct_colours(layer) > 200);
  compare_with_reference(layer, "model_layer.png");
  // The grid and the opened layer differ where the heatmaps are.
  CHECK(changed(grid, layer, 400, 150, 1000, 600, 24) > 0.2);
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--model", folder, "--layer", "2"},
                                             {"--model", folder + "/missing"},
                                             {"--model", folder, "--head-kind", "sideways"}}) {
    std::ostringstream out, err;
    CHECK(attnviz::run_app(args, out, err) == 1);
    const std::string e = err.str();
    CHECK(e.rfind("attnviz: ", 0) == 0);
    CHECK(std::count(e.begin(), e.end(), '\n') == 1);
  }
}

TEST_CASE("the model view: flags it would ignore, and heads or layers it lacks, are refused by name") {
  const std::string folder = std::string(ATTNVIZ_FIXTURES_DIR) + "/gpt/hf-folder";  // 2 layers, 4 heads
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  std::vector<Case> cases = {
      {{"--layer", "0", "--head", "99"},
       "--head 99 is past the last head: the model has 4 heads (0 to 3), and -1 shows them all"},
      {{"--head", "4"}, "--head 4 is past the last head: the model has 4 heads (0 to 3)"},
      {{"--layer", "1", "--compare", "layer", "--compare-layer", "99"},
       "--compare-layer 99 does not exist: the model has layers 0..1"},
      {{"--compare-layer", "2"}, "--compare-layer 2 does not exist: the model has layers 0..1"},
      {{"--heads", "2"},
       "--heads does not apply to --model: a model's head count comes from its preset or file"},
  };
  for (const char* flag : attnviz::kLayerOnlyFlags) {
    const bool value = std::string(flag) != "--qkv-bias" && std::string(flag) != "--no-mask";
    const std::string v = std::string(flag) == "--variant"   ? "causal"
                          : std::string(flag) == "--preset"  ? "book"
                          : std::string(flag) == "--dropout" ? "0.5"
                                                             : "8";
    cases.push_back(
        {value ? std::vector<std::string>{flag, v} : std::vector<std::string>{flag},
         std::string(flag) + " does not apply to --model: a model's sizes come from its preset or file"});
  }
  for (Case& c : cases) {
    c.args.insert(c.args.begin(), {"--model", folder});
    CAPTURE(c.args);
    std::ostringstream out, err;
    CHECK(attnviz::run_app(c.args, out, err) == 1);
    const std::string e = err.str();
    CAPTURE(e);
    CHECK(e.rfind("attnviz: " + c.says, 0) == 0);
    CHECK(std::count(e.begin(), e.end(), '\n') == 1);
    CHECK(out.str().empty());
  }
  // The last head and layer are fine, and without --model the layer's flags are the layer's.
  CHECK(distinct_colours(shoot("model_edges.png", {"--model", folder, "--layer", "1", "--head", "3",
                                                   "--compare", "layer", "--compare-layer", "1"})) > 50);
}

TEST_CASE("flags the first view cannot show are refused in one line naming them") {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--head", "100000"}, "--head 100000 is past the last head: there are 2 heads (0 to 1)"},
      {{"--head", "1", "--variant", "causal"}, "--head 1 is past the last head: there is 1 head (0)"},
      {{"--lock", "100000", "100000"}, "--lock 100000 100000 is outside the weights matrix: rows 0 to 5"},
      {{"--lock", "-1", "-1"}, "--lock -1 -1 is outside the weights matrix"},
      {{"--lock", "2", "5", "--stage", "context"}, "outside the context matrix: rows 0 to 5, columns 0 to 0"},
      {{"--compare", "text", "--compare-text", "\xff"}, "--compare-text: the text is not valid UTF-8"},
      {{"--compare", "text", "--compare-text", "   "}, "--compare-text: the text is empty"},
      {{"--compare", "text", "--text", "a b", "--context-length", "3", "--compare-text", "a b c d"},
       "--compare-text: the text has 4 tokens, more than the context length 3"},
      {{"--compare", "mask", "--variant", "self_v1"}, "--compare mask: this variant has no mask (self_v1"},
      {{"--screenshot", ""}, "--screenshot needs a value"},
      {{"--seed", ""}, "--seed needs a value"},
      {{"--frames", "101", "--screenshot", "x.png"}, "--frames must be between 1 and 100 (got 101)"},
      {{"--frames", "010", "--width", "0x500"}, "--width: '0x500' is not a decimal integer"},
      {{"--compare-seed", "18446744073709551616"}, "outside torch.manual_seed's range"},
      {{"--threads", "100000"}, "--threads must be between 0 (every hardware thread) and 256"},
      {{"--d-in", "16384", "--d-out", "16384"}, "needs 8.6 GB of memory (parameters 8.6 GB"},
      {{"--preset", "gpt2-small", "--memory-budget", "10MB"}, "more than the 10.0 MB of --memory-budget"},
      // A and B each draw their own parameters. The total is left out: the tensors' scratch depends on the
      // kernels' panel width and the worker threads, so it differs between machines.
      {{"--preset", "gpt2-small", "--compare", "seed", "--memory-budget", "30MB"},
       " MB of memory (parameters 37.8 MB, tensors "},
      {{"one", "two"}, "not expected: 'one' 'two'"},
      {{"--stage", "a\nb"}, "unknown stage 'a\\x0Ab'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args.front());
    std::ostringstream out, err;
    CHECK(attnviz::run_app(c.args, out, err) == 1);
    const std::string e = err.str();
    CAPTURE(e);
    CHECK(e.rfind("attnviz: ", 0) == 0);
    CHECK(e.find(c.says) != std::string::npos);
    CHECK(std::count(e.begin(), e.end(), '\n') == 1);
    CHECK(out.str().empty());
  }
  // The edges of the ranges are fine.
  CHECK(distinct_colours(shoot("edges.png", {"--head", "1", "--lock", "5", "5"})) > 100);
}

TEST_CASE("a screenshot that cannot be written is an error, not a short file") {
  std::ostringstream out, err;
  CHECK(attnviz::run_app({"--screenshot", "/dev/full", "--frames", "1"}, out, err) == 1);
  CHECK(err.str() == "attnviz: cannot write '/dev/full': No space left on device\n");
  CHECK(out.str().empty());
  std::ostringstream out2, err2;
  CHECK(attnviz::run_app({"--screenshot", "/nonexistent/dir/a.png", "--frames", "1"}, out2, err2) == 1);
  CHECK(err2.str() == "attnviz: cannot write '/nonexistent/dir/a.png': No such file or directory\n");
}

TEST_CASE("the PNG view export captures the heatmap area as rendered") {
  attnviz::Window w;
  attnviz::WindowOptions o;
  o.visible = false;
  REQUIRE(w.open(o).is_ok());
  attnviz::viz::App app;
  REQUIRE(attnviz::viz::start(app).is_ok());
  w.frame(app);
  app.capture.pending = true;  // what the Export panel's "PNG view" button asks for
  app.capture.path = out_path("view.png");
  std::filesystem::remove(app.capture.path);
  w.frame(app);
  CHECK(app.message == "wrote " + attnviz::quote(app.capture.path));
  const Png p = load(app.capture.path);
  CHECK(p.width == static_cast<int>(app.capture.w));
  CHECK(p.height == static_cast<int>(app.capture.h));
  CHECK(distinct_colours(p) > 50);
}
