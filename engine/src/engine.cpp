#include "attnviz/engine.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "fast.hpp"
#include "reference/kernels.hpp"

namespace attnviz {
namespace {

// Stacks per-head Linear layers along `out` (rows), as the wrapper's concatenated heads see them.
Linear stack(const std::vector<Linear>& parts) {
  const int in = parts[0].weight.shape[1];
  int out = 0;
  for (const Linear& p : parts) out += p.weight.shape[0];
  Linear s;
  s.weight = Tensor(out, in);
  if (!parts[0].bias.empty()) s.bias = Tensor::vector(out);
  std::size_t w = 0, b = 0;
  for (const Linear& p : parts) {
    std::memcpy(s.weight.ptr() + w, p.weight.ptr(), p.weight.size() * sizeof(float));
    w += p.weight.size();
    if (!p.bias.empty()) {
      std::memcpy(s.bias.ptr() + b, p.bias.ptr(), p.bias.size() * sizeof(float));
      b += p.bias.size();
    }
  }
  return s;
}

// Rows [first, first + count) of a Linear.
Linear rows(const Linear& l, int first, int count) {
  const int in = l.weight.shape[1];
  Linear r;
  r.weight = Tensor(count, in);
  std::memcpy(r.weight.ptr(), l.weight.ptr() + static_cast<std::size_t>(first) * in,
              static_cast<std::size_t>(count) * in * sizeof(float));
  if (!l.bias.empty()) {
    r.bias = Tensor::vector(count);
    std::memcpy(r.bias.ptr(), l.bias.ptr() + first, static_cast<std::size_t>(count) * sizeof(float));
  }
  return r;
}

Tensor transpose(const Tensor& t) {
  Tensor r(t.shape[1], t.shape[0]);
  for (int i = 0; i < t.shape[0]; ++i)
    for (int j = 0; j < t.shape[1]; ++j) r.at(j, i) = t.at(i, j);
  return r;
}

bool all_finite(const Tensor& t) {
  return attnviz::all_finite(t.ptr(), t.ptr() + t.size());
}

bool all_finite(const HeadSquares& t) {
  if (t.dense()) return attnviz::all_finite(t.ptr(), t.ptr() + t.size());
  for (int h = 0; h < t.heads; ++h)
    for (int i = 0; i < t.n; ++i)
      if (!attnviz::all_finite(t.row(h, i), t.row(h, i) + t.n)) return false;
  return true;
}

}  // namespace

Status build_params(const Config& config, TorchGenerator& g, Params& out) {
  if (Status st = validate(config); !st.is_ok()) return st;
  const Config c = effective(config);
  Params p;
  switch (c.variant) {
    case Variant::simplified:
      break;
    case Variant::self_v1: {
      // nn.Parameter(torch.rand(d_in, d_out)) for query, key, value; q = x @ W, kept here as W^T.
      Linear* dst[] = {&p.query, &p.key, &p.value};
      for (Linear* l : dst) {
        Tensor w(c.d_in, c.d_out);
        const std::vector<float> r = torch_rand(g, w.size());
        std::memcpy(w.ptr(), r.data(), r.size() * sizeof(float));
        l->weight = transpose(w);
      }
      break;
    }
    case Variant::self_v2:
    case Variant::causal:
    case Variant::mha:
      p.query = torch_linear(g, c.d_in, c.d_out, c.qkv_bias);
      p.key = torch_linear(g, c.d_in, c.d_out, c.qkv_bias);
      p.value = torch_linear(g, c.d_in, c.d_out, c.qkv_bias);
      if (c.variant == Variant::mha) p.out_proj = torch_linear(g, c.d_out, c.d_out, true);
      break;
    case Variant::wrapper: {
      // num_heads CausalAttention modules, each drawing its query, key, value in turn.
      std::vector<Linear> q, k, v;
      for (int h = 0; h < c.num_heads; ++h) {
        q.push_back(torch_linear(g, c.d_in, c.d_out, c.qkv_bias));
        k.push_back(torch_linear(g, c.d_in, c.d_out, c.qkv_bias));
        v.push_back(torch_linear(g, c.d_in, c.d_out, c.qkv_bias));
      }
      p.query = stack(q);
      p.key = stack(k);
      p.value = stack(v);
      break;
    }
  }
  pack(p);
  out = std::move(p);
  return Status::ok();
}

std::vector<NamedTensor> state_dict(const Config& config, const Params& p) {
  const Config c = effective(config);
  std::vector<NamedTensor> sd;
  auto add_linear = [&sd](const std::string& prefix, const Linear& l) {
    sd.push_back({prefix + ".weight", l.weight});
    if (!l.bias.empty()) sd.push_back({prefix + ".bias", l.bias});
  };
  switch (c.variant) {
    case Variant::simplified:
      break;
    case Variant::self_v1:
      sd.push_back({"W_query", transpose(p.query.weight)});
      sd.push_back({"W_key", transpose(p.key.weight)});
      sd.push_back({"W_value", transpose(p.value.weight)});
      break;
    case Variant::wrapper:
      for (int h = 0; h < c.num_heads; ++h) {
        const std::string prefix = "heads." + std::to_string(h);
        add_linear(prefix + ".W_query", rows(p.query, h * c.d_out, c.d_out));
        add_linear(prefix + ".W_key", rows(p.key, h * c.d_out, c.d_out));
        add_linear(prefix + ".W_value", rows(p.value, h * c.d_out, c.d_out));
      }
      break;
    default:
      add_linear("W_query", p.query);
      add_linear("W_key", p.key);
      add_linear("W_value", p.value);
      if (c.variant == Variant::mha) add_linear("out_proj", p.out_proj);
  }
  return sd;
}

namespace {

// Dropout masks, drawn as the modules draw them: once over (1, H, T, T), or once per head for the wrapper.
std::vector<std::uint8_t> draw_keep(const Config& c, const Shape& s, int T, TorchGenerator& g) {
  const std::size_t per_head = static_cast<std::size_t>(T) * T;
  if (c.variant != Variant::wrapper)
    return torch_dropout_mask(g, per_head * s.heads, c.dropout, c.dropout_rng);
  std::vector<std::uint8_t> keep;
  keep.reserve(per_head * s.heads);
  for (int h = 0; h < s.heads; ++h) {
    const std::vector<std::uint8_t> m = torch_dropout_mask(g, per_head, c.dropout, c.dropout_rng);
    keep.insert(keep.end(), m.begin(), m.end());
  }
  return keep;
}

// The scalar reference pass: every stage computed with the kernels in reference/.
void forward_reference(const Config& c, const Params& p, const Input& in, Result& r) {
  const Shape& s = r.shape;
  const int T = in.x.shape[0], H = s.heads, hd = s.head_dim, W = s.width;

  // 1. projections: (T, d_in) -> (T, width); `simplified` uses the inputs themselves
  if (s.has_weights) {
    r.q = Tensor(T, W), r.k = Tensor(T, W), r.v = Tensor(T, W);
    const auto proj = [&](const Linear& l, Tensor& y) {
      ref::linear(in.x.ptr(), l.weight.ptr(), l.bias.empty() ? nullptr : l.bias.ptr(), y.ptr(), T, c.d_in, W);
    };
    proj(p.query, r.q);
    proj(p.key, r.k);
    proj(p.value, r.v);
  } else {
    r.q = r.k = r.v = in.x;
  }

  // 2. raw scores q k^T per head: (H, T, T)
  r.scores = HeadSquares(H, T, 0.0f);
  ref::scores(r.q.ptr(), r.k.ptr(), r.scores.ptr(), T, H, hd);

  // 3. scale by 1/sqrt(hd) and mask the future with -inf
  r.scaled = HeadSquares(H, T, 0.0f);
  ref::scale_mask(r.scores.ptr(), r.scaled.ptr(), T, H, s.scale, s.causal);

  // 4. softmax over each row
  r.weights = HeadSquares(H, T, 0.0f);
  ref::softmax_rows(r.scaled.ptr(), r.weights.ptr(), T, H, s.causal);

  // 5. dropout with the drawn mask
  r.dropped = r.weights;
  if (s.dropout)
    ref::dropout(r.weights.ptr(), r.keep.data(), r.dropped.ptr(), static_cast<std::int64_t>(r.weights.size()),
                 dropout_scale(c.dropout));

  // 6. context vectors, heads merged side by side: (T, width)
  r.context = Tensor(T, W);
  ref::context(r.dropped.ptr(), r.v.ptr(), r.context.ptr(), T, H, hd, s.causal);

  // 7. output: out_proj for `mha`, the merged context otherwise (end_forward keeps only the stages asked for)
  if (s.out_proj) {
    r.output = Tensor(T, c.d_out);
    ref::linear(r.context.ptr(), p.out_proj.weight.ptr(), p.out_proj.bias.ptr(), r.output.ptr(), T, W,
                c.d_out);
  }
}

}  // namespace

double forward_flops(const Config& config, int tokens) {
  const Config c = effective(config);
  const Shape s = shape_of(c);
  const double T = tokens;
  const double projections = s.has_weights ? 3.0 * c.d_in * s.width : 0.0;
  return 2.0 * T * (projections + s.width * T + (s.out_proj ? s.width * s.out_width : 0.0));
}

Status begin_forward(const Config& config, const Params& p, const Input& in, TorchGenerator& g, Result& r) {
  const int T = in.x.shape[0];
  if (in.x.rank != 2 || T < 1) return Status::fail("the input is empty: give at least one token");
  if (Status st = validate(config, T); !st.is_ok()) return st;
  const Config c = effective(config);
  if (in.x.shape[1] != c.d_in) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "the inputs have %d columns but d_in is %d", in.x.shape[1], c.d_in);
    return Status::fail(buf);
  }
  const Shape s = shape_of(c);
  if (s.has_weights && (p.query.weight.shape[0] != s.width || p.query.weight.shape[1] != c.d_in))
    return Status::fail("the parameters do not match the configuration's shapes");
  r = Result();
  r.config = c;
  r.shape = s;
  r.tokens = in.tokens;
  r.inputs = in.x;
  if (s.dropout) r.keep = draw_keep(c, s, T, g);
  return Status::ok();
}

