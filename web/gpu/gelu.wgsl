// attnviz: GELU's tanh approximation in place over n elements, as GPT-2's feed-forward applies it:
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). Any number of workgroups: each invocation strides over
// the whole range.

struct Span {
  n : u32,
  off : u32,
  pad0 : u32,
  pad1 : u32,
}

@group(0) @binding(0) var<storage, read_write> X : array<f32>;
@group(0) @binding(1) var<uniform> s : Span;

const WG = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid : vec3u, @builtin(num_workgroups) groups : vec3u) {
  let c = 0.7978845608028654;  // sqrt(2 / pi)
  for (var i = gid.x; i < s.n; i += stride(groups)) {
    let x = X[s.off + i];
    // tanh is exactly +-1 in f32 well before |u| = 10; clamping keeps every implementation's tanh finite
    let u = clamp(c * (x + 0.044715 * x * x * x), -10.0, 10.0);
    X[s.off + i] = 0.5 * x * (1.0 + tanh(u));
  }
}
