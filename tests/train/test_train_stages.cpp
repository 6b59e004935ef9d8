// The training passes in stages (TrainModel::start_loss, forward_stage, backward_stage), as the Train panel
// runs them a piece a frame: the head cut into pieces of rows gives the numbers of the head in one piece, bit
// for bit, on every ISA; the kernels' products in pieces (Kernels::linear_rows, linear_dx_rows,
// linear_dw_rows) equal the whole products to the bit; and stages out of order are refused.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "attnviz/torch_rng.hpp"
#include "attnviz/train.hpp"
#include "train/ops.hpp"

using namespace attnviz;

namespace {

std::vector<float> uniform(std::size_t n, std::uint64_t seed) {
  TorchGenerator g(seed);
  std::vector<float> v(n);
  for (float& x : v) x = -1.0f + 2.0f * static_cast<float>(g.random() % (1u << 24)) * 0x1p-24f;
  return v;
}

bool same_bits(const float* a, const float* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// Every gradient tensor of `a` equal to `b`'s, bit for bit; the first that differs named.
std::string first_difference(const GptTensors& a, const GptTensors& b) {
  std::vector<std::pair<std::string, const Tensor*>> theirs;
  b.each([&](const std::string& name, const Tensor& t) { theirs.emplace_back(name, &t); });
  std::size_t i = 0;
  std::string diff;
  a.each([&](const std::string& name, const Tensor& t) {
    const Tensor* o = i < theirs.size() ? theirs[i++].second : nullptr;
    if (diff.empty() && (!o || o->size() != t.size() || !same_bits(t.ptr(), o->ptr(), t.size()))) diff = name;
  });
  return diff;
}

struct Batch {
  std::vector<int> inputs, targets;
};

Batch batch_of(int batch, int tokens, int vocab, std::uint64_t seed) {
  TorchGenerator g(seed);
  Batch b;
  for (int i = 0; i < batch * tokens; ++i) {
    b.inputs.push_back(static_cast<int>(g.random() % static_cast<std::uint32_t>(vocab)));
    b.targets.push_back(static_cast<int>(g.random() % static_cast<std::uint32_t>(vocab)));
  }
  return b;
}

}  // namespace

TEST_CASE("train stages: products in pieces of rows equal the whole products bit for bit") {
  // odd sizes: rows that fill no whole micro-kernel, columns no whole panel
  const int M = 37, K = 19, N = 131;
  const std::vector<float> x = uniform(static_cast<std::size_t>(M) * K, 1),
                           w = uniform(static_cast<std::size_t>(N) * K, 2),
                           dy = uniform(static_cast<std::size_t>(M) * N, 3);
  for (Isa isa : available_isas()) {
    CAPTURE(to_string(isa));
    Exec how;
    how.isa = isa, how.threads = 2;
    train::Kernels k(how);
    std::vector<float> y(static_cast<std::size_t>(M) * N), dx(static_cast<std::size_t>(M) * K);
    std::vector<float> dw(static_cast<std::size_t>(N) * K, 0.5f), db(N, 0.25f);
    k.linear(x.data(), w.data(), nullptr, y.data(), M, K, N);
    k.linear_dx(dy.data(), w.data(), dx.data(), M, K, N, false);
    k.linear_dw(dy.data(), x.data(), dw.data(), db.data(), M, K, N);

    std::vector<float> y2(y.size(), -1.0f), dx2(dx.size(), -1.0f), dw2(dw.size(), 0.5f),
        db2(db.size(), 0.25f);
    AlignedFloats packed;
    k.pack_linear(w.data(), K, N, packed);
    for (auto [m0, m1] : {std::pair{0, 5}, {5, 17}, {17, 18}, {18, 37}})
      k.linear_rows(x.data(), w.data(), packed, y2.data(), m0, m1, K, N);
    k.pack_linear_dx(w.data(), K, N, packed);
    for (auto [m0, m1] : {std::pair{0, 13}, {13, 14}, {14, 37}})
      k.linear_dx_rows(dy.data(), w.data(), packed, dx2.data(), m0, m1, K, N);
    for (auto [n0, n1] : {std::pair{0, 64}, {64, 100}, {100, 101}, {101, 131}})
      k.linear_dw_rows(dy.data(), x.data(), dw2.data(), db2.data(), M, K, N, n0, n1);
    CHECK(same_bits(y.data(), y2.data(), y.size()));
    CHECK(same_bits(dx.data(), dx2.data(), dx.size()));
    CHECK(same_bits(dw.data(), dw2.data(), dw.size()));
    CHECK(same_bits(db.data(), db2.data(), db.size()));
    // and they are the products: the first element by hand, in double, to float32's precision
    double y00 = 0.0;
    for (int i = 0; i < K; ++i)
      y00 += static_cast<double>(x[static_cast<std::size_t>(i)]) * w[static_cast<std::size_t>(i)];
    CHECK(y2[0] == doctest::Approx(y00).epsilon(1e-5));
  }
}

TEST_CASE("train stages: the head in pieces gives the head in one piece's loss and gradients bit for bit") {
  for (bool attention_only : {false, true}) {
    // a vocabulary large enough to cut: 48 rows of 1,000 logits
    TrainConfig c;
    c.gpt = GptConfig{1000, 16, 32, 4, 2, 0.1, false};
    c.gpt.attention_only = attention_only;
    const int batch = 3, tokens = 16;
    const Batch b = batch_of(batch, tokens, c.gpt.vocab_size, 42);
    for (Isa isa : available_isas()) {
      CAPTURE(attention_only);
      CAPTURE(to_string(isa));
      TrainModel whole, cut;
      TorchGenerator g1(123), g2(123);
      REQUIRE(TrainModel::build(c, g1, whole).is_ok());
      REQUIRE(TrainModel::build(c, g2, cut).is_ok());
      whole.exec.isa = cut.exec.isa = isa;
      whole.head_piece_macs = 1e18;
      cut.head_piece_macs = 5.0 * 1000 * 32;  // 5 rows of logits; 64 rows of the weight's gradient
      float lw = 0.0f, lc = 0.0f;
      REQUIRE(whole.loss(b.inputs, b.targets, batch, tokens, true, g1, lw).is_ok());
      REQUIRE(cut.start_loss(b.inputs, b.targets, batch, tokens, true).is_ok());
      const int per_block = attention_only ? 1 : 2;
      CHECK(whole.forward_stages() == 1 + 2 + 1 + 1);
      CHECK(whole.backward_stages() == 1 + 1 + 1 + 2 * per_block + 1);
      REQUIRE(cut.forward_stages() == 1 + 2 + 1 + 10);  // 48 rows in pieces of 5
      CHECK(cut.forward_stage_name(3) == "final norm, head packed");
      CHECK(cut.forward_stage_name(4) == "head rows 0-5");
      CHECK(cut.forward_stage_name(13) == "head rows 45-48");
      for (int s = 0; s < cut.forward_stages(); ++s) REQUIRE(cut.forward_stage(s, g2, lc).is_ok());
      CHECK(lw == lc);
      CHECK(whole.position_losses() == cut.position_losses());
      CHECK(g1.random() == g2.random());  // the same dropout draws
      // 1,000 gradient rows in pieces of 64
      REQUIRE(cut.backward_stages() == 1 + 10 + 16 + 2 * per_block + 1);
      CHECK(cut.backward_stage_name(0) == "head packed");
      CHECK(cut.backward_stage_name(1) == "head dx rows 0-5");
      CHECK(cut.backward_stage_name(11) == "head dW rows 0-64");
      CHECK(cut.backward_stage_name(26) == "head dW rows 960-1000");
      CHECK(cut.backward_stage_name(27) == (attention_only ? "block 2" : "block 2 ff"));
      REQUIRE(whole.backward().is_ok());
      for (int s = 0; s < cut.backward_stages(); ++s) REQUIRE(cut.backward_stage(s).is_ok());
      CHECK(first_difference(whole.grads(), cut.grads()) == "");
      // and the gradients are there: the head's last rows (the last piece) are not zero
      const Tensor& head = cut.grads().out_head;
      float last = 0.0f;
      for (std::size_t i = head.size() - 32; i < head.size(); ++i)
        last = std::max(last, std::abs(head.data[i]));
      CHECK(last > 0.0f);
    }
  }
}

TEST_CASE("train stages: stages out of order, or of a pass that is gone, are refused") {
  TrainConfig c;
  c.gpt = GptConfig{300, 8, 16, 2, 2, 0.0, false};
  TrainModel m;
  TorchGenerator g(1);
  REQUIRE(TrainModel::build(c, g, m).is_ok());
  m.head_piece_macs = 2.0 * 300 * 16;  // two rows a piece
  const Batch b = batch_of(1, 8, 300, 7);
  float loss = 0.0f;
  CHECK(m.forward_stages() == 0);
  CHECK(m.forward_stage(0, g, loss).error == "forward_stage() needs a start_loss()");
  CHECK(m.backward_stage(0).error == "backward() needs a loss() kept for it");
  // a bad batch changes nothing
  CHECK_FALSE(m.start_loss(b.inputs, b.targets, 2, 8, true).is_ok());
  REQUIRE(m.start_loss(b.inputs, b.targets, 1, 8, true).is_ok());
  CHECK(m.forward_stages() == 1 + 2 + 1 + 4);
  REQUIRE(m.forward_stage(0, g, loss).is_ok());
  CHECK(m.forward_stage(2, g, loss).error == "forward stage 2 out of order (next: 1)");
  CHECK(m.backward_stage(0).error == "backward() needs a loss() kept for it");  // the pass is unfinished
  CHECK(m.position_losses().empty());
  for (int s = 1; s < m.forward_stages(); ++s) REQUIRE(m.forward_stage(s, g, loss).is_ok());
  CHECK(m.forward_stage(0, g, loss).error == "the forward pass is finished: start_loss() begins the next");
  CHECK(m.position_losses().size() == 8);
  REQUIRE(m.backward_stage(0).is_ok());
  CHECK(m.backward_stage(2).error == "backward stage 2 out of order (next: 1)");
  // a new pass drops the half-done backward pass
  REQUIRE(m.start_loss(b.inputs, b.targets, 1, 8, false, false).is_ok());
  CHECK(m.backward_stage(1).error == "backward() needs a loss() kept for it");
  CHECK(m.backward_stages() == 0);
  CHECK(m.backward().error == "backward() needs a loss() kept for it");
}
