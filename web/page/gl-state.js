// WebGL state the page keeps itself instead of asking the browser every frame.
//
// Dear ImGui's OpenGL backend saves the GL state before it draws and restores it afterwards, so every frame asks
// for the scissor box and the six blend functions and equations (glGetIntegerv). Chromium answers those with a
// synchronous round trip to its GPU process, and the first of them waits there until every command queued
// before it has run: the frame's texture uploads, its clear. Measured in the page at T = 16 (headless Chromium
// 156, software GL), that was 3-6 ms of each setText's two frames, the main thread standing still while the
// GPU process caught up.
//
// The page changes these states only through the context's own calls (scissor, blendFunc, blendFuncSeparate,
// blendEquation, blendEquationSeparate: Emscripten's GL calls them on the context), so shadowGlState(gl) wraps
// those calls to note what they set, and answers getParameter for these states from the notes. A call whose
// arguments the notes cannot vouch for (one WebGL may refuse, or a constant-colour factor, whose rules are
// more involved) drops the affected notes, and the browser is asked again. From the first loss of the context
// on (a restored context starts from the defaults), or from the first blend call of OES_draw_buffers_indexed
// (which sets the blend state per draw buffer), the browser answers every query.
const SCISSOR_BOX = 0x0c10;
const BLEND_EQUATION_RGB = 0x8009, BLEND_EQUATION_ALPHA = 0x883d;
const BLEND_DST_RGB = 0x80c8, BLEND_SRC_RGB = 0x80c9, BLEND_DST_ALPHA = 0x80ca, BLEND_SRC_ALPHA = 0x80cb;
export const SHADOWED = [SCISSOR_BOX, BLEND_EQUATION_RGB, BLEND_EQUATION_ALPHA, BLEND_SRC_RGB, BLEND_DST_RGB,
                         BLEND_SRC_ALPHA, BLEND_DST_ALPHA];

// Blend factors and equations that WebGL2 takes in any position, with no rule between them: ZERO, ONE, the
// source and destination colours and alphas and their complements; FUNC_ADD, FUNC_SUBTRACT,
// FUNC_REVERSE_SUBTRACT, MIN, MAX.
const FACTORS = new Set([0, 1, 0x0300, 0x0301, 0x0302, 0x0303, 0x0304, 0x0305, 0x0306, 0x0307]);
const EQUATIONS = new Set([0x8006, 0x800a, 0x800b, 0x8007, 0x8008]);

const isInt32 = (x) => Number.isInteger(x) && x >= -2147483648 && x <= 2147483647;

// Wraps `gl` (a WebGL2 context) once; returns it.
export function shadowGlState(gl) {
  if (gl.attnvizShadowed) return gl;
  const real = {};
  for (const name of ['getParameter', 'scissor', 'blendFunc', 'blendFuncSeparate', 'blendEquation',
                      'blendEquationSeparate'])
    real[name] = gl[name];
  const notes = new Map();
  let given = false;  // the browser answers everything from now on
  const giveUp = () => {
    given = true;
    notes.clear();
  };
  const stillOurs = () => {
    if (!given && gl.isContextLost()) giveUp();
    return !given;
  };
  gl.canvas?.addEventListener?.('webglcontextlost', giveUp);
  // +0 for -0: the browser gives back the enum, never -0
  const note = (p, value, trusted) => {
    if (trusted && stillOurs()) notes.set(p, typeof value === 'number' ? value + 0 : value);
    else notes.delete(p);
  };
  const shadow = { real: (p) => real.getParameter.call(gl, p), passedOn: 0 };  // passedOn: for tests

  gl.getParameter = function (p) {
    if (stillOurs() && notes.has(p)) {
      const v = notes.get(p);
      return v instanceof Int32Array ? v.slice() : v;  // a fresh array each time, as the browser gives
    }
    if (SHADOWED.includes(p)) ++shadow.passedOn;
    return real.getParameter.call(this, p);
  };
  // OES_draw_buffers_indexed sets the blend state per draw buffer, and the plain query reads draw buffer 0's:
  // its blend calls give up. (Emscripten enables the extension; neither Dear ImGui nor attnviz calls them.)
  const getExtension = gl.getExtension;
  gl.getExtension = function (name) {
    const ext = getExtension.call(this, name);
    if (ext && String(name).toLowerCase() === 'oes_draw_buffers_indexed' && !ext.attnvizShadowed) {
      for (const m of ['blendEquationiOES', 'blendEquationSeparateiOES', 'blendFunciOES', 'blendFuncSeparateiOES']) {
        const call = ext[m];
        if (typeof call === 'function')
          ext[m] = function (...args) {
            giveUp();
            return call.apply(this, args);
          };
      }
      ext.attnvizShadowed = true;
    }
    return ext;
  };
  gl.scissor = function (x, y, width, height) {
    real.scissor.call(this, x, y, width, height);
    note(SCISSOR_BOX, Int32Array.of(x, y, width, height), [x, y, width, height].every(isInt32) && width >= 0 &&
                                                          height >= 0);
  };
  const blend = (srcRgb, dstRgb, srcAlpha, dstAlpha) => {
    const ok = [srcRgb, dstRgb, srcAlpha, dstAlpha].every((f) => FACTORS.has(f));
    note(BLEND_SRC_RGB, srcRgb, ok);
    note(BLEND_DST_RGB, dstRgb, ok);
    note(BLEND_SRC_ALPHA, srcAlpha, ok);
    note(BLEND_DST_ALPHA, dstAlpha, ok);
  };
  gl.blendFunc = function (src, dst) {
    real.blendFunc.call(this, src, dst);
    blend(src, dst, src, dst);
  };
  gl.blendFuncSeparate = function (srcRgb, dstRgb, srcAlpha, dstAlpha) {
    real.blendFuncSeparate.call(this, srcRgb, dstRgb, srcAlpha, dstAlpha);
    blend(srcRgb, dstRgb, srcAlpha, dstAlpha);
  };
  const equation = (rgb, alpha) => {
    const ok = EQUATIONS.has(rgb) && EQUATIONS.has(alpha);
    note(BLEND_EQUATION_RGB, rgb, ok);
    note(BLEND_EQUATION_ALPHA, alpha, ok);
  };
  gl.blendEquation = function (mode) {
    real.blendEquation.call(this, mode);
    equation(mode, mode);
  };
  gl.blendEquationSeparate = function (rgb, alpha) {
    real.blendEquationSeparate.call(this, rgb, alpha);
    equation(rgb, alpha);
  };
  // What the context starts with, asked once while nothing is queued yet.
  for (const p of SHADOWED) {
    const v = real.getParameter.call(gl, p);
    note(p, v, v instanceof Int32Array || typeof v === 'number');
  }
  // for tests: the browser's own answer, and how many queries of these states went to the browser
  gl.attnvizShadowed = shadow;
  return gl;
}

// The canvas's WebGL2 context, once made (by the module's GLFW), comes shadowed.
export function shadowCanvas(canvas) {
  const getContext = canvas.getContext;
  canvas.getContext = function (kind, ...rest) {
    const ctx = getContext.call(this, kind, ...rest);
    return ctx && kind === 'webgl2' ? shadowGlState(ctx) : ctx;
  };
}
