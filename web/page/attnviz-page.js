// The page around the attnviz module (attnviz.js + attnviz.wasm, built from web/src/): checks what the
// browser has, shows loading and errors, hands the keyboard and the clipboard to the module, and starts it
// with the page's hooks. Its neighbours: module.js (calls into the module), url-state.js (the state in the
// URL), gl-state.js (WebGL state kept in the page), model-files.js (models and their files), hub.js (models
// from the Hugging Face hub), downloads.js (exports), api.js (window.attnviz).
import { $, call, markStarted, started, toHeap, wake } from './module.js';
import { rejectReady, resolveReady } from './api.js';
import { download } from './downloads.js';
import { askForWanted, ensureVocab, openModel, vocabulary } from './model-files.js';
import { openHub, showList } from './hub.js';
import { followIfMoved, initialState, linkNamesModel, stateChanged } from './url-state.js';
import { shadowCanvas } from './gl-state.js';

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

// Where the module can run: the keyboard and the clipboard handed to it, then the module loaded with the
// page's hooks.
function start() {
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
  for (const kind of ['pointermove', 'pointerdown', 'pointerup', 'pointerleave', 'wheel', 'keydown', 'keyup',
                      'keypress', 'focus', 'blur', 'resize'])
    window.addEventListener(kind, wake, { capture: true, passive: true });
  document.addEventListener('visibilitychange', wake);

  const canvas = $('canvas');
  canvas.addEventListener('webglcontextlost', (e) => {
    e.preventDefault();
    showProblem('The graphics context was lost', 'The browser took WebGL away from the page. Reload to start again.');
  });
  shadowCanvas(canvas);  // the state Dear ImGui asks for every frame, kept without a round trip to the GPU

  window.Module = {
    canvas,
    attnvizGpu: window.attnviz.gpu,
    attnvizHooks: {
      initialState,
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
      // The Train panel's "Continue from a folder...": a checkpoint folder (model-files.js continues it).
      chooseCheckpoint() {
        $('checkpoint-folder').click();
      },
      // Its "Choose a text file...": the text recipes' text (model-files.js reads it as a dropped one).
      chooseTrainText() {
        $('train-text').click();
      },
      vocabulary,
      openModel(json) {
        openModel(JSON.parse(json)).then((error) => { if (error) console.warn('attnviz: ' + error); });
      },
      // A row of the Model panel's hub list: the visitor asked for that model.
      fetchHub(repo) {
        openHub(repo).then((error) => { if (error) console.warn('attnviz: ' + error); });
      },
      firstHeatmap() {
        markStarted();
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
        showList();
        keys.focus({ preventScroll: true });
        askForWanted();
        resolveReady(window.attnviz);
        // The hash moved while the page loaded: followed once this frame is over (the module is drawing).
        followIfMoved();
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
    // The threaded module warns once that its main thread blocks: by design, it waits for the engine's threads
    // (Workers started with the module, so the wait is a pass's share of work, never a Worker's start).
    printErr: (text) => {
      if (!/^Blocking on the main thread is very dangerous/.test(text)) console.error(text);
    },
    setStatus(text) {
      if (text) $('loading-status').textContent = text;
    },
    onAbort(what) {
      showProblem('attnviz stopped', String(what));
    },
  };
  // WebAssembly threads need a SharedArrayBuffer, which browsers give only to a cross-origin isolated page
  // (served with COOP and COEP headers, as scripts/demo does; never from file://). Such a page loads the
  // threaded module (attnviz-mt.js); any other loads the single-thread one and the Compute section says why.
  const load = (file, fallback) => {
    const script = document.createElement('script');
    script.src = file;
    script.onerror = fallback ||
      (() => showProblem('attnviz could not load', `${file} did not load: is the page served with all its files?`));
    document.body.appendChild(script);
  };
  // Module.attnvizOneThread: why the single-thread module (web/src/threads.cpp words it).
  if (window.crossOriginIsolated) {
    load('attnviz-mt.js', () => {
      Module.attnvizOneThread = 'no-threaded-module';
      load('attnviz.js');
    });
  } else {
    Module.attnvizOneThread = location.protocol === 'file:' ? 'file' : 'not-isolated';
    load('attnviz.js');
  }
}

const problem = missingFeature();
if (problem) showProblem('attnviz cannot run in this browser', problem);
else start();
