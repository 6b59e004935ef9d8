// The attnviz UI: one draw_frame(App&) shared by the desktop app and the browser page. The host owns the
// window, the ImGui backends and the GL textures (through TextureHost); everything else lives here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attnviz/viz/colorize.hpp"
#include "attnviz/viz/model.hpp"
#include "attnviz/viz/session.hpp"
#include "attnviz/viz/stages.hpp"
#include "attnviz/viz/train.hpp"

namespace attnviz::viz {

// Textures for the heatmaps. `slot` names one heatmap; upload creates or replaces its texels and returns what
// ImGui draws (an ImTextureID).
class TextureHost {
 public:
  virtual ~TextureHost() = default;
  virtual void* upload(int slot, int width, int height, const std::uint32_t* rgba) = 0;
};

struct Cell {
  bool active = false;
  int head = 0, row = 0, col = 0;  // head is the heatmap's slot: a head index, or kAggregateSlot..
  bool operator==(const Cell& o) const {
    return active == o.active && head == o.head && row == o.row && col == o.col;
  }
};

// Heatmap slots other than head indices.
constexpr int kAggregateSlot = 1000;
constexpr int kCompareSlot = 2000;  // + 0 (A), 1 (B), 2 (A - B)

struct ViewState {
  StageId stage = StageId::weights;
  QkStep qk_step = QkStep::rotated;  // the queries and keys stages of a rotary layer: which step they show
  int enlarged = -1;                 // the head shown alone; -1 shows the grid of every head
  Aggregate aggregate = Aggregate::none;
  std::vector<int> subset;  // heads the aggregate covers; empty: all
  ColorOptions color;
  bool show_values = true;     // print values in cells big enough to hold them
  float zoom = 1.0f;           // >= 1; shared by every heatmap so heads stay aligned
  float x0 = 0.0f, y0 = 0.0f;  // the top-left visible cell (column, row) when zoomed
  Cell hover, locked;
};

enum class CompareMode { off, text, seed, mask, layer };  // layer: a second layer of the same model
const char* to_string(CompareMode m);

struct CompareState {
  CompareMode mode = CompareMode::off;
  std::string text = "Your journey ends with one step";
  std::uint64_t seed = 456;
  int layer = 0;  // layer B of a whole model
  Session b;
  int synced = -1;  // session A's generation that b was computed against
  // A whole model's B: the same weights (second sentence, second layer) or another seed's.
  ModelSession model_b;
  std::string model_synced;  // what model_b was last computed for
};

// Where each heatmap landed on screen in the last frame (tests drive the mouse with it).
struct HeatmapRect {
  int slot = 0;
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // the visible part on screen
  float origin_x = 0, origin_y = 0;      // where cell (0, 0) would be (off screen when panned)
  float cell = 0;                        // cell size in pixels (cells are square)
  int rows = 0, cols = 0;
  // The screen position of the centre of cell (row, col).
  float cx(int col) const { return origin_x + (static_cast<float>(col) + 0.5f) * cell; }
  float cy(int row) const { return origin_y + (static_cast<float>(row) + 0.5f) * cell; }
};

struct ViewCache;  // the heatmaps of the current view, derived matrices included (UI-internal)

enum class ExportKind { view_png, heads_png, json, csv };

// Thumbnails of the model view: slot kThumbSlot + layer * kThumbStride + head.
constexpr int kThumbSlot = 10000;
constexpr int kThumbStride = 64;
// The hovered thumbnail's large preview.
constexpr int kPreviewSlot = 3000;

// The model view's own state (the whole GPT-2: a grid of layers by heads, one layer opened in the full view).
struct ModelView {
  ModelChoice choice;                // what the Model panel shows; "open" makes it the session's
  int layer = -1;                    // the layer in the full view; -1: the grid of every layer and head
  HeadKind filter = HeadKind::none;  // show only heads of this kind (none: every head)
  int thumb_px = 0;                  // thumbnail side in the last frame (for tests)
  int hovered_layer = -1, hovered_head = -1;
  int generate_steps = 10;  // tokens the Generate button appends
  int generating = 0;       // tokens still to append, one per frame
  // A file the link names but the host does not hold (the page asks the visitor for it).
  std::string wanted_file;
  std::string open_error;  // why the last Open failed (the view kept the model it had)
  // Where a link's "file:NAME" is looked for (the page's folder of chosen files; "": the working folder).
  std::string files_dir;
  // The host's file chooser (the page's file picker: files, or a whole folder); null: a path field.
  std::function<void(bool folder)> choose_file;
  // The host opens models itself (the page first fetches the vocabulary and shows progress, then calls
  // open_model); null: the Open button calls open_model.
  std::function<void(const ModelChoice&)> open_request;
  // Models the host can fetch from the Hugging Face hub (the page), listed in the Model panel: the repository
  // ("Qwen/Qwen3-0.6B"), a note (its size) and what it is (the tooltip); a click asks the host to fetch it
  // (fetch_hub). Empty or null: no list. hub_endpoint is shown when it is not the hub (a mirror, a test
  // server).
  struct HubModel {
    std::string repo, note, detail;
    float x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // where its row landed in the last frame (tests click it)
  };
  std::vector<HubModel> hub_models;
  std::string hub_endpoint;
  std::function<void(const std::string& repo)> fetch_hub;
  // Where each thumbnail landed in the last frame (tests drive the mouse with it).
  struct Thumb {
    int layer, head;
    float x0, y0, x1, y1;
  };
  std::vector<Thumb> thumbs;
  // The attention-sink column beside the grid in the last frame: per layer, the mean of its heads'
  // first-token scores and where its bar landed.
  struct Sink {
    int layer;
    float value;
    float x0, y0, x1, y1;
  };
  std::vector<Sink> sinks;
  bool header_two_lines = false;  // the grid's head labels did not fit one line (for tests)

