// The page around the attnviz module (attnviz.js + attnviz.wasm, built from web/src/main.cpp): checks what
// the browser has, shows loading and errors, keeps the state in the URL (#text=...&variant=...; the keys are
// the desktop app's flags), downloads exports, and offers window.attnviz for tests and scripting:
//   attnviz.ready           a promise, resolved when the first view is on screen and the sentence box has
//                           the keyboard; rejected (with why) when the page cannot run
//   attnviz.setText(s)      replaces the sentence; returns '' or why the last good result stays
//   attnviz.getResult()     the current result, in attnviz-cli --json's format (throws when its JSON would not
//                           fit in memory or in a string)
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
//   attnviz.openModel(c)    opens a model: {kind: 'layer' | 'seeded', size, seed, train}; a promise of '' or why not
//   attnviz.loadModelFiles(files)  opens a model from File objects (a .safetensors file with its tokenizer
//                           files and config.json), read into the module in pieces; a promise of '' or why not
//   attnviz.getModelResult()  the whole model's last pass in attnviz-cli --model --json's format (null: none)
//   attnviz.loads           what the model loads did: [{name, loaded, total, visible}] per piece read
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

  // Text is text on every path (the link, the API, a paste, inserted text): the module gets well-formed
  // UTF-8. A lone surrogate, which UTF-8 cannot hold, becomes U+FFFD (as TextEncoder makes it), and so does a
  // NUL, which a C string cannot carry.
  const wellFormed = (s) => s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]|\0/g,
                                      '\uFFFD');
  const utf8 = new TextEncoder();
  // A string in the module's heap (malloc'd, NUL-terminated): the caller frees it. 0 when the heap has no
  // room for it.
  function toHeap(s) {
    const bytes = utf8.encode(wellFormed(s));
    const p = Module._malloc(bytes.length + 1);
    if (!p) return 0;
    Module.HEAPU8.set(bytes, p);
    Module.HEAPU8[p + bytes.length] = 0;
    return p;
  }

  // URL <-> state. The hash holds [flag, value] pairs; the module says which differ from the defaults.
  const hashPairs = () => Array.from(new URLSearchParams(location.hash.slice(1)).entries(),
                                     ([k, v]) => [wellFormed(k), wellFormed(v)]);
  const pairsHash = (pairs) => (pairs.length ? '#' + new URLSearchParams(pairs).toString() : '');
  const PAUSE_MS = 1000;  // changes closer together than this (typing) make one history entry
  let firstState = true, lastChange = -Infinity, followingLink = false;

  function stateChanged(json) {
    const hash = pairsHash(JSON.parse(json));
    const now = performance.now();
    const burst = now - lastChange < PAUSE_MS;
    const first = firstState;
    firstState = false;
    if (!first) lastChange = now;  // the link the page opened with is not an edit
    if (hash === location.hash) return;
    const url = location.pathname + location.search + hash;
    // A link being followed (Back, Forward, an edited hash) is rewritten in place: no new history entry.
    if (first || burst || followingLink) history.replaceState(null, '', url);
    else history.pushState(null, '', url);
  }

  // GPT-2's vocabulary (site/gpt2/, same origin), fetched once, before the first model opens.
  let vocabFiles = null;
  function fetchVocab() {
    if (!vocabFiles)
      vocabFiles = Promise.all(['encoder.json', 'vocab.bpe'].map(async (f) => {
        const r = await fetch('gpt2/' + f);
        if (!r.ok) throw new Error(`gpt2/${f}: HTTP ${r.status}`);
        return [f, new Uint8Array(await r.arrayBuffer())];
      }));
    return vocabFiles;
  }
  let vocabWritten = false;
  async function ensureVocab() {
    const files = await fetchVocab();
    if (vocabWritten) return;
    try { Module.FS.mkdir('/gpt2'); } catch (e) { /* there already */ }
    for (const [f, data] of files) Module.FS.writeFile('/gpt2/' + f, data);
    vocabWritten = true;
  }
  const linkNamesModel = () => hashPairs().some(([k]) => k === 'model');

  // The progress panel of a long operation (reading a model, drawing a seeded one), with Cancel.
  let cancelled = false;
  function showBusy(text, fraction, cancellable) {
    $('busy-text').textContent = text;
    const bar = $('busy-progress');
    if (fraction === null) bar.removeAttribute('value'); else bar.value = fraction;
    $('busy-cancel').hidden = !cancellable;
    $('busy').hidden = false;
  }
  const hideBusy = () => { $('busy').hidden = true; };
  $('busy-cancel').addEventListener('click', () => { cancelled = true; });
  // Lets the browser paint (the progress panel) before the module blocks the thread.
  const painted = () => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));

  // A number of bytes as the module's messages write it ("12.3 MB"): the engine's format_bytes.
  const formatBytes = (n) => Module.UTF8ToString(Module._attnviz_format_bytes(n));

  let opening = Promise.resolve('');
  // One model operation at a time: a second waits for the first.
  function serially(job) {
    opening = opening.then(job, job);
    return opening;
  }

  async function openModel(choice) {
    needModule();
    return serially(async () => {
      try {
        if (choice.kind !== 'layer') await ensureVocab();
      } catch (e) {
        return 'GPT-2\'s vocabulary did not load: ' + e.message;
      }
      const what = choice.kind === 'seeded' ? `${choice.size} (seed ${choice.seed})` : choice.kind === 'file'
        ? choice.path.replace(/^\/models\//, '') : 'the chapter-3 layer';
      if (choice.kind !== 'layer') {
        showBusy(`Opening ${what}…` + (choice.kind === 'seeded' ? ' (drawing every weight as PyTorch does)' : ''),
                 null, false);
        await painted();
      }
      try {
        return call('attnviz_open_model', JSON.stringify(choice));
      } finally {
        hideBusy();
        wake();
      }
    });
  }

  // The model's files, read into the module's file system in pieces (a progress bar and Cancel), after the
  // header says the weights fit. `files`: File objects, each with an optional relPath; `folder`: the dropped
  // folder's name.
  let readChunk = 16 << 20;
  const loads = [];
  const TOKENIZER = new Set(['vocab.json', 'merges.txt', 'encoder.json', 'vocab.bpe', 'config.json']);
  async function loadModelFiles(files, folder) {
    needModule();
    return serially(async () => {
      const list = Array.from(files || []);
      const weights = list.filter((f) => f.name.toLowerCase().endsWith('.safetensors'));
      if (weights.length !== 1)
        return refuse(`give one .safetensors file (with its tokenizer files, or a folder): got ${weights.length}`);
      const file = weights[0];
      const name = (folder || file.name).replace(/[\/\0]/g, '_');
      // The header first: u64 N, then N bytes of JSON. Too large is refused before anything is read.
      if (file.size < 8) return refuse(`${name} is not a safetensors file: ${file.size} bytes`);
      const n = Number(new DataView(await file.slice(0, 8).arrayBuffer()).getBigUint64(0, true));
      if (!(n >= 2 && n <= 100e6 && 8 + n <= file.size))
        return refuse(`${name} is not a safetensors file: its header length ${n} does not fit its ${file.size} bytes`);
      let header;
      try {
        header = JSON.parse(new TextDecoder().decode(await file.slice(8, 8 + n).arrayBuffer()));
      } catch (e) {
        return refuse(`${name} is not a safetensors file: its header is not JSON (${e.message})`);
      }
      let numel = 0;
      for (const [key, t] of Object.entries(header || {}))
        if (key !== '__metadata__' && t && Array.isArray(t.shape)) numel += t.shape.reduce((a, b) => a * Number(b), 1);
      const floats = numel * 4, need = floats + file.size;  // packed float32, and the file while it is read
      const free = attnviz.status().memory.free;
      if (!(need <= free))
        return refuse(`${name} needs ${formatBytes(floats)} as float32 (${formatBytes(need)} while it loads): ` +
                      `the page can hold ${formatBytes(free)}; use the desktop app (attnviz --model PATH)`);
      await ensureVocab().catch(() => {});  // a file without its own vocabulary uses GPT-2's
      const dir = '/models/' + name;
      const FS = Module.FS;
      const remove = () => {
        try {
          for (const entry of FS.readdir(dir)) if (entry !== '.' && entry !== '..') FS.unlink(dir + '/' + entry);
          FS.rmdir(dir);
        } catch (e) { /* nothing there */ }
      };
      remove();
      try { FS.mkdir('/models'); } catch (e) { /* there already */ }
      FS.mkdir(dir);
      for (const f of list)
        if (TOKENIZER.has(f.name)) FS.writeFile(dir + '/' + f.name, new Uint8Array(await f.arrayBuffer()));
      cancelled = false;
      const path = dir + '/model.safetensors';
      const stream = FS.open(path, 'w');
      try {
        FS.truncate(path, file.size);  // one allocation, not one per piece
        for (let at = 0; at < file.size; at += readChunk) {
          const piece = new Uint8Array(await file.slice(at, Math.min(file.size, at + readChunk)).arrayBuffer());
          if (cancelled) {
            FS.close(stream);
            remove();
            hideBusy();
            return refuse(`reading ${name} was cancelled`);
          }
          FS.write(stream, piece, 0, piece.length, at);
          const loaded = at + piece.length;
          showBusy(`Reading ${name}: ${formatBytes(loaded)} of ${formatBytes(file.size)}`, loaded / file.size, true);
          loads.push({ name, loaded, total: file.size, visible: !$('busy').hidden });
          await painted();
        }
        FS.close(stream);
      } catch (e) {
        try { FS.close(stream); } catch (e2) { /* closed */ }
        remove();
        hideBusy();
        return refuse(`reading ${name} failed: ${e.message}`);
      }
      showBusy(`Opening ${name}…`, null, false);
      await painted();
      let error;
      try {
        error = call('attnviz_open_model', JSON.stringify({ kind: 'file', path: dir, seed: 123, train: false }));
      } finally {
        // The weights are packed in the module now: the file's bytes are not needed again.
        try { FS.unlink(path); } catch (e) { /* gone */ }
        hideBusy();
        wake();
      }
      if (!error) $('ask').hidden = true;
      return error;
    });
  }
  function refuse(why) {
    call('attnviz_set_message', why);
    wake();
    return why;
  }

  // A link naming a weights file (#model=file:NAME) asks for it.
  function askForWanted() {
    const wanted = started ? attnviz.status().model.wanted_file : '';
    $('ask-text').textContent = wanted ? `This link shows the weights file "${wanted}": choose it (and its tokenizer files).` : '';
    $('ask').hidden = !wanted;
  }
  $('ask-choose').addEventListener('click', () => $('model-files').click());
  for (const id of ['model-files', 'model-folder'])
    $(id).addEventListener('change', async (e) => {
      const input = e.target;
      const files = Array.from(input.files);
      const rel = files[0] && files[0].webkitRelativePath;
      const folder = rel && rel.includes('/') ? rel.slice(0, rel.indexOf('/')) : '';
      input.value = '';
      await loadModelFiles(files, folder);
    });
  // Drag and drop: files, or a folder (its files, one level down).
  window.addEventListener('dragover', (e) => e.preventDefault());
  window.addEventListener('drop', async (e) => {
    e.preventDefault();
    if (!started) return;
    const items = Array.from(e.dataTransfer.items || []);
    const entries = items.map((i) => i.webkitGetAsEntry && i.webkitGetAsEntry()).filter(Boolean);
    const dirEntry = entries.find((en) => en.isDirectory);
    if (dirEntry) {
      const children = await new Promise((resolve, reject) => dirEntry.createReader().readEntries(resolve, reject));
      const files = await Promise.all(children.filter((c) => c.isFile).map((c) => new Promise((res, rej) => c.file(res, rej))));
      await loadModelFiles(files, dirEntry.name);
    } else {
      await loadModelFiles(Array.from(e.dataTransfer.files || []), '');
    }
  });

  const MIME = { png: 'image/png', json: 'application/json', csv: 'text/csv', zip: 'application/zip' };
  function save(name, parts) {
    const url = URL.createObjectURL(new Blob(parts, { type: MIME[name.split('.').pop()] || 'application/octet-stream' }));
    const a = document.createElement('a');
    a.href = url;
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  // A zip archive (files stored as they are, UTF-8 names), as Blob parts: the format's own limits are
  // 65,535 files and 4 GB.
  const CRC_TABLE = new Uint32Array(256).map((_, n) => {
    let c = n;
    for (let k = 0; k < 8; ++k) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  function crc32(bytes) {
    let c = 0xffffffff;
    for (let i = 0; i < bytes.length; ++i) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  }
  function zipParts(files) {
    const now = new Date();
    const time = (now.getHours() << 11) | (now.getMinutes() << 5) | (now.getSeconds() >> 1);
    const date = ((now.getFullYear() - 1980) << 9) | ((now.getMonth() + 1) << 5) | now.getDate();
    const parts = [], directory = [];
    let offset = 0;
    for (const f of files) {
      const name = utf8.encode(f.name), crc = crc32(f.data), size = f.data.length;
      const local = new DataView(new ArrayBuffer(30));
      local.setUint32(0, 0x04034b50, true);
      local.setUint16(4, 20, true);       // version needed: 2.0
      local.setUint16(6, 0x0800, true);   // names are UTF-8
      local.setUint16(10, time, true);
      local.setUint16(12, date, true);
      local.setUint32(14, crc, true);
      local.setUint32(18, size, true);    // stored: compressed size = size
      local.setUint32(22, size, true);
      local.setUint16(26, name.length, true);
      parts.push(local, name, f.data);
      const entry = new DataView(new ArrayBuffer(46));
      entry.setUint32(0, 0x02014b50, true);
      entry.setUint16(4, 20, true);
      entry.setUint16(6, 20, true);
      entry.setUint16(8, 0x0800, true);
      entry.setUint16(12, time, true);
      entry.setUint16(14, date, true);
      entry.setUint32(16, crc, true);
      entry.setUint32(20, size, true);
      entry.setUint32(24, size, true);
      entry.setUint16(28, name.length, true);
      entry.setUint32(42, offset, true);
      directory.push(entry, name);
      offset += 30 + name.length + size;
    }
    const directorySize = directory.reduce((n, p) => n + p.byteLength, 0);
    const end = new DataView(new ArrayBuffer(22));
    end.setUint32(0, 0x06054b50, true);
    end.setUint16(8, files.length, true);
    end.setUint16(10, files.length, true);
    end.setUint32(12, directorySize, true);
    end.setUint32(16, offset, true);
    return { parts: [...parts, ...directory, end], size: offset + directorySize + 22 };
  }

  // The files an export wrote: each its own download, or past a few, one zip archive (an export of 16,384
  // heads is one download, not 16,384). Returns what was downloaded, for the message.
  const ZIP_OVER = 8;
  function download(paths) {
    const files = paths.map((path) => {
      const data = Module.FS.readFile(path);
      Module.FS.unlink(path);
      return { name: path.slice(path.lastIndexOf('/') + 1), data };
    });
    if (files.length <= ZIP_OVER) {
      for (const f of files) save(f.name, [f.data]);
      return files[0].name + (files.length > 1 ? ` and ${files.length - 1} more` : '');
    }
    const total = files.reduce((n, f) => n + f.data.length, 0);
    if (files.length > 65535 || total >= 2 ** 32 - 2 ** 26)
      return `nothing: ${files.length} files of ${formatBytes(total)} are more than one zip archive holds ` +
             '(65,535 files, 4 GB)';
    // attnviz_weights_head0.csv -> attnviz_weights_csv.zip
    const first = files[0].name, ext = first.slice(first.lastIndexOf('.') + 1);
    const stem = first.slice(0, first.lastIndexOf('.')).replace(/_(head|layer)\d+$/, '');
    const name = `${stem}_${ext}.zip`;
    const zip = zipParts(files);
    save(name, zip.parts);
    return `${name} (${files.length} files, ${formatBytes(zip.size)})`;
  }

  // Strings go through the module's heap (not its stack: a pasted book chapter is fine).
  function call(name, arg) {
    const p = arg === undefined ? 0 : toHeap(arg);
    if (arg !== undefined && !p) return `the page ran out of memory (${formatBytes(arg.length)} did not fit)`;
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

  // What a value is, for the messages of the API's type checks.
  const typeName = (v) => (v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'string'
    ? 'a string' : typeof v === 'object' ? 'an object' : typeof v === 'undefined' ? 'undefined'
    : `the ${typeof v} ${String(v)}`);

  window.attnviz = {
    ready,
    setText(text) {
      needModule();
      if (typeof text !== 'string') return `TypeError: setText takes a string, not ${typeName(text)}`;
      return call('attnviz_set_text', text);
    },
    getResult() {
      needModule();
      const json = call('attnviz_result_json');
      if (!json.startsWith('{')) throw new Error(json);
      return JSON.parse(json);
    },
    getState() {
      needModule();
      return Object.fromEntries(JSON.parse(call('attnviz_state')));
    },
    setState(state) {
      needModule();
      if (state === null || typeof state !== 'object' || Array.isArray(state))
        return `TypeError: setState takes an object of {flag: value}, not ${typeName(state)}` +
               (typeof state === 'string' ? ' (for a link\'s hash, set location.hash)' : '');
      const pairs = [];
      for (const [k, v] of Object.entries(state)) {
        if (!['string', 'number', 'boolean'].includes(typeof v))
          return `TypeError: setState: '${wellFormed(k).slice(0, 40)}' is ${typeName(v)}, not a string or number`;
        pairs.push([wellFormed(k), wellFormed(String(v))]);
      }
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
    openModel(choice) {
      return openModel(Object.assign({ kind: 'seeded', size: 'gpt2-small', seed: 123, train: false }, choice));
    },
    loadModelFiles(files, folder) {
      return loadModelFiles(files, folder || '');
    },
    getModelResult() {
      needModule();
      const json = call('attnviz_model_json');
      return json ? JSON.parse(json) : null;
    },
    loads,
    setReadChunk(bytes) {
      readChunk = Math.max(1024, bytes | 0);
    },
    gpu: window.AttnvizGpu ? new window.AttnvizGpu() : null,
    // Benchmarks: wait for the GPU at the end of every frame, so frame times include its work.
    setFinish(on) {
      needModule();
      Module._attnviz_set_finish(on ? 1 : 0);
    },
  };

  // Follows the URL's hash (Back, Forward, an edited hash): the module applies it, or says why not.
  let appliedHash = null;
  async function followHash() {
    if (linkNamesModel()) await ensureVocab().catch(() => {});
    appliedHash = location.hash;
    followingLink = true;
    try {
      const error = call('attnviz_apply_state', JSON.stringify(hashPairs()));
      if (error) console.warn('attnviz: ' + error);
    } finally {
      followingLink = false;
    }
    askForWanted();
  }
  window.addEventListener('popstate', () => {
    if (started) followHash();  // before ready, the first view follows it (firstHeatmap)
  });

  const problem = missingFeature();
  if (problem) {
    showProblem('attnviz cannot run in this browser', problem);
    return;
  }

  // Keyboard input. Keys reach the module through Emscripten's GLFW (keydown, keypress and keyup on the
  // window). Text that comes without a keypress (a paste, keyboard.insertText, an input method) needs an
  // editable element with the focus, which the canvas is not: a transparent textarea holds the focus and
  // hands such text to the module, and stays empty.
  const keys = $('keys');
  let typedKey = false;  // a keypress is delivering this character to GLFW already
  window.addEventListener('keypress', () => { typedKey = true; }, true);
  for (const kind of ['keydown', 'keyup']) window.addEventListener(kind, () => { typedKey = false; }, true);
  keys.addEventListener('beforeinput', (e) => {
    e.preventDefault();
    const typed = typedKey;
    typedKey = false;
    if (!started || typed || !e.data) return;
    if (e.inputType === 'insertText' || e.inputType === 'insertReplacementText') insertText(e.data);
  });
  keys.addEventListener('input', () => { keys.value = ''; });  // what beforeinput could not stop
  window.addEventListener('paste', (e) => {
    if (!started) return;
    e.preventDefault();
    const text = e.clipboardData ? e.clipboardData.getData('text/plain') : '';
    if (text) insertText(text);
  }, true);
  // ImGui's copy (Ctrl+C, Ctrl+X in a text box) lands here during the key's frame; the copy event that
  // follows the key puts it on the clipboard.
  let copied = null;
  for (const kind of ['copy', 'cut'])
    window.addEventListener(kind, (e) => {
      if (copied === null) return;
      e.preventDefault();
      e.clipboardData.setData('text/plain', copied);
      copied = null;
    }, true);
  function insertText(text) {
    const error = call('attnviz_insert_text', text);
    if (error) console.warn('attnviz: ' + error);
  }
  // The keyboard stays with the page's text input when the canvas is clicked.
  $('canvas').addEventListener('mousedown', (e) => {
    e.preventDefault();
    keys.focus({ preventScroll: true });
  });

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
      initialState: () => {
        appliedHash = location.hash;
        return JSON.stringify(hashPairs());
      },
      toHeap,
      failed(why) {
        showProblem('attnviz could not start', why);
      },
      copy(text) {
        copied = text;
        // Outside a key's copy event (a menu), the asynchronous clipboard, where the browser allows it.
        if (navigator.clipboard) navigator.clipboard.writeText(text).catch(() => {});
      },
      // A text edit left pending while a slow recompute ran: computed in a task after the keys queued
      // meanwhile (input events come before timers), so they make one recompute.
      computeLater() {
        setTimeout(() => Module._attnviz_compute_pending(), 0);
      },
      stateChanged(json) {
        stateChanged(json);
        askForWanted();
      },
      download,
      chooseModelFiles(folder) {
        $(folder ? 'model-folder' : 'model-files').click();
      },
      openModel(json) {
        openModel(JSON.parse(json)).then((error) => { if (error) console.warn('attnviz: ' + error); });
      },
      firstHeatmap() {
        started = true;
        // A key is drawn at once, not at the next animation frame: these listeners come after the module's
        // own (registered when it made its window), so the key has reached the UI when they run. ImGui 1.86
        // sees keys as states, not events: a key with no keypress (Backspace, arrows, Enter, and Ctrl or Alt
        // with a key: copy, select all) needs a frame that finds it down, and one that finds it up before it
        // goes down again, or a quick second press reads as the first one held (and is lost). So both
        // keydown and keyup draw.
        const keyFrame = (e) => {
          if (e.key.length !== 1 || e.ctrlKey || e.metaKey || e.altKey) Module._attnviz_frame();
        };
        window.addEventListener('keypress', () => Module._attnviz_frame());
        window.addEventListener('keydown', keyFrame);
        window.addEventListener('keyup', keyFrame);
        $('overlay').hidden = true;
        keys.focus({ preventScroll: true });
        askForWanted();
        resolveReady(window.attnviz);
        // The hash moved while the page loaded: followed once this frame is over (the module is drawing).
        if (location.hash !== appliedHash) setTimeout(followHash, 0);
      },
    },
    // A link that names a model needs GPT-2's vocabulary before the module applies it.
    preRun: [() => {
      if (!linkNamesModel()) return;
      Module.addRunDependency('gpt2-vocabulary');
      ensureVocab().catch((e) => console.warn('attnviz: GPT-2\'s vocabulary did not load: ' + e.message))
        .finally(() => Module.removeRunDependency('gpt2-vocabulary'));
    }],
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
