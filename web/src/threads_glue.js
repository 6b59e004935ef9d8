// JavaScript linked into the threaded module only (--pre-js, web/CMakeLists.txt): how many threads it runs.
// One per core the browser reports, at most 8 (the engine's split of a pass gains little past that, and every
// thread keeps its own row buffers in the 2 GB heap), or what the page's query asks for, ?threads=N (1 to 8;
// the benchmark runs this module on one thread so). The main thread is one of them, so the pool of Workers that
// starts with the module (PTHREAD_POOL_SIZE) holds one fewer, but never none: Emscripten 3.1.6 waits for the
// pool's Workers to load before main(), counting down to zero from their number, and with none it never starts.
function attnvizThreadsAsked() {
  if (typeof location === 'undefined' || typeof URLSearchParams === 'undefined') return 0;
  const n = Number(new URLSearchParams(location.search).get('threads'));
  return Number.isInteger(n) && n >= 1 && n <= 8 ? n : 0;
}
function attnvizThreads() {
  const cores = (typeof navigator !== 'undefined' && navigator.hardwareConcurrency) || 1;
  return attnvizThreadsAsked() || Math.max(1, Math.min(cores, 8));
}
function attnvizPoolSize() {
  return Math.max(1, attnvizThreads() - 1);
}

// With shared memory the heap can grow on another thread, and this thread's views of it (HEAPU8, HEAPF32, ...)
// then stop short of its end. Emscripten's own code renews them on every access; the page's scripts call this
// before theirs (web/page/module.js).
Module['attnvizFreshHeap'] = function() {
  if (wasmMemory && wasmMemory.buffer !== buffer) updateGlobalBufferAndViews(wasmMemory.buffer);
};
