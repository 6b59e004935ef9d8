// GPTModel's forward pass, read as llm.c's gpt2_forward: the embeddings, then per block a dozen named steps
// (layer norm, attention, dropout, residual, layer norm, fc, GELU, proj, dropout, residual), then the final
// layer norm and the head. Each step runs the ISA's fast kernels over rows [P, T) only, when a prefix is
// cached, or the scalar reference. What is kept follows the request; the keys and values of every layer are
// kept in the model's cache for the next pass.
//
// Shapes: T tokens in the pass, P rows taken from the previous pass (rows [P, T) are computed; 0 for a full
// pass), d = d_model, H heads (head width d / H), V vocabulary size. Every buffer is row-major.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "attnviz/gpt.hpp"
#include "attnviz/saturating.hpp"
#include "common/huge_pages.hpp"
#include "fast.hpp"
#include "gpt_pass.hpp"
#include "reference/kernels.hpp"
#include "simd/layer.hpp"
#include "simd/pack.hpp"
#include "simd/packed.hpp"

namespace attnviz {

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

// New storage for the squares `to` (H, T, T) with rows `stride` apart, of which a pass computes rows
// [rows, T): in each head, rows [0, rows) get columns [0, rows) from `from` (another pass over the same first
// `rows` tokens; null: none), and every cell the kernel does not write is set to `fill` (keys a row does not
// see: 0 in the weights, -inf in the scaled scores), up to the storage's end: columns [rows, stride) of the
// earlier rows, [T, stride) of the computed ones, and the rows past T. So every row of the storage holds
// `fill` right of its diagonal, as the kernel writes the rows it computes, and a later pass that extends
// these squares in place writes nothing into the earlier rows (Reuse::square).
void fill_squares(const HeadSquares* from, HeadSquares& to, int rows, float fill) {
  const int T = to.n, stride = to.stride;
  for (int h = 0; h < to.heads; ++h) {
    float* head = to.ptr() + count(h, stride) * static_cast<std::size_t>(stride);
    for (int i = 0; i < stride; ++i) {
      float* dst = head + count(i, stride);
      if (i < rows && from) std::memcpy(dst, from->row(h, i), count(rows, 1) * sizeof(float));
      const int first_unwritten = i < rows ? rows : i < T ? T : 0;
      std::fill(dst + first_unwritten, dst + stride, fill);
    }
  }
}

// Copies rows [0, rows) of a (T_old, cols) matrix into a (T, cols) one.
void copy_rows(const Tensor& from, Tensor& to, int rows) {
  if (from.empty() || rows == 0) return;
  std::memcpy(to.ptr(), from.ptr(), count(rows, to.shape[1]) * sizeof(float));
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
  void give(HeadSquares& t) {
    if (t.data.capacity() >= (1u << 12)) bufs_.push_back(std::move(t.data));
    t = HeadSquares();
  }
  void give(GptLayer& l) {
    Result& a = l.attention;
    for (Tensor* t : {&a.inputs, &a.q, &a.k, &a.v, &a.context, &a.output, &l.resid_in, &l.resid_out,
                      &l.q_proj, &l.k_proj, &l.q_normed, &l.k_normed})
      give(*t);
    for (HeadSquares* t : {&a.scores, &a.scaled, &a.weights, &a.dropped}) give(*t);
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
  // H squares of side n whose rows are `stride` apart, contents unspecified.
  HeadSquares take_squares(int H, int n, int stride) {
    Tensor t = take(H, stride, stride);
    HeadSquares sq;
    sq.heads = H, sq.n = n, sq.stride = stride;
    sq.data = std::move(t.data);
    return sq;
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
      prefer_huge_pages(t.data.data(), t.data.capacity() * sizeof(float));  // before resize() writes it
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
// (T, d); the raw scores and dropped weights (H, T, T) per head, rows `ld` floats apart and heads ld^2), and
// the earlier rows' raw scores against the new keys, which the incremental pass writes too. Of the weights,
// kept or not, each row's first cell tells: the kernel writes a row all NaN when its scores overflowed, and
// finite otherwise (exp(s - max) <= 1 over a sum >= 1), which spares reading every layer's (H, T, T) weights
// again (600 MB at T = 1024 for gpt2-small). A stage not computed is nullptr.
struct FastLayerOut {
  const float *q, *k, *v, *scores, *weights, *dropped, *context, *output;
};
struct FastLayerWidths {
  int q, kv, out;  // q and context (H hd), k and v (KV hd), output (d)
};
Status check_finite_rows(const FastLayerOut& o, int T, int P, FastLayerWidths width, int H, int ld) {
  const auto rows = [&](const float* p, int d) { return !p || all_finite(p + count(P, d), p + count(T, d)); };
  const auto head = [&](const float* p, int h) { return p + count(h, ld) * static_cast<std::size_t>(ld); };
  const auto square = [&](const float* p, bool earlier) {
    for (int h = 0; p && h < H; ++h) {
      const float* m = head(p, h);
      for (int i = P; i < T; ++i)
        if (!all_finite(m + count(i, ld), m + count(i, ld) + T)) return false;
      for (int i = 0; earlier && i < P; ++i)
        if (!all_finite(m + count(i, ld) + P, m + count(i, ld) + T)) return false;
    }
    return true;
  };
  const auto first_cells = [&](const float* p) {
    for (int h = 0; h < H; ++h)
      for (int i = P; i < T; ++i)
        if (!std::isfinite(head(p, h)[count(i, ld)])) return false;
    return true;
  };
  if (!rows(o.q, width.q) || !rows(o.k, width.kv) || !rows(o.v, width.kv)) return not_finite("q, k, v");
  if (!square(o.scores, true)) return not_finite("raw scores");
  if (!first_cells(o.weights)) return not_finite("weights");
  if (!square(o.dropped, false)) return not_finite("dropped");
  if (!rows(o.context, width.q)) return not_finite("context");
  if (!rows(o.output, width.out)) return not_finite("output");
  return Status::ok();
}

Linear plain(const PackedLinear& l) {
  return Linear{unpack(l.weight), l.bias};
}

// The kernels one pass runs on: the ISA's fast kernels over rows [first, T), or the scalar reference.
struct Kernels {
  Isa isa = Isa::scalar;
  ThreadPool* pool = nullptr;

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
    if (w.dtype != Dtype::f32) job.w16 = w.halves(), job.w16_bf16 = w.dtype == Dtype::bf16;
    simd::run_rows(isa, job);
  }
  // y (heads, out): head h's slice of x (one row of w.in) times its own columns of W (simd::RowJob's
  // head_outputs); the scalar reference sums each in double.
  void head_outputs(const float* x, float* y, int heads, const PackedMatrix& w) const {
    if (isa == Isa::scalar) {
      const int hd = w.in / heads;
      for (int h = 0; h < heads; ++h)
        for (int o = 0; o < w.out; ++o) {
          double s = 0.0;
          for (int i = h * hd; i < (h + 1) * hd; ++i) s += static_cast<double>(x[i]) * w.at(o, i);
          y[count(h, w.out) + static_cast<std::size_t>(o)] = static_cast<float>(s);
        }
      return;
    }
    simd::RowJob job;
    job.kind = simd::RowJob::head_outputs, job.rows = 1, job.cols = w.in, job.out = w.out, job.heads = heads;
    job.x = x, job.y = y, job.w = w.data.data(), job.pool = pool;
    if (w.dtype != Dtype::f32) job.w16 = w.halves(), job.w16_bf16 = w.dtype == Dtype::bf16;
    simd::run_rows(isa, job);
  }
};

// Buffer reuse across passes: the storage of the previous result and of the model's cache (Spare), and, when
// this pass extends the previous one (P > 0), the rows [0, P) of each kept tensor, copied from the same
// tensor of the previous pass. Once a layer is copied its storage serves the next layer.
class Reuse {
 public:
  // `out` is the previous result; `cached` the storage the previous pass left in the model's cache.
  // `context`: the model's context length, which no pass exceeds (the squares never grow past it).
  Reuse(GptResult& out, int P, int context, std::vector<std::vector<float>>&& cached)
      : P_(P), context_(context), prev_(P > 0 ? &out : nullptr) {
    spare_.adopt(std::move(cached));
    if (P == 0) spare_.give(out);
  }
  bool extends() const { return prev_ != nullptr; }
  // Layer l of the previous pass (null on a full pass, or when it did not keep l).
  GptLayer* before(int l) const {
    GptLayer* found = nullptr;
    if (prev_)
      for (GptLayer& pl : prev_->layers)
        if (pl.index == l) found = &pl;
    return found;
  }
  // (rows, cols), contents unspecified.
  Tensor take(int rows, int cols) { return spare_.take(rows, cols); }
  // (rows, cols) whose rows [0, P) are `from`'s (the same tensor of the previous pass; null: none), the rest
  // unspecified.
  Tensor rows(int rows, int cols, const Tensor* from) {
    Tensor t = spare_.take(rows, cols);
    if (from) copy_rows(*from, t, P_);
    return t;
  }
  // The row stride of a layer's kept squares over T tokens, given `from`, the same layer's weights in the
  // previous pass (null on a full pass): a full pass keeps them dense (stride T, no memory to spare); a pass
  // that extends one keeps its stride while T fits, else grows it by an eighth (rounded up to 16 floats,
  // at most the context length), so that typing at the end copies the squares once every T / 8 tokens
  // instead of at every keystroke.
  int square_stride(int T, const HeadSquares* from) const {
    if (!from || from->empty()) return T;
    if (from->stride >= T) return from->stride;
    return gpt_pass::grown_square_stride(T, context_);
  }
  // (H, T, T) with rows `stride` apart whose rows [0, P) of each head are `from`'s (the same square of the
  // previous pass; null: none) and `fill` past column P; rows [P, T) are the kernel's to write. When `from`
  // has that stride its storage is taken over and nothing is written: its cells right of the diagonal hold
  // `fill` already (fill_squares; a dense full pass's are all the kernel's), so the squares grow in place
  // without touching the earlier rows. The raw scores, whose earlier rows' new cells are not masked, are
  // the exception: the kernel writes those (LayerJob::first). New storage is filled by fill_squares.
  HeadSquares square(int H, int T, int stride, HeadSquares* from, float fill) {
    if (from && !from->empty() && from->heads == H && from->stride == stride) {
      HeadSquares t = std::move(*from);
      *from = HeadSquares();
      t.n = T;
      return t;
    }
    HeadSquares t = spare_.take_squares(H, T, stride);
    if (from && !from->empty()) fill_squares(from, t, std::min(P_, T), fill);
    return t;
  }
  // A copy of `x` (T, cols), which holds rows [P, T) only, with rows [0, P) from `from`.
  Tensor copy(const Tensor& x, const Tensor* from) const {
    Tensor t = x;
    if (from) copy_rows(*from, t, P_);
    return t;
  }
  // The previous pass's logits, taken over by this pass's (null on a full pass).
  Tensor* previous_logits() const { return prev_ ? &prev_->logits : nullptr; }
  void give(Tensor& t) { spare_.give(t); }
  void give(GptLayer& l) { spare_.give(l); }
  // What the next pass may reuse: the `keep` largest buffers.
  std::vector<std::vector<float>> release(std::size_t keep) { return spare_.release(keep); }

 private:
  Spare spare_;
  int P_ = 0, context_ = 0;
  GptResult* prev_ = nullptr;
};

// Row r of a (rows, cols) tensor.
float* row(Tensor& t, int r) {
  return t.ptr() + count(r, t.shape[1]);
}
const float* row(const Tensor& t, int r) {
  return t.ptr() + count(r, t.shape[1]);
}

// The steps of one pass, over rows [P, T) of (T, cols) activations (the scalar reference always has P = 0).
// Each forward step here is the one its backward step mirrors.
struct Steps {
  Kernels kern;
  int threads = 1;  // asked for (the pool may hold fewer)
  int T = 0, P = 0;
  bool train_dropout = false;  // train mode with drop_rate > 0: every pass is full (P = 0)
  double rate = 0.0;
  float keep_scale = 1.0f;
  DropoutRng rng = DropoutRng::cpu;
  TorchGenerator* g = nullptr;

  // x (T, d) = tok_emb[ids] + pos_emb[0..T) (learned positions), or tok_emb[ids] (rotary positions; times
  // sqrt(d) rounded to float for Gemma)
  void encoder(Tensor& x, const std::vector<int>& ids, const GptWeights& w) const {
    const int d = x.shape[1];
    const GptArch& a = w.config.arch;
    const float scale = a.embed_scale ? static_cast<float>(std::sqrt(static_cast<double>(d))) : 1.0f;
    for (int t = P; t < T; ++t) {
      const int id = ids[static_cast<std::size_t>(t)];
      if (!a.rotary)
        for (int i = 0; i < d; ++i) x.at(t, i) = w.tok_emb.at(id, i) + w.pos_emb.at(t, i);
      else if (a.embed_scale)
        for (int i = 0; i < d; ++i) x.at(t, i) = w.tok_emb.at(id, i) * scale;
      else
        for (int i = 0; i < d; ++i) x.at(t, i) = w.tok_emb.at(id, i);
    }
  }
  // y (T, cols) = the architecture's norm of x (T, cols) with scale, shift (cols): LayerNorm (GPT-2's kernels
  // at eps 1e-5) or RMSNorm, w * (x / sqrt(mean(x^2) + eps)) in float as PyTorch computes it.
  void norm(const Tensor& x, Tensor& y, const Tensor& scale, const Tensor& shift, const GptArch& a) const {
    norm_rows(row(x, P), row(y, P), T - P, x.shape[1], scale, shift, a);
  }
  void norm_rows(const float* x, float* y, int rows, int cols, const Tensor& scale, const Tensor& shift,
                 const GptArch& a) const {
    if (a.norm == NormKind::layer_norm && a.norm_eps == 1e-5)
      return kern.layer_norm(x, y, rows, cols, scale, shift);
    for (int r = 0; r < rows; ++r) {
      const float* xr = x + count(r, cols);
      float* yr = y + count(r, cols);
      double sum = 0.0, sq = 0.0;
      for (int j = 0; j < cols; ++j) sum += xr[j], sq += static_cast<double>(xr[j]) * xr[j];
      if (a.norm == NormKind::rms_norm) {
        const float inv = 1.0f / std::sqrt(static_cast<float>(sq / cols) + static_cast<float>(a.norm_eps));
        for (int j = 0; j < cols; ++j) yr[j] = scale.data[static_cast<std::size_t>(j)] * (xr[j] * inv);
      } else {
        const double mean = sum / cols;
        double var = 0.0;
        for (int j = 0; j < cols; ++j) var += (xr[j] - mean) * (xr[j] - mean);
        const double inv = 1.0 / std::sqrt(var / cols + a.norm_eps);
        for (int j = 0; j < cols; ++j)
          yr[j] = static_cast<float>((xr[j] - mean) * inv * scale.data[static_cast<std::size_t>(j)] +
                                     shift.data[static_cast<std::size_t>(j)]);
      }
    }
  }
  // x (T, cols) = act(x), in place: GELU's tanh form (the kernels), its erf form, or SiLU x / (1 + e^-x)
  void activation(Tensor& x, Activation act) const {
    if (act == Activation::gelu_tanh) return kern.gelu(row(x, P), T - P, x.shape[1]);
    for (std::size_t i = count(P, x.shape[1]); i < x.size(); ++i) {
      const float v = x.data[i];
      x.data[i] = act == Activation::silu ? v / (1.0f + std::exp(-v))
                                          : 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f));
    }
  }
  // x (T, cols) *= y (T, cols), element by element (a gated MLP's act(gate) * up)
  void multiply(Tensor& x, const Tensor& y) const {
    for (std::size_t i = count(P, x.shape[1]); i < x.size(); ++i) x.data[i] *= y.data[i];
  }
  // y (T, d) = LayerNorm(x (T, d)) with scale, shift (d)
  void layernorm(const Tensor& x, Tensor& y, const Tensor& scale, const Tensor& shift) const {
    kern.layer_norm(row(x, P), row(y, P), T - P, x.shape[1], scale, shift);
  }
  // y (T, out) = x (T, in) W^T + b, W (out, in)
  void matmul(const Tensor& x, Tensor& y, const PackedLinear& l) const {
    kern.linear(row(x, P), row(y, P), T - P, l.weight, l.bias);
  }
  // x (T, 4d) = GELU(x), in place
  void gelu(Tensor& x) const { kern.gelu(row(x, P), T - P, x.shape[1]); }
  // x (T, d) += y (T, d)
  void residual(Tensor& x, const Tensor& y) const {
    for (std::size_t i = count(P, x.shape[1]); i < x.size(); ++i) x.data[i] += y.data[i];
  }
  // x (T, d) = (m + a) + x: both branches of a parallel block read the same x (GPT-NeoX's order of sums)
  void parallel_residual(Tensor& x, const Tensor& m, const Tensor& a) const {
    for (std::size_t i = count(P, x.shape[1]); i < x.size(); ++i)
      x.data[i] = (m.data[i] + a.data[i]) + x.data[i];
  }
  // x = nn.Dropout(x) over the whole tensor: x[i] = keep[i] ? x[i] * scale : 0 on a mask drawn from the
  // continuing generator (one draw per call, in PyTorch's order); nothing in eval mode
  void dropout(Tensor& x) const {
    if (!train_dropout) return;
    const std::vector<std::uint8_t> keep = torch_dropout_mask(*g, x.size(), rate, rng);
    for (std::size_t i = 0; i < keep.size(); ++i) x.data[i] = keep[i] ? x.data[i] * keep_scale : 0.0f;
  }
};

// Rotary positions, rotate-half layout (Llama, Qwen, Gemma, GPT-NeoX): the first `dims` dimensions of each
// head are pairs (i, i + dims / 2) rotated by the angle pos * inv_freq[i]. Computed in float as PyTorch does:
// inv_freq = 1 / base^(2i / dims), scaled (linear: / factor; llama3: by wavelength), then pos * inv_freq, its
// cos and sin; the rotation is x cos + rotate_half(x) sin, two rounded products and a sum.
struct Rotary {
  int dims = 0;                 // rotated dimensions of a head (even; 0: no rotation)
  std::vector<float> cos, sin;  // (T, dims / 2): rows [P, T) filled
};

std::vector<float> inv_frequencies(const GptArch& a, int dims, bool local) {
  const double base = local && a.rope_local_theta > 0.0 ? a.rope_local_theta : a.rope_theta;
  std::vector<float> inv(static_cast<std::size_t>(dims / 2));
  for (int i = 0; i < dims / 2; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(dims);
    const float p = static_cast<float>(std::pow(static_cast<double>(static_cast<float>(base)), e));
    inv[static_cast<std::size_t>(i)] = 1.0f / p;
  }
  if (local) return inv;  // the local layers' frequencies are never scaled (Gemma 3)
  const auto factor = static_cast<float>(a.rope_factor);
  if (a.rope_scaling == RopeScaling::linear)
    for (float& f : inv) f = f / factor;
  if (a.rope_scaling == RopeScaling::llama3) {
    // Long wavelengths are slowed by `factor`, short ones kept, and the band between blended smoothly.
    const auto low = static_cast<float>(a.rope_low_freq), high = static_cast<float>(a.rope_high_freq);
    const auto old_context = static_cast<float>(a.rope_original_context);
    const float low_wavelen = old_context / low, high_wavelen = old_context / high;
    for (float& f : inv) {
      const float wavelen = static_cast<float>(2.0 * 3.141592653589793) / f;
      const float scaled = wavelen > low_wavelen ? f / factor : f;
      const float smooth = (old_context / wavelen - low) / (high - low);
      const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      f = medium ? smoothed : scaled;
    }
  }
  return inv;
}

Rotary rotary_table(const GptArch& a, int head_dim, bool local, int P, int T) {
  Rotary r;
  r.dims = a.rotary_dims > 0 ? a.rotary_dims : head_dim;
  const int half = r.dims / 2;
  const std::vector<float> inv = inv_frequencies(a, r.dims, local);
  r.cos.resize(count(T, half)), r.sin.resize(count(T, half));
  for (int t = P; t < T; ++t)
    for (int i = 0; i < half; ++i) {
      const float f = inv[static_cast<std::size_t>(i)] * static_cast<float>(t);
      r.cos[count(t, half) + static_cast<std::size_t>(i)] =
          static_cast<float>(std::cos(static_cast<double>(f)));
      r.sin[count(t, half) + static_cast<std::size_t>(i)] =
          static_cast<float>(std::sin(static_cast<double>(f)));
    }
  return r;
}

// x (T, width): rows [P, T) of each of `heads` heads of width hd rotated in place.
void rotate(float* x, int P, int T, int heads, int hd, int width, const Rotary& r) {
  const int half = r.dims / 2;
  for (int t = P; t < T; ++t) {
    const float* c = r.cos.data() + count(t, half);
    const float* sn = r.sin.data() + count(t, half);
    for (int h = 0; h < heads; ++h) {
      float* v = x + count(t, width) + count(h, hd);
      for (int i = 0; i < half; ++i) {
        const float x1 = v[i], x2 = v[i + half];
        const float a = x1 * c[i], b = -x2 * sn[i], e = x2 * c[i], f = x1 * sn[i];
        v[i] = a + b;
        v[i + half] = e + f;
      }
    }
  }
}

// What layer l keeps of its attention.
struct LayerKeep {
  bool any = false;     // the layer is kept at all
  unsigned stages = 0;  // chapter-3 stages besides the weights
  bool q = false;       // the raw scores are kept, so the cache keeps q
  bool qkv = false;     // inputs, q, k, v, context and output are kept
  bool residuals = false;
};
LayerKeep layer_keep(const GptRequest& request, const std::vector<char>& kept, int l) {
  LayerKeep k;
  k.any = kept[static_cast<std::size_t>(l)] != 0;
  k.stages = stages_of(request, l);
  k.q = (k.stages & kStageScores) != 0;
  k.qkv = k.any && qkv_of(request, l);
  k.residuals = k.any && request.residuals;
  return k;
}

// A layer's keys, values and queries in the model's cache, each (T, d), and its keys and values packed
// for `capacity` rows, rows [0, packed) of them already (LayerJob::kv_pack).
struct LayerCache {
  std::vector<float>&q, &k, &v;
  AlignedBuffer& pack;
  int capacity = 0, packed = 0;
};

// Buffers the fast attention kernel reuses from layer to layer.
struct AttentionScratch {
  Tensor q, weights, context;  // (T, d), (H, T, T), (T, d) where the layer keeps none
  AlignedBuffer kernel;        // per-worker row buffers
};

// A pass's working buffers, kept by the model between passes as storage only (their contents are
// unspecified when a pass begins; a pass reads only the rows it writes): typing then neither allocates nor
// zeroes T-row buffers at each keystroke.
struct PassWork {
  Tensor x, ln1, attn, ln2, fch, gate;  // the residual stream and the block's steps' outputs
  Tensor context;                       // (T, H hd) the context vectors a probe changes without keeping them
  AttentionScratch attention;
};

// Whether storage of `have` floats is replaced to hold n: when it is too small, or more than twice n.
bool refit(std::size_t have, std::size_t n) {
  return have < n || have / 2 > n;
}

// n floats of unspecified contents in v's storage, unless refit says otherwise: then new storage with room
// for an eighth more (typing at the end grows the buffers a row at a time).
void resize_storage(std::vector<float>& v, std::size_t n) {
  if (refit(v.capacity(), n)) {
    std::vector<float> fresh;
    fresh.reserve(n + n / 8);
    v.swap(fresh);
  }
  v.resize(n);
}

// t as (rows, cols) in its own storage, contents unspecified.
void reshape(Tensor& t, int rows, int cols) {
  resize_storage(t.data, count(rows, cols));
  t.shape = {rows, cols, 1}, t.rank = 2;
}

// qkv, attention, projection as the chapter-3 `mha` computes it (the scalar reference, P = 0):
// q, k, v (T, d) = h W^T + b; per head weights (H, T, T) = softmax(causal(q k^T / sqrt(d / H))), dropped;
// context (T, d) = weights v; out (T, d) = context W_out^T + b.
Status attention_scalar(const Steps& s, const Config& ac, const GptBlock& b, const LayerKeep& k,
                        const std::vector<std::string>& labels, const Tensor& h, Result& a, Tensor& out,
                        Tensor* context_out) {
  Params params;
  params.query = plain(b.query), params.key = plain(b.key), params.value = plain(b.value);
  params.out_proj = plain(b.out_proj);
  Input in{labels, h};
  Config full = ac;
  full.stages = k.any ? k.stages : 0u;
  if (Status st = attnviz::forward(full, params, in, *s.g, a, Exec{Isa::scalar, 1}); !st.is_ok()) return st;
  std::memcpy(out.ptr(), a.output.ptr(), a.output.size() * sizeof(float));
  if (context_out) std::memcpy(context_out->ptr(), a.context.ptr(), a.context.size() * sizeof(float));
  if (!k.qkv) a.inputs = a.q = a.k = a.v = a.context = a.output = Tensor();
  return Status::ok();
}

// The projections of a layer whose attention is not GPT-2's, rows [P, T): q (T, H hd), k and v (T, KV hd) =
// h W^T + b; then each head's q and k normed (arch.qk_norm, before the rotation as Qwen3 and Gemma 3 do) and
// rotated at its position.
// What the detail layer keeps of those steps (GptLayer::q_proj ...): rows [P, T) are written; null: not kept.
struct QkKeep {
  Tensor *q_proj = nullptr, *k_proj = nullptr, *q_normed = nullptr, *k_normed = nullptr;
};

// The tensors a layer keeps of its q/k steps, rows [0, P) taken from the previous pass's layer.
QkKeep keep_qk_steps(const GptConfig& c, int T, GptLayer& layer, const GptLayer* before, Reuse& reuse) {
  const int QW = c.q_width(), KW = c.kv_width();
  const auto rows = [&](Tensor GptLayer::*t, int width) {
    layer.*t = reuse.rows(T, width, before && !(before->*t).empty() ? &(before->*t) : nullptr);
    return &(layer.*t);
  };
  QkKeep keep;
  keep.q_proj = rows(&GptLayer::q_proj, QW);
  keep.k_proj = rows(&GptLayer::k_proj, KW);
  if (c.arch.qk_norm) {
    keep.q_normed = rows(&GptLayer::q_normed, QW);
    keep.k_normed = rows(&GptLayer::k_normed, KW);
  }
  return keep;
}

void project_qkv(const Steps& s, const GptConfig& c, const GptBlock& b, const Tensor& h, const Rotary& rot,
                 float* q, float* k, float* v, const QkKeep& keep) {
  const int T = s.T, P = s.P, H = c.n_heads, KV = c.kv_heads(), hd = c.head_dim();
  const int QW = c.q_width(), KW = c.kv_width();
  const auto copy = [&](Tensor* to, const float* from, int width) {
    if (to) std::memcpy(row(*to, P), from + count(P, width), count(T - P, width) * sizeof(float));
  };
  s.kern.linear(row(h, P), q + count(P, QW), T - P, b.query.weight, b.query.bias);
  s.kern.linear(row(h, P), k + count(P, KW), T - P, b.key.weight, b.key.bias);
  s.kern.linear(row(h, P), v + count(P, KW), T - P, b.value.weight, b.value.bias);
  copy(keep.q_proj, q, QW);
  copy(keep.k_proj, k, KW);
  if (c.arch.qk_norm) {
    static const Tensor no_shift;
    s.norm_rows(q + count(P, QW), q + count(P, QW), (T - P) * H, hd, b.q_norm, no_shift, c.arch);
    s.norm_rows(k + count(P, KW), k + count(P, KW), (T - P) * KV, hd, b.k_norm, no_shift, c.arch);
    copy(keep.q_normed, q, QW);
    copy(keep.k_normed, k, KW);
  }
  if (rot.dims > 0) {
    rotate(q, P, T, H, hd, QW, rot);
    rotate(k, P, T, KV, hd, KW, rot);
  }
}

// k (T, KV hd) laid out per query head (T, H hd): head h gets key/value head h / (H / KV), as Hugging Face's
// repeat_kv does before the product (what the views show for each head).
Tensor per_query_head(const float* k, int T, int H, int KV, int hd, Reuse* reuse) {
  Tensor out = reuse ? reuse->take(T, H * hd) : Tensor(T, H * hd);
  const int group = H / KV;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h)
      std::memcpy(out.ptr() + count(t, H * hd) + count(h, hd), k + count(t, KV * hd) + count(h / group, hd),
                  count(hd, 1) * sizeof(float));
  return out;
}

