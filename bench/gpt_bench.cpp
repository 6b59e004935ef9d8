// attnviz-gpt-bench: whole GPT-2 models. Prints the seeded gpt2-small initialization time; the full forward
// pass (eval, every head's attention weights of every layer kept) at T = 16, 128, 512 and 1024 with GFLOP/s
// against the machine's measured FP32 FMA peak, with the last position's logits (what the next-token view
// needs) and with every position's (what PyTorch's GPTModel computes); and one appended token (the
// incremental path) at T = 64 .. 1024 with a breakdown (--append: that alone). Passes reuse the previous
// result's storage, as the app does. The PyTorch peer is bench/torch_gpt_peer.py.
//
//   attnviz-gpt-bench [--quick] [--append] [--threads N] [--preset NAME]
//   attnviz-gpt-bench --load PATH   (natively) load time and peak RSS against the file's size, then a pass
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "attnviz/gpt.hpp"
#include "attnviz/head_kinds.hpp"
#if !defined(__EMSCRIPTEN__)
#include <sys/resource.h>

#include "attnviz/io/gpt_file.hpp"
#endif
#include "fma_peak.hpp"
#include "layer_timing.hpp"

using namespace attnviz;
using namespace attnviz::bench;

namespace {

// Multiply-adds x 2 of one pass: the block matrices (12 d^2 per token), the attention of every head (q k^T
// and weights v over the causal half, 2 T^2 d per layer) and the head over `logit_rows` positions.
double pass_flops(const GptConfig& c, int T, int logit_rows) {
  const double d = c.d_model, t = T;
  return c.n_layers * (24.0 * t * d * d + 2.0 * t * t * d) + 2.0 * logit_rows * d * c.vocab_size;
}

// Full passes timed for `budget` seconds (at least `min_reps`, after one to warm up): the median time, and
// the median of each pass's share of the FMA peak as read right before it (fma_rate_now; 0 for the scalar
// ISA). On a virtual machine whose speed drifts, a peak read once at the start says little about a pass
// minutes later: on the Emerald Rapids VM the reading went from 198 to 346 GFLOP/s within minutes.
struct Timed {
  double seconds = 0, share = 0;
};
Timed time_passes(const std::function<void()>& pass, double budget, int min_reps, double flops, Isa isa,
                  int threads) {
  std::vector<double> peaks;
  const std::vector<double> times = seconds_of_runs(pass, budget, min_reps, [&] {
    peaks.push_back(isa == Isa::scalar ? 0.0 : fma_rate_now(isa, threads));
  });
  std::vector<double> shares;
  for (std::size_t i = 0; i < times.size(); ++i)
    shares.push_back(peaks[i] > 0 ? flops / times[i] / peaks[i] : 0.0);
  return {median(times), median(shares)};
}

#if !defined(__EMSCRIPTEN__)
// Loads a weights file as the hosts do (mapped, packed matrix by matrix, pages released) and reports the
// process's peak resident memory, which nothing else has raised yet.
int load(const std::string& path, int threads) {
  const double t0 = now();
  auto w = std::make_shared<GptWeights>();
  if (Status st = load_gpt(path, GptLoadOptions{}, *w); !st.is_ok()) {
    std::fprintf(stderr, "attnviz-gpt-bench: %s\n", st.error.c_str());
    return 1;
  }
  const double seconds = now() - t0;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double file = static_cast<double>(std::filesystem::file_size(path));
  const double peak = static_cast<double>(ru.ru_maxrss) * 1024.0;
  std::printf("%s: %.1f MB file, loaded in %.3f s, %.1f MB packed; peak RSS %.1f MB = %.2fx the file\n",
              path.c_str(), file / 1e6, seconds, static_cast<double>(w->bytes()) / 1e6, peak / 1e6,
              peak / file);
  GptOptions o;
  o.train = false;
  o.exec.threads = threads;
  GptModel m(std::move(w), TorchGenerator(0), o);
  GptResult r;
  const std::vector<int> ids = token_ids(16, m.weights().config.vocab_size);
  if (Status st = m.forward(ids, GptRequest{}, r); !st.is_ok()) {
    std::fprintf(stderr, "attnviz-gpt-bench: %s\n", st.error.c_str());
    return 1;
  }
  std::printf("a pass at T = 16: %.1f ms\n", r.seconds * 1e3);
  return 0;
}
#endif

// Seconds of a timed step, over repetitions: the median and the best (the least disturbed by other work on a
// shared machine).
struct Times {
  double median = 0.0, best = 0.0;
};
Times times_of(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front()};
}

// Appending the last of `ids` to the pass over the others (the incremental path: the prefix's keys and values
// reused), `reps` times.
Times append_seconds(GptModel& m, const std::vector<int>& ids, const GptRequest& req, int reps) {
  const std::vector<int> prefix(ids.begin(), ids.end() - 1);
  GptResult r;
  std::vector<double> times;
  for (int rep = 0; rep < reps; ++rep) {
    if (!m.forward(prefix, req, r).is_ok()) std::abort();
    const double a = now();
    if (!m.forward(ids, req, r).is_ok() || r.reused != static_cast<int>(ids.size()) - 1) std::abort();
    times.push_back(now() - a);
  }
  return times_of(times);
}

