// The page against hostile input, in headless Chromium (the page's rows of docs/bad-input.md; run: node --test
// web/tests/hostile.test.mjs): links that cannot be computed or are malformed, views past the module's
// memory, text outside the BMP, lone surrogates and NUL, paste and copy, keys typed at once or during a long
// computation, large exports. Every wait is on a condition.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { crc32 } from 'node:zlib';
import { start, openPage, drawn } from './harness.mjs';

let env;
before(async () => {
  env = await start();
});
after(async () => {
  await env?.close();
});

function clean(log) {
  assert.deepEqual(log.errors, [], 'console errors');
  assert.deepEqual(log.outside, [], 'requests outside 127.0.0.1');
}

const DEFAULT_TEXT = 'Your journey starts with one step';
const words = (n, w = 'w') => Array(n).fill(w).join(' ');
const status = (page) => page.evaluate(() => attnviz.status());
const state = (page) => page.evaluate(() => attnviz.getState());

// Opens a URL and says how attnviz.ready settled ("ready", or "rejected: why"); "never settled" after 20 s
// turns a loader that spins forever into a failed assertion instead of a hung test.
async function open(page, url) {
  await page.goto('about:blank');  // a new document each time, not a hash change
  await page.goto(url);
  return page.evaluate(() => Promise.race([
    attnviz.ready.then(() => 'ready', (e) => 'rejected: ' + e.message),
    new Promise((resolve) => setTimeout(() => resolve('never settled'), 20000)),
  ]));
}

// The page is usable: the loader is gone, and a text computes and is drawn.
async function usable(page) {
  assert.equal(await page.locator('#overlay').isHidden(), true, 'the loader is gone');
  await drawn(page);
}

test('a link whose state cannot be computed opens on a view, says why and keeps the state; reloads too', async () => {
  const { page, context, log } = await openPage(env);
  const cases = [
    ['#heads=3', /d_out \(2\) must be divisible by num_heads \(3\)/, { heads: '3' }],
    ['#text=', /the text is empty/, { text: '' }],
    ['#dropout=1', /dropout must be in \[0, 1\)/, { dropout: '1' }],
    ['#context-length=0', /context_length must be between 1/, { 'context-length': '0' }],
    ['#text=' + words(1100).replaceAll(' ', '+'), /1100 tokens, more than the context length 1024/,
     { text: words(1100) }],
  ];
  for (const [hash, why, kept] of cases) {
    for (const how of ['open', 'reload']) {
      if (how === 'open') assert.equal(await open(page, env.url + hash), 'ready', hash);
      else {
        await page.reload();
        assert.equal(await page.evaluate(() => attnviz.ready.then(() => 'ready')), 'ready', `${hash} reloaded`);
      }
      await usable(page);
      const s = await status(page);
      assert.match(s.error, why, hash);
      assert.deepEqual(await state(page), kept, `${hash}: the link's state is kept`);
      assert.equal(s.heatmaps.length, 2, `${hash}: the defaults' view is drawn meanwhile`);
      assert.equal(await page.evaluate(() => location.hash), hash, `${hash}: the URL stays`);
    }
    await page.evaluate(() => (location.hash = ''));
  }
  clean(log);
  await context.close();
});

test('Back and Forward reach every state, whether it computes or not', async () => {
  const { page, context, log } = await openPage(env);
  assert.equal(await open(page, env.url + '#heads=3'), 'ready');
  assert.equal(await page.evaluate(() => attnviz.setState({ heads: '4', 'd-out': '4' })), '');
  await page.waitForFunction(() => location.hash === '#d-out=4&heads=4');
  await page.evaluate(() => (location.hash = '#dropout=1'));
  await page.waitForFunction(() => /dropout/.test(attnviz.status().error));
  await page.goBack();
  await page.waitForFunction(() => attnviz.getResult().config.num_heads === 4 && !attnviz.status().error);
  await page.goBack();
  await page.waitForFunction(() => /divisible/.test(attnviz.status().error) && attnviz.getState().heads === '3');
  await page.goForward();
  await page.waitForFunction(() => attnviz.status().error === '' && attnviz.getState().heads === '4');
  await page.goForward();
  await page.waitForFunction(() => /dropout/.test(attnviz.status().error));
  assert.equal(await page.evaluate(() => location.hash), '#dropout=1');
  clean(log);
  await context.close();
});