  // The causal tools the panel asks for (the model session takes them at the next frame, or at start):
  // the lens strip, the grid coloured by attribution, target / versus / position, ablated heads and the
  // corrupted text of activation patching (docs/app.md, "The causal tools").
  CausalTools causal;
  // Patching's slice of a frame (the page has one thread: patched runs stop once this much has passed).
  double patch_budget_ms = 10.0;
  // Where the causal views' cells landed in the last frame (tests click them): kind "lens" (a = the point,
  // 0 the embeddings, b = the position), "column" (the lens strip's header, b = the position), "mlp"
  // (a = the layer), "embeddings", "final_bias", "residual" (a = layer, b = position), "heads" (a = layer,
  // b = head), "next" (a = the token id).
  struct CausalCell {
    std::string kind;
    int a, b;
    float x0, y0, x1, y1;
  };
  std::vector<CausalCell> causal_cells;
};

// Training slots: kTrainSlot + layer * kThumbStride + head.
constexpr int kTrainSlot = 20000;

// The Train panel's state: the settings the next Reset uses, the session, and what the training view shows.
struct TrainView {
  TrainSettings settings = recipe_settings(TrainRecipe::induction);
  std::shared_ptr<TrainSession> session;  // null until the first Reset or Start
  bool running = false;                   // steps run between frames
  bool show = false;                      // the main area shows the training view
  int snapshot = -1;                      // the step slider's snapshot (-1: follow the latest)
  // training time per frame: pieces of steps that fit it, at least one. 35 ms: the pieces now take at most 14
  // ms on one thread, so a frame still holds two or more, and a piece that runs past its last time by up to
  // 15 ms (the threaded page's jitter) keeps the slice within 50 ms (docs/training.md, "The Train panel")
  double budget_ms = 35.0;
  std::string text_path;  // book and custom: a text file (empty: the sentence box's text)
  // book and custom: a text dropped onto the window or the page (choose_train_text), checked; used before
  // text_path and the sentence box until forgotten (text_name empty)
  std::string text_name, text;
  std::uint64_t text_size = 0;
  // Continue from checkpoint: the folder (empty: Save model's, export_dir/trained-model)
  std::string continue_path;
  // Set by a host whose folders are not paths (the browser page): the panel's continue button asks it for a
  // folder (it copies the folder in and calls continue_training), and the path field is not drawn.
  std::function<void()> choose_checkpoint;
  // Set by a host whose files are not paths (the browser page): the panel's "Choose a text file..." asks it
  // for the text recipes' text (it reads the file and calls choose_train_text, as for a drop), and the text
  // file field is not drawn.
  std::function<void()> choose_text;
  // Set by a host that fetches GPT-2's vocabulary only when it is needed (the browser page), asked before a
  // text recipe's Reset with no model open: true when it is there; false while it is on its way (the control
  // pressed waits, and goes on the first frame it is there) or, with `why`, when it cannot be had.
  std::function<bool(std::string& why)> vocabulary_ready;
  std::string waiting;  // the control ("start", "step", "reset") waiting for the vocabulary
  std::string error;    // why the last action failed
  int resets = 0;       // bumps on every Reset (texture keys)
  // The last frame's rectangles of the panel's controls in screen pixels ("header", "start" (Start or
  // Pause), "step", "reset", "open", "save", "csv", "png", "continue", "text", "recipe" and its items
  // "recipe:induction", "recipe:book", "recipe:custom" while open, "slider", "latest"), for tests that
  // click them; visible: wholly inside its scrolled window.
  struct Control {
    std::string name;
    float x0, y0, x1, y1;
    bool visible;
    bool hovered;  // the pointer was over it in that frame (a test presses only then)
  };
  std::vector<Control> controls;
  int controls_frame = -1;  // the ImGui frame they are from
};

struct App {
  Session session;
  ModelSession model;  // open: the view shows this GPT-2 (and the sentence is its input)
  ModelView model_view;
  TrainView train;
  ViewState view;
  CompareState compare;
  std::string export_dir = "attnviz-export";
  std::string message;  // the last export's outcome
  // Files the exports wrote, for a host that hands them on (the browser page downloads them, then clears
  // this). With `downloads` set the export panel has no folder to choose: the files go to the user.
  std::vector<std::string> written;
  bool downloads = false;
  // Asked before an export writes anything (the page counts a JSON against its memory); a refusal is the
  // export's message. Null: every export goes ahead.
  std::function<Status(ExportKind)> admit_export;
  double frame_ms = 0.0;   // set by the host: the previous frame's CPU time
  bool focus_text = true;  // give the sentence box the keyboard on the next frame (so typing starts at once)
  // The host's own section of the controls (the browser page's compute backend), drawn after the
  // configuration; null for none.
  std::function<void()> host_controls;
  std::vector<HeatmapRect> layout;
  // Why the heatmaps are not drawn this frame (too many heads for the area); empty when they are.
  std::string view_note;
  // Keystrokes that arrive while a slow recompute runs: a host that sets coalesce_ms (> 0) has a text edit
  // whose last recompute took longer than that only marked pending here, and calls compute_pending once the
  // keys queued meanwhile have reached the box, so they make one recompute of the latest text.
  double coalesce_ms = 0.0;
  bool text_pending = false;
  // A request for a PNG of the heatmap area, served by the host after rendering (it holds the pixels).
  struct Capture {
    bool pending = false;
    std::string path;
    float x = 0, y = 0, w = 0, h = 0;
  } capture;

