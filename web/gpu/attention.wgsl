// attnviz: one row of one head's attention per workgroup. From the raw scores q k^T it writes the scaled
// and masked scores (-inf in the masked future), the softmax weights (exactly 0 where masked) and, with
// dropout, the dropped weights: weight / (1 - p) where the keep mask (drawn on the CPU from PyTorch's
// generator, one bit per cell of the whole layer) says kept, 0 elsewhere.

struct Rows {
  T : u32,
  head0 : u32,  // the first head of this chunk, for the keep mask's index
  flags : u32,  // 1: causal mask; 2: dropout
  neg_inf : u32,  // 0xff800000: -inf, which WGSL has no constant for (a constant bitcast to it is an error)
  scale : f32,
  keep_scale : f32,
  pad1 : f32,
  pad2 : f32,
}

@group(0) @binding(0) var<storage, read> S : array<f32>;             // (heads, T, T) raw scores
@group(0) @binding(1) var<storage, read_write> SC : array<f32>;      // scaled and masked
@group(0) @binding(2) var<storage, read_write> P : array<f32>;       // weights
@group(0) @binding(3) var<storage, read_write> D : array<f32>;       // dropped weights
@group(0) @binding(4) var<storage, read> keep : array<u32>;          // (H, T, T) bits, all heads
@group(0) @binding(5) var<uniform> r : Rows;

const WG = 64u;  // reduce_max and reduce_sum (common.wgsl) over the row

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg : vec3u, @builtin(local_invocation_index) li : u32) {
  let T = r.T;
  let row = wg.x;
  let base = (wg.y * T + row) * T;
  let causal = (r.flags & 1u) != 0u;
  var n = T;  // the columns this row sees
  if (causal) {
    n = row + 1u;
  }

  var m = -3.402823e38;
  for (var c = li; c < n; c += WG) {
    m = max(m, S[base + c] * r.scale);
  }
  m = reduce_max(m, li);
  var sum = 0.0;
  for (var c = li; c < n; c += WG) {
    sum += exp(S[base + c] * r.scale - m);
  }
  sum = reduce_sum(sum, li);
  let inv = 1.0 / sum;

  let neg_inf = bitcast<f32>(r.neg_inf);
  let kbase = ((r.head0 + wg.y) * T + row) * T;
  for (var c = li; c < T; c += WG) {
    let x = S[base + c] * r.scale;
    var w = 0.0;
    if (c < n) {
      SC[base + c] = x;
      w = exp(x - m) * inv;
    } else {
      SC[base + c] = neg_inf;
    }
    P[base + c] = w;
    if ((r.flags & 2u) != 0u) {
      let bit = kbase + c;
      let kept = (keep[bit >> 5u] >> (bit & 31u)) & 1u;
      D[base + c] = select(0.0, w * r.keep_scale, kept != 0u);
    }
  }
}
