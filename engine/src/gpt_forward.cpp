// GPTModel's forward pass: the fast kernels (rows [first, T) only, when a prefix is cached) or the scalar
// reference, the same loop for both. What is kept follows the request; the keys and values of every layer are
// kept in the model's cache for the next pass.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "../reference/kernels.hpp"
#include "../simd/layer.hpp"
#include "../simd/pack.hpp"
#include "../simd/packed.hpp"
#include "attnviz/gpt.hpp"
#include "fast.hpp"
#include "gpt_pass.hpp"

namespace attnviz {

struct GptModel::Cache {
  std::vector<int> ids;  // the sequence the cached rows belong to
  GptRequest request;    // what the pass that made them kept
  Isa isa = Isa::scalar;
  std::vector<std::vector<float>> q, k, v;  // per layer, (T, d): k and v always, q with the raw scores
  std::vector<float> hidden;                // (T, d) after the final LayerNorm
  std::uint64_t stamp = 0;                  // the pass these rows belong to
  // Storage the last pass freed (one layer's kept tensors): the next incremental pass writes its first layer
  // there and each later layer into the storage of the layer before, so typing allocates nothing new.
  std::vector<std::vector<float>> spare;
};

namespace {

using namespace gpt_pass;

bool same_request(const GptRequest& a, const GptRequest& b) {
  return a.all_layers == b.all_layers && (a.all_layers || a.layers == b.layers) && a.stages == b.stages &&
         a.qkv == b.qkv && a.residuals == b.residuals && a.all_logits == b.all_logits &&
         a.detail_layer == b.detail_layer;
}

std::size_t count(int a, int b) {
  return static_cast<std::size_t>(a) * static_cast<std::size_t>(b);
}

// Copies rows [0, rows) of an (H, T_old, T_old) tensor into an (H, T, T) one (fill past the old columns).
void copy_square_rows(const Tensor& from, Tensor& to, int rows, float fill) {
  if (from.empty() || rows == 0) return;
  const int H = to.shape[0], T = to.shape[1], T_old = from.shape[1];
  const int cols = std::min(T, T_old);
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < rows; ++i) {
      float* dst = to.slice(h) + count(i, T);
      std::memcpy(dst, from.slice(h) + count(i, T_old), count(cols, 1) * sizeof(float));
      std::fill(dst + cols, dst + T, fill);
    }
}

// Copies rows [0, rows) of a (T_old, cols) matrix into a (T, cols) one.
void copy_rows(const Tensor& from, Tensor& to, int rows) {
  if (from.empty() || rows == 0) return;
  std::memcpy(to.ptr(), from.ptr(), count(rows, to.shape[1]) * sizeof(float));
}

// x[i] = keep[i] ? x[i] * scale : 0 over rows [0, T) of (T, d): nn.Dropout on a drawn mask.
void apply_dropout(float* x, const std::vector<std::uint8_t>& keep, float scale) {
  for (std::size_t i = 0; i < keep.size(); ++i) x[i] = keep[i] ? x[i] * scale : 0.0f;
}

// Storage of the previous result, reused when a full pass replaces it: the kernels write every cell they
// keep, so reused buffers are neither zeroed nor page-faulted again (at T = 1024 the weights of every layer
// are 600 MB).
class Spare {
 public:
  void give(Tensor& t) {
    if (t.data.capacity() >= (1u << 12)) bufs_.push_back(std::move(t.data));
    t = Tensor();
  }
  void give(GptLayer& l) {
    Result& a = l.attention;
    for (Tensor* t : {&a.inputs, &a.q, &a.k, &a.v, &a.scores, &a.scaled, &a.weights, &a.dropped, &a.context,
                      &a.output, &l.resid_in, &l.resid_out})
      give(*t);
  }
  void give(GptResult& r) {
    for (GptLayer& l : r.layers) give(l);
    give(r.logits);
  }
  void adopt(std::vector<std::vector<float>>&& bufs) {
    for (auto& b : bufs) bufs_.push_back(std::move(b));
  }
  // The `keep` largest buffers, handed back (the rest are freed).
  std::vector<std::vector<float>> release(std::size_t keep) {
    std::sort(bufs_.begin(), bufs_.end(),
              [](const auto& a, const auto& b) { return a.capacity() > b.capacity(); });
    if (bufs_.size() > keep) bufs_.resize(keep);
    return std::move(bufs_);
  }
  // A tensor of the shape whose contents are unspecified (the best-fitting spare buffer, or a new one).
  Tensor take(int rows, int cols) {
    Tensor t = take(rows, cols, 1);
    t.rank = 2;
    return t;
  }
  Tensor take(int d0, int d1, int d2) {
    const std::size_t n = count(d0, d1) * static_cast<std::size_t>(d2);
    Tensor t;
    auto best = bufs_.end();
    for (auto it = bufs_.begin(); it != bufs_.end(); ++it)  // never more than twice the size: others need it
      if (it->capacity() >= n && it->capacity() / 2 <= n &&
          (best == bufs_.end() || it->capacity() < best->capacity()))
        best = it;
    if (best != bufs_.end()) {
      t.data = std::move(*best);
      bufs_.erase(best);
    } else {
      t.data.reserve(n + n / 8);  // room for the next few appended tokens' (H, T, T)
    }
    if (t.data.size() < n) t.data.resize(n);
    t.data.resize(n);
    t.shape = {d0, d1, d2};
    t.rank = 3;
    return t;
  }

