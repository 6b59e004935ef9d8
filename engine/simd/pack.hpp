// Panel layouts for the GEMM micro-kernel: B (K x N) is cut into panels of `nr` columns, each stored k-major
// ([k][nr], zero-padded past N), so the kernel streams one panel with aligned loads. Scalar code, shared by
// every ISA.
#pragma once

#include <cstddef>

namespace attnviz::simd {

inline int panels(int n, int nr) {
  return (n + nr - 1) / nr;
}
inline std::size_t panel_floats(int n, int k, int nr) {
  return static_cast<std::size_t>(panels(n, nr)) * static_cast<std::size_t>(k) * static_cast<std::size_t>(nr);
}

// B[k][n] = src[n * ld + k]: a matrix stored (N, K), like nn.Linear's weight (out, in) or a head's keys.
void pack_nk(const float* src, int n, int k, int ld, int nr, float* dst);
// B[k][n] = src[k * ld + n]: a matrix stored (K, N), like a head's values.
void pack_kn(const float* src, int k, int n, int ld, int nr, float* dst);
// Appending to those layouts (a model's cached keys and values, packed once and extended as tokens are
// appended): pack_nk_from writes columns [from, n) of pack_nk's layout, zero-padded to the panel's end, and
// leaves the earlier columns as they are; pack_kn_rows writes rows [from, k) of pack_kn's layout with its
// panels `capacity` rows apart (capacity >= k) instead of k. With from = 0 (and capacity = k) they write what
// pack_nk and pack_kn write.
void pack_nk_from(const float* src, int from, int n, int k, int ld, int nr, float* dst);
void pack_kn_rows(const float* src, int from, int k, int n, int ld, int nr, int capacity, float* dst);
// A bias of n values, zero-padded to whole panels.
void pack_bias(const float* src, int n, int nr, float* dst);

}  // namespace attnviz::simd
