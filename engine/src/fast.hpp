// The fast (SIMD, threaded) forward pass behind forward(). Engine-internal.
#pragma once

#include "attnviz/engine.hpp"

namespace attnviz {

// Hands an old result's storage to the fast path for reuse (call once the result is no longer needed).
void recycle(Result& old);

// No infinity or NaN in [begin, end): an exponent test on the bits, which compilers vectorize (a layer's
// weights at T = 1024 are 12 million floats, a model's logits of every position 50 million).
bool all_finite(const float* begin, const float* end);

// Every number a result keeps must be finite: a NaN shows nothing, and JSON has no infinities. check_finite
// fails on the first stage of r that is not (q, k, v, raw scores, weights, dropped, context, output, in that
// order) with not_finite's line, the one every path gives: the layer's, a whole model's on every ISA, and
// results computed elsewhere (WebGPU).
Status not_finite(const char* stage);
Status check_finite(const Result& r);

// Fills r.q/k/v, the kept stages, weights, context and output. Expects r.shape, r.keep (when dropout applies)
// and a validated configuration; `isa` is available and not scalar.
void forward_fast(const Config& c, const Params& p, const Input& in, Isa isa, int threads, Result& r);

}  // namespace attnviz