 private:
  std::vector<std::vector<float>> bufs_;
};

// check_finite over what a fast layer computed in this pass, in its order and with its line, so that every
// ISA refuses an input as the scalar path does: rows [P, T) of each stage (q, k, v, context and output
// (T, d); the raw scores and dropped weights (H, T, T) per head), and the earlier rows' raw scores against
// the new keys, which the incremental pass writes too. Of the weights, kept or not, each row's first cell
// tells: the kernel writes a row all NaN when its scores overflowed, and finite otherwise (exp(s - max) <= 1
// over a sum >= 1), which spares reading every layer's (H, T, T) weights again (600 MB at T = 1024 for
// gpt2-small). A stage not computed is nullptr.
struct FastLayerOut {
  const float *q, *k, *v, *scores, *weights, *dropped, *context, *output;
};
Status check_finite_rows(const FastLayerOut& o, int T, int P, int d, int H) {
  const auto rows = [&](const float* p) { return !p || all_finite(p + count(P, d), p + count(T, d)); };
  const auto head = [&](const float* p, int h) { return p + count(h, T) * static_cast<std::size_t>(T); };
  const auto square = [&](const float* p, bool earlier) {
    for (int h = 0; p && h < H; ++h) {
      const float* m = head(p, h);
      if (!all_finite(m + count(P, T), m + count(T, T))) return false;
      for (int i = 0; earlier && i < P; ++i)
        if (!all_finite(m + count(i, T) + P, m + count(i, T) + T)) return false;
    }
    return true;
  };
  const auto first_cells = [&](const float* p) {
    for (int h = 0; h < H; ++h)
      for (int i = P; i < T; ++i)
        if (!std::isfinite(head(p, h)[count(i, T)])) return false;
    return true;
  };
  if (!rows(o.q) || !rows(o.k) || !rows(o.v)) return not_finite("q, k, v");
  if (!square(o.scores, true)) return not_finite("raw scores");
  if (!first_cells(o.weights)) return not_finite("weights");
  if (!square(o.dropped, false)) return not_finite("dropped");
  if (!rows(o.context)) return not_finite("context");
  if (!rows(o.output)) return not_finite("output");
  return Status::ok();
}

Linear plain(const PackedLinear& l) {
  return Linear{unpack(l.weight), l.bias};
}

// The kernels one pass runs on: the ISA's fast kernels over rows [first, T), or the scalar reference.
struct Kernels {
  Isa isa;
  ThreadPool* pool;

