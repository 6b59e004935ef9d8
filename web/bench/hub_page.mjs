// A model from the hub in headless Chromium, served by the tests' local imitation of the hub (nothing leaves
// 127.0.0.1): a llama model of about 400 MB of float32 weights (random values, 8 layers of width 1024, made
// here), fetched into the browser's storage and opened, then opened again from the storage; printed as figures.
//   node web/bench/hub_page.mjs        (ATTNVIZ_SITE: the built site, default build/wasm-release/web/site)
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { chromium } from 'playwright-core';
import { chromiumArgs, chromiumPath, repo, site } from '../tests/harness.mjs';
import { startHub } from '../tests/hub_server.mjs';
import { serve } from '../tools/serve.mjs';

const L = 8, D = 1024, F = 2816, V = 96;
const config = { architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: D, intermediate_size: F,
                 num_hidden_layers: L, num_attention_heads: 16, num_key_value_heads: 16, hidden_act: 'silu',
                 max_position_embeddings: 256, rms_norm_eps: 1e-5, rope_theta: 10000.0, tie_word_embeddings: true,
                 vocab_size: V, torch_dtype: 'float32', attention_bias: false, mlp_bias: false };
function safetensors() {
  const shapes = [['model.embed_tokens.weight', [V, D]], ['model.norm.weight', [D]]];
  for (let l = 0; l < L; ++l) {
    const p = `model.layers.${l}.`;
    shapes.push([p + 'input_layernorm.weight', [D]], [p + 'post_attention_layernorm.weight', [D]]);
    for (const w of ['q', 'k', 'v', 'o']) shapes.push([`${p}self_attn.${w}_proj.weight`, [D, D]]);
    shapes.push([p + 'mlp.gate_proj.weight', [F, D]], [p + 'mlp.up_proj.weight', [F, D]], [p + 'mlp.down_proj.weight', [D, F]]);
  }
  const header = {};
  let at = 0;
  for (const [name, shape] of shapes) {
    const bytes = shape.reduce((a, b) => a * b, 1) * 4;
    header[name] = { dtype: 'F32', shape, data_offsets: [at, at + bytes] };
    at += bytes;
  }
  let text = JSON.stringify(header);
  text += ' '.repeat((4 - ((8 + text.length) % 4)) % 4);  // the data 4-byte aligned, for the Float32Array below
  const json = Buffer.from(text);
  const out = Buffer.alloc(8 + json.length + at);
  out.writeBigUInt64LE(BigInt(json.length));
  json.copy(out, 8);
  const data = new Float32Array(out.buffer, out.byteOffset + 8 + json.length, at / 4);
  let seed = 1;
  for (let i = 0; i < data.length; ++i) data[i] = (((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) / 2 ** 24 - 0.5) * 0.04;
  for (const [name, shape] of shapes)  // RMSNorm weights near 1
    if (shape.length === 1) data.fill(1, header[name].data_offsets[0] / 4, header[name].data_offsets[1] / 4);
  return out;
}

const weights = safetensors();
const hub = await startHub({ 'bench/llama-400m': {
  'config.json': Buffer.from(JSON.stringify(config)), 'model.safetensors': weights,
  'tokenizer.json': readFileSync(join(repo, 'tests', 'fixtures', 'hub', 'tokenizer.json')) } });
// A browser profile on disk, as a visitor's is (a test's fresh context is a private window, whose storage
// quota is too small for this model: the page then keeps it in the tab only).
const profile = mkdtempSync(join(tmpdir(), 'attnviz-hub-profile-'));
const { server, url: siteUrl } = await serve(site, 0);
const browser = await chromium.launchPersistentContext(profile, { executablePath: chromiumPath, headless: true,
                                                                  args: chromiumArgs });
try {
  const page = await browser.newPage();
  const url = `${siteUrl}?hub=${encodeURIComponent(hub.url)}#text=${encodeURIComponent('A rose is a rose is a rose')}`;
  await page.goto(url);
  await page.evaluate(() => attnviz.ready);
  const mb = (weights.length / 1e6).toFixed(0);
  let t0 = Date.now();
  let why = await page.evaluate(() => attnviz.hub.open('bench/llama-400m'));
  if (why) throw new Error(why);
  const first = (Date.now() - t0) / 1000;
  const note = await page.evaluate(() => attnviz.status().message);
  await hub.close();
  await page.reload();
  await page.evaluate(() => attnviz.ready);
  t0 = Date.now();
  why = await page.evaluate(() => attnviz.hub.open('bench/llama-400m'));
  if (why) throw new Error(why);
  const again = (Date.now() - t0) / 1000;
  const s = await page.evaluate(() => attnviz.status().model);
  console.log(`page: a ${mb} MB model (${s.layers} layers x ${s.heads} heads) fetched from a local hub into the ` +
              `storage and opened in ${first.toFixed(1)} s${note ? ` (${note})` : ''}; opened again from the ` +
              `storage, offline, in ${again.toFixed(1)} s (${s.open_ms.toFixed(0)} ms of it in the engine's load)`);
} finally {
  await browser.close();
  await new Promise((r) => server.close(r));
  rmSync(profile, { recursive: true, force: true });
}
