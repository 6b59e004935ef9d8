// Models: GPT-2's vocabulary, the progress panel, opening a model, and a model's files read into the
// module (chosen, dropped, or asked for by a link that names them).
import { $, call, formatBytes, needModule, started, wake } from './module.js';

// GPT-2's vocabulary (site/gpt2/, same origin), fetched once, before the first model opens (or a text recipe
// needs it); a fetch that failed is tried again the next time.
let vocabFiles = null;
function fetchVocab() {
  if (!vocabFiles)
    vocabFiles = Promise.all(['encoder.json', 'vocab.bpe'].map(async (f) => {
      const r = await fetch('gpt2/' + f);
      if (!r.ok) throw new Error(`gpt2/${f}: HTTP ${r.status}`);
      return [f, new Uint8Array(await r.arrayBuffer())];
    })).catch((e) => {
      vocabFiles = null;
      throw e;
    });
  return vocabFiles;
}
let vocabWritten = false;
export async function ensureVocab() {
  const files = await fetchVocab();
  if (vocabWritten) return;
  try { Module.FS.mkdir('/gpt2'); } catch (e) { /* there already */ }
  for (const [f, data] of files) Module.FS.writeFile('/gpt2/' + f, data);
  vocabWritten = true;
}
// For the Train panel, whose text recipes tokenize with GPT-2's vocabulary when no model is open (asked from
// the module, web/src/hooks.cpp): '' when it is in the module; else it is fetched now, a frame is drawn once it
// is there (the control pressed then goes on), and 'fetching' is returned; or why it did not load (once: the
// next ask fetches again).
let vocabFetching = false, vocabFailed = '';
export function vocabulary() {
  if (vocabWritten) return '';
  if (vocabFailed) {
    const why = vocabFailed;
    vocabFailed = '';
    return why;
  }
  if (!vocabFetching) {
    vocabFetching = true;
    ensureVocab().catch((e) => {
      vocabFailed = 'GPT-2\'s vocabulary did not load: ' + e.message;
    }).finally(() => {
      vocabFetching = false;
      wake();
    });
  }
  return 'fetching';
}

// The progress panel of a long operation (reading a model, drawing a seeded one), with Cancel.
let cancelled = false;
let onCancel = null;  // what Cancel stops besides the reading here (hub.js: its downloads)
export function setOnCancel(f) {
  onCancel = f;
}
export function showBusy(text, fraction, cancellable) {
  $('busy-text').textContent = text;
  const bar = $('busy-progress');
  if (fraction === null) bar.removeAttribute('value'); else bar.value = fraction;
  $('busy-cancel').hidden = !cancellable;
  $('busy').hidden = false;
}
export const hideBusy = () => { $('busy').hidden = true; };
$('busy-cancel').addEventListener('click', () => {
  cancelled = true;
  if (onCancel) onCancel();
});
// Lets the browser paint (the progress panel) before the module blocks the thread.
export const painted = () => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));

let opening = Promise.resolve('');
// One model operation at a time: a second waits for the first.
export function serially(job) {
  opening = opening.then(job, job);
  return opening;
}

