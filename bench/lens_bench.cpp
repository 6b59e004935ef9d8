// attnviz-lens-bench: what the causal lens (attnviz/lens.hpp, issue 42) adds to the model view's work. On
// gpt2-small (seeded, eval) and, with --llama DIR, a model folder (bench/torch_decoder_peer.py --shape
// smollm2-135m --write: SmolLM2-135M's shape, random weights), each the median of runs:
// - a keystroke at T = 64 (one token appended, every layer's weights kept), each kind in a view of its own:
//   the pass alone, and CausalLens::run with nothing asked (the capture), with attribution (each head's
//   output at the last position computed in the pass), with the lens and with both; then attribution alone
//   from those outputs and at an earlier position (the heads' outputs computed again), the logit lens of the
//   new position (what a keystroke adds to the previous keystroke's lens, computed alone) and of every
//   position;
// - one head ablated in layer 0, L/2 and L-1: the ablated pass (from that layer on, as CausalLens runs it)
//   against a full pass over the same text;
// - gpt2-small at T = 20: the whole activation-patching maps (PatchJob), the residual stream's and the
// heads'. Prints figures and asserts nothing about time. --peer then runs bench/torch_lens_peer.py (PyTorch
// doing the head sweep with forward hooks, and the lens) in the same invocation, with Debian's OpenBLAS
// defaults.
//
//   attnviz-lens-bench [--quick] [--threads N] [--llama DIR] [--peer]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "attnviz/gpt.hpp"
#include "attnviz/io/gpt_file.hpp"
#include "attnviz/lens.hpp"
#include "layer_timing.hpp"

using namespace attnviz;
using namespace attnviz::bench;

