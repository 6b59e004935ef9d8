// Every correct output printed in the book's chapter-3 examples (000-004, listed in docs/testing.md),
// reproduced to the printed precision.
#include <doctest/doctest.h>

#include "attnviz/engine.hpp"
#include "check.hpp"

using namespace attnviz;
using attnviz::test::check_printed;

namespace {

Result run_book(Variant v, std::uint64_t seed, const char* text = kDefaultText, int heads = 1) {
  Config c;
  c.variant = v;
  c.d_in = 3;
  c.d_out = 2;
  c.num_heads = heads;
  c.seed = seed;
  Result r;
  const Status st = run_text(c, text, r);
  REQUIRE_MESSAGE(st.is_ok(), st.error);
  return r;
}

}  // namespace

TEST_CASE("seed 004 / 003: simplified self-attention on 'Your journey starts with one step'") {
  const Result r = run_book(Variant::simplified, 123);
  REQUIRE(r.tokens_count() == 6);
  // omega 2,i printed at full float precision
  check_printed(&r.scores.at(0, 1, 0),
                {0.9544000625610352, 1.4950001239776611, 1.4754000902175903, 0.8434000015258789,
                 0.7070000171661377, 1.0865000486373901},
                6, "omega 2,i");
  check_printed(r.scores.ptr(), {0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310, 0.9544, 1.4950, 1.4754,
                                 0.8434, 0.7070, 1.0865, 0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605,
                                 0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565, 0.4576, 0.7070, 0.7154,
                                 0.3474, 0.6654, 0.2935, 0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450},
                4, "attn_scores");
  check_printed(r.weights.ptr(), {0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452, 0.1385, 0.2379, 0.2333,
                                  0.1240, 0.1082, 0.1581, 0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565,
                                  0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720, 0.1526, 0.1958, 0.1975,
                                  0.1367, 0.1879, 0.1295, 0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896},
                4, "attn_weights");
  check_printed(r.output.ptr(),
                {0.4421, 0.5931, 0.5790, 0.4419, 0.6515, 0.5683, 0.4431, 0.6496, 0.5671, 0.4304, 0.6298,
                 0.5510, 0.4671, 0.5910, 0.5266, 0.4177, 0.6503, 0.5645},
                4, "all_context_vecs");
  CHECK(r.shape.scale == 1.0f);  // no scaling without weights
  CHECK_FALSE(r.shape.causal);
}

TEST_CASE("seed 004: SelfAttention_v1, torch.manual_seed(123)") {
  const Result r = run_book(Variant::self_v1, 123);
  check_printed(&r.q.at(1, 0), {0.4306, 1.4551}, 4, "query_2");
  check_printed(&r.scores.at(0, 1, 1), {1.8524}, 4, "attn_score_22");
  check_printed(&r.scores.at(0, 1, 0), {1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440}, 4, "attn_scores_2");
  check_printed(&r.weights.at(0, 1, 0), {0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820}, 4,
                "attn_weights_2");
  check_printed(
      r.output.ptr(),
      {0.2996, 0.8053, 0.3061, 0.8210, 0.3058, 0.8203, 0.2948, 0.7939, 0.2927, 0.7891, 0.2990, 0.8040}, 4,
      "sa_v1(inputs)");
}

TEST_CASE("seed 004: SelfAttention_v2, torch.manual_seed(789), and its W_query") {
  Params p;
  const Result r = [&] {
    Config c;
    c.variant = Variant::self_v2;
    c.d_in = 3, c.d_out = 2, c.seed = 789;
    Result res;
    REQUIRE(run_text(c, kDefaultText, res, &p).is_ok());
    return res;
  }();
  check_printed(
      r.output.ptr(),
      {-0.0739, 0.0713, -0.0748, 0.0703, -0.0749, 0.0702, -0.0760, 0.0685, -0.0763, 0.0679, -0.0754, 0.0693},
      4, "sa_v2(inputs)");
  check_printed(p.query.weight.ptr(), {0.3161, 0.4568, 0.5118, -0.1683, -0.3379, -0.0918}, 4,
                "W_query.weight");
}

TEST_CASE(
    "seed 001: MultiHeadAttentionWrapper, torch.manual_seed(0), 4 heads on 'Dream big and work for it'") {
  const Result r = run_book(Variant::wrapper, 0, "Dream big and work for it", 4);
  REQUIRE(r.output.shape[1] == 8);
  check_printed(r.output.ptr(), {-0.6430, 0.2255, -0.0536, -0.5405, -0.0793, 0.5405, 0.1871, 0.1333,  //
                                 -0.6319, 0.2390, -0.1641, -0.5589, -0.0362, 0.5299, 0.2138, 0.1721,  //
                                 -0.6097, 0.2691, -0.0483, -0.5788, -0.0075, 0.4847, 0.2282, 0.0269,  //
                                 -0.6439, 0.2779, -0.0935, -0.6058, -0.0053, 0.5151, 0.2411, 0.0674,  //
                                 -0.6230, 0.2833, -0.1427, -0.6075, 0.0220,  0.4946, 0.2532, 0.0693,  //
                                 -0.5880, 0.2937, -0.1667, -0.6075, 0.0578,  0.4567, 0.2675, 0.0352},
                4, "context_vecs");
}

