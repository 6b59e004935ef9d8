// The trainable GPTModel: parameters in PyTorch's layouts, the forward pass that keeps what the backward pass
// reads, and the backward pass, operation by operation in reverse.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "attnviz/saturating.hpp"
#include "attnviz/train.hpp"
#include "train/ops.hpp"

namespace attnviz {

// --- Parameters
// ---------------------------------------------------------------------------------------------

namespace {

template <class Tensors, class Fn>
void visit(Tensors& t, const Fn& fn) {
  auto one = [&](const std::string& name, auto& tensor) {
    if (!tensor.empty()) fn(name, tensor);
  };
  one("tok_emb.weight", t.tok_emb);
  one("pos_emb.weight", t.pos_emb);
  for (std::size_t i = 0; i < t.blocks.size(); ++i) {
    auto& b = t.blocks[i];
    const std::string p = "trf_blocks." + std::to_string(i) + ".";
    one(p + "att.W_query.weight", b.query_w);
    one(p + "att.W_query.bias", b.query_b);
    one(p + "att.W_key.weight", b.key_w);
    one(p + "att.W_key.bias", b.key_b);
    one(p + "att.W_value.weight", b.value_w);
    one(p + "att.W_value.bias", b.value_b);
    one(p + "att.out_proj.weight", b.out_w);
    one(p + "att.out_proj.bias", b.out_b);
    one(p + "ff.layers.0.weight", b.fc_w);
    one(p + "ff.layers.0.bias", b.fc_b);
    one(p + "ff.layers.2.weight", b.proj_w);
    one(p + "ff.layers.2.bias", b.proj_b);
    one(p + "norm1.scale", b.norm1_scale);
    one(p + "norm1.shift", b.norm1_shift);
    one(p + "norm2.scale", b.norm2_scale);
    one(p + "norm2.shift", b.norm2_shift);
  }
  one("final_norm.scale", t.final_scale);
  one("final_norm.shift", t.final_shift);
  one("out_head.weight", t.out_head);
}

Tensor linear_weight(TorchGenerator& g, int in, int out, bool bias, Tensor& bias_out) {
  Linear l = torch_linear(g, in, out, bias);
  bias_out = std::move(l.bias);
  return std::move(l.weight);
}

}  // namespace

void GptTensors::each(const std::function<void(const std::string&, Tensor&)>& fn) {
  visit(*this, fn);
}
void GptTensors::each(const std::function<void(const std::string&, const Tensor&)>& fn) const {
  visit(*this, fn);
}

GptTensors GptTensors::zeros_like() const {
  GptTensors z = *this;
  z.each([](const std::string&, Tensor& t) { std::fill(t.data.begin(), t.data.end(), 0.0f); });
  return z;
}

std::int64_t GptTensors::count() const {
  std::int64_t n = 0;
  each([&](const std::string&, const Tensor& t) { n += static_cast<std::int64_t>(t.size()); });
  return n;
}

Status validate(const TrainConfig& c) {
  return validate(c.gpt);
}

Status TrainModel::build(const TrainConfig& c, TorchGenerator& g, TrainModel& out) {
  if (Status st = validate(c); !st.is_ok()) return st;
  const GptConfig& k = c.gpt;
  const int d = k.d_model;
  GptTensors p;
  p.tok_emb = Tensor(k.vocab_size, d);
  torch_normal_(g, p.tok_emb.ptr(), p.tok_emb.size(), 0.0, 1.0);
  p.pos_emb = Tensor(k.context_length, d);
  torch_normal_(g, p.pos_emb.ptr(), p.pos_emb.size(), 0.0, 1.0);
  p.blocks.resize(static_cast<std::size_t>(k.n_layers));
  for (GptTensors::Block& b : p.blocks) {
    b.query_w = linear_weight(g, d, d, k.qkv_bias, b.query_b);
    b.key_w = linear_weight(g, d, d, k.qkv_bias, b.key_b);
    b.value_w = linear_weight(g, d, d, k.qkv_bias, b.value_b);
    b.out_w = linear_weight(g, d, d, true, b.out_b);
    if (!c.gpt.attention_only) {
      b.fc_w = linear_weight(g, d, 4 * d, true, b.fc_b);
      b.proj_w = linear_weight(g, 4 * d, d, true, b.proj_b);
      b.norm2_scale = Tensor::vector(d, 1.0f), b.norm2_shift = Tensor::vector(d, 0.0f);
    }
    b.norm1_scale = Tensor::vector(d, 1.0f), b.norm1_shift = Tensor::vector(d, 0.0f);
  }
  p.final_scale = Tensor::vector(d, 1.0f), p.final_shift = Tensor::vector(d, 0.0f);
  Tensor none;
  p.out_head = linear_weight(g, d, k.vocab_size, false, none);
  return from_tensors(c, std::move(p), out);
}

Status TrainModel::from_tensors(const TrainConfig& c, GptTensors params, TrainModel& out) {
  if (Status st = validate(c); !st.is_ok()) return st;
  // The expected shapes: a model built from `c` with nothing drawn.
  const GptConfig& k = c.gpt;
  const int d = k.d_model;
  auto check = [&](const Tensor& t, int rows, int cols, const std::string& what) -> Status {
    const bool vector = cols == 0;
    const bool ok = vector ? (t.rank == 1 && t.shape[0] == rows)
                           : (t.rank == 2 && t.shape[0] == rows && t.shape[1] == cols);
    if (ok) return Status::ok();
    return Status::fail(what + " has the wrong shape for this configuration");
  };
  if (params.blocks.size() != static_cast<std::size_t>(k.n_layers))
    return Status::fail("the parameters have " + std::to_string(params.blocks.size()) +
                        " blocks, the configuration " + std::to_string(k.n_layers));
  Status st = check(params.tok_emb, k.vocab_size, d, "tok_emb.weight");
  if (st.is_ok()) st = check(params.pos_emb, k.context_length, d, "pos_emb.weight");
  if (st.is_ok()) st = check(params.out_head, k.vocab_size, d, "out_head.weight");
  if (st.is_ok()) st = check(params.final_scale, d, 0, "final_norm.scale");
  if (st.is_ok()) st = check(params.final_shift, d, 0, "final_norm.shift");
  for (std::size_t i = 0; i < params.blocks.size() && st.is_ok(); ++i) {
    const GptTensors::Block& b = params.blocks[i];
    const std::string p = "trf_blocks." + std::to_string(i) + ".";
    for (auto [t, name] : {std::pair{&b.query_w, "att.W_query.weight"},
                           {&b.key_w, "att.W_key.weight"},
                           {&b.value_w, "att.W_value.weight"},
                           {&b.out_w, "att.out_proj.weight"}})
      if (st.is_ok()) st = check(*t, d, d, p + name);
    for (auto [t, name] : {std::pair{&b.query_b, "att.W_query.bias"},
                           {&b.key_b, "att.W_key.bias"},
                           {&b.value_b, "att.W_value.bias"}})
      if (st.is_ok() && (k.qkv_bias || !t->empty())) st = check(*t, d, 0, p + name);
    for (auto [t, name] : {std::pair{&b.out_b, "att.out_proj.bias"},
                           {&b.norm1_scale, "norm1.scale"},
                           {&b.norm1_shift, "norm1.shift"}})
      if (st.is_ok()) st = check(*t, d, 0, p + name);
    if (!c.gpt.attention_only) {
      if (st.is_ok()) st = check(b.fc_w, 4 * d, d, p + "ff.layers.0.weight");
      if (st.is_ok()) st = check(b.fc_b, 4 * d, 0, p + "ff.layers.0.bias");
      if (st.is_ok()) st = check(b.proj_w, d, 4 * d, p + "ff.layers.2.weight");
      if (st.is_ok()) st = check(b.proj_b, d, 0, p + "ff.layers.2.bias");
      if (st.is_ok()) st = check(b.norm2_scale, d, 0, p + "norm2.scale");
      if (st.is_ok()) st = check(b.norm2_shift, d, 0, p + "norm2.shift");
    }
  }
  if (!st.is_ok()) return st;
  TrainModel m;
  m.config_ = c;
  m.params_ = std::move(params);
  m.grads_ = m.params_.zeros_like();
  out = std::move(m);
  return Status::ok();
}

void TrainModel::zero_grad() {
  grads_.each([](const std::string&, Tensor& t) { std::fill(t.data.begin(), t.data.end(), 0.0f); });
}

// --- Sizes
// ----------------------------------------------------------------------------------------------------

StepFlops train_step_flops(const TrainConfig& c, int batch, int tokens) {
  const double N = static_cast<double>(batch) * tokens, d = c.gpt.d_model, V = c.gpt.vocab_size;
  const double per_layer_linear = (c.gpt.attention_only ? 4.0 : 12.0) * d * d;  // q, k, v, out (+ fc, proj)
  const double attention = 2.0 * d * (tokens + 1) / 2.0;  // scores and context, causal half
  const double forward = 2.0 * N * (c.gpt.n_layers * (per_layer_linear + attention) + d * V);
  return {forward, 2.0 * forward};
}

std::uint64_t TrainMemory::total() const {
  return sat_add(sat_add(params, grads), sat_add(moments, activations));
}

TrainMemory train_memory(const TrainConfig& c, int batch, int tokens) {
  const std::uint64_t d = static_cast<std::uint64_t>(c.gpt.d_model),
                      V = static_cast<std::uint64_t>(c.gpt.vocab_size),
                      L = static_cast<std::uint64_t>(c.gpt.n_layers),
                      H = static_cast<std::uint64_t>(c.gpt.n_heads);
  const std::uint64_t N = sat_mul(static_cast<std::uint64_t>(std::max(batch, 0)),
                                  static_cast<std::uint64_t>(std::max(tokens, 0)));
  const std::uint64_t T = static_cast<std::uint64_t>(std::max(tokens, 0));
  // parameters, as count() will say
  std::uint64_t p = sat_mul(V, d) * 2 + sat_mul(static_cast<std::uint64_t>(c.gpt.context_length), d) + 2 * d;
  const std::uint64_t block = 4 * d * d + 3 * (c.gpt.qkv_bias ? d : 0) + d + 2 * d +
                              (c.gpt.attention_only ? 0 : 8 * d * d + 5 * d + 2 * d);
  p = sat_add(p, sat_mul(L, block));
  // activations per layer: x_in, ln1 + x_hat, q, k, v, ctx, x_mid (8 N d), ln2 + x_hat, h, gelu (2 N d + 8 N
  // d); the weights (B H T T) and three masks (bytes); the final norm, the logits (N V) and the backward
  // pass's working gradients (6 N d + 4 N d + the packed copies of the largest matrix)
  const std::uint64_t nd = sat_mul(N, d);
  const std::uint64_t square =
      sat_mul(sat_mul(static_cast<std::uint64_t>(std::max(batch, 0)), H), sat_mul(T, T));
  std::uint64_t layer = sat_add(sat_mul(nd, c.gpt.attention_only ? 8 : 18), square);
  std::uint64_t floats = sat_mul(L, layer);
  floats = sat_add(floats, sat_add(sat_mul(nd, 14), sat_mul(N, V)));
  floats = sat_add(floats, sat_add(sat_mul(V, d) * 2, sat_mul(N, V)));  // packed head and dy^T of the head
  const std::uint64_t masks = sat_add(sat_mul(L, sat_add(square, 2 * nd)), nd);
  TrainMemory m;
  m.params = sat_mul(p, 4);
  m.grads = m.params;
  m.moments = sat_mul(m.params, 2);
  m.activations = sat_add(sat_mul(floats, 4), masks);
  return m;
}

// --- Forward and backward
// ---------------------------------------------------------------------------------------

namespace {

// The head's pieces: rows of its logits (with their cross-entropy) and of its weight's gradient, about
// `macs` multiply-adds each (at least a row, and 64 rows of the gradient).
int head_rows(int rows, int V, int d, double macs) {
  const double fit = std::floor(macs / (static_cast<double>(V) * d));
  return fit >= rows ? rows : fit >= 1.0 ? static_cast<int>(fit) : 1;
}

int head_band(int rows, int V, int d, double macs) {
  const double fit = std::floor(macs / (static_cast<double>(rows) * d) / 64.0) * 64.0;
  return fit >= V ? V : fit >= 64.0 ? static_cast<int>(fit) : std::min(64, V);
}

int pieces(int n, int each) {
  return (n + each - 1) / each;
}

}  // namespace

struct TrainModel::Activations {
  struct Layer {
    std::vector<float> x_in, ln1, ln1_hat, rstd1, q, k, v, weights, ctx, x_mid;
    std::vector<float> ln2, ln2_hat, rstd2, h, g;
    std::vector<std::uint8_t> keep_att, keep_att_out, keep_ff_out;
  };
  int batch = 0, tokens = 0;
  bool train = false, keep = false;      // keep: for backward
  bool started = false, done = false;    // a forward pass begun by start_loss(), and finished
  bool ready = false;                    // a finished forward pass kept for backward, not yet gone back over
  int next_forward = 0, next_stage = 0;  // forward_stage's and backward_stage's next
  int rows_each = 1, band = 1;           // the head's pieces: rows of logits, rows of its weight's gradient
  std::vector<int> inputs, targets;
  std::vector<std::uint8_t> keep_emb;
  std::vector<Layer> layers;
  std::vector<float> x_final, lnf, lnf_hat, rstd_f, probs;
  std::vector<double> row_losses, chunk_losses;
  std::vector<float> t1;  // a working buffer
  // the backward pass's gradients, kept so that a step allocates (and faults in) nothing new
  std::vector<float> dlnf, dx, branch, dq, dk, dv, dctx, dln, dh;
  AlignedFloats head_pack;  // the head's weight packed for its pieces (forward, then backward)
  std::unique_ptr<train::Kernels> kernels;  // kept: its packing buffers are reused from step to step

