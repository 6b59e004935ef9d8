// attnviz: GPT-2's embeddings, x[t] = wte[ids[t]] + wpe[t], from matrices split by rows into pieces that fit
// a storage binding. One dispatch per piece of wte writes the rows whose token falls in it (every row
// exactly once over the pieces); then one dispatch per piece of wpe adds the positions in it.

struct Embed {
  T : u32,
  d : u32,
  row0 : u32,   // the piece holds rows [row0, row0 + rows) of its matrix
  rows : u32,
  add_positions : u32,  // 0: x[t] = W[ids[t] - row0] for tokens in the piece; 1: x[t] += W[t - row0]
  pad0 : u32,
  pad1 : u32,
  pad2 : u32,
}

@group(0) @binding(0) var<storage, read> ids : array<u32>;
@group(0) @binding(1) var<storage, read> W : array<f32>;
@group(0) @binding(2) var<storage, read_write> X : array<f32>;
@group(0) @binding(3) var<uniform> e : Embed;

const WG = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid : vec3u, @builtin(num_workgroups) groups : vec3u) {
  let n = e.T * e.d;
  for (var i = gid.x; i < n; i += stride(groups)) {
    let t = i / e.d;
    let c = i % e.d;
    var row = t;
    if (e.add_positions == 0u) {
      row = ids[t];
    }
    if (row < e.row0 || row >= e.row0 + e.rows) {
      continue;
    }
    let w = W[(row - e.row0) * e.d + c];
    if (e.add_positions == 0u) {
      X[i] = w;
    } else {
      X[i] = X[i] + w;
    }
  }
}