export async function openModel(choice) {
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
export function setReadChunk(bytes) {
  readChunk = Math.max(1024, bytes | 0);
}
export const loads = [];
// The files read beside the weights, each with the engine's own cap (hub.js has the same), checked before it is
// read: a tokenizer (tokenizer.json, which the engine prefers, else GPT-2's two files) and config.json.
const SIDE_FILES = new Map([['tokenizer.json', 64 << 20], ['vocab.json', 64 << 20], ['merges.txt', 64 << 20],
                            ['encoder.json', 64 << 20], ['vocab.bpe', 64 << 20], ['config.json', 1 << 20]]);
// A folder's or file's name as one path component of the module's file system: no '/' or NUL, and never '.' or
// '..' (which would name the folder above).
const safeName = (n) => n.replace(/[\/\0]/g, '_').replace(/^\.\.?$/, '_');
// An empty folder `dir` one level under a top folder (/models, /checkpoints) in the module's file system (what
// an earlier open left there removed); returns the function that removes it again.
export function freshModelDir(dir) {
  const FS = Module.FS;
  const remove = () => {
    try {
      for (const entry of FS.readdir(dir)) if (entry !== '.' && entry !== '..') FS.unlink(dir + '/' + entry);
      FS.rmdir(dir);
    } catch (e) { /* nothing there */ }
  };
  remove();
  try { FS.mkdir(dir.slice(0, dir.lastIndexOf('/'))); } catch (e) { /* there already */ }
  FS.mkdir(dir);
  return remove;
}

export async function loadModelFiles(files, folder) {
  needModule();
  return serially(async () => {
    const list = Array.from(files || []);
    const weights = list.filter((f) => f.name.toLowerCase().endsWith('.safetensors'));
    if (weights.length !== 1)
      return refuse(`give one .safetensors file (with its tokenizer files, or a folder): got ${weights.length}`);
    const file = weights[0];
    const name = safeName(folder || file.name);
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
    for (const f of list)
      if (SIDE_FILES.has(f.name) && f.size > SIDE_FILES.get(f.name))
        return refuse(`${f.name} is larger than the ${formatBytes(SIDE_FILES.get(f.name))} it should be`);
    await ensureVocab().catch(() => {});  // a file without its own vocabulary uses GPT-2's
    const dir = '/models/' + name;
    const FS = Module.FS;
    const remove = freshModelDir(dir);
    for (const f of list)
      if (SIDE_FILES.has(f.name)) FS.writeFile(dir + '/' + f.name, new Uint8Array(await f.arrayBuffer()));
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
// A training run's checkpoint folder (Save model's, or attnviz-cli train --out's: model.safetensors,
// optimizer.safetensors with the run state, config.json), chosen with the Train panel's "Continue from a
// folder..." or given as any folder is (the Model panel's chooser, a drop) when it holds optimizer.safetensors:
// its files are copied into /checkpoints/NAME in the module's file system and the Train panel continues from
// there (continue_training: paused, the message says from which step; its refusals are one line and keep the
// session it had). A book run's text is the one the panel would train on: a dropped text file, else the
// sentence box. The copy is removed once read: the session holds what it needs.
// A checkpoint's set (engine/include/attnviz/io/checkpoint.hpp): its files, the manifest that binds them
// (checkpoint.json, so that a torn set is refused as the native reader refuses it) and a cut-short commit's
// pending manifest with the files it renames, which the reader finishes or refuses.
const CHECKPOINT_SET = [['model.safetensors', 0], ['optimizer.safetensors', 0], ['config.json', 1 << 20],
                        ['vocab.json', 64 << 20], ['merges.txt', 64 << 20], ['tokenizer.json', 64 << 20]];
const CHECKPOINT_FILES = new Map([...CHECKPOINT_SET, ...CHECKPOINT_SET.map(([f, cap]) => [f + '.tmp', cap]),
                                  ['checkpoint.json', 1 << 20], ['checkpoint.pending.json', 1 << 20]]);
export const isCheckpoint = (files) => files.some((f) => f.name === 'optimizer.safetensors');
export async function loadCheckpointFiles(files, folder) {
  needModule();
  return serially(async () => {
    // the folder's own files (a chosen folder lists its subfolders' too)
    const list = Array.from(files || []).filter((f) => CHECKPOINT_FILES.has(f.name) &&
      (f.webkitRelativePath || 'x/').split('/').length === 2);
    const name = safeName(folder || 'checkpoint');
    const fail = (why) => {
      call('attnviz_set_message', why);
      wake();
      return why;
    };
    for (const f of list)
      if (CHECKPOINT_FILES.get(f.name) && f.size > CHECKPOINT_FILES.get(f.name))
        return fail(`${name}: ${f.name} is larger than the ${formatBytes(CHECKPOINT_FILES.get(f.name))} it should be`);
    // The weights and the optimizer's two moments, read whole, then unpacked as float32: refused before
    // anything is read when that cannot fit.
    const bytes = list.reduce((n, f) => n + f.size, 0), free = attnviz.status().memory.free;
    if (!(2 * bytes <= free))
      return fail(`${name}'s checkpoint is ${formatBytes(bytes)}, which needs ${formatBytes(2 * bytes)} to continue: ` +
                  `the page can hold ${formatBytes(free)}; use the desktop app (attnviz)`);
    await ensureVocab().catch(() => {});  // a book run tokenizes its text with GPT-2's vocabulary
    const dir = '/checkpoints/' + name, FS = Module.FS;
    let error, remove = () => {};
    try {
      remove = freshModelDir(dir);
      for (const f of list) {
        showBusy(`Reading ${name}/${f.name} (${formatBytes(f.size)})…`, null, false);
        await painted();
        FS.writeFile(dir + '/' + f.name, new Uint8Array(await f.arrayBuffer()));
      }
      showBusy(`Continuing ${name}…`, null, false);
      await painted();
      error = call('attnviz_train', JSON.stringify({ action: 'continue', path: dir, name }));
    } catch (e) {
      error = `reading ${name} failed: ${e.message}`;
    } finally {
      remove();
      hideBusy();
    }
    // The message line says it either way (the Train panel says a refusal too).
    if (error) return fail(error);
    wake();
    return '';
  });
}
// A chosen folder or dropped files: a checkpoint's go to the Train panel, any other to the model view.
export const loadFiles = (files, folder) =>
  isCheckpoint(files) ? loadCheckpointFiles(files, folder) : loadModelFiles(files, folder);

export function refuse(why) {
  call('attnviz_set_message', why);
  wake();
  return why;
}

// A link naming a weights file (#model=file:NAME) asks for it.
export function askForWanted() {
  const wanted = started ? call('attnviz_wanted_file') : '';
  $('ask-text').textContent = wanted ? `This link shows the weights file "${wanted}": choose it (and its tokenizer files).` : '';
  $('ask').hidden = !wanted;
}
$('ask-choose').addEventListener('click', () => $('model-files').click());
// The Train panel's "Choose a text file...": the file chosen is the book recipe's text, as a dropped one is.
$('train-text').addEventListener('change', async (e) => {
  const file = e.target.files[0];
  e.target.value = '';
  if (file) await loadTrainText(file);
});
for (const id of ['model-files', 'model-folder', 'checkpoint-folder'])
  $(id).addEventListener('change', async (e) => {
    const input = e.target;
    const files = Array.from(input.files);
    const rel = files[0] && files[0].webkitRelativePath;
    const folder = rel && rel.includes('/') ? rel.slice(0, rel.indexOf('/')) : '';
    input.value = '';
    // the Train panel's chooser continues whatever the folder holds (a folder with no run state is refused)
    if (id === 'checkpoint-folder') await loadCheckpointFiles(files, folder);
    else await loadFiles(files, folder);
  });
// A dropped text file (one file, named .txt, .md or .text, or of a text/* type, and no model's file such as
// merges.txt), or any file chosen with the Train panel's "Choose a text file...", is the book recipe's text in the
// Train panel; the module checks it (UTF-8, not empty, at most
// status().train.text.max bytes, long enough for a batch) and keeps the last good text on a refusal. Too large
// a file is refused by its size, unread.
const isModelName = (name) => /\.safetensors$/i.test(name) || SIDE_FILES.has(name) || name === 'tokenizer_config.json';
export const isTrainText = (files) => files.length === 1 && !isModelName(files[0].name) &&
  (/\.(txt|md|text)$/i.test(files[0].name) || (files[0].type || '').startsWith('text/'));
export async function loadTrainText(file) {
  needModule();
  return serially(async () => {
    const FS = Module.FS;
    try { FS.mkdir('/train-text'); } catch (e) { /* there already */ }
    const path = '/train-text/dropped', max = attnviz.status().train.text.max;
    try {
      await ensureVocab();  // the book recipe tokenizes with GPT-2's vocabulary (unless a model is open)
      FS.writeFile(path, file.size <= max ? new Uint8Array(await file.arrayBuffer()) : new Uint8Array(0));
      return call('attnviz_train_text', JSON.stringify({ name: file.name, path, size: file.size }));
    } catch (e) {
      return refuse(`reading ${file.name} failed: ${e.message}`);
    } finally {
      try { FS.unlink(path); } catch (e) { /* gone */ }
      wake();
    }
  });
}

// Drag and drop: files, or a folder (its files, one level down); one text file, or a checkpoint's files, go to the
// Train panel.
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
    await loadFiles(files, dirEntry.name);
  } else {
    const files = Array.from(e.dataTransfer.files || []);
    if (isTrainText(files)) await loadTrainText(files[0]);
    else await loadFiles(files, '');
  }
});