test('every URL the page writes opens again on the same state', async () => {
  const { page, context, log } = await openPage(env);
  const wait = (what, f, arg) => page.waitForFunction(f, arg).catch(async (e) => {
    throw new Error(`${what}: ${e.message}; hash ${await page.evaluate(() => location.hash.slice(0, 80))}, text ${JSON.stringify(await page.evaluate(() => attnviz.getState().text?.slice(-30)))}`);
  });
  assert.equal(await open(page, env.url), 'ready');
  const links = [];
  const keep = async (what) => links.push({ what, href: page.url(), state: await state(page),
                                            error: (await status(page)).error });
  // "+" on heads with d_out 2.
  await page.evaluate(() => attnviz.setState({ heads: '3' }));
  await wait('heads 3', () => location.hash === '#heads=3');
  await keep('heads 3 of d_out 2');
  // Backspace held until the box is empty.
  await page.evaluate(() => attnviz.setState({}));
  await wait('defaults', () => location.hash === '');
  for (let i = 0; i < DEFAULT_TEXT.length; ++i) await page.keyboard.press('Backspace');  // none may be lost
  await wait('empty text', () => location.hash === '#text=');
  await keep('an empty text');
  // Typing past the context length.
  await page.evaluate((t) => attnviz.setText(t), words(1023));
  await page.keyboard.type(' one two');
  await wait('past the context', () => location.hash.endsWith('+one+two'));
  await keep('a text past the context');
  // The edges of the other settings' ranges, a compare sentence with quotes and an ampersand, a locked cell.
  await page.evaluate(() => attnviz.setState({ text: 'a "b" & c', seed: '18446744073709551615', dropout: '0.999',
                                               compare: 'text', 'compare-text': 'x=y&z #w', head: '1', lock: '1,2',
                                               stage: 'scores' }));
  await wait('edges', () => location.hash.includes('lock='));
  await keep('the edges of the ranges');
  for (const l of links) {
    const fresh = await openPage(env);
    assert.equal(await open(fresh.page, l.href), 'ready', l.what);
    assert.deepEqual(await state(fresh.page), l.state, `${l.what}: ${l.href}`);
    assert.equal((await status(fresh.page)).error, l.error, l.what);
    assert.equal(fresh.page.url(), l.href, `${l.what}: the URL is not rewritten`);
    clean(fresh.log);
    await fresh.context.close();
  }
  clean(log);
  await context.close();
});

test('many heads or a small window: the view or a note, never an endless loader', async () => {
  const cases = [
    ['#heads=128&d-out=128', { width: 1280, height: 800 }],
    ['', { width: 320, height: 240 }],
    ['#preset=gpt2-xl&eval', { width: 375, height: 667 }],
  ];
  for (const [hash, viewport] of cases) {
    const { page, context, log } = await openPage(env, { viewport });
    assert.equal(await open(page, env.url + hash), 'ready', `${hash} at ${viewport.width}x${viewport.height}`);
    await usable(page);
    const s = await status(page);
    assert.deepEqual(s.heatmaps, [], 'no heatmap fits');
    assert.match(s.view_note, /too many heads to draw at this size .*: pick a head or an aggregate/);
    // One head alone fits.
    await page.evaluate(() => attnviz.setState({ ...attnviz.getState(), head: '1' }));
    await page.waitForFunction(() => attnviz.status().heatmaps.length === 1 && attnviz.status().view_note === '')
      .catch(async (e) => { console.log(hash, JSON.stringify(await status(page)).slice(0, 600)); throw e; });
    clean(log);
    await context.close();
  }
});

