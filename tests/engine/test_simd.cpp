// The fast kernels of every ISA this machine has, against the scalar reference, over odd shapes; and the same
// bits for every thread count.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "attnviz/engine.hpp"
#include "attnviz/gpt.hpp"
#include "check.hpp"
#include "common/thread_pool.hpp"
#include "simd/isas.hpp"
#include "simd/pack.hpp"
#include "simd/packed.hpp"
#include "simd/wasm_fma.hpp"

using namespace attnviz;
using attnviz::test::random_input;

namespace {

// float32 accumulation (fast path) against double accumulation (reference): relative error per element as in
// check.hpp. Measured worst over these shapes: see the MESSAGE each case prints.
constexpr double kTolerance = 2e-5;

template <Isa I>
struct IsaTag {
  static constexpr Isa isa = I;
};
using Simd128 = IsaTag<Isa::simd128>;
// Every x86-64 and ARM64 ISA with kernels (simd/isas.hpp), then SIMD128.
#define ATTNVIZ_ISA_TAG(id, arch, width, name) IsaTag<Isa::id>,

// A single-threaded WebAssembly build runs every thread count on one thread.
int expected_threads(int requested) {
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
  (void)requested;
  return 1;
#else
  return requested;
#endif
}

bool available(Isa isa) {
  for (Isa i : available_isas())
    if (i == isa) return true;
  return false;
}

double compare(const char* what, const Tensor& fast, const Tensor& ref);
double compare(const char* what, const HeadSquares& fast, const HeadSquares& ref) {
  return compare(what, fast.to_tensor(), ref.to_tensor());
}
double compare(const char* what, const Tensor& fast, const Tensor& ref) {
  INFO(what);
  REQUIRE(fast.size() == ref.size());
  const double err = test::max_rel_error(fast.ptr(), ref.ptr(), ref.size());
  CHECK_MESSAGE(err <= kTolerance, what << " relative error " << err);
  return err;
}

struct Case {
  Variant variant;
  int d_in, d_out, heads;
  double dropout;
  bool bias;
};

}  // namespace

TEST_CASE_TEMPLATE("fast kernels match the reference on odd shapes", Tag,
                   ATTNVIZ_X86_ISAS(ATTNVIZ_ISA_TAG) ATTNVIZ_ARM_ISAS(ATTNVIZ_ISA_TAG) Simd128) {
  if (!available(Tag::isa)) {
    MESSAGE(std::string(to_string(Tag::isa)) << " is not available on this processor: skipped");
    return;
  }
  const Case cases[] = {
      {Variant::simplified, 37, 37, 1, 0.0, false}, {Variant::self_v1, 19, 13, 1, 0.0, false},
      {Variant::self_v2, 37, 21, 1, 0.0, true},     {Variant::causal, 37, 67, 1, 0.3, true},
      {Variant::wrapper, 29, 3, 25, 0.1, false},    {Variant::mha, 37, 75, 25, 0.0, true},
      {Variant::mha, 64, 64, 1, 0.2, false},        {Variant::mha, 96, 128, 2, 0.0, false},
  };
  double worst = 0.0;
  for (const Case& k : cases) {
    for (int T : {1, 7, 63, 130}) {
      for (unsigned stages : {unsigned(kStageAll), 0u}) {
        CAPTURE(to_string(k.variant));
        CAPTURE(T);
        CAPTURE(k.heads);
        CAPTURE(stages);
        Config c;
        c.variant = k.variant, c.d_in = k.d_in, c.d_out = k.d_out, c.num_heads = k.heads;
        c.dropout = k.dropout, c.qkv_bias = k.bias, c.seed = static_cast<std::uint64_t>(T), c.stages = stages;
        const Input in = random_input(T, k.d_in, static_cast<std::uint64_t>(T) + 100);
        Result ref, fast;
        REQUIRE(run(c, in, ref, nullptr, Exec{Isa::scalar, 1}).is_ok());
        REQUIRE(run(c, in, fast, nullptr, Exec{Tag::isa, 2}).is_ok());
        CHECK(fast.isa == Tag::isa);
        if (stages) {
          worst = std::max(worst, compare("q", fast.q, ref.q));
          worst = std::max(worst, compare("v", fast.v, ref.v));
          worst = std::max(worst, compare("scores", fast.scores, ref.scores));
          worst = std::max(worst, compare("scaled", fast.scaled, ref.scaled));
          worst = std::max(worst, compare("dropped", fast.dropped, ref.dropped));
        } else {
          CHECK(fast.scores.empty());
          CHECK(fast.scaled.empty());
          CHECK(fast.dropped.empty());
        }
        worst = std::max(worst, compare("weights", fast.weights, ref.weights));
        worst = std::max(worst, compare("context", fast.context, ref.context));
        worst = std::max(worst, compare("output", fast.output, ref.output));
        CHECK(fast.keep == ref.keep);
        // Masked cells are exactly zero on the fast path too.
        for (int h = 0; h < fast.shape.heads; ++h)
          for (int i = 0; i < T; ++i)
            for (int j = i + 1; j < T && fast.shape.causal; ++j) CHECK(fast.weights.at(h, i, j) == 0.0f);
      }
    }
  }
  MESSAGE(std::string(to_string(Tag::isa)) << ": largest relative error against the reference " << worst);
}

