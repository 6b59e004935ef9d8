// attnviz-rng-bench: what a seeded GPT-2 small initialization costs in random draws (one thread), each fast
// path timed and then checked bit for bit against straightforward code.
//
//   attnviz-rng-bench
//   node --no-experimental-fetch build/wasm-release/bench/attnviz-rng-bench.js   (the SIMD128 kernels)
//
// Prints milliseconds for: 163M uniform floats (tensor.uniform_, the Linear layers' kaiming bound), 39.4M
// normal floats (normal_(0, 1) over gpt2-small's two embedding tables), and the whole draw sequence of
// `torch.manual_seed(123); GPTModel(GPT_CONFIG_124M)` (book chapter 4), allocation included, with its hash
// checked against PyTorch's (bench/torch_gpt2_init.py). Exits 1 if any result differs from its reference.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "attnviz/torch_rng.hpp"
#if defined(__EMSCRIPTEN__)
#include <emscripten.h>

// clang-format off
EM_JS(double, node_cpu_ms, (), {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
});
// clang-format on
#endif

namespace {

using namespace attnviz;
// This thread's CPU time (user + system, page faults included); WebAssembly has no CPU clock, so there it is
// node's process CPU time (its compiler and garbage collector threads included).
double cpu_ms() {
#if defined(__EMSCRIPTEN__)
  return node_cpu_ms();
#else
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
#endif
}

// Wall-clock and CPU time: on a shared machine the CPU time is the figure that does not depend on what else
// runs.
struct Stopwatch {
  using Clock = std::chrono::steady_clock;
  Clock::time_point wall0 = Clock::now();
  double cpu0 = cpu_ms();

  double wall() const { return std::chrono::duration<double, std::milli>(Clock::now() - wall0).count(); }
  double cpu() const { return cpu_ms() - cpu0; }
};

struct Timing {
  double wall = 0, cpu = 0;
  explicit Timing(const Stopwatch& s) : wall(s.wall()), cpu(s.cpu()) {}
};

void print_timing(const char* what, const Timing& t) {
  std::printf("  %-58s %7.0f ms (cpu %7.0f ms)\n", what, t.wall, t.cpu);
}

bool same_bits(const float* a, const float* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// sum of bits(x[i]) * (2 i + 1) mod 2^64, i counted from `start` (the fixture's hash, over a sequence of
// tensors).
std::uint64_t weighted_bit_sum(const float* x, std::size_t n, std::size_t start) {
  std::uint64_t h = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, x + i, sizeof u);
    h += u * (2 * static_cast<std::uint64_t>(start + i) + 1);
  }
  return h;
}

constexpr std::size_t kUniforms = 163000000;
constexpr std::size_t kVocab = 50257, kContext = 1024, kEmb = 768, kLayers = 12;

// The straightforward uniform_: std::mt19937, one draw and one fmaf per element.
void uniform_reference(std::mt19937& mt, float* out, std::size_t n, float from, float to) {
  const float range = to - from;
  for (std::size_t i = 0; i < n; ++i)
    out[i] = std::fma(static_cast<float>(mt() & 0xFFFFFFu) * 0x1p-24f, range, from);
}

float kaiming_bound(int fan_in) {  // as torch_linear: sqrt(3) * gain / sqrt(fan_in), gain = sqrt(2 / (1 + 5))
  return static_cast<float>(std::sqrt(3.0) * (std::sqrt(2.0 / 6.0) / std::sqrt(static_cast<double>(fan_in))));
}

// GPTModel(GPT_CONFIG_124M)'s parameters in construction order: tok_emb, pos_emb, then per block W_query,
// W_key, W_value (no bias), out_proj, ff Linear(768, 3072), Linear(3072, 768); then out_head (no bias).
// `fast`: torch_normal_ and torch_linear as the engine runs them; otherwise the scalar kernels, with the
// Linear layers drawn through torch_uniform_ directly.
std::vector<std::vector<float>> gpt2_init(bool fast) {
  TorchGenerator g(123);
  const Isa isa = fast ? Isa::automatic : Isa::scalar;
  std::vector<std::vector<float>> params;
  auto embedding = [&](std::size_t rows) {
    std::vector<float> w(rows * kEmb);
    torch_normal_(g, w.data(), w.size(), 0.0, 1.0, isa);
    params.push_back(std::move(w));
  };
  auto linear = [&](int in, int out, bool bias) {
    if (fast) {
      Linear l = torch_linear(g, in, out, bias);
      params.push_back(std::move(l.weight.data));
      if (bias) params.push_back(std::move(l.bias.data));
      return;
    }
    std::vector<float> w(static_cast<std::size_t>(in) * static_cast<std::size_t>(out));
    const float bound = kaiming_bound(in), b = static_cast<float>(1.0 / std::sqrt(static_cast<double>(in)));
    torch_uniform_(g, w.data(), w.size(), -bound, bound, isa);
    params.push_back(std::move(w));
    if (!bias) return;
    std::vector<float> bv(static_cast<std::size_t>(out));
    torch_uniform_(g, bv.data(), bv.size(), -b, b, isa);
    params.push_back(std::move(bv));
  };
  embedding(kVocab);
  embedding(kContext);
  const int d = static_cast<int>(kEmb);
  for (std::size_t layer = 0; layer < kLayers; ++layer) {
    for (int i = 0; i < 3; ++i) linear(d, d, false);
    linear(d, d, true);
    linear(d, 4 * d, true);
    linear(4 * d, d, true);
  }
  linear(d, static_cast<int>(kVocab), false);
  return params;
}

