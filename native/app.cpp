#include "app.hpp"

#include <CLI/CLI.hpp>

#include "attnviz/viz/export.hpp"
#include "config_args.hpp"
#include "window.hpp"

namespace attnviz {
namespace {

// How the first view looks, beyond the engine configuration.
struct ViewArgs {
  std::string stage = "weights", palette = "blues", norm = "head", aggregate = "none", compare = "off";
  std::string compare_text = "Your journey ends with one step";
  std::uint64_t compare_seed = 456;
  int head = -1;
  std::vector<int> lock;  // row, column (and head)
};

Status apply_view(const ViewArgs& a, viz::App& app) {
  viz::ViewState& v = app.view;
  if (!viz::parse_stage(a.stage, v.stage))
    return Status::fail(
        "unknown stage '" + a.stage +
        "' (inputs, queries, keys, values, scores, scaled, masked, weights, dropped, context, output)");
  const auto palette = viz::parse_palette(a.palette);
  if (!palette)
    return Status::fail("unknown palette '" + a.palette + "' (blues, viridis, cividis, diverging)");
  v.color.palette = *palette;
  v.color.centered = *palette == viz::Palette::diverging;
  if (!viz::parse_norm(a.norm.c_str(), v.color.norm))
    return Status::fail("unknown normalization '" + a.norm + "' (head, row, all-heads, fixed)");
  if (a.aggregate == "mean")
    v.aggregate = viz::Aggregate::mean;
  else if (a.aggregate == "max")
    v.aggregate = viz::Aggregate::max;
  else if (a.aggregate != "none")
    return Status::fail("unknown aggregate '" + a.aggregate + "' (none, mean, max)");
  if (a.compare == "text")
    app.compare.mode = viz::CompareMode::text;
  else if (a.compare == "seed")
    app.compare.mode = viz::CompareMode::seed;
  else if (a.compare == "mask")
    app.compare.mode = viz::CompareMode::mask;
  else if (a.compare != "off")
    return Status::fail("unknown compare mode '" + a.compare + "' (off, text, seed, mask)");
  app.compare.text = a.compare_text;
  app.compare.seed = a.compare_seed;
  v.enlarged = a.head;
  if (!a.lock.empty()) {
    if (a.lock.size() != 2) return Status::fail("--lock takes a row and a column");
    v.locked = {true, a.head >= 0 ? a.head : 0, a.lock[0], a.lock[1]};
  }
  return Status::ok();
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
  cli.add_option("--stage", v.stage,
                 "stage shown first: inputs | queries | keys | values | scores | scaled | "
                 "masked | weights | dropped | context | output")
      ->capture_default_str();
  cli.add_option("--palette", v.palette, "blues | viridis | cividis | diverging")->capture_default_str();
  cli.add_option("--normalize", v.norm, "head | row | all-heads | fixed")->capture_default_str();
  cli.add_option("--aggregate", v.aggregate, "none | mean | max over heads")->capture_default_str();
  cli.add_option("--head", v.head, "show this head alone (-1: every head)")->capture_default_str();
  cli.add_option("--lock", v.lock, "lock the cell at ROW COL (shows its breakdown)")->expected(2);
  cli.add_option("--compare", v.compare, "off | text | seed | mask")->capture_default_str();
  cli.add_option("--compare-text", v.compare_text, "sentence B for --compare text");
  cli.add_option("--compare-seed", v.compare_seed, "seed B for --compare seed");
  cli.add_option("--screenshot", screenshot, "render headless, write this PNG and exit");
  cli.add_option("--frames", frames, "frames to render before the screenshot")->capture_default_str();
  cli.add_option("--width", width, "window width in pixels")->capture_default_str();
  cli.add_option("--height", height, "window height in pixels")->capture_default_str();

  if (const std::optional<int> done = parse_command_line(cli, args, out, err)) return *done;
  const auto fail = [&err](const Status& st) {
    err << "attnviz: " << st.error << "\n";
    return 1;
  };
  if (frames < 1 || frames > 100000) return fail(Status::fail("--frames must be between 1 and 100000"));
  if (width < 320 || height < 240 || width > 8192 || height > 8192)
    return fail(Status::fail("--width and --height must be between 320x240 and 8192x8192"));

  viz::App app;
  if (Status st = config_from_args(a, app.session.config, app.session.exec); !st.is_ok()) return fail(st);
  app.session.text = a.text;
  if (Status st = apply_view(v, app); !st.is_ok()) return fail(st);
  // A bad first configuration is an error on the command line; in the window it is explained in place.
  if (Status st = viz::start(app); !st.is_ok()) return fail(st);

  Window window;
  WindowOptions wo;
  wo.width = width;
  wo.height = height;
  wo.visible = screenshot.empty();
  if (Status st = window.open(wo); !st.is_ok()) return fail(st);
  if (!screenshot.empty()) {
    Window::Image image;
    for (int f = 0; f < frames; ++f) window.frame(app, false, f + 1 == frames ? &image : nullptr);
    if (Status st = viz::write_png(screenshot, image.width, image.height, image.rgba); !st.is_ok())
      return fail(st);
    out << "attnviz: wrote " << screenshot << " (" << image.width << "x" << image.height << ")\n";
    return 0;
  }
  while (!window.should_close()) window.frame(app);
  return 0;
}

}  // namespace attnviz