TEST_CASE("the fast path gives the same bits for any thread count") {
  Config c;
  c.variant = Variant::mha, c.d_in = 48, c.d_out = 64, c.num_heads = 4, c.dropout = 0.1, c.qkv_bias = true;
  const Input in = random_input(97, 48, 5);
  Result one;
  REQUIRE(run(c, in, one, nullptr, Exec{Isa::automatic, 1}).is_ok());
  for (int threads : {2, 3, 7}) {
    Result many;
    REQUIRE(run(c, in, many, nullptr, Exec{Isa::automatic, threads}).is_ok());
    CHECK(many.threads == expected_threads(threads));
    CHECK(many.scores == one.scores);
    CHECK(many.weights == one.weights);
    CHECK(many.dropped == one.dropped);
    CHECK(many.output.data == one.output.data);
  }
}

TEST_CASE("ISA selection: automatic picks the best, unavailable ones fall back, scalar is always there") {
  const std::vector<Isa>& isas = available_isas();
  REQUIRE(!isas.empty());
  CHECK(isas.back() == Isa::scalar);
  CHECK(resolve(Isa::automatic) == isas.front());
  CHECK(resolve(Isa::scalar) == Isa::scalar);
  for (Isa i : isas) CHECK(resolve(i) == i);
  CHECK(resolve_threads(3) == expected_threads(3));
  CHECK(resolve_threads(0) >= 1);
#if defined(__aarch64__)
  // Every AArch64 processor has NEON: an ARM64 build runs its kernels unless ATTNVIZ_MAX_ISA lowers the ISA.
  if (!std::getenv("ATTNVIZ_MAX_ISA")) CHECK(isas.front() == Isa::neon);
#endif
  for (Isa i : {Isa::scalar, Isa::sse4_2, Isa::avx2, Isa::avx512, Isa::simd128, Isa::neon}) {
    CAPTURE(to_string(i));
    CHECK(parse_isa(to_string(i)) == i);
  }
}

TEST_CASE("packed weights are reused, and repacked when made for another ISA") {
  Config c;
  c.variant = Variant::mha, c.d_in = 16, c.d_out = 16, c.num_heads = 2;
  TorchGenerator g(c.seed);
  Params p;
  REQUIRE(build_params(c, g, p).is_ok());
  CHECK(static_cast<bool>(p.packed));
  const Input in = random_input(9, 16, 1);
  Result a, b, r;
  TorchGenerator g1(0), g2(0), g3(0);
  REQUIRE(forward(c, p, in, g1, a).is_ok());
  pack(p, Exec{Isa::sse4_2, 1});  // packed for another ISA than the one forward runs next
  REQUIRE(forward(c, p, in, g2, b, Exec{Isa::automatic, 1}).is_ok());
  REQUIRE(forward(c, p, in, g3, r, Exec{Isa::scalar, 1}).is_ok());
  CHECK(test::max_rel_error(a.output.ptr(), r.output.ptr(), r.output.size()) <= kTolerance);
  CHECK(test::max_rel_error(b.output.ptr(), r.output.ptr(), r.output.size()) <= kTolerance);
}

