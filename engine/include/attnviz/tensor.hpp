// A dense row-major float tensor of up to three dimensions: all the engine's buffers are one of these.
#pragma once

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

}  // namespace attnviz
