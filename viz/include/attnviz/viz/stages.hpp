// The pipeline stages the UI can show, and a small descriptor that reads one head's matrix of a stage out of
// an engine Result without copying it.
#pragma once

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

// One head's matrix of a stage: element (i, j) is data[i * row_stride + j] * multiplier.
struct MatrixDesc {
  const float* data = nullptr;
  int rows = 0, cols = 0;
  std::ptrdiff_t row_stride = 0;
  float multiplier = 1.0f;
  bool square = true;                  // columns are tokens (else feature dimensions)
  bool causal = false;                 // cells above the diagonal are masked
  const std::uint8_t* keep = nullptr;  // dropout keep mask (rows x cols), when this stage shows dropout
  std::shared_ptr<const std::vector<float>> owned;  // storage of computed matrices (aggregates, differences)

  float at(int i, int j) const { return data[static_cast<std::ptrdiff_t>(i) * row_stride + j] * multiplier; }
  bool masked(int i, int j) const { return causal && j > i; }
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

// a - b over the rows and columns both have (for compare mode).
MatrixDesc difference(const MatrixDesc& a, const MatrixDesc& b);

// A copy small enough for a thumbnail texture: `m` itself when rows and cols are both <= max_side; otherwise
// ceil(rows / f) x ceil(cols / f) cells with f = ceil(max(rows, cols) / max_side), each the mean of its f x f
// block's source cells that are in range, not masked (causal j > i) and finite. A cell with no such source
// cell is NaN, which colorize() draws in the masked colour: the result is not causal and has no keep mask
// (dropped cells count with their value, 0). max_side < 1 counts as 1.
MatrixDesc thumbnail(const MatrixDesc& m, int max_side);

}  // namespace attnviz::viz
