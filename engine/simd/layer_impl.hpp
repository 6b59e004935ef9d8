// The fast forward pass, written once for every ISA. Included only by the layer_<isa>.cpp files: every helper
// here is a template on Arch, so each ISA's copy is its own symbol, compiled with that file's flags.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "layer.hpp"
#include "pack.hpp"
#include "wasm_fma.hpp"

namespace attnviz::simd {
namespace detail {

template <class A>
using vf = xsimd::batch<float, A>;
template <class A>
using vi = xsimd::batch<std::int32_t, A>;

template <class A>
constexpr int nr_of() {
  return 2 * static_cast<int>(vf<A>::size);
}
// Rows per block of the engine's own micro-kernels (micro_kernel): its MR x 2 accumulator vectors, the two B
// vectors, the A broadcast and (without FMA) the product must all stay in registers. V8 keeps one of x86-64's
// 16 vector registers for scratch and does not fuse multiply and add, so WebAssembly SIMD128 takes 5 rows:
// with 6 it ran 20% slower in Chromium (gpt2-small layer, T = 128: 24.6 ms vs 20 ms; 4 rows: 20.6 ms).
template <class A>
constexpr int mr_of() {
#ifdef __wasm_simd128__
  return 5;
#else
  // AVX-512 has 32 vector registers: 12 rows (24 accumulators) halve the loads per FMA against 6.
  return std::is_same<A, xsimd::avx512bw>::value ? 12 : 6;
#endif
}
// A GEMM task's tile: rows x panels of B. Natively 48 rows x 8 panels, with every micro-kernel over the whole
// K (gemm): on the 2-vCPU Emerald Rapids VM, gpt2-small's products at 512 rows ran at 77-89% of the AVX-512
// FMA peak on 2 threads this way, against 52-76% in the earlier 96 x 4 tiles blocked over K in 16 kB panel
// slices, and the whole model at T = 128 / 512 / 1024 was faster in 16 of 20, 10 of 10 and 6 of 6 alternating
// passes (AVX2: in 8 of 10 at T = 512). 48 x 4 and 24 x 16 did as well as 48 x 8 (bench/LOG.md).
// WebAssembly's tiles are 8 panels wide so that a run of gemm's reading ahead (kReadAheadFloats) can take 8
// of gpt2-small's 768-deep panels: with each tile read whole in one run, 96 x 8 against 96 x 4 was 1.04x at
// T = 16 on the Zen 4 VM (43 of 75 alternating passes, near the noise), no different at T = 128.
#ifdef __wasm_simd128__
constexpr int kTileRows = 96, kTilePanels = 8;
#else
constexpr int kTileRows = 48, kTilePanels = 8;
#endif

template <class A>
inline int lesser(int a, int b) {
  return a < b ? a : b;
}

// exp(x) for x <= 88, to about 2 ulp; 0 below -87 (and for -inf). Built from a Cephes polynomial and a
// magic-number round (adding 1.5 * 2^23 leaves round(x / ln 2) in the low mantissa bits), so it needs no
// float-to-int conversion instruction, which WebAssembly SIMD only emulates lane by lane.
template <class A>
inline vf<A> exp_fast(vf<A> x) {
  using B = vf<A>;
  const B lo(-87.0f);
  const B xc = xsimd::max(x, lo);
  const B magic(12582912.0f);  // 1.5 * 2^23
  const B t = xsimd::fma(xc, B(1.44269504088896341f), magic);
  const B n = t - magic;
  B r = xsimd::fnma(n, B(0.693359375f), xc);  // x - n ln2, in two parts
  r = xsimd::fnma(n, B(-2.12194440e-4f), r);
  B p(1.9875691500e-4f);
  p = xsimd::fma(p, r, B(1.3981999507e-3f));
  p = xsimd::fma(p, r, B(8.3334519073e-3f));
  p = xsimd::fma(p, r, B(4.1665795894e-2f));
  p = xsimd::fma(p, r, B(1.6666665459e-1f));
  p = xsimd::fma(p, r, B(5.0000001201e-1f));
  const B y = xsimd::fma(p, r * r, r) + B(1.0f);
  const vi<A> biased = xsimd::bitwise_cast<vi<A>>(t) - vi<A>(0x4B400000 - 127);  // n + 127
  const B pow2n = xsimd::bitwise_cast<B>(biased << 23);
  return xsimd::select(x < lo, B(0.0f), y * pow2n);
}

// How many k ahead the micro-kernel asks for its panel's rows (both halves: two cache lines a k on AVX-512).
// The hardware prefetcher alone left it waiting on the panel's loads from L2: on the Emerald Rapids VM the
// whole model on AVX-512 was faster with 32 k ahead in 12 of 12 alternating pairs of passes at T = 128, 7 of
// 10 at 512 and 5 of 6 at 1024 (3-7%); 16 and 64 did about as well; AVX2 gained little (13 of 20 at T = 128
// and 512). WebAssembly has no prefetch instruction (touch_lines stands in for it).
#ifdef __wasm_simd128__
constexpr int kPrefetchAhead = 0;
#else
constexpr int kPrefetchAhead = 32;
#endif

// Memory a micro-kernel asks for while it multiplies, `step` bytes a k from `p` (null: none): the panel the
// next one reads. Without it, a weight panel that comes from memory is waited for as the kernel meets it, and
// a product of a few rows (a keystroke's logit lens, one appended token) spends as long waiting as computing.
struct Far {
  const char* p = nullptr;
  int step = 0;
};
// Block `b` of `blocks` (for_row_blocks'), each K k long, asks for its share of the `bytes` at `next`: the
// memory keeps streaming while every block multiplies, not only the first. The shares stay inside `bytes`.
inline Far far_share(const void* next, std::size_t bytes, int K, int blocks, int b) {
  const std::size_t step = bytes / (static_cast<std::size_t>(blocks) * static_cast<std::size_t>(K));
  if (step == 0) return Far{};
  return Far{static_cast<const char*>(next) + static_cast<std::size_t>(b) * K * step, static_cast<int>(step)};
}

// C[MR x n_valid] (+)= A[MR x K] * Bpanel[K x NR] (+ bias). A row-major with stride lda (with TransA, A is
// the transpose of a (K x MR) block with stride lda: element (r, k) at a[k * lda + r]); the panel k-major
// and aligned. The MR x NR accumulator block lives in registers for the whole K loop.
template <class A, int MR, bool TransA = false>
inline void micro_kernel(int K, const float* a, int lda, const float* b, float* c, int ldc, int n_valid,
                         const float* bias, bool load_c, Far far) {
  using B = vf<A>;
  constexpr int W = static_cast<int>(B::size), NR = 2 * W;
  B c0[MR], c1[MR];
  alignas(64) float tmp[NR];
  for (int r = 0; r < MR; ++r) {
    if (load_c) {
      if (n_valid == NR) {
        c0[r] = B::load_unaligned(c + r * ldc);
        c1[r] = B::load_unaligned(c + r * ldc + W);
      } else {
        for (int j = 0; j < NR; ++j) tmp[j] = j < n_valid ? c[r * ldc + j] : 0.0f;
        c0[r] = B::load_aligned(tmp);
        c1[r] = B::load_aligned(tmp + W);
      }
    } else if (bias && n_valid == NR) {
      c0[r] = B::load_unaligned(bias);
      c1[r] = B::load_unaligned(bias + W);
    } else if (bias) {  // the last panel of an unpadded bias: never read past its end
      for (int j = 0; j < NR; ++j) tmp[j] = j < n_valid ? bias[j] : 0.0f;
      c0[r] = B::load_aligned(tmp);
      c1[r] = B::load_aligned(tmp + W);
    } else {
      c0[r] = B(0.0f);
      c1[r] = B(0.0f);
    }
  }
  // Each row of A and the panel through a pointer that steps by one k, so that no address needs index
  // arithmetic per row and k: V8 computes every WebAssembly address with 32-bit integer instructions, which
  // on Golden Cove share ports with the SIMD multiplies and adds. With TransA (training's products only), k's
  // column starts `at` floats into A: an offset, since a pointer stepped past the last column would leave A.
  const float* row[MR];
  for (int r = 0; r < MR; ++r) row[r] = TransA ? a : a + r * lda;
  std::size_t at = 0;
  const float* bk = b;
  const auto step = [&] {
    const B b0 = B::load_aligned(bk), b1 = B::load_aligned(bk + W);
    bk += NR;
    for (int r = 0; r < MR; ++r) {
      const B ar(TransA ? a[at + r] : *row[r]++);
      c0[r] = xsimd::fma(ar, b0, c0[r]);
      c1[r] = xsimd::fma(ar, b1, c1[r]);
    }
    if (TransA) at += static_cast<std::size_t>(lda);
  };
  int k = 0;
  if constexpr (kPrefetchAhead > 0)
    if (far.p)
      for (; k < K; ++k) {
        __builtin_prefetch(far.p);
        if (far.step > 64) __builtin_prefetch(far.p + 64);
        far.p += far.step;
        step();
      }
  if constexpr (kPrefetchAhead > 0)
    for (; k + kPrefetchAhead < K; ++k) {
      __builtin_prefetch(bk + kPrefetchAhead * NR);
      __builtin_prefetch(bk + kPrefetchAhead * NR + W);
      step();
    }
  for (; k < K; ++k) step();
  for (int r = 0; r < MR; ++r) {
    if (n_valid == NR) {
      c0[r].store_unaligned(c + r * ldc);
      c1[r].store_unaligned(c + r * ldc + W);
    } else {
      c0[r].store_aligned(tmp);
      c1[r].store_aligned(tmp + W);
      for (int j = 0; j < n_valid; ++j) c[r * ldc + j] = tmp[j];
    }
  }
}

using Micro = void (*)(int, const float*, int, const float*, float*, int, int, const float*, bool, Far);
// {nullptr, micro_kernel<A, 1>, ..., micro_kernel<A, MR>}: indexed by the count of rows left.
template <class A, bool TransA = false, int... R>
constexpr std::array<Micro, sizeof...(R) + 1> micro_kernels(std::integer_sequence<int, R...>) {
  return {nullptr, micro_kernel<A, R + 1, TransA>...};
}

#ifdef __wasm_simd128__
// micro_kernel's contract on wasm_fma's fused kernel for MR rows: C starts from itself (load_c), the bias or
// zero, in the kernel itself; where the panel is narrower than NR, in a block on the stack (its columns past
// n_valid zero and never written back).
template <int MR, bool TransA>
void fused_micro_kernel(int K, const float* a, int lda, const float* b, float* c, int ldc, int n_valid,
                        const float* bias, bool load_c, Far) {
  constexpr int NR = 8;
  const wasm_fma::Kernel k = wasm_fma::kernel(MR, TransA);
  if (n_valid == NR) {
    k(K, a, lda, b, c, ldc, load_c ? 1 : reinterpret_cast<std::uintptr_t>(bias));
    return;
  }
  alignas(16) float block[MR * NR];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j)
      block[r * NR + j] = j >= n_valid ? 0.0f : load_c ? c[r * ldc + j] : bias ? bias[j] : 0.0f;
  k(K, a, lda, b, block, NR, 1);
  for (int r = 0; r < MR; ++r) std::memcpy(c + r * ldc, block + r * NR, sizeof(float) * n_valid);
}
template <bool TransA, int... R>
constexpr std::array<Micro, sizeof...(R) + 1> fused_micro_kernels(std::integer_sequence<int, R...>) {
  return {nullptr, fused_micro_kernel<R + 1, TransA>...};
}
#endif

// The micro-kernels this thread runs, k[r] for a block of r rows (1..rows), and the rows a block takes. In
// WebAssembly, where the browser has relaxed SIMD, the fused ones (wasm_fma.hpp) in blocks of 6: without a
// separate product to hold, 6 rows fit V8's registers, and the page's engine ran 1.03-1.15x faster than with
// 5 in three alternating runs at T = 16, 128 and 512. Else micro_kernel, in blocks of mr_of.
struct MicroTable {
  const Micro* k;
  int rows;
};
template <class A, bool TransA = false>
MicroTable micro_table() {
  static constexpr auto kOwn = micro_kernels<A, TransA>(std::make_integer_sequence<int, mr_of<A>()>{});
#ifdef __wasm_simd128__
  static_assert(nr_of<A>() == 8, "wasm_fma_gen.mjs writes 8-column kernels");
  static constexpr auto kFused =
      fused_micro_kernels<TransA>(std::make_integer_sequence<int, wasm_fma::kRows>{});
  if (wasm_fma::in_use()) return {kFused.data(), wasm_fma::kRows};
#endif
  return {kOwn.data(), mr_of<A>()};
}

// A tile height of about `rows` that is a whole number of the micro-kernels' row blocks (95 rather than 96
// for WebAssembly's own 5-row kernels, whose blocks left 96-row tiles a block of one row each).
template <class A>
int tile_rows(int rows) {
  const int block = micro_table<A>().rows;
  return rows / block * block;
}

// WebAssembly reads weight-sized panels whole before multiplying them (touch_lines); native builds have
// hardware prefetch and block over K instead. With the fused kernels, the page without it was as fast on the
// Emerald Rapids VM but 0.90x at T = 16 on the Zen 4 VM (faster in 3 of 15 passes), so it stays.
#ifdef __wasm_simd128__
constexpr bool kReadPanelsFirst = true;
#else
constexpr bool kReadPanelsFirst = false;
#endif
// ... a tile's panels in runs of up to 192 kB (8 of gpt2-small's 768-deep panels, 2 of its 3072-deep ones),
// well inside L2. Against one panel at a time in 96 x 4 tiles, the page on the Zen 4 VM was 1.02x and 1.065x
// faster at T = 16 in two runs (15 of 25, 104 of 150 alternating passes), no different at 128 (5 of 10) and
// 1.03x at 512 (5 of 5). Reading a panel one line every two k inside the fused kernel instead, the next while
// multiplying this one, was 0.94x: each load that misses holds up the kernel as a prefetch would not.
constexpr std::size_t kReadAheadFloats = 48 * 1024;

// Reads `n` floats (n a multiple of 4, p 16-byte aligned) one 64-byte line at a time, so a weight panel
// arrives from memory in a loop of independent loads before the micro-kernels need it. WebAssembly has no
// prefetch instruction, and a micro-kernel that meets each line as it goes stalls on it: for gpt2-small's
// projections at 16 rows (one typed sentence) the GEMMs ran at 31 GFLOP/s, and at 39 with the panel read
// first (48 against 46 at 128 rows; SIMD128 in node 20 on the 2-core development machine). It pays only for
// weight-sized panels that several rows share: for one row (an appended token, the head's GEMV) or a short
// panel (attention's K and V, just packed and still in cache) it cost more than it saved (an appended token
// at T = 64: 20 ms without, 26 with). The sums go to a sink so the loads are kept; they change no result.
inline volatile float touch_sink;
template <class A>
inline void touch_lines(const float* p, std::size_t n) {
  using B = vf<A>;
  B s0(0.0f), s1(0.0f), s2(0.0f), s3(0.0f);
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    s0 += B::load_aligned(p + i);
    s1 += B::load_aligned(p + i + 16);
    s2 += B::load_aligned(p + i + 32);
    s3 += B::load_aligned(p + i + 48);
  }
  for (; i + 16 <= n; i += 16) s0 += B::load_aligned(p + i);
  touch_sink = xsimd::hadd(s0 + s1 + s2 + s3);
}

