// attnviz-layer-bench: the benchmark layer (layer_timing.hpp) on one thread, timed with every kernel set the
// build has, printed as one JSON object. The same file is built natively and to WebAssembly twice, with
// SIMD128 and without (web/bench/bench.mjs runs those in headless Chromium), so all three time the same code.
//
//   attnviz-layer-bench [PRESET [T [BUDGET_SECONDS]]]     (default: gpt2-small 128 1.0)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "attnviz/engine.hpp"
#include "layer_timing.hpp"

#ifdef __EMSCRIPTEN__
#include <emscripten/emscripten.h>
#endif

namespace {

using namespace attnviz;
using namespace attnviz::bench;

const char* build_name() {
#ifdef __EMSCRIPTEN__
  return available_isas().front() == Isa::simd128 ? "wasm-simd128" : "wasm-no-simd";
#else
  return "native";
#endif
}

std::string run(const std::string& preset_name, int T, double budget) {
  const Preset* preset = find_preset(preset_name);
  if (!preset || T < 1 || T > preset->context_length || budget <= 0)
    return "{\"error\": \"bad preset, length or budget\"}";
  const Config c = layer_config(*preset);
  const Input in = random_input(T, c.d_in);
  TorchGenerator g(c.seed);
  Params p;
  must(build_params(c, g, p), "drawing the parameters");
  Result ref;
  TorchGenerator g0(0);
  must(forward(c, p, in, g0, ref, Exec{Isa::scalar, 1}), "the reference forward pass");

  std::string json = "{\"build\": \"" + std::string(build_name()) + "\", \"preset\": \"" + preset_name +
                     "\", \"T\": " + std::to_string(T) +
                     ", \"gflop\": " + std::to_string(layer_flops(c, T) / 1e9) + ", \"kernels\": [";
  bool first = true;
  for (Isa isa : available_isas()) {
    const Exec exec{isa, 1};
    pack(p, exec);
    Result r;
    const double s = median_seconds(
        [&] {
          TorchGenerator gg(0);
          must(forward(c, p, in, gg, r, exec), "the timed forward pass");
        },
        budget, 3);
    char row[160];
    std::snprintf(row, sizeof row, "%s{\"isa\": \"%s\", \"ms\": %.4f, \"max_rel_error\": %.3g}",
                  first ? "" : ", ", to_string(isa), s * 1e3, max_rel_error(r.output, ref.output));
    json += row;
    first = false;
  }
  return json + "]}";
}

}  // namespace

#ifdef __EMSCRIPTEN__
extern "C" EMSCRIPTEN_KEEPALIVE const char* attnviz_layer_bench(const char* preset, int T, double budget) {
  static std::string out;
  out = run(preset, T, budget);
  return out.c_str();
}
#endif

int main(int argc, char** argv) {
#ifdef __EMSCRIPTEN__
  (void)argc, (void)argv;  // the page calls attnviz_layer_bench
#else
  const std::string preset = argc > 1 ? argv[1] : "gpt2-small";
  const int T = argc > 2 ? std::atoi(argv[2]) : 128;
  const double budget = argc > 3 ? std::atof(argv[3]) : 1.0;
  const std::string json = run(preset, T, budget);
  std::printf("%s\n", json.c_str());
  if (json.find("\"error\"") != std::string::npos) return 1;
#endif
  return 0;
}