  void layer_norm(const float* x, float* y, int rows, int cols, const Tensor& scale,
                  const Tensor& shift) const {
    if (rows <= 0) return;
    if (isa == Isa::scalar) return ref::layer_norm(x, y, rows, cols, scale.ptr(), shift.ptr());
    simd::RowJob job;
    job.kind = simd::RowJob::layer_norm, job.rows = rows, job.cols = cols, job.x = x, job.y = y;
    job.scale = scale.ptr(), job.shift = shift.ptr(), job.pool = pool;
    simd::run_rows(isa, job);
  }
  void gelu(float* x, int rows, int cols) const {
    if (rows <= 0) return;
    if (isa == Isa::scalar) return ref::gelu(x, x, static_cast<std::int64_t>(count(rows, cols)));
    simd::RowJob job;
    job.kind = simd::RowJob::gelu, job.rows = rows, job.cols = cols, job.x = x, job.y = x, job.pool = pool;
    simd::run_rows(isa, job);
  }
  // y (rows, out) = x (rows, in) W^T + b
  void linear(const float* x, float* y, int rows, const PackedMatrix& w, const Tensor& bias) const {
    if (rows <= 0) return;
    if (isa == Isa::scalar) {
      const Tensor plain_w = unpack(w);
      return ref::linear(x, plain_w.ptr(), bias.empty() ? nullptr : bias.ptr(), y, rows, w.in, w.out);
    }
    simd::RowJob job;
    job.kind = simd::RowJob::linear, job.rows = rows, job.cols = w.in, job.out = w.out, job.x = x, job.y = y;
    job.w = w.data.data(), job.bias = bias.empty() ? nullptr : bias.ptr(), job.pool = pool;
    simd::run_rows(isa, job);
  }
};

}  // namespace

GptModel::GptModel(std::shared_ptr<const GptWeights> weights, TorchGenerator after_init, GptOptions options)
    : weights_(std::move(weights)), after_init_(after_init), options_(options) {}

void GptModel::forget() {
  cache_.reset();
}

GptModel GptModel::fork() const {
  return GptModel(weights_, after_init_, options_);
}

int GptModel::reusable(const std::vector<int>& ids, const GptRequest& request, const GptResult& out) const {
  const Cache* old = cache_.get();
  const Isa isa = resolve(options_.exec.isa);
  const bool dropout = options_.train && weights_ && weights_->config.drop_rate > 0.0;
  if (!old || dropout || isa == Isa::scalar || old->isa != isa ||
      weights_->tok_emb.nr != simd::panel_width(isa) || old->stamp != out.stamp || out.stamp == 0 ||
      !same_request(old->request, request))
    return 0;
  const int n = static_cast<int>(std::min(old->ids.size(), ids.size()));
  int P = 0;
  while (P < n && old->ids[static_cast<std::size_t>(P)] == ids[static_cast<std::size_t>(P)]) ++P;
  return P;
}

Status GptModel::forward(const std::vector<int>& ids, const GptRequest& request, GptResult& out) {
  TorchGenerator g = after_init_;
  return run(ids, request, g, out);
}

