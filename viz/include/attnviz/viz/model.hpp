// A whole GPT-2 behind the UI: the model the user chose (the book's seeded chapter-4 GPTModel, or a weights
// file), its tokenizer, and the last pass over the sentence. Every edit recomputes through the engine's
// incremental path (keys and values of the unchanged prefix reused), keeping every layer's attention
// weights for the model view and every stage of one opened layer for the full view. An edit that cannot be
// computed (too many tokens, too little memory) leaves the last good pass on screen and error() says why.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attnviz/gpt.hpp"
#include "attnviz/viz/head_kinds.hpp"
#include "model_source.hpp"

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
  std::string path;    // file: the weights file or folder
  bool train = false;  // dropout in three places (PyTorch's default mode); off: model.eval()
  bool operator==(const ModelChoice& o) const {
    return kind == o.kind && size == o.size && seed == o.seed && path == o.path && train == o.train;
  }
  bool operator!=(const ModelChoice& o) const { return !(*this == o); }
};

class ModelSession {
 public:
  Exec exec;
  // The bytes this process may still take, asked before opening a model and before each pass (a pass may
  // also reuse what the last one holds). Null: what the machine has free natively (MemAvailable), no limit
  // in WebAssembly; the page answers from its heap.
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
  const GptWeights& weights() const { return model_->model.weights(); }
  // "gpt2-small, seeded 123: 12 layers x 12 heads, d 768, 163.0 M parameters"
  std::string describe() const;

  // Tokenizes and recomputes. On failure the last good pass stays and error() says why.
  Status recompute(const std::string& text);
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
  // The pieces of the sentence as labels (leading spaces as ·) and their ids.
  const std::vector<std::string>& pieces() const { return pieces_; }
  const std::vector<int>& ids() const { return result_.ids; }
  // What each head does, per layer and head (computed on every pass).
  const std::vector<std::vector<HeadScores>>& kinds() const { return kinds_; }

  const std::string& error() const { return error_; }
  int generation() const { return generation_; }  // bumps whenever result() changes
  double last_ms() const { return last_ms_; }     // text to result, tokenizer included
  double open_ms() const { return open_ms_; }

 private:
  Status run(const std::vector<int>& ids);
  void reset_pass();  // no pass yet (a new model, or none)
  std::unique_ptr<OpenedModel> model_;
  ModelChoice choice_;
  GptResult result_;
  std::vector<std::string> pieces_;
  std::vector<std::vector<HeadScores>> kinds_;
  int detail_ = -1;
  bool has_result_ = false;
  std::string error_;
  int generation_ = 0;
  double last_ms_ = 0.0, open_ms_ = 0.0;
};

}  // namespace attnviz::viz
