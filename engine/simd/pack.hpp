// Panel layouts for the GEMM micro-kernel: B (K x N) is cut into panels of `nr` columns, each stored k-major
// ([k][nr], zero-padded past N), so the kernel streams one panel with aligned loads; and the blocks of rows
// of A it runs over. Scalar code, shared by every ISA.
#pragma once

#include <cstddef>

namespace attnviz::simd {

inline int panels(int n, int nr) {
  return (n + nr - 1) / nr;
}
inline std::size_t panel_floats(int n, int k, int nr) {
  return static_cast<std::size_t>(panels(n, nr)) * static_cast<std::size_t>(k) * static_cast<std::size_t>(nr);
}

// Calls f(i, rows) for the row blocks of [m0, m1): as few as MR rows a block allow, their sizes differing by
// at most one (16 rows with MR = 5: four blocks of 4, not 5 + 5 + 5 + 1). A block of one row holds two
// accumulators, each a chain of dependent adds over all of K with nothing to overlap it: in WebAssembly (a
// multiply and an add, no FMA) the 1-row remainders were 1.7% of a page pass at T = 512 and most of a 16-row
// GEMM's tail. Blocking never changes a row's sums: each runs over k in order either way.
template <class F>
void for_row_blocks(int m0, int m1, int MR, F&& f) {
  const int n = m1 - m0;
  if (n <= 0) return;
  const int blocks = (n + MR - 1) / MR, base = n / blocks, extra = n % blocks;
  for (int b = 0, i = m0; b < blocks; ++b) {
    const int rows = base + (b < extra ? 1 : 0);
    f(i, rows);
    i += rows;
  }
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
