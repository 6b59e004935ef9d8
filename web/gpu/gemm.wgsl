// attnviz: batched matrix product C[b] = A[b] * op(B[b]) (+ bias), the layer's projections, its per-head
// scores (q k^T) and its per-head context (weights v). Row-major matrices at element offsets and row strides
// inside storage buffers; batch b (workgroup_id.z) steps each operand by its batch stride, which is how heads
// (column blocks of Q, K, V and the merged context) are addressed in place.
//
// A 64 x 64 tile of C per workgroup of 16 x 16 invocations, each accumulating a 4 x 4 block (rows
// lid.y + 16 i, columns lid.x + 16 j) while 16-deep slices of A and B pass through workgroup memory.

struct Dims {
  M : u32, N : u32, K : u32,
  lda : u32, ldb : u32, ldc : u32,
  a_off : u32, b_off : u32, c_off : u32,
  a_batch : u32, b_batch : u32, c_batch : u32,
  bias_off : u32, bias_batch : u32,
  flags : u32,  // 1: add bias[n]; 2: A is lower triangular (causal weights): row i is zero past column i
  pad : u32,
}

@group(0) @binding(0) var<storage, read> A : array<f32>;
@group(0) @binding(1) var<storage, read> B : array<f32>;
@group(0) @binding(2) var<storage, read> bias : array<f32>;
@group(0) @binding(3) var<storage, read_write> C : array<f32>;
@group(0) @binding(4) var<uniform> d : Dims;

// B is (N, K) row-major when true (a Linear's weight; K for q k^T), (K, N) when false (V for weights v).
override TRANSPOSE_B : bool = true;

const TM = 64u;
const TN = 64u;
const TK = 16u;
const WG = 256u;  // 16 x 16 invocations
var<workgroup> As : array<f32, 1024>;  // As[k * TM + m]
var<workgroup> Bs : array<f32, 1024>;  // Bs[k * TN + n]

// Row m of C, columns n, n + 16, n + 32, n + 48 (those inside the matrix), plus the bias.
fn store(c_base : u32, m : u32, n : u32, batch : u32, v : vec4f) {
  if (m >= d.M) {
    return;
  }
  for (var j = 0u; j < 4u; j++) {
    let col = n + 16u * j;
    if (col < d.N) {
      var x = v[j];
      if ((d.flags & 1u) != 0u) {
        x += bias[d.bias_off + batch * d.bias_batch + col];
      }
      C[c_base + m * d.ldc + col] = x;
    }
  }
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg : vec3u, @builtin(local_invocation_id) lid : vec3u,
        @builtin(local_invocation_index) li : u32) {
  let row0 = wg.y * TM;
  let col0 = wg.x * TN;
  let a_base = d.a_off + wg.z * d.a_batch;
  let b_base = d.b_off + wg.z * d.b_batch;
  let c_base = d.c_off + wg.z * d.c_batch;
  // Causal weights: this tile's rows see columns (and so rows of B) up to row0 + TM - 1 only.
  var k_end = d.K;
  if ((d.flags & 2u) != 0u) {
    k_end = min(d.K, row0 + TM);
  }

  // Row i of this invocation's block in acc_i, its four columns in the lanes.
  var acc0 = vec4f(0.0);
  var acc1 = vec4f(0.0);
  var acc2 = vec4f(0.0);
  var acc3 = vec4f(0.0);
  for (var k0 = 0u; k0 < k_end; k0 += TK) {
    for (var i = 0u; i < 4u; i++) {
      let e = li + i * WG;
      // A: 64 rows x 16 columns, consecutive invocations along a row.
      let am = e / TK;
      let ak = e % TK;
      var av = 0.0;
      if (row0 + am < d.M && k0 + ak < k_end) {
        av = A[a_base + (row0 + am) * d.lda + k0 + ak];
      }
      As[ak * TM + am] = av;
      var bv = 0.0;
      if (TRANSPOSE_B) {
        let bn = e / TK;
        let bk = e % TK;
        if (col0 + bn < d.N && k0 + bk < k_end) {
          bv = B[b_base + (col0 + bn) * d.ldb + k0 + bk];
        }
        Bs[bk * TN + bn] = bv;
      } else {
        let bk = e / TN;
        let bn = e % TN;
        if (col0 + bn < d.N && k0 + bk < k_end) {
          bv = B[b_base + (k0 + bk) * d.ldb + col0 + bn];
        }
        Bs[bk * TN + bn] = bv;
      }
    }
    workgroupBarrier();
    for (var k = 0u; k < TK; k++) {
      let ka = k * TM + lid.y;
      let kb = k * TN + lid.x;
      let b = vec4f(Bs[kb], Bs[kb + 16u], Bs[kb + 32u], Bs[kb + 48u]);
      acc0 = fma(vec4f(As[ka]), b, acc0);
      acc1 = fma(vec4f(As[ka + 16u]), b, acc1);
      acc2 = fma(vec4f(As[ka + 32u]), b, acc2);
      acc3 = fma(vec4f(As[ka + 48u]), b, acc3);
    }
    workgroupBarrier();
  }

  store(c_base, row0 + lid.y, col0 + lid.x, wg.z, acc0);
  store(c_base, row0 + lid.y + 16u, col0 + lid.x, wg.z, acc1);
  store(c_base, row0 + lid.y + 32u, col0 + lid.x, wg.z, acc2);
  store(c_base, row0 + lid.y + 48u, col0 + lid.x, wg.z, acc3);
}
