// Weights in the fast kernels' panel layout: aligned storage, file element types widened to float, packing
// from any source layout and back.
#include <algorithm>
#include <cstring>
#include <new>

#include "attnviz/gpt.hpp"
#include "common/huge_pages.hpp"
#include "simd/pack.hpp"
#include "simd/packed.hpp"

namespace attnviz {

AlignedBuffer::AlignedBuffer(std::size_t n) : AlignedBuffer(uninitialized(n)) {
  if (n != 0) std::memset(data_.get(), 0, n * sizeof(float));
}

AlignedBuffer AlignedBuffer::uninitialized(std::size_t n) {
  AlignedBuffer b;
  if (n == 0) return b;
  b.data_.reset(static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t{64})));
  b.size_ = n;
  prefer_huge_pages(b.data_.get(), n * sizeof(float));  // weights and packed keys: hundreds of MB
  return b;
}

void AlignedBuffer::Free::operator()(float* p) const {
  ::operator delete[](p, std::align_val_t{64});
}

std::size_t dtype_size(Dtype t) {
  return t == Dtype::f32 ? 4 : 2;
}

const char* to_string(Dtype t) {
  switch (t) {
    case Dtype::f32:
      return "F32";
    case Dtype::f16:
      return "F16";
    case Dtype::bf16:
      return "BF16";
  }
  return "?";
}

namespace {

float from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// IEEE half to float, exactly: subnormals, infinities and NaN included.
float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  if (exp == 0x1F) return from_bits(sign | 0x7F800000u | (mant << 13));
  if (exp != 0) return from_bits(sign | ((exp + 112) << 23) | (mant << 13));
  // zero or subnormal: mant * 2^-24, exact in float
  const float v = static_cast<float>(mant) * 0x1p-24f;
  return sign ? -v : v;
}

std::uint16_t load_u16(const unsigned char* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

}  // namespace

float widen16(std::uint16_t bits, Dtype t) {
  return t == Dtype::bf16 ? from_bits(static_cast<std::uint32_t>(bits) << 16) : half_to_float(bits);
}

float PackedMatrix::at(int o, int i) const {
  const std::size_t k = index(o, i);
  return dtype == Dtype::f32 ? data.data()[k] : widen16(halves()[k], dtype);
}

float load_element(const unsigned char* bytes, Dtype t, std::size_t i) {
  switch (t) {
    case Dtype::f32: {
      const unsigned char* p = bytes + 4 * i;
      return from_bits(static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
                       static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24);
    }
    case Dtype::f16:
      return half_to_float(load_u16(bytes + 2 * i));
    case Dtype::bf16:
      return from_bits(static_cast<std::uint32_t>(load_u16(bytes + 2 * i)) << 16);
  }
  return 0.0f;
}

void widen(const unsigned char* bytes, Dtype t, std::size_t first, std::size_t n, float* out) {
  switch (t) {
    case Dtype::f32:  // little-endian hosts only (x86-64, WebAssembly): the bytes are the floats
      std::memcpy(out, bytes + 4 * first, n * sizeof(float));
      return;
    case Dtype::f16:
      for (std::size_t i = 0; i < n; ++i) out[i] = half_to_float(load_u16(bytes + 2 * (first + i)));
      return;
    case Dtype::bf16:
      for (std::size_t i = 0; i < n; ++i)
        out[i] = from_bits(static_cast<std::uint32_t>(load_u16(bytes + 2 * (first + i))) << 16);
      return;
  }
}

namespace {

// A matrix's panels, not yet written: the packers write every float, the zero padding past `out` included.
PackedMatrix panels_for(int out, int in, Isa isa) {
  PackedMatrix m;
  m.out = out;
  m.in = in;
  m.nr = simd::panel_width(resolve(isa));
  m.data = AlignedBuffer::uninitialized(simd::panel_floats(out, in, m.nr));
  return m;
}

}  // namespace

// The panels of a 16-bit source kept in its own type: the same layout, the file's bits copied (padding 0).
PackedMatrix pack_matrix16(const MatrixSource& src, bool transposed, Isa isa) {
  PackedMatrix m;
  m.out = transposed ? src.cols : src.rows;
  m.in = transposed ? src.rows : src.cols;
  m.nr = simd::panel_width(resolve(isa));
  m.dtype = src.dtype;
  const std::size_t n = simd::panel_floats(m.out, m.in, m.nr);
  m.half = AlignedBuffer((n + 1) / 2);
  auto* dst = reinterpret_cast<std::uint16_t*>(m.half.data());
  const int nr = m.nr, in = m.in, out = m.out;
  for (int o = 0; o < out; ++o) {
    std::uint16_t* panel = dst + static_cast<std::size_t>(o / nr) * in * nr + o % nr;
    for (int k = 0; k < in; ++k) {
      const std::size_t e = transposed ? static_cast<std::size_t>(k) * out + static_cast<std::size_t>(o)
                                       : static_cast<std::size_t>(o) * in + static_cast<std::size_t>(k);
      panel[static_cast<std::size_t>(k) * nr] = load_u16(src.bytes + 2 * e);
    }
  }
  return m;
}