TEST_CASE("seed 000: stepwise multi-head attention with randn projections and mkl dropout") {
  // x (3, 6); Wq, Wk, Wv = torch.randn(6, 6) after torch.manual_seed(0); Q = x @ Wq; 2 heads of 3;
  // causal mask; softmax(scores / sqrt(3)); nn.Dropout(0.1) in training mode (the MKL flavour); context.
  TorchGenerator g(0);
  auto randn_linear = [&g] {
    const std::vector<float> w = torch_randn(g, 36);
    Linear l;
    l.weight = Tensor(6, 6);
    for (int i = 0; i < 6; ++i)
      for (int o = 0; o < 6; ++o)
        l.weight.at(o, i) = w[static_cast<std::size_t>(i) * 6 + o];  // x @ W = x (W^T)^T
    return l;
  };
  Params p;
  p.query = randn_linear();
  p.key = randn_linear();
  p.value = randn_linear();
  check_printed(p.query.weight.ptr(), {-1.13, -0.32, 0.12, 0.57, -0.22, -1.47}, 2, "Wq column 0");
  // An identity out_proj makes the output the merged context vectors.
  p.out_proj.weight = Tensor(6, 6);
  p.out_proj.bias = Tensor::vector(6);
  for (int i = 0; i < 6; ++i) p.out_proj.weight.at(i, i) = 1.0f;

  Input in;
  REQUIRE(input_from_rows({{1, 2, 3, 4, 5, 6}, {6, 5, 4, 3, 2, 1}, {1, 1, 1, 1, 1, 1}}, in).is_ok());
  Config c;
  c.variant = Variant::mha;
  c.d_in = 6, c.d_out = 6, c.num_heads = 2, c.dropout = 0.1, c.dropout_rng = DropoutRng::mkl;
  Result r;
  REQUIRE(forward(c, p, in, g, r).is_ok());

  check_printed(r.q.ptr(),
                {-9.0244, -11.7287, 15.5360, -1.4474, -4.5326, 9.4674, -8.0564, -13.2309, 8.2228, -8.9680,
                 3.1995, 4.8321, -2.4401, -3.5657, 3.3941, -1.4879, -0.1904, 2.0428},
                4, "Q");
  check_printed(r.k.ptr(),
                {8.2602, 14.1116, -5.0345, -16.4865, -2.9948, 8.3139, -6.1188, -0.1587, -5.0885, -14.3014,
                 4.9540, 5.6093, 0.3059, 1.9933, -1.4461, -4.3983, 0.2799, 1.9890},
                4, "K");
  check_printed(r.v.ptr(),
                {0.5076, -3.4353, 1.8576, 2.8041, 8.9427, 13.1841, -1.9113, -3.6934, 1.8502, 1.7622, 1.6981,
                 3.0978, -0.2005, -1.0184, 0.5297, 0.6523, 1.5201, 2.3260},
                4, "V");
  check_printed(r.scores.ptr(),
                {-318.27, -21.97, -48.61, -294.65, 9.55, -40.73, -87.56, -1.77, -12.76,  //
                 116.15, 51.35, 23.93, 178.44, 171.21, 49.95, 42.08, 31.79, 10.55},
                2, "attention scores");
  for (int h = 0; h < 2; ++h) {
    CHECK(std::isinf(r.scaled.at(h, 0, 1)));
    CHECK(r.scaled.at(h, 0, 1) < 0);
  }
  check_printed(r.weights.ptr(),
                {1.000, 0.000, 0.000, 0.000, 1.000, 0.000, 0.000, 0.998, 0.002,  //
                 1.000, 0.000, 0.000, 0.985, 0.015, 0.000, 0.997, 0.003, 0.000},
                3, "attention weights");
  check_printed(r.dropped.ptr(),
                {1.111, 0.000, 0.000, 0.000, 1.111, 0.000, 0.000, 1.109, 0.000,  //
                 1.111, 0.000, 0.000, 1.094, 0.000, 0.000, 1.108, 0.003, 0.000},
                3, "attention weights after dropout");
  check_printed(r.output.ptr(),
                {0.564, -3.817, 2.064, 3.116, 9.936, 14.649, -2.124, -4.104, 2.056, 3.068, 9.786, 14.427,
                 -2.120, -4.097, 2.052, 3.113, 9.915, 14.620},
                3, "context vectors, heads concatenated");
}
