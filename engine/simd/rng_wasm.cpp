// torch_rng's vector kernels for WebAssembly SIMD128: the same operations in the same order as the scalar
// kernels in torch_rng.cpp (and as rng_avx2.cpp), so the same bits. SIMD128 has no fused multiply-add, so
// each fmaf is computed as the scalar fma_f32 computes it: a * b exactly in f64x2, one double addition, then
// a rounding to float. That is only wrong when the double sum is inexact and lies on a float rounding
// midpoint, or lies below the smallest normal float (where floats round at another bit). Where that can
// happen, a cheap test notes it and the block is computed again with the sums corrected (Fast and Exact
// below); where it cannot, the comment at the call says why (fma_rounded).
//
// Written with wasm_simd128.h rather than xsimd: xsimd 8.1.0 has no WASM architecture, its sse4_1 stand-in
// has no float <-> double widening of half a register, and Emscripten 3.1.6 emulates SSE's float -> int
// truncation lane by lane (SIMD128's i32x4.trunc_sat is one instruction).
#include <wasm_simd128.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "rng.hpp"

namespace attnviz::simd {
namespace {

using v128 = v128_t;

// Four float values held exactly as doubles: lanes 0, 1 in lo, lanes 2, 3 in hi. mul, add, round4 and the
// fmas round their results to float, so they hold what the float computation would; dsum and the sums leave
// a double for narrow() to round.
struct f4d {
  v128 lo, hi;
};

inline v128 splat_d(double x) {
  return wasm_f64x2_splat(x);
}
inline f4d splat4(float x) {
  const v128 d = splat_d(x);
  return {d, d};
}
inline f4d widen(v128 f) {
  return {wasm_f64x2_promote_low_f32x4(f),
          wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(f, f, 2, 3, 2, 3))};
}
inline v128 narrow(f4d d) {
  return wasm_i32x4_shuffle(wasm_f32x4_demote_f64x2_zero(d.lo), wasm_f32x4_demote_f64x2_zero(d.hi), 0, 1, 4,
                            5);
}
// A double rounded to float, as a double again.
inline v128 round_f(v128 d) {
  v128 f = wasm_f32x4_demote_f64x2_zero(d);
  __asm__("" : "+r"(f));  // or LLVM turns the pair into four scalar conversions
  return wasm_f64x2_promote_low_f32x4(f);
}

// The products and sums of two floats are exact in double except when a sum spans more than 53 bits, and
// then rounding twice (to double, then to float) is still right: 53 >= 2 * 24 + 2.
inline f4d mul(f4d a, f4d b) {
  return {round_f(wasm_f64x2_mul(a.lo, b.lo)), round_f(wasm_f64x2_mul(a.hi, b.hi))};
}
inline f4d add(f4d a, f4d b) {
  return {round_f(wasm_f64x2_add(a.lo, b.lo)), round_f(wasm_f64x2_add(a.hi, b.hi))};
}
inline f4d neg(f4d a) {
  return {wasm_f64x2_neg(a.lo), wasm_f64x2_neg(a.hi)};
}

// a * b + c for float values: the product exact, the sum rounded to double; narrow() or round4() then
// rounds it to float.
inline f4d dsum(f4d a, f4d b, f4d c) {
  return {wasm_f64x2_add(wasm_f64x2_mul(a.lo, b.lo), c.lo), wasm_f64x2_add(wasm_f64x2_mul(a.hi, b.hi), c.hi)};
}
inline f4d round4(f4d d) {
  return {round_f(d.lo), round_f(d.hi)};
}

// fmaf(a, b, c) as one double sum rounded to float, for the sums where that is always right: the exact sum
// is a double (then there is one rounding), or a * b has at most 24 significant bits (then a * b + c is the
// sum of two such values, and rounding it to double first is harmless: 53 >= 2 * 24 + 1, Figueroa), or
// every input of the kernel's domain was tried (see each call).
inline f4d fma_rounded(f4d a, f4d b, f4d c) {
  return round4(dsum(a, b, c));
}

// Lanes where rounding the double sum s to float could differ from rounding the exact sum: s on a float
// rounding midpoint of a normal float (the low 29 bits of the double's mantissa are 1 and then zeros), or
// |s| below the smallest normal float, where floats round at another bit.
inline v128 on_midpoint(v128 s) {
  return wasm_i64x2_eq(wasm_v128_and(s, wasm_i64x2_splat(0x1FFFFFFF)), wasm_i64x2_splat(0x10000000));
}
constexpr double kSmallestNormal = 0x1p-126;

// In the given lanes, if s = p + c rounded to double is inexact and even, s moves one ulp towards p + c:
// rounding to odd, after which rounding to float is right (float values and float midpoints are even
// doubles, so an odd s is on none of them, and s never moves off one it was on unless towards the exact
// sum). On a normal-range midpoint this is the scalar fma_f32's correction exactly.
inline v128 round_to_odd(v128 p, v128 c, v128 s, v128 lanes) {
  const v128 bb = wasm_f64x2_sub(s, p);
  const v128 error =
      wasm_f64x2_add(wasm_f64x2_sub(p, wasm_f64x2_sub(s, bb)), wasm_f64x2_sub(c, bb));  // TwoSum
  const v128 even = wasm_i64x2_eq(wasm_v128_and(s, wasm_i64x2_splat(1)), wasm_i64x2_splat(0));
  const v128 move = wasm_v128_and(wasm_v128_and(lanes, even), wasm_f64x2_ne(error, splat_d(0.0)));
  // +1 to the bits (away from zero) when the error and s have the same sign, -1 otherwise.
  const v128 step = wasm_v128_or(wasm_i64x2_shr(wasm_v128_xor(error, s), 63), wasm_i64x2_splat(1));
  return wasm_i64x2_add(s, wasm_v128_and(step, move));
}

// The two ways the kernels evaluate the other fmafs. Fast: the double sum, rounded to float, with a note of
// every lane where that could be wrong. Exact: the same, corrected in those lanes. A block is computed with
// Fast, and again with Exact if Fast noted anything (13 of the 4.9M half blocks of gpt2-small).
struct Fast {
  v128 midpoints = wasm_i64x2_splat(0);
  v128 smallest = splat_d(INFINITY);  // the smallest |sum|