Status GptModel::run(const std::vector<int>& ids, const GptRequest& request, TorchGenerator& g,
                     GptResult& out) {
  const auto start = std::chrono::steady_clock::now();
  if (!weights_) return Status::fail("no model is loaded");
  const GptConfig& c = weights_->config;
  const int T = static_cast<int>(ids.size()), d = c.d_model, H = c.n_heads, L = c.n_layers, V = c.vocab_size;
  std::vector<char> kept;
  if (Status st = check_pass(c, ids, request, kept); !st.is_ok()) return st;

  // The kernels, and weights packed for their panel width (a copy only when another ISA was asked for).
  const Isa isa = resolve(options_.exec.isa);
  if (isa != Isa::scalar && weights_->tok_emb.nr != simd::panel_width(isa)) {
    weights_ = std::make_shared<const GptWeights>(repacked(*weights_, isa));
    cache_.reset();
  }
  const GptWeights& w = *weights_;
  const int threads = isa == Isa::scalar ? 1 : resolve_threads(options_.exec.threads);
  ThreadPool* pool = isa == Isa::scalar ? nullptr : &ThreadPool::shared(threads);
  const Kernels kern{isa, pool};
  const bool dropout = options_.train && c.drop_rate > 0.0;
  const float keep_scale = dropout_scale(c.drop_rate);

  // The cached prefix: rows [0, P) are taken from the previous pass, which `out` still holds.
  const int P = reusable(ids, request, out);
  std::unique_ptr<Cache> old = std::move(cache_);
  auto cache = std::make_unique<Cache>();
  Spare spare;
  if (old) spare.adopt(std::move(old->spare));
  if (P > 0) {  // the cache's buffers move over: resizing keeps their first rows in place
    cache->q = std::move(old->q), cache->k = std::move(old->k), cache->v = std::move(old->v);
    cache->hidden = std::move(old->hidden);
  }
  old.reset();
  cache->q.resize(static_cast<std::size_t>(L)), cache->k.resize(static_cast<std::size_t>(L));
  cache->v.resize(static_cast<std::size_t>(L));
  GptResult* prev = P > 0 ? &out : nullptr;
  if (P == 0) spare.give(out);

  GptResult r;
  r.config = c;
  r.options = options_;
  r.ids = ids;
  r.isa = isa;
  r.threads = pool ? pool->size() : 1;  // fewer than asked when the system had no more threads
  r.reused = P;

  // 1. embeddings: x = tok_emb[id] + pos_emb[t], then dropout over (1, T, d)
  Tensor x(T, d);
  for (int t = P; t < T; ++t) {
    const int id = ids[static_cast<std::size_t>(t)];
    for (int i = 0; i < d; ++i) x.at(t, i) = w.tok_emb.at(id, i) + w.pos_emb.at(t, i);
  }
  if (dropout)
    apply_dropout(x.ptr(), torch_dropout_mask(g, x.size(), c.drop_rate, options_.dropout_rng), keep_scale);

  const Config ac = attention_config(w, options_, request.stages);
  const Shape shape = shape_of(ac);
  const std::vector<std::string> labels = id_labels(ids);
  Tensor h(T, d), h2(T, d), ff(T, 4 * d), attn_out(T, d);
  Tensor q_scratch, weights_scratch, context_scratch;
  AlignedBuffer scratch;  // the attention kernel's packed keys and values and row buffers

  for (int l = 0; l < L; ++l) {
    const GptBlock& b = w.blocks[static_cast<std::size_t>(l)];
    const bool keep = kept[static_cast<std::size_t>(l)] != 0;
    const unsigned stages = stages_of(request, l);
    const bool keep_q = (stages & kStageScores) != 0;
    GptLayer* before = nullptr;  // this layer in the previous pass, whose rows [0, P) are copied
    if (prev)
      for (GptLayer& pl : prev->layers)
        if (pl.index == l) before = &pl;
    GptLayer layer;
    layer.index = l;
    if (keep && request.residuals) {
      layer.resid_in = x;
      if (before) copy_rows(before->resid_in, layer.resid_in, P);
    }

    // 2. attention on norm1(x)
    kern.layer_norm(x.ptr() + count(P, d), h.ptr() + count(P, d), T - P, d, b.norm1_scale, b.norm1_shift);
    Result a;
    if (isa == Isa::scalar) {
      Params params;
      params.query = plain(b.query), params.key = plain(b.key), params.value = plain(b.value);
      params.out_proj = plain(b.out_proj);
      Input in{labels, h};
      Config full = ac;
      full.stages = keep ? stages : 0u;
      if (Status st = attnviz::forward(full, params, in, g, a, Exec{Isa::scalar, 1}); !st.is_ok()) {
        out = GptResult();  // its storage went into this pass
        return st;
      }
      std::memcpy(attn_out.ptr(), a.output.ptr(), a.output.size() * sizeof(float));
    } else {
      std::vector<float>& K = cache->k[static_cast<std::size_t>(l)];
      std::vector<float>& Vv = cache->v[static_cast<std::size_t>(l)];
      K.resize(count(T, d)), Vv.resize(count(T, d));
      const bool keep_qkv = keep && qkv_of(request, l);
      if (keep_q) {
        std::vector<float>& Q = cache->q[static_cast<std::size_t>(l)];
        Q.resize(count(T, d));
        q_scratch.data.swap(Q);  // borrowed for the job, given back below
      } else {
        q_scratch.data.resize(count(T, d));
      }
      q_scratch.shape = {T, d, 1}, q_scratch.rank = 2;
      a.config = ac;
      a.config.stages = stages;
      a.shape = shape;
      simd::LayerJob job;
      job.T = T, job.d_in = d, job.heads = H, job.head_dim = d / H, job.width = d, job.out_width = d;
      job.first = P, job.has_weights = true, job.causal = true, job.scale = shape.scale, job.pool = pool;
      job.x = h.ptr();
      job.wq = b.query.weight.data.data(), job.wk = b.key.weight.data.data(),
      job.wv = b.value.weight.data.data();
      job.wo = b.out_proj.weight.data.data();
      auto bias = [](const PackedLinear& pl) { return pl.bias.empty() ? nullptr : pl.bias.ptr(); };
      job.bq = bias(b.query), job.bk = bias(b.key), job.bv = bias(b.value), job.bo = bias(b.out_proj);
      job.q = q_scratch.ptr(), job.k = K.data(), job.v = Vv.data();
      if (keep) {
        a.weights = spare.take(H, T, T);
        if (before) copy_square_rows(before->attention.weights, a.weights, P, 0.0f);
        if (stages & kStageScores) {
          a.scores = spare.take(H, T, T);
          if (before) copy_square_rows(before->attention.scores, a.scores, P, 0.0f);
          job.scores = a.scores.ptr();
        }
        if (stages & kStageScaled) {
          a.scaled = spare.take(H, T, T);
          if (before) copy_square_rows(before->attention.scaled, a.scaled, P, -INFINITY);
          job.scaled = a.scaled.ptr();
        }
        job.weights = a.weights.ptr();
      } else {
        weights_scratch.data.resize(count(H, T) * static_cast<std::size_t>(T));
        job.weights = weights_scratch.ptr();
      }
      if (dropout) {
        a.keep = torch_dropout_mask(g, count(H, T) * static_cast<std::size_t>(T), c.drop_rate,
                                    options_.dropout_rng);
        job.keep = a.keep.data(), job.keep_scale = keep_scale;
        if (keep && (stages & kStageDropped)) {
          a.dropped = spare.take(H, T, T);
          job.dropped = a.dropped.ptr();
        }
      }
      Tensor& ctx = keep_qkv ? a.context : context_scratch;
      if (keep_qkv) {
        ctx = spare.take(T, d);
      } else if (ctx.size() != count(T, d)) {
        ctx = Tensor(T, d);
      }
      if (keep_qkv && before) copy_rows(before->attention.context, ctx, P);
      job.context = ctx.ptr();
      job.output = attn_out.ptr();
      if (scratch.empty())
        scratch = AlignedBuffer(simd::scratch_floats(job, simd::panel_width(isa), pool->size()));
      job.scratch = scratch.data();
      simd::run_layer(isa, job);
      if (Status st = check_finite_rows(
              {job.q, job.k, job.v, job.scores, job.weights, job.dropped, job.context, job.output}, T, P, d,
              H);
          !st.is_ok()) {
        out = GptResult();  // its storage went into this pass
        return st;
      }
      if (keep_qkv) {
        a.inputs = h;
        a.q = q_scratch;
        a.k = spare.take(T, d), a.v = spare.take(T, d);
        std::memcpy(a.k.ptr(), K.data(), K.size() * sizeof(float));
        std::memcpy(a.v.ptr(), Vv.data(), Vv.size() * sizeof(float));
        a.output = attn_out;
        if (before) {
          copy_rows(before->attention.inputs, a.inputs, P);
          copy_rows(before->attention.q, a.q, P);
          copy_rows(before->attention.output, a.output, P);
        }
      }
      if (keep_q) q_scratch.data.swap(cache->q[static_cast<std::size_t>(l)]);
      if (keep && !dropout && (stages & kStageDropped)) a.dropped = a.weights;
      a.isa = isa, a.threads = threads;
    }
    if (dropout)
      apply_dropout(attn_out.ptr(), torch_dropout_mask(g, attn_out.size(), c.drop_rate, options_.dropout_rng),
                    keep_scale);
    for (std::size_t i = count(P, d); i < x.size(); ++i) x.data[i] += attn_out.data[i];

    // 3. feed-forward on norm2(x): Linear d -> 4d, GELU, Linear 4d -> d
    float* h2p = h2.ptr() + count(P, d);
    kern.layer_norm(x.ptr() + count(P, d), h2p, T - P, d, b.norm2_scale, b.norm2_shift);
    kern.linear(h2p, ff.ptr() + count(P, 4 * d), T - P, b.fc.weight, b.fc.bias);
    kern.gelu(ff.ptr() + count(P, 4 * d), T - P, 4 * d);
    kern.linear(ff.ptr() + count(P, 4 * d), h2p, T - P, b.proj.weight, b.proj.bias);
    if (dropout)
      apply_dropout(h2.ptr(), torch_dropout_mask(g, h2.size(), c.drop_rate, options_.dropout_rng),
                    keep_scale);
    for (std::size_t i = count(P, d); i < x.size(); ++i) x.data[i] += h2.data[i];

    if (keep) {
      if (request.residuals) {
        layer.resid_out = x;
        if (before) copy_rows(before->resid_out, layer.resid_out, P);
      }
      a.tokens = labels;
      if (isa == Isa::scalar && !qkv_of(request, l)) {
        a.inputs = a.q = a.k = a.v = a.context = a.output = Tensor();
      }
      layer.attention = std::move(a);
      r.layers.push_back(std::move(layer));
    }
    if (before) spare.give(*before);  // copied: its storage serves the next layer
  }

  // 4. final norm, then the head: the last position's logits, or every position's
  cache->hidden.resize(count(T, d));
  kern.layer_norm(x.ptr() + count(P, d), cache->hidden.data() + count(P, d), T - P, d, w.final_scale,
                  w.final_shift);
  const int first_logit = request.all_logits ? P : T - 1;
  const int rows = request.all_logits ? T : 1;
  r.logits = spare.take(rows, V);
  if (request.all_logits && prev) copy_rows(prev->logits, r.logits, P);
  if (prev) spare.give(prev->logits);
  if (first_logit < T) {
    static const Tensor no_bias;
    kern.linear(cache->hidden.data() + count(first_logit, d),
                r.logits.ptr() + count(request.all_logits ? first_logit : 0, V), T - first_logit, w.head(),
                no_bias);
  }
  r.next = top_tokens(r.logits.ptr() + count(rows - 1, V), V, request.top_k);
  if (!all_finite(r.logits.ptr() + count(request.all_logits ? first_logit : 0, V),
                  r.logits.ptr() + r.logits.size())) {
    out = GptResult();  // its storage went into this pass
    return Status::fail("the logits are not finite: the weights overflow float32");
  }

  static std::atomic<std::uint64_t> passes{0};
  r.stamp = ++passes;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!dropout && isa != Isa::scalar) {
    cache->ids = ids;
    cache->request = request;
    cache->isa = isa;
    cache->stamp = r.stamp;
    cache->spare = spare.release(6);
    cache_ = std::move(cache);
  }
  out = std::move(r);
  return Status::ok();
}

