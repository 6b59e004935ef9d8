// What a run costs in memory, computed from the configuration alone, before anything is allocated: the
// hosts check it against the memory they have, and validate() against the engine's own limit.
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "attnviz/engine.hpp"
#include "attnviz/saturating.hpp"
#include "simd/packed.hpp"

namespace attnviz {
namespace {

std::uint64_t u(int x) {
  return x > 0 ? static_cast<std::uint64_t>(x) : 0;
}
std::uint64_t round_up(std::uint64_t n, std::uint64_t nr) {
  return sat_mul((sat_add(n, nr - 1)) / nr, nr);
}

// Floats of one nn.Linear (out, in) with an optional bias, and of its copy in panels nr wide.
std::uint64_t linear_floats(std::uint64_t in, std::uint64_t out, bool bias) {
  return sat_add(sat_mul(out, in), bias ? out : 0);
}
std::uint64_t packed_floats(std::uint64_t in, std::uint64_t out, bool bias, std::uint64_t nr) {
  return sat_add(sat_mul(round_up(out, nr), in), bias ? round_up(out, nr) : 0);
}

}  // namespace

std::uint64_t RunMemory::total() const {
  return sat_add(params, tensors);
}

std::uint64_t parameter_count(const Config& config) {
  const Config c = effective(config);
  const Shape s = shape_of(c);
  if (!s.has_weights) return 0;
  std::uint64_t n = sat_mul(3, linear_floats(u(c.d_in), u(s.width), c.qkv_bias));
  if (s.out_proj) n = sat_add(n, linear_floats(u(c.d_out), u(c.d_out), true));
  return n;
}

RunMemory run_memory(const Config& config, int tokens, const Exec& exec) {
  const Config c = effective(config);
  const Shape s = shape_of(c);
  RunMemory m;

  // build_params: the parameters, what drawing them holds for a moment (the wrapper's per-head modules are
  // stacked into one copy; self_v1 draws and transposes each matrix), then the packed copy. build_params
  // packs for the best ISA and run() repacks for exec's, so the wider panels count.
  const std::uint64_t params = parameter_count(c);
  if (params > 0) {
    const std::uint64_t nr = static_cast<std::uint64_t>(
        std::max(simd::panel_width(resolve(Isa::automatic)), simd::panel_width(resolve(exec.isa))));
    std::uint64_t packed = sat_mul(3, packed_floats(u(c.d_in), u(s.width), c.qkv_bias, nr));
    if (s.out_proj) packed = sat_add(packed, packed_floats(u(c.d_out), u(c.d_out), true, nr));
    const std::uint64_t drawing = c.variant == Variant::wrapper   ? params
                                  : c.variant == Variant::self_v1 ? sat_mul(2, sat_mul(u(c.d_in), u(c.d_out)))
                                                                  : 0;
    m.params = sat_mul(sizeof(float), sat_add(params, std::max(drawing, packed)));
  }
  if (tokens <= 0) return m;

  // forward: the inputs' copy, q, k and v, the (H, T, T) stages, the context and the output.
  const std::uint64_t T = u(tokens), H = u(s.heads), W = u(s.width);
  const std::uint64_t square = sat_mul(H, sat_mul(T, T));
  const bool scalar = resolve(exec.isa) == Isa::scalar;
  std::uint64_t stages = 1;  // the weights
  // The reference computes every stage and end_forward drops those not kept; the fast path allocates only
  // the kept ones (dropped without dropout is a copy of the weights).
  if (scalar || (c.stages & kStageScores)) ++stages;
  if (scalar || (c.stages & kStageScaled)) ++stages;
  if (scalar || (c.stages & kStageDropped)) ++stages;
  std::uint64_t floats = sat_mul(T, u(c.d_in));
  floats = sat_add(floats, sat_mul(3, sat_mul(T, W)));  // q, k, v (copies of the inputs without weights)
  floats = sat_add(floats, sat_mul(stages, square));
  floats = sat_add(floats, sat_mul(T, W));               // context
  floats = sat_add(floats, sat_mul(T, u(s.out_width)));  // output (a copy of the context without out_proj)
  if (!scalar) {
    // The fast kernels' scratch: every head's keys and values in panels, and row buffers per worker.
    const std::uint64_t nr = static_cast<std::uint64_t>(simd::panel_width(resolve(exec.isa)));
    const std::uint64_t hd = u(s.head_dim);
    const std::uint64_t per_head = sat_add(sat_mul(round_up(T, nr), hd), sat_mul(round_up(hd, nr), T));
    const std::uint64_t workers = u(resolve_threads(exec.threads));
    floats = sat_add(floats, sat_add(sat_mul(H, per_head),
                                     sat_mul(workers, sat_mul(2 * simd::kRowBlock, round_up(T, 16)))));
  }
  m.tensors = sat_mul(sizeof(float), floats);
  // The keep mask, one byte per cell (the wrapper draws it head by head: one head's more for a moment).
  if (s.dropout)
    m.tensors = sat_add(m.tensors, sat_add(square, c.variant == Variant::wrapper ? sat_mul(T, T) : 0));
  return m;
}

namespace {

constexpr const char* kUnits[] = {"kB", "MB", "GB"};

// The unit format_bytes writes `bytes` in: -1 for bytes, else an index into kUnits. Chosen on the rounded
// value, so that 999,950 bytes are "1.0 MB" and not "1000.0 kB".
int unit_of(std::uint64_t bytes) {
  if (bytes < 1000) return -1;
  double v = static_cast<double>(bytes) / 1e3;
  int u = 0;
  while (v >= 999.95 && u + 1 < 3) v /= 1e3, ++u;
  return u;
}

std::string in_unit(std::uint64_t bytes, int unit, int decimals) {
  if (unit < 0) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  double scale = 1e3;
  for (int i = 0; i < unit; ++i) scale *= 1e3;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, static_cast<double>(bytes) / scale, kUnits[unit]);
  return buf;
}

}  // namespace

std::string format_bytes(std::uint64_t bytes) {
  return in_unit(bytes, unit_of(bytes), 1);
}

BytesApart format_bytes_apart(std::uint64_t first, std::uint64_t second) {
  BytesApart out{format_bytes(first), format_bytes(second)};
  if (first == second || out.first != out.second) return out;
  // The same text for different sizes: the same unit (the rounded values agree), with digits added until
  // they differ. 3 decimals in kB, 6 in MB and 9 in GB are the exact count of bytes, which always differs;
  // a double holds every count below 2^53 exactly, and past it the bytes are written as an integer.
  const int unit = unit_of(std::max(first, second));
  const bool exact_in_double = std::max(first, second) < (std::uint64_t{1} << 53);
  for (int decimals = 2; exact_in_double && decimals <= 3 * (unit + 1); ++decimals) {
    out = {in_unit(first, unit, decimals), in_unit(second, unit, decimals)};
    if (out.first != out.second) return out;
  }
  return {in_unit(first, -1, 0), in_unit(second, -1, 0)};
}

}  // namespace attnviz
