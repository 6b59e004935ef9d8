// Shared by the browser tests and the browser benchmark: Debian's Chromium, headless, driven by
// playwright-core (which never downloads a browser), on the page served from 127.0.0.1 only.
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve } from '../tools/serve.mjs';

export const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const site = process.env.ATTNVIZ_SITE || join(repo, 'build', 'wasm-release', 'web', 'site');
export const chromiumPath = process.env.ATTNVIZ_CHROMIUM || '/usr/bin/chromium';

// The flags TOOLCHAIN.md lists for headless Chromium here, plus a fresh profile (playwright's default).
export const chromiumArgs = ['--headless=new', '--no-sandbox', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-quic', '--enable-unsafe-swiftshader'];

// isolated: serve the page cross-origin isolated (COOP + COEP, as scripts/demo does), so it runs threaded.
export async function start({ extraArgs = [], isolated = false } = {}) {
  if (!existsSync(join(site, 'attnviz.wasm')))
    throw new Error(`no page in ${site}: build it with cmake --build --preset wasm-release`);
  if (!existsSync(chromiumPath)) throw new Error(`${chromiumPath} not found: scripts/install-deps --wasm installs chromium`);
  const { server, url } = await serve(site, 0, { isolated });
  const browser = await chromium.launch({ executablePath: chromiumPath, headless: true,
                                          args: [...chromiumArgs, ...extraArgs] });
  return {
    url,
    browser,
    async close() {
      await browser.close();
      await new Promise((r) => server.close(r));
    },
  };
}

// A page that records console errors, uncaught exceptions and every request that would leave 127.0.0.1
// (those are refused, so the page must work without them).
export async function openPage(env, { viewport = { width: 1280, height: 800 }, init } = {}) {
  const context = await env.browser.newContext({ viewport, acceptDownloads: true });
  const page = await context.newPage();
  const log = { errors: [], outside: [], requests: [] };
  page.on('console', (m) => {
    if (m.type() === 'error') log.errors.push(m.text());
  });
  page.on('pageerror', (e) => log.errors.push('uncaught: ' + e.message));
  await context.route('**/*', (route) => {
    const u = new URL(route.request().url());
    log.requests.push(u.href);
    const local = u.protocol === 'data:' || u.protocol === 'blob:' || u.hostname === '127.0.0.1';
    if (local) return route.continue();
    log.outside.push(u.href);
    return route.abort();
  });
  if (init) await page.addInitScript(init);
  return { page, context, log };
}

// Navigates and waits for the first heatmap; returns milliseconds from navigation to it.
export async function load(page, url) {
  await page.goto(url);
  await page.evaluate(() => attnviz.ready);
  return page.evaluate(() => attnviz.status().first_heatmap_at);
}

// Each mouse event in a frame of its own: Dear ImGui 1.86 sees the button and the pointer once a frame, and
// a button fires on a release over it. The wait is for a frame that began after the event reached the page:
// playwright's mouse calls return once the page's handlers have run, so the count of wakes read then
// includes the event's, and inputs.drawn reaches it only in a frame that began later. Waiting for the frame
// count to move instead can pass on a frame that was already due (training, the frames after the last
// event), and a release that then shares a frame with the next move away from the control is lost.
export async function mouse(page, event) {
  await event();
  const inputs = await page.evaluate(() => attnviz.status().inputs.received);
  await page.waitForFunction((n) => attnviz.status().inputs.drawn >= n, inputs);
}

// Waits until the page has drawn the session's current generation.
export async function drawn(page) {
  await page.waitForFunction(() => {
    const s = attnviz.status();
    return s.drawn_generation === s.generation;
  });
}

// The region of the canvas holding the heatmaps (their union), for screenshots of just them.
export async function heatmapClip(page) {
  const { heatmaps } = await page.evaluate(() => attnviz.status());
  if (!heatmaps.length) throw new Error('no heatmap on screen');
  const x0 = Math.min(...heatmaps.map((h) => h.x0)), y0 = Math.min(...heatmaps.map((h) => h.y0));
  const x1 = Math.max(...heatmaps.map((h) => h.x1)), y1 = Math.max(...heatmaps.map((h) => h.y1));
  return { x: Math.floor(x0), y: Math.floor(y0), width: Math.ceil(x1 - x0), height: Math.ceil(y1 - y0) };
}

// A page's log, checked at the end of a test: no console error, nothing requested outside 127.0.0.1.
export function clean(log) {
  assert.deepEqual(log.errors, [], 'console errors');
  assert.deepEqual(log.outside, [], 'requests outside 127.0.0.1');
}