PackedMatrix pack_matrix(const MatrixSource& src, bool transposed, Isa isa, bool keep_dtype) {
  if (keep_dtype && src.dtype != Dtype::f32) return pack_matrix16(src, transposed, isa);
  PackedMatrix m = panels_for(transposed ? src.cols : src.rows, transposed ? src.rows : src.cols, isa);
  const int nr = m.nr, in = m.in, out = m.out;
  float* dst = m.data.data();
  const int np = simd::panels(out, nr);
  if (transposed) {
    // (in, out): each source row holds one k of every panel, nr contiguous values at a time
    for (int p = 0; p < np; ++p) {
      const int cols = std::min(nr, out - p * nr);
      float* panel = dst + static_cast<std::size_t>(p) * in * nr;
      for (int k = 0; k < in; ++k) {
        float* at = panel + static_cast<std::size_t>(k) * nr;
        widen(src.bytes, src.dtype, static_cast<std::size_t>(k) * out + static_cast<std::size_t>(p) * nr,
              static_cast<std::size_t>(cols), at);
        std::fill(at + cols, at + nr, 0.0f);
      }
    }
    return m;
  }
  // (out, in): widen the panel's nr rows, then interleave them k-major
  std::vector<float> rows(static_cast<std::size_t>(nr) * in);
  for (int p = 0; p < np; ++p) {
    const int cols = std::min(nr, out - p * nr);
    widen(src.bytes, src.dtype, static_cast<std::size_t>(p) * nr * in, static_cast<std::size_t>(cols) * in,
          rows.data());
    float* panel = dst + static_cast<std::size_t>(p) * in * nr;
    for (int c = 0; c < cols; ++c) {
      const float* row = rows.data() + static_cast<std::size_t>(c) * in;
      for (int k = 0; k < in; ++k) panel[static_cast<std::size_t>(k) * nr + c] = row[k];
    }
    for (int k = 0; k < in && cols < nr; ++k)
      std::fill(panel + static_cast<std::size_t>(k) * nr + cols, panel + static_cast<std::size_t>(k + 1) * nr,
                0.0f);
  }
  return m;
}

PackedMatrix pack_matrix(const Tensor& out_in, Isa isa) {
  // The rows are floats already: packed straight from the tensor, padding included.
  PackedMatrix m = panels_for(out_in.shape[0], out_in.shape[1], isa);
  simd::pack_nk(out_in.ptr(), m.out, m.in, m.in, m.nr, m.data.data());
  return m;
}

Tensor unpack(const PackedMatrix& m) {
  Tensor t(m.out, m.in);
  for (int o = 0; o < m.out; ++o)
    for (int i = 0; i < m.in; ++i) t.at(o, i) = m.at(o, i);
  return t;
}

PackedMatrix repack(const PackedMatrix& m, Isa isa) {
  if (m.empty() || simd::panel_width(resolve(isa)) == m.nr) {
    PackedMatrix copy;
    copy.out = m.out, copy.in = m.in, copy.nr = m.nr, copy.dtype = m.dtype;
    copy.data = AlignedBuffer::uninitialized(m.data.size());
    if (!m.data.empty()) std::memcpy(copy.data.data(), m.data.data(), m.data.size() * sizeof(float));
    copy.half = AlignedBuffer::uninitialized(m.half.size());
    if (!m.half.empty()) std::memcpy(copy.half.data(), m.half.data(), m.half.size() * sizeof(float));
    return copy;
  }
  if (m.dtype != Dtype::f32) {
    // the (out, in) elements in their 16-bit type, repacked for the other panel width
    std::vector<std::uint16_t> rows(static_cast<std::size_t>(m.out) * static_cast<std::size_t>(m.in));
    for (int o = 0; o < m.out; ++o)
      for (int i = 0; i < m.in; ++i) rows[static_cast<std::size_t>(o) * m.in + i] = m.halves()[m.index(o, i)];
    return pack_matrix(
        MatrixSource{reinterpret_cast<const unsigned char*>(rows.data()), m.dtype, m.out, m.in}, false, isa,
        true);
  }
  return pack_matrix(unpack(m), isa);
}

std::uint64_t packed_bytes(const GptConfig& c, bool tied_head, Isa isa, Dtype matrices) {
  const std::uint64_t V = static_cast<std::uint64_t>(c.vocab_size), D = static_cast<std::uint64_t>(c.d_model),
                      L = static_cast<std::uint64_t>(c.n_layers);
  const std::uint64_t nr = static_cast<std::uint64_t>(simd::panel_width(resolve(isa)));
  // in floats: a 16-bit matrix takes half (its storage rounded up to whole floats)
  const bool half = matrices != Dtype::f32;
  const auto matrix = [nr, half](std::uint64_t out, std::uint64_t in) {
    const std::uint64_t n = (out + nr - 1) / nr * nr * in;
    return half ? (n + 1) / 2 : n;
  };
  const GptArch& a = c.arch;
  const std::uint64_t qw = static_cast<std::uint64_t>(c.q_width()),
                      kw = static_cast<std::uint64_t>(c.kv_width()),
                      f = static_cast<std::uint64_t>(c.ff_width()),
                      hd = static_cast<std::uint64_t>(c.head_dim());
  const std::uint64_t norm = a.norm == NormKind::layer_norm ? 2 * D : D;  // scale (and shift)
  std::uint64_t floats = matrix(V, D) * (tied_head ? 1 : 2);  // token embedding (and an untied head)
  if (!a.rotary) floats += static_cast<std::uint64_t>(c.context_length) * D;  // the position table
  std::uint64_t block = matrix(qw, D) + 2 * matrix(kw, D) + matrix(D, qw) + (c.qkv_bias ? qw + 2 * kw : 0) +
                        (a.out_bias ? D : 0) + (a.qk_norm ? 2 * hd : 0);
  if (!c.attention_only)
    block +=
        (a.mlp == MlpKind::gated ? 2 * matrix(f, D) : matrix(f, D)) + matrix(D, f) + (a.mlp_bias ? f + D : 0);
  // norm1 and norm2 (an attention-only block: norm1), each with its post-norm where the norms are sandwiched
  block += (c.attention_only ? 1 : 2) * norm * (a.residual == ResidualKind::sandwich ? 2 : 1);
  floats += L * block + norm;  // and the final norm
  return floats * sizeof(float);
}

}  // namespace attnviz
