// JavaScript linked into the module (--pre-js, web/CMakeLists.txt), in scope for the EM_JS code of gpu.cpp
// and gpu_model.cpp: how the WebGPU layer's answers reach their C++ exports.

// Calls f(p) with s, as NUL-terminated UTF-8, at p in the module's heap (0 when the heap has no room for
// it), and frees it after.
function attnvizWithString(s, f) {
  const n = lengthBytesUTF8(s) + 1;
  const p = _malloc(n);
  if (p) stringToUTF8(s, p, n);
  try {
    f(p);
  } finally {
    if (p) _free(p);
  }
}

// A WebGPU run's outcome for C++: done(ok, message, ms) is its export (attnviz_gpu_done,
// attnviz_gpu_model_done) with the run's ticket. `run` is the layer's promise of milliseconds, or a string
// saying why there is no run (reported in a task of its own, as a run's outcome always is).
function attnvizReport(done, run) {
  const report = (ok, message, ms) => attnvizWithString(String(message || ''), (p) => done(ok, p, ms));
  if (typeof run === 'string') {
    setTimeout(() => report(0, run, 0));
    return;
  }
  run.then((ms) => report(1, '', ms), (e) => report(0, 'WebGPU: ' + ((e && e.message) || e), 0));
}