// Typing: a full pass over the first T - n tokens, then n tokens appended one by one up to T, each followed
// by what the model view computes before it draws: every head's kinds and sink share, continued over the new
// row (HeadSums, as ModelSession::adopt does). The mean and the slowest of those n keystrokes, the pass alone
// and to the screen (those that outgrow the kept squares' padding copy them).
struct Typing {
  double pass_mean = 0.0, pass_slowest = 0.0, screen_mean = 0.0, screen_slowest = 0.0;
};
Typing typing_seconds(GptModel& m, const std::vector<int>& ids, int n) {
  const int T = static_cast<int>(ids.size());
  GptResult r;
  m.forget();
  std::vector<int> typed(ids.begin(), ids.end() - n);
  if (!m.forward(typed, GptRequest{}, r).is_ok()) std::abort();
  std::vector<std::vector<HeadSums>> sums(r.layers.size());
  std::vector<std::vector<HeadScores>> kinds(r.layers.size());
  const auto score = [&] {
    std::vector<HeadTask> tasks;
    for (std::size_t l = 0; l < r.layers.size(); ++l) {
      const HeadSquares& w = r.layers[l].attention.weights;
      sums[l].resize(static_cast<std::size_t>(w.heads));
      kinds[l].resize(static_cast<std::size_t>(w.heads));
      for (int h = 0; h < w.heads; ++h)
        tasks.push_back(
            {head_view(w, h), &sums[l][static_cast<std::size_t>(h)], &kinds[l][static_cast<std::size_t>(h)]});
    }
    score_heads(tasks, r.ids, m.options().exec);
  };
  score();
  Typing out;
  for (int t = T - n + 1; t <= T; ++t) {
    typed.push_back(ids[static_cast<std::size_t>(t - 1)]);
    const double a = now();
    if (!m.forward(typed, GptRequest{}, r).is_ok() || r.reused != t - 1) std::abort();
    const double b = now();
    score();
    const double pass = b - a, screen = now() - a;
    out.pass_mean += pass / n, out.pass_slowest = std::max(out.pass_slowest, pass);
    out.screen_mean += screen / n, out.screen_slowest = std::max(out.screen_slowest, screen);
  }
  return out;
}

// The model view's head kinds after a keystroke scored afresh: score_head over every row of every kept head
// of every layer (what typing no longer pays: it continues the sums).
Times head_kind_seconds(GptModel& m, const std::vector<int>& ids, int reps) {
  GptResult r;
  if (!m.forward(ids, GptRequest{}, r).is_ok()) std::abort();
  std::vector<double> times;
  for (int rep = 0; rep < reps; ++rep) {
    const double a = now();
    float sink = 0.0f;
    for (const GptLayer& l : r.layers)
      for (int h = 0; h < l.attention.shape.heads; ++h)
        sink += score_head(head_view(l.attention.weights, h), ids).first;
    if (!(sink >= 0.0f)) std::abort();
    times.push_back(now() - a);
  }
  return times_of(times);
}

// One appended token at T = 64 .. 1024, every layer's weights kept (what the model view asks): its median and
// best; the same keeping nothing, whose difference is what keeping costs (the kept squares' new rows, and
// their copies where they are copied); typing the last 32 tokens one by one, the pass alone and to the screen
// (mean and slowest of each). The breakdown is differential, through the public API, from best times: a one-
// and a two-layer model of the same shape keeping nothing give one layer's cost (its GEMMs, about its cost at
// T = 16, plus its attention, which grows with T) and the rest (the embeddings, the final norm and the output
// head). "kinds all" is every head's kinds scored afresh after the keystroke (not part of the pass).
void append_section(const GptConfig& config, GptModel& model, bool quick) {
  const int reps = quick ? 5 : 15;
  GptRequest all, none;
  none.all_layers = false;
  std::vector<GptModel> small(2);
  for (int n = 1; n <= 2; ++n) {
    GptConfig c = config;
    c.n_layers = n;
    if (!seeded_gpt(c, 123, model.options(), small[static_cast<std::size_t>(n - 1)]).is_ok()) std::abort();
  }
  const auto layer_and_rest = [&](const std::vector<int>& ids) {
    const double one = append_seconds(small[0], ids, none, reps).best,
                 two = append_seconds(small[1], ids, none, reps).best;
    return std::pair<double, double>{two - one, one - (two - one)};
  };
  const double gemm_layer = layer_and_rest(token_ids(16, config.vocab_size)).first;
  std::printf("\none appended token (incremental path, keys and values of the prefix reused; %d runs), ms\n",
              reps);
  std::printf("%6s %8s %8s %10s %8s %8s %8s %8s %8s %8s %8s %8s %10s\n", "T", "median", "best", "keep none",
              "keeping", "GEMMs", "attn", "rest", "typing", "slowest", "screen", "slowest", "kinds all");
  Times at256;
  for (int T : {64, 256, 512, 1024}) {
    if (T > config.context_length) continue;
    const std::vector<int> ids = token_ids(T, config.vocab_size);
    const Times t_all = append_seconds(model, ids, all, reps),
                t_none = append_seconds(model, ids, none, reps);
    const auto [layer, rest] = layer_and_rest(ids);
    const Typing typing = typing_seconds(model, ids, std::min(32, T - 1));
    const Times kinds = head_kind_seconds(model, ids, quick ? 2 : 5);
    if (T == 256) at256 = t_all;
    std::printf("%6d %8.1f %8.1f %10.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %10.1f", T,
                t_all.median * 1e3, t_all.best * 1e3, t_none.best * 1e3, (t_all.best - t_none.best) * 1e3,
                config.n_layers * gemm_layer * 1e3, config.n_layers * (layer - gemm_layer) * 1e3, rest * 1e3,
                typing.pass_mean * 1e3, typing.pass_slowest * 1e3, typing.screen_mean * 1e3,
                typing.screen_slowest * 1e3, kinds.best * 1e3);
    if (T == 1024 && at256.best > 0.0)
      std::printf("   T1024/T256: median %.2f, best %.2f", t_all.median / at256.median,
                  t_all.best / at256.best);
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, append_only = false;
  int threads = 2;
  std::string preset = "gpt2-small", load_path;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--append")) {
      append_only = true;
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--preset") && i + 1 < argc) {
      preset = argv[++i];
#if !defined(__EMSCRIPTEN__)
    } else if (!std::strcmp(argv[i], "--load") && i + 1 < argc) {
      load_path = argv[++i];
#endif
    } else {
      std::fprintf(
          stderr,
          "usage: attnviz-gpt-bench [--quick] [--append] [--threads N] [--preset NAME] [--load PATH]\n");
      return 2;
    }
  }