  // The double sum, not yet rounded to float (narrow() rounds it).
  f4d sum(f4d a, f4d b, f4d c) {
    const f4d s = dsum(a, b, c);
    midpoints = wasm_v128_or(midpoints, wasm_v128_or(on_midpoint(s.lo), on_midpoint(s.hi)));
    smallest = wasm_f64x2_pmin(smallest, wasm_f64x2_pmin(wasm_f64x2_abs(s.lo), wasm_f64x2_abs(s.hi)));
    return s;
  }
  f4d fma(f4d a, f4d b, f4d c) { return round4(sum(a, b, c)); }
  bool suspect() const {
    return wasm_v128_any_true(wasm_v128_or(midpoints, wasm_f64x2_lt(smallest, splat_d(kSmallestNormal))));
  }
};

struct Exact {
  static v128 sum2(v128 a, v128 b, v128 c) {
    const v128 p = wasm_f64x2_mul(a, b), s = wasm_f64x2_add(p, c);
    const v128 lanes =
        wasm_v128_or(on_midpoint(s), wasm_f64x2_lt(wasm_f64x2_abs(s), splat_d(kSmallestNormal)));
    return round_to_odd(p, c, s, lanes);
  }
  f4d sum(f4d a, f4d b, f4d c) { return {sum2(a.lo, b.lo, c.lo), sum2(a.hi, b.hi, c.hi)}; }
  f4d fma(f4d a, f4d b, f4d c) { return round4(sum(a, b, c)); }
};

inline v128 splat_i(std::int32_t x) {
  return wasm_i32x4_splat(x);
}
inline v128 splat_f(float x) {
  return wasm_f32x4_splat(x);
}

// log(u) for u in (0, 1]: avx_mathfun's log256_ps (Cephes logf) with PyTorch's fused multiply-adds, as
// log_cephes in torch_rng.cpp. No sum here needs a check, for any u (each call says why).
v128 log_cephes(v128 u) {
  const v128 one = splat_f(1.0f);
  v128 x = wasm_f32x4_pmax(u, splat_f(0x1p-126f));  // u < 2^-126 ? 2^-126 : u
  const v128 exponent = wasm_i32x4_sub(wasm_u32x4_shr(x, 23), splat_i(127));
  x = wasm_v128_or(wasm_v128_and(x, splat_i(static_cast<std::int32_t>(0x807fffffu))),
                   splat_i(0x3f000000));  // mantissa in [0.5, 1)
  v128 e = wasm_f32x4_add(wasm_f32x4_convert_i32x4(exponent), one);
  const v128 small = wasm_f32x4_lt(x, splat_f(0.707106781186547524f));  // then e -= 1, x = x + x - 1
  const v128 tmp = wasm_v128_and(x, small);
  x = wasm_f32x4_add(x, splat_f(-1.0f));
  e = wasm_f32x4_sub(e, wasm_v128_and(one, small));
  x = wasm_f32x4_add(tmp, x);
  const f4d xd = widen(x), z = widen(wasm_f32x4_mul(x, x)), ed = widen(e);
  // Horner: x is a multiple of 2^-24 in [-0.30, 0.42], every y is at least 0.081 in magnitude (a multiple
  // of 2^-28) and so is every C, so x * y + C is a multiple of 2^-52 below 1: exact in double.
  f4d y = splat4(7.0376836292e-2f);
  y = fma_rounded(xd, y, splat4(-1.1514610310e-1f));
  y = fma_rounded(xd, y, splat4(1.1676998740e-1f));
  y = fma_rounded(xd, y, splat4(-1.2420140846e-1f));
  y = fma_rounded(xd, y, splat4(1.4249322787e-1f));
  y = fma_rounded(xd, y, splat4(-1.6668057665e-1f));
  y = fma_rounded(xd, y, splat4(2.0000714765e-1f));
  y = fma_rounded(xd, y, splat4(-2.4999993993e-1f));
  y = fma_rounded(xd, y, splat4(3.3333331174e-1f));
  y = mul(xd, y);
  // Inexact for many u, but on a float midpoint or below 2^-126 for none: tried for every mantissa with
  // every exponent (and the test compares every u the kernels can see).
  y = fma_rounded(y, z, widen(wasm_f32x4_mul(e, splat_f(-2.12194440e-4f))));
  y = fma_rounded(neg(z), splat4(0.5f), y);  // z * 0.5: a float, or half a subnormal one
  // e * 0.693359375 = e * 355 / 512 with |e| <= 129: at most 16 significant bits.
  return narrow(dsum(ed, splat4(0.693359375f), add(xd, y)));
}

// sin and cos of theta = float(2 pi) d for d in [0, 1): avx_mathfun's sincos256_ps (Cephes sinf/cosf), as
// sincos_cephes in torch_rng.cpp. Trying every float d in [0, 1) (the test does it with
// ATTNVIZ_RNG_EXHAUSTIVE=1) finds two sums that need the check: c z - z / 2 for one d, s x + x for three;
// the others are marked "tried".
template <class R>
void sincos_cephes(R& r, v128 theta, v128& sin_out, v128& cos_out) {
  const v128 ax = wasm_v128_and(theta, splat_i(0x7fffffff));
  v128 sign_sin = wasm_v128_and(theta, splat_i(static_cast<std::int32_t>(0x80000000u)));
  v128 j = wasm_i32x4_add(wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_mul(ax, splat_f(1.27323954473516f))),
                          splat_i(1));  // 4 / pi, truncated
  j = wasm_v128_and(j, splat_i(~1));
  const v128 poly = wasm_i32x4_eq(wasm_v128_and(j, splat_i(2)), splat_i(0));  // the sine polynomial: sine
  const f4d y = widen(wasm_f32x4_convert_i32x4(j));
  const v128 sign_cos = wasm_i32x4_shl(wasm_v128_andnot(splat_i(4), wasm_i32x4_sub(j, splat_i(2))), 29);
  sign_sin = wasm_v128_xor(sign_sin, wasm_i32x4_shl(wasm_v128_and(j, splat_i(4)), 29));
  // Extended-precision reduction by pi / 4: y is 0, 2, 4, 6 or 8, so y * 201 / 256 and y * 2029 * 2^-23
  // have at most 15 significant bits.
  f4d x = fma_rounded(y, splat4(-0.78515625f), widen(ax));
  x = fma_rounded(y, splat4(-2.4187564849853515625e-4f), x);
  x = fma_rounded(y, splat4(-3.77489497744594108e-8f), x);  // tried: every d
  const f4d z = mul(x, x);
  f4d c = fma_rounded(z, splat4(2.443315711809948e-5f), splat4(-1.388731625493765e-3f));  // tried: every d
  c = fma_rounded(z, c, splat4(4.166664568298827e-2f));                                   // tried: every d
  c = mul(z, c);
  c = r.fma(c, z, neg(mul(z, splat4(0.5f))));
  const v128 one = splat_d(1.0);
  v128 cf = narrow({wasm_f64x2_add(c.lo, one), wasm_f64x2_add(c.hi, one)});     // c + 1
  f4d s = fma_rounded(z, splat4(-1.9515295891e-4f), splat4(8.3321608736e-3f));  // tried: every d
  s = fma_rounded(z, s, splat4(-1.6666654611e-1f));                             // tried: every d
  s = mul(z, s);
  v128 sf = narrow(r.sum(s, x, x));
  const v128 sin2 = wasm_v128_and(sf, poly), sin1 = wasm_v128_andnot(cf, poly);
  sf = wasm_f32x4_sub(sf, sin2);
  cf = wasm_f32x4_sub(cf, sin1);
  sin_out = wasm_v128_xor(wasm_f32x4_add(sin2, sin1), sign_sin);
  cos_out = wasm_v128_xor(wasm_f32x4_add(sf, cf), sign_cos);
}