  // Texture bookkeeping: the state each slot's texels were made from.
  struct TextureEntry {
    int slot;
    std::string key;
    void* id;
  };
  std::vector<TextureEntry> textures;
  std::string range_key;
  Range shared_range;
  int uploads = 0;  // textures (re)made, for tests and the benchmark
  // Aggregates and differences are computed once per change, not once per frame.
  std::shared_ptr<ViewCache> view_cache;
};

// Computes the first view (the book's sentence with the book preset, unless the app was configured
// otherwise).
Status start(App& app);

// Opens the model the choice names (kind layer: back to chapter 3) and computes the sentence with it. On
// failure the current model and view stay and the error is returned (and shown in the Model panel).
Status open_model(App& app, const ModelChoice& choice);

// Whether the view shows a whole model (a model is open), and the chapter-3 result the heatmaps show: the
// Session's, or the opened layer's (null in the model grid).
bool model_mode(const App& app);
const Result* shown_result(const App& app);
// Which compare modes the view has (a whole model: a second sentence, layer, or seed of a seeded model; the
// chapter-3 layer: sentence, seed, mask), and why not.
bool compare_available(const App& app, CompareMode m);
const char* why_not_compare(const App& app, CompareMode m);

// Compare's B as the heatmaps show it (the second session's result, or a layer of the model's B); null when
// compare is off or B has nothing to show.
const Result* compare_result(const App& app);

// Recomputes the text edits marked pending (see App::coalesce_ms); false when none were.
bool compute_pending(App& app);

// Draws the whole UI for this frame (between ImGui::NewFrame and ImGui::Render).
void draw_frame(App& app, TextureHost& textures);

// The export panel's buttons: a PNG of the view on screen (served by the host after rendering), a PNG per
// head of the current stage, the result as JSON (the CLI's format), the stage as CSV per head. Files go to
// app.export_dir and are listed in app.written; the outcome is in app.message.
void run_export(App& app, ExportKind kind);

// The Train panel's Reset: a new session from app.train.settings (book and custom: the sentence box's text,
// or app.train.text_path's). On failure the current session stays and the error is returned.
Status reset_training(App& app);

// The Train panel's buttons: Save model (a checkpoint folder in the export folder), Loss CSV, Plots PNG (the
// training view as on screen, written by the host after rendering, as the view's PNG is), Open in model view.
// The outcome is app.message, or app.train.error.
enum class TrainAction { save, csv, png, open };
void train_action(App& app, TrainAction a);

// The Train panel's Continue from checkpoint: a session that goes on with the run a checkpoint folder holds
// (TrainSession::continue_from; a book run with the text Reset would use), paused, its settings becoming the
// panel's. On a refusal (no run state, another text, a bad file) the current session stays and the one-line
// reason is returned (and shown in the panel).
Status continue_training(App& app, const std::string& dir);

// Makes a text from outside (the file `name`, `size` bytes; check_train_text) the book recipe's text and
// resets training on it, paused; the induction recipe gives way to the book's. On any refusal (not UTF-8,
// empty, too large, too short for a batch of windows) the last good text and session stay, and the one-line
// reason is returned (and shown in the panel).
Status choose_train_text(App& app, const std::string& name, std::uint64_t size, std::string bytes);

// Paths dropped onto the window: a folder, or files among which a .safetensors, open in the model view as the
// Model panel's Open does; one other file is the book recipe's text (choose_train_text). The outcome is
// app.message, or the Model or Train panel's error.
void drop_files(App& app, const std::vector<std::string>& paths);
// Whether a dropped file's name is one of a model's (weights, tokenizer or config), not a text to train on.
bool is_model_file_name(const std::string& name);

// Finds the heatmap and cell under a screen point, from the last frame's layout.
Cell cell_at(const App& app, float x, float y);

}  // namespace attnviz::viz
