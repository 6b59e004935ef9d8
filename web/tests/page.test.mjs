// End-to-end tests of the browser page in headless Chromium (run: node --test web/tests/).
//   ATTNVIZ_SITE        the built site (default build/wasm-release/web/site)
//   ATTNVIZ_CLI         a native attnviz-cli to compare numbers with (scripts/test passes the release build's)
//   ATTNVIZ_CLI_JS      the same CLI built to WebAssembly (run under node), for an exact comparison
//   ATTNVIZ_ARTIFACTS   where the screenshot goes (default build/wasm-release/web)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repo, start, openPage, load, drawn, heatmapClip, clean } from './harness.mjs';

const artifacts = process.env.ATTNVIZ_ARTIFACTS || join(repo, 'build', 'wasm-release', 'web');
let env;
before(async () => {
  env = await start();
});
after(async () => {
  await env?.close();
});


// Every number of two results in the CLI's JSON format, side by side: the largest absolute difference
// (the engine block, with its timing and ISA, is not compared).
function maxDiff(a, b, path = '') {
  if (typeof a === 'number' || typeof b === 'number') {
    assert.equal(typeof a, typeof b, `${path}: ${a} vs ${b}`);
    if (a === b) return 0;
    return Math.abs(a - b);
  }
  if (Array.isArray(a)) {
    assert.ok(Array.isArray(b), `${path} is an array on one side only`);
    assert.equal(a.length, b.length, `${path} lengths`);
    return a.reduce((m, x, i) => Math.max(m, maxDiff(x, b[i], `${path}[${i}]`)), 0);
  }
  if (a && typeof a === 'object') {
    const keys = Object.keys(a).filter((k) => k !== 'engine');
    assert.deepEqual(keys.sort(), Object.keys(b).filter((k) => k !== 'engine').sort(), `${path} keys`);
    return keys.reduce((m, k) => Math.max(m, maxDiff(a[k], b[k], `${path}.${k}`)), 0);
  }
  assert.equal(a, b, path);
  return 0;
}

test('the page loads with no console error and no request outside 127.0.0.1', async () => {
  const { page, context, log } = await openPage(env);
  const ms = await load(page, env.url);
  const files = new Set(log.requests.map((u) => new URL(u).pathname));
  assert.deepEqual([...files].sort(), ['/', '/api.js', '/attnviz-gpu.js', '/attnviz-page.js', '/attnviz.js', '/attnviz.wasm',
                                       '/downloads.js', '/gl-state.js', '/hub.js', '/model-files.js', '/module.js',
                                       '/url-state.js']);
  const r = await page.evaluate(() => attnviz.getResult());
  assert.deepEqual(r.tokens, ['Your', 'journey', 'starts', 'with', 'one', 'step']);
  assert.equal(await page.locator('#overlay').isHidden(), true, 'the loading overlay is gone');
  mkdirSync(artifacts, { recursive: true });
  await page.screenshot({ path: join(artifacts, 'page.png') });
  console.log(`# first heatmap ${ms.toFixed(0)} ms after navigation; screenshot ${join(artifacts, 'page.png')}`);
  clean(log);
  await context.close();
});

test('typing changes the result and the heatmap pixels, and nothing else moves them', async () => {
  const { page, context, log } = await openPage(env);
  await load(page, env.url);
  await drawn(page);
  const clip = await heatmapClip(page);
  const before = await page.screenshot({ clip });
  await page.waitForTimeout(200);
  assert.ok(before.equals(await page.screenshot({ clip })), 'the heatmaps are steady without input');
  const generation = (await page.evaluate(() => attnviz.status())).generation;
  // An idle page draws nothing; the mouse wakes it.
  const idle = (await page.evaluate(() => attnviz.status())).frames;
  await page.waitForTimeout(300);
  assert.equal((await page.evaluate(() => attnviz.status())).frames, idle, 'no frames while idle');
  await page.mouse.move(20, 20);
  await page.waitForFunction((f) => attnviz.status().frames > f, idle);

  await page.keyboard.type(' today');  // real key events: the sentence box has the keyboard on start
  await page.waitForFunction((g) => attnviz.status().generation >= g + 6, generation);
  await drawn(page);
  const r = await page.evaluate(() => attnviz.getResult());
  assert.deepEqual(r.tokens, ['Your', 'journey', 'starts', 'with', 'one', 'step', 'today']);
  assert.equal(r.heads[0].weights.length, 7);
  const after = await page.screenshot({ clip: await heatmapClip(page) });
  assert.ok(!before.equals(after), 'the heatmap pixels changed');

  // Backspace through a word: the result follows the text box.
  for (let i = 0; i < 6; ++i) await page.keyboard.press('Backspace');
  await page.waitForFunction(() => attnviz.getResult().tokens.length === 6);
  clean(log);
  await context.close();
});