Status GptModel::generate(std::vector<int> ids, int steps, const GptRequest& request,
                          std::vector<int>& generated, GptResult& out, const std::function<bool(int)>& step) {
  if (!weights_) return Status::fail("no model is loaded");
  if (steps < 0 || steps > 100000)
    return Status::fail("the number of tokens to generate must be in 0..100000");
  const std::ptrdiff_t ctx = weights_->config.context_length;
  // generate_text_simple: each step runs the last context_length tokens and appends the argmax of the last
  // position's logits (the first of equal ones, as torch.argmax). Without dropout each step extends the
  // previous pass, so only the new row is computed.
  auto window = [&] {
    return std::vector<int>(ids.end() - std::min(static_cast<std::ptrdiff_t>(ids.size()), ctx), ids.end());
  };
  TorchGenerator g = after_init_;
  generated.clear();
  for (int s = 0; s < steps; ++s) {
    if (Status st = run(window(), request, g, out); !st.is_ok()) return st;
    const float* last = out.logits.ptr() + count(out.logits.shape[0] - 1, out.logits.shape[1]);
    const int next = static_cast<int>(std::max_element(last, last + out.logits.shape[1]) - last);
    ids.push_back(next);
    generated.push_back(next);
    if (step && !step(s + 1)) break;
  }
  // The pass over the final text (in train mode from the state after construction, as forward() gives it).
  TorchGenerator fresh = after_init_;
  return run(window(), request, fresh, out);
}

GptModel::GptModel() = default;
GptModel::~GptModel() = default;
GptModel::GptModel(GptModel&&) noexcept = default;
GptModel& GptModel::operator=(GptModel&&) noexcept = default;

}  // namespace attnviz
