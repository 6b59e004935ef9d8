// Training's element-wise and row-wise kernels (simd/train_kernels.hpp) against the readable reference loops
// (Isa::scalar) in train/ops.cpp, on every ISA this processor offers, at shapes whose rows do not fill whole
// vectors: 1e-5 relative (test::max_rel_error), invariants (softmax rows sum to 1, the cross-entropy
// gradient's rows to 0), AdamW to the bit, and results that do not depend on the thread count.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attnviz/torch_rng.hpp"
#include "check.hpp"
#include "simd/train_kernels.hpp"
#include "train/ops.hpp"

using namespace attnviz;

namespace {

std::vector<float> uniform(std::size_t n, float lo, float hi, std::uint64_t seed) {
  TorchGenerator g(seed);
  std::vector<float> v(n);
  for (float& x : v) x = lo + (hi - lo) * static_cast<float>(g.random() % (1u << 24)) * 0x1p-24f;
  return v;
}

std::vector<Isa> fast_isas() {
  std::vector<Isa> v;
  for (Isa isa : available_isas())
    if (isa != Isa::scalar) v.push_back(isa);
  return v;
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  REQUIRE(got.size() == want.size());
  const double err = test::max_rel_error(got.data(), want.data(), got.size());
  INFO(what << ": max relative error " << err);
  CHECK(err <= 1e-5);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (test::bits_of(a[i]) != test::bits_of(b[i])) return false;
  return true;
}

// Runs `fn(kernels)` on the reference and on every fast ISA at 1 and 3 threads; `check(fast, reference)`.
// One Kernels at a time: each holds ThreadPool::shared(threads), which a different count rebuilds.
template <class Run, class Check>
void against_reference(const Run& run, const Check& check) {
  const auto on = [&](Isa isa, int threads) {
    train::Kernels k(Exec{isa, threads});
    REQUIRE((k.fast == nullptr) == (isa == Isa::scalar));
    return run(k);
  };
  const auto want = on(Isa::scalar, 1);
  for (Isa isa : fast_isas()) {
    const auto got = on(isa, 1);
    check(got, want, std::string(to_string(isa)));
    INFO(to_string(isa) << ": 1 and 3 threads");
    CHECK(got == on(isa, 3));
  }
}

}  // namespace

TEST_CASE("train kernels: LayerNorm forward and backward equal the reference") {
  for (int cols : {768, 77, 5}) {
    SUBCASE(("cols " + std::to_string(cols)).c_str()) {
      const int rows = 70;  // more than one chunk of 16 and of 32 rows, the last one short
      const std::size_t n = static_cast<std::size_t>(rows) * cols;
      // rows with a mean far from 0 next to their spread: the mean's rounding would show
      std::vector<float> x = uniform(n, -1.0f, 1.0f, 1);
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < cols; ++j)
          x[static_cast<std::size_t>(r) * cols + j] += 0.25f * static_cast<float>(r);
      const std::vector<float> scale = uniform(static_cast<std::size_t>(cols), 0.5f, 1.5f, 2);
      const std::vector<float> shift = uniform(static_cast<std::size_t>(cols), -0.5f, 0.5f, 3);
      const std::vector<float> dy = uniform(n, -1.0f, 1.0f, 4);
      const std::vector<float> dx0 = uniform(n, -1.0f, 1.0f, 5);
      auto run = [&](train::Kernels& k) {
        std::vector<float> y(n), h(n), rstd(static_cast<std::size_t>(rows)), dx = dx0;
        std::vector<float> ds(static_cast<std::size_t>(cols), 0.5f),
            db(static_cast<std::size_t>(cols), -0.5f);
        train::layer_norm(k, x.data(), scale.data(), shift.data(), y.data(), h.data(), rstd.data(), rows,
                          cols);
        train::layer_norm_backward(k, dy.data(), h.data(), rstd.data(), scale.data(), dx.data(), ds.data(),
                                   db.data(), rows, cols, true);
        return std::vector<std::vector<float>>{y, h, rstd, dx, ds, db};
      };
      against_reference(run, [](const auto& got, const auto& want, const std::string& isa) {
        const char* names[] = {"y", "x_hat", "rstd", "dx", "dscale", "dshift"};
        for (std::size_t i = 0; i < want.size(); ++i) check_close(got[i], want[i], isa + " " + names[i]);
      });
    }
  }
}

