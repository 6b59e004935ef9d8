// The page's one App and what its three parts share: the main loop (main.cpp), the functions the page
// script calls (api.cpp) and the calls into the page script (hooks.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "attnviz/status.hpp"
#include "attnviz/viz/app.hpp"
#include "gpu.hpp"
#include "window.hpp"

namespace attnviz::web {

struct Page {
  viz::App app;
  GpuOffload gpu{app.session, app.model};
  Window window;
  std::string state;          // the last state handed to the page (JSON pairs), to notice changes
  int drawn_generation = -1;  // the session generation the last frame showed
  double drawn_at = 0.0;      // when that frame ended (performance.now() time base)
  double first_heatmap_at = 0.0;
  long frames = 0;
  // The page script's wakes (attnviz_wake: each input event, and the script's own wakes once a fetch or a
  // file read is done), and how many of them the last frame began after. A frame that began after an event
  // reached the page has inputs_drawn at least the count read once it had.
  long inputs = 0;
  long inputs_drawn = 0;
  // Frames still to draw. The page draws only when something happened (input, a resize, a change through
  // the API) and for a few frames after: an idle page costs nothing, and a browser that is not busy
  // drawing delivers the next key at once (in headless Chromium a page drawing 60 frames a second gets its
  // key events about 15 ms late).
  int frames_due = 5;
  bool finish = false;       // glFinish at the end of each frame (benchmarks: the frame's GPU work counted)
  std::string paste;         // pasted text on its way into the box that has the keyboard
  bool compute_due = false;  // a pending text edit's recompute is scheduled (App::text_pending)
};
extern Page* page;  // made first thing in main(), lives as long as the page

// The main loop (main.cpp).
void wake();              // input arrived: draw the next few frames
void render_safe();       // one frame now; an exception closes the frame before it goes on
void draw_now();          // an API call's change on screen at once, the sentence box given the keyboard back
void release_keyboard();  // a change from outside wins over a text box the user is editing
// What the view shows, as one number that changes with it: the session's generation, or the model's.
int view_generation(const viz::App& app);

// The state as the page's link and API hand it over (state.cpp).
std::string state_json(const viz::App& app);  // [name, value] pairs, defaults left out
nlohmann::json choice_json(const viz::ModelChoice& c);
// How a state from a link or setState went: refused (nothing changed), or applied (the view is the state,
// or the last good view with the reason when the state cannot be computed).
struct Applied {
  Status status = Status::ok();
  bool refused = false;
};
Applied apply_state_json(const char* json, viz::App& app);

}  // namespace attnviz::web
