// Calls into the page script (web/page/), which installs its hooks (Module.attnvizHooks) before the module
// runs: the URL, the downloads, the clipboard, the model files and the page's own messages.
#pragma once

#include <string>

namespace attnviz::web::hooks {

std::string initial_state();                  // the link's state, [name, value] pairs as JSON
void state_changed(const std::string& json);  // the URL follows
void first_heatmap();                         // attnviz.ready resolves
void failed(const std::string& why);          // attnviz.ready rejects with it, and the page says it
// Hands the written files to the browser (one download each, or one archive of many); returns what was
// downloaded, for the message.
std::string download(const std::string& paths_json);
void copy(const std::string& text);
void compute_later();  // attnviz_compute_pending, in a task after the keys queued meanwhile
void choose_model_files(bool folder);
void choose_checkpoint();  // the Train panel's continue button: a checkpoint folder, continued
void choose_train_text();  // the Train panel's "Choose a text file...": read and given as a dropped text is
// GPT-2's vocabulary for the Train panel: "" when it is in the module's /gpt2, "fetching" while it is on its
// way (fetched now; a frame is drawn once it is there), else why it did not load
std::string vocabulary();
void open_model(const std::string& choice_json);  // after the page fetched what the model needs
void fetch_hub(const std::string& repo);          // the Model panel's hub list: fetch and open ORG/NAME
// The canvas's box on the page, in CSS pixels.
int canvas_width();
int canvas_height();

}  // namespace attnviz::web::hooks
