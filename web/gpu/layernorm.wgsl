// attnviz: GPT-2's LayerNorm over rows of a (rows, cols) matrix: y = (x - mean) / sqrt(var + eps) * scale +
// shift, with the biased variance. One row per workgroup: pass 1 the mean, pass 2 the variance of x - mean
// (two passes, as the engine's reference computes it), pass 3 the output.

struct Norm {
  rows : u32,
  cols : u32,
  x_off : u32,  // where row 0 starts in X and in Y (elements)
  y_off : u32,
  eps : f32,
  pad0 : f32,
  pad1 : f32,
  pad2 : f32,
}

@group(0) @binding(0) var<storage, read> X : array<f32>;
@group(0) @binding(1) var<storage, read> scale : array<f32>;
@group(0) @binding(2) var<storage, read> shift : array<f32>;
@group(0) @binding(3) var<storage, read_write> Y : array<f32>;
@group(0) @binding(4) var<uniform> n : Norm;

const WG = 256u;  // reduce_sum (common.wgsl) over the row

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg : vec3u, @builtin(local_invocation_index) li : u32) {
  let row = wg.x;
  if (row >= n.rows) {
    return;
  }
  let x0 = n.x_off + row * n.cols;
  let y0 = n.y_off + row * n.cols;
  let cols = f32(n.cols);

  // pass 1: the mean
  var s = 0.0;
  for (var c = li; c < n.cols; c += WG) {
    s += X[x0 + c];
  }
  let mean = reduce_sum(s, li) / cols;
  // pass 2: the biased variance
  var v = 0.0;
  for (var c = li; c < n.cols; c += WG) {
    let e = X[x0 + c] - mean;
    v += e * e;
  }
  let inv = 1.0 / sqrt(reduce_sum(v, li) / cols + n.eps);
  // pass 3: normalize, scale and shift
  for (var c = li; c < n.cols; c += WG) {
    Y[y0 + c] = (X[x0 + c] - mean) * inv * scale[c] + shift[c];
  }
}
