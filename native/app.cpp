#include "app.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "attnviz/engine.hpp"
#include "attnviz/io/files.hpp"
#include "attnviz/io/model_source.hpp"
#include "attnviz/saturating.hpp"
#include "attnviz/viz/export.hpp"
#include "config_args.hpp"
#include "hub_download.hpp"
#include "view_args.hpp"
#include "window.hpp"

namespace attnviz {
namespace {

// Frames a screenshot may render. The UI settles in three; the cap keeps a slip of the keyboard from
// rendering for hours. On llvmpipe (2 cores) a 1280x800 frame takes about 6 ms and an 8192x8192 one (the
// largest window) about 150 ms, so 100 frames take under a second by default and about 15 s at most.
constexpr int kMaxFrames = 100;

// The first view's memory before it is computed: session A's run and, when comparing, B's (a session of its
// own, parameters included), against the budget.
Status check_first_view_memory(const viz::App& app, const ConfigArgs& a) {
  if (!validate(app.session.config).is_ok()) return Status::ok();  // viz::start names the bad value
  std::uint64_t params = 0, tensors = 0;
  const auto count = [&](const std::string& text, Config c) {
    std::vector<std::string> words;
    if (!split_words(text, words).is_ok()) return;  // viz::start explains it
    c.stages = kStageAll;                           // the UI keeps every stage
    const RunMemory m = run_memory(c, static_cast<int>(words.size()), app.session.exec);
    params = sat_add(params, m.params);
    tensors = sat_add(tensors, m.tensors);
  };
  count(app.session.text, app.session.config);
  if (app.compare.mode != viz::CompareMode::off) {
    Config b = app.session.config;
    if (app.compare.mode == viz::CompareMode::seed) b.seed = app.compare.seed;
    count(app.compare.mode == viz::CompareMode::text ? app.compare.text : app.session.text, b);
  }
  const std::uint64_t needed = sat_add(params, tensors);
  const std::uint64_t budget = a.memory_budget ? a.memory_budget : available_memory_bytes();
  return check_memory(needed, budget, a.memory_budget != 0,
                      "parameters " + format_bytes(params) + ", tensors " + format_bytes(tensors));
}

// The window's pixels as a PNG file, every write error reported (a full disk is a failure, not a short file).
Status write_screenshot(const std::string& path, const Window::Image& image) {
  return viz::write_png(path, image.width, image.height, image.rgba);
}

}  // namespace

int run_app(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App cli{
      "attnviz: watch multi-head causal self-attention, every stage of every head, as live heatmaps.\n"
      "Opens a window; with --screenshot it renders headless and writes a PNG instead.",
      "attnviz"};
  ConfigArgs a;
  ViewArgs v;
  std::string screenshot;
  int frames = 3, width = 1280, height = 800;
  add_config_options(cli, a);
  add_memory_budget_option(cli, a);
  add_view_options(cli, v);
  cli.add_option("--screenshot", screenshot, "render headless, write this PNG and exit");
  bool download = false;
  add_download_option(cli, download);
  std::string train_recipe;
  int train_steps = 0;
  cli.add_option(
      "--train-recipe", train_recipe,
      "open the Train panel's view with this recipe: induction | book | custom (book and custom train "
      "on --text)");
  cli.add_option("--train-steps", train_steps,
                 "with --train-recipe: train this many steps before the first frame")
      ->transform(decimal_int());
  cli.add_option("--frames", frames, "frames to render before the screenshot (at most 100)")
      ->capture_default_str()
      ->transform(decimal_int());
  cli.add_option("--width", width, "window width in pixels")->capture_default_str()->transform(decimal_int());
  cli.add_option("--height", height, "window height in pixels")
      ->capture_default_str()
      ->transform(decimal_int());

  if (const std::optional<int> done = parse_command_line(cli, args, out, err)) return *done;
  const auto fail = [&err](const Status& st) {
    err << "attnviz: " << st.error << "\n";
    return 1;
  };
  if (frames < 1 || frames > kMaxFrames)
    return fail(Status::fail("--frames must be between 1 and " + std::to_string(kMaxFrames) + " (got " +
                             std::to_string(frames) + ")"));
  if (width < 320 || height < 240 || width > 8192 || height > 8192)
    return fail(Status::fail("--width and --height must be between 320x240 and 8192x8192"));
  if (model_choice(v).kind != viz::ModelKind::layer)
    if (Status st = refuse_layer_flags(cli, false); !st.is_ok()) return fail(st);

  viz::App app;
  if (Status st = config_from_args(a, app.session.config, app.session.exec); !st.is_ok()) return fail(st);
  app.session.text = a.text;
  if (Status st = apply_view(v, app); !st.is_ok()) return fail(st);
  if (download) {  // the hub, asked for, before the window: then the cache's snapshot opens as a folder
    if (v.model.empty()) return fail(Status::fail("--download needs --model ORG/NAME"));
    bool stopped = false;
    if (Status st = download_model(v.model, "attnviz", err, isatty(STDERR_FILENO) == 1, nullptr,
                                   app.model_view.choice.path, stopped);
        !st.is_ok())
      return fail(st);
  }
  app.model.exec = app.session.exec;
  if (app.model_view.choice.kind == viz::ModelKind::layer) {
    if (Status st = check_first_view_memory(app, a); !st.is_ok()) return fail(st);
  } else {
    // The whole model: its weights are checked against the memory as it opens, each pass before it runs.
    const int layer = app.model_view.layer;
    if (a.memory_budget) app.model.free_memory = [budget = a.memory_budget] { return budget; };
    if (Status st = viz::open_model(app, app.model_view.choice); !st.is_ok()) return fail(st);
    if (layer >= app.model.config().n_layers)
      return fail(Status::fail("--layer " + std::to_string(layer) +
                               " does not exist: the model has layers 0.." +
                               std::to_string(app.model.config().n_layers - 1)));
    // Opening drops a head and a layer B the model lacks: check_view names them instead.
    app.view.enlarged = v.head;
    app.compare.layer = v.compare_layer;
  }
  if (!viz::compare_available(app, app.compare.mode))
    return fail(Status::fail(std::string("--compare ") + v.compare + ": " +
                             viz::why_not_compare(app, app.compare.mode)));
  // A bad first configuration is an error on the command line; in the window it is explained in place.
  if (Status st = viz::start(app); !st.is_ok()) return fail(st);
  if (Status st = check_view(app); !st.is_ok()) return fail(st);
  if (!train_recipe.empty() || train_steps != 0) {
    const std::optional<viz::TrainRecipe> r = train_recipe == "induction" ? viz::TrainRecipe::induction
                                              : train_recipe == "book"    ? viz::TrainRecipe::book
                                              : train_recipe == "custom"  ? viz::TrainRecipe::custom
                                                                          : std::optional<viz::TrainRecipe>{};
    if (!r)
      return fail(
          Status::fail("--train-recipe " + quote(train_recipe) + " is not induction, book or custom"));
    if (train_steps < 0 || train_steps > 1000000)
      return fail(Status::fail("--train-steps must be between 0 and 1000000"));
    app.train.settings = viz::recipe_settings(*r);
    app.train.settings.seed = a.seed;
    if (Status st = viz::reset_training(app); !st.is_ok()) return fail(st);
    for (int i = 0; i < train_steps; ++i)
      if (Status st = app.train.session->step(); !st.is_ok()) return fail(st);
    app.train.show = true;
  }

  Window window;
  WindowOptions wo;
  wo.width = width;
  wo.height = height;
  wo.visible = screenshot.empty();
  if (Status st = window.open(wo); !st.is_ok()) return fail(st);
  if (!screenshot.empty()) {
    Window::Image image;
    for (int f = 0; f < frames; ++f) window.frame(app, false, f + 1 == frames ? &image : nullptr);
    if (Status st = write_screenshot(screenshot, image); !st.is_ok()) return fail(st);
    out << "attnviz: wrote " << quote(screenshot) << " (" << image.width << "x" << image.height << ")\n";
    return 0;
  }
  while (!window.should_close()) window.frame(app);
  return 0;
}

}  // namespace attnviz
