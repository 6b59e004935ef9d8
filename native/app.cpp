#include "app.hpp"

#include <CLI/CLI.hpp>

#include "attnviz/viz/export.hpp"
#include "config_args.hpp"
#include "view_args.hpp"
#include "window.hpp"

namespace attnviz {
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
  add_view_options(cli, v);
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
  app.model.exec = app.session.exec;
  // A bad first configuration (or model) is an error on the command line; in the window it is explained in
  // place.
  if (app.model_view.choice.kind != viz::ModelKind::layer) {
    const int layer = app.model_view.layer;
    if (Status st = viz::open_model(app, app.model_view.choice); !st.is_ok()) return fail(st);
    if (layer >= app.model.config().n_layers)
      return fail(Status::fail("--layer " + std::to_string(layer) +
                               " does not exist: the model has layers 0.." +
                               std::to_string(app.model.config().n_layers - 1)));
  }
  if (!viz::compare_available(app, app.compare.mode))
    return fail(Status::fail(std::string("--compare ") + v.compare + ": " +
                             viz::why_not_compare(app, app.compare.mode)));
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