#if !defined(__EMSCRIPTEN__)
  if (!load_path.empty()) return load(load_path, threads);
#endif
  const std::optional<GptConfig> config = find_gpt_preset(preset);
  if (!config) {
    std::fprintf(stderr, "attnviz-gpt-bench: unknown preset %s\n", preset.c_str());
    return 1;
  }
  const Isa isa = resolve(Isa::automatic);
  threads = resolve_threads(threads);
  const double budget = quick ? 0.5 : 3.0;
  const double peak = isa == Isa::scalar ? 0.0 : fma_peak(isa, threads);
  std::printf("%s, %s kernels, %d threads, measured FP32 FMA peak %.1f GFLOP/s\n", preset.c_str(),
              to_string(isa), threads, peak / 1e9);

  GptOptions options;
  options.train = false;
  options.exec = {isa, threads};
  GptModel model;
  const double t0 = now();
  if (Status st = seeded_gpt(*config, 123, options, model); !st.is_ok()) {
    std::fprintf(stderr, "attnviz-gpt-bench: %s\n", st.error.c_str());
    return 1;
  }
  std::printf(
      "seeded init (torch.manual_seed(123); GPTModel(cfg)): %.3f s, %lld parameters, %.1f MB packed\n",
      now() - t0, static_cast<long long>(parameter_count(*config, false)),
      static_cast<double>(model.weights().bytes()) / 1e6);

  if (append_only) {
    append_section(*config, model, quick);
    return 0;
  }
  std::printf(
      "\nfull forward, eval, every head's attention weights kept (median of runs; each run's share of the "
      "FMA\n"
      "peak read just before it)\n");
  std::printf("%6s %14s %10s %9s %16s %10s\n", "T", "logits", "ms", "GFLOP/s", "of FMA peak", "kept MB");
  for (int T : {16, 128, 512, 1024}) {
    if (T > config->context_length) continue;
    // Two texts that differ in their first token, taking turns: every pass is a full one (nothing of the
    // previous pass is reused), and, as when a text is pasted in the app, the model keeps the storage of the
    // previous pass for it. (Until 2026-11-27 the bench dropped that storage before each pass,
    // GptModel::forget, which the app never does: the pass then also allocated and page-faulted its buffers,
    // up to 20% of a pass at T = 1024 on the Emerald Rapids VM.)
    std::vector<int> ids[2] = {token_ids(T, config->vocab_size), token_ids(T, config->vocab_size)};
    ids[1][0] = (ids[0][0] + 1) % config->vocab_size;
    int turn = 0;
    for (bool all : {false, true}) {
      GptRequest req;
      req.all_logits = all;
      GptResult r;
      const double flops = pass_flops(*config, T, all ? T : 1);
      const Timed t = time_passes(
          [&] {
            turn ^= 1;
            if (!model.forward(ids[turn], req, r).is_ok() || r.reused != 0) std::abort();
          },
          budget, quick ? 2 : 3, flops, isa, threads);
      double kept = static_cast<double>(r.logits.size()) * 4.0;
      for (const GptLayer& l : r.layers) kept += static_cast<double>(l.attention.weights.size()) * 4.0;
      std::printf("%6d %14s %10.1f %9.1f %15.0f%% %10.1f\n", T, all ? "every position" : "last position",
                  t.seconds * 1e3, flops / t.seconds / 1e9, 100.0 * t.share, kept / 1e6);
    }
  }

  append_section(*config, model, quick);
  return 0;
}