test('hovering a cell with the mouse selects that cell', async () => {
  const { page, context, log } = await openPage(env);
  await load(page, env.url);
  await drawn(page);
  const { heatmaps } = await page.evaluate(() => attnviz.status());
  const h = heatmaps.find((m) => m.slot === 1);
  const [row, col] = [4, 2];
  await page.mouse.move(h.origin_x + (col + 0.5) * h.cell, h.origin_y + (row + 0.5) * h.cell);
  await page.waitForFunction(() => attnviz.status().hover !== null);
  assert.deepEqual((await page.evaluate(() => attnviz.status())).hover, { head: 1, row, col });
  clean(log);
  await context.close();
});

test('the book sentence gives the numbers attnviz-cli --json gives', async (t) => {
  const { page, context, log } = await openPage(env);
  const cases = [
    { hash: '', args: [] },
    { hash: '#variant=wrapper&heads=3&dropout=0.5&seed=7',
      args: ['--variant', 'wrapper', '--heads', '3', '--dropout', '0.5', '--seed', '7'] },
    { hash: '#variant=causal&d-in=3&d-out=4&qkv-bias&no-mask',
      args: ['--variant', 'causal', '--d-out', '4', '--qkv-bias', '--no-mask'] },
  ];
  const cli = process.env.ATTNVIZ_CLI;
  const cliJs = process.env.ATTNVIZ_CLI_JS;
  if (!cli && !cliJs) t.skip('neither ATTNVIZ_CLI nor ATTNVIZ_CLI_JS is set');
  for (const c of cases) {
    await load(page, env.url + c.hash);
    const got = await page.evaluate(() => attnviz.getResult());
    if (cli) {
      const want = JSON.parse(execFileSync(cli, ['--json', ...c.args], { encoding: 'utf8' }));
      const d = maxDiff(got, want);
      console.log(`# ${c.hash || '(defaults)'}: largest difference from native attnviz-cli ${d.toExponential(2)}`);
      assert.ok(d <= 1e-6, `differs from the native CLI by ${d}`);
    }
    if (cliJs) {
      // With relaxed SIMD, as Chromium runs it, the CLI's module runs the page's fused kernels too
      // (engine/simd/wasm_fma.hpp): node 20 has it behind this flag.
      const want = JSON.parse(execFileSync('node', ['--no-experimental-fetch', '--experimental-wasm-relaxed-simd', cliJs,
                                                    '--json', ...c.args], { encoding: 'utf8' }));
      assert.equal(maxDiff(got, want), 0, 'the same WebAssembly engine gives the same floats');
    }
    await page.evaluate(() => (location.hash = ''));  // the next load is a real navigation
  }
  clean(log);
  await context.close();
});