// Box-Muller on four pairs of a block of 16: u holds elements j..j+3, v elements j+8..j+11 (j = 0 or 4);
// the results replace them.
template <class R>
void box_muller(R& r, const float* u, const float* v, f4d mean, f4d std, v128& out_u, v128& out_v) {
  const v128 u1 = wasm_f32x4_sub(splat_f(1.0f), wasm_v128_load(u));
  const v128 theta = wasm_f32x4_mul(splat_f(6.2831854820251465f), wasm_v128_load(v));  // float(2 pi)
  const v128 radius = wasm_f32x4_sqrt(wasm_f32x4_mul(splat_f(-2.0f), log_cephes(u1)));
  v128 s, c;
  sincos_cephes(r, theta, s, c);
  out_u = narrow(r.sum(widen(wasm_f32x4_mul(radius, c)), std, mean));
  out_v = narrow(r.sum(widen(wasm_f32x4_mul(radius, s)), std, mean));
}

// out = fma(k * 2^-24, range, from) for four 24-bit k: x * range with x = k * 2^-24 is k * (range * 2^-24)
// exactly in double.
template <class R>
v128 uniform4(R& r, const std::uint32_t* bits, v128 range_scaled, f4d from) {
  const v128 k = wasm_v128_and(wasm_v128_load(bits), splat_i(0xFFFFFF));
  const f4d x = {wasm_f64x2_convert_low_i32x4(k),
                 wasm_f64x2_convert_low_i32x4(wasm_i32x4_shuffle(k, k, 2, 3, 2, 3))};
  return narrow(r.sum(x, {range_scaled, range_scaled}, from));
}

}  // namespace

