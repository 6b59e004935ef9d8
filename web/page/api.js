// window.attnviz, the page's API for tests and scripting, over the module (attnviz.js + attnviz.wasm, built
// from web/src/):
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
//   attnviz.hub            models from the Hugging Face hub (hub.js): models (the Model panel's list),
//                           open(repo, {rev}) a promise of '' or why not, endpoint() / setEndpoint(url) ('' or
//                           why not), stored(repo, rev) the manifest kept in this browser or null, forget(repo,
//                           rev), loads (the progress steps: {repo, phase, file, loaded, total, visible})
//   attnviz.getModelResult()  the whole model's last pass in attnviz-cli --model --json's format (null: none),
//                           with the causal tools' keys (lens, attribution, ablated, patching: docs/lens.md) that
//                           the state's lens, attribute, target, versus, position, ablate and patch ask for
//   attnviz.loads           what the model loads did: [{name, loaded, total, visible}] per piece read
//   attnviz.train(c)        what the Train panel's controls do: {action: 'reset' (with recipe: 'induction' |
//                           'book' | 'custom') | 'start' | 'pause' | 'step' | 'snapshot' (with snapshot: N, -1 the
//                           latest) | 'save' | 'csv' | 'png' | 'open' | 'continue' (with path: a checkpoint folder in
//                           the module's file system, name: what the message calls it)}; returns '' or why not.
//                           status().train says where it stands: steps, losses and in-context scores (from step
//                           continued_from + 1), snapshots, the shown snapshot's step and head kinds, the
//                           dropped or chosen text ({name, size, max}), the control waiting for GPT-2's
//                           vocabulary (waiting), and the panel's controls as the last frame drew
//                           them ({start: {x, y, w, h, visible, hovered}, ...}) for tests that click them
import { call, heapF32, needModule, wellFormed } from './module.js';
import { loadModelFiles, loads, openModel, setReadChunk } from './model-files.js';
import { forget, getEndpoint, hubLoads, hubModels, openHub, setEndpoint, stored } from './hub.js';

export let resolveReady, rejectReady;
export const ready = new Promise((resolve, reject) => {
  resolveReady = resolve;
  rejectReady = reject;
});
ready.catch(() => {});  // the page shows the problem; a script that awaits ready gets the rejection

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
    return ptr ? heapF32().slice(ptr >> 2, (ptr >> 2) + count) : null;
  },
  openModel(choice) {
    return openModel(Object.assign({ kind: 'seeded', size: 'gpt2-small', seed: 123, train: false }, choice));
  },
  loadModelFiles(files, folder) {
    return loadModelFiles(files, folder || '');
  },
  train(c) {
    needModule();
    if (c === null || typeof c !== 'object' || Array.isArray(c))
      return `TypeError: train takes an object {action, ...}, not ${typeName(c)}`;
    return call('attnviz_train', JSON.stringify(c));
  },
  getModelResult() {
    needModule();
    const json = call('attnviz_model_json');
    return json ? JSON.parse(json) : null;
  },
  loads,
  hub: {
    models: hubModels,
    open: (repo, options) => openHub(repo, options || {}),
    endpoint: getEndpoint,
    setEndpoint,
    stored,
    forget,
    loads: hubLoads,
  },
  setReadChunk(bytes) {
    setReadChunk(bytes);
  },
  gpu: window.AttnvizGpu ? new window.AttnvizGpu() : null,
  // Benchmarks: wait for the GPU at the end of every frame, so frame times include its work.
  setFinish(on) {
    needModule();
    Module._attnviz_set_finish(on ? 1 : 0);
  },
};
