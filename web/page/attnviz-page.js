// The page around the attnviz module (attnviz.js + attnviz.wasm, built from web/src/main.cpp): checks what
// the browser has, shows loading and errors, keeps the state in the URL (#text=...&variant=...; the keys are
// the desktop app's flags), downloads exports, and offers window.attnviz for tests and scripting:
//   attnviz.ready           a promise, resolved when the first heatmap is on screen
//   attnviz.setText(s)      replaces the sentence; returns '' or why the last good result stays
//   attnviz.getResult()     the current result, in attnviz-cli --json's format
//   attnviz.getState()      the state as {flag: value} (defaults left out); setState(obj) sets it
//   attnviz.exportFiles(k)  what the Export buttons do, k = 'png' | 'heads' | 'json' | 'csv': the files download
//   attnviz.status()        figures: generation, error, compute and frame times, frames drawn, where the
//                           heatmaps are on the canvas, the hovered cell; `compute`: the backend of the
//                           view, whether a WebGPU job is in flight, the fallback note, WebGPU's state and
//                           the automatic choice's calibration
//   attnviz.setBackend(b)   'auto' | 'wasm' | 'webgpu'; returns '' or why not
//   attnviz.computed()      a promise, resolved once no WebGPU job is in flight (with status())
//   attnviz.getTensor(n)    a copy of one tensor of the view (Float32Array): inputs, q, k, v, scores, scaled,
//                           weights, dropped, context, output; null when the view has none
//   attnviz.gpu             the WebGPU layer (web/gpu/attnviz-gpu.js), for tests
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  let resolveReady, rejectReady;
  const ready = new Promise((resolve, reject) => {
    resolveReady = resolve;
    rejectReady = reject;
  });
  ready.catch(() => {});  // the page shows the problem; a script that awaits ready gets the rejection

  function showProblem(title, detail) {
    $('loading').hidden = true;
    $('problem-title').textContent = title;
    $('problem-detail').textContent = detail;
    $('problem').hidden = false;
    $('overlay').hidden = false;
    rejectReady(new Error(title + ': ' + detail));
  }

  // A module with one SIMD128 instruction (i32x4.splat): valid only where WebAssembly SIMD is.
  const simdProbe = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 0x60, 0, 1, 0x7b, 3, 2, 1, 0, 10, 8, 1,
                                    6, 0, 0x41, 0, 0xfd, 0x11, 0x0b]);
  function missingFeature() {
    if (typeof WebAssembly !== 'object' || !WebAssembly.validate(simdProbe))
      return 'This browser has no WebAssembly SIMD, which the attention engine is built for. ' +
             'Chrome and Edge 91+, Firefox 89+ and Safari 16.4+ have it.';
    const probe = document.createElement('canvas');
    if (!probe.getContext('webgl2'))
      return 'This browser has no WebGL2 (or it is turned off), which the heatmaps are drawn with. ' +
             'Check that hardware acceleration is on, or try another browser.';
    return null;
  }

  // URL <-> state. The hash holds [flag, value] pairs; the module says which differ from the defaults.
  const hashPairs = () => Array.from(new URLSearchParams(location.hash.slice(1)).entries());
  const pairsHash = (pairs) => (pairs.length ? '#' + new URLSearchParams(pairs).toString() : '');
  const PAUSE_MS = 1000;  // changes closer together than this (typing) make one history entry
  let firstState = true, lastChange = -Infinity;

  function stateChanged(json) {
    const hash = pairsHash(JSON.parse(json));
    const now = performance.now();
    const burst = now - lastChange < PAUSE_MS;
    const first = firstState;
    firstState = false;
    if (!first) lastChange = now;  // the link the page opened with is not an edit
    if (hash === location.hash) return;
    const url = location.pathname + location.search + hash;
    if (first || burst) history.replaceState(null, '', url);
    else history.pushState(null, '', url);
  }

  const MIME = { png: 'image/png', json: 'application/json', csv: 'text/csv' };
  function download(path) {
    const name = path.slice(path.lastIndexOf('/') + 1);
    const data = Module.FS.readFile(path);
    Module.FS.unlink(path);
    const url = URL.createObjectURL(new Blob([data], { type: MIME[name.split('.').pop()] || 'application/octet-stream' }));
    const a = document.createElement('a');
    a.href = url;
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  // Strings go through the module's heap (not its stack: a pasted book chapter is fine).
  function call(name, arg) {
    let p = 0;
    if (arg !== undefined) {
      const n = Module.lengthBytesUTF8(arg) + 1;
      p = Module._malloc(n);
      Module.stringToUTF8(arg, p, n);
    }
    try {
      return Module.UTF8ToString(Module['_' + name](p));
    } finally {
      if (p) Module._free(p);
    }
  }
  function needModule() {
    if (!started) throw new Error('attnviz is not ready yet: await attnviz.ready');
  }
  let started = false;

  window.attnviz = {
    ready,
    setText(text) {
      needModule();
      return call('attnviz_set_text', String(text));
    },
    getResult() {
      needModule();
      return JSON.parse(call('attnviz_result_json'));
    },
    getState() {
      needModule();
      return Object.fromEntries(JSON.parse(call('attnviz_state')));
    },
    setState(state) {
      needModule();
      const pairs = Object.entries(state).map(([k, v]) => [k, String(v)]);
      return call('attnviz_apply_state', JSON.stringify(pairs));
    },
    exportFiles(kind) {
      needModule();
      return call('attnviz_export', String(kind));
    },
    status() {
      needModule();
      return JSON.parse(call('attnviz_status'));
    },
    setBackend(name) {
      needModule();
      return call('attnviz_set_backend', String(name));
    },
    async computed() {
      needModule();
      for (;;) {
        const s = this.status();
        if (!s.compute.computing) return s;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    },
    getTensor(name) {
      needModule();
      const where = call('attnviz_tensor_json', String(name));
      const [ptr, count] = JSON.parse(where);
      return ptr ? Module.HEAPF32.slice(ptr >> 2, (ptr >> 2) + count) : null;
    },
    gpu: window.AttnvizGpu ? new window.AttnvizGpu() : null,
    // Benchmarks: wait for the GPU at the end of every frame, so frame times include its work.
    setFinish(on) {
      needModule();
      Module._attnviz_set_finish(on ? 1 : 0);
    },
  };

  window.addEventListener('popstate', () => {
    if (!started) return;
    const error = call('attnviz_apply_state', JSON.stringify(hashPairs()));
    if (error) console.warn('attnviz: ' + error);
  });

  const problem = missingFeature();
  if (problem) {
    showProblem('attnviz cannot run in this browser', problem);
    return;
  }

  // The module draws only when something happens: every input wakes it.
  const wake = () => {
    if (window.Module && Module._attnviz_wake) Module._attnviz_wake();
  };
  for (const kind of ['pointermove', 'pointerdown', 'pointerup', 'pointerleave', 'wheel', 'keydown', 'keyup',
                      'keypress', 'focus', 'blur', 'resize'])
    window.addEventListener(kind, wake, { capture: true, passive: true });
  document.addEventListener('visibilitychange', wake);

  const canvas = $('canvas');
  canvas.addEventListener('webglcontextlost', (e) => {
    e.preventDefault();
    showProblem('The graphics context was lost', 'The browser took WebGL away from the page. Reload to start again.');
  });

  window.Module = {
    canvas,
    attnvizGpu: window.attnviz.gpu,
    attnvizHooks: {
      initialState: () => JSON.stringify(hashPairs()),
      stateChanged,
      download,
      firstHeatmap() {
        started = true;
        // A key is drawn at once, not at the next animation frame: these listeners come after the module's
        // own (registered when it made its window), so the key has reached the UI when they run.
        window.addEventListener('keypress', () => Module._attnviz_frame());
        window.addEventListener('keydown', (e) => {
          if (e.key.length !== 1) Module._attnviz_frame();  // Backspace, arrows, Enter: no keypress follows
        });
        $('overlay').hidden = true;
        canvas.focus();
        resolveReady(window.attnviz);
      },
    },
    print: (text) => console.log(text),
    printErr: (text) => console.error(text),
    setStatus(text) {
      if (text) $('loading-status').textContent = text;
    },
    onAbort(what) {
      showProblem('attnviz stopped', String(what));
    },
  };
  const script = document.createElement('script');
  script.src = 'attnviz.js';
  script.onerror = () => showProblem('attnviz could not load', 'attnviz.js did not load: is the page served with all its files?');
  document.body.appendChild(script);
})();
