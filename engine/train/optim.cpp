// AdamW, gradient clipping and the learning-rate schedule, as PyTorch 1.13 computes them on the CPU.
#include <cmath>
#include <string>

#include "attnviz/train.hpp"
#include "train/ops.hpp"

namespace attnviz {

void AdamW::step(GptTensors& params, const GptTensors& grads) {
  if (exp_avg.tok_emb.empty()) {
    exp_avg = params.zeros_like();
    exp_avg_sq = params.zeros_like();
  }
  ++steps;
  // PyTorch's scalars: Python floats (doubles) that each tensor operation rounds to float32.
  const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(steps));
  const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(steps));
  const float decay = static_cast<float>(1.0 - lr * weight_decay);
  const float b1 = static_cast<float>(beta1), one_minus_b1 = static_cast<float>(1.0 - beta1);
  const float b2 = static_cast<float>(beta2), one_minus_b2 = static_cast<float>(1.0 - beta2);
  const float step_size = static_cast<float>(lr / bias_correction1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float e = static_cast<float>(eps);

  std::vector<Tensor*> p, m, v;
  std::vector<const Tensor*> g;
  params.each([&](const std::string&, Tensor& t) { p.push_back(&t); });
  exp_avg.each([&](const std::string&, Tensor& t) { m.push_back(&t); });
  exp_avg_sq.each([&](const std::string&, Tensor& t) { v.push_back(&t); });
  grads.each([&](const std::string&, const Tensor& t) { g.push_back(&t); });
  ThreadPool& pool = ThreadPool::shared(resolve_threads(threads));
  // The ISA's kernel does the same float operations in the same order (no fusing), so the parameters are the
  // same bits on every ISA; the loop below is the reference it is tested against.
  const simd::TrainKernels* fast = simd::train_kernels(resolve(Isa::automatic));
  const simd::AdamWScalars sc{decay, b1, one_minus_b1, b2, one_minus_b2, step_size, bc2_sqrt, e};
  for (std::size_t t = 0; t < p.size(); ++t) {
    float* pd = p[t]->ptr();
    float* md = m[t]->ptr();
    float* vd = v[t]->ptr();
    const float* gd = g[t]->ptr();
    train::chunked(pool, p[t]->size(), 1 << 16, [&](std::size_t i0, std::size_t i1) {
      if (fast) return fast->adamw(pd + i0, md + i0, vd + i0, gd + i0, i1 - i0, sc);
      for (std::size_t i = i0; i < i1; ++i) {
        pd[i] *= decay;                             // param.mul_(1 - lr * weight_decay)
        md[i] = md[i] * b1 + one_minus_b1 * gd[i];  // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        vd[i] =
            vd[i] * b2 + one_minus_b2 * gd[i] * gd[i];  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, ...)
        const float denom = std::sqrt(vd[i]) / bc2_sqrt + e;  // (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
        // param.addcdiv_(exp_avg, denom, value=-step_size): (value * m) / denom
        pd[i] += -step_size * md[i] / denom;
      }
    });
  }
}

double clip_grad_norm(GptTensors& grads, double max_norm) {
  // torch.norm of each gradient, then the norm of those norms (float32 results); the sums here are in double
  double total_sq = 0.0;
  grads.each([&](const std::string&, const Tensor& t) {
    double sq = 0.0;
    for (float x : t.data) sq += static_cast<double>(x) * x;
    const float norm = static_cast<float>(std::sqrt(sq));
    total_sq += static_cast<double>(norm) * norm;
  });
  const float total = static_cast<float>(std::sqrt(total_sq));
  const float coef = static_cast<float>(max_norm) / (total + 1e-6f);
  if (coef < 1.0f)
    grads.each([&](const std::string&, Tensor& t) {
      for (float& x : t.data) x *= coef;
    });
  return total;
}

double LrSchedule::lr(int step, int total_steps, double peak) const {
  if (step < warmup_steps) return initial_lr + step * (peak - initial_lr) / warmup_steps;
  const int span = total_steps - warmup_steps;
  const double progress = span > 0 ? static_cast<double>(step - warmup_steps) / span : 1.0;
  return min_lr + (peak - min_lr) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
}

}  // namespace attnviz