// C[m0:m1, panels p0:p1] = A[m0:m1, :K] * B + bias, one panel at a time, each micro-kernel over the whole K
// (its rows' sums over k in order). Not blocked over K: the panel streams from L2 as the hardware prefetcher
// brings it, and each row of A is read as one long run. Blocks of 16 kB panel slices kept in L1 were slower
// on the Emerald Rapids VM (kTileRows). In WebAssembly, which has no prefetch, the panels are read whole
// first, a run of them at a time (touch_lines, kReadAheadFloats). B panels are `bstride` floats apart (a
// panel may hold more rows than the K used here). For a few rows (at most two blocks: an appended token, a
// keystroke's logit lens against the head) the kernels are too short for the prefetcher to hide memory, so
// the blocks ask for the next panel while they multiply this one (Far): gpt2-small's head, 13 rows, 4.0 ms
// before and 3.5 after on the Zen 5 VM.
template <class A>
void gemm(int m0, int m1, int p0, int p1, int N, int K, const float* a, int lda, const float* b,
          std::size_t bstride, const float* bias, float* c, int ldc) {
  constexpr int NR = nr_of<A>();
  // The micro-kernel for each count of remaining rows, so edge rows need no padding.
  const MicroTable kernels = micro_table<A>();
  if (K == 0) return;
  // Panels read ahead `run` at a time, each its own K x NR floats: where panels are further apart (a K/V
  // cache with room to spare), not the rows between them.
  const std::size_t panel = static_cast<std::size_t>(K) * NR;
  const int run = static_cast<int>(std::max<std::size_t>(1, kReadAheadFloats / panel));
  const bool read_first = kReadPanelsFirst && m1 - m0 > 1 && K >= 256;
  const bool few = kPrefetchAhead > 0 && m1 - m0 <= 2 * kernels.rows && K >= 256;
  const int blocks = (m1 - m0 + kernels.rows - 1) / kernels.rows;
  for (int p = p0; p < p1; ++p) {
    const float* bp = b + static_cast<std::size_t>(p) * bstride;
    const int n_valid = lesser<A>(NR, N - p * NR);
    if (read_first && (p - p0) % run == 0)
      for (int q = p; q < lesser<A>(p + run, p1); ++q)
        touch_lines<A>(b + static_cast<std::size_t>(q) * bstride, panel);
    const float* bb = bias ? bias + p * NR : nullptr;
    // a few rows: the blocks ask for the next panel as they go, a share each
    const bool far = few && p + 1 < p1;
    int block = 0;
    for_row_blocks(m0, m1, kernels.rows, [&](int i, int rows) {
      kernels.k[rows](K, a + static_cast<std::size_t>(i) * lda, lda, bp,
                      c + static_cast<std::size_t>(i) * ldc + p * NR, ldc, n_valid, bb, false,
                      far ? far_share(bp + bstride, panel * sizeof(float), K, blocks, block++) : Far{});
    });
  }
}