// The scalar reference of a layer whose attention is not GPT-2's (P = 0), in plain loops that sum in double:
// project_qkv; per head, scores = q k^T (key/value head h / (H / KV)), scaled by `shape.scale`, masked
// (causal, and outside the window of a sliding-window layer: -inf), softmax; context = weights v; out =
// context W_out^T + b.
Status attention_scalar_generic(const Steps& s, const GptConfig& c, const Config& ac, const Shape& shape,
                                const GptBlock& b, const LayerKeep& k, const Rotary& rot, const Tensor& h,
                                const QkKeep& keep, Result& a, Tensor& out, Tensor* context_out) {
  const int T = s.T, d = c.d_model, H = c.n_heads, KV = c.kv_heads(), hd = c.head_dim();
  const int QW = c.q_width(), KW = c.kv_width(), group = H / KV;
  Tensor q(T, QW), kk(T, KW), v(T, KW);
  project_qkv(s, c, b, h, rot, q.ptr(), kk.ptr(), v.ptr(), keep);
  a.config = ac;
  a.config.stages = k.any ? k.stages : 0u;
  a.shape = shape;
  a.isa = Isa::scalar, a.threads = 1;
  HeadSquares scores(H, T, 0.0f), scaled(H, T, 0.0f), weights(H, T, 0.0f);  // dense: indexed as (H, T, T)
  Tensor context(T, QW);
  std::vector<double> e(static_cast<std::size_t>(T));
  for (int hh = 0; hh < H; ++hh) {
    const int g = hh / group;
    for (int i = 0; i < T; ++i) {
      const std::size_t at = (count(hh, T) + static_cast<std::size_t>(i)) * static_cast<std::size_t>(T);
      double mx = -INFINITY;
      for (int j = 0; j < T; ++j) {
        double dot = 0.0;
        for (int x = 0; x < hd; ++x)
          dot += static_cast<double>(q.ptr()[count(i, QW) + count(hh, hd) + static_cast<std::size_t>(x)]) *
                 kk.ptr()[count(j, KW) + count(g, hd) + static_cast<std::size_t>(x)];
        scores.data[at + static_cast<std::size_t>(j)] = static_cast<float>(dot);
        const bool masked = j > i || (shape.window > 0 && j <= i - shape.window);
        const float sc = masked ? -INFINITY : static_cast<float>(dot) * shape.scale;
        scaled.data[at + static_cast<std::size_t>(j)] = sc;
        if (!masked) mx = std::max(mx, static_cast<double>(sc));
      }
      double sum = 0.0;
      for (int j = 0; j < T; ++j) {
        const float sc = scaled.data[at + static_cast<std::size_t>(j)];
        e[static_cast<std::size_t>(j)] = sc == -INFINITY ? 0.0 : std::exp(static_cast<double>(sc) - mx);
        sum += e[static_cast<std::size_t>(j)];
      }
      for (int j = 0; j < T; ++j)
        weights.data[at + static_cast<std::size_t>(j)] =
            static_cast<float>(e[static_cast<std::size_t>(j)] / sum);
      for (int x = 0; x < hd; ++x) {
        double acc = 0.0;
        for (int j = 0; j <= i; ++j)
          acc += static_cast<double>(weights.data[at + static_cast<std::size_t>(j)]) *
                 v.ptr()[count(j, KW) + count(g, hd) + static_cast<std::size_t>(x)];
        context.ptr()[count(i, QW) + count(hh, hd) + static_cast<std::size_t>(x)] = static_cast<float>(acc);
      }
    }
  }
  const auto finite = [](const auto& t) { return all_finite(t.ptr(), t.ptr() + t.size()); };
  if (!finite(q) || !finite(kk) || !finite(v)) return not_finite("q, k, v");
  if (!finite(scores)) return not_finite("raw scores");
  if (!finite(weights)) return not_finite("weights");
  if (!finite(context)) return not_finite("context");
  const Tensor wo = unpack(b.out_proj.weight);
  ref::linear(context.ptr(), wo.ptr(), b.out_proj.bias.empty() ? nullptr : b.out_proj.bias.ptr(), out.ptr(),
              T, QW, d);
  if (!finite(out)) return not_finite("output");
  if (context_out) std::memcpy(context_out->ptr(), context.ptr(), context.size() * sizeof(float));
  a.weights = std::move(weights);
  if (k.stages & kStageScores) a.scores = std::move(scores);
  if (k.stages & kStageScaled) a.scaled = std::move(scaled);
  if (k.stages & kStageDropped) a.dropped = a.weights;
  if (k.qkv) {
    a.inputs = h;
    a.k = per_query_head(kk.ptr(), T, H, KV, hd, nullptr);
    a.v = per_query_head(v.ptr(), T, H, KV, hd, nullptr);
    a.q = std::move(q);
    a.context = std::move(context);
    a.output = out;
  }
  return Status::ok();
}

