// The functions the page script calls (web/page/api.js and its neighbours), through Module._attnviz_*.
// Every one runs its body guarded (guard.hpp): a C++ exception becomes a message and the view stays; a
// string argument that is a null pointer is "".
#include <emscripten/emscripten.h>
#include <emscripten/heap.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attnviz/engine.hpp"
#include "attnviz/io/files.hpp"
#include "attnviz/io/gpt_json.hpp"
#include "attnviz/io/hf_hub.hpp"
#include "attnviz/io/json_io.hpp"
#include "budget.hpp"
#include "guard.hpp"
#include "page.hpp"
#include "threads.hpp"
#include "view_args.hpp"

namespace attnviz::web {
namespace {

// Figures for tests and benchmarks (attnviz_status).
std::string status_json() {
  const Page& p = *page;
  const attnviz::viz::Session& s = p.app.session;
  nlohmann::json heatmaps = nlohmann::json::array();
  for (const attnviz::viz::HeatmapRect& r : p.app.layout)
    heatmaps.push_back({{"slot", r.slot},
                        {"x0", r.x0},
                        {"y0", r.y0},
                        {"x1", r.x1},
                        {"y1", r.y1},
                        {"origin_x", r.origin_x},
                        {"origin_y", r.origin_y},
                        {"cell", r.cell},
                        {"rows", r.rows},
                        {"cols", r.cols}});
  const attnviz::viz::Cell& hover = p.app.view.hover;
  const attnviz::viz::ModelSession& m = p.app.model;
  const attnviz::viz::ModelView& mv = p.app.model_view;
  nlohmann::json model = {
      {"open", m.is_open()},         {"choice", choice_json(mv.choice)}, {"error", m.error()},
      {"open_error", mv.open_error}, {"wanted_file", mv.wanted_file},    {"generation", m.generation()},
      {"layer", mv.layer},           {"thumbs", mv.thumbs.size()},       {"thumb_px", mv.thumb_px},
      {"generating", mv.generating}};
  if (m.is_open()) {
    model["source"] = choice_json(m.choice());
    model["layers"] = m.config().n_layers;
    model["heads"] = m.config().n_heads;
    model["ids"] = m.ids();
    model["pieces"] = m.pieces();
    model["ms"] = m.last_ms();
    model["pass_ms"] = m.result().seconds * 1e3;
    model["reused"] = m.result().reused;
    model["open_ms"] = m.open_ms();
    nlohmann::json next = nlohmann::json::array();
    for (const attnviz::TopToken& t : m.result().next)
      next.push_back({{"id", t.id}, {"probability", t.probability}});
    model["next"] = next;
    nlohmann::json kinds = nlohmann::json::array();
    for (const auto& layer : m.kinds()) {
      nlohmann::json row = nlohmann::json::array();
      for (const attnviz::viz::HeadScores& k : layer) row.push_back(attnviz::viz::to_string(k.kind));
      kinds.push_back(row);
    }
    model["kinds"] = kinds;
  }
  nlohmann::json thumbs = nlohmann::json::array();
  for (const auto& t : mv.thumbs)
    thumbs.push_back(
        {{"layer", t.layer}, {"head", t.head}, {"x0", t.x0}, {"y0", t.y0}, {"x1", t.x1}, {"y1", t.y1}});
  model["thumb_rects"] = thumbs;
  nlohmann::json hub = nlohmann::json::array();
  for (const auto& h : mv.hub_models)
    hub.push_back({{"repo", h.repo},
                   {"note", h.note},
                   {"detail", h.detail},
                   {"x0", h.x0},
                   {"y0", h.y0},
                   {"x1", h.x1},
                   {"y1", h.y1}});
  model["hub"] = {{"endpoint", mv.hub_endpoint}, {"models", hub}};
  const attnviz::viz::TrainView& tv = p.app.train;
  nlohmann::json train = {
      {"recipe", attnviz::viz::to_string(tv.settings.recipe)},
      {"running", tv.running},
      {"show", tv.show},
      {"error", tv.error},
      {"snapshot", tv.snapshot},
      // the control waiting for GPT-2's vocabulary ("start", "step", "reset"), or ""
      {"waiting", tv.waiting},
      {"text", {{"name", tv.text_name}, {"size", tv.text_size}, {"max", attnviz::viz::kMaxTrainTextBytes}}}};
  // the panel's controls as the last frame drew them, for tests that click them
  nlohmann::json controls = nlohmann::json::object();
  for (const attnviz::viz::TrainView::Control& c : tv.controls)
    controls[c.name] = {
        {"x", c.x0},           {"y", c.y0}, {"w", c.x1 - c.x0}, {"h", c.y1 - c.y0}, {"visible", c.visible},
        {"hovered", c.hovered}};
  train["controls"] = controls;
  if (tv.session) {
    const attnviz::viz::TrainSession& ts = *tv.session;
    nlohmann::json losses = nlohmann::json::array();
    for (const attnviz::viz::TrainPoint& pt : ts.points()) losses.push_back(pt.loss);
    train["steps"] = ts.steps_done();
    train["ms_per_step"] = ts.ms_per_step();
    // the slices (one a frame while training runs): how long the page's frames spend training
    train["mid_step"] = ts.mid_step();
    std::vector<double> slices = ts.slice_ms();
    nlohmann::json sl = {
        {"count", slices.size()},
        {"last_ms", nullptr},
        {"median_ms", nullptr},
        {"max_ms", nullptr},
        {"p99_ms", nullptr},
        {"over_50_ms", std::count_if(slices.begin(), slices.end(), [](double ms) { return ms > 50.0; })}};
    if (!slices.empty()) {
      sl["last_ms"] = slices.back();
      // which slices ran over 50 ms (their 0-based places in the run), to tell a start-up cost from jitter
      nlohmann::json over = nlohmann::json::array();
      for (std::size_t i = 0; i < slices.size(); ++i)
        if (slices[i] > 50.0) over.push_back(i);
      sl["over_50_ms_at"] = over;
      const auto mid = slices.begin() + static_cast<std::ptrdiff_t>(slices.size() / 2);
      std::nth_element(slices.begin(), mid, slices.end());
      sl["median_ms"] = *mid;
      sl["max_ms"] = *std::max_element(slices.begin(), slices.end());
      const auto p99 = slices.begin() + static_cast<std::ptrdiff_t>(slices.size() * 99 / 100);
      std::nth_element(slices.begin(), p99, slices.end());
      sl["p99_ms"] = *p99;
    }
    train["slices"] = sl;
    // each piece's last time: the forward stages, the backward stages, update, an evaluation batch's forward
    // stages, snapshot (pieces: their names)
    train["pieces_ms"] = ts.piece_ms();
    train["pieces"] = ts.piece_names();
    train["losses"] = losses;
    // each step's in-context score (null between evaluations); losses[i] and in_context[i] are step
    // continued_from + 1 + i (0 for a run the page began)
    nlohmann::json in_context = nlohmann::json::array();
    for (const attnviz::viz::TrainPoint& pt : ts.points())
      in_context.push_back(std::isfinite(pt.in_context) ? nlohmann::json(pt.in_context)
                                                        : nlohmann::json(nullptr));
    train["in_context"] = in_context;
    train["continued_from"] = ts.continued_from();
    train["snapshots"] = ts.snapshots().size();
    const int first = ts.first_induction();
    train["first_induction_step"] =
        first < 0 ? nlohmann::json(nullptr)
                  : nlohmann::json(ts.snapshots()[static_cast<std::size_t>(first)].step);
    if (!ts.snapshots().empty()) {
      const std::size_t shown =
          tv.snapshot < 0 ? ts.snapshots().size() - 1
                          : std::min(ts.snapshots().size() - 1, static_cast<std::size_t>(tv.snapshot));
      const attnviz::viz::TrainSnapshot& snap = ts.snapshots()[shown];
      nlohmann::json kinds = nlohmann::json::array();
      for (const auto& layer : snap.heads) {
        nlohmann::json row = nlohmann::json::array();
        for (const attnviz::HeadScores& k : layer) row.push_back(attnviz::to_string(k.kind));
        kinds.push_back(row);
      }
      train["shown_step"] = snap.step;
      train["kinds"] = kinds;
    }
  }
  const attnviz::viz::CompareState& cs = p.app.compare;
  return nlohmann::json{
      {"generation", view_generation(p.app)},
      {"model", model},
      {"train", train},
      {"memory",
       {{"heap_max", heap_max()}, {"heap_size", emscripten_get_heap_size()}, {"free", heap_free()}}},
      {"compute", p.gpu.status()},
      {"threads", threads_json()},
      {"error", s.error()},
      {"message", p.app.message},
      {"view_note", p.app.view_note},
      {"text_pending", p.app.text_pending},
      {"compare",
       {{"on", cs.mode != attnviz::viz::CompareMode::off},
        {"error", cs.mode == attnviz::viz::CompareMode::off ? std::string() : cs.b.error()},
        {"tokens", cs.b.result().tokens_count()}}},
      {"tokens", s.result().tokens_count()},
      {"compute_ms", s.last_ms()},
      {"engine_ms", s.result().seconds * 1e3},
      {"frame_ms", p.app.frame_ms},
      {"frames", p.frames},
      {"inputs", {{"received", p.inputs}, {"drawn", p.inputs_drawn}}},
      {"drawn_generation", p.drawn_generation},
      {"drawn_at", p.drawn_at},
      {"first_heatmap_at", p.first_heatmap_at},
      {"heatmaps", heatmaps},
      {"hover", hover.active ? nlohmann::json{{"head", hover.head}, {"row", hover.row}, {"col", hover.col}}
                             : nlohmann::json(nullptr)}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace
}  // namespace attnviz::web

// The exports are C functions, outside the namespace.
using attnviz::Status;
using namespace attnviz::web;

extern "C" {

// Replaces the sentence (as if typed); "" when it was computed, else why the last good result stays. A text
// longer than the page takes changes nothing.
EMSCRIPTEN_KEEPALIVE const char* attnviz_set_text(const char* text) {
  return guarded([&]() -> std::string {
    attnviz::viz::App& app = page->app;
    const std::string t = text_arg(text);
    if (Status st = check_text_size(t.size(), "the text"); !st.is_ok()) {
      app.message = st.error;
      wake();
      return st.error;
    }
    release_keyboard();
    app.session.text = t;
    // Recomputes, and brings the compare session up to date; a failure is the view's error, returned below.
    (void)attnviz::viz::start(app);
    draw_now();
    return app.model.is_open() ? app.model.error() : app.session.error();
  });
}

// Text the browser gives the box that has the keyboard: a paste, or text inserted without key events
// (keyboard.insertText, an input method). Typed as it arrives; a text that would grow the sentence past
// what the page takes is refused whole. Returns "" or why.
EMSCRIPTEN_KEEPALIVE const char* attnviz_insert_text(const char* text) {
  return guarded([&]() -> std::string {
    std::string t;
    for (const char* c = text_arg(text); *c; ++c) {
      if (*c == '\r') {
        if (c[1] != '\n') t += '\n';  // CR LF and a lone CR are a newline
      } else {
        t += *c == '\t' ? ' ' : *c;  // the box takes no tab: a tab is a space between words there
      }
    }
    const std::size_t total = page->app.session.text.size() + page->paste.size() + t.size();
    if (Status st = check_text_size(total, "the text with what was pasted"); !st.is_ok()) {
      page->app.message = st.error;
      wake();
      return st.error;
    }
    page->paste += t;
    render_safe();  // at once, as a key
    return std::string();
  });
}

// The current result in attnviz-cli --json's format, or why not (then it does not start with '{'): its
// text must fit in the heap, and in a JavaScript string.
EMSCRIPTEN_KEEPALIVE const char* attnviz_result_json() {
  return guarded([&]() -> std::string {
    const attnviz::viz::Session& s = page->app.session;
    const std::uint64_t bytes = result_json_bytes(s.result());
    const std::uint64_t free = heap_free();
    if (bytes + kHeapReserve > free)
      return "the result's JSON would be up to " + attnviz::format_bytes(bytes) + ", more than the " +
             attnviz::format_bytes(free) + " the page has left";
    std::string json =
        attnviz::result_to_json(s.result(), attnviz::state_dict(s.result().config, s.params()));
    constexpr std::size_t kMaxJsString = (1u << 29) - 24;  // V8's longest string, in UTF-16 units
    if (json.size() > kMaxJsString) {
      const attnviz::BytesApart b = attnviz::format_bytes_apart(json.size(), kMaxJsString);
      return "the result's JSON is " + b.first + ", more than a JavaScript string holds (" + b.second +
             "): export it as a file (exportFiles('json'))";
    }
    return json;
  });
}

// The state as [name, value] pairs (the desktop app's flags), defaults left out.
EMSCRIPTEN_KEEPALIVE const char* attnviz_state() {
  return guarded([] { return state_json(page->app); });
}

// Sets the whole state from [name, value] pairs (missing names take their defaults). "" when it was
// computed, else why: a bad setting changes nothing, and a state that cannot be computed is kept with the
// last good view.
EMSCRIPTEN_KEEPALIVE const char* attnviz_apply_state(const char* json) {
  return guarded([&]() -> std::string {
    release_keyboard();
    wake();
    const Applied a = apply_state_json(text_arg(json), page->app);
    if (a.refused) page->app.message = "link: " + a.status.error;
    draw_now();
    if (a.refused) return a.status.error;
    return page->app.model.is_open() ? page->app.model.error() : page->app.session.error();
  });
}

// Opens a model: {"kind": "layer" | "seeded" | "file", "size", "seed", "path", "train"} (the page has put a
// file's bytes under /models first). Returns "" or why not (the view keeps what it had).
EMSCRIPTEN_KEEPALIVE const char* attnviz_open_model(const char* json) {
  return guarded([&]() -> std::string {
    release_keyboard();
    wake();
    const nlohmann::json j = nlohmann::json::parse(text_arg(json), nullptr, false);
    attnviz::viz::ModelChoice c;
    if (j.is_discarded() || !j.is_object() || !j.value("kind", nlohmann::json()).is_string() ||
        !attnviz::viz::parse_model_kind(j["kind"].get<std::string>(), c.kind))
      return "the model choice is not {kind: layer | seeded | file, ...}";
    if (j.contains("size") && j["size"].is_string()) c.size = j["size"].get<std::string>();
    if (j.contains("seed") && j["seed"].is_number_unsigned()) c.seed = j["seed"].get<std::uint64_t>();
    if (j.contains("path") && j["path"].is_string()) c.path = j["path"].get<std::string>();
    if (j.contains("train") && j["train"].is_boolean()) c.train = j["train"].get<bool>();
    const Status st = attnviz::viz::open_model(page->app, c);
    return st.is_ok() ? page->app.model.error() : st.error;
  });
}

// What the Train panel's controls do: {"action": "reset" | "start" | "pause" | "step" | "snapshot" | "save" |
// "csv" | "png" | "open" | "continue", "recipe": "induction" | "book" | "custom" (reset), "snapshot": N (-1:
// the latest), "path": a checkpoint folder in the module's file system and "name": what the message calls it
// (continue; the page has copied a chosen or dropped folder there, model-files.js)}. Returns "" or why not
// (also shown in the panel).
EMSCRIPTEN_KEEPALIVE const char* attnviz_train(const char* json) {
  return guarded([&]() -> std::string {
    using attnviz::viz::TrainRecipe;
    attnviz::viz::App& app = page->app;
    attnviz::viz::TrainView& t = app.train;
    wake();
    const nlohmann::json j = nlohmann::json::parse(text_arg(json), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.value("action", nlohmann::json()).is_string())
      return "the training call is not {action: reset | start | pause | step | snapshot | save | csv | open "
             "| "
             "continue}";
    const std::string action = j["action"].get<std::string>();
    t.error.clear();
    if (action == "continue") {
      if (!j.value("path", nlohmann::json()).is_string()) return "continue takes {action, path, name}";
      const std::string path = j["path"].get<std::string>();
      const std::string name =
          j.value("name", nlohmann::json()).is_string() ? j["name"].get<std::string>() : path;
      t.running = false;
      if (Status st = attnviz::viz::continue_training(app, path); !st.is_ok()) {
        // the folder as the visitor named it, not the module's copy of it
        std::string why = st.error;
        for (std::size_t at = 0; !name.empty() && (at = why.find(path, at)) != std::string::npos;
             at += name.size())
          why.replace(at, path.size(), name);
        return t.error = why;
      }
      const std::string from = attnviz::quote(path);
      if (const std::size_t at = app.message.find(from); at != std::string::npos)
        app.message.replace(at, from.size(), attnviz::quote(name));
      return std::string();
    }
    if (action == "reset") {
      const std::string recipe = j.value("recipe", std::string("induction"));
      const TrainRecipe r = recipe == "book"     ? TrainRecipe::book
                            : recipe == "custom" ? TrainRecipe::custom
                                                 : TrainRecipe::induction;
      if (recipe != "induction" && recipe != "book" && recipe != "custom")
        return "unknown recipe " + attnviz::quote(recipe) + " (induction, book, custom)";
      t.settings = attnviz::viz::recipe_settings(r);
      t.running = false;
      // a text recipe with no model open tokenizes with GPT-2's vocabulary, which the page fetches on demand:
      // a script resets again (the panel's controls wait for it instead)
      std::string why;
      if (r != TrainRecipe::induction && !app.model.is_open() && t.vocabulary_ready &&
          !t.vocabulary_ready(why)) {
        if (!why.empty()) return t.error = why;
        return "GPT-2's vocabulary is on its way (fetched now): reset again, which returns '' once it is "
               "there";
      }
      if (Status st = attnviz::viz::reset_training(app); !st.is_ok()) return t.error = st.error;
      t.show = true;
      return std::string();
    }
    if (!t.session) return "nothing to train: reset first";
    if (action == "start" || action == "pause") {
      t.running = action == "start";
      t.show = true;
    } else if (action == "step") {
      if (Status st = t.session->step(); !st.is_ok()) return t.error = st.error;
    } else if (action == "snapshot") {
      t.snapshot = j.value("snapshot", -1);
    } else if (action == "save" || action == "csv" || action == "png" || action == "open") {
      attnviz::viz::train_action(app, action == "save"  ? attnviz::viz::TrainAction::save
                                      : action == "csv" ? attnviz::viz::TrainAction::csv
                                      : action == "png" ? attnviz::viz::TrainAction::png
                                                        : attnviz::viz::TrainAction::open);
      return t.error;
    } else {
      return "unknown training action " + attnviz::quote(action);
    }
    return std::string();
  });
}

// A text file dropped onto the page for the book's recipe: {"name", "path", "size"}, its bytes at `path` in
// the module's file system (none when `size` is over the cap: it is refused by its size, unread). Returns ""
// or why not (also shown in the Train panel, where the last good text stays).
EMSCRIPTEN_KEEPALIVE const char* attnviz_train_text(const char* json) {
  return guarded([&]() -> std::string {
    attnviz::viz::App& app = page->app;
    wake();
    const nlohmann::json j = nlohmann::json::parse(text_arg(json), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.value("name", nlohmann::json()).is_string() ||
        !j.value("path", nlohmann::json()).is_string() ||
        !j.value("size", nlohmann::json()).is_number_unsigned())
      return "the text call is not {name, path, size}";
    const std::string name = j["name"], path = j["path"];
    const std::uint64_t size = j["size"].get<std::uint64_t>();
    std::string bytes;
    if (size <= attnviz::viz::kMaxTrainTextBytes)
      if (Status st = attnviz::read_untrusted_file(
              path, static_cast<std::size_t>(attnviz::viz::kMaxTrainTextBytes), bytes);
          !st.is_ok())
        return app.train.error = st.error;
    const Status st = attnviz::viz::choose_train_text(app, name, size, std::move(bytes));
    return st.is_ok() ? std::string() : st.error;
  });
}

// Shows a message in the control column (the page's refusals of model files).
EMSCRIPTEN_KEEPALIVE const char* attnviz_set_message(const char* text) {
  return guarded([&]() -> std::string {
    page->app.message = text_arg(text);
    wake();
    return std::string();
  });
}

// The Model panel's list of models on the Hugging Face hub (web/page/hub.js): {"endpoint": "" (the hub) or
// a mirror's URL, "models": [{"repo", "note", "detail"}, ...]}. Returns "" or why not (the list is left as it
// was).
EMSCRIPTEN_KEEPALIVE const char* attnviz_set_hub(const char* json) {
  return guarded([&]() -> std::string {
    const nlohmann::json j = nlohmann::json::parse(text_arg(json), nullptr, false);
    const auto text = [](const nlohmann::json& o, const char* key) {
      return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>()
                                                                    : std::string();
    };
    if (j.is_discarded() || !j.is_object() || !j.value("models", nlohmann::json()).is_array())
      return "the hub list is not {endpoint, models: [{repo, note, detail}, ...]}";
    std::vector<attnviz::viz::ModelView::HubModel> models;
    for (const nlohmann::json& m : j["models"]) {
      if (text(m, "repo").empty()) return "a model of the hub list has no repo";
      models.push_back({text(m, "repo"), text(m, "note"), text(m, "detail")});
    }
    attnviz::viz::ModelView& mv = page->app.model_view;
    mv.hub_models = std::move(models);
    mv.hub_endpoint = text(j, "endpoint");
    wake();
    return std::string();
  });
}

// Whether `name`, "ORG/NAME@REV", is a Hugging Face model name the page may fetch: "" or why not, in one
// line. The engine's check (parse_hub_name), the one the CLI and the app apply to --model and --download.
EMSCRIPTEN_KEEPALIVE const char* attnviz_check_hub_name(const char* name) {
  return guarded([&]() -> std::string {
    attnviz::HubName parsed;
    return attnviz::parse_hub_name(text_arg(name), parsed).error;
  });
}

// A number of bytes as the page's messages write it (the engine's format_bytes: "12.3 MB"), for the page
// script's own messages. A count that is not a number or negative is "an unknown number of bytes"; one past
// what 64 bits hold is the most they hold.
EMSCRIPTEN_KEEPALIVE const char* attnviz_format_bytes(double bytes) {
  return guarded([&]() -> std::string {
    if (!(bytes >= 0)) return "an unknown number of bytes";
    constexpr double kMost = 18446744073709551615.0;  // 2^64 as a double: past the last uint64_t
    const std::uint64_t n =
        bytes >= kMost ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(bytes);
    return attnviz::format_bytes(n);
  });
}

// The whole model's last pass in attnviz-cli --model --json's format (every layer's weights, the top 10, and
// the causal tools' keys where the view's state asks for them); "" when no model is open.
EMSCRIPTEN_KEEPALIVE const char* attnviz_model_json() {
  return guarded([]() -> std::string {
    const attnviz::viz::ModelSession& m = page->app.model;
    if (!m.is_open() || !m.has_result()) return std::string();
    attnviz::GptJsonModel jm;
    jm.seeded = m.choice().kind == attnviz::viz::ModelKind::seeded;
    jm.source = jm.seeded ? m.choice().size : m.choice().path;
    jm.seed = m.choice().seed;
    jm.id_labels = m.ids_only();
    // with the causal tools' keys where they ran (the CLI's --lens, --attribute, --ablate, --patch)
    const std::optional<attnviz::GptJsonLens> lens = m.json_lens();
    return attnviz::gpt_result_to_json(m.result(), m.weights(), jm, m.tokenizer(), nullptr,
                                       lens ? &*lens : nullptr);
  });
}

// The weights file a link names while no model is open, or "". The page asks for it after every change of
// the state (to ask the visitor for that file), so alone: status()'s whole JSON took 4 ms at T = 16. The
// string itself, valid until the state next changes: nothing to allocate, so no failure's text to mistake
// for a file's name.
EMSCRIPTEN_KEEPALIVE const char* attnviz_wanted_file() {
  return page->app.model_view.wanted_file.c_str();
}

// Figures for tests and benchmarks.
EMSCRIPTEN_KEEPALIVE const char* attnviz_status() {
  return guarded([] { return status_json(); });
}

// What the export panel's buttons do: "png" (the view on screen), "heads" (a PNG per head), "json", "csv".
// The files download once written. Returns "" (the outcome is the message, as for the buttons), or why the
// kind is unknown.
EMSCRIPTEN_KEEPALIVE const char* attnviz_export(const char* kind) {
  return guarded([&]() -> std::string {
    using attnviz::viz::ExportKind;
    const std::string k = text_arg(kind);
    wake();
    ExportKind e;
    if (k == "png")
      e = ExportKind::view_png;
    else if (k == "heads")
      e = ExportKind::heads_png;
    else if (k == "json")
      e = ExportKind::json;
    else if (k == "csv")
      e = ExportKind::csv;
    else
      return "unknown export " + attnviz::quote(k) + " (png, heads, json, csv)";
    attnviz::viz::run_export(page->app, e);  // its outcome, a refusal too, is the message
    return std::string();
  });
}

// The compute backend: "auto", "wasm" or "webgpu". Returns "" or why not.
EMSCRIPTEN_KEEPALIVE const char* attnviz_set_backend(const char* name) {
  return guarded([&]() -> std::string {
    const std::optional<Backend> b = parse_backend(text_arg(name));
    wake();
    if (!b) return "unknown backend " + attnviz::quote(text_arg(name)) + " (auto, wasm, webgpu)";
    page->gpu.choose(*b);
    return std::string();
  });
}

// A tensor of the view's result (the chapter-3 layer's, or a model's opened layer), for tests that compare
// backends: "[address, float count]" ([0, 0] when there is no such tensor, or no layer in view). Names:
// inputs q k v scores scaled weights dropped context output.
EMSCRIPTEN_KEEPALIVE const char* attnviz_tensor_json(const char* name) {
  return guarded([&]() -> std::string {
    static const attnviz::Result none;
    const attnviz::Result* shown = attnviz::viz::shown_result(page->app);
    const attnviz::Result& r = shown ? *shown : none;
    const std::string n = text_arg(name);
    // The per-head squares are handed out dense (H, T, T): a whole model's kept ones have padded rows
    // (HeadSquares), so those are copied here, valid until the next call.
    static attnviz::Tensor dense;
    const attnviz::HeadSquares* sq = n == "scores"    ? &r.scores
                                     : n == "scaled"  ? &r.scaled
                                     : n == "weights" ? &r.weights
                                     : n == "dropped" ? &r.dropped
                                                      : nullptr;
    if (sq) dense = sq->to_tensor();
    const attnviz::Tensor* t = sq               ? &dense
                               : n == "inputs"  ? &r.inputs
                               : n == "q"       ? &r.q
                               : n == "k"       ? &r.k
                               : n == "v"       ? &r.v
                               : n == "context" ? &r.context
                               : n == "output"  ? &r.output
                                                : nullptr;
    const bool has = t && !t->empty();
    return "[" + std::to_string(has ? reinterpret_cast<std::uintptr_t>(t->ptr()) : 0) + "," +
           std::to_string(has ? t->size() : 0) + "]";
  });
}

// The WebGPU layer's answers (web/src/gpu.cpp starts them).
EMSCRIPTEN_KEEPALIVE void attnviz_gpu_ready(const char* adapter) {
  guarded_void([&] {
    page->gpu.ready(text_arg(adapter));
    wake();
  });
}
EMSCRIPTEN_KEEPALIVE void attnviz_gpu_unavailable(const char* why) {
  guarded_void([&] {
    page->gpu.unavailable(text_arg(why));
    wake();
  });
}
EMSCRIPTEN_KEEPALIVE void attnviz_gpu_done(int ticket, int ok, const char* error, double ms) {
  guarded_void([&] {
    page->gpu.done(ticket, ok != 0, text_arg(error), ms);
    wake();
  });
}
EMSCRIPTEN_KEEPALIVE void attnviz_gpu_model_done(int ticket, int ok, const char* error, double ms) {
  guarded_void([&] {
    page->gpu.model_done(ticket, ok != 0, text_arg(error), ms);
    wake();
  });
}
// The rows of a weight matrix the WebGPU layer uploads; null when there are none such (or on a failure).
EMSCRIPTEN_KEEPALIVE const float* attnviz_gpu_model_rows(int weights_id, int matrix, int row0, int rows) {
  return guarded_value<const float*>(nullptr,
                                     [&] { return page->gpu.model_rows(weights_id, matrix, row0, rows); });
}

EMSCRIPTEN_KEEPALIVE void attnviz_set_finish(int on) {
  guarded_void([&] { page->finish = on != 0; });
}

// Input arrived: draw the next few frames.
EMSCRIPTEN_KEEPALIVE void attnviz_wake() {
  guarded_void([] {
    ++page->inputs;
    wake();
  });
}

// Draws one frame now, outside the animation-frame loop: the page calls it right after a key reached the
// UI, so the heatmap follows the key without waiting for the next animation frame.
EMSCRIPTEN_KEEPALIVE void attnviz_frame() {
  guarded_void([] {
    wake();
    render_safe();
  });
}

// Computes the text edit left pending while a slow recompute ran (render() asks the page for this task,
// which runs after the keys queued meanwhile): one recompute of the latest text, then a frame.
EMSCRIPTEN_KEEPALIVE void attnviz_compute_pending() {
  guarded_void([] {
    page->compute_due = false;
    if (attnviz::viz::compute_pending(page->app)) attnviz_frame();
  });
}

}  // extern "C"
