// A dense row-major float tensor of up to three dimensions: all the engine's buffers are one of these, but
// for the per-head (T, T) stages a pass keeps (HeadSquares, below), whose rows are padded so they can grow.
#pragma once

#include <algorithm>
#include <array>
#include <cassert>
#include <cstddef>
#include <vector>

namespace attnviz {

struct Tensor {
  std::array<int, 3> shape{0, 0, 0};  // unused trailing dimensions are 1 for rank < 3
  int rank = 0;
  std::vector<float> data;

  Tensor() = default;
  Tensor(int rows, int cols, float fill = 0.0f)
      : shape{rows, cols, 1}, rank(2), data(count(rows, cols), fill) {}
  Tensor(int d0, int d1, int d2, float fill)
      : shape{d0, d1, d2}, rank(3), data(count(d0, d1) * static_cast<std::size_t>(d2), fill) {}
  static Tensor vector(int n, float fill = 0.0f) {
    Tensor t;
    t.shape = {n, 1, 1};
    t.rank = 1;
    t.data.assign(static_cast<std::size_t>(n), fill);
    return t;
  }

  bool empty() const { return data.empty(); }
  std::size_t size() const { return data.size(); }
  float* ptr() { return data.data(); }
  const float* ptr() const { return data.data(); }

  // 2-D access (r, c); for rank 3 the first index selects a (shape[1], shape[2]) slice.
  float& at(int r, int c) { return data[index(r, c)]; }
  const float& at(int r, int c) const { return data[index(r, c)]; }
  float& at(int i, int r, int c) { return data[index(i, r, c)]; }
  const float& at(int i, int r, int c) const { return data[index(i, r, c)]; }
  float* slice(int i) { return data.data() + static_cast<std::size_t>(i) * slice_size(); }
  const float* slice(int i) const { return data.data() + static_cast<std::size_t>(i) * slice_size(); }

 private:
  static std::size_t count(int a, int b) { return static_cast<std::size_t>(a) * static_cast<std::size_t>(b); }
  std::size_t slice_size() const { return count(shape[1], shape[2]); }
  std::size_t index(int r, int c) const {
    assert(rank == 2 && r >= 0 && r < shape[0] && c >= 0 && c < shape[1]);
    return count(r, shape[1]) + static_cast<std::size_t>(c);
  }
  std::size_t index(int i, int r, int c) const {
    assert(rank == 3 && i >= 0 && i < shape[0] && r >= 0 && r < shape[1] && c >= 0 && c < shape[2]);
    return static_cast<std::size_t>(i) * slice_size() + count(r, shape[2]) + static_cast<std::size_t>(c);
  }
};

// H square (n, n) matrices, one per attention head: the (H, T, T) stages a pass keeps (raw scores, scaled,
// weights, dropped). Row i of head h starts at data + (h * stride + i) * stride, with stride >= n, so a
// longer pass over the same prefix extends the matrices in place, writing only its new rows and columns
// (GptModel's incremental path); the cells past n in a row, and the rows past n, are unspecified. stride == n
// is the dense row-major (H, n, n) layout (the single-layer engine's, the hosts' copies). Read through row()
// or at(), never with n as the row stride.
struct HeadSquares {
  int heads = 0, n = 0, stride = 0;
  std::vector<float> data;  // (heads, stride, stride)

  HeadSquares() = default;
  HeadSquares(int h, int rows, float fill) : HeadSquares(h, rows, rows, fill) {}  // dense
  HeadSquares(int h, int rows, int row_stride, float fill)
      : heads(h), n(rows), stride(row_stride), data(cells(h, row_stride), fill) {
    assert(row_stride >= rows);
  }
  // A dense (H, n, n) tensor's storage, taken over.
  static HeadSquares adopt(Tensor&& t) {
    HeadSquares s;
    assert(t.rank == 3 && t.shape[1] == t.shape[2]);
    s.heads = t.shape[0], s.n = t.shape[1], s.stride = t.shape[1];
    s.data = std::move(t.data);
    t = Tensor();
    return s;
  }

  bool empty() const { return data.empty(); }
  bool dense() const { return stride == n; }
  std::size_t size() const { return cells(heads, n); }  // the cells shown: heads x n x n
  float* row(int h, int i) { return data.data() + offset(h, i); }
  const float* row(int h, int i) const { return data.data() + offset(h, i); }
  float& at(int h, int i, int j) { return row(h, i)[check_col(j)]; }
  const float& at(int h, int i, int j) const { return row(h, i)[check_col(j)]; }
  // The storage, for writers that take (ptr, stride); a dense one is the (H, n, n) layout.
  float* ptr() { return data.data(); }
  const float* ptr() const { return data.data(); }
  Tensor to_tensor() const {  // a dense (H, n, n) copy
    Tensor t(heads, n, n, 0.0f);
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < n; ++i)
        std::copy(row(h, i), row(h, i) + n, t.data.begin() + static_cast<std::ptrdiff_t>(offset_dense(h, i)));
    return t;
  }

 private:
  static std::size_t cells(int h, int side) {
    return static_cast<std::size_t>(h) * static_cast<std::size_t>(side) * static_cast<std::size_t>(side);
  }
  std::size_t offset(int h, int i) const {
    assert(h >= 0 && h < heads && i >= 0 && i < n);
    return (static_cast<std::size_t>(h) * static_cast<std::size_t>(stride) + static_cast<std::size_t>(i)) *
           static_cast<std::size_t>(stride);
  }
  std::size_t offset_dense(int h, int i) const {
    return (static_cast<std::size_t>(h) * static_cast<std::size_t>(n) + static_cast<std::size_t>(i)) *
           static_cast<std::size_t>(n);
  }
  int check_col(int j) const {
    assert(j >= 0 && j < n);
    return j;
  }
};

// The same shape and the same cells (float ==), whatever the strides.
inline bool operator==(const HeadSquares& a, const HeadSquares& b) {
  if (a.heads != b.heads || a.n != b.n || a.empty() != b.empty()) return false;
  for (int h = 0; h < a.heads && !a.empty(); ++h)
    for (int i = 0; i < a.n; ++i)
      if (!std::equal(a.row(h, i), a.row(h, i) + a.n, b.row(h, i))) return false;
  return true;
}
inline bool operator!=(const HeadSquares& a, const HeadSquares& b) {
  return !(a == b);
}

}  // namespace attnviz