TEST_CASE("keys and values packed a row at a time into room for more equal the panels packed at once") {
  // A head's keys and values (T, hd) in rows `ld` floats apart, as a model's cache holds them; panel widths
  // that divide hd and that do not, T past a panel's end.
  const int T = 37, hd = 6, ld = 10, capacity = 45;
  std::vector<float> src(static_cast<std::size_t>(T) * ld);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i % 97) - 40.5f;
  for (int nr : {4, 8, 16}) {
    CAPTURE(nr);
    std::vector<float> k_once(simd::panel_floats(T, hd, nr)), v_once(simd::panel_floats(hd, T, nr));
    simd::pack_nk(src.data(), T, hd, ld, nr, k_once.data());
    simd::pack_kn(src.data(), T, hd, ld, nr, v_once.data());
    // appended one row, then several, into storage that held other numbers
    std::vector<float> k(simd::panel_floats(capacity, hd, nr), NAN),
        v(simd::panel_floats(hd, capacity, nr), NAN);
    int packed = 0;
    for (int rows : {1, 2, 3, 11, 16, 17, 30, T}) {
      simd::pack_nk_from(src.data(), packed, rows, hd, ld, nr, k.data());
      simd::pack_kn_rows(src.data(), packed, rows, hd, ld, nr, capacity, v.data());
      packed = rows;
    }
    // K^T: the same panels, zeros past T included; V: each panel's first T rows, `capacity` rows apart
    CHECK(std::equal(k_once.begin(), k_once.end(), k.begin()));
    for (int p = 0; p < simd::panels(hd, nr); ++p) {
      CAPTURE(p);
      const auto at = [&](const std::vector<float>& x, int rows) {
        return x.begin() + static_cast<std::ptrdiff_t>(p) * rows * nr;
      };
      CHECK(std::equal(at(v_once, T), at(v_once, T) + T * nr, at(v, capacity)));
    }
    // from 0 with room for T rows: pack_nk's and pack_kn's own layouts
    std::vector<float> k0(k_once.size(), NAN), v0(v_once.size(), NAN);
    simd::pack_nk_from(src.data(), 0, T, hd, ld, nr, k0.data());
    simd::pack_kn_rows(src.data(), 0, T, hd, ld, nr, T, v0.data());
    CHECK(k0 == k_once);
    CHECK(v0 == v_once);
  }
}

namespace {

// One of causal attention's products three ways on one ISA: the dense panel GEMM (what the kernels computed
// before they skipped the masked half), the causal one into storage that holds NaN, and a double-sum oracle.
// a (M, K) already holds the zeros the kind promises, and `stored` is what the causal kernel reads (a itself,
// or for lower_at its transpose (K, M)); b (K, N) row-major.
void check_causal(Isa isa, simd::CausalGemm::Kind kind, int M, int N, int K, const std::vector<float>& a,
                  const std::vector<float>& stored, const std::vector<float>& b) {
  const int nr = simd::panel_width(isa);
  AlignedFloats panels(simd::panel_floats(N, K, nr));
  simd::pack_kn(b.data(), K, N, N, nr, panels.data());
  std::vector<float> dense(static_cast<std::size_t>(M) * N, NAN), causal(dense.size(), NAN);
  static ThreadPool alone(1);
  simd::run_gemm(isa, M, N, K, a.data(), panels.data(), dense.data(), alone);
  const int lda = kind == simd::CausalGemm::lower_at ? M : K;
  simd::run_causal_gemm(isa, simd::CausalGemm{kind, M, N, K, stored.data(), lda, panels.data(),
                                              static_cast<std::size_t>(K) * nr, causal.data(), N});
  double worst = 0.0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      const std::size_t at = static_cast<std::size_t>(i) * N + j;
      // lower_c computes the cells at and left of the diagonal; right of it, a cell is left as it was or
      // holds the same product
      if (kind == simd::CausalGemm::lower_c && j > i) {
        if (!std::isnan(causal[at])) REQUIRE(test::bits_of(causal[at]) == test::bits_of(dense[at]));
        continue;
      }
      INFO("row " << i << ", column " << j << ": " << causal[at] << " against " << dense[at]);
      REQUIRE(test::bits_of(causal[at]) == test::bits_of(dense[at]));
      double sum = 0.0;
      for (int k = 0; k < K; ++k)
        sum += static_cast<double>(a[static_cast<std::size_t>(i) * K + k]) *
               b[static_cast<std::size_t>(k) * N + j];
      worst = std::max(worst, std::fabs(causal[at] - sum));
    }
  CHECK(worst <= 1e-5 * K);  // the terms are at most 1 in size
}

}  // namespace

