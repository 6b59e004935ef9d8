// A whole GPT-2 behind the UI: the model the user chose (the book's seeded chapter-4 GPTModel, or a weights
// file), its tokenizer, and the last pass over the sentence. Every edit recomputes through the engine's
// incremental path (keys and values of the unchanged prefix reused), keeping every layer's attention
// weights for the model view and every stage of one opened layer for the full view. An edit that cannot be
// computed (too many tokens, too little memory) leaves the last good pass on screen and error() says why.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnviz/gpt.hpp"
#include "attnviz/io/gpt_json.hpp"
#include "attnviz/io/model_source.hpp"
#include "attnviz/lens.hpp"
#include "attnviz/viz/head_kinds.hpp"
#include "attnviz/viz/offload_slot.hpp"

namespace attnviz::viz {

// What the Model panel chooses between.
enum class ModelKind {
  layer,   // chapter 3: one attention layer with random weights (the Session's view)
  seeded,  // GPT-2 as the book's chapter-4 GPTModel: torch.manual_seed(seed); GPTModel(size)
  file,    // GPT-2 weights from a .safetensors file or a folder holding one
};
const char* to_string(ModelKind k);  // "layer", "seeded", "file": the URL's and the flags' names
bool parse_model_kind(const std::string& s, ModelKind& out);

struct ModelChoice {
  ModelKind kind = ModelKind::layer;
  std::string size = "gpt2-small";  // seeded: a GPT-2 size preset
  std::uint64_t seed = 123;
  std::string path;       // file: the weights file or folder
  bool train = false;     // dropout in three places (PyTorch's default mode); off: model.eval()
  bool ids_only = false;  // file: open without a tokenizer; the sentence is token ids ("3 17 5")
  bool operator==(const ModelChoice& o) const {
    return kind == o.kind && size == o.size && seed == o.seed && path == o.path && train == o.train &&
           ids_only == o.ids_only;
  }
  bool operator!=(const ModelChoice& o) const { return !(*this == o); }
};

// A backend that computes whole-model passes elsewhere and later (the browser page's WebGPU), as Offload does
// for the chapter-3 Session. The session begins each job (begin_gpt_forward: the kept tensors laid out) and
// hands it over; the host calls ModelSession::deliver with the outcome. One job at a time: edits made
// meanwhile are computed when it lands, and the view shows the last pass until then.
class ModelOffload {
 public:
  virtual ~ModelOffload() = default;
  // Whether this pass should go to the backend: `tokens` in all, of which the engine's incremental path
  // would reuse `reused` rows (the user's choice, the calibration, whether the backend works).
  virtual bool wants(const GptWeights& w, const GptOptions& options, int tokens, int reused) = 0;
  // Starts the job. `r` is begun and stays untouched (and alive) until deliver(ticket): the backend fills
  // its tensors, then the host calls deliver. The backend keeps `w` as long as it needs the weights.
  virtual void start(int ticket, std::shared_ptr<const GptWeights> w, const GptOptions& options,
                     const GptRequest& request, GptResult& r) = 0;
};

// The causal tools on the model view's pass (attnviz/lens.hpp, docs/lens.md): what the user asked for.
struct CausalTools {
  bool lens = false;       // the logit lens strip (layers x positions)
  bool attribute = false;  // each head's, MLP's and the embeddings' share of the target's metric
  LensTarget target;       // position, target and versus (-1: the last position, the top next token, none)
  Ablation ablation;       // heads switched off in the view's pass (and in patching's runs)
  std::string corrupted;   // activation patching's corrupted text; empty: no patching
  bool active() const { return lens || attribute || !ablation.empty() || !corrupted.empty(); }
  bool operator==(const CausalTools& o) const {
    return lens == o.lens && attribute == o.attribute && target.position == o.target.position &&
           target.target == o.target.target && target.versus == o.target.versus &&
           ablation.heads == o.ablation.heads && ablation.kind == o.ablation.kind && corrupted == o.corrupted;
  }
  bool operator!=(const CausalTools& o) const { return !(*this == o); }
};

class ModelSession {
 public:
  Exec exec;
  // When set, asked first for every pass (not shared with a session that share()s this one's model).
  ModelOffload* offload = nullptr;
  // The bytes this process may still take, asked before opening a model and before each pass (a pass about
  // the size of the last one reuses what that one holds). Null: what the machine has free natively
  // (MemAvailable), no limit in WebAssembly; the page answers from its heap.
  std::function<std::uint64_t()> free_memory;