// Rows [m0, m1) of one of causal attention's products (CausalGemm), row i at query position i + pos0, in
// strips of up to MR rows (for_row_blocks), each with its own run of k (lower_a, lower_at) or of panels
// (lower_c). With `window` > 0 (a sliding-window layer; lower_c and lower_a) row i sees no key before i +
// pos0 - window + 1 either, and its weights are zero there, so a strip starts at its first row's first key.
// The loops run as gemm's: panel by panel, each strip's sum over its whole run of k, in order.
template <class A>
void causal_strips(const CausalGemm& g, int m0, int m1, int pos0, int window) {
  constexpr int NR = nr_of<A>();
  const MicroTable kernels = micro_table<A>(), transposed = micro_table<A, true>();
  const int MR = kernels.rows;  // the transposed kernels' too
  const bool trans = g.kind == CausalGemm::lower_at;
  if (g.K == 0) return;
  // strip [r0, r1): terms k in [lo, hi), columns [0, n1) from panel pl
  struct Strip {
    int lo, hi, n1, pl;
  };
  const auto strip = [&](int r0, int r1) {
    const int first = window > 0 && r0 + pos0 - window + 1 > 0 ? r0 + pos0 - window + 1 : 0;
    const int end = r1 + pos0;  // past the strip's last position
    switch (g.kind) {
      case CausalGemm::lower_c:
        return Strip{0, g.K, lesser<A>(g.N, end), first / NR};
      case CausalGemm::lower_a:
        return Strip{first, lesser<A>(g.K, end), g.N, 0};
      case CausalGemm::lower_at:
        break;
    }
    return Strip{r0 + pos0, g.K, g.N, 0};
  };
  const int pn = panels(g.N, NR);
  for (int p = 0; p < pn; ++p)
    for_row_blocks(m0, m1, MR, [&](int r0, int rows) {
      const int r1 = r0 + rows;
      const Strip st = strip(r0, r1);
      if (p < st.pl || p * NR >= st.n1 || st.hi <= st.lo) return;
      const float* a = trans ? g.a + static_cast<std::size_t>(st.lo) * g.lda + r0
                             : g.a + static_cast<std::size_t>(r0) * g.lda + st.lo;
      (trans ? transposed : kernels)
          .k[r1 - r0](st.hi - st.lo, a, g.lda,
                      g.b + static_cast<std::size_t>(p) * g.bstride + static_cast<std::size_t>(st.lo) * NR,
                      g.c + static_cast<std::size_t>(r0) * g.ldc + p * NR, g.ldc,
                      lesser<A>(NR, st.n1 - p * NR), nullptr, false, Far{});
    });
  // a strip with no term at all (rows past K): the empty sum
  for_row_blocks(m0, m1, MR, [&](int r0, int rows) {
    const int r1 = r0 + rows;
    const Strip st = strip(r0, r1);
    if (st.hi <= st.lo)
      for (int i = r0; i < r1; ++i)
        std::fill(g.c + static_cast<std::size_t>(i) * g.ldc, g.c + static_cast<std::size_t>(i) * g.ldc + g.N,
                  0.0f);
  });
}

