// torch_rng's vector kernels for AVX2 + FMA (this file's -m flags come from CMake; it is also what AVX-512
// processors run). PyTorch 1.13's x86 build evaluates normal_fill_16_AVX2 with avx_mathfun.h's log256_ps and
// sincos256_ps (Cephes single-precision polynomials), compiled by GCC with -mfma and contraction on: the
// operation list below follows the instructions in Debian's libtorch_cpu.so (objdump of the AVX2
// normal_stub), one vfmadd wherever GCC fused a multiply into the following add or subtract, and a rounded
// multiply wherever it did not. The scalar twin, normal_block() in torch_rng.cpp, performs the same
// operations in the same order; the tests check both against PyTorch bit for bit.
#include <algorithm>
#include <cmath>
#include <xsimd/xsimd.hpp>

#include "rng.hpp"

namespace attnviz::simd {
namespace {

using A = xsimd::fma3<xsimd::avx2>;
using vf = xsimd::batch<float, A>;
using vi = xsimd::batch<std::int32_t, A>;

inline vi as_int(vf x) {
  return xsimd::bitwise_cast<vi>(x);
}
inline vf as_float(vi x) {
  return xsimd::bitwise_cast<vf>(x);
}
// x where the mask is all ones, +0 where it is zero (avx_mathfun's _mm256_and_ps with a compare mask).
inline vf and_mask(vf x, vi mask) {
  return as_float(as_int(x) & mask);
}
inline vi to_mask(xsimd::batch_bool<float, A> m) {
  return as_int(xsimd::select(m, as_float(vi(-1)), vf(0.0f)));
}

// log(u) for u in (0, 1] (Cephes logf as in avx_mathfun's log256_ps; u > 0, so its NaN mask is dropped).
inline vf log_cephes(vf u) {
  const vf one(1.0f);
  vf x = xsimd::max(u, as_float(vi(0x00800000)));  // the smallest normal float
  const vi exponent = (as_int(x) >> 23) + vi(-127);
  x = as_float((as_int(x) & vi(static_cast<std::int32_t>(0x807fffffu))) |
               vi(0x3f000000));  // mantissa in [0.5, 1)
  vf e = xsimd::batch_cast<float>(exponent) + one;
  const vi small = to_mask(x < vf(0.707106781186547524f));  // then e -= 1, x = x + x - 1; else x = x - 1
  const vf tmp = and_mask(x, small);
  x = x + vf(-1.0f);
  e = e - and_mask(one, small);
  x = tmp + x;
  const vf z = x * x;
  vf y(7.0376836292e-2f);
  y = xsimd::fma(x, y, vf(-1.1514610310e-1f));
  y = xsimd::fma(x, y, vf(1.1676998740e-1f));
  y = xsimd::fma(x, y, vf(-1.2420140846e-1f));
  y = xsimd::fma(x, y, vf(1.4249322787e-1f));
  y = xsimd::fma(x, y, vf(-1.6668057665e-1f));
  y = xsimd::fma(x, y, vf(2.0000714765e-1f));
  y = xsimd::fma(x, y, vf(-2.4999993993e-1f));
  y = xsimd::fma(x, y, vf(3.3333331174e-1f));
  y = x * y;
  y = xsimd::fma(y, z, e * vf(-2.12194440e-4f));
  y = xsimd::fnma(z, vf(0.5f), y);  // y - z * 0.5
  x = x + y;
  return xsimd::fma(e, vf(0.693359375f), x);
}

// sin and cos of theta in [0, 2 pi) (Cephes sinf/cosf as in avx_mathfun's sincos256_ps).
inline void sincos_cephes(vf theta, vf& sin_out, vf& cos_out) {
  const vf ax = as_float(as_int(theta) & vi(0x7fffffff));
  vi sign_sin = as_int(theta) & vi(static_cast<std::int32_t>(0x80000000u));
  vi j = xsimd::batch_cast<std::int32_t>(ax * vf(1.27323954473516f)) + vi(1);  // 4 / pi, truncated
  j = j & vi(~1);
  const vi poly =
      xsimd::select((j & vi(2)) == vi(0), vi(-1), vi(0));  // all ones: the sine polynomial is the sine
  const vf y = xsimd::batch_cast<float>(j);
  const vi sign_cos = (~(j + vi(-2)) & vi(4)) << 29;
  sign_sin = sign_sin ^ ((j & vi(4)) << 29);
  vf x = xsimd::fma(y, vf(-0.78515625f), ax);  // extended-precision reduction by pi / 4
  x = xsimd::fma(y, vf(-2.4187564849853515625e-4f), x);
  x = xsimd::fma(y, vf(-3.77489497744594108e-8f), x);
  const vf z = x * x;
  vf c = xsimd::fma(z, vf(2.443315711809948e-5f), vf(-1.388731625493765e-3f));
  c = xsimd::fma(z, c, vf(4.166664568298827e-2f));
  c = z * c;
  c = xsimd::fms(c, z, z * vf(0.5f));
  c = c + vf(1.0f);
  vf s = xsimd::fma(z, vf(-1.9515295891e-4f), vf(8.3321608736e-3f));
  s = xsimd::fma(z, s, vf(-1.6666654611e-1f));
  s = z * s;
  s = xsimd::fma(s, x, x);
  const vf sin2 = and_mask(s, poly), sin1 = and_mask(c, ~poly);
  s = s - sin2;
  c = c - sin1;
  sin_out = as_float(as_int(sin2 + sin1) ^ sign_sin);
  cos_out = as_float(as_int(s + c) ^ sign_cos);
}

}  // namespace

void uniform_from_bits_avx2(const std::uint32_t* bits, float* out, std::size_t n, float from, float range) {
  constexpr std::size_t w = vf::size;
  const vf vfrom(from), vrange(range);
  std::size_t i = 0;
  for (; i + w <= n; i += w) {
    const vi b = vi::load_unaligned(reinterpret_cast<const std::int32_t*>(bits + i)) & vi(0xFFFFFF);
    xsimd::fma(xsimd::batch_cast<float>(b) * vf(0x1p-24f), vrange, vfrom).store_unaligned(out + i);
  }
  for (; i < n; ++i) {
    const float x = static_cast<float>(bits[i] & 0xFFFFFFu) * 0x1p-24f;
    out[i] = std::fma(x, range, from);
  }
}

void normal_blocks_avx2(float* data, std::size_t blocks, float mean, float std) {
  const vf vmean(mean), vstd(std);
  for (std::size_t b = 0; b < blocks; ++b, data += 16) {
    const vf u1 = vf(1.0f) - vf::load_unaligned(data);
    const vf theta = vf(6.2831854820251465f) * vf::load_unaligned(data + 8);  // float(2 pi)
    const vf radius = xsimd::sqrt(vf(-2.0f) * log_cephes(u1));
    vf s, c;
    sincos_cephes(theta, s, c);
    xsimd::fma(radius * c, vstd, vmean).store_unaligned(data);
    xsimd::fma(radius * s, vstd, vmean).store_unaligned(data + 8);
  }
}

namespace {

// The test hooks: arrays in and out, one vector at a time.
template <class Lanes>
void by_vector(std::size_t n, Lanes lanes) {
  for (std::size_t i = 0; i < n; i += vf::size) lanes(i, std::min(n - i, vf::size));
}
vf load_lanes(const float* p, std::size_t m) {
  alignas(32) float t[vf::size] = {};
  for (std::size_t k = 0; k < m; ++k) t[k] = p[k];
  return vf::load_aligned(t);
}
void store_lanes(float* p, std::size_t m, vf v) {
  alignas(32) float t[vf::size];
  v.store_aligned(t);
  for (std::size_t k = 0; k < m; ++k) p[k] = t[k];
}

}  // namespace

void fma_avx2(const float* a, const float* b, const float* c, float* out, std::size_t n) {
  by_vector(n, [&](std::size_t i, std::size_t m) {
    store_lanes(out + i, m, xsimd::fma(load_lanes(a + i, m), load_lanes(b + i, m), load_lanes(c + i, m)));
  });
}

void log_avx2(const float* u, float* out, std::size_t n) {
  by_vector(n,
            [&](std::size_t i, std::size_t m) { store_lanes(out + i, m, log_cephes(load_lanes(u + i, m))); });
}

void sincos_avx2(const float* theta, float* sin_out, float* cos_out, std::size_t n) {
  by_vector(n, [&](std::size_t i, std::size_t m) {
    vf s, c;
    sincos_cephes(load_lanes(theta + i, m), s, c);
    store_lanes(sin_out + i, m, s);
    store_lanes(cos_out + i, m, c);
  });
}

}  // namespace attnviz::simd
