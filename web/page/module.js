// The page's side of the module's boundary: strings into its heap and calls to its exports
// (web/src/api.cpp), whether it has started, and waking it to draw. The module is the global `Module`
// (attnviz.js, loaded by attnviz-page.js).
export const $ = (id) => document.getElementById(id);

// Text is text on every path (the link, the API, a paste, inserted text): the module gets well-formed
// UTF-8. A lone surrogate, which UTF-8 cannot hold, becomes U+FFFD (as TextEncoder makes it), and so does a
// NUL, which a C string cannot carry.
export const wellFormed = (s) => s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]|\0/g,
                                           '\uFFFD');
export const utf8 = new TextEncoder();
// The module's heap as bytes and as floats. The threaded module's heap can grow on one of its Workers, which
// leaves this thread's views short: they are renewed first (src/threads_glue.js).
export function heapU8() {
  if (Module.attnvizFreshHeap) Module.attnvizFreshHeap();
  return Module.HEAPU8;
}
export function heapF32() {
  if (Module.attnvizFreshHeap) Module.attnvizFreshHeap();
  return Module.HEAPF32;
}
// A string in the module's heap (malloc'd, NUL-terminated): the caller frees it. 0 when the heap has no
// room for it.
export function toHeap(s) {
  const bytes = utf8.encode(wellFormed(s));
  const p = Module._malloc(bytes.length + 1);
  if (!p) return 0;
  const heap = heapU8();
  heap.set(bytes, p);
  heap[p + bytes.length] = 0;
  return p;
}

// Whether the first view is on screen (attnviz.ready resolved): the API works from then on.
export let started = false;
export function markStarted() {
  started = true;
}
export function needModule() {
  if (!started) throw new Error('attnviz is not ready yet: await attnviz.ready');
}

// Strings go through the module's heap (not its stack: a pasted book chapter is fine).
export function call(name, arg) {
  const p = arg === undefined ? 0 : toHeap(arg);
  if (arg !== undefined && !p) return `the page ran out of memory (${formatBytes(arg.length)} did not fit)`;
  try {
    return Module.UTF8ToString(Module['_' + name](p));
  } finally {
    if (p) Module._free(p);
  }
}

// A number of bytes as the module's messages write it ("12.3 MB"): the engine's format_bytes.
export const formatBytes = (n) => Module.UTF8ToString(Module._attnviz_format_bytes(n));

// The module draws only when something happens: every input wakes it.
export const wake = () => {
  if (window.Module && Module._attnviz_wake) Module._attnviz_wake();
};