test('the URL holds the state: links reopen it, back and forward walk it', async () => {
  const { page, context, log } = await openPage(env);
  const link = env.url + '#text=Hello+attention+world&variant=causal&stage=scores&palette=viridis&head=0';
  await load(page, link);
  let state = await page.evaluate(() => attnviz.getState());
  assert.deepEqual(state, { text: 'Hello attention world', variant: 'causal', stage: 'scores', palette: 'viridis',
                            head: '0' });
  assert.equal((await page.evaluate(() => attnviz.getResult())).config.variant, 'causal');

  // An edit after a pause is a new history entry; the URL follows.
  await page.keyboard.type(' again');
  await page.waitForFunction(() => location.hash.includes('again'));
  await page.waitForTimeout(1100);
  await page.evaluate(() => attnviz.setState({ ...attnviz.getState(), variant: 'mha', heads: '4', 'd-out': '4' }));
  await page.waitForFunction(() => location.hash.includes('heads=4'));
  const third = page.url();

  await page.goBack();
  await page.waitForFunction(() => attnviz.getResult().config.variant === 'causal');
  assert.deepEqual((await page.evaluate(() => attnviz.getResult())).tokens, ['Hello', 'attention', 'world', 'again']);
  await page.goBack();
  await page.waitForFunction(() => attnviz.getResult().tokens.length === 3);
  await page.goForward();
  await page.goForward();
  await page.waitForFunction(() => attnviz.getResult().config.num_heads === 4);
  assert.equal(page.url(), third);

  // The same link in a fresh tab restores the same state and result.
  const copy = await openPage(env);
  await load(copy.page, third);
  assert.deepEqual(await copy.page.evaluate(() => attnviz.getState()), await page.evaluate(() => attnviz.getState()));
  assert.equal(maxDiff(await copy.page.evaluate(() => attnviz.getResult()),
                       await page.evaluate(() => attnviz.getResult())), 0);
  clean(log);
  clean(copy.log);
  await copy.context.close();
  await context.close();
});

test('bad links and bad input are explained and keep the last good view', async () => {
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#variant=nope&text=Still+here');
  let s = await page.evaluate(() => attnviz.status());
  assert.match(s.message, /variant/);
  assert.deepEqual((await page.evaluate(() => attnviz.getResult())).tokens.length, 6, 'defaults instead');

  // Shapes that don't divide: the engine says why, the last result stays on screen.
  const err = await page.evaluate(() => attnviz.setState({ 'd-out': '3', heads: '2' }));
  assert.match(err, /divisible/);
  assert.equal((await page.evaluate(() => attnviz.getResult())).config.d_out, 2);
  assert.equal(await page.evaluate(() => attnviz.setState({})), '', 'back to the defaults');
  assert.equal(await page.evaluate(() => attnviz.setText('')), 'the text is empty: type at least one word');
  const long = await page.evaluate(() => attnviz.setText('word '.repeat(5000)));
  assert.match(long, /context/);
  assert.equal(await page.evaluate(() => attnviz.setText('Back to normal')), '');
  assert.equal((await page.evaluate(() => attnviz.getResult())).tokens.length, 3);
  await page.evaluate(() => (location.hash = '#d-in=abc'));
  await page.waitForFunction(() => attnviz.status().message.includes('d-in'));
  assert.equal((await page.evaluate(() => attnviz.getResult())).tokens.length, 3, 'a bad link changes nothing');
  clean(log);
  await context.close();
});

test('exports download as files', async () => {
  const { page, context, log } = await openPage(env);
  await load(page, env.url + '#stage=weights');
  const got = {};
  const files = { json: 1, csv: 2, png: 1, heads: 2 };  // the downloads each export starts
  for (const kind of ['json', 'csv', 'png', 'heads']) {
    const downloads = [];
    page.on('download', (d) => downloads.push(d));
    assert.equal(await page.evaluate((k) => attnviz.exportFiles(k), kind), '');
    await page.waitForFunction(() => attnviz.status().message.startsWith('downloaded'), null, { timeout: 5000 })
      .catch(async (e) => { console.log(kind, await page.evaluate(() => attnviz.status().message)); throw e; });
    while (downloads.length < files[kind]) await new Promise((resolve) => setTimeout(resolve, 10));
    page.removeAllListeners('download');
    got[kind] = await Promise.all(downloads.map(async (d) => ({ name: d.suggestedFilename(),
                                                                  body: readFileSync(await d.path()) })));
    await page.evaluate(() => attnviz.setText('Your journey starts with one step'));  // resets the message
  }
  assert.deepEqual(got.json.map((f) => f.name), ['attnviz.json']);
  assert.equal(maxDiff(JSON.parse(got.json[0].body), await page.evaluate(() => attnviz.getResult())), 0);
  assert.deepEqual(got.csv.map((f) => f.name), ['attnviz_weights_head0.csv', 'attnviz_weights_head1.csv']);
  const rows = got.csv[1].body.toString().trim().split('\n').map((l) => l.split(','));
  assert.deepEqual(rows[0], ['token', 'Your', 'journey', 'starts', 'with', 'one', 'step']);
  const weights = (await page.evaluate(() => attnviz.getResult())).heads[1].weights;
  // CSV has %.9g, JSON the shortest form: both read back to the same float32.
  rows.slice(1).forEach((row, i) => assert.deepEqual(row.slice(1).map(Math.fround), weights[i].map(Math.fround)));
  const png = Buffer.from([0x89, 0x50, 0x4e, 0x47]);
  assert.deepEqual(got.png.map((f) => f.name), ['attnviz_view.png']);
  assert.ok(got.png[0].body.subarray(0, 4).equals(png));
  assert.equal(got.heads.length, 2);
  assert.ok(got.heads.every((f) => f.body.subarray(0, 4).equals(png)));
  assert.equal(await page.evaluate(() => attnviz.exportFiles('pdf')), "unknown export 'pdf' (png, heads, json, csv)");
  clean(log);
  await context.close();
});