Status not_finite(const char* stage) {
  return Status::fail(std::string("the result is not finite (") + stage +
                      "): the inputs are too large for float32 arithmetic");
}

Status check_finite(const Result& r) {
  // Raw scores may overflow in a masked cell only, where the weights are still exact: refused all the same.
  // The scaled scores are -inf where masked by design, and finite elsewhere when the raw scores are.
  for (const Tensor* t : {&r.q, &r.k, &r.v})
    if (!all_finite(*t)) return not_finite("q, k, v");
  const std::pair<const char*, const HeadSquares*> squares[] = {
      {"raw scores", &r.scores}, {"weights", &r.weights}, {"dropped", &r.dropped}};
  for (const auto& [name, t] : squares)
    if (!all_finite(*t)) return not_finite(name);
  if (!all_finite(r.context)) return not_finite("context");
  if (!all_finite(r.output)) return not_finite("output");
  return Status::ok();
}

Status end_forward(Result& r) {
  const Config& c = r.config;
  const Shape& s = r.shape;
  if (!s.has_weights && r.q.empty()) r.q = r.k = r.v = r.inputs;  // the CPU kernels set them already
  if (!s.out_proj) r.output = r.context;
  if ((c.stages & kStageDropped) && !s.dropout) r.dropped = r.weights;
  if (!(c.stages & kStageScores)) r.scores = HeadSquares();
  if (!(c.stages & kStageScaled)) r.scaled = HeadSquares();
  if (!(c.stages & kStageDropped)) r.dropped = HeadSquares();
  return check_finite(r);
}

