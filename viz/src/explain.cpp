#include "attnviz/viz/explain.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace attnviz::viz {
namespace {

std::string fmt(const char* f, double a, double b = 0.0, double c = 0.0, double d = 0.0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c, d);
  return buf;
}

// Row `i` of head `h`'s queries (or keys), as the fast engine stored them; the inputs for `simplified`.
std::vector<float> head_row(const Result& r, const Tensor& t, int h, int i) {
  const int hd = r.shape.head_dim;
  const Tensor& src = r.shape.has_weights ? t : r.inputs;
  std::vector<float> v(static_cast<std::size_t>(hd));
  for (int d = 0; d < hd; ++d) v[static_cast<std::size_t>(d)] = src.at(i, h * hd + d);
  return v;
}

}  // namespace

CellExplain explain(const Result& r, StageId s, int head, int row, int col) {
  CellExplain e;
  const MatrixDesc m = stage_matrix(r, s, head);
  if (m.empty() || row < 0 || col < 0 || row >= m.rows || col >= m.cols) return e;
  e.valid = true;
  e.row_token = r.tokens[static_cast<std::size_t>(row)];
  e.col_token = m.square ? r.tokens[static_cast<std::size_t>(col)] : "dim " + std::to_string(col);
  e.value = m.at(row, col);
  e.masked = r.masked(row, col) && m.square && s != StageId::scores && s != StageId::scaled;
  e.dropped = m.dropped(row, col);
  const std::string where =
      "row " + std::to_string(row) + " '" + e.row_token + "', " +
      (m.square ? "column " + std::to_string(col) + " '" + e.col_token + "'" : e.col_token);
  e.text = where + "\n";
  if (!m.square) {
    // The keys a row sees: every one, the causal prefix, or the last `window` of it.
    int seen = r.shape.causal ? row + 1 : r.tokens_count();
    if (r.shape.causal && r.shape.window > 0) seen = std::min(seen, r.shape.window);
    e.text += s == StageId::context
                  ? fmt("context = sum over %g tokens of weight[i, t] x v[t, d] = %.6g\n", seen, e.value)
                  : fmt("value %.6g\n", e.value);
    return e;
  }

  // score = q_i . k_j, term by term
  e.q = head_row(r, r.q, head, row);  // a square stage is per head, and stage_matrix checked `head`
  e.k = head_row(r, r.k, head, col);
  const char* qn = r.shape.has_weights ? "q" : "x";
  const char* kn = r.shape.has_weights ? "k" : "x";
  for (std::size_t d = 0; d < e.q.size(); ++d) {
    e.terms.push_back(e.q[d] * e.k[d]);
    e.dot += static_cast<double>(e.q[d]) * e.k[d];
  }
  e.scale = r.shape.scale;
  e.text += std::string(qn) + "_i . " + kn + "_j = " + fmt("%.6g", e.dot) +
            fmt(" (sum of %g products)\n", static_cast<double>(e.terms.size()));
  if (r.shape.has_weights && standard_scale(r))
    e.text += fmt("x 1/sqrt(%g) = x %.6g -> %.6g\n", r.shape.head_dim, e.scale, e.dot * e.scale);
  else if (r.shape.has_weights)  // the model's own scale (Gemma 3's query_pre_attn_scalar)
    e.text += fmt("x %.6g (1/sqrt(%.6g), the model's scale) -> %.6g\n", e.scale,
                  1.0 / (static_cast<double>(e.scale) * e.scale), e.dot * e.scale);

  // the softmax over the row, from the kept raw scores when the run has them
  const int T = r.tokens_count();
  const float* raw = r.scores.empty() ? nullptr : r.scores.row(head, row);
  e.scaled = r.masked(row, col) ? -std::numeric_limits<float>::infinity()
                                : (raw ? raw[col] : static_cast<float>(e.dot)) * e.scale;
  if (r.masked(row, col))
    e.text += col > row
                  ? std::string("masked: column after the row's token -> -inf, weight 0\n")
                  : fmt("masked: outside the sliding window of %g keys -> -inf, weight 0\n", r.shape.window);
  if (raw) {
    e.row_max = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < T; ++j)
      if (!r.masked(row, j)) e.row_max = std::fmax(e.row_max, raw[j] * e.scale);
    for (int j = 0; j < T; ++j)
      if (!r.masked(row, j)) e.normalizer += std::exp(static_cast<double>(raw[j] * e.scale - e.row_max));
    if (!r.masked(row, col)) {
      e.weight = static_cast<float>(std::exp(static_cast<double>(e.scaled - e.row_max)) / e.normalizer);
      e.text += fmt("softmax: exp(%.6g - %.6g) / %.6g = %.6g\n", e.scaled, e.row_max, e.normalizer, e.weight);
    }
  } else {
    e.weight = r.weights.at(head, row, col);
  }
  if (r.shape.dropout && !r.keep.empty() && !r.masked(row, col)) {
    e.keep_scale = dropout_scale(r.config.dropout);
    e.text += e.dropped ? std::string("dropout: dropped -> 0\n")
                        : fmt("dropout: kept, x 1/(1 - %g) = x %.6g -> %.6g\n", r.config.dropout,
                              e.keep_scale, e.weight * e.keep_scale);
  }
  e.text += fmt("shown value: %.6g", e.value);
  return e;
}

}  // namespace attnviz::viz