TEST_CASE("train kernels: GELU and its backward equal the reference") {
  // [-12, 12] and the saturated ends, an odd count so that the last vector is partial
  std::vector<float> x = uniform(100003, -12.0f, 12.0f, 6);
  for (float v : {0.0f, -0.0f, 1e-8f, -1e-8f, 30.0f, -30.0f, 1e4f, -1e4f}) x.push_back(v);
  const std::vector<float> dy = uniform(x.size(), -1.0f, 1.0f, 7);
  auto run = [&](train::Kernels& k) {
    std::vector<float> y(x.size()), dx = dy;
    train::gelu(k, x.data(), y.data(), x.size());
    train::gelu_backward(k, x.data(), dx.data(), dx.data(), x.size());  // in place, as the model runs it
    return std::vector<std::vector<float>>{y, dx};
  };
  against_reference(run, [&](const auto& got, const auto& want, const std::string& isa) {
    check_close(got[0], want[0], isa + " gelu");
    check_close(got[1], want[1], isa + " gelu_backward");
    // the saturated ends exactly: gelu(x) = x for large x, 0 for very negative x; the slope 1 and 0
    const std::size_t e = x.size() - 4;
    CHECK(got[0][e] == 30.0f);
    CHECK(got[0][e + 1] == 0.0f);
    CHECK(got[0][e + 2] == 1e4f);
    CHECK(got[0][e + 3] == 0.0f);
    CHECK(got[1][e + 2] == dy[e + 2]);
    CHECK(got[1][e + 3] == 0.0f);
  });
}

TEST_CASE("train kernels: softmax cross-entropy and its backward equal the reference") {
  for (int vocab : {50257, 1003, 3}) {
    SUBCASE(("vocab " + std::to_string(vocab)).c_str()) {
      const int rows = 5;
      const std::size_t n = static_cast<std::size_t>(rows) * vocab;
      std::vector<float> logits = uniform(n, -8.0f, 8.0f, 8);
      logits[1] = 60.0f;  // a row dominated by one logit
      std::vector<int> targets;
      for (int r = 0; r < rows; ++r) targets.push_back((r * 7919) % vocab);
      auto run = [&](train::Kernels& k) {
        std::vector<float> p = logits;
        std::vector<double> losses;
        const double mean = train::cross_entropy(k, p.data(), targets.data(), rows, vocab, &losses);
        std::vector<float> g = p;
        train::cross_entropy_backward(k, g.data(), targets.data(), rows, vocab);
        std::vector<float> l(losses.begin(), losses.end());
        l.push_back(static_cast<float>(mean));
        return std::vector<std::vector<float>>{p, g, l};
      };
      against_reference(run, [&](const auto& got, const auto& want, const std::string& isa) {
        check_close(got[0], want[0], isa + " probabilities");
        check_close(got[1], want[1], isa + " dlogits");
        check_close(got[2], want[2], isa + " losses");
        for (int r = 0; r < rows; ++r) {
          double sum_p = 0.0, sum_g = 0.0;
          for (int j = 0; j < vocab; ++j) {
            sum_p += got[0][static_cast<std::size_t>(r) * vocab + j];
            sum_g += got[1][static_cast<std::size_t>(r) * vocab + j];
          }
          INFO(isa << " row " << r);
          CHECK(sum_p == doctest::Approx(1.0).epsilon(1e-5));
          CHECK(std::fabs(sum_g) <= 1e-6);
        }
      });
    }
  }
}