test('a refused link names the value, opens on the defaults and says why', async () => {
  const { page, context, log } = await openPage(env);
  const cases = [
    ['#seed=18446744073709551616', /--seed: '18446744073709551616' is outside torch\.manual_seed's range/],
    ['#seed=', /'seed' needs a value/],
    ['#heads=', /'heads' needs a value/],
    ['#lock=', /'lock' needs a value/],
    ['#lock=1', /lock '1' is not ROW,COL/],
    ['#help', /unknown setting 'help'/],
    ['#d-out=0x10', /--d-out: '0x10' is not a decimal integer/],
    ['#dropout=abc', /--dropout: 'abc' is not a decimal number/],
    ['#head=99&lock=1,2', /--head 99 is past the last head: there are 2 heads \(0 to 1\), and -1 shows them all/],
    ['#lock=100,100', /--lock 100 100 is outside the weights matrix: rows 0 to 5, columns 0 to 5/],
    ['#lock=-1,-1', /--lock -1 -1 is outside the weights matrix/],
    ['#variant=causal&head=1', /--head 1 is past the last head: there is 1 head \(0\)/],
    // A model takes its sizes from its preset or file: the layer's flags beside it are refused, not ignored.
    ['#model=gpt2-small&variant=causal', /--variant does not apply to --model: a model's sizes come from its preset or file/],
    ['#model=gpt2-small&heads=3', /--heads does not apply to --model/],
  ];
  for (const [hash, why] of cases) {
    assert.equal(await open(page, env.url + hash), 'ready', hash);
    await usable(page);
    const s = await status(page);
    assert.match(s.message, /^this link's settings were not used: /, hash);
    assert.match(s.message, why, hash);
    assert.deepEqual(await state(page), {}, `${hash}: the defaults`);
    assert.equal(s.heatmaps.length, 2);
    await page.evaluate(() => (location.hash = ''));
  }
  // Through the API, a refusal keeps the state it had.
  await page.evaluate(() => attnviz.setState({ text: 'Kept text here' }));
  assert.match(await page.evaluate(() => attnviz.setState({ head: '7' })), /--head 7 is past the last head/);
  assert.match(await page.evaluate(() => attnviz.setState({ lock: '3,0', text: 'a b' })), /--lock 3 0 is outside/);
  assert.deepEqual(await state(page), { text: 'Kept text here' });
  assert.equal(await page.evaluate(() => attnviz.setState({ head: '1', lock: '2,1' })), '', 'in range');
  clean(log);
  await context.close();
});

test('a megabyte hash of unknown keys gets one short line', async () => {
  const { page, context, log } = await openPage(env);
  const keys = Array.from({ length: 150000 }, (_, i) => `k${i}=1`).join('&');
  assert.ok(keys.length > 1e6);
  assert.equal(await open(page, env.url + '#' + keys), 'ready');
  await usable(page);
  const s = await status(page);
  assert.equal(s.message, "this link's settings were not used: 150000 unknown settings: 'k0', 'k1', 'k2', 'k3', " +
                          "'k4', ...");
  // A key costs a frame, not the drawing of a megabyte.
  const g = s.generation;
  await page.keyboard.type('!');
  await page.waitForFunction((g0) => attnviz.status().generation > g0, g);
  assert.ok((await status(page)).frame_ms < 200, 'a short frame');
  clean(log);
  await context.close();
});

test('setText and setState refuse the wrong types and keep the state', async () => {
  const { page, context, log } = await openPage(env);
  assert.equal(await open(page, env.url + '#text=Kept+as+it+was&heads=1'), 'ready');
  const before = await state(page);
  const got = await page.evaluate(() => [attnviz.setText(), attnviz.setText(null), attnviz.setText(42),
                                         attnviz.setState(42), attnviz.setState('heads=4'),
                                         attnviz.setState(null), attnviz.setState({ heads: { n: 4 } })]);
  assert.match(got[0], /^TypeError: setText takes a string, not undefined$/);
  assert.match(got[1], /^TypeError: setText takes a string, not null$/);
  assert.match(got[2], /^TypeError: setText takes a string, not the number 42$/);
  assert.match(got[3], /^TypeError: setState takes an object of \{flag: value\}, not the number 42$/);
  assert.match(got[4], /^TypeError: setState takes an object .* not a string \(for a link's hash, set location\.hash\)$/);
  assert.match(got[5], /not null/);
  assert.match(got[6], /^TypeError: setState: 'heads' is an object, not a string or number$/);
  assert.deepEqual(await state(page), before);
  assert.deepEqual((await page.evaluate(() => attnviz.getResult())).tokens, ['Kept', 'as', 'it', 'was']);
  clean(log);
  await context.close();
});

test('a view past the module\'s memory is refused before it is computed, just beyond the largest that fits', async () => {
  const { page, context, log } = await openPage(env);
  // 64 heads of width 1: memory grows with 64 T^2, the arithmetic stays small.
  assert.equal(await open(page, env.url + '#d-out=64&heads=64&context-length=4096&eval'), 'ready');
  const tooMany = await page.evaluate((t) => attnviz.setText(t), words(1700));
  const m = tooMany.match(/^this view needs ([\d.]+ [GM]B) of memory, more than the ([\d.]+ [GM]B) the page has left: about (\d+) tokens fit$/);
  assert.ok(m, tooMany);
  const fit = Number(m[3]);
  console.log(`# 1700 tokens need ${m[1]}, the page has ${m[2]} left: ${fit} tokens fit`);
  assert.ok(fit > 500 && fit < 1700, `${fit} tokens`);
  // One token more than fits is refused, and nothing changes.
  const before = await page.evaluate(() => attnviz.getResult().tokens.length);
  assert.match(await page.evaluate((t) => attnviz.setText(t), words(fit + 1)), new RegExp(`about ${fit} tokens fit`));
  assert.equal(await page.evaluate(() => attnviz.getResult().tokens.length), before);
  // As many as fit are computed, and the page goes on working.
  assert.equal(await page.evaluate((t) => attnviz.setText(t), words(fit)), '');
  const s = await status(page);
  assert.equal(s.tokens, fit);
  assert.equal(s.error, '');
  // Its JSON does not fit beside it: the export and getResult say so, with the sizes.
  assert.equal(await page.evaluate(() => attnviz.exportFiles('json')), '');
  assert.match((await status(page)).message,
               /^export refused: the JSON would be up to [\d.]+ GB, more than the [\d.]+ MB the page has left$/);
  await assert.rejects(page.evaluate(() => attnviz.getResult()), /the result's JSON would be up to [\d.]+ GB/);
  assert.equal(await page.evaluate(() => attnviz.setText('Back to a short text')), '');
  assert.deepEqual(await page.evaluate(() => attnviz.getResult().tokens), ['Back', 'to', 'a', 'short', 'text']);
  await drawn(page);
  clean(log);
  await context.close();
});

test('compare B that does not fit says so and shows no A - B', async () => {
  const { page, context, log } = await openPage(env);
  assert.equal(await open(page, env.url + '#d-out=64&heads=64&context-length=4096&eval&compare=seed'), 'ready');
  const refused = await page.evaluate((t) => attnviz.setText(t), words(1700));
  const fit = Number(refused.match(/about (\d+) tokens fit/)[1]);
  // A alone fits at three quarters of that; A and B together do not.
  const T = Math.floor(fit * 0.75);
  assert.equal(await page.evaluate((t) => attnviz.setText(t), words(T)), '');
  await drawn(page);
  const s = await status(page);
  assert.equal(s.tokens, T, 'A is computed');
  assert.match(s.compare.error, /^this view needs .* of memory, more than the .* the page has left/);
  assert.ok(s.compare.tokens < T, 'B keeps its last result, which is not drawn');
  const slots = s.heatmaps.map((h) => h.slot);
  assert.ok(slots.includes(2000), 'A is drawn');
  assert.ok(!slots.includes(2001) && !slots.includes(2002), `no B and no A - B: ${slots}`);
  clean(log);
  await context.close();
});

test('a 10 MB setText is refused with its size and the page goes on', async () => {
  const { page, context, log } = await openPage(env);
  assert.equal(await open(page, env.url), 'ready');
  const error = await page.evaluate(() => attnviz.setText('word '.repeat(2e6)));
  assert.equal(error, 'the text is 10.0 MB, more than the page takes (262.1 kB: its link must fit in a URL)');
  assert.deepEqual(await state(page), {});
  await page.keyboard.type(' today');
  await page.waitForFunction(() => attnviz.getResult().tokens.length === 7);
  clean(log);
  await context.close();
});

test('a C++ exception reaches JavaScript as a message, never as a bare number', async () => {
  const { page, context, log } = await openPage(env);
  assert.equal(await open(page, env.url), 'ready');
  // Fill the module's heap from outside its budget, all but a hole that takes the text handed over: the
  // module's own copy of it then finds no memory. The hole is taken first, so that it exists whatever the
  // heap's layout (filling first left a 256 kB block only when the heap's end happened to leave room for one).
  const got = await page.evaluate(() => {
    const hole = Module._malloc(1 << 18);
    const held = [];
    for (let size = 1 << 28; size >= 16; size >>= 1)
      for (let p = Module._malloc(size); p; p = Module._malloc(size)) held.push(p);
    Module._free(hole);
    let answer;
    try {
      answer = attnviz.setText('This text needs memory ' + 'x'.repeat(250000));
    } catch (e) {
      answer = 'threw ' + (typeof e) + ' ' + String(e);
    }
    for (const p of held) Module._free(p);
    return answer;
  });
  assert.match(got, /^the page ran out of memory \(it has 2\.1 GB\): the last good view stays$/);
  assert.equal(await page.evaluate(() => attnviz.setText('The page works again')), '');
  await drawn(page);
  log.errors = log.errors.filter((e) => !/Cannot enlarge memory|failed to grow|out of memory/i.test(e));
  clean(log);
  await context.close();
});

test('text is text: characters past U+FFFF survive every path, lone surrogates and NUL become U+FFFD', async () => {
  const { page, context, log } = await openPage(env);
  // A link.
  assert.equal(await open(page, env.url + '#text=Dream+big+%F0%9F%9A%80'), 'ready');
  await page.keyboard.type(' x');  // the box has held the text for a frame or two by now
  await page.waitForFunction(() => attnviz.getState().text === 'Dream big 🚀 x');
  assert.deepEqual(await page.evaluate(() => attnviz.getResult().tokens), ['Dream', 'big', '🚀', 'x']);
  assert.equal(await page.evaluate(() => location.hash), '#text=Dream+big+%F0%9F%9A%80+x');
  // The API, then a key.
  assert.equal(await page.evaluate(() => attnviz.setText('I 😀 you')), '');
  await page.keyboard.type('r');
  await page.waitForFunction(() => attnviz.getState().text === 'I 😀 your');
  assert.deepEqual(await page.evaluate(() => attnviz.getResult().tokens), ['I', '😀', 'your']);
  // Lone surrogates.
  assert.equal(await page.evaluate(() => attnviz.setText('\uD800 x \uDC00')), '');
  assert.deepEqual(await page.evaluate(() => attnviz.getResult().tokens), ['\uFFFD', 'x', '\uFFFD']);
  // NUL, by the API, a link and a paste: one rule.
  assert.equal(await page.evaluate(() => attnviz.setText('a\u0000b c')), '');
  assert.deepEqual(await page.evaluate(() => attnviz.getResult().tokens), ['a\uFFFDb', 'c']);
  assert.equal(await open(page, env.url + '#text=a%00b+c'), 'ready');
  assert.deepEqual(await page.evaluate(() => attnviz.getResult().tokens), ['a\uFFFDb', 'c']);
  assert.equal(await page.evaluate(() => attnviz.getState().text), 'a\uFFFDb c');
  await page.evaluate(() => {
    const data = new DataTransfer();
    data.setData('text/plain', ' d\u0000e \uD83D');
    document.activeElement.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true }));
  });
  await page.waitForFunction(() => attnviz.getState().text === 'a\uFFFDb c d\uFFFDe \uFFFD');
  // Text inserted without key events (an input method, an emoji picker), and a character typed as two
  // keypress events (its UTF-16 surrogates).
  await page.keyboard.insertText(' 🎉');
  await page.waitForFunction(() => attnviz.getState().text.endsWith(' 🎉'));
  await page.evaluate(() => {
    for (const unit of [0xd83d, 0xde80]) {
      const e = new KeyboardEvent('keypress', { key: '🚀', bubbles: true });
      Object.defineProperty(e, 'charCode', { get: () => unit });
      document.activeElement.dispatchEvent(e);
    }
  });
  await page.waitForFunction(() => attnviz.getState().text.endsWith(' 🎉🚀'));
  clean(log);
  await context.close();
});

test('paste and copy in the sentence box: Ctrl+V, Shift+Insert, insertText, a paste event, Ctrl+C', async () => {
  const { page, context, log } = await openPage(env);
  await context.grantPermissions(['clipboard-read', 'clipboard-write']);
  assert.equal(await open(page, env.url), 'ready');
  const text = () => page.evaluate(() => attnviz.getState().text);
  await page.evaluate(() => navigator.clipboard.writeText(' pasted\twords\r\nhere'));
  await page.keyboard.press('Control+V');
  await page.waitForFunction((t) => attnviz.getState().text === t, DEFAULT_TEXT + ' pasted words\nhere');
  assert.equal((await page.evaluate(() => attnviz.getResult())).tokens.length, 9);
  await page.keyboard.press('Shift+Insert');
  await page.waitForFunction((t) => attnviz.getState().text === t, DEFAULT_TEXT + ' pasted words\nhere pasted words\nhere');
  await page.keyboard.insertText(' inserted');
  await page.waitForFunction(() => attnviz.getState().text.endsWith('here inserted'));
  await page.evaluate(() => {
    const data = new DataTransfer();
    data.setData('text/plain', ' evented');
    document.activeElement.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true }));
  });
  await page.waitForFunction(() => attnviz.getState().text.endsWith('inserted evented'));
  // Select all, copy: the clipboard has the sentence.
  const all = await text();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Control+C');
  await page.waitForFunction((t) => navigator.clipboard.readText().then((c) => c === t), all);
  // A paste that would make the text longer than the page takes is refused whole.
  await page.evaluate(() => navigator.clipboard.writeText('y '.repeat(200000)));
  await page.keyboard.press('End');
  await page.keyboard.press('Control+V');
  await page.waitForFunction(() => /more than the page takes/.test(attnviz.status().message));
  assert.equal(await text(), all);
  clean(log);
  await context.close();
});

