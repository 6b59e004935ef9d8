// The pipeline stages the UI can show, and a small descriptor that reads one head's matrix of a stage out of
// an engine Result without copying it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attnviz/engine.hpp"

namespace attnviz::viz {

enum class StageId {
  inputs,   // x: (T, d_in), shared by every head
  queries,  // q = x W_q: (T, hd) per head
  keys,
  values,
  scores,   // q k^T: (T, T) per head
  scaled,   // q k^T / sqrt(d_k), before the mask
  masked,   // the scaled scores with -inf above the diagonal
  weights,  // softmax over each row
  dropped,  // after dropout: dropped cells 0, kept ones x 1/(1-p)
  context,  // weights v: (T, hd) per head
  output,   // the module's output: (T, d_out), after out_proj for mha
};

const std::vector<StageId>& all_stages();
const char* to_string(StageId s);  // command-line and export name, e.g. "weights"
bool parse_stage(const std::string& s, StageId& out);

struct StageInfo {
  const char* title;    // button text, e.g. "softmax"
  std::string formula;  // e.g. "softmax(q k^T / sqrt(2))"
  std::string shape;    // the tensor's shape in the book's notation, e.g. "(b, H, T, T) = (1, 2, 6, 6)"
  bool available = true;
  std::string why_not;   // when not available: what this variant does instead
  bool per_head = true;  // false: one matrix shared by (or merged from) every head
  bool square = true;    // a (T, T) attention matrix with tokens on both axes
};
StageInfo stage_info(const Result& r, StageId s);
// Whether the scores are scaled by 1 / sqrt(head_dim) as chapter 3 does (Gemma 3's query_pre_attn_scalar
// gives another scale, which the formulas then name).
bool standard_scale(const Result& r);

// One head's matrix of a stage: element (i, j) is data[i * row_stride + j] * multiplier.
struct MatrixDesc {
  const float* data = nullptr;
  int rows = 0, cols = 0;
  std::ptrdiff_t row_stride = 0;
  float multiplier = 1.0f;
  bool square = true;   // columns are tokens (else feature dimensions)
  bool causal = false;  // cells above the diagonal are masked
  int window = 0;  // with causal: a sliding-window layer's cells j <= i - window are masked too (0: none)
  const std::uint8_t* keep = nullptr;  // dropout keep mask (rows x cols), when this stage shows dropout
  std::shared_ptr<const std::vector<float>> owned;  // storage of computed matrices (aggregates, differences)

  float at(int i, int j) const { return data[static_cast<std::ptrdiff_t>(i) * row_stride + j] * multiplier; }
  bool masked(int i, int j) const { return causal && (j > i || (window > 0 && j <= i - window)); }
  // Row i's cells that masked() leaves, [from, to): one run, so that loops over a row need no test a cell.
  struct Run {
    int from, to;
  };
  Run unmasked(int i) const {
    const int to = causal ? std::clamp(i + 1, 0, cols) : cols;
    return {causal && window > 0 ? std::clamp(i - window + 1, 0, to) : 0, to};
  }
  bool dropped(int i, int j) const {
    return keep && !masked(i, j) &&
           keep[static_cast<std::size_t>(i) * static_cast<std::size_t>(cols) + j] == 0;
  }
  bool empty() const { return rows == 0 || cols == 0; }
};

// The shape strip: every tensor of the pipeline in order, as in the book's diagrams.
struct ShapeStep {
  StageId stage;      // the stage that shows this tensor
  std::string label;  // e.g. "q k^T"
  std::string shape;  // e.g. "(1, 2, 6, 6)"
  int qk_step = -1;   // a rotary layer's q and k at this QkStep (its int value); -1 for every other tensor
};
std::vector<ShapeStep> shape_strip(const Result& r);

// How many matrices the stage has (heads, or 1 for a stage shared or merged).
int stage_heads(const Result& r, StageId s);

// Head `head`'s matrix (an empty descriptor when the stage is not available or the result did not keep it).
MatrixDesc stage_matrix(const Result& r, StageId s, int head);

// Mean or max over a subset of heads (all heads when `heads` is empty), of a per-head stage.
enum class Aggregate { none, mean, max };
const char* to_string(Aggregate a);
MatrixDesc aggregate(const Result& r, StageId s, Aggregate how, const std::vector<int>& heads);
// The same over matrices already picked (all of one shape); the first one for none.
MatrixDesc aggregate(const std::vector<MatrixDesc>& picked, Aggregate how);

// What a whole model's layer with rotary positions adds to its chapter-3 Result: q and k at each step before
// the product (GptLayer::q_proj, k_proj, q_normed, k_normed, borrowed), while Result::q and k hold them
// rotated, k laid out per query head. Empty (the default) for GPT-2's layers and chapter 3, whose views stay
// as they are. attnviz/viz/arch.hpp fills it from a GptLayer.
struct LayerSteps {
  bool rotary = false;
  int kv_heads = 0;  // k_proj and k_normed are (T, kv_heads hd): query head h reads h / (heads / kv_heads)
  const Tensor* q_proj = nullptr;
  const Tensor* k_proj = nullptr;
  const Tensor* q_normed = nullptr;  // null without q/k norms
  const Tensor* k_normed = nullptr;
  std::string norm;  // the q/k norm, e.g. "RMSNorm over each head's 16 dims, scale (1 + w)"
  std::string rope;  // the rotation, e.g. "RoPE theta 10000 on all 16 dims"
  bool any() const { return rotary && q_proj && !q_proj->empty() && k_proj && !k_proj->empty(); }
};

// The steps q and k go through before q k^T: as projected, after the q/k norms, after the rotation (what the
// scores use: Result::q and k).
enum class QkStep { projected, normed, rotated };
const char* to_string(QkStep s);  // "projected", "normed", "rotated"
// The steps a layer has, in order: none without LayerSteps::any(); normed only with q/k norms.
std::vector<QkStep> qk_steps(const LayerSteps& l);
// The queries or keys stage at one step: its title, formula (the norm and the rotation named) and shape.
// Other stages, or a step the layer lacks: stage_info(r, s).
StageInfo qk_step_info(const Result& r, const LayerSteps& l, StageId s, QkStep step);
// Query head `head`'s q (queries) or the key/value head it reads (keys) at that step; stage_matrix(r, s,
// head) for rotated, another stage or a step the layer lacks.
MatrixDesc qk_step_matrix(const Result& r, const LayerSteps& l, StageId s, QkStep step, int head);

// A rotary layer's strip: q from x W_q, k and v from x W_k, x W_v at their own width (grouped key/value
// heads), the q/k norms, the rotation and, with grouped heads, k and v repeated per query head.
std::vector<ShapeStep> shape_strip(const Result& r, const LayerSteps& l);

// a - b over the rows and columns both have (for compare mode).
MatrixDesc difference(const MatrixDesc& a, const MatrixDesc& b);

// A copy small enough for a thumbnail texture: `m` itself when rows and cols are both <= max_side; otherwise
// ceil(rows / f) x ceil(cols / f) cells with f = ceil(max(rows, cols) / max_side), each the mean of its f x f
// block's source cells that are in range, not masked (m.masked) and finite. A cell with no such source
// cell is NaN, which colorize() draws in the masked colour: the result is not causal and has no keep mask
// (dropped cells count with their value, 0). Cells outside a sliding window count as masked. max_side < 1
// counts as 1.
MatrixDesc thumbnail(const MatrixDesc& m, int max_side);

}  // namespace attnviz::viz