TEST_CASE("train kernels: dropout and residual adds equal the reference exactly") {
  const std::size_t n = 40009;
  const std::vector<float> x0 = uniform(n, -3.0f, 3.0f, 9), y = uniform(n, -3.0f, 3.0f, 10);
  std::vector<std::uint8_t> keep(n);
  for (std::size_t i = 0; i < n; ++i) keep[i] = (i * 2654435761u) % 10 < 9;
  auto run = [&](train::Kernels& k) {
    std::vector<float> x = x0;
    train::dropout(k, x.data(), keep.data(), n, 1.0f / 0.9f);
    train::add(k, x.data(), y.data(), n);
    return x;
  };
  against_reference(run, [](const auto& got, const auto& want, const std::string& isa) {
    INFO(isa);
    CHECK(same_bits(got, want));
  });
}

TEST_CASE("train kernels: AdamW gives the reference loop's bits on every ISA") {
  // optim.cpp's loop, PyTorch's single-tensor AdamW: each operation rounds to float, nothing fused
  auto reference = [](float* p, float* m, float* v, const float* g, std::size_t n,
                      const simd::AdamWScalars& s) {
    for (std::size_t i = 0; i < n; ++i) {
      p[i] *= s.decay;
      m[i] = m[i] * s.b1 + s.one_minus_b1 * g[i];
      v[i] = v[i] * s.b2 + s.one_minus_b2 * g[i] * g[i];
      const float denom = std::sqrt(v[i]) / s.bc2_sqrt + s.eps;
      p[i] += -s.step_size * m[i] / denom;
    }
  };
  const std::size_t n = 10007;
  const std::vector<float> p0 = uniform(n, -1.0f, 1.0f, 13), g = uniform(n, -1e-2f, 1e-2f, 14);
  for (Isa isa : fast_isas()) {
    const simd::TrainKernels* fast = simd::train_kernels(isa);
    REQUIRE(fast != nullptr);
    std::vector<float> p = p0, m(n, 0.0f), v(n, 0.0f), rp = p0, rm(n, 0.0f), rv(n, 0.0f);
    for (int step = 1; step <= 3; ++step) {
      simd::AdamWScalars s;
      s.decay = static_cast<float>(1.0 - 4e-4 * 0.1), s.b1 = 0.9f,
      s.one_minus_b1 = static_cast<float>(1.0 - 0.9);
      s.b2 = 0.999f, s.one_minus_b2 = static_cast<float>(1.0 - 0.999), s.eps = 1e-8f;
      s.step_size = static_cast<float>(4e-4 / (1.0 - std::pow(0.9, step)));
      s.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(0.999, step)));
      fast->adamw(p.data(), m.data(), v.data(), g.data(), n, s);
      reference(rp.data(), rm.data(), rv.data(), g.data(), n, s);
    }
    INFO(to_string(isa));
    CHECK(same_bits(p, rp));
    CHECK(same_bits(m, rm));
    CHECK(same_bits(v, rv));
    CHECK(p != p0);
  }
}

TEST_CASE("train kernels: transposes copy every element exactly") {
  // shapes whose edges leave partial 4 x 4 tiles and 32 x 32 blocks, with row strides wider than the rows
  for (const std::pair<int, int>& shape : {std::pair{37, 70}, {64, 64}, {5, 3}, {1, 9}}) {
    const int rows = shape.first,
              cols = shape.second;  // not a structured binding: CAPTURE's lambda needs C++20
    CAPTURE(rows);
    CAPTURE(cols);
    const std::size_t ld_src = static_cast<std::size_t>(cols) + 3,
                      ld_dst = static_cast<std::size_t>(rows) + 1;
    const std::vector<float> src = uniform(static_cast<std::size_t>(rows) * ld_src, -1.0f, 1.0f, 21);
    std::vector<float> want(static_cast<std::size_t>(cols) * ld_dst, -7.0f);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) want[static_cast<std::size_t>(j) * ld_dst + i] = src[i * ld_src + j];
    for (Isa isa : fast_isas()) {
      INFO(to_string(isa));
      std::vector<float> got(want.size(), -7.0f);  // the padding past each row stays untouched
      simd::train_kernels(isa)->transpose(src.data(), ld_src, rows, cols, got.data(), ld_dst);
      CHECK(same_bits(got, want));
    }
  }
}

