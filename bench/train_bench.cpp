// attnviz-train-bench: one chapter-5 training step of the book's GPTModel (zero_grad, forward with dropout,
// cross-entropy, backward, AdamW), timed per phase, with the step's GFLOP/s against the measured FMA peak and
// the memory held against train_memory()'s count. bench/torch_train_peer.py is PyTorch's peer.
//
//   build/native-release/bench/attnviz-train-bench [--preset gpt2-small] [--context 256] [--batch 2] [--steps
//   3]
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "attnviz/train.hpp"
#include "fma_peak.hpp"
#include "layer_timing.hpp"

using namespace attnviz;

namespace {

// The process's CPU time (user + system, every thread) in seconds: on a machine shared with other work the
// wall time stretches, while the CPU time a step needs moves much less.
double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "gpt2-small";
  int context = 256, batch = 2, steps = 3, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--preset")
      preset = argv[i + 1];
    else if (flag == "--context")
      context = std::atoi(argv[i + 1]);
    else if (flag == "--batch")
      batch = std::atoi(argv[i + 1]);
    else if (flag == "--steps")
      steps = std::atoi(argv[i + 1]);
    else if (flag == "--threads")
      threads = std::atoi(argv[i + 1]);
  }
  TrainConfig cfg;
  cfg.gpt = *find_gpt_preset(preset);
  cfg.gpt.context_length = context;
  TorchGenerator g(123);
  TrainModel m;
  bench::must(TrainModel::build(cfg, g, m), "build");
  m.exec.threads = threads;
  const Isa isa = resolve(Isa::automatic);
  const int workers = resolve_threads(threads);
  TorchGenerator data(1);
  std::vector<int> ids(static_cast<std::size_t>(batch) * (context + 1));
  for (int& id : ids) id = static_cast<int>(data.random() % static_cast<std::uint32_t>(cfg.gpt.vocab_size));
  std::vector<int> x, y;
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < context; ++t) {
      x.push_back(ids[static_cast<std::size_t>(b) * (context + 1) + t]);
      y.push_back(ids[static_cast<std::size_t>(b) * (context + 1) + t + 1]);
    }
  AdamW opt;
  opt.lr = 4e-4, opt.weight_decay = 0.1;
  double fwd = 0, bwd = 0, optim = 0, total = 0, cpu_fwd = 0, cpu_bwd = 0, cpu_optim = 0;
  for (int s = 0; s <= steps; ++s) {  // step 0 allocates the activations and the moments: not counted
    const double t0 = bench::now(), c0 = cpu_seconds();
    m.zero_grad();
    float loss = 0;
    bench::must(m.loss(x, y, batch, context, true, g, loss), "loss");
    const double t1 = bench::now(), c1 = cpu_seconds();
    bench::must(m.backward(), "backward");
    const double t2 = bench::now(), c2 = cpu_seconds();
    opt.step(m.params(), m.grads());
    const double t3 = bench::now(), c3 = cpu_seconds();
    if (s == 0) continue;
    fwd += t1 - t0, bwd += t2 - t1, optim += t3 - t2, total += t3 - t0;
    cpu_fwd += c1 - c0, cpu_bwd += c2 - c1, cpu_optim += c3 - c2;
  }
  const StepFlops f = train_step_flops(cfg, batch, context);
  const double step = total / steps;
  const double peak = bench::fma_peak(isa, workers);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const TrainMemory mem = train_memory(cfg, batch, context);
  std::printf("attnviz %s batch %d context %d, %s on %d threads (FMA peak %.0f GFLOP/s):\n", preset.c_str(),
              batch, context, to_string(isa), workers, peak / 1e9);
  std::printf("  step %.0f ms (forward %.0f, backward %.0f, AdamW %.0f), mean of %d\n", step * 1e3,
              fwd / steps * 1e3, bwd / steps * 1e3, optim / steps * 1e3, steps);
  std::printf("  CPU time %.0f ms a step over all threads (forward %.0f, backward %.0f, AdamW %.0f)\n",
              (cpu_fwd + cpu_bwd + cpu_optim) / steps * 1e3, cpu_fwd / steps * 1e3, cpu_bwd / steps * 1e3,
              cpu_optim / steps * 1e3);
  std::printf("  %.1f GFLOP/s over the step (%.0f%% of peak); forward %.1f GFLOP/s, backward %.1f GFLOP/s\n",
              (f.forward + f.backward) / step / 1e9, 100.0 * (f.forward + f.backward) / step / peak,
              f.forward / (fwd / steps) / 1e9, f.backward / (bwd / steps) / 1e9);
  std::printf(
      "  memory: peak RSS %s, train_memory() counted %s (parameters %s, gradients %s, moments %s, "
      "activations %s)\n",
      format_bytes(static_cast<std::uint64_t>(ru.ru_maxrss) * 1024).c_str(),
      format_bytes(mem.total()).c_str(), format_bytes(mem.params).c_str(), format_bytes(mem.grads).c_str(),
      format_bytes(mem.moments).c_str(), format_bytes(mem.activations).c_str());
  return 0;
}