// n 16-bit weights widened exactly into floats: BF16 is a float's high half; F16 (IEEE half) becomes its
// exponent and mantissa moved into place, scaled by 2^112 (which also makes its subnormals normal floats),
// with infinities and NaN set apart. Plain loops the compiler vectorizes.
// `dst` holds the floats' bits (the micro-kernels read it through vector loads only).
inline void widen_halves(const std::uint16_t* src, std::size_t n, bool bf16, std::uint32_t* dst) {
  if (bf16) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<std::uint32_t>(src[i]) << 16;
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t h = src[i], em = h & 0x7FFFu, sign = (h & 0x8000u) << 16;
    std::uint32_t bits = em << 13;
    float f;
    std::memcpy(&f, &bits, 4);
    f *= 0x1p112f;
    std::memcpy(&bits, &f, 4);
    if (em >= 0x7C00u) bits = (em << 13) | 0x7F800000u;
    dst[i] = bits | sign;
  }
}

// 16-bit weight panels (PackedMatrix::half): null p means float panels.
struct HalfPanels {
  const std::uint16_t* p = nullptr;
  bool bf16 = true;
};

// gemm over 16-bit panels: each panel's K block (KC x NR, 16 kB of floats) is widened into a per-thread
// buffer, then the same micro-kernels run on it, so unlike gemm it is blocked over K, for any count of rows
// (one row too: the buffer is all a single row's pass reads). Sums over k in order, as gemm's: the same
// numbers as gemm on the widened panels. Many rows take every panel's first K block, then the second, so that
// a block of A serves the tile's panels; up to 48 rows take each panel whole, its blocks in memory order, and
// the kernels ask for the block after (the next K block, or the next panel's first) as they multiply (Far).
// On the Zen 5 VM that took SmolLM2-135M's BF16 head from 2.5 to 1.2 ms for one row and from 9.1 to 5.0 ms
// for 31 (a keystroke's lens), and its keystroke at T = 64 from 19 to 10 ms.
template <class A>
void gemm16(int m0, int m1, int p0, int p1, int N, int K, const float* a, int lda, HalfPanels b,
            std::size_t bstride, const float* bias, float* c, int ldc) {
  constexpr int NR = nr_of<A>(), KC = 4096 / NR;
  const MicroTable kernels = micro_table<A>();
  alignas(64) static thread_local std::uint32_t buf[KC * NR];
  const float* panel = reinterpret_cast<const float*>(buf);
  const int blocks = (m1 - m0 + kernels.rows - 1) / kernels.rows;
  // `next`: the length in k of the block after this one in memory (0: none to ask for)
  const auto run = [&](int k0, int p, int next) {
    const int kb = lesser<A>(KC, K - k0);
    const std::uint16_t* src =
        b.p + static_cast<std::size_t>(p) * bstride + static_cast<std::size_t>(k0) * NR;
    widen_halves(src, static_cast<std::size_t>(kb) * NR, b.bf16, buf);
    const int n_valid = lesser<A>(NR, N - p * NR);
    const float* bb = k0 == 0 && bias ? bias + p * NR : nullptr;
    int nth = 0;
    for_row_blocks(m0, m1, kernels.rows, [&](int i, int rows) {
      const float* ai = a + static_cast<std::size_t>(i) * lda + k0;
      float* ci = c + static_cast<std::size_t>(i) * ldc + p * NR;
      kernels.k[rows](
          kb, ai, lda, panel, ci, ldc, n_valid, bb, k0 > 0,
          next > 0 ? far_share(src + static_cast<std::size_t>(kb) * NR,
                               static_cast<std::size_t>(next) * NR * sizeof(std::uint16_t), kb, blocks, nth++)
                   : Far{});
    });
  };
  if (m1 - m0 <= 48) {
    for (int p = p0; p < p1; ++p)
      for (int k0 = 0; k0 < K; k0 += KC) {
        const int next = k0 + KC < K ? lesser<A>(KC, K - k0 - KC) : p + 1 < p1 ? lesser<A>(KC, K) : 0;
        run(k0, p, kPrefetchAhead > 0 ? next : 0);
      }
  } else {
    for (int k0 = 0; k0 < K; k0 += KC)
      for (int p = p0; p < p1; ++p) run(k0, p, 0);
  }
}