// qkv, attention, projection in one fused kernel (simd::run_layer) over rows [P, T), the same as
// attention_scalar computes: k and v (and q when the raw scores are kept) go to the cache, whose rows [0, P)
// the previous pass left there; the layer's kept tensors take rows [0, P) from `before`.
// A layer whose attention is not GPT-2's computes q, k and v first (project_qkv: norms, rotation) and hands
// them to the kernel, with its key/value heads and its window.
Status attention_fast(const Steps& s, const GptConfig& c, const Config& ac, const Shape& shape,
                      const GptBlock& b, const LayerKeep& k, const Rotary& rot, const Tensor& h,
                      GptLayer* before, LayerCache cache, Reuse& reuse, AttentionScratch& scratch,
                      const QkKeep& keep, Result& a, Tensor& out, Tensor* context_out, bool project) {
  const int T = s.T, P = s.P, d = h.shape[1], H = ac.num_heads, KV = c.kv_heads(), hd = c.head_dim();
  const int QW = c.q_width(), KW = c.kv_width();
  const Isa isa = s.kern.isa;
  const auto from = [&](const Tensor Result::*t) { return before ? &(before->attention.*t) : nullptr; };
  const auto from_square = [&](HeadSquares Result::*t) { return before ? &(before->attention.*t) : nullptr; };
  cache.k.resize(count(T, KW)), cache.v.resize(count(T, KW));
  if (k.q) {
    cache.q.resize(count(T, QW));
    scratch.q.data.swap(cache.q);  // borrowed for the job, given back below
  } else {
    resize_storage(scratch.q.data, count(T, QW));
  }
  scratch.q.shape = {T, QW, 1}, scratch.q.rank = 2;
  a.config = ac;
  a.config.stages = k.stages;
  a.shape = shape;
  simd::LayerJob job;
  job.T = T, job.d_in = d, job.heads = H, job.head_dim = hd, job.width = QW, job.out_width = d;
  job.kv_heads = KV, job.kv_width = KW, job.window = shape.window;
  job.first = P, job.has_weights = true, job.causal = true, job.scale = shape.scale, job.pool = s.kern.pool;
  if (!c.plain_attention()) {
    project_qkv(s, c, b, h, rot, scratch.q.ptr(), cache.k.data(), cache.v.data(), keep);
    job.qkv_given = true;
  }
  job.x = h.ptr();
  job.wq = b.query.weight.data.data(), job.wk = b.key.weight.data.data(), job.wv = b.value.weight.data.data();
  job.wo = b.out_proj.weight.data.data();
  if (b.out_proj.weight.dtype != Dtype::f32)
    job.wo16 = b.out_proj.weight.halves(), job.wo16_bf16 = b.out_proj.weight.dtype == Dtype::bf16;
  auto bias = [](const PackedLinear& pl) { return pl.bias.empty() ? nullptr : pl.bias.ptr(); };
  job.bq = bias(b.query), job.bk = bias(b.key), job.bv = bias(b.value), job.bo = bias(b.out_proj);
  job.q = scratch.q.ptr(), job.k = cache.k.data(), job.v = cache.v.data();
  const std::size_t pack_floats = simd::kv_pack_floats(KV, hd, cache.capacity, simd::panel_width(isa));
  if (cache.pack.size() != pack_floats) {  // new storage holds no packed row yet
    cache.pack = AlignedBuffer::uninitialized(pack_floats);
    cache.packed = 0;
  }
  job.kv_pack = cache.pack.data(), job.kv_capacity = cache.capacity, job.kv_packed = cache.packed;
  // The kept squares share one row stride; extending the previous pass, they grow in place (Reuse).
  const int ld = k.any ? reuse.square_stride(T, from_square(&Result::weights)) : T;
  job.square_stride = ld;
  const bool dropped_kept = k.any && (k.stages & kStageDropped);
  if (k.any) {
    a.weights = reuse.square(H, T, ld, from_square(&Result::weights), 0.0f);
    if (k.stages & kStageScores) {
      a.scores = reuse.square(H, T, ld, from_square(&Result::scores), 0.0f);
      job.scores = a.scores.ptr();
    }
    if (k.stages & kStageScaled) {
      a.scaled = reuse.square(H, T, ld, from_square(&Result::scaled), -INFINITY);
      job.scaled = a.scaled.ptr();
    }
    job.weights = a.weights.ptr();
    // without dropout, dropped = weights: its rows [0, P) are the previous pass's, the new ones copied below
    if (dropped_kept) a.dropped = reuse.square(H, T, ld, from_square(&Result::dropped), 0.0f);
  } else {
    resize_storage(scratch.weights.data, count(H, T) * static_cast<std::size_t>(T));
    job.weights = scratch.weights.ptr();
  }
  if (s.train_dropout) {
    a.keep = torch_dropout_mask(*s.g, count(H, T) * static_cast<std::size_t>(T), s.rate, s.rng);
    job.keep = a.keep.data(), job.keep_scale = s.keep_scale;
    if (dropped_kept) job.dropped = a.dropped.ptr();
  }
  Tensor& ctx = k.qkv ? a.context : scratch.context;
  if (k.qkv) {
    ctx = reuse.rows(T, QW, from(&Result::context));
  } else {
    reshape(ctx, T, QW);
  }
  job.context = ctx.ptr();
  job.output = project ? out.ptr() : nullptr;
  const std::size_t scratch_floats = simd::scratch_floats(job, simd::panel_width(isa), s.kern.pool->size());
  if (refit(scratch.kernel.size(), scratch_floats)) scratch.kernel = AlignedBuffer(scratch_floats);
  job.scratch = scratch.kernel.data();
  simd::run_layer(isa, job);
  if (Status st = check_finite_rows(
          {job.q, job.k, job.v, job.scores, job.weights, job.dropped, job.context, job.output}, T, P,
          {QW, KW, d}, H, ld);
      !st.is_ok())
    return st;
  if (context_out) std::memcpy(row(*context_out, P), row(ctx, P), count(T - P, QW) * sizeof(float));
  if (k.qkv) {
    a.inputs = reuse.copy(h, from(&Result::inputs));
    a.q = reuse.copy(scratch.q, from(&Result::q));
    a.k = per_query_head(cache.k.data(), T, H, KV, hd, &reuse);
    a.v = per_query_head(cache.v.data(), T, H, KV, hd, &reuse);
    if (project) a.output = reuse.copy(out, from(&Result::output));  // else the caller's, after its change
  }
  if (k.q) scratch.q.data.swap(cache.q);
  if (dropped_kept && !s.train_dropout)
    for (int hh = 0; hh < H; ++hh)
      for (int i = P; i < T; ++i)
        std::memcpy(a.dropped.row(hh, i), a.weights.row(hh, i), count(T, 1) * sizeof(float));
  a.isa = isa, a.threads = s.threads;
  return Status::ok();
}