void uniform_from_bits_simd128(const std::uint32_t* bits, float* out, std::size_t n, float from,
                               float range) {
  constexpr std::size_t kRun = 64;  // values per check
  const f4d vfrom = splat4(from);
  const v128 scaled = splat_d(static_cast<double>(range) * 0x1p-24);
  std::size_t i = 0;
  for (; i + kRun <= n; i += kRun) {
    Fast fast;
    for (std::size_t k = 0; k < kRun; k += 4)
      wasm_v128_store(out + i + k, uniform4(fast, bits + i + k, scaled, vfrom));
    if (!fast.suspect()) continue;
    Exact exact;
    for (std::size_t k = 0; k < kRun; k += 4)
      wasm_v128_store(out + i + k, uniform4(exact, bits + i + k, scaled, vfrom));
  }
  for (; i < n; ++i) {
    const std::uint32_t tail[4] = {bits[i], 0, 0, 0};
    Exact exact;
    out[i] = wasm_f32x4_extract_lane(uniform4(exact, tail, scaled, vfrom), 0);
  }
}

void normal_blocks_simd128(float* data, std::size_t blocks, float mean, float std) {
  const f4d vmean = splat4(mean), vstd = splat4(std);
  for (std::size_t b = 0; b < blocks; ++b, data += 16) {
    for (int j = 0; j < 8; j += 4) {
      Fast fast;
      v128 u, v;
      box_muller(fast, data + j, data + j + 8, vmean, vstd, u, v);
      if (fast.suspect()) {
        Exact exact;
        box_muller(exact, data + j, data + j + 8, vmean, vstd, u, v);
      }
      wasm_v128_store(data + j, u);
      wasm_v128_store(data + j + 8, v);
    }
  }
}