namespace {

void check(const Status& st) {
  if (!st.is_ok()) {
    std::fprintf(stderr, "attnviz-lens-bench: %s\n", st.error.c_str());
    std::exit(1);
  }
}

double ms(const std::vector<double>& seconds) {
  return median(seconds) * 1e3;
}

// The keystroke at T = 64. Each kind of keystroke has a view of its own (its CausalLens and its pass), as a
// host keeps one view while typing with the same request; the kinds take turns within each repetition, in an
// order that rotates, so that a slower spell of the shared machine falls on all of them alike. (One lens
// shared by every kind, as before, timed each kind after the others' passes and a lens of every position had
// churned the memory: its "lens" keystroke read +77% where a view of its own reads +11%.)
void keystroke_section(GptModel& model, int reps) {
  const GptConfig& c = model.weights().config;
  const Exec& exec = model.options().exec;
  const int T = 64;
  const std::vector<int> ids = token_ids(T, c.vocab_size), prefix(ids.begin(), ids.end() - 1);
  const GptRequest every;  // every layer's weights kept: the model view's grid
  // the kinds: the pass alone, then CausalLens::run with nothing asked (the pass capturing its named points),
  // attribution (with each head's output at the position), the lens, both
  constexpr int kKinds = 5;
  LensRequest requests[kKinds];
  requests[2].attribute = true;
  requests[3].lens = true;
  requests[4].attribute = requests[4].lens = true;
  CausalLens views[kKinds];
  GptResult passes[kKinds];
  LensResult out;
  std::vector<double> times[kKinds];
  // Each timed keystroke follows the same two steps: the prefix (a full pass where the previous step was
  // another kind of pass), then the prefix again (incremental), so every timed pass extends an incremental
  // one.
  const auto keystroke = [&](int kind) {
    GptResult& r = passes[kind];
    double t0 = 0.0;
    if (kind == 0) {
      check(model.forward(prefix, every, r));
      check(model.forward(prefix, every, r));
      t0 = now();
      check(model.forward(ids, every, r));
    } else {
      CausalLens& lens = views[kind];
      check(lens.run(model, prefix, every, requests[kind], r, out));
      check(lens.run(model, prefix, every, requests[kind], r, out));
      t0 = now();
      check(lens.run(model, ids, every, requests[kind], r, out));
    }
    times[kind].push_back(now() - t0);
    if (r.reused != T - 1) std::abort();
  };
  for (int rep = 0; rep < reps; ++rep)
    for (int i = 0; i < kKinds; ++i) keystroke((i + rep) % kKinds);

  // The parts alone, on the last keystroke's view with lens and attribution.
  const CausalLens& lens = views[4];
  const GptResult& r = passes[4];
  check(views[4].run(model, ids, every, requests[4], passes[4], out));
  std::vector<LensPoint> points;
  std::vector<double> attribution, elsewhere, lens_new, lens_all;
  LensTarget earlier = out.target;
  earlier.position = T - 2;
  const std::vector<float> earlier_logits = logits_at(model.weights(), exec, lens.probe(), T - 2);
  for (int rep = 0; rep < reps; ++rep) {
    double t = now();
    const Attribution a = attribute(model.weights(), exec, lens.probe(), out.target, r.logits.ptr());
    attribution.push_back(now() - t);
    if (!(a.value == a.value)) std::abort();
    t = now();
    const Attribution b = attribute(model.weights(), exec, lens.probe(), earlier, earlier_logits.data());
    elsewhere.push_back(now() - t);
    if (!(b.value == b.value)) std::abort();
    t = now();
    logit_lens(model.weights(), exec, lens.probe(), requests[4].top_k, -1, points, T - 1);
    lens_new.push_back(now() - t);
    t = now();
    logit_lens(model.weights(), exec, lens.probe(), requests[4].top_k, -1, points, 0);
    lens_all.push_back(now() - t);
    if (points.size() != static_cast<std::size_t>(c.n_layers + 1)) std::abort();
  }
  const double base = ms(times[0]);
  const auto over = [&](int kind) { return 100.0 * (ms(times[kind]) - base) / base; };
  std::printf(
      "one keystroke at T = %d (a token appended, every layer's weights kept), median of %d, each kind its "
      "own "
      "view, ms\n",
      T, reps);
  std::printf("  the pass alone                                   %8.2f\n", base);
  std::printf("  CausalLens::run, nothing asked (the capture)     %8.2f  (%+.1f%%)\n", ms(times[1]), over(1));
  std::printf(
      "  CausalLens::run, attribution                     %8.2f  (%+.1f%%: its heads' outputs in the pass; "
      "its target, the top next token, changed)\n",
      ms(times[2]), over(2));
  std::printf(
      "  CausalLens::run, the lens                        %8.2f  (%+.1f%%: its rows in the pass's head "
      "product)\n",
      ms(times[3]), over(3));
  std::printf(
      "  CausalLens::run, lens and attribution            %8.2f  (%+.1f%%, target <= +15%%: as a host calls "
      "it)\n",
      ms(times[4]), over(4));
  std::printf("  attribution alone, from the pass's heads         %8.2f\n", ms(attribution));
  std::printf("  attribution at an earlier position (heads again) %8.2f\n", ms(elsewhere));
  std::printf("  the lens of the new position (%d points), alone   %8.2f\n", c.n_layers + 1, ms(lens_new));
  std::printf("  the lens of every position (%d x %d rows)       %8.2f\n", c.n_layers + 1, T, ms(lens_all));
}

// One head ablated in layer l: the pass CausalLens runs from l on (capturing, from the clean residual
// entering l) against a full pass over the same text, each keeping every layer's weights.
void ablation_section(GptModel& model, int reps) {
  const GptConfig& c = model.weights().config;
  const Exec& exec = model.options().exec;
  const int T = 64, L = c.n_layers;
  const std::vector<int> ids = token_ids(T, c.vocab_size);
  const GptRequest every;
  GptModel runner = model.fork(), full_runner = model.fork();
  PassProbe clean;
  clean.capture = true;
  GptResult r;
  check(runner.forward(ids, every, clean, r));
  LensTarget target;
  target.position = T - 1;
  target.target = r.next.empty() ? 0 : r.next.front().id;
  std::printf(
      "one head ablated (head 0, zero) at T = %d: the pass from its layer on vs a full pass, median of "
      "%d, ms\n",
      T, reps);
  std::printf("  %5s %8s %8s %8s %9s %8s %8s %8s\n", "layer", "lend", "ablated", "logits", "full pass",
              "ratio", "target", "+ lens");
  std::vector<float> row(static_cast<std::size_t>(c.vocab_size));
  for (const int l : {0, L / 2, L - 1}) {
    Ablation ablation;
    ablation.heads = {{l, 0}};
    PassProbe ablated;
    ablated.capture = true;
    ablated.start_layer = l;
    ablated.start = &clean.resid[static_cast<std::size_t>(l)];
    ablated.edit_context = ablation_edit(c, ablation);
    ablated.edits = ablation_layers(ablation);
    std::vector<double> copy, side, logits, full, extra;
    std::vector<LensPoint> points;
    for (int rep = 0; rep < reps; ++rep) {
      // As CausalLens::run: the points before l are the clean pass's, lent (swapped, and back after); the
      // rest is computed again.
      const auto lend = [&]() {
        for (auto member :
             {&PassProbe::resid, &PassProbe::context, &PassProbe::attn_out, &PassProbe::mlp_out}) {
          (ablated.*member).resize((clean.*member).size());
          for (int k = 0; k < l; ++k)
            std::swap((ablated.*member)[static_cast<std::size_t>(k)],
                      (clean.*member)[static_cast<std::size_t>(k)]);
        }
      };
      double t = now();
      lend();
      copy.push_back(now() - t);
      t = now();
      check(runner.forward(ids, every, ablated, r));
      side.push_back(now() - t);
      // Its logits row alone: the final norm and the head over the last position, the lens's last point.
      t = now();
      final_logits(model.weights(), exec,
                   ablated.resid.back().ptr() + static_cast<std::size_t>(T - 1) * c.d_model, 1, row.data());
      logits.push_back(now() - t);
      t = now();
      logit_lens(model.weights(), exec, ablated, 5, -1, points, 0, r.logits.ptr(), T - 1);
      const Attribution a = attribute(model.weights(), exec, ablated, target, r.logits.ptr());
      extra.push_back(now() - t);
      if (!(a.value == a.value)) std::abort();
      lend();  // back
      full_runner
          .forget();  // its own model: the ablated runner keeps its side passes' storage, as a view does
      t = now();
      check(full_runner.forward(ids, every, r));
      full.push_back(now() - t);
      if (r.reused != 0) std::abort();
    }
    // The ratio leaves the logits row out of both passes: the target allows the lens beside the pass, and the
    // logits at the position are the lens's last point.
    std::printf("  %5d %8.2f %8.2f %8.2f %9.2f %8.2f %8.2f %8.1f\n", l, ms(copy), ms(side), ms(logits),
                ms(full), (ms(copy) + ms(side) - ms(logits)) / (ms(full) - ms(logits)),
                static_cast<double>(L - l) / L, ms(extra));
  }
  std::printf(
      "  (ratio: (lend + ablated - logits) / (full pass - logits), the logits row out of both; + lens: the\n"
      "  lens of every position, which an ablation changes, and attribution)\n");
}

// The whole activation-patching maps at T = 20: the clean and corrupted runs (its first two steps), then
// every patched run of the residual stream's map and of the heads'. The corrupted text differs from the clean
// one in two tokens.
void patching_section(const GptModel& model, int reps) {
  const GptConfig& c = model.weights().config;
  const int T = 20, L = c.n_layers, H = c.n_heads;
  const std::vector<int> clean = token_ids(T, c.vocab_size);
  std::vector<int> corrupted = clean;
  corrupted[4] = (corrupted[4] + 1) % c.vocab_size;
  corrupted[11] = (corrupted[11] + 7) % c.vocab_size;
  GptModel runner = model.fork();
  GptResult r;
  check(runner.forward(clean, GptRequest(), r));
  LensTarget target;
  target.target = r.next.empty() ? 0 : r.next.front().id;
  std::vector<double> begin, residual, heads, whole;
  for (int rep = 0; rep < reps; ++rep) {
    PatchJob job;
    double t = now();
    check(job.begin(model, clean, corrupted, target, Ablation()));
    check(job.step(2));  // the clean and the corrupted runs
    if (job.done() != 0) std::abort();
    begin.push_back(now() - t);
    t = now();
    check(job.step(L * T));
    residual.push_back(now() - t);
    t = now();
    check(job.step(L * H));
    heads.push_back(now() - t);
    if (!job.finished()) std::abort();
    Patching p;
    t = now();
    check(patch(model, clean, corrupted, target, Ablation(), p));
    whole.push_back(now() - t);
  }
  std::printf(
      "activation patching at T = %d (two tokens corrupted; the top next token's logit), median of %d, "
      "ms\n",
      T, reps);
  std::printf("  the clean and the corrupted runs (the first two)  %8.1f\n", ms(begin));
  std::printf("  the residual stream's map, %d x %d entries      %8.1f\n", L, T, ms(residual));
  std::printf("  the heads' map, %d x %d entries (%d runs)       %8.1f  (with the first two: %.1f)\n", L, H,
              L * H, ms(heads), ms(begin) + ms(heads));
  std::printf("  both maps, patch()                               %8.1f\n", ms(whole));
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, peer = false;
  int threads = 2;
  std::string llama;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--peer")) {
      peer = true;
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--llama") && i + 1 < argc) {
      llama = argv[++i];
    } else {
      std::fprintf(stderr, "usage: attnviz-lens-bench [--quick] [--threads N] [--llama DIR] [--peer]\n");
      return 2;
    }
  }
  const Isa isa = resolve(Isa::automatic);
  threads = resolve_threads(threads);
  const int reps = quick ? 3 : 9;
  GptOptions options;
  options.train = false;
  options.exec = {isa, threads};
  std::printf("%s kernels, %d threads\n", to_string(isa), threads);

  GptModel gpt2;
  check(seeded_gpt(*find_gpt_preset("gpt2-small"), 123, options, gpt2));
  std::printf("\n== gpt2-small (seeded, eval)\n");
  keystroke_section(gpt2, reps);
  ablation_section(gpt2, reps);
  patching_section(gpt2, quick ? 1 : 3);

  if (!llama.empty()) {
    GptLoadOptions lo;
    lo.isa = isa;
    auto w = std::make_shared<GptWeights>();
    check(load_gpt(llama, lo, *w));
    const GptConfig& c = w->config;
    std::printf(
        "\n== %s: %s, %d layers, %d query heads on %d key/value heads, d %d, vocabulary %d, matrices %s\n",
        llama.c_str(), c.arch.name.c_str(), c.n_layers, c.n_heads, c.kv_heads(), c.d_model, c.vocab_size,
        to_string(w->tok_emb.dtype));
    GptModel model(w, TorchGenerator(0), options);
    keystroke_section(model, reps);
    ablation_section(model, reps);
  }

  if (peer) {
    std::fflush(stdout);
    const std::string command = std::string("/usr/bin/python3 ") + ATTNVIZ_SOURCE_DIR +
                                "/bench/torch_lens_peer.py --threads " + std::to_string(threads) +
                                (quick ? " --quick" : "");
    std::printf("\n== PyTorch: %s\n", command.c_str());
    std::fflush(stdout);
    return std::system(command.c_str()) == 0 ? 0 : 1;
  }
  return 0;
}