namespace {

struct AttentionShape {
  int batch, T, H, hd;
};

// The fast attention forward and backward against the reference, with and without dropout.
void check_attention(const AttentionShape& shape) {
  const int batch = shape.batch, T = shape.T, H = shape.H, hd = shape.hd;
  const std::size_t nd = static_cast<std::size_t>(batch) * T * H * hd,
                    square = static_cast<std::size_t>(batch) * H * T * T;
  const std::vector<float> q = uniform(nd, -1.5f, 1.5f, 31), kk = uniform(nd, -1.5f, 1.5f, 32),
                           v = uniform(nd, -1.0f, 1.0f, 33), dctx = uniform(nd, -1.0f, 1.0f, 34);
  std::vector<std::uint8_t> keep(square);
  for (std::size_t i = 0; i < square; ++i) keep[i] = (i * 2654435761u) % 10 < 8;
  for (bool drop : {false, true}) {
    CAPTURE(drop);
    auto run = [&](train::Kernels& k) {
      train::Attention a{batch, T, H, hd, std::sqrt(static_cast<float>(hd)), 1.0f / 0.8f, &k};
      std::vector<float> weights(square), ctx(nd), dq(nd), dk(nd), dv(nd);
      const std::uint8_t* kp = drop ? keep.data() : nullptr;
      train::attention_forward(a, q.data(), kk.data(), v.data(), weights.data(), kp, ctx.data());
      train::attention_backward(a, q.data(), kk.data(), v.data(), weights.data(), kp, dctx.data(), dq.data(),
                                dk.data(), dv.data());
      return std::vector<std::vector<float>>{weights, ctx, dq, dk, dv};
    };
    against_reference(run, [&](const auto& got, const auto& want, const std::string& isa) {
      const char* names[] = {"weights", "ctx", "dq", "dk", "dv"};
      for (std::size_t i = 0; i < got.size(); ++i) check_close(got[i], want[i], isa + " " + names[i]);
      // every row sums to 1 and its masked cells are exactly 0
      const std::vector<float>& w = got[0];
      for (std::size_t r = 0; r < square / T; ++r) {
        const int i = static_cast<int>(r % T);
        double sum = 0.0;
        for (int j = 0; j < T; ++j) {
          const float x = w[r * T + j];
          if (j > i) REQUIRE(x == 0.0f);
          sum += x;
        }
        REQUIRE(std::fabs(sum - 1.0) < 1e-6);
      }
    });
  }
}

}  // namespace

TEST_CASE("train kernels: the attention's softmax and products equal the reference") {
  // 2 sequences of 37 tokens (rows that do not fill whole vectors), 3 heads of 8; scores up to about 6. Then
  // the shapes where the products' causal strips change: one token, a micro-kernel's height and one more
  // (5, 6, 12 rows), a panel's width and one more (8, 16, 32 columns), one row past a 96-row block, head
  // widths that fill no whole panel.
  for (const AttentionShape& shape :
       {AttentionShape{2, 37, 3, 8}, AttentionShape{1, 1, 2, 5}, AttentionShape{1, 7, 1, 16},
        AttentionShape{1, 13, 2, 19}, AttentionShape{2, 65, 2, 4}, AttentionShape{1, 97, 1, 33}}) {
    SUBCASE(("T " + std::to_string(shape.T) + ", hd " + std::to_string(shape.hd)).c_str()) {
      check_attention(shape);
    }
  }
}