test('the WebGL state the page keeps itself is what the browser says, and frames no longer ask for it', async () => {
  const { page, context, log } = await openPage(env);
  await load(page, env.url);
  await drawn(page);
  // The page's own context: its frames ask the browser for none of the kept states (the wrapper counts the
  // queries of them it passes on), and the kept answers are the browser's, after typing (thumbnail uploads,
  // scissored draws) and hovering.
  const passedOn = () => document.getElementById('canvas').getContext('webgl2').attnvizShadowed.passedOn;
  const before = await page.evaluate(passedOn);
  const frames = (await page.evaluate(() => attnviz.status())).frames;
  assert.equal(await page.evaluate(() => attnviz.setText('Every effort moves you forward')), '');
  const { heatmaps } = await page.evaluate(() => attnviz.status());
  await page.mouse.move(heatmaps[0].origin_x + 2, heatmaps[0].origin_y + 2);
  await page.waitForFunction(() => attnviz.status().hover !== null);
  const kept = await page.evaluate(async () => {
    const { SHADOWED } = await import('/gl-state.js');
    const gl = document.getElementById('canvas').getContext('webgl2');
    const plain = (v) => (ArrayBuffer.isView(v) ? Array.from(v) : [v]);  // the scissor box is an Int32Array
    return { frames: attnviz.status().frames,
             states: SHADOWED.map((p) => [p, plain(gl.getParameter(p)), plain(gl.attnvizShadowed.real(p))]) };
  });
  assert.ok(kept.frames >= frames + 3, `${kept.frames - frames} frames drawn`);
  assert.equal(await page.evaluate(passedOn), before, 'the frames asked the browser for kept states');
  for (const [p, ours, browsers] of kept.states) assert.deepEqual(ours, browsers, `state 0x${p.toString(16)}`);

  // A context of its own: a seeded run of calls, some of which WebGL refuses (negative sizes, numbers past
  // 32 bits, NaN, unknown enums, constant-colour factors), each followed by every kept state against the
  // browser's; then the context lost, after which the browser answers.
  const mismatches = await page.evaluate(async () => {
    const { SHADOWED, shadowGlState } = await import('/gl-state.js');
    const gl = shadowGlState(document.createElement('canvas').getContext('webgl2'));
    let seed = 12345;  // xorshift32
    const rand = (n) => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) % n;
    };
    const ints = [0, 1, 7, 300, -1, -300, 2 ** 31 - 1, 2 ** 32 + 5, 2.5, NaN, -0.5];
    const factors = [gl.ZERO, gl.ONE, gl.SRC_COLOR, gl.ONE_MINUS_SRC_COLOR, gl.DST_COLOR, gl.ONE_MINUS_DST_COLOR,
                     gl.SRC_ALPHA, gl.ONE_MINUS_SRC_ALPHA, gl.DST_ALPHA, gl.ONE_MINUS_DST_ALPHA,
                     gl.SRC_ALPHA_SATURATE, gl.CONSTANT_COLOR, gl.ONE_MINUS_CONSTANT_COLOR, gl.CONSTANT_ALPHA,
                     gl.ONE_MINUS_CONSTANT_ALPHA, 0x1234];
    const modes = [gl.FUNC_ADD, gl.FUNC_SUBTRACT, gl.FUNC_REVERSE_SUBTRACT, gl.MIN, gl.MAX, 0x1234];
    const pick = (xs) => xs[rand(xs.length)];
    const out = [];
    const plain = (v) => JSON.stringify(ArrayBuffer.isView(v) ? Array.from(v) : [v]);
    const check = (what) => {
      for (const p of SHADOWED) {
        const ours = plain(gl.getParameter(p)), browsers = plain(gl.attnvizShadowed.real(p));
        if (ours !== browsers) out.push(`${what}: 0x${p.toString(16)} ${ours} against ${browsers}`);
      }
    };
    check('at the start');
    for (let i = 0; i < 1500; ++i) {
      const call = rand(5);
      if (call === 0) gl.scissor(pick(ints), pick(ints), pick(ints), pick(ints));
      else if (call === 1) gl.blendFunc(pick(factors), pick(factors));
      else if (call === 2) gl.blendFuncSeparate(pick(factors), pick(factors), pick(factors), pick(factors));
      else if (call === 3) gl.blendEquation(pick(modes));
      else gl.blendEquationSeparate(pick(modes), pick(modes));
      check(`call ${i}`);
    }
    gl.scissor(1, 2, 3, 4);
    gl.getParameter(gl.SCISSOR_BOX)[0] = 99;  // a caller's array is its own, as the browser's is
    if (gl.getParameter(gl.SCISSOR_BOX)[0] !== 1) out.push('a scissor box given out is the one kept');
    gl.blendFunc(-0, 0);
    if (!Object.is(gl.getParameter(gl.BLEND_SRC_RGB), 0)) out.push('-0 given back for ZERO');
    const passedOn = gl.attnvizShadowed.passedOn;
    for (const p of SHADOWED) gl.getParameter(p);
    if (gl.attnvizShadowed.passedOn !== passedOn) out.push('a kept state was asked of the browser');
    // lost: the browser answers (null). (A restored context starts from the defaults, which the wrapper leaves
    // to the browser from the loss event on; headless Chromium did not restore a context lost through
    // WEBGL_lose_context, so that path is not run here.)
    gl.getExtension('WEBGL_lose_context').loseContext();
    for (const p of SHADOWED) if (gl.getParameter(p) !== null) out.push(`lost: 0x${p.toString(16)} answered`);
    // another context: after a blend call of OES_draw_buffers_indexed, every query goes to the browser
    const other = shadowGlState(document.createElement('canvas').getContext('webgl2'));
    const indexed = other.getExtension('OES_draw_buffers_indexed');
    if (!indexed) out.push('no OES_draw_buffers_indexed in this browser');
    indexed?.blendFunciOES(0, other.ONE, other.ONE);
    const asked = other.attnvizShadowed.passedOn;
    if (other.getParameter(other.BLEND_DST_RGB) !== other.ONE) out.push('OES_draw_buffers_indexed: a kept answer');
    if (other.attnvizShadowed.passedOn !== asked + 1) out.push('OES_draw_buffers_indexed: not asked');
    return out;
  });
  assert.deepEqual(mismatches, []);
  clean(log);
  await context.close();
});

test('a browser without WebAssembly SIMD or WebGL2 gets a message, not a blank page', async () => {
  const cases = [
    ['SIMD', () => { WebAssembly.validate = () => false; }],
    ['WebGL2', () => {
      const get = HTMLCanvasElement.prototype.getContext;
      HTMLCanvasElement.prototype.getContext = function (kind, ...rest) {
        return kind === 'webgl2' ? null : get.call(this, kind, ...rest);
      };
    }],
  ];
  for (const [what, init] of cases) {
    const { page, context, log } = await openPage(env, { init });
    await page.goto(env.url);
    await page.locator('#problem').waitFor({ state: 'visible' });
    assert.match(await page.locator('#problem-detail').textContent(), new RegExp(what));
    assert.ok(!log.requests.some((u) => u.endsWith('/attnviz.wasm')), 'the module is not loaded');
    await assert.rejects(page.evaluate(() => attnviz.ready), new RegExp('cannot run'));
    clean(log);
    await context.close();
  }
});
