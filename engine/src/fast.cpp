// The fast path's host side: packs weights, sizes buffers, fills a LayerJob and runs it on the chosen ISA.
#include "fast.hpp"

#include <cstdint>
#include <cstring>

#include "simd/layer.hpp"
#include "simd/pack.hpp"
#include "simd/packed.hpp"

namespace attnviz {
namespace {

AlignedFloats pack_weight(const Linear& l, int nr) {
  const int out = l.weight.shape[0], in = l.weight.shape[1];
  AlignedFloats panels(simd::panel_floats(out, in, nr));
  simd::pack_nk(l.weight.ptr(), out, in, in, nr, panels.data());
  return panels;
}

AlignedFloats pack_bias(const Linear& l, int nr) {
  if (l.bias.empty()) return {};
  const int out = static_cast<int>(l.bias.size());
  AlignedFloats padded(static_cast<std::size_t>(simd::panels(out, nr) * nr));
  simd::pack_bias(l.bias.ptr(), out, nr, padded.data());
  return padded;
}

std::shared_ptr<const PackedWeights> make_packed(const Params& p, Isa isa) {
  auto pw = std::make_shared<PackedWeights>();
  pw->isa = isa;
  pw->nr = simd::panel_width(isa);
  if (!p.query.weight.empty()) {
    pw->q = pack_weight(p.query, pw->nr), pw->bq = pack_bias(p.query, pw->nr);
    pw->k = pack_weight(p.key, pw->nr), pw->bk = pack_bias(p.key, pw->nr);
    pw->v = pack_weight(p.value, pw->nr), pw->bv = pack_bias(p.value, pw->nr);
  }
  if (!p.out_proj.weight.empty())
    pw->o = pack_weight(p.out_proj, pw->nr), pw->bo = pack_bias(p.out_proj, pw->nr);
  return pw;
}

const float* data_or_null(const AlignedFloats& v) {
  return v.empty() ? nullptr : v.data();
}

// Storage of earlier results, reused so that a keystroke's recompute does not zero-fill and page-fault tens
// of megabytes of fresh memory (the fast kernels write every cell). Per thread; a handful of buffers at most.
thread_local std::vector<std::vector<float>> spare;

// A rank-3 tensor whose contents are unspecified (the kernels overwrite all of it).
Tensor scratch_tensor(int d0, int d1, int d2) {
  const std::size_t n = static_cast<std::size_t>(d0) * d1 * d2;
  Tensor t;
  auto best = spare.end();
  for (auto it = spare.begin(); it != spare.end(); ++it)
    if (it->capacity() >= n && (best == spare.end() || it->capacity() < best->capacity())) best = it;
  if (best != spare.end()) {
    t.data = std::move(*best);
    spare.erase(best);
  }
  t.data.resize(n);
  t.shape = {d0, d1, d2};
  t.rank = 3;
  return t;
}

Tensor scratch_matrix(int rows, int cols) {
  Tensor t = scratch_tensor(rows, cols, 1);
  t.rank = 2;
  return t;
}

}  // namespace

bool all_finite(const float* begin, const float* end) {
  std::uint32_t special = 0;
  for (const float* p = begin; p != end; ++p) {
    std::uint32_t bits;
    std::memcpy(&bits, p, sizeof bits);
    special |= static_cast<std::uint32_t>((bits & 0x7F800000u) == 0x7F800000u);
  }
  return special == 0;
}

void recycle(Result& old) {
  const auto give = [](std::vector<float>& data) {
    if (data.capacity() < (1u << 14)) return;  // small buffers are cheap to allocate
    spare.push_back(std::move(data));
    data = {};
  };
  for (Tensor* t : {&old.q, &old.k, &old.v, &old.context, &old.output}) {
    give(t->data);
    if (t->data.empty()) *t = Tensor();
  }
  for (HeadSquares* t : {&old.scores, &old.scaled, &old.weights, &old.dropped}) {
    give(t->data);
    if (t->data.empty()) *t = HeadSquares();
  }
  constexpr std::size_t kMaxSpare = 12;
  if (spare.size() > kMaxSpare) spare.erase(spare.begin(), spare.end() - kMaxSpare);
}

void release_recycled() {
  std::vector<std::vector<float>>().swap(spare);
}

void pack(Params& p, const Exec& exec) {
  const Isa isa = resolve(exec.isa);
  p.packed = isa == Isa::scalar ? nullptr : make_packed(p, isa);
}

void forward_fast(const Config& c, const Params& p, const Input& in, Isa isa, int threads, Result& r) {
  const Shape& s = r.shape;
  const int T = in.x.shape[0];
  std::shared_ptr<const PackedWeights> packed = p.packed;
  if (!packed || packed->isa != isa) packed = make_packed(p, isa);

  simd::LayerJob job;
  job.T = T, job.d_in = c.d_in, job.heads = s.heads, job.head_dim = s.head_dim, job.width = s.width;
  job.out_width = s.out_width, job.has_weights = s.has_weights, job.causal = s.causal, job.scale = s.scale;
  job.x = in.x.ptr();
  job.wq = data_or_null(packed->q), job.wk = data_or_null(packed->k), job.wv = data_or_null(packed->v);
  job.wo = data_or_null(packed->o);
  job.bq = data_or_null(packed->bq), job.bk = data_or_null(packed->bk), job.bv = data_or_null(packed->bv);
  job.bo = data_or_null(packed->bo);
  if (s.has_weights) {
    r.q = scratch_matrix(T, s.width), r.k = scratch_matrix(T, s.width), r.v = scratch_matrix(T, s.width);
    job.q = r.q.ptr(), job.k = r.k.ptr(), job.v = r.v.ptr();
  } else {
    r.q = r.k = r.v = in.x;
  }
  const int H = s.heads;
  const auto square = [&] { return HeadSquares::adopt(scratch_tensor(H, T, T)); };  // dense
  if (c.stages & kStageScores) r.scores = square(), job.scores = r.scores.ptr();
  if (c.stages & kStageScaled) r.scaled = square(), job.scaled = r.scaled.ptr();
  r.weights = square();
  job.weights = r.weights.ptr();
  if (s.dropout) {
    job.keep = r.keep.data();
    job.keep_scale = dropout_scale(c.dropout);
    if (c.stages & kStageDropped) r.dropped = square(), job.dropped = r.dropped.ptr();
  }
  r.context = scratch_matrix(T, s.width);
  job.context = r.context.ptr();
  if (s.out_proj) r.output = scratch_matrix(T, s.out_width), job.output = r.output.ptr();

  ThreadPool& pool = ThreadPool::shared(threads);
  job.pool = &pool;
  AlignedFloats scratch(simd::scratch_floats(job, packed->nr, pool.size()));
  job.scratch = scratch.data();
  simd::run_layer(isa, job);  // end_forward fills output without out_proj, dropped without dropout
}

}  // namespace attnviz
