// The fast (SIMD, threaded) forward pass behind forward(). Engine-internal.
#pragma once

#include "attnviz/engine.hpp"

namespace attnviz {

// Fills r.q/k/v, the kept stages, weights, context and output. Expects r.shape, r.keep (when dropout applies)
// and a validated configuration; `isa` is available and not scalar.
// Hands an old result's storage to the fast path for reuse (call once the result is no longer needed).
void recycle(Result& old);

void forward_fast(const Config& c, const Params& p, const Input& in, Isa isa, int threads, Result& r);

}  // namespace attnviz