  // Opens the model the choice names (a no-op for `layer`, which closes it). On failure the current model
  // stays and the error is returned (and kept in error()).
  Status open(const ModelChoice& choice);
  void close();
  // Opens what `other` has open on the same weights and tokenizer (shared, not copied), with a pass and
  // cache of its own: compare's second sentence or second layer.
  void share(const ModelSession& other);
  bool shares(const ModelSession& other) const;
  bool is_open() const { return model_ != nullptr; }
  const ModelChoice& choice() const { return choice_; }  // of the open model
  const GptConfig& config() const;
  const Bpe& tokenizer() const;
  // A token's label as the view shows it ("#17" for a model opened without a tokenizer), and whether it was.
  std::string label(int id) const;
  bool ids_only() const;
  const GptWeights& weights() const { return model_->model.weights(); }
  // "gpt2-small, seeded 123: 12 layers x 12 heads, d 768, 163.0 M parameters"
  std::string describe() const;

  // Tokenizes and recomputes. On failure the last good pass stays and error() says why. With an offload
  // that takes the pass, it lands later (deliver); computing() is true until then.
  Status recompute(const std::string& text);
  // The offload's outcome for `ticket`: on success its pass becomes the view; on failure the engine
  // computes it instead and note() says why.
  void deliver(int ticket, Status outcome, double ms);
  bool computing() const { return job_.busy(); }
  // Why the last offloaded pass was computed by the engine instead; empty when it was not.
  const std::string& note() const { return note_; }
  // Appends `steps` greedy tokens (generate_text_simple) to `text` and recomputes; the new pieces' text is
  // appended to `text` as the tokenizer decodes it.
  Status generate(std::string& text, int steps);

  // The layer whose every stage is kept (the opened layer; -1: none). Takes effect at the next recompute.
  void set_detail_layer(int layer);
  int detail_layer() const { return detail_; }

  bool has_result() const { return has_result_; }
  const GptResult& result() const { return result_; }
  // One layer's chapter-3 result (every stage when it is the detail layer); null when the pass has none.
  const Result* layer(int index) const;
  // The whole layer (its q/k steps besides the attention); null when the pass has none.
  const GptLayer* gpt_layer(int index) const;
  // The pieces of the sentence as labels (leading spaces as ·) and their ids.
  const std::vector<std::string>& pieces() const { return pieces_; }
  const std::vector<int>& ids() const { return result_.ids; }
  // What each head does, per layer and head (computed on every pass).
  const std::vector<std::vector<HeadScores>>& kinds() const { return kinds_; }

  const std::string& error() const { return error_; }
  int generation() const { return generation_; }  // bumps whenever result() changes
  double last_ms() const { return last_ms_; }     // text to result, tokenizer included
  double open_ms() const { return open_ms_; }

  // What a pass keeps: the request each recompute makes, and the one its memory check costs.
  GptRequest request() const;

  // The causal tools: taken at the next recompute, which then runs CausalLens on the same model (typing
  // stays incremental). A model in train mode keeps the plain pass and causal_note() says why.
  void set_causal(const CausalTools& tools);
  const CausalTools& causal() const { return causal_; }
  // Whether the pass on screen ran the causal tools, and what they found (target resolved).
  bool has_lens() const { return has_lens_; }
  const LensResult& lens() const { return lens_result_; }
  // Why the causal tools did not run on the last pass (train mode); empty when they did or were not asked.
  const std::string& causal_note() const { return causal_note_; }

