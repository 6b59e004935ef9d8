// A whole-model pass's checks and the shape of what it keeps (gpt_pass.hpp), its size in FLOPs, the top k of
// its logits, and the two ends of a pass computed elsewhere (begin_gpt_forward / end_gpt_forward).
#include "gpt_pass.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "fast.hpp"
#include "simd/packed.hpp"

namespace attnviz {
namespace gpt_pass {

Status check_pass(const GptConfig& c, const std::vector<int>& ids, const GptRequest& request,
                  std::vector<char>& kept) {
  const int T = static_cast<int>(ids.size()), L = c.n_layers, V = c.vocab_size;
  char buf[200];
  if (T < 1) return Status::fail("the text is empty: give at least one token");
  if (T > c.context_length) {
    std::snprintf(buf, sizeof buf, "the text has %d tokens, more than the context length %d", T,
                  c.context_length);
    return Status::fail(buf);
  }
  for (int id : ids)
    if (id < 0 || id >= V) {
      std::snprintf(buf, sizeof buf, "token id %d is outside the vocabulary (0..%d)", id, V - 1);
      return Status::fail(buf);
    }
  kept.assign(static_cast<std::size_t>(L), request.all_layers ? 1 : 0);
  for (int l : request.layers) {
    if (l < 0 || l >= L) {
      std::snprintf(buf, sizeof buf, "layer %d does not exist: the model has layers 0..%d", l, L - 1);
      return Status::fail(buf);
    }
    kept[static_cast<std::size_t>(l)] = 1;
  }
  if (request.detail_layer >= L) {
    std::snprintf(buf, sizeof buf, "layer %d does not exist: the model has layers 0..%d",
                  request.detail_layer, L - 1);
    return Status::fail(buf);
  }
  if (request.detail_layer >= 0) kept[static_cast<std::size_t>(request.detail_layer)] = 1;
  return Status::ok();
}

unsigned stages_of(const GptRequest& request, int l) {
  return l == request.detail_layer ? unsigned{kStageAll} : request.stages;
}

bool qkv_of(const GptRequest& request, int l) {
  return l == request.detail_layer || request.qkv;
}

Config attention_config(const GptWeights& w, const GptOptions& o, unsigned stages) {
  Config a;
  a.variant = Variant::mha;
  a.d_in = w.config.d_model;
  a.d_out = w.config.q_width();
  a.num_heads = w.config.n_heads;
  a.context_length = w.config.context_length;
  a.dropout = w.config.drop_rate;
  a.qkv_bias = w.config.qkv_bias;
  a.seed = 0;
  a.train = o.train;
  a.mask = true;
  a.dropout_rng = o.dropout_rng;
  a.stages = stages;
  return effective(a);
}

Shape layer_shape(const GptConfig& c, const Config& ac, int l) {
  Shape s = shape_of(ac);
  s.out_width = c.d_model;
  if (c.arch.attn_scale > 0.0) s.scale = static_cast<float>(c.arch.attn_scale);
  s.window = c.local_layer(l) ? c.arch.window : 0;
  return s;
}

std::vector<std::string> id_labels(const std::vector<int>& ids) {
  std::vector<std::string> labels;
  labels.reserve(ids.size());
  for (int id : ids) labels.push_back(std::to_string(id));
  return labels;
}

}  // namespace gpt_pass

using namespace gpt_pass;

namespace {

// The k best logits seen so far, most probable first and equal logits by id (ids are offered in increasing
// order, so an equal logit never displaces an earlier id).
struct BestSoFar {
  const float* logits;
  int k;
  std::vector<int> ids;

  // Token a before token b: the larger logit, or the same logit and the smaller id.
  bool better(int a, int b) const { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); }
  void offer(int i) {
    ids.insert(std::upper_bound(ids.begin(), ids.end(), i, [this](int a, int b) { return better(a, b); }), i);
    if (static_cast<int>(ids.size()) > k) ids.pop_back();
  }
  // The bar a logit must pass to be offered: none until k are kept (-inf, which every finite logit passes).
  float bar() const {
    return static_cast<int>(ids.size()) == k ? logits[ids.back()] : -std::numeric_limits<float>::infinity();
  }
};

}  // namespace