// One row of attention weights: w[0:n) = softmax(s[0:n) * scale), w[n:T) = 0 (the masked future).
// `scaled` (optional) receives the scaled scores with -inf in the masked cells. A row whose scores overflowed
// float32 (inf or NaN) comes out all NaN, so the caller's finiteness check reports it.
template <class A>
void softmax_row(const float* s, int n, int T, float scale, float* scaled, float* w) {
  using B = vf<A>;
  constexpr int W = static_cast<int>(B::size);
  const int nv = n - n % W;
  // pass 1: scale, row max, and a check for overflowed scores
  B vmax(-INFINITY), vabs(0.0f);
  for (int j = 0; j < nv; j += W) {
    const B x = B::load_unaligned(s + j) * B(scale);
    x.store_unaligned(w + j);
    vmax = xsimd::max(vmax, x);
    vabs = vabs + xsimd::abs(x) * B(0.0f);  // stays 0 unless some |x| is inf or NaN
  }
  alignas(64) float lanes[W];
  vmax.store_aligned(lanes);
  float mx = -INFINITY, bad = xsimd::hadd(vabs);
  for (int j = 0; j < W; ++j) mx = lanes[j] > mx ? lanes[j] : mx;
  for (int j = nv; j < n; ++j) {
    w[j] = s[j] * scale;
    mx = w[j] > mx ? w[j] : mx;
    bad += w[j] * 0.0f;
  }
  if (!(bad == 0.0f) || !(mx < INFINITY)) {
    for (int j = 0; j < T; ++j) w[j] = NAN;
    return;
  }
  if (scaled) {
    std::memcpy(scaled, w, static_cast<std::size_t>(n) * sizeof(float));
    for (int j = n; j < T; ++j) scaled[j] = -INFINITY;
  }
  // pass 2: exponentials and their sum (the tail goes through the same exp, padded with -inf)
  const B vm(mx);
  B vsum(0.0f);
  for (int j = 0; j < nv; j += W) {
    const B e = exp_fast<A>(B::load_unaligned(w + j) - vm);
    e.store_unaligned(w + j);
    vsum += e;
  }
  if (nv < n) {
    for (int j = 0; j < W; ++j) lanes[j] = nv + j < n ? w[nv + j] : -INFINITY;
    const B e = exp_fast<A>(B::load_aligned(lanes) - vm);
    e.store_aligned(lanes);
    vsum += e;
    for (int j = nv; j < n; ++j) w[j] = lanes[j - nv];
  }
  // pass 3: normalize; the masked cells are exactly 0
  const B inv(1.0f / xsimd::hadd(vsum));
  for (int j = 0; j < nv; j += W) (B::load_unaligned(w + j) * inv).store_unaligned(w + j);
  for (int j = nv; j < n; ++j) w[j] *= inv.get(0);
  for (int j = n; j < T; ++j) w[j] = 0.0f;
}