// The attention step of every layer: the chapter-3 configuration, the buffers it reuses from layer to layer,
// and the model's cache of keys and values.
struct Attention {
  Config config;
  Shape shape;
  std::vector<std::string> labels;            // the heatmaps' token labels
  AttentionScratch& scratch;                  // the cache's
  std::vector<std::vector<float>>&q, &k, &v;  // the cache's, per layer
  std::vector<AlignedBuffer>& packed;         // the cache's packed keys and values, per layer
  int capacity = 0, reused_packs = 0;  // their room in rows, and the rows of them the previous pass packed

  const GptConfig* model = nullptr;
  Rotary global, local;  // rotary positions of the global and the sliding-window layers, rows [P, T)

  // out (T, d) = out_proj(context), `a` given what layer l keeps: attention_scalar or attention_fast. Rows
  // [P, T) of the context vectors (T, H hd) go to `context_out` too where it is given. Without `project`
  // the fast path leaves `out` (and a kept output) for the caller to compute (a probe changing the context).
  Status forward(const Steps& s, int l, const GptBlock& b, const LayerKeep& keep, const Tensor& h,
                 GptLayer* before, Reuse& reuse, GptLayer& layer, Tensor& out, Tensor* context_out,
                 bool project = true) {
    const GptConfig& c = *model;
    const Shape shape_l = layer_shape(c, config, l);
    const Rotary& rot = c.local_layer(l) ? local : global;
    Result& a = layer.attention;
    const QkKeep qk =
        keep.qkv && !c.plain_attention() ? keep_qk_steps(c, s.T, layer, before, reuse) : QkKeep{};
    if (s.kern.isa == Isa::scalar)
      return c.plain_attention()
                 ? attention_scalar(s, config, b, keep, labels, h, a, out, context_out)
                 : attention_scalar_generic(s, c, config, shape_l, b, keep, rot, h, qk, a, out, context_out);
    const auto at = [l](std::vector<std::vector<float>>& per_layer) -> std::vector<float>& {
      return per_layer[static_cast<std::size_t>(l)];
    };
    return attention_fast(s, c, config, shape_l, b, keep, rot, h, before,
                          {at(q), at(k), at(v), packed[static_cast<std::size_t>(l)], capacity, reused_packs},
                          reuse, scratch, qk, a, out, context_out, project);
  }
};

}  // namespace