  int rows() const { return batch * tokens; }
  int head_pieces() const { return pieces(rows(), rows_each); }

  train::Kernels& kernels_for(const Exec& how) {
    const Isa isa = resolve(how.isa);
    const int threads = isa == Isa::scalar ? 1 : resolve_threads(how.threads);
    if (!kernels || kernels->isa != isa || kernels->threads != threads)
      kernels = std::make_unique<train::Kernels>(how);
    return *kernels;
  }
};

Status TrainModel::loss(const std::vector<int>& inputs, const std::vector<int>& targets, int batch,
                        int tokens, bool train, TorchGenerator& g, float& out, bool for_backward) {
  if (Status st = start_loss(inputs, targets, batch, tokens, train, for_backward); !st.is_ok()) return st;
  for (int stage = 0; stage < forward_stages(); ++stage)
    if (Status st = forward_stage(stage, g, out); !st.is_ok()) return st;
  return Status::ok();
}

void TrainModel::reserve_step(int batch, int tokens) {
  if (batch < 1 || tokens < 1) return;
  if (!acts_) acts_ = std::make_shared<Activations>();
  const std::size_t N = static_cast<std::size_t>(batch) * static_cast<std::size_t>(tokens);
  std::vector<float>& probs = acts_->probs;
  if (probs.size() < N * static_cast<std::size_t>(config_.gpt.vocab_size))
    probs.assign(N * static_cast<std::size_t>(config_.gpt.vocab_size), 0.0f);
}

Status TrainModel::start_loss(const std::vector<int>& inputs, const std::vector<int>& targets, int batch,
                              int tokens, bool train, bool for_backward) {
  const GptConfig& c = config_.gpt;
  const std::size_t N = static_cast<std::size_t>(batch) * static_cast<std::size_t>(tokens);
  if (batch < 1 || tokens < 1 || inputs.size() != N || targets.size() != N)
    return Status::fail("a batch needs batch x tokens inputs and targets");
  if (tokens > c.context_length)
    return Status::fail(std::to_string(tokens) + " tokens exceed the context length " +
                        std::to_string(c.context_length));
  for (std::size_t i = 0; i < N; ++i)
    if (inputs[i] < 0 || inputs[i] >= c.vocab_size || targets[i] < 0 || targets[i] >= c.vocab_size)
      return Status::fail(
          "token id " + std::to_string(inputs[i] < 0 || inputs[i] >= c.vocab_size ? inputs[i] : targets[i]) +
          " is outside the vocabulary (0.." + std::to_string(c.vocab_size - 1) + ")");
  if (!acts_) acts_ = std::make_shared<Activations>();
  Activations& a = *acts_;
  a.ready = false, a.done = false, a.started = true;
  a.next_forward = 0, a.next_stage = 0;
  a.batch = batch, a.tokens = tokens, a.train = train, a.keep = for_backward;
  a.inputs = inputs, a.targets = targets;
  a.rows_each = head_rows(a.rows(), c.vocab_size, c.d_model, head_piece_macs);
  a.band = head_band(a.rows(), c.vocab_size, c.d_model, head_piece_macs);
  return Status::ok();
}

int TrainModel::forward_stages() const {
  if (!acts_ || !acts_->started) return 0;
  return static_cast<int>(params_.blocks.size()) + 2 + acts_->head_pieces();
}

int TrainModel::backward_stages() const {
  if (!acts_ || !acts_->started || !acts_->keep) return 0;
  const Activations& a = *acts_;
  const int per_block = config_.gpt.attention_only ? 1 : 2;
  return 1 + a.head_pieces() + pieces(config_.gpt.vocab_size, a.band) +
         per_block * static_cast<int>(params_.blocks.size()) + 1;
}

std::string TrainModel::forward_stage_name(int stage) const {
  const int L = static_cast<int>(params_.blocks.size());
  if (stage == 0) return "embeddings";
  if (stage <= L) return "block " + std::to_string(stage);
  if (stage == L + 1) return "final norm, head packed";
  if (!acts_) return "head";
  const int r0 = (stage - L - 2) * acts_->rows_each, r1 = std::min(acts_->rows(), r0 + acts_->rows_each);
  return "head rows " + std::to_string(r0) + "-" + std::to_string(r1);
}

std::string TrainModel::backward_stage_name(int stage) const {
  if (!acts_) return "";
  const Activations& a = *acts_;
  const int chunks = a.head_pieces(), V = config_.gpt.vocab_size;
  const int head = 1 + chunks + pieces(V, a.band), per_block = config_.gpt.attention_only ? 1 : 2;
  if (stage == 0) return "head packed";
  if (stage <= chunks) {
    const int r0 = (stage - 1) * a.rows_each;
    return "head dx rows " + std::to_string(r0) + "-" + std::to_string(std::min(a.rows(), r0 + a.rows_each));
  }
  if (stage < head) {
    const int n0 = (stage - 1 - chunks) * a.band;
    return "head dW rows " + std::to_string(n0) + "-" + std::to_string(std::min(V, n0 + a.band));
  }
  if (stage == backward_stages() - 1) return "embeddings";
  const int i = stage - head, block = static_cast<int>(params_.blocks.size()) - i / per_block;
  return "block " + std::to_string(block) + (per_block == 1 ? "" : i % 2 == 0 ? " ff" : " attention");
}

Status TrainModel::forward_stage(int stage, TorchGenerator& g, float& out) {
  if (!acts_ || !acts_->started) return Status::fail("forward_stage() needs a start_loss()");
  Activations& a = *acts_;
  if (a.done) return Status::fail("the forward pass is finished: start_loss() begins the next");
  if (stage != a.next_forward)
    return Status::fail("forward stage " + std::to_string(stage) +
                        " out of order (next: " + std::to_string(a.next_forward) + ")");
  const GptConfig& c = config_.gpt;
  const int batch = a.batch, tokens = a.tokens;
  const std::size_t N = static_cast<std::size_t>(a.rows());
  const int d = c.d_model, H = c.n_heads, hd = d / H, V = c.vocab_size, F = 4 * d;
  const std::size_t nd = N * static_cast<std::size_t>(d);
  const bool drop = a.train && c.drop_rate > 0.0;
  const float s = dropout_scale(c.drop_rate);
  const int rows = static_cast<int>(N), L = static_cast<int>(params_.blocks.size());
  train::Kernels& k = a.kernels_for(exec);
  // x, the residual stream, ends as the final norm's input
  std::vector<float>& x = a.x_final;

  if (stage == 0) {  // embeddings and drop_emb
    x.resize(nd);
    for (std::size_t n = 0; n < N; ++n) {
      const float* te = params_.tok_emb.ptr() + static_cast<std::size_t>(a.inputs[n]) * d;
      const float* pe = params_.pos_emb.ptr() + (n % static_cast<std::size_t>(tokens)) * d;
      for (int j = 0; j < d; ++j) x[n * d + j] = te[j] + pe[j];
    }
    a.keep_emb.clear();
    if (drop) {
      a.keep_emb = torch_dropout_mask(g, nd, c.drop_rate, dropout_rng);
      train::dropout(k, x.data(), a.keep_emb.data(), nd, s);
    }
    a.layers.resize(params_.blocks.size());
    ++a.next_forward;
    return Status::ok();
  }

  if (stage <= L) {  // one block
    const std::size_t l = static_cast<std::size_t>(stage - 1);
    train::Attention att{batch, tokens, H, hd, static_cast<float>(std::sqrt(static_cast<double>(hd))), s, &k};
    const GptTensors::Block& b = params_.blocks[l];
    Activations::Layer& al = a.layers[l];
    al.x_in = x;
    al.ln1.resize(nd), al.ln1_hat.resize(nd), al.rstd1.resize(N);
    train::layer_norm(k, x.data(), b.norm1_scale.ptr(), b.norm1_shift.ptr(), al.ln1.data(), al.ln1_hat.data(),
                      al.rstd1.data(), rows, d);
    al.q.resize(nd), al.k.resize(nd), al.v.resize(nd), al.ctx.resize(nd);
    auto bias = [](const Tensor& t) { return t.empty() ? nullptr : t.ptr(); };
    k.linear(al.ln1.data(), b.key_w.ptr(), bias(b.key_b), al.k.data(), rows, d, d);
    k.linear(al.ln1.data(), b.query_w.ptr(), bias(b.query_b), al.q.data(), rows, d, d);
    k.linear(al.ln1.data(), b.value_w.ptr(), bias(b.value_b), al.v.data(), rows, d, d);
    const std::size_t square = static_cast<std::size_t>(batch) * H * tokens * tokens;
    al.weights.resize(square);
    al.keep_att.clear();
    if (drop) al.keep_att = torch_dropout_mask(g, square, c.drop_rate, dropout_rng);
    train::attention_forward(att, al.q.data(), al.k.data(), al.v.data(), al.weights.data(),
                             drop ? al.keep_att.data() : nullptr, al.ctx.data());
    std::vector<float>& branch = a.t1;
    branch.resize(nd);
    k.linear(al.ctx.data(), b.out_w.ptr(), b.out_b.ptr(), branch.data(), rows, d, d);
    al.keep_att_out.clear();
    if (drop) {
      al.keep_att_out = torch_dropout_mask(g, nd, c.drop_rate, dropout_rng);
      train::dropout(k, branch.data(), al.keep_att_out.data(), nd, s);
    }
    train::add(k, x.data(), branch.data(), nd);
    ++a.next_forward;
    if (config_.gpt.attention_only) return Status::ok();
    al.x_mid = x;
    al.ln2.resize(nd), al.ln2_hat.resize(nd), al.rstd2.resize(N);
    train::layer_norm(k, x.data(), b.norm2_scale.ptr(), b.norm2_shift.ptr(), al.ln2.data(), al.ln2_hat.data(),
                      al.rstd2.data(), rows, d);
    al.h.resize(N * F), al.g.resize(N * F);
    k.linear(al.ln2.data(), b.fc_w.ptr(), b.fc_b.ptr(), al.h.data(), rows, d, F);
    train::gelu(k, al.h.data(), al.g.data(), N * F);
    k.linear(al.g.data(), b.proj_w.ptr(), b.proj_b.ptr(), branch.data(), rows, F, d);
    al.keep_ff_out.clear();
    if (drop) {
      al.keep_ff_out = torch_dropout_mask(g, nd, c.drop_rate, dropout_rng);
      train::dropout(k, branch.data(), al.keep_ff_out.data(), nd, s);
    }
    train::add(k, x.data(), branch.data(), nd);
    return Status::ok();
  }

  if (stage == L + 1) {  // the final norm, and the head's weight packed for its pieces (25 MB for GPT-2's)
    a.lnf.resize(nd), a.lnf_hat.resize(nd), a.rstd_f.resize(N);
    train::layer_norm(k, a.x_final.data(), params_.final_scale.ptr(), params_.final_shift.ptr(), a.lnf.data(),
                      a.lnf_hat.data(), a.rstd_f.data(), rows, d);
    a.probs.resize(N * static_cast<std::size_t>(V));
    a.row_losses.assign(N, 0.0);
    k.pack_linear(params_.out_head.ptr(), d, V, a.head_pack);
    ++a.next_forward;
    return Status::ok();
  }

  // the head's rows [r0, r1): their logits and cross-entropy
  const int piece = stage - L - 2, r0 = piece * a.rows_each, r1 = std::min(rows, r0 + a.rows_each);
  float* logits = a.probs.data() + static_cast<std::size_t>(r0) * V;
  k.linear_rows(a.lnf.data(), params_.out_head.ptr(), a.head_pack, a.probs.data(), r0, r1, d, V);
  train::cross_entropy(k, logits, a.targets.data() + r0, r1 - r0, V, &a.chunk_losses);
  std::copy(a.chunk_losses.begin(), a.chunk_losses.end(), a.row_losses.begin() + r0);
  ++a.next_forward;
  if (r1 < rows) return Status::ok();
  // the mean as cross_entropy takes it: the rows' losses summed in order
  double total = 0.0;
  for (double v : a.row_losses) total += v;
  const double mean = total / rows;
  a.done = true;
  if (!std::isfinite(mean))
    return Status::fail("the loss is not finite: the parameters have overflowed float32");
  out = static_cast<float>(mean);
  a.ready = a.keep;
  a.next_stage = 0;
  return Status::ok();
}

Status TrainModel::backward() {
  const int stages = backward_stages();
  if (stages == 0 || !acts_->ready) return Status::fail("backward() needs a loss() kept for it");
  for (int stage = 0; stage < stages; ++stage)
    if (Status st = backward_stage(stage); !st.is_ok()) return st;
  return Status::ok();
}

Status TrainModel::backward_stage(int stage) {
  if (!acts_ || !acts_->ready) return Status::fail("backward() needs a loss() kept for it");
  Activations& a = *acts_;
  if (stage != a.next_stage)
    return Status::fail("backward stage " + std::to_string(stage) +
                        " out of order (next: " + std::to_string(a.next_stage) + ")");
  const int last = backward_stages() - 1;
  // a second backward of the same graph is an error in PyTorch too
  if (stage == last) a.ready = false;
  ++a.next_stage;
  const GptConfig& c = config_.gpt;
  const int d = c.d_model, H = c.n_heads, hd = d / H, V = c.vocab_size, F = 4 * d;
  const std::size_t N = static_cast<std::size_t>(a.rows()), nd = N * d;
  const int rows = static_cast<int>(N);
  const bool drop = a.train && c.drop_rate > 0.0;
  const float s = dropout_scale(c.drop_rate);
  train::Kernels& k = a.kernels_for(exec);
  std::vector<float>&dlnf = a.dlnf, &dx = a.dx;
  const int chunks = a.head_pieces(), head = 1 + chunks + pieces(V, a.band);

  if (stage == 0) {  // the head's weight packed for its dx pieces
    dlnf.resize(nd), dx.resize(nd);
    k.pack_linear_dx(params_.out_head.ptr(), d, V, a.head_pack);
    return Status::ok();
  }
  if (stage <=
      chunks) {  // the head's dx and the cross-entropy's gradient by rows; the final norm's with the last
    const int r0 = (stage - 1) * a.rows_each, r1 = std::min(rows, r0 + a.rows_each);
    train::cross_entropy_backward(k, a.probs.data() + static_cast<std::size_t>(r0) * V, a.targets.data() + r0,
                                  r1 - r0, V, rows);
    k.linear_dx_rows(a.probs.data(), params_.out_head.ptr(), a.head_pack, dlnf.data(), r0, r1, d, V);
    if (r1 == rows)
      train::layer_norm_backward(k, dlnf.data(), a.lnf_hat.data(), a.rstd_f.data(), params_.final_scale.ptr(),
                                 dx.data(), grads_.final_scale.ptr(), grads_.final_shift.ptr(), rows, d,
                                 false);
    return Status::ok();
  }
  if (stage < head) {  // the head's weight gradient, by vocabulary rows
    const int n0 = (stage - 1 - chunks) * a.band, n1 = std::min(V, n0 + a.band);
    k.linear_dw_rows(a.probs.data(), a.lnf.data(), grads_.out_head.ptr(), nullptr, rows, d, V, n0, n1);
    return Status::ok();
  }
  if (stage == last) {  // drop_emb, then the two embeddings
    if (drop) train::dropout(k, dx.data(), a.keep_emb.data(), nd, s);
    for (std::size_t n = 0; n < N; ++n) {
      float* te = grads_.tok_emb.ptr() + static_cast<std::size_t>(a.inputs[n]) * d;
      float* pe = grads_.pos_emb.ptr() + (n % static_cast<std::size_t>(a.tokens)) * d;
      for (int j = 0; j < d; ++j) {
        te[j] += dx[n * d + j];
        pe[j] += dx[n * d + j];
      }
    }
    return Status::ok();
  }

  // one block, the last first: its feed-forward half, then its attention half (one stage each)
  std::vector<float>&branch = a.branch, &dq = a.dq, &dk = a.dk, &dv = a.dv, &dctx = a.dctx, &dln = a.dln,
  &dh = a.dh;
  for (std::vector<float>* buf : {&branch, &dq, &dk, &dv, &dctx, &dln}) buf->resize(nd);
  const int per_block = config_.gpt.attention_only ? 1 : 2, i = stage - head;
  const std::size_t li = params_.blocks.size() - 1 - static_cast<std::size_t>(i / per_block);
  const GptTensors::Block& b = params_.blocks[li];
  GptTensors::Block& gb = grads_.blocks[li];
  Activations::Layer& al = a.layers[li];
  if (per_block == 2 && i % 2 == 0) {
    // x = x_mid + drop(proj(gelu(fc(norm2(x_mid)))))
    branch = dx;
    if (drop) train::dropout(k, branch.data(), al.keep_ff_out.data(), nd, s);
    k.linear_dw(branch.data(), al.g.data(), gb.proj_w.ptr(), gb.proj_b.ptr(), rows, F, d);
    dh.resize(N * F);
    k.linear_dx(branch.data(), b.proj_w.ptr(), dh.data(), rows, F, d, false);
    train::gelu_backward(k, al.h.data(), dh.data(), dh.data(), N * F);
    k.linear_dw(dh.data(), al.ln2.data(), gb.fc_w.ptr(), gb.fc_b.ptr(), rows, d, F);
    k.linear_dx(dh.data(), b.fc_w.ptr(), dln.data(), rows, d, F, false);
    train::layer_norm_backward(k, dln.data(), al.ln2_hat.data(), al.rstd2.data(), b.norm2_scale.ptr(),
                               dx.data(), gb.norm2_scale.ptr(), gb.norm2_shift.ptr(), rows, d, true);
    return Status::ok();
  }
  // x = x_in + drop(out_proj(attention(q, k, v of norm1(x_in))))
  train::Attention att{a.batch, a.tokens, H, hd, static_cast<float>(std::sqrt(static_cast<double>(hd))),
                       s,       &k};
  branch = dx;
  if (drop) train::dropout(k, branch.data(), al.keep_att_out.data(), nd, s);
  k.linear_dw(branch.data(), al.ctx.data(), gb.out_w.ptr(), gb.out_b.ptr(), rows, d, d);
  k.linear_dx(branch.data(), b.out_w.ptr(), dctx.data(), rows, d, d, false);
  train::attention_backward(att, al.q.data(), al.k.data(), al.v.data(), al.weights.data(),
                            drop ? al.keep_att.data() : nullptr, dctx.data(), dq.data(), dk.data(),
                            dv.data());
  auto bias = [](Tensor& t) { return t.empty() ? nullptr : t.ptr(); };
  k.linear_dw(dq.data(), al.ln1.data(), gb.query_w.ptr(), bias(gb.query_b), rows, d, d);
  k.linear_dw(dk.data(), al.ln1.data(), gb.key_w.ptr(), bias(gb.key_b), rows, d, d);
  k.linear_dw(dv.data(), al.ln1.data(), gb.value_w.ptr(), bias(gb.value_b), rows, d, d);
  k.linear_dx(dq.data(), b.query_w.ptr(), dln.data(), rows, d, d, false);
  k.linear_dx(dk.data(), b.key_w.ptr(), dln.data(), rows, d, d, true);
  k.linear_dx(dv.data(), b.value_w.ptr(), dln.data(), rows, d, d, true);
  train::layer_norm_backward(k, dln.data(), al.ln1_hat.data(), al.rstd1.data(), b.norm1_scale.ptr(),
                             dx.data(), gb.norm1_scale.ptr(), gb.norm1_shift.ptr(), rows, d, true);
  return Status::ok();
}

Status TrainModel::attention_maps(const std::vector<int>& ids,
                                  std::vector<std::vector<std::vector<float>>>& out) {
  const int T = static_cast<int>(ids.size());
  if (T < 1) return Status::fail("the probe needs at least one token");
  TorchGenerator unused;
  const std::vector<int> targets(ids.size(), 0);
  float loss_unused = 0.0f;
  if (Status st = start_loss(ids, targets, 1, T, false, false); !st.is_ok()) return st;
  // the embeddings and the blocks: the head after them changes no attention weight
  const int L = static_cast<int>(params_.blocks.size());
  for (int stage = 0; stage <= L; ++stage)
    if (Status st = forward_stage(stage, unused, loss_unused); !st.is_ok()) return st;
  const int H = config_.gpt.n_heads;
  const std::size_t tt = static_cast<std::size_t>(T) * T;
  out.assign(acts_->layers.size(), {});
  for (std::size_t l = 0; l < acts_->layers.size(); ++l)
    for (int h = 0; h < H; ++h) {
      const float* w = acts_->layers[l].weights.data() + static_cast<std::size_t>(h) * tt;
      out[l].emplace_back(w, w + tt);
    }
  return Status::ok();
}

std::vector<double> TrainModel::position_losses() const {
  std::vector<double> out;
  if (!acts_ || !acts_->done || acts_->row_losses.empty()) return out;
  const Activations& a = *acts_;
  out.assign(static_cast<std::size_t>(a.tokens), 0.0);
  for (int b = 0; b < a.batch; ++b)
    for (int t = 0; t < a.tokens; ++t)
      out[static_cast<std::size_t>(t)] += a.row_losses[static_cast<std::size_t>(b) * a.tokens + t] / a.batch;
  return out;
}

Status TrainModel::last_probabilities(const std::vector<int>& ids, std::vector<float>& out) {
  // An eval pass over the whole window (as generate_text_simple runs model(idx_cond)); the targets are
  // placeholders: only the last row's logits are read, before the softmax the loss applies.
  const int T = static_cast<int>(ids.size());
  if (T < 1) return Status::fail("generation needs at least one token");
  TorchGenerator unused;
  std::vector<int> targets(ids.size(), 0);
  float loss_unused = 0.0f;
  if (Status st = loss(ids, targets, 1, T, false, unused, loss_unused, false); !st.is_ok()) return st;
  // loss() turned the logits into probabilities in place
  const int V = config_.gpt.vocab_size;
  const float* p = acts_->probs.data() + static_cast<std::size_t>(T - 1) * V;
  out.assign(p, p + V);
  return Status::ok();
}

GptWeights TrainModel::to_weights(Isa isa) const {
  const GptConfig& c = config_.gpt;
  GptWeights w;
  w.config = c;
  w.isa = resolve(isa);
  w.tok_emb = pack_matrix(params_.tok_emb, w.isa);
  w.pos_emb = params_.pos_emb;
  for (const GptTensors::Block& b : params_.blocks) {
    GptBlock n;
    n.norm1_scale = b.norm1_scale, n.norm1_shift = b.norm1_shift;
    n.norm2_scale = b.norm2_scale, n.norm2_shift = b.norm2_shift;
    auto lin = [&](const Tensor& wt, const Tensor& bias) {
      PackedLinear p;
      p.weight = pack_matrix(wt, w.isa);
      p.bias = bias;
      return p;
    };
    n.query = lin(b.query_w, b.query_b), n.key = lin(b.key_w, b.key_b), n.value = lin(b.value_w, b.value_b);
    n.out_proj = lin(b.out_w, b.out_b);
    if (!c.attention_only) n.fc = lin(b.fc_w, b.fc_b), n.proj = lin(b.proj_w, b.proj_b);
    w.blocks.push_back(std::move(n));
  }
  w.final_scale = params_.final_scale, w.final_shift = params_.final_shift;
  w.out_head = pack_matrix(params_.out_head, w.isa);
  w.source = "trained";
  return w;
}

}  // namespace attnviz