test('no key is lost right after ready, and setText on an idle page draws and updates the URL at once', async () => {
  const { page, context, log } = await openPage(env);
  const typed = ' and then a few more words typed the moment the page said it was ready';
  await page.goto(env.url);
  await page.evaluate(() => attnviz.ready);
  await page.keyboard.type(typed);
  await page.waitForFunction((t) => attnviz.getState().text === t, DEFAULT_TEXT + typed);
  // Idle: nothing drawn for a while.
  await drawn(page);
  const frames = (await status(page)).frames;
  const [hash, generation] = await page.evaluate(() => [(attnviz.setText('An idle page'), location.hash),
                                                         attnviz.status().generation]);
  assert.equal(hash, '#text=An+idle+page', 'the URL follows at once');
  const s = await status(page);
  assert.equal(s.drawn_generation, generation, 'the new result is drawn at once');
  assert.ok(s.frames > frames);
  clean(log);
  await context.close();
});

test('keys that arrive during a long computation are computed once, with the latest text', async () => {
  const { page, context, log } = await openPage(env);
  assert.equal(await open(page, env.url + '#preset=gpt2-small'), 'ready');
  assert.equal(await page.evaluate((t) => attnviz.setText(t), words(700)), '');
  // Coalescing starts when a recompute takes over 50 ms. On a machine fast enough that this one does not, each
  // key is computed as it comes, and only the final text is checked.
  const slow = (await status(page)).compute_ms > 50;
  if (!slow) console.log('# a recompute took 50 ms or less here: key coalescing was not exercised');
  // Twenty keys queued at once, as a browser queues them while the page computes: ten more words.
  const before = (await status(page)).generation;
  await page.evaluate(() => {
    for (const c of ' a b c d e f g h i j')
      setTimeout(() => {
        const e = new KeyboardEvent('keypress', { key: c, bubbles: true });
        Object.defineProperty(e, 'charCode', { get: () => c.charCodeAt(0) });
        document.activeElement.dispatchEvent(e);
      }, 0);
  });
  await page.waitForFunction(() => attnviz.status().tokens === 710 && !attnviz.status().text_pending);
  if (slow) assert.equal((await status(page)).generation - before, 1, 'one recompute for twenty keys');
  assert.ok((await state(page)).text.endsWith('w a b c d e f g h i j'));
  clean(log);
  await context.close();
});