// C (M x N) = A (M x K, row-major, lda K) B + bias, in tiles of (kTileRows x kTilePanels) over the pool.
template <class A>
void parallel_gemm(ThreadPool& pool, int M, int N, int K, const float* a, const float* b, const float* bias,
                   float* c, HalfPanels b16 = {}) {
  // 16-bit panels are widened once per row tile: taller tiles widen them fewer times (a 16 kB K block of a
  // panel then serves up to 192 rows, in tiles of 4 panels).
  constexpr int NR = nr_of<A>();
  const int kRows = tile_rows<A>(b16.p ? 192 : kTileRows), kPanels = b16.p ? 4 : kTilePanels;
  const int pn = panels(N, NR);
  const int row_tiles = (M + kRows - 1) / kRows, panel_tiles = (pn + kPanels - 1) / kPanels;
  // Tasks walk the row tiles of one panel tile before the next, so each slice of B (a weight matrix, often
  // larger than every cache: GPT-2's head is 154 MB) comes from memory once while it serves every row.
  pool.run(row_tiles * panel_tiles, [&](int task, int) {
    const int r0 = (task % row_tiles) * kRows, p0 = (task / row_tiles) * kPanels;
    if (b16.p)
      gemm16<A>(r0, lesser<A>(M, r0 + kRows), p0, lesser<A>(pn, p0 + kPanels), N, K, a, K, b16,
                static_cast<std::size_t>(K) * NR, bias, c, N);
    else
      gemm<A>(r0, lesser<A>(M, r0 + kRows), p0, lesser<A>(pn, p0 + kPanels), N, K, a, K, b,
              static_cast<std::size_t>(K) * NR, bias, c, N);
  });
}

}  // namespace detail