Status forward(const Config& config, const Params& p, const Input& in, TorchGenerator& g, Result& out,
               const Exec& exec) {
  const auto start = std::chrono::steady_clock::now();
  Result r;
  if (Status st = begin_forward(config, p, in, g, r); !st.is_ok()) return st;
  const Config& c = r.config;
  const int T = in.x.shape[0];
  r.isa = resolve(exec.isa);
  r.threads = r.isa == Isa::scalar ? 1 : resolve_threads(exec.threads);
  // Waking the pool costs tens of microseconds: layers under ~1 MFLOP run on the calling thread.
  if (forward_flops(c, T) < 1e6) r.threads = 1;
  if (r.isa == Isa::scalar) {
    forward_reference(c, p, in, r);
  } else {
    forward_fast(c, p, in, r.isa, r.threads, r);
  }
  if (Status st = end_forward(r); !st.is_ok()) return st;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  recycle(out);
  out = std::move(r);
  return Status::ok();
}

Status run(const Config& c, const Input& in, Result& out, Params* params_out, const Exec& exec) {
  TorchGenerator g(c.seed);
  Params p;
  if (Status st = build_params(c, g, p); !st.is_ok()) return st;
  // build_params packed for the best ISA; another one gets its own panels (the old ones go first: two
  // packed copies at once would cost the parameters' size again, beyond run_memory's count).
  if (resolve(exec.isa) != resolve(Isa::automatic)) {
    p.packed.reset();
    pack(p, exec);
  }
  if (Status st = forward(c, p, in, g, out, exec); !st.is_ok()) return st;
  if (params_out) *params_out = std::move(p);
  return Status::ok();
}

Status run_text(const Config& c, std::string_view text, Result& out, Params* params_out, const Exec& exec) {
  Input in;
  if (Status st = input_from_text(text, c, in); !st.is_ok()) return st;
  return run(c, in, out, params_out, exec);
}

}  // namespace attnviz