TEST_CASE("row blocks cover a range in as few blocks as the kernel's height allows, sizes within one") {
  for (int MR : {1, 5, 6, 12})
    for (int m0 : {0, 3})
      for (int n = 0; n <= 200; ++n) {
        CAPTURE(MR);
        CAPTURE(n);
        std::vector<int> sizes;
        int next = m0;
        attnviz::simd::for_row_blocks(m0, m0 + n, MR, [&](int i, int rows) {
          CHECK(i == next);  // contiguous, in order
          next = i + rows;
          sizes.push_back(rows);
        });
        CHECK(next == (n > 0 ? m0 + n : m0));
        CHECK(static_cast<int>(sizes.size()) == (n + MR - 1) / MR);
        if (sizes.empty()) continue;
        const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
        CHECK(*lo >= 1);
        CHECK(*hi <= MR);
        CHECK(*hi - *lo <= 1);
      }
  // 16 rows of WebAssembly's 5-row kernel: four blocks of 4, never a block of one row
  std::vector<int> sizes;
  attnviz::simd::for_row_blocks(0, 16, 5, [&](int, int rows) { sizes.push_back(rows); });
  CHECK(sizes == std::vector<int>{4, 4, 4, 4});
}

TEST_CASE("16-bit panels give their float32 copy's bits, a few rows or many, and each head's own output") {
  // BF16 panels widened a K block at a time (gemm16: up to 48 rows a panel whole in memory order, more rows a
  // K block across the panels) against the same values in float32 panels (gemm: every sum over K at once):
  // K = 300 spans several of gemm16's blocks on every ISA. Rows 1, 13 and 31 (a keystroke, its lens), 48, 49
  // and 100 cross both orders and gemm's few-row prefetch. Then RowJob::head_outputs with two heads of 150:
  // float32 against BF16 bit for bit, and against double sums within float summation's bound.
  const int K = 300, heads = 2, hd = K / heads;
  std::uint64_t state = 11;
  const auto uniform = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>(static_cast<double>(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  };
  for (Isa isa : available_isas()) {
    if (isa == Isa::scalar) continue;
    CAPTURE(to_string(isa));
    const int N = 5 * simd::panel_width(isa) + 3;
    std::vector<std::uint16_t> halves(static_cast<std::size_t>(N) * K);
    Tensor wide(N, K);
    for (std::size_t i = 0; i < halves.size(); ++i) {
      const float f = uniform();
      std::uint32_t bits = 0;
      std::memcpy(&bits, &f, sizeof bits);
      halves[i] = static_cast<std::uint16_t>(bits >> 16);
      bits = static_cast<std::uint32_t>(halves[i]) << 16;
      std::memcpy(&wide.data[i], &bits, sizeof bits);
    }
    MatrixSource src;
    src.bytes = reinterpret_cast<const unsigned char*>(halves.data()), src.dtype = Dtype::bf16;
    src.rows = N, src.cols = K;
    const PackedMatrix b16 = pack_matrix(src, false, isa, true), f32 = pack_matrix(wide, isa);
    REQUIRE(b16.dtype == Dtype::bf16);
    REQUIRE(f32.dtype == Dtype::f32);
    ThreadPool& pool = ThreadPool::shared(2);
    const auto run = [&](simd::RowJob job, const PackedMatrix& w, const float* x, float* y) {
      job.cols = K, job.out = N, job.x = x, job.y = y, job.pool = &pool;
      if (w.dtype == Dtype::f32)
        job.w = w.data.data();
      else
        job.w16 = w.halves(), job.w16_bf16 = true;
      simd::run_rows(isa, job);
    };
    for (const int M : {1, 13, 31, 48, 49, 100}) {
      CAPTURE(M);
      std::vector<float> x(static_cast<std::size_t>(M) * K), y16(static_cast<std::size_t>(M) * N),
          y32(y16.size());
      for (float& v : x) v = uniform();
      simd::RowJob job;
      job.kind = simd::RowJob::linear, job.rows = M;
      run(job, b16, x.data(), y16.data());
      run(job, f32, x.data(), y32.data());
      CHECK(std::memcmp(y16.data(), y32.data(), y16.size() * sizeof(float)) == 0);
    }
    std::vector<float> x(static_cast<std::size_t>(K)), y16(static_cast<std::size_t>(heads) * N),
        y32(y16.size());
    for (float& v : x) v = uniform();
    simd::RowJob job;
    job.kind = simd::RowJob::head_outputs, job.rows = 1, job.heads = heads;
    run(job, b16, x.data(), y16.data());
    run(job, f32, x.data(), y32.data());
    CHECK(std::memcmp(y16.data(), y32.data(), y16.size() * sizeof(float)) == 0);
    int outside = 0;
    for (int h = 0; h < heads; ++h)
      for (int o = 0; o < N; ++o) {
        double sum = 0.0, magnitude = 0.0;
        for (int i = h * hd; i < (h + 1) * hd; ++i) {
          const double t = static_cast<double>(x[static_cast<std::size_t>(i)]) * wide.at(o, i);
          sum += t, magnitude += std::fabs(t);
        }
        const double got = y32[static_cast<std::size_t>(h) * N + static_cast<std::size_t>(o)];
        outside += std::fabs(got - sum) >
                   (hd + 2) * static_cast<double>(std::numeric_limits<float>::epsilon()) * magnitude;
      }
    CHECK(outside == 0);
  }
}

TEST_CASE("causal attention products skip the masked half and give the dense GEMM's bits") {
  // T around the micro-kernels' heights (5, 6, 12 rows) and panel widths (8, 16, 32), one row past the
  // products' row blocks (96), and past their K blocks (4096 / NR = 128, 256, 512 terms); head widths that
  // fill no whole panel. The kept cells include exact zeros (dropped weights) and the values -0.0, so the
  // masked cells' products are -0 and +0 alike.
  for (Isa isa : available_isas()) {
    if (isa == Isa::scalar) continue;
    for (int T : {1, 2, 5, 7, 13, 17, 33, 97, 300, 520}) {
      for (int hd : {1, 19, 64}) {
        if (T > 130 && hd != 64) continue;
        CAPTURE(to_string(isa));
        CAPTURE(T);
        CAPTURE(hd);
        TorchGenerator g(static_cast<std::uint64_t>(T * 100 + hd));
        const auto value = [&] {
          const std::uint32_t r = g.random();
          if (r % 11 == 0) return 0.0f;
          if (r % 13 == 0) return -0.0f;
          return static_cast<float>(r % (1u << 24)) * 0x1p-23f - 1.0f;
        };
        std::vector<float> q(static_cast<std::size_t>(T) * hd), kt(q.size()), v(q.size());
        for (float& x : q) x = value();
        for (float& x : kt) x = value();
        for (float& x : v) x = value();
        // K^T (hd, T) for the scores; P (T, T) zero right of the diagonal, and its transpose
        std::vector<float> k_t(q.size()), p(static_cast<std::size_t>(T) * T, 0.0f), pt(p.size(), 0.0f);
        for (int i = 0; i < T; ++i)
          for (int e = 0; e < hd; ++e)
            k_t[static_cast<std::size_t>(e) * T + i] = kt[static_cast<std::size_t>(i) * hd + e];
        for (int i = 0; i < T; ++i)
          for (int j = 0; j <= i; ++j) {
            p[static_cast<std::size_t>(i) * T + j] = std::fabs(value()) / static_cast<float>(i + 1);
            pt[static_cast<std::size_t>(j) * T + i] = p[static_cast<std::size_t>(i) * T + j];
          }
        check_causal(isa, simd::CausalGemm::lower_c, T, T, hd, q, q, k_t);  // scores = Q K^T
        check_causal(isa, simd::CausalGemm::lower_a, T, hd, T, p, p, v);    // context = P V
        check_causal(isa, simd::CausalGemm::lower_at, T, hd, T, pt, p, v);  // dV = P^T dctx, P read in place
      }
    }
  }
}

#ifdef __EMSCRIPTEN__
namespace {

// Whether every cell of c (M x N) is A (M x K, row-major) times B (K x N, row-major) summed over k in order
// with each product fused (fmaf), and whether every cell is that sum with each product rounded first.
struct SumsSeen {
  bool fused = true, unfused = true;
};
SumsSeen sums_seen(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c,
                   int M, int N, int K) {
  SumsSeen seen;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float f = 0.0f, u = 0.0f;
      for (int k = 0; k < K; ++k) {
        const float x = a[static_cast<std::size_t>(i) * K + k], y = b[static_cast<std::size_t>(k) * N + j];
        f = fma_exact(x, y, f);
        const float product = x * y;  // rounded: its own statement, never contracted
        u = product + u;
      }
      const auto got = test::bits_of(c[static_cast<std::size_t>(i) * N + j]);
      seen.fused = seen.fused && got == test::bits_of(f);
      seen.unfused = seen.unfused && got == test::bits_of(u);
    }
  return seen;
}

}  // namespace