struct GptModel::Cache {
  std::vector<int> ids;  // the sequence the cached rows belong to
  GptRequest request;    // what the pass that made them kept
  Isa isa = Isa::scalar;
  std::vector<std::vector<float>> q, k, v;  // per layer, (T, d): k and v always, q with the raw scores
  // Per layer, the same keys and values in the attention GEMMs' panels (simd::LayerJob::kv_pack) with room
  // for pack_capacity rows, so that an appended token packs its own row only.
  std::vector<AlignedBuffer> packed;
  int pack_capacity = 0;
  std::vector<float> hidden;  // (T, d) after the final LayerNorm
  std::uint64_t stamp = 0;    // the pass these rows belong to
  // Storage the last pass freed (one layer's kept tensors): the next incremental pass writes its first layer
  // there and each later layer into the storage of the layer before, so typing allocates nothing new.
  std::vector<std::vector<float>> spare;
  PassWork work;  // the passes' working buffers
};

GptModel::GptModel(std::shared_ptr<const GptWeights> weights, TorchGenerator after_init, GptOptions options)
    : weights_(std::move(weights)), after_init_(after_init), options_(options) {}

void GptModel::forget() {
  cache_.reset();
  side_cache_.reset();
}

void GptModel::forget_side() {
  side_cache_.reset();
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

Status GptModel::forward(const std::vector<int>& ids, const GptRequest& request, PassProbe& probe,
                         GptResult& out) {
  TorchGenerator g = after_init_;
  return run(ids, request, g, out, &probe);
}

std::uint64_t probe_bytes(const GptConfig& c, int tokens) {
  const std::uint64_t T = static_cast<std::uint64_t>(std::max(tokens, 0));
  const std::uint64_t L = static_cast<std::uint64_t>(std::max(c.n_layers, 0));
  const std::uint64_t d = static_cast<std::uint64_t>(std::max(c.d_model, 0));
  const std::uint64_t qw = static_cast<std::uint64_t>(std::max(c.q_width(), 0));
  const std::uint64_t H = static_cast<std::uint64_t>(std::max(c.n_heads, 0));
  // resid (L + 1 points), attn_out and mlp_out (L each) of d floats a row, context (L) of H hd; head_out
  // (L of H x d)
  return sat_mul(
      sat_add(sat_mul(T, sat_add(sat_mul(3 * L + 1, d), sat_mul(L, qw))), sat_mul(sat_mul(L, H), d)),
      sizeof(float));
}

namespace {
// The kernels the pass runs on `exec`'s ISA for these weights (their own ISA where their panels are
// another's).
Kernels kernels_for(const GptWeights& w, const Exec& exec) {
  Kernels k;
  k.isa = resolve(exec.isa);
  if (k.isa != Isa::scalar && w.tok_emb.nr != simd::panel_width(k.isa)) k.isa = w.isa;
  k.pool = k.isa == Isa::scalar ? nullptr : &ThreadPool::shared(resolve_threads(exec.threads));
  return k;
}
}  // namespace

void final_logits(const GptWeights& w, const Exec& exec, const float* resid, int rows, float* logits) {
  if (rows <= 0) return;
  Steps s;
  s.kern = kernels_for(w, exec);
  const int d = w.config.d_model;
  std::vector<float> hidden(count(rows, d));
  s.norm_rows(resid, hidden.data(), rows, d, w.final_scale, w.final_shift, w.config.arch);
  static const Tensor no_bias;
  s.kern.linear(hidden.data(), logits, rows, w.head(), no_bias);
}

void head_outputs(const GptWeights& w, const Exec& exec, int layer, const float* context, float* out) {
  kernels_for(w, exec).head_outputs(context, out, w.config.n_heads,
                                    w.blocks[static_cast<std::size_t>(layer)].out_proj.weight);
}

namespace {

// `t` shaped (T, cols), keeping its first rows where it had that width (row-major: resizing keeps them).
void keep_rows(Tensor& t, int T, int cols) {
  t.data.resize(count(T, cols));
  t.shape = {T, cols, 1}, t.rank = 2;
}

// Rows [P, T) of `from` (T, cols) into `to`, shaped (T, cols) with its rows [0, P) kept.
void capture_rows(Tensor& to, const Tensor& from, int P) {
  const int T = from.shape[0], cols = from.shape[1];
  keep_rows(to, T, cols);
  if (T > P) std::memcpy(row(to, P), row(from, P), count(T - P, cols) * sizeof(float));
}

// Fails when `probe` cannot apply to a pass over T tokens of `c` (options: the model's).
Status check_probe(const PassProbe& probe, const GptConfig& c, const GptOptions& options, int T) {
  if (options.train && c.drop_rate > 0.0)
    return Status::fail("the model runs in train mode, with dropout: its named points need eval mode");
  if (probe.start_layer < 0 || probe.start_layer >= c.n_layers)
    return Status::fail("the pass cannot begin at block " + std::to_string(probe.start_layer) + " of " +
                        std::to_string(c.n_layers));
  if (probe.start_layer > 0 && !probe.start)
    return Status::fail("a pass that begins past block 0 needs the residual stream entering it");
  if (probe.start &&
      (probe.start->rank != 2 || probe.start->shape[0] != T || probe.start->shape[1] != c.d_model))
    return Status::fail("the residual stream a pass begins from has the wrong shape");
  if (probe.logits_row >= T)
    return Status::fail("position " + std::to_string(probe.logits_row) + " is past the text's " +
                        std::to_string(T) + " tokens");
  return Status::ok();
}

}  // namespace

Status GptModel::run(const std::vector<int>& ids, const GptRequest& request, TorchGenerator& g,
                     GptResult& out, PassProbe* probe) {
  const auto start = std::chrono::steady_clock::now();
  if (!weights_) return Status::fail("no model is loaded");
  const GptConfig& c = weights_->config;
  const int T = static_cast<int>(ids.size()), d = c.d_model, L = c.n_layers, V = c.vocab_size;
  std::vector<char> kept;
  if (Status st = check_pass(c, ids, request, kept); !st.is_ok()) return st;
  if (probe) {
    if (Status st = check_probe(*probe, c, options_, T); !st.is_ok()) return st;
    // Its lens rows are this pass's or none, whether or not the pass completes (PassProbe::lens).
    if (probe->capture) probe->lens_position = -1;
  }
  // A pass that changes a named point is a side pass: it starts afresh and leaves the model's cache as it is.
  const bool side = probe && probe->changes();

  // The kernels, and weights packed for their panel width (a copy only when another ISA was asked for).
  const Isa isa = resolve(options_.exec.isa);
  if (isa != Isa::scalar && weights_->tok_emb.nr != simd::panel_width(isa)) {
    weights_ = std::make_shared<const GptWeights>(repacked(*weights_, isa));
    cache_.reset();
    side_cache_.reset();
  }
  const GptWeights& w = *weights_;
  const int threads = isa == Isa::scalar ? 1 : resolve_threads(options_.exec.threads);
  ThreadPool* pool = isa == Isa::scalar ? nullptr : &ThreadPool::shared(threads);

  // The cached prefix: rows [0, P) are taken from the previous pass, which `out` still holds, and the cache's
  // keys, values and queries move over (resizing keeps their first rows in place).
  // A capturing probe extends only the pass it captured.
  const int P =
      side || (probe && probe->capture && probe->stamp != out.stamp) ? 0 : reusable(ids, request, out);
  // A side pass leaves the cache alone and works in storage of its own, kept from the previous side pass
  // (an ablated view runs one a keystroke; fresh buffers each time cost it page faults and zeroing).
  std::unique_ptr<Cache> old = side ? std::move(side_cache_) : std::move(cache_);
  Reuse reuse(out, P, c.context_length, old ? std::move(old->spare) : std::vector<std::vector<float>>());
  auto cache = std::make_unique<Cache>();
  if (P > 0) {
    cache->q = std::move(old->q), cache->k = std::move(old->k), cache->v = std::move(old->v);
    cache->hidden = std::move(old->hidden);
  }
  // The packed keys and values keep their storage while T fits it and it is not more than T grown by an
  // eighth (gpt_pass::grown_square_stride, as the kept squares), else they get that room; their first P rows
  // are the previous pass's when it had the same kernels.
  const int grown = grown_square_stride(T, c.context_length);
  const bool same_packs = old && old->isa == isa && old->pack_capacity >= T && old->pack_capacity <= grown;
  if (old) cache->packed = std::move(old->packed), cache->work = std::move(old->work);
  cache->pack_capacity = same_packs ? old->pack_capacity : grown;
  const int reused_packs = same_packs ? P : 0;
  old.reset();
  cache->q.resize(static_cast<std::size_t>(L)), cache->k.resize(static_cast<std::size_t>(L));
  cache->v.resize(static_cast<std::size_t>(L)), cache->packed.resize(static_cast<std::size_t>(L));
  const auto fail = [&out](Status st) {
    out = GptResult();  // its storage went into this pass
    return st;
  };

  Steps s;
  s.kern = Kernels{isa, pool}, s.threads = threads, s.T = T, s.P = P;
  s.train_dropout = options_.train && c.drop_rate > 0.0;
  s.rate = c.drop_rate, s.keep_scale = dropout_scale(c.drop_rate), s.rng = options_.dropout_rng, s.g = &g;

  GptResult r;
  r.config = c;
  r.options = options_;
  r.ids = ids;
  r.isa = isa;
  r.threads = pool ? pool->size() : 1;  // fewer than asked when the system had no more threads
  r.reused = P;

  Attention attention{attention_config(w, options_, request.stages),
                      {},
                      id_labels(ids),
                      cache->work.attention,
                      cache->q,
                      cache->k,
                      cache->v,
                      cache->packed,
                      cache->pack_capacity,
                      reused_packs,
                      nullptr,
                      {},
                      {}};
  attention.shape = shape_of(attention.config);
  attention.model = &c;
  const GptArch& arch = c.arch;
  if (arch.rotary) {
    attention.global = rotary_table(arch, c.head_dim(), false, P, T);
    if (!arch.local.empty()) attention.local = rotary_table(arch, c.head_dim(), true, P, T);
  }
  const int F = c.ff_width();
  PassWork& work = cache->work;
  Tensor& x = work.x;        // (T, d) the residual stream
  Tensor& ln1 = work.ln1;    // (T, d) norm1's output, attention's input
  Tensor& attn = work.attn;  // (T, d) attention's output
  Tensor& ln2 = work.ln2;    // (T, d) norm2's output, then the MLP's (proj writes over it)
  Tensor& fch = work.fch;    // (T, F) fc's output (a gated MLP's up), the activation in place
  Tensor& gate = work.gate;  // (T, F) a gated MLP's gate (0 rows otherwise)
  for (Tensor* t : {&x, &ln1, &attn, &ln2}) reshape(*t, T, d);
  reshape(fch, T, F);
  reshape(gate, arch.mlp == MlpKind::gated ? T : 0, F);

  // The probe's captures, one per named point.
  const bool capture = probe && probe->capture;
  if (capture) {
    probe->resid.resize(static_cast<std::size_t>(L + 1));
    for (auto* points : {&probe->context, &probe->attn_out, &probe->mlp_out})
      points->resize(static_cast<std::size_t>(L));
  }
  const auto point = [&](std::vector<Tensor> PassProbe::*points, int l, const Tensor& from) {
    if (capture) capture_rows((probe->*points)[static_cast<std::size_t>(l)], from, P);
  };
  const bool contexts = capture || (probe && probe->edit_context);
  // Attribution's point (PassProbe::head_out): each head's output at one position, kept where this pass
  // extends the one that computed them there (the position is before the new rows), else computed from the
  // context vectors at the position (a new row, or a kept one: a position chosen earlier in the text costs
  // one computation, not one a keystroke).
  const int head_at = capture ? probe->head_position : -1;
  const bool heads_kept = head_at >= 0 && head_at < P && probe->head_out_position == head_at;
  if (capture) {
    probe->head_out.resize(static_cast<std::size_t>(L));
    // a pass from a later block keeps the earlier layers' only where they are for this position
    if (probe->head_out_position != head_at)
      for (int l = 0; l < std::min(probe->start_layer, L); ++l)
        probe->head_out[static_cast<std::size_t>(l)] = Tensor();
    probe->head_out_position = -1;
  }
  const auto head_point = [&](int l, const GptBlock& b, const Tensor* context) {
    if (!capture || heads_kept) return;
    Tensor& o = probe->head_out[static_cast<std::size_t>(l)];
    if (head_at >= 0 && head_at < T) {
      reshape(o, c.n_heads, d);
      s.kern.head_outputs(row(*context, head_at), o.ptr(), c.n_heads, b.out_proj.weight);
    } else {
      o = Tensor();
    }
  };

  // The steps, one a line (T, P, d, H, V: the legend at the top of this file; F = the MLP's width).
  // embeddings: x (T, d) = drop(tok_emb[ids] + pos_emb[0..T)), or tok_emb[ids] (* sqrt(d)) with rotary
  // positions, which the attention applies to q and k; or the residual stream a probe's pass begins from
  const int first_block = probe ? probe->start_layer : 0;
  if (probe && probe->start) {
    std::memcpy(x.ptr(), probe->start->ptr(), x.size() * sizeof(float));
  } else {
    s.encoder(x, ids, w);
    s.dropout(x);
  }

  for (int l = first_block; l < L; ++l) {
    const GptBlock& b = w.blocks[static_cast<std::size_t>(l)];
    const LayerKeep k = layer_keep(request, kept, l);
    GptLayer* before = reuse.before(l);  // this layer in the previous pass, whose rows [0, P) are copied
    GptLayer layer;
    layer.index = l;
    Result& a = layer.attention;
    point(&PassProbe::resid, l, x);  // resid[l] = x
    if (k.residuals) layer.resid_in = reuse.copy(x, before ? &before->resid_in : nullptr);

    s.norm(x, ln1, b.norm1_scale, b.norm1_shift, arch);  // ln1 (T, d) = norm1(x)
    // attn (T, d) = out_proj(context): q, k, v (T, d) = ln1 W^T + b; per head (H, T, T) weights =
    // drop(causal softmax(q k^T / sqrt(d / H))); context (T, d) = weights v. Other architectures: q (T, H
    // hd), k, v (T, KV hd), normed and rotated; head h reads key/value head h / (H / KV), within its window.
    Tensor* ctx = nullptr;
    if (contexts) {
      ctx = capture ? &probe->context[static_cast<std::size_t>(l)] : &work.context;
      keep_rows(*ctx, T, c.q_width());
    }
    // A probe that will change this layer's context vectors has the projection computed once, after.
    const bool edits = probe && probe->edit_context && probe->edits && probe->edits(l);
    if (Status st = attention.forward(s, l, b, k, ln1, before, reuse, layer, attn, ctx, !edits); !st.is_ok())
      return fail(st);
    // A probe's change to the context vectors (ablation, patching): attn (T, d) = context W_out^T + b again
    if (probe && probe->edit_context && (probe->edit_context(l, *ctx) || edits)) {
      s.kern.linear(ctx->ptr(), attn.ptr(), T, b.out_proj.weight, b.out_proj.bias);
      if (!all_finite(attn.ptr(), attn.ptr() + attn.size())) return fail(not_finite("output"));
      if (k.qkv) a.context = *ctx, a.output = attn;
    }
    point(&PassProbe::attn_out, l, attn);  // attn_out[l] = attn
    head_point(l, b, ctx);                 // head_out[l] = each head's output at head_position
    s.dropout(attn);                       // attn (T, d) = drop(attn)
    if (arch.residual == ResidualKind::sandwich)
      s.norm(attn, attn, b.post_attn_norm, b.norm2_shift, arch);       // attn (T, d) = post_attn_norm(attn)
    if (arch.residual != ResidualKind::parallel) s.residual(x, attn);  // x (T, d) += attn
    if (!w.config.attention_only) {                                    // an attention-only block ends here
      s.norm(x, ln2, b.norm2_scale, b.norm2_shift, arch);              // ln2 (T, d) = norm2(x)
      if (arch.mlp == MlpKind::gated) {
        s.matmul(ln2, gate, b.gate);   // gate (T, F) = ln2 W_gate^T
        s.matmul(ln2, fch, b.fc);      // fch (T, F) = ln2 W_up^T
        s.activation(gate, arch.act);  // gate (T, F) = act(gate)
        s.multiply(fch, gate);         // fch (T, F) *= gate
      } else {
        s.matmul(ln2, fch, b.fc);     // fch (T, F) = ln2 W_fc^T + b
        s.activation(fch, arch.act);  // fch (T, F) = act(fch)
      }
      s.matmul(fch, ln2, b.proj);          // ln2 (T, d) = fch W_proj^T + b
      point(&PassProbe::mlp_out, l, ln2);  // mlp_out[l] = ln2
      s.dropout(ln2);                      // ln2 (T, d) = drop(ln2)
      if (arch.residual == ResidualKind::sandwich)
        s.norm(ln2, ln2, b.post_ff_norm, b.norm2_shift, arch);  // ln2 (T, d) = post_ff_norm(ln2)
      if (arch.residual == ResidualKind::parallel)
        s.parallel_residual(x, ln2, attn);  // x (T, d) = (ln2 + attn) + x
      else
        s.residual(x, ln2);  // x (T, d) += ln2
    } else if (arch.residual == ResidualKind::parallel) {
      s.residual(x, attn);
    }

    if (k.any) {
      if (k.residuals) layer.resid_out = reuse.copy(x, before ? &before->resid_out : nullptr);
      a.tokens = attention.labels;
      r.layers.push_back(std::move(layer));
    }
    if (before) reuse.give(*before);  // copied: its storage serves the next layer
  }

  point(&PassProbe::resid, L, x);          // resid[L] = x
  if (capture && w.config.attention_only)  // no MLP: no point to capture
    for (Tensor& m : probe->mlp_out) m = Tensor();

  // final layer norm: hidden (T, d) = final_norm(x), kept in the cache
  cache->hidden.resize(count(T, d));
  s.norm_rows(row(x, P), cache->hidden.data() + count(P, d), T - P, d, w.final_scale, w.final_shift, arch);
  // head: logits (T, V) = hidden W_head^T with all_logits (rows [P, T) computed), else (1, V) for the last
  // row, or for the one row a probe asks for
  const int one_row = probe && probe->logits_row >= 0 ? probe->logits_row : T - 1;
  const int first_logit = request.all_logits ? P : one_row;
  const int rows = request.all_logits ? T : 1;
  const int last_logit = request.all_logits ? T : one_row + 1;
  Tensor* previous_logits = reuse.previous_logits();
  r.logits = reuse.rows(rows, V, request.all_logits ? previous_logits : nullptr);
  if (previous_logits) reuse.give(*previous_logits);
  // A keystroke's lens (PassProbe::lens): the new position at every point, the pass's own row last, in one
  // product; each row's logits are the same bits whichever rows share the product.
  const bool fused_lens = capture && probe->lens && probe->start_layer == 0 && T - P == 1 &&
                          first_logit == T - 1 && last_logit == T;
  static const Tensor no_bias;
  if (fused_lens) {
    Tensor& lens = probe->lens_logits;
    reshape(lens, L + 1, V);
    std::vector<float> normed(count(L + 1, d));
    for (int k = 0; k < L; ++k)
      s.norm_rows(row(probe->resid[static_cast<std::size_t>(k)], T - 1), normed.data() + count(k, d), 1, d,
                  w.final_scale, w.final_shift, arch);
    std::memcpy(normed.data() + count(L, d), cache->hidden.data() + count(T - 1, d),
                count(1, d) * sizeof(float));
    s.kern.linear(normed.data(), lens.ptr(), L + 1, w.head(), no_bias);
    std::memcpy(row(r.logits, request.all_logits ? T - 1 : 0), row(lens, L), count(1, V) * sizeof(float));
    probe->lens_position = T - 1;
  } else if (first_logit < last_logit) {
    s.kern.linear(cache->hidden.data() + count(first_logit, d),
                  row(r.logits, request.all_logits ? first_logit : 0), last_logit - first_logit, w.head(),
                  no_bias);
  }
  r.next = top_tokens(row(r.logits, request.all_logits ? one_row : 0), V, request.top_k, nullptr, s.kern.isa);
  if (!all_finite(row(r.logits, request.all_logits ? first_logit : 0), r.logits.ptr() + r.logits.size()))
    return fail(Status::fail("the logits are not finite: the weights overflow float32"));

  static std::atomic<std::uint64_t> passes{0};
  r.stamp = ++passes;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (capture) probe->stamp = r.stamp, probe->head_out_position = head_at;
  if (!side && !s.train_dropout && isa != Isa::scalar) {
    cache->ids = ids;
    cache->request = request;
    cache->isa = isa;
    cache->stamp = r.stamp;
    cache->spare = reuse.release(6);
    cache_ = std::move(cache);
  } else if (side) {  // storage only: no pass extends a side pass
    cache->isa = isa;
    cache->spare = reuse.release(6);
    side_cache_ = std::move(cache);
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