test('a JSON export at T = 1024 is written whole', async () => {
  const { page, context, log } = await openPage(env);
  // gpt2-small's layer with 4 heads: 12.6 M numbers (the full 12 heads write 38 M, about 400 MB).
  assert.equal(await open(page, env.url + '#preset=gpt2-small&heads=4&d-out=256&eval'), 'ready');
  assert.equal(await page.evaluate((t) => attnviz.setText(t), words(1024)), '');
  const download = page.waitForEvent('download');
  const ms = await page.evaluate(() => {
    const t0 = performance.now();
    const error = attnviz.exportFiles('json');
    if (error) throw new Error(error);
    return performance.now() - t0;
  });
  console.log(`# JSON export at T = 1024, 4 heads: ${ms.toFixed(0)} ms`);  // a figure, not a test: speed varies
  const file = await download;
  assert.equal(file.suggestedFilename(), 'attnviz.json');
  const exported = JSON.parse(readFileSync(await file.path(), 'utf8'));
  assert.equal(exported.tokens.length, 1024);
  assert.equal(exported.heads.length, 4);
  assert.equal(exported.heads[3].weights[1023].length, 1024);
  assert.match((await status(page)).message, /^downloaded attnviz\.json$/);
  clean(log);
  await context.close();
});

// The files of a zip archive (stored entries): [{name, data}], each CRC checked.
function unzip(buf) {
  const end = buf.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  const count = buf.readUInt16LE(end + 10);
  let at = buf.readUInt32LE(end + 16);
  const files = [];
  for (let i = 0; i < count; ++i) {
    assert.equal(buf.readUInt32LE(at), 0x02014b50);
    const size = buf.readUInt32LE(at + 24), nameLength = buf.readUInt16LE(at + 28);
    const offset = buf.readUInt32LE(at + 42), crc = buf.readUInt32LE(at + 16);
    const name = buf.subarray(at + 46, at + 46 + nameLength).toString();
    const localName = buf.readUInt16LE(offset + 26), extra = buf.readUInt16LE(offset + 28);
    const data = buf.subarray(offset + 30 + localName + extra, offset + 30 + localName + extra + size);
    files.push({ name, data, crc });
    at += 46 + nameLength;
  }
  return files;
}