template <class A>
void fast_layer::operator()(A, const LayerJob& job) const {
  using namespace detail;
  constexpr int NR = nr_of<A>();
  const int T = job.T, H = job.heads, hd = job.head_dim, W = job.width, first = job.first;
  ThreadPool& pool = *job.pool;

  // 1. projections q, k, v = x W^T + b: parallel_gemm's tiles, three matrices in one sweep
  const float* q = job.x;
  const float* k = job.x;
  const float* v = job.x;
  if (job.qkv_given) {
    q = job.q, k = job.k, v = job.v;
  } else if (job.has_weights) {
    const int kRows = tile_rows<A>(kTileRows), kPanels = kTilePanels;
    const int row_tiles = (T - first + kRows - 1) / kRows;
    const int panel_tiles = (panels(W, NR) + kPanels - 1) / kPanels;
    const std::size_t bstride = static_cast<std::size_t>(job.d_in) * NR;
    const float* w[3] = {job.wq, job.wk, job.wv};
    const float* bias[3] = {job.bq, job.bk, job.bv};
    float* out[3] = {job.q, job.k, job.v};
    pool.run(3 * row_tiles * panel_tiles, [&](int task, int) {
      const int m = task / (row_tiles * panel_tiles), rest = task % (row_tiles * panel_tiles);
      const int r0 = first + (rest / panel_tiles) * kRows, p0 = (rest % panel_tiles) * kPanels;
      gemm<A>(r0, lesser<A>(T, r0 + kRows), p0, lesser<A>(panels(W, NR), p0 + kPanels), W, job.d_in, job.x,
              job.d_in, w[m], bstride, bias[m], out[m], W);
    });
    q = job.q, k = job.k, v = job.v;
  }

  // 2. per key/value head: K^T and V in panels (scores = Q K^T and context = P V both become panel GEMMs),
  // `cap` rows of room; rows [0, packed) kept from an earlier pass (kv_pack), the rest packed here
  const int KV = job.kv_heads > 0 ? job.kv_heads : H, KW = job.kv_width > 0 ? job.kv_width : W;
  const int group = H / KV;  // query heads per key/value head
  const int cap = job.kv_pack ? job.kv_capacity : T, packed = job.kv_pack ? job.kv_packed : 0;
  float* kpack = job.kv_pack ? job.kv_pack : job.scratch;
  const std::size_t kpack_head = panel_floats(cap, hd, NR), vpack_head = panel_floats(hd, cap, NR);
  float* vpack = kpack + kpack_head * KV;
  float* rows = job.kv_pack ? job.scratch : vpack + vpack_head * KV;
  const std::size_t vstride = static_cast<std::size_t>(cap) * NR;  // a V panel
  const std::size_t row_stride = static_cast<std::size_t>((T + 15) / 16 * 16);
  const std::size_t worker_floats = 2 * kRowBlock * row_stride;
  pool.run(KV, [&](int h, int) {
    pack_nk_from(k + h * hd, packed, T, hd, KW, NR, kpack + kpack_head * h);
    pack_kn_rows(v + h * hd, packed, T, hd, KW, NR, cap, vpack + vpack_head * h);
  });

  // 3. attention, one task per (head, block of query rows): scores, softmax, dropout, context
  const int blocks = (T - first + kRowBlock - 1) / kRowBlock;
  const std::size_t tt = static_cast<std::size_t>(T) * T;  // the dense keep mask's head
  const std::size_t ld = static_cast<std::size_t>(job.square_stride > 0 ? job.square_stride : T);
  const std::size_t sq = ld * ld;  // a square's head
  pool.run(H * blocks, [&](int task, int worker) {
    const int h = task % H, r0 = first + (task / H) * kRowBlock, r1 = lesser<A>(T, r0 + kRowBlock);
    float* scratch_rows = rows + worker_floats * static_cast<std::size_t>(worker);
    // Causal rows r0..r1-1 only need keys up to r1-1, and each strip of them up to its own last row
    // (causal_strips); the raw scores stage keeps every cell.
    const int needed = job.causal ? r1 : T;
    float* s = job.scores ? job.scores + h * sq + static_cast<std::size_t>(r0) * ld : scratch_rows;
    const int lds = static_cast<int>(job.scores ? ld : row_stride);
    const int g = h / group;
    CausalGemm qk{CausalGemm::lower_c,
                  r1 - r0,
                  T,
                  hd,
                  q + static_cast<std::size_t>(r0) * W + h * hd,
                  W,
                  kpack + kpack_head * g,
                  static_cast<std::size_t>(hd) * NR,
                  s,
                  lds};
    if (job.causal && !job.scores)
      causal_strips<A>(qk, 0, r1 - r0, r0, job.window);
    else
      gemm<A>(0, r1 - r0, 0, panels(T, NR), T, hd, qk.a, W, qk.b, qk.bstride, nullptr, s, lds);

    float* wts = job.weights + h * sq;
    for (int i = r0; i < r1; ++i) {
      float* scaled = job.scaled ? job.scaled + h * sq + static_cast<std::size_t>(i) * ld : nullptr;
      float* wi = wts + static_cast<std::size_t>(i) * ld;
      const float* si = s + static_cast<std::size_t>(i - r0) * lds;
      // A sliding window masks keys [0, lo) too: the softmax runs over [lo, i] and the cells before are 0.
      const int lo = job.window > 0 && i - job.window + 1 > 0 ? i - job.window + 1 : 0;
      softmax_row<A>(si + lo, (job.causal ? i + 1 : T) - lo, T - lo, job.scale,
                     scaled ? scaled + lo : nullptr, wi + lo);
      for (int j = 0; j < lo; ++j) {
        wi[j] = 0.0f;
        if (scaled) scaled[j] = -INFINITY;
      }
    }
    const float* p = wts + static_cast<std::size_t>(r0) * ld;
    int ldp = static_cast<int>(ld);
    if (job.keep) {
      float* d = job.dropped ? job.dropped + h * sq + static_cast<std::size_t>(r0) * ld
                             : scratch_rows + kRowBlock * row_stride;
      const std::size_t ldd = job.dropped ? ld : row_stride;
      const std::uint8_t* keep = job.keep + h * tt + static_cast<std::size_t>(r0) * T;
      const int dcols = job.dropped ? T : needed;  // the context reads no key past the block's last row
      for (int i = 0; i < r1 - r0; ++i)
        for (int j = 0; j < dcols; ++j)
          d[static_cast<std::size_t>(i) * ldd + j] =
              keep[static_cast<std::size_t>(i) * T + j]
                  ? p[static_cast<std::size_t>(i) * ld + j] * job.keep_scale
                  : 0.0f;
      p = d;
      ldp = static_cast<int>(ldd);
    }
    CausalGemm pv{CausalGemm::lower_a,
                  r1 - r0,
                  hd,
                  needed,
                  p,
                  ldp,
                  vpack + vpack_head * g,
                  vstride,
                  job.context + static_cast<std::size_t>(r0) * W + h * hd,
                  W};
    if (job.causal)
      causal_strips<A>(pv, 0, r1 - r0, r0, job.window);
    else
      gemm<A>(0, r1 - r0, 0, panels(hd, NR), hd, needed, p, ldp, pv.b, vstride, nullptr, pv.c, W);
  });

  // 3b. incremental: the raw scores of the earlier rows against the new keys (masked, but the raw stage shows
  // every cell). Each cell is one dot product in the same order as a full pass, so the panels that overlap
  // earlier columns rewrite them with identical values.
  if (job.scores && first > 0) {
    const int p_first = first / NR;
    const int old_blocks = (first + kRowBlock - 1) / kRowBlock;
    pool.run(H * old_blocks, [&](int task, int) {
      const int h = task % H, r0 = (task / H) * kRowBlock, r1 = lesser<A>(first, r0 + kRowBlock);
      const std::size_t hs = static_cast<std::size_t>(hd) * NR;
      gemm<A>(0, r1 - r0, 0, panels(T, NR) - p_first, T - p_first * NR, hd,
              q + static_cast<std::size_t>(r0) * W + h * hd, W,
              kpack + kpack_head * (h / group) + hs * p_first, hs, nullptr,
              job.scores + h * sq + static_cast<std::size_t>(r0) * ld + p_first * NR, static_cast<int>(ld));
    });
  }

  // 4. out_proj
  if (job.output)
    parallel_gemm<A>(pool, T - first, job.out_width, W, job.context + static_cast<std::size_t>(first) * W,
                     job.wo, job.bo, job.output + static_cast<std::size_t>(first) * job.out_width,
                     HalfPanels{job.wo16, job.wo16_bf16});
}

