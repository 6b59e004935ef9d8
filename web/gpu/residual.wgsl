// attnviz: the residual connection, X += Y over n elements (the attention's or the feed-forward's output
// added to the residual stream). Any number of workgroups: each invocation strides over the whole range.

struct Span {
  n : u32,
  pad0 : u32,
  pad1 : u32,
  pad2 : u32,
}

@group(0) @binding(0) var<storage, read_write> X : array<f32>;
@group(0) @binding(1) var<storage, read> Y : array<f32>;
@group(0) @binding(2) var<uniform> s : Span;

const WG = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid : vec3u, @builtin(num_workgroups) groups : vec3u) {
  for (var i = gid.x; i < s.n; i += stride(groups)) {
    X[i] = X[i] + Y[i];
  }
}
