// The attention engine's entry points: parameters drawn like PyTorch, one forward pass that keeps every
// intermediate tensor of every head, and a one-call `run` for the common case.
//
// A forward pass takes its parameters as a value, not from the seed, so a later multi-layer model (GPT-2 with
// loaded weights) is a list of Params and a layer index picks which one to run: nothing here assumes the
// parameters were drawn by build_params.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <memory>

#include "attnviz/config.hpp"
#include "attnviz/exec.hpp"
#include "attnviz/status.hpp"
#include "attnviz/tensor.hpp"
#include "attnviz/text.hpp"
#include "attnviz/torch_rng.hpp"

namespace attnviz {

// A layer's parameters in the engine's own layout: every projection as nn.Linear (out, in). The per-head
// modules of `wrapper` are stacked along `out` (head h owns rows [h*hd, (h+1)*hd)), which is exactly the head
// split `mha` uses, so one forward pass serves every variant. state_dict() gives PyTorch's names and layouts.
struct PackedWeights;  // the projections laid out in panels for one ISA's fast kernels (engine-internal)

struct Params {
  Linear query, key, value;  // (width, d_in); all empty for `simplified`
  Linear out_proj;           // (d_out, d_out) with bias, `mha` only
  // Filled by pack(); forward() packs on the fly (slower) when it is missing or made for another ISA.
  // Call pack() again after changing the weights.
  std::shared_ptr<const PackedWeights> packed;
};

// Draws the parameters in the book's construction order from `g` (call after g.manual_seed(seed)), and packs
// them for the best ISA.
Status build_params(const Config& c, TorchGenerator& g, Params& out);

// Lays the weights out for the fast kernels of exec's ISA (a no-op for the scalar reference).
void pack(Params& p, const Exec& exec = {});

// The fast path keeps the storage of the results that forward() replaces, so that the next run (a
// keystroke's) allocates nothing. This frees what the calling thread keeps: for a host whose memory is
// counted (the page, before it refuses a view that does not fit).
void release_recycled();

// One named parameter as PyTorch's state_dict() holds it.
struct NamedTensor {
  std::string name;  // e.g. "W_query.weight", "heads.1.W_key.bias", "W_value" (self_v1)
  Tensor value;  // PyTorch's layout: Linear weights (out, in), self_v1 matrices (d_in, d_out), biases rank 1
};
std::vector<NamedTensor> state_dict(const Config& c, const Params& p);

struct Result {
  Config config;  // the effective configuration that produced this result
  Shape shape;
  std::vector<std::string> tokens;
  Tensor inputs;   // (T, d_in)
  Tensor q, k, v;  // (T, width) projections; head h is columns [h*hd, (h+1)*hd). `simplified`: the inputs
  // The per-head squares, row-padded (HeadSquares: read row(h, i) or at(h, i, j)):
  HeadSquares scores;   // (H, T, T) raw q k^T, no mask, no scale               [kStageScores]
  HeadSquares scaled;   // (H, T, T) scores * scale, masked cells -inf         [kStageScaled]
  HeadSquares weights;  // (H, T, T) softmax; masked cells exactly 0           [always]
  HeadSquares dropped;  // (H, T, T) after dropout (= weights when none drawn) [kStageDropped]
  std::vector<std::uint8_t>
      keep;               // dense (H, T, T) dropout keep mask, 1 = kept; empty when no dropout was drawn
  Tensor context;         // (T, width) merged heads, before out_proj
  Tensor output;          // (T, out_width) what the PyTorch module returns
  double seconds = 0.0;   // wall time of the forward pass
  Isa isa = Isa::scalar;  // the kernels that computed it
  int threads = 1;
  std::string backend;  // who computed it when not this engine's kernels (e.g. "webgpu"); empty for `isa`

  int tokens_count() const { return static_cast<int>(tokens.size()); }
  bool masked(int row, int col) const {
    return shape.causal && (col > row || (shape.window > 0 && col <= row - shape.window));
  }
};

// One forward pass of the configured variant on `in` with parameters `p`. Dropout masks are drawn from `g`
// (PyTorch draws them at forward time, after construction). The attention weights, context and output are
// always filled; the other stages only when `c.stages` asks for them. On failure `out` is left unchanged.
Status forward(const Config& c, const Params& p, const Input& in, TorchGenerator& g, Result& out,
               const Exec& exec = {});

// The floating-point operations of one forward pass over `tokens` tokens (2 per multiply-add: projections,
// scores, context, out_proj), the measure of its size. Only meaningful for a configuration validate()
// accepts.
double forward_flops(const Config& c, int tokens);

// The memory one run (build_params, pack, forward) of `c` over `tokens` tokens holds at its peak, in bytes,
// known before anything is allocated. `params`: the parameters, what drawing them holds for a moment and
// their packed copy. `tensors`: what forward() allocates for exec's ISA and threads: the inputs' copy, q, k,
// v, the weights and every stage c.stages keeps, the dropout mask, the context, the output and the kernels'
// scratch (0 when tokens <= 0). The arithmetic saturates at UINT64_MAX instead of wrapping, for any
// tokens and any sizes whose shape_of fits an int (validate() uses this for its own limit).
struct RunMemory {
  std::uint64_t params = 0, tensors = 0;
  std::uint64_t total() const;  // saturating
};
RunMemory run_memory(const Config& c, int tokens, const Exec& exec = {});

// The parameters of `c` (floats), as state_dict() lists them.
std::uint64_t parameter_count(const Config& c);

// "6.2 GB", "310.4 MB", "13.3 kB", "12 bytes", "1 byte" (decimal units): how every message writes sizes.
// The unit is chosen after rounding (999,999 bytes are "1.0 MB", never "1000.0 kB"), and no size other than
// 0 reads as 0 (the smallest shown in kB is 1.0 kB).
std::string format_bytes(std::uint64_t bytes);

// Two sizes one message compares ("X, more than the Y limit"): each as format_bytes writes it, with more
// digits (up to the exact count of bytes) where two different sizes would otherwise read the same
// ("1,000,100 bytes, more than the 1.0 MB limit" read "1.0 MB, more than the 1.0 MB limit").
struct BytesApart {
  std::string first, second;
};
BytesApart format_bytes_apart(std::uint64_t first, std::uint64_t second);

// A forward pass computed somewhere else (the browser page's WebGPU), in the same Result. begin_forward does
// what forward() does before the arithmetic: it checks the configuration and the input, fills config, shape,
// tokens and inputs, and draws the dropout mask from `g` (so the generator advances exactly as forward()
// leaves it). The backend then fills q, k, v (when shape.has_weights), weights, context, output (when
// shape.out_proj), and scores, scaled, dropped as c.stages asks (dropped only when shape.dropout).
// end_forward completes the rest (q = k = v = inputs without weights, output = context without out_proj,
// dropped = weights without dropout) and checks the numbers as forward() does.
Status begin_forward(const Config& c, const Params& p, const Input& in, TorchGenerator& g, Result& r);
Status end_forward(Result& r);

// The usual call: seeds a generator with c.seed, builds the parameters, runs forward. `params_out` (optional)
// receives the parameters.
Status run(const Config& c, const Input& in, Result& out, Params* params_out = nullptr,
           const Exec& exec = {});

// Text in, result out: tokenizes, embeds and runs.
Status run_text(const Config& c, std::string_view text, Result& out, Params* params_out = nullptr,
                const Exec& exec = {});

}  // namespace attnviz