namespace {

// The test hooks: arrays in and out, four lanes at a time as the kernels evaluate them.
template <class Lanes>
void by_four(std::size_t n, Lanes lanes) {
  for (std::size_t i = 0; i < n; i += 4) lanes(i, n - i < 4 ? n - i : 4);
}
v128 load_lanes(const float* p, std::size_t m) {
  float t[4] = {};
  for (std::size_t k = 0; k < m; ++k) t[k] = p[k];
  return wasm_v128_load(t);
}
void store_lanes(float* p, std::size_t m, v128 v) {
  float t[4];
  wasm_v128_store(t, v);
  for (std::size_t k = 0; k < m; ++k) p[k] = t[k];
}

}  // namespace

void fma_simd128(const float* a, const float* b, const float* c, float* out, std::size_t n) {
  by_four(n, [&](std::size_t i, std::size_t m) {
    const f4d x = widen(load_lanes(a + i, m)), y = widen(load_lanes(b + i, m)),
              z = widen(load_lanes(c + i, m));
    Fast fast;
    f4d r = fast.sum(x, y, z);
    if (fast.suspect()) {
      Exact exact;
      r = exact.sum(x, y, z);
    }
    store_lanes(out + i, m, narrow(r));
  });
}

void log_simd128(const float* u, float* out, std::size_t n) {
  by_four(n,
          [&](std::size_t i, std::size_t m) { store_lanes(out + i, m, log_cephes(load_lanes(u + i, m))); });
}

void sincos_simd128(const float* theta, float* sin_out, float* cos_out, std::size_t n) {
  by_four(n, [&](std::size_t i, std::size_t m) {
    const v128 t = load_lanes(theta + i, m);
    v128 s, c;
    Fast fast;
    sincos_cephes(fast, t, s, c);
    if (fast.suspect()) {
      Exact exact;
      sincos_cephes(exact, t, s, c);
    }
    store_lanes(sin_out + i, m, s);
    store_lanes(cos_out + i, m, c);
  });
}

}  // namespace attnviz::simd
