// JavaScript linked into the threaded module only (--pre-js, web/CMakeLists.txt): how many threads it runs.
// One per core the browser reports, at most 8 (the engine's split of a pass gains little past that, and every
// thread keeps its own row buffers in the 2 GB heap). The main thread is one of them, so the pool of Workers
// that starts with the module (PTHREAD_POOL_SIZE) holds one fewer.
function attnvizThreads() {
  const cores = (typeof navigator !== 'undefined' && navigator.hardwareConcurrency) || 1;
  return Math.max(1, Math.min(cores, 8));
}
function attnvizPoolSize() {
  return attnvizThreads() - 1;
}

// With shared memory the heap can grow on another thread, and this thread's views of it (HEAPU8, HEAPF32, ...)
// then stop short of its end. Emscripten's own code renews them on every access; the page's scripts call this
// before theirs (web/page/module.js).
Module['attnvizFreshHeap'] = function() {
  if (wasmMemory && wasmMemory.buffer !== buffer) updateGlobalBufferAndViews(wasmMemory.buffer);
};
