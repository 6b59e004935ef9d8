#include "attnviz/viz/stages.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "attnviz/enum_names.hpp"

namespace attnviz::viz {
namespace {

std::string dims(std::initializer_list<int> d) {
  std::string s = "(";
  bool first = true;
  for (int x : d) {
    if (!first) s += ", ";
    s += std::to_string(x);
    first = false;
  }
  return s + ")";
}

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// Columns [h * hd, (h + 1) * hd) of a (T, width) tensor.
MatrixDesc head_columns(const Tensor& t, int head, int hd) {
  MatrixDesc m;
  if (t.empty()) return m;
  m.data = t.ptr() + static_cast<std::ptrdiff_t>(head) * hd;
  m.rows = t.shape[0];
  m.cols = hd;
  m.row_stride = t.shape[1];
  m.square = false;
  return m;
}

MatrixDesc whole(const Tensor& t) {
  MatrixDesc m;
  if (t.empty()) return m;
  m.data = t.ptr();
  m.rows = t.shape[0];
  m.cols = t.shape[1];
  m.row_stride = t.shape[1];
  m.square = false;
  return m;
}

MatrixDesc head_square(const Result& r, const HeadSquares& t, int head) {
  MatrixDesc m;
  const int T = r.tokens_count();
  if (t.empty() || head >= t.heads || t.n != T) return m;
  m.data = t.row(head, 0);
  m.rows = m.cols = T;
  m.row_stride = t.stride;
  m.causal = r.shape.causal;
  m.window = r.shape.window;
  return m;
}

StageInfo make_info(const char* title, std::string formula, std::string shape) {
  StageInfo i;
  i.title = title;
  i.formula = std::move(formula);
  i.shape = std::move(shape);
  return i;
}

// "q k^T / sqrt(64)" as chapter 3 scales, else the number used: "q k^T x 0.204124".
std::string scaled_text(const Result& r, const char* scores) {
  return standard_scale(r) ? std::string(scores) + " / sqrt(" + std::to_string(r.shape.head_dim) + ")"
                           : std::string(scores) + " x " + num(r.shape.scale);
}

// What the mask removes: "j > i", and "j <= i - 5" outside a sliding window of 5 keys.
std::string mask_condition(const Shape& sh) {
  return sh.window > 0 ? "j > i or j <= i - " + std::to_string(sh.window) : "j > i";
}

}  // namespace

namespace {

constexpr EnumName<StageId> kStageNames[] = {
    {StageId::inputs, "inputs"},   {StageId::queries, "queries"}, {StageId::keys, "keys"},
    {StageId::values, "values"},   {StageId::scores, "scores"},   {StageId::scaled, "scaled"},
    {StageId::masked, "masked"},   {StageId::weights, "weights"}, {StageId::dropped, "dropped"},
    {StageId::context, "context"}, {StageId::output, "output"},
};

}  // namespace

const std::vector<StageId>& all_stages() {
  static const std::vector<StageId> all = {
      StageId::inputs, StageId::queries, StageId::keys,    StageId::values,  StageId::scores, StageId::scaled,
      StageId::masked, StageId::weights, StageId::dropped, StageId::context, StageId::output};
  return all;
}

const char* to_string(StageId s) {
  return name_in(kStageNames, s);
}

bool parse_stage(const std::string& s, StageId& out) {
  const std::optional<StageId> id = value_in(kStageNames, s);
  if (id) out = *id;
  return id.has_value();
}

bool standard_scale(const Result& r) {
  return !r.shape.has_weights ||
         r.shape.scale == 1.0f / static_cast<float>(std::sqrt(static_cast<double>(r.shape.head_dim)));
}

StageInfo stage_info(const Result& r, StageId s) {
  const Shape& sh = r.shape;
  const Config& c = r.config;
  const int T = r.tokens_count(), H = sh.heads, hd = sh.head_dim;
  const std::string dk = std::to_string(hd);
  StageInfo info;
  switch (s) {
    case StageId::inputs:
      info = make_info("x", "token embeddings", "(b, T, d_in) = " + dims({1, T, c.d_in}));
      info.per_head = info.square = false;
      break;
    case StageId::queries:
    case StageId::keys:
    case StageId::values: {
      const char* name = s == StageId::queries ? "q" : s == StageId::keys ? "k" : "v";
      const char* w = s == StageId::queries ? "W_query" : s == StageId::keys ? "W_key" : "W_value";
      info = make_info(name, std::string(name) + " = x " + w, "(b, H, T, hd) = " + dims({1, H, T, hd}));
      info.square = false;
      if (!sh.has_weights) {
        info.available = false;
        info.why_not = "the simplified variant has no weights: q = k = v = x";
      }
      break;
    }
    case StageId::scores:
      info = make_info("q k^T", sh.has_weights ? "q k^T" : "x x^T", "(b, H, T, T) = " + dims({1, H, T, T}));
      break;
    case StageId::scaled:
      // A model's own scale (Gemma 3: query_pre_attn_scalar^-1/2) is named by its number and its root.
      info = standard_scale(r)
                 ? make_info("/ sqrt(d_k)", "q k^T / sqrt(" + dk + ") = q k^T x " + num(sh.scale),
                             "(b, H, T, T) = " + dims({1, H, T, T}))
                 : make_info("x scale",
                             "q k^T x " + num(sh.scale) + " = q k^T / sqrt(" +
                                 num(1.0 / (static_cast<double>(sh.scale) * sh.scale)) +
                                 "): the model's scale, not 1 / sqrt(" + dk + ")",
                             "(b, H, T, T) = " + dims({1, H, T, T}));
      if (!sh.has_weights) {
        info.available = false;
        info.why_not = "the simplified variant does not scale its scores";
      }
      break;
    case StageId::masked:
      info = make_info(
          "mask",
          "masked_fill(" + mask_condition(sh) + ", -inf)" +
              (sh.window > 0 ? ": causal, within a sliding window of " + std::to_string(sh.window) + " keys"
                             : ""),
          "(b, H, T, T) = " + dims({1, H, T, T}));
      if (!sh.causal) {
        info.available = false;
        info.why_not = is_causal(c.variant) ? "the causal mask is turned off"
                                            : "this variant has no causal mask (causal, wrapper and mha do)";
      }
      break;
    case StageId::weights:
      info = make_info("softmax",
                       sh.has_weights ? (sh.causal ? "softmax(mask(" + scaled_text(r, "q k^T") + "))"
                                                   : "softmax(" + scaled_text(r, "q k^T") + ")")
                                      : "softmax(x x^T)",
                       "(b, H, T, T) = " + dims({1, H, T, T}));
      break;
    case StageId::dropped:
      info = make_info(
          "dropout", "dropout(weights, p = " + num(c.dropout) + "): kept x " + num(dropout_scale(c.dropout)),
          "(b, H, T, T) = " + dims({1, H, T, T}));
      if (!sh.dropout) {
        info.available = false;
        info.why_not = !is_causal(c.variant) ? "this variant has no dropout layer"
                       : !c.train            ? "eval mode: dropout is off"
                                             : "dropout p is 0";
      }
      break;
    case StageId::context:
      info = make_info("context", sh.has_weights ? "weights v" : "weights x",
                       "(b, H, T, hd) = " + dims({1, H, T, hd}));
      info.square = false;
      break;
    case StageId::output:
      info =
          make_info("output", sh.out_proj ? "out_proj(concat heads)" : (H > 1 ? "concat heads" : "context"),
                    "(b, T, d_out) = " + dims({1, T, sh.out_width}));
      info.per_head = info.square = false;
      break;
  }
  if (info.available && (s == StageId::scores || s == StageId::scaled) && r.scores.empty()) {
    info.available = false;
    info.why_not = "not kept by this run";
  }
  if (info.available && s == StageId::masked && r.scaled.empty()) {
    info.available = false;
    info.why_not = "not kept by this run";
  }
  return info;
}

std::vector<ShapeStep> shape_strip(const Result& r) {
  const Shape& sh = r.shape;
  const int T = r.tokens_count(), H = sh.heads, hd = sh.head_dim;
  std::vector<ShapeStep> strip;
  strip.push_back({StageId::inputs, "x", dims({1, T, r.config.d_in})});
  if (sh.has_weights) {
    strip.push_back({StageId::queries, "x W_q, x W_k, x W_v", dims({1, T, sh.width})});
    if (H > 1) strip.push_back({StageId::queries, "split heads", dims({1, H, T, hd})});
  }
  strip.push_back({StageId::scores, sh.has_weights ? "q k^T" : "x x^T", dims({1, H, T, T})});
  if (sh.causal) strip.push_back({StageId::masked, "scale + mask", dims({1, H, T, T})});
  strip.push_back({StageId::weights, "softmax", dims({1, H, T, T})});
  if (sh.dropout) strip.push_back({StageId::dropped, "dropout", dims({1, H, T, T})});
  strip.push_back({StageId::context, "weights v", dims({1, H, T, hd})});
  if (H > 1) strip.push_back({StageId::context, "merge heads", dims({1, T, sh.width})});
  if (sh.out_proj) strip.push_back({StageId::output, "out_proj", dims({1, T, sh.out_width})});
  return strip;
}

std::vector<ShapeStep> shape_strip(const Result& r, const LayerSteps& l) {
  std::vector<ShapeStep> base = shape_strip(r);
  if (!l.any()) return base;
  const int T = r.tokens_count(), H = r.shape.heads, hd = r.shape.head_dim;
  const int KV = l.kv_heads > 0 ? l.kv_heads : H;
  const int projected = static_cast<int>(QkStep::projected), normed = static_cast<int>(QkStep::normed),
            rotated = static_cast<int>(QkStep::rotated);
  std::vector<ShapeStep> strip = {{StageId::inputs, "x", dims({1, T, r.config.d_in})},
                                  {StageId::queries, "x W_q", dims({1, T, H * hd}), projected},
                                  {StageId::keys, "x W_k, x W_v", dims({1, T, KV * hd}), projected},
                                  {StageId::queries, "split heads: q", dims({1, H, T, hd}), projected},
                                  {StageId::keys, "k, v", dims({1, KV, T, hd}), projected}};
  if (l.q_normed) strip.push_back({StageId::queries, "q/k norm", dims({1, H, T, hd}), normed});
  strip.push_back({StageId::queries, "RoPE", dims({1, H, T, hd}), rotated});
  if (KV < H) strip.push_back({StageId::keys, "repeat k, v", dims({1, H, T, hd}), rotated});
  const auto scores =
      std::find_if(base.begin(), base.end(), [](const ShapeStep& st) { return st.stage == StageId::scores; });
  strip.insert(strip.end(), scores, base.end());
  return strip;
}

const char* to_string(QkStep s) {
  switch (s) {
    case QkStep::projected:
      return "projected";
    case QkStep::normed:
      return "normed";
    case QkStep::rotated:
      break;
  }
  return "rotated";
}

std::vector<QkStep> qk_steps(const LayerSteps& l) {
  if (!l.any()) return {};
  if (l.q_normed && l.k_normed) return {QkStep::projected, QkStep::normed, QkStep::rotated};
  return {QkStep::projected, QkStep::rotated};
}

namespace {

bool has_step(const LayerSteps& l, StageId s, QkStep step) {
  if ((s != StageId::queries && s != StageId::keys) || !l.any()) return false;
  return step != QkStep::normed || (l.q_normed && l.k_normed);
}

}  // namespace

StageInfo qk_step_info(const Result& r, const LayerSteps& l, StageId s, QkStep step) {
  StageInfo info = stage_info(r, s);
  if (!has_step(l, s, step)) return info;
  const bool q = s == StageId::queries;
  const int T = r.tokens_count(), H = r.shape.heads, hd = r.shape.head_dim;
  const int KV = l.kv_heads > 0 ? l.kv_heads : H;
  const std::string name = q ? "q" : "k", proj = name + " = x " + (q ? "W_query" : "W_key");
  const std::string norm = std::string(q ? "q_norm" : "k_norm");
  // q is shown per query head; k per key/value head until it is repeated for the query heads that share it.
  const std::string own_shape =
      "(b, " + std::string(q ? "H" : "KV") + ", T, hd) = " + dims({1, q ? H : KV, T, hd});
  switch (step) {
    case QkStep::projected:
      info.formula = proj;
      info.shape = own_shape;
      break;
    case QkStep::normed:
      info.formula = norm + "(" + name + "): " + l.norm;
      info.shape = own_shape;
      break;
    case QkStep::rotated: {
      const std::string inner = "x " + std::string(q ? "W_query" : "W_key");
      info.formula = name + " = RoPE(" + (l.q_normed ? norm + "(" + inner + ")" : inner) + "): " + l.rope;
      if (!q && KV < H) info.formula += "; query head h reads key/value head h / " + std::to_string(H / KV);
      break;
    }
  }
  return info;
}

MatrixDesc qk_step_matrix(const Result& r, const LayerSteps& l, StageId s, QkStep step, int head) {
  if (!has_step(l, s, step) || step == QkStep::rotated) return stage_matrix(r, s, head);
  const int H = r.shape.heads, hd = r.shape.head_dim;
  if (head < 0 || head >= H) return {};
  const bool q = s == StageId::queries;
  const Tensor* t = step == QkStep::projected ? (q ? l.q_proj : l.k_proj) : (q ? l.q_normed : l.k_normed);
  const int KV = l.kv_heads > 0 ? l.kv_heads : H;
  if (KV > H || H % KV != 0) return {};
  const int col_head = q ? head : head / (H / KV);
  if (!t || t->rank != 2 || t->shape[0] != r.tokens_count() || t->shape[1] < (col_head + 1) * hd) return {};
  return head_columns(*t, col_head, hd);
}

int stage_heads(const Result& r, StageId s) {
  return stage_info(r, s).per_head ? r.shape.heads : 1;
}

MatrixDesc stage_matrix(const Result& r, StageId s, int head) {
  const StageInfo info = stage_info(r, s);
  if (!info.available || head < 0 || head >= stage_heads(r, s)) return {};
  const int hd = r.shape.head_dim;
  MatrixDesc m;
  switch (s) {
    case StageId::inputs:
      return whole(r.inputs);
    case StageId::queries:
      return head_columns(r.q, head, hd);
    case StageId::keys:
      return head_columns(r.k, head, hd);
    case StageId::values:
      return head_columns(r.v, head, hd);
    case StageId::scores:
      m = head_square(r, r.scores, head);
      m.causal = false;  // raw scores exist everywhere; the mask comes later
      return m;
    case StageId::scaled:
      m = head_square(r, r.scores, head);
      m.causal = false;
      m.multiplier = r.shape.scale;
      return m;
    case StageId::masked:
      return head_square(r, r.scaled, head);
    case StageId::weights:
      return head_square(r, r.weights, head);
    case StageId::dropped:
      m = head_square(r, r.dropped, head);
      if (!r.keep.empty())
        m.keep = r.keep.data() + static_cast<std::size_t>(head) * static_cast<std::size_t>(m.rows) *
                                     static_cast<std::size_t>(m.cols);
      return m;
    case StageId::context:
      return head_columns(r.context, head, hd);
    case StageId::output:
      return whole(r.output);
  }
  return m;
}

const char* to_string(Aggregate a) {
  switch (a) {
    case Aggregate::mean:
      return "mean";
    case Aggregate::max:
      return "max";
    case Aggregate::none:
      break;
  }
  return "none";
}

MatrixDesc aggregate(const Result& r, StageId s, Aggregate how, const std::vector<int>& heads) {
  std::vector<int> picked;
  for (int h : heads)
    if (h >= 0 && h < stage_heads(r, s)) picked.push_back(h);
  if (heads.empty())
    for (int h = 0; h < stage_heads(r, s); ++h) picked.push_back(h);
  if (picked.empty() || how == Aggregate::none)
    return picked.empty() ? MatrixDesc{} : stage_matrix(r, s, picked[0]);
  std::vector<MatrixDesc> matrices;
  for (int h : picked) matrices.push_back(stage_matrix(r, s, h));
  return aggregate(matrices, how);
}

MatrixDesc aggregate(const std::vector<MatrixDesc>& picked, Aggregate how) {
  if (picked.empty()) return {};
  const MatrixDesc& first = picked[0];
  if (how == Aggregate::none || first.empty()) return first;
  for (const MatrixDesc& m : picked)
    if (m.rows != first.rows || m.cols != first.cols) return {};
  const std::size_t n = static_cast<std::size_t>(first.rows) * static_cast<std::size_t>(first.cols);
  auto out = std::make_shared<std::vector<float>>(
      n, how == Aggregate::max ? -std::numeric_limits<float>::infinity() : 0.0f);
  for (const MatrixDesc& m : picked) {
    for (int i = 0; i < m.rows; ++i) {
      for (int j = 0; j < m.cols; ++j) {
        float& o = (*out)[static_cast<std::size_t>(i) * static_cast<std::size_t>(m.cols) + j];
        o = how == Aggregate::max ? std::max(o, m.at(i, j)) : o + m.at(i, j);
      }
    }
  }
  if (how == Aggregate::mean)
    for (float& x : *out) x /= static_cast<float>(picked.size());
  MatrixDesc m = first;
  m.owned = out;
  m.data = out->data();
  m.row_stride = first.cols;
  m.multiplier = 1.0f;
  m.keep = nullptr;  // a cell's dropout differs between heads
  return m;
}

MatrixDesc difference(const MatrixDesc& a, const MatrixDesc& b) {
  if (a.empty() || b.empty()) return {};
  MatrixDesc m;
  m.rows = std::min(a.rows, b.rows);
  m.cols = std::min(a.cols, b.cols);
  m.row_stride = m.cols;
  m.square = a.square && b.square;
  m.causal = a.causal && b.causal;
  m.window = a.window == b.window ? a.window : 0;  // a cell masked on one side only has a difference
  auto out = std::make_shared<std::vector<float>>(static_cast<std::size_t>(m.rows) *
                                                  static_cast<std::size_t>(m.cols));
  for (int i = 0; i < m.rows; ++i)
    for (int j = 0; j < m.cols; ++j) {
      const float x = a.at(i, j), y = b.at(i, j);
      // Both -inf (masked in both) has no difference to show; the masked colour marks it.
      (*out)[static_cast<std::size_t>(i) * static_cast<std::size_t>(m.cols) + j] =
          std::isinf(x) && std::isinf(y) && x == y ? std::numeric_limits<float>::quiet_NaN() : x - y;
    }
  m.owned = out;
  m.data = out->data();
  return m;
}

MatrixDesc thumbnail(const MatrixDesc& m, int max_side) {
  max_side = std::max(max_side, 1);
  if (m.empty() || (m.rows <= max_side && m.cols <= max_side)) return m;
  const int f = (std::max(m.rows, m.cols) + max_side - 1) / max_side;
  MatrixDesc t;
  t.rows = (m.rows + f - 1) / f;
  t.cols = (m.cols + f - 1) / f;
  t.row_stride = t.cols;
  t.square = m.square;
  auto out = std::make_shared<std::vector<float>>(static_cast<std::size_t>(t.rows) *
                                                  static_cast<std::size_t>(t.cols));
  // Per source column: the sum and count of a block row's cells (elementwise, so the loop vectorizes).
  std::vector<float> sum(static_cast<std::size_t>(m.cols));
  std::vector<int> count(static_cast<std::size_t>(m.cols));
  for (int bi = 0; bi < t.rows; ++bi) {
    std::fill(sum.begin(), sum.end(), 0.0f);
    std::fill(count.begin(), count.end(), 0);
    // pass 1: add the block row's source rows column by column, over their unmasked finite cells
    for (int i = bi * f; i < std::min((bi + 1) * f, m.rows); ++i) {
      const float* row = m.data + static_cast<std::ptrdiff_t>(i) * m.row_stride;
      const MatrixDesc::Run run = m.unmasked(i);
      for (int j = run.from; j < run.to; ++j) {
        const float x = row[j] * m.multiplier;
        const bool finite = std::fabs(x) <= std::numeric_limits<float>::max();
        sum[static_cast<std::size_t>(j)] += finite ? x : 0.0f;
        count[static_cast<std::size_t>(j)] += finite ? 1 : 0;
      }
    }
    // pass 2: each cell's f columns into one mean, NaN where nothing carried a value
    for (int bj = 0; bj < t.cols; ++bj) {
      double s = 0.0;
      int n = 0;
      for (int j = bj * f; j < std::min((bj + 1) * f, m.cols); ++j) {
        s += sum[static_cast<std::size_t>(j)];
        n += count[static_cast<std::size_t>(j)];
      }
      (*out)[static_cast<std::size_t>(bi) * static_cast<std::size_t>(t.cols) + static_cast<std::size_t>(bj)] =
          n > 0 ? static_cast<float>(s / n) : std::numeric_limits<float>::quiet_NaN();
    }
  }
  t.owned = out;
  t.data = out->data();
  return t;
}

}  // namespace attnviz::viz
