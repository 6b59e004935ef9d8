// The arithmetic behind one cell of one head's matrix, for the hover tooltip and the locked-cell breakdown.
#pragma once

#include <string>
#include <vector>

#include "attnviz/engine.hpp"
#include "attnviz/viz/stages.hpp"

namespace attnviz::viz {

struct CellExplain {
  bool valid = false;
  std::string row_token, col_token;  // col_token is "dim d" for feature columns
  float value = 0.0f;
  bool masked = false, dropped = false;
  // Attention-matrix stages: score_ij = q_i . k_j, term by term over the head dimension.
  std::vector<float> q, k, terms;  // q_i, k_j (x_i, x_j for `simplified`) and their products
  double dot = 0.0;                // sum of terms, accumulated in double
  float scale = 1.0f;
  float scaled = 0.0f;      // dot * scale (-inf when masked)
  float row_max = 0.0f;     // the softmax's max over the row's unmasked scaled scores
  double normalizer = 0.0;  // Z = sum over the row's unmasked cells of exp(scaled - row_max)
  float weight = 0.0f;      // exp(scaled - row_max) / Z
  float keep_scale = 1.0f;  // 1 / (1 - p) for kept cells when dropout applies
  std::string text;         // the whole explanation, one step a line
};

CellExplain explain(const Result& r, StageId s, int head, int row, int col);

}  // namespace attnviz::viz
