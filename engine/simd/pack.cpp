#include "pack.hpp"

namespace attnviz::simd {

void pack_nk(const float* src, int n, int k, int ld, int nr, float* dst) {
  for (int p = 0; p < panels(n, nr); ++p)
    for (int kk = 0; kk < k; ++kk)
      for (int c = 0; c < nr; ++c, ++dst) {
        const int col = p * nr + c;
        *dst = col < n ? src[static_cast<std::size_t>(col) * ld + kk] : 0.0f;
      }
}

void pack_kn(const float* src, int k, int n, int ld, int nr, float* dst) {
  for (int p = 0; p < panels(n, nr); ++p)
    for (int kk = 0; kk < k; ++kk)
      for (int c = 0; c < nr; ++c, ++dst) {
        const int col = p * nr + c;
        *dst = col < n ? src[static_cast<std::size_t>(kk) * ld + col] : 0.0f;
      }
}

void pack_nk_from(const float* src, int from, int n, int k, int ld, int nr, float* dst) {
  for (int p = from / nr; p < panels(n, nr); ++p) {
    float* panel =
        dst + static_cast<std::size_t>(p) * static_cast<std::size_t>(k) * static_cast<std::size_t>(nr);
    const int c0 = p == from / nr ? from % nr : 0;
    for (int kk = 0; kk < k; ++kk)
      for (int c = c0; c < nr; ++c) {
        const int col = p * nr + c;
        panel[static_cast<std::size_t>(kk) * static_cast<std::size_t>(nr) + static_cast<std::size_t>(c)] =
            col < n ? src[static_cast<std::size_t>(col) * ld + kk] : 0.0f;
      }
  }
}

void pack_kn_rows(const float* src, int from, int k, int n, int ld, int nr, int capacity, float* dst) {
  for (int p = 0; p < panels(n, nr); ++p) {
    float* panel =
        dst + static_cast<std::size_t>(p) * static_cast<std::size_t>(capacity) * static_cast<std::size_t>(nr);
    for (int kk = from; kk < k; ++kk)
      for (int c = 0; c < nr; ++c) {
        const int col = p * nr + c;
        panel[static_cast<std::size_t>(kk) * static_cast<std::size_t>(nr) + static_cast<std::size_t>(c)] =
            col < n ? src[static_cast<std::size_t>(kk) * ld + col] : 0.0f;
      }
  }
}

void pack_bias(const float* src, int n, int nr, float* dst) {
  for (int i = 0; i < panels(n, nr) * nr; ++i) dst[i] = i < n ? src[i] : 0.0f;
}

}  // namespace attnviz::simd
