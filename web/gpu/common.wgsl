// attnviz: what the kernels share. The build appends it to each kernel (web/gpu/embed.cmake): WGSL has no
// #include, and a module may use a declaration before it, so a kernel's line numbers stay its file's.
// Each kernel declares WG, the invocations of its workgroup (the product of its @workgroup_size).

// The scratch of reduce_sum and reduce_max: a workgroup variable takes workgroup memory only in the kernels
// that use it.
var<workgroup> red : array<f32, WG>;

// The sum (or with take_max, the maximum) of x over the workgroup, given to every invocation; li is the
// invocation's local_invocation_index. Called from uniform control flow (it waits at barriers), WG a power
// of two.
fn reduce(x : f32, li : u32, take_max : bool) -> f32 {
  red[li] = x;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (li < s) {
      let a = red[li];
      let b = red[li + s];
      red[li] = select(a + b, max(a, b), take_max);
    }
    workgroupBarrier();
  }
  let result = red[0];
  workgroupBarrier();
  return result;
}

fn reduce_sum(x : f32, li : u32) -> f32 {
  return reduce(x, li, false);
}

fn reduce_max(x : f32, li : u32) -> f32 {
  return reduce(x, li, true);
}

// The step of a loop over [0, n) that any number of workgroups covers, each invocation from its
// global_invocation_id.x: for (var i = gid.x; i < n; i += stride(groups)), groups the num_workgroups.
fn stride(groups : vec3u) -> u32 {
  return groups.x * WG;
}