test('a CSV export of 16,384 heads is one zip archive, not 16,384 downloads', async () => {
  const { page, context, log } = await openPage(env);
  assert.equal(await open(page, env.url), 'ready');
  assert.equal(await page.evaluate(() => attnviz.setState({ variant: 'wrapper', heads: '16384', 'd-out': '1' })), '');
  const downloads = [];
  page.on('download', (d) => downloads.push(d));
  const first = page.waitForEvent('download');
  assert.equal(await page.evaluate(() => attnviz.exportFiles('csv')), '');
  const zip = await first;
  assert.match((await status(page)).message, /^downloaded attnviz_weights_csv\.zip \(16384 files, [\d.]+ MB\)$/);
  assert.equal(zip.suggestedFilename(), 'attnviz_weights_csv.zip');
  const files = unzip(readFileSync(await zip.path()));
  assert.equal(downloads.length, 1, 'one download');
  assert.equal(files.length, 16384);
  assert.equal(files[0].name, 'attnviz_weights_head0.csv');
  assert.equal(files[16383].name, 'attnviz_weights_head16383.csv');
  const weights = await page.evaluate(() => attnviz.getResult().heads[16383].weights);
  const rows = files[16383].data.toString().trim().split('\n').map((l) => l.split(','));
  assert.deepEqual(rows[0], ['token', 'Your', 'journey', 'starts', 'with', 'one', 'step']);
  rows.slice(1).forEach((row, i) => assert.deepEqual(row.slice(1).map(Math.fround), weights[i].map(Math.fround)));
  // The CRCs are the archive's promise that the files are whole: zlib's crc32 of each.
  for (const f of files.slice(0, 50)) assert.equal(crc32(f.data), f.crc, f.name);
  clean(log);
  await context.close();
});