std::uint64_t hash_all(const std::vector<std::vector<float>>& params, std::size_t* floats) {
  std::uint64_t h = 0;
  std::size_t at = 0;
  for (const std::vector<float>& p : params) {
    h += weighted_bit_sum(p.data(), p.size(), at);
    at += p.size();
  }
  *floats = at;
  return h;
}

}  // namespace

int main() {
  bool ok = true;
  auto report = [&ok](const char* what, bool match) {
    std::printf("  %s: %s\n", what, match ? "identical" : "DIFFERENT");
    ok = ok && match;
  };
  std::printf("attnviz-rng-bench (one thread, ISA %s)\n", to_string(resolve(Isa::automatic)));

  // 1. Uniform floats, 163M: the straightforward loop against the bulk Mersenne Twister + vector fma.
  {
    const float bound = kaiming_bound(768);
    std::unique_ptr<float[]> ref(new float[kUniforms]), fast(new float[kUniforms]),
        scalar(new float[kUniforms]);
    for (float* p : {ref.get(), fast.get(), scalar.get()})
      std::memset(p, 0, kUniforms * sizeof(float));  // page faults outside the timings
    std::printf("uniform_(-b, b) of %zu floats:\n", kUniforms);
    std::mt19937 mt(123);
    Stopwatch s;
    uniform_reference(mt, ref.get(), kUniforms, -bound, bound);
    print_timing("std::mt19937 + fmaf per element (straightforward)", Timing(s));
    TorchGenerator g(123), gs(123);
    s = Stopwatch();
    torch_uniform_(g, fast.get(), kUniforms, -bound, bound);
    print_timing("torch_uniform_", Timing(s));
    s = Stopwatch();
    torch_uniform_(gs, scalar.get(), kUniforms, -bound, bound, Isa::scalar);
    print_timing("torch_uniform_, scalar kernels", Timing(s));
    report("torch_uniform_ vs straightforward", same_bits(ref.get(), fast.get(), kUniforms));
    report("scalar kernels vs straightforward", same_bits(ref.get(), scalar.get(), kUniforms));
  }

  // 2. Normal floats: gpt2-small's wte and wpe, normal_(0, 1) each, vector kernels against the scalar ones.
  {
    const std::size_t n1 = kVocab * kEmb, n2 = kContext * kEmb, n = n1 + n2;
    std::unique_ptr<float[]> ref(new float[n]), fast(new float[n]);
    std::memset(ref.get(), 0, n * sizeof(float));
    std::memset(fast.get(), 0, n * sizeof(float));
    std::printf("normal_(0, 1) of %zu floats (wte, wpe):\n", n);
    TorchGenerator gr(123), gf(123);
    Stopwatch s;
    torch_normal_(gr, ref.get(), n1, 0.0, 1.0, Isa::scalar);
    torch_normal_(gr, ref.get() + n1, n2, 0.0, 1.0, Isa::scalar);
    print_timing("torch_normal_, scalar kernels", Timing(s));
    s = Stopwatch();
    torch_normal_(gf, fast.get(), n1, 0.0, 1.0);
    torch_normal_(gf, fast.get() + n1, n2, 0.0, 1.0);
    print_timing("torch_normal_", Timing(s));
    report("torch_normal_ vs scalar kernels", same_bits(ref.get(), fast.get(), n));
  }

  // 3. The whole seeded GPT-2 small initialization, allocation included (hashing is not timed).
  {
    std::size_t floats = 0, floats_ref = 0;
    std::uint64_t h = 0;
    std::printf("torch.manual_seed(123); GPTModel(GPT_CONFIG_124M), every parameter:\n");
    for (int run = 0; run < 3; ++run) {
      const Stopwatch s;
      const std::vector<std::vector<float>> params = gpt2_init(true);
      print_timing("torch_normal_ + torch_linear, allocation included", Timing(s));
      h = hash_all(params, &floats);
    }
    const Stopwatch s;
    const std::uint64_t h_ref = hash_all(gpt2_init(false), &floats_ref);
    print_timing("scalar kernels (and hashing)", Timing(s));
    std::printf("  %zu floats, hash %016llx\n", floats, static_cast<unsigned long long>(h));
    report("fast vs scalar kernels", h == h_ref && floats == floats_ref);
    // What bench/torch_gpt2_init.py prints for PyTorch 1.13's own GPTModel(GPT_CONFIG_124M).
    report("PyTorch's hash (bench/torch_gpt2_init.py)", h == 0xe8d55d8e4ba62a25u && floats == 162971136u);
  }
  return ok ? 0 : 1;
}