std::vector<TopToken> top_tokens(const float* logits, int V, int k, double* log_sum_exp, Isa isa, int target,
                                 double* target_probability) {
  k = std::max(0, std::min(k, V));
  // (A large k sorts instead: inserting would cost k a token.)
  const bool insert = k <= 64;
  BestSoFar best{logits, insert ? k : 0, {}};
  best.ids.reserve(static_cast<std::size_t>(best.k) + 1);
  double mx = -INFINITY, sum = 0.0;
  std::vector<double> numerators;  // the top tokens' exp(logit - max), as the sum took them (SIMD)
  simd::LogitRow row;
  const Isa fast = resolve(isa);
  bool scanned = false;
  if (fast != Isa::scalar && V > 0) {
    // One lane-wide read for the largest logit and the candidates; a row with a value that is not finite
    // takes the scalar rule below.
    row.x = logits, row.n = V, row.context = &best;
    row.bar = best.k > 0 ? best.bar() : std::numeric_limits<float>::infinity();
    row.offer = [](void* context, int i) {
      BestSoFar& b = *static_cast<BestSoFar*>(context);
      b.offer(i);
      return b.bar();
    };
    simd::scan_logits(fast, row);
    scanned = row.finite;
  }
  if (!scanned) {
    best.ids.clear();
    for (int i = 0; i < V; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
    for (int i = 0; i < V && best.k > 0; ++i)
      if (static_cast<int>(best.ids.size()) < best.k || logits[i] > logits[best.ids.back()]) best.offer(i);
    for (int i = 0; i < V; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  }
  std::vector<int> ids = std::move(best.ids);
  if (!insert) {
    ids.resize(static_cast<std::size_t>(V));
    for (int i = 0; i < V; ++i) ids[static_cast<std::size_t>(i)] = i;
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&best](int a, int b) { return best.better(a, b); });
    ids.resize(static_cast<std::size_t>(k));
  }
  const bool with_target = target_probability && target >= 0 && target < V;
  if (scanned) {
    // One more read for the sum of exps, which hands back the top tokens' own terms (and the target's, last).
    if (with_target) ids.push_back(target);
    numerators.resize(ids.size());
    row.sum = true, row.picks = ids.data(), row.n_picks = static_cast<int>(ids.size());
    row.picked = numerators.data();
    simd::scan_logits(fast, row);
    mx = row.max, sum = row.exp_sum;
    if (with_target) ids.pop_back();
  }
  if (log_sum_exp) *log_sum_exp = mx + std::log(sum);
  if (target_probability)
    *target_probability = !with_target ? std::numeric_limits<double>::quiet_NaN()
                          : scanned    ? numerators[ids.size()] / sum
                                       : std::exp(static_cast<double>(logits[target]) - mx) / sum;
  std::vector<TopToken> top;
  top.reserve(ids.size());
  for (std::size_t j = 0; j < ids.size(); ++j) {
    const int id = ids[j];
    const double numerator = scanned ? numerators[j] : std::exp(static_cast<double>(logits[id]) - mx);
    top.push_back({id, logits[id], numerator / sum});
  }
  return top;
}

double forward_flops(const GptConfig& c, int tokens, int first, bool all_logits) {
  const double d = c.d_model, T = tokens, P = std::clamp(first, 0, tokens), rows = T - P;
  // per row and layer: q, k, v, out_proj (4 d^2) and fc, proj (8 d^2); row i's scores and context over its
  // i + 1 visible keys (the layer's forward_flops counts the same at first = 0)
  const double visible = (T * (T + 1.0) - P * (P + 1.0)) / 2.0;
  const double qw = c.q_width(), kw = c.kv_width(), f = c.ff_width();
  const double mlp = c.attention_only ? 0.0 : (c.arch.mlp == MlpKind::gated ? 3.0 : 2.0) * d * f;
  const double layer = 2.0 * rows * (2.0 * d * qw + 2.0 * d * kw + mlp) + 4.0 * qw * visible;
  const double head = 2.0 * d * c.vocab_size * (all_logits ? rows : 1.0);
  return c.n_layers * layer + head;
}

Status begin_gpt_forward(const GptWeights& w, const GptOptions& options, const std::vector<int>& ids,
                         const GptRequest& request, GptResult& r) {
  const GptConfig& c = w.config;
  std::vector<char> kept;
  if (Status st = check_pass(c, ids, request, kept); !st.is_ok()) return st;
  if (options.train && c.drop_rate > 0.0)
    return Status::fail(
        "only the engine computes train-mode passes (PyTorch's dropout masks are drawn in sequence)");
  if (!c.gpt2_blocks())
    return Status::fail("only the engine computes " + c.arch.name + " models (the GPU kernels are GPT-2's)");
  if (c.attention_only)
    return Status::fail(
        "only the engine computes attention-only models (the GPU kernels run every block's MLP)");
  const int T = static_cast<int>(ids.size()), d = c.d_model, H = c.n_heads;
  r = GptResult();
  r.config = c;
  r.options = options;
  r.ids = ids;
  const std::vector<std::string> labels = id_labels(ids);
  for (int l = 0; l < c.n_layers; ++l) {
    if (!kept[static_cast<std::size_t>(l)]) continue;
    GptLayer layer;
    layer.index = l;
    Result& a = layer.attention;
    a.config = attention_config(w, options, stages_of(request, l));
    a.shape = shape_of(a.config);
    a.tokens = labels;
    a.weights = HeadSquares(H, T, 0.0f);
    if (a.config.stages & kStageScores) a.scores = HeadSquares(H, T, 0.0f);
    if (a.config.stages & kStageScaled) a.scaled = HeadSquares(H, T, 0.0f);
    if (qkv_of(request, l))
      for (Tensor* t : {&a.inputs, &a.q, &a.k, &a.v, &a.context, &a.output}) *t = Tensor(T, d);
    if (request.residuals) layer.resid_in = Tensor(T, d), layer.resid_out = Tensor(T, d);
    r.layers.push_back(std::move(layer));
  }
  r.logits = Tensor(request.all_logits ? T : 1, c.vocab_size);
  return Status::ok();
}

Status end_gpt_forward(const GptRequest& request, GptResult& r) {
  for (GptLayer& l : r.layers) {
    Result& a = l.attention;
    if (a.config.stages & kStageDropped) a.dropped = a.weights;  // no dropout was drawn
  }
  for (const GptLayer& l : r.layers)
    if (Status st = check_finite(l.attention); !st.is_ok()) return st;
  const int rows = r.logits.shape[0], V = r.logits.shape[1];
  if (!all_finite(r.logits.ptr(), r.logits.ptr() + r.logits.size()))
    return Status::fail("the logits are not finite: the weights overflow float32");
  r.next = top_tokens(r.logits.ptr() + static_cast<std::size_t>(rows - 1) * V, V, request.top_k, nullptr,
                      resolve(r.options.exec.isa));
  return Status::ok();
}

}  // namespace attnviz