template <class A>
void fast_gemm::operator()(A, int M, int N, int K, const float* a, const float* b, float* c,
                           ThreadPool* pool) const {
  detail::parallel_gemm<A>(*pool, M, N, K, a, b, nullptr, c);
}

template <class A>
void causal_gemm::operator()(A, const CausalGemm& job) const {
  // row blocks of parallel_gemm's height: a block's rows of A stay in cache while the panels pass
  const int kRows = detail::tile_rows<A>(detail::kTileRows);
  for (int m0 = 0; m0 < job.M; m0 += kRows)
    detail::causal_strips<A>(job, m0, detail::lesser<A>(job.M, m0 + kRows), 0, 0);
}

template <class A>
double fma_probe::operator()(A, long iterations, float* sink) const {
  using B = detail::vf<A>;
#ifdef __wasm_simd128__
  // Where the GEMMs fuse (wasm_fma.hpp), the peak is relaxed_madd's: SIMD128's multiply and add would
  // understate it.
  if (const wasm_fma::Probe p = wasm_fma::probe(); p && iterations > 0 && iterations <= 0x7FFFFFFF) {
    alignas(16) float lanes[4];
    p(static_cast<int>(iterations), lanes);
    *sink = lanes[0] + lanes[1] + lanes[2] + lanes[3];
    return 2.0 * 12.0 * 4.0 * static_cast<double>(iterations);
  }
#endif
  B acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = B(static_cast<float>(i) * 1e-3f);
  const B m(0.999999f), add(1e-7f);
  for (long it = 0; it < iterations; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = xsimd::fma(acc[i], m, add);
  B total(0.0f);
  for (int i = 0; i < 12; ++i) total += acc[i];
  *sink = xsimd::hadd(total);
  return 2.0 * 12.0 * static_cast<double>(B::size) * static_cast<double>(iterations);
}

}  // namespace attnviz::simd