  // Activation patching of the typed text by causal().corrupted, in slices over frames. A recompute or a new
  // corrupted text schedules a job; step_patching(now_ms, budget_ms), called once a frame with the frame's
  // clock, begins it once `patch_delay_ms` passed since the first frame that saw the edit (the user stopped
  // typing), then runs its runs (the clean and the corrupted texts, then the patched ones) until `budget_ms`
  // of this call passed (at least one).
  double patch_delay_ms = 400.0;
  void step_patching(double now_ms, double budget_ms);
  void cancel_patching();  // stops the job; the maps keep what it computed
  bool patching_running() const { return patch_running_; }
  bool patching_scheduled() const { return patch_dirty_ || patch_waiting_; }
  // The maps on screen (the job's, NaN where not computed yet), or null; done and total of its runs.
  const Patching* patching() const { return patch_ ? &patch_->result() : nullptr; }
  const PatchJob* patch_job() const { return patch_.get(); }
  // The causal tools' keys for gpt_result_to_json (the CLI's lens, attribution, ablated and patching; the
  // maps only once complete), pointing into this session; nullopt when the pass on screen ran none.
  std::optional<GptJsonLens> json_lens() const;
  // Why the last patching job was refused or stopped (the maps on screen are then an earlier text's).
  const std::string& patch_error() const { return patch_error_; }

 private:
  Status check_memory(const std::vector<int>& ids) const;
  Status run(const std::vector<int>& ids);
  void adopt(double ms_since_request);  // result_ is the new pass: labels, head kinds, generation
  void reset_pass();                    // no pass yet (a new model, or none); a job in flight lands unseen
  void drop_job();                      // a job in flight for a model no longer open lands unseen
  std::unique_ptr<OpenedModel> model_;
  ModelChoice choice_;
  GptResult result_;
  std::vector<std::string> pieces_;
  std::vector<std::vector<HeadScores>> kinds_;
  std::vector<std::vector<HeadSums>> sums_;  // kinds_' running sums, per layer and head
  int detail_ = -1;
  bool has_result_ = false;
  std::string error_;
  int generation_ = 0;
  double last_ms_ = 0.0, open_ms_ = 0.0;
  // The offloaded job, in the slot Session keeps its own in: its pass is filled elsewhere until
  // deliver(ticket).
  OffloadSlot<GptResult> job_;
  GptRequest pending_request_;
  std::vector<std::pair<int, std::unique_ptr<GptResult>>> orphans_;  // jobs of a model closed meanwhile
  long request_ = 0, result_request_ = 0;
  std::string text_;       // the text of the last recompute (an edit made during a job)
  bool cpu_only_ = false;  // recomputing after the offload failed
  std::string note_;
  // The causal tools: asked for, kept between keystrokes, and what the last pass found.
  bool causal_on() const;
  LensRequest lens_request() const;
  CausalTools causal_;
  CausalLens lens_;
  LensResult lens_result_;
  bool has_lens_ = false, ablated_pass_ = false;
  std::string causal_note_;
  // Patching: the job on screen, and the edit that schedules the next (dirty: not seen by a frame yet;
  // waiting: seen at patch_edit_ms_).
  Status begin_patching();
  std::unique_ptr<PatchJob> patch_;
  std::vector<int> patch_clean_;  // the typed text's ids the job patched, and the tools it ran with
  CausalTools patch_tools_;
  // The job before patch_ with its ids and tools, until patch_ has run its clean and corrupted texts: a job
  // refused or cancelled before then gives the screen back to it (the last good maps).
  std::unique_ptr<PatchJob> last_patch_;
  std::vector<int> last_clean_;
  CausalTools last_tools_;
  void restore_last_patch();
  bool patch_running_ = false, patch_dirty_ = false, patch_waiting_ = false;
  double patch_edit_ms_ = 0.0;
  std::string patch_error_;
};

}  // namespace attnviz::viz