TEST_CASE("WebAssembly: the GEMMs, fused or not, give each output's sum over k in order, bit for bit") {
  // Where the browser (or node with --experimental-wasm-relaxed-simd) runs relaxed SIMD, the GEMMs run the
  // fused kernels of simd/wasm_fma.hpp: each output is then fmaf(a_k, b_k, sum) over k in order (on a
  // processor without FMA, V8 splits each into a multiply and an add, and every output is the unfused sum).
  // Else the engine's own kernels give the unfused sum. Shapes around the kernels' 5 (own) and 6 (fused) rows
  // and 8 columns, past panels narrower than 8 and a bias-free start, K below, at and past the fused kernels'
  // 8 terms a loop iteration (wasm_fma_gen.mjs) with each remainder; signed zeros among the terms.
  const bool fused_kernels = simd::wasm_fma::in_use();
  MESSAGE("relaxed-SIMD FMA kernels in use: " << std::string(fused_kernels ? "yes" : "no"));
  if (const char* expect = std::getenv("ATTNVIZ_EXPECT_WASM_FMA"); expect && *expect == '1')
    REQUIRE(fused_kernels);
  int fused = 0, unfused = 0;
  for (int M : {1, 4, 5, 6, 11, 12, 97})
    for (int N : {3, 8, 21})
      for (int K : {1, 2, 8, 17, 300}) {
        CAPTURE(M);
        CAPTURE(N);
        CAPTURE(K);
        TorchGenerator g(static_cast<std::uint64_t>(M * 10000 + N * 100 + K));
        const auto value = [&] {
          const std::uint32_t r = g.random();
          if (r % 17 == 0) return -0.0f;
          return static_cast<float>(r % (1u << 24)) * 0x1p-23f - 1.0f;
        };
        std::vector<float> a(static_cast<std::size_t>(M) * K), b(static_cast<std::size_t>(K) * N);
        for (float& x : a) x = value();
        for (float& x : b) x = value();
        const int nr = simd::panel_width(Isa::simd128);
        AlignedFloats panels(simd::panel_floats(N, K, nr));
        simd::pack_kn(b.data(), K, N, N, nr, panels.data());
        std::vector<float> c(static_cast<std::size_t>(M) * N, NAN);
        static ThreadPool alone(1);
        simd::run_gemm(Isa::simd128, M, N, K, a.data(), panels.data(), c.data(), alone);
        const SumsSeen seen = sums_seen(a, b, c, M, N, K);
        // The engine's own kernels never fuse; the fused ones fuse every product or (without FMA) none.
        REQUIRE((fused_kernels ? seen.fused || seen.unfused : seen.unfused));
        fused += seen.fused && !seen.unfused;
        unfused += seen.unfused && !seen.fused;
      }
  // Training's transposed products (TransA, through causal_gemm's lower_at): A (T x T) zero left of the
  // diagonal, read from its transpose; the zero terms a strip skips leave a sum's bits as they are.
  for (int T : {5, 13, 40})
    for (int N : {3, 8, 21}) {
      CAPTURE(T);
      CAPTURE(N);
      TorchGenerator g(static_cast<std::uint64_t>(T * 100 + N));
      const auto value = [&] { return static_cast<float>(g.random() % (1u << 24)) * 0x1p-23f - 1.0f; };
      std::vector<float> a(static_cast<std::size_t>(T) * T, 0.0f), at(a.size(), 0.0f),
          b(static_cast<std::size_t>(T) * N);
      for (int i = 0; i < T; ++i)
        for (int k = i; k < T; ++k) {
          a[static_cast<std::size_t>(i) * T + k] = value();
          at[static_cast<std::size_t>(k) * T + i] = a[static_cast<std::size_t>(i) * T + k];
        }
      for (float& x : b) x = value();
      const int nr = simd::panel_width(Isa::simd128);
      AlignedFloats panels(simd::panel_floats(N, T, nr));
      simd::pack_kn(b.data(), T, N, N, nr, panels.data());
      std::vector<float> c(static_cast<std::size_t>(T) * N, NAN);
      simd::run_causal_gemm(Isa::simd128,
                            simd::CausalGemm{simd::CausalGemm::lower_at, T, N, T, at.data(), T, panels.data(),
                                             static_cast<std::size_t>(T) * nr, c.data(), N});
      const SumsSeen seen = sums_seen(a, b, c, T, N, T);
      REQUIRE((fused_kernels ? seen.fused || seen.unfused : seen.unfused));
      fused += seen.fused && !seen.unfused;
      unfused += seen.unfused && !seen.fused;
    }
  MESSAGE("products fused in " << fused << " shapes, unfused in " << unfused);
  if (!fused_kernels) CHECK(fused == 0);
  // One kind of kernel for every shape: edge rows and narrow panels never fall back to the unfused ones.
  CHECK_FALSE((fused > 0 && unfused > 0));
}
#endif
