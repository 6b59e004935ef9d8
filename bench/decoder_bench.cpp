// attnviz-decoder-bench: a model folder of another architecture (llama, qwen2, qwen3, gemma3_text, gpt_neox;
// bench/torch_decoder_peer.py writes ones of real models' shapes with random weights). Prints the load time
// and memory, one keystroke at T = 64 (a token appended: the incremental pass, every layer's weights kept, as
// the model view redraws every head) and the full forward pass at T = 64 and 128 (every layer's weights and
// every position's logits, what the PyTorch peer computes), with the instruction set and the FMA peak.
//
//   attnviz-decoder-bench --model DIR [--threads N] [--isa NAME] [--widen]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "attnviz/gpt.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "fma_peak.hpp"
#include "layer_timing.hpp"

using namespace attnviz;
using namespace attnviz::bench;

int main(int argc, char** argv) {
  std::string dir;
  int threads = 2;
  Isa isa = Isa::automatic;
  bool widen = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--model") && i + 1 < argc) {
      dir = argv[++i];
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--isa") && i + 1 < argc && parse_isa(argv[i + 1])) {
      isa = *parse_isa(argv[++i]);
    } else if (!std::strcmp(argv[i], "--widen")) {
      widen = true;
    } else {
      std::fprintf(stderr, "usage: attnviz-decoder-bench --model DIR [--threads N] [--isa NAME] [--widen]\n");
      return 2;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "attnviz-decoder-bench: --model DIR is required\n");
    return 2;
  }
  isa = resolve(isa);
  threads = resolve_threads(threads);
  const double peak = isa == Isa::scalar ? 0.0 : fma_peak(isa, threads);
  GptLoadOptions lo;
  lo.isa = isa;
  lo.keep_16bit = !widen;
  auto w = std::make_shared<GptWeights>();
  const double t0 = now();
  if (Status st = load_gpt(dir, lo, *w); !st.is_ok()) {
    std::fprintf(stderr, "attnviz-decoder-bench: %s\n", st.error.c_str());
    return 1;
  }
  const GptConfig c = w->config;
  std::printf("%s: %s, %d layers, %d query heads on %d key/value heads, %lld parameters, matrices %s\n",
              dir.c_str(), c.arch.name.c_str(), c.n_layers, c.n_heads, c.kv_heads(),
              static_cast<long long>(parameter_count(c, w->tied())), to_string(w->tok_emb.dtype));
  std::printf("%s kernels, %d threads, measured FP32 FMA peak %.1f GFLOP/s\n", to_string(isa), threads,
              peak / 1e9);
  std::printf("loaded in %.2f s, %.1f MB in memory\n", now() - t0, static_cast<double>(w->bytes()) / 1e6);

  GptOptions o;
  o.train = false;
  o.exec = {isa, threads};
  GptModel model(w, TorchGenerator(0), o);
  GptRequest every;  // every layer's weights kept (the model view's grid)
  {
    const int T = 64;
    const std::vector<int> ids = token_ids(T, c.vocab_size), prefix(ids.begin(), ids.end() - 1);
    GptResult r;
    std::vector<double> times;
    for (int rep = 0; rep < 15; ++rep) {
      if (!model.forward(prefix, every, r).is_ok()) std::abort();
      const double a = now();
      if (!model.forward(ids, every, r).is_ok() || r.reused != T - 1) std::abort();
      times.push_back(now() - a);
    }
    std::sort(times.begin(), times.end());
    std::printf(
        "one keystroke at T = %d (a token appended, every head's weights kept): %.1f ms (median of %zu)\n", T,
        times[times.size() / 2] * 1e3, times.size());
  }
  for (int T : {64, 128}) {
    const std::vector<int> ids = token_ids(T, c.vocab_size);
    GptRequest all = every;
    all.all_logits = true;
    GptResult r;
    const double s = median_seconds(
        [&] {
          model.forget();
          if (!model.forward(ids, all, r).is_ok() || r.reused != 0) std::abort();
        },
        3.0, 3);
    const double flops = forward_flops(c, T, 0, true);
    std::printf(
        "full forward T = %d (every layer's weights, every position's logits): %.1f ms, %.1f GFLOP/s = "
        "%.0f%% "
        "of the FMA peak\n",
        T, s * 1e3, flops / s / 1e9, peak > 0 ? 100.0 * flops / s / peak : 0.0);
  }
  return 0;
}
