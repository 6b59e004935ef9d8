// Models from the Hugging Face hub, fetched only when the visitor asks (a row of the Model panel's list, or
// attnviz.hub.open): GET {endpoint}/{org}/{name}/resolve/{rev}/{file}, the hub's own layout (it answers with
// CORS headers and redirects large files to its CDN). What is fetched is kept in the browser's storage (the
// Cache API; a file it has no room for stays in this tab only), so a model opened once opens again offline.
// The files are then read into the module's file system and opened as a chosen folder is (the engine's
// load_gpt and Bpe::load_dir).
//
// Before any weights are downloaded, their safetensors headers are read with Range requests: the exact size
// of the download and of the float32 weights, checked against what the page can hold (web/src/budget.cpp).
import { $, call, formatBytes, needModule, wake } from './module.js';
import { ensureVocab, freshModelDir, hideBusy, painted, refuse, serially, setOnCancel, showBusy } from './model-files.js';

export const HUB = 'https://huggingface.co';

// Small models known to open here. `bytes`: the weights' download, about: the parameters stored times their
// dtype's size (GPT-2's file also stores every layer's 1024 x 1024 causal mask, 50 MB). The exact figure is
// read from the files' headers before a download starts, and shown then.
export const hubModels = [
  { repo: 'openai-community/gpt2', bytes: 548e6, about: 'gpt2, 124M, float32' },
  { repo: 'HuggingFaceTB/SmolLM2-135M', bytes: 269e6, about: 'llama, 135M, bfloat16' },
  { repo: 'Qwen/Qwen2.5-0.5B', bytes: 988e6, about: 'qwen2, 494M, bfloat16' },
  { repo: 'Qwen/Qwen3-0.6B', bytes: 1.5e9, about: 'qwen3, 752M stored, bfloat16' },
  { repo: 'google/gemma-3-270m', bytes: 536e6, about: 'gemma3, 268M, bfloat16, gated' },
  { repo: 'EleutherAI/pythia-160m', bytes: 325e6, about: 'gpt_neox, 162M, float16' },
];

// The endpoint: the hub, or a mirror (or a test's server) from the page's URL (?hub=URL) or setEndpoint.
let endpoint = HUB;
export function setEndpoint(url) {
  let u;
  try {
    u = new URL(String(url));
  } catch (e) {
    return `the hub's endpoint is not a URL: ${String(url).slice(0, 80)}`;
  }
  if ((u.protocol !== 'https:' && u.protocol !== 'http:') || u.username || u.password || u.search || u.hash)
    return `the hub's endpoint must be an http(s) URL without a query or credentials: ${u.href.slice(0, 80)}`;
  endpoint = (u.origin + u.pathname).replace(/\/+$/, '');
  showList();
  return '';
}
export const getEndpoint = () => endpoint;

// The slowest a request to the hub (or a mirror, or its CDN) may be, the native CLI's numbers
// (kHubMinBytesPerSecond, kHubRateWindowSeconds in native/hub_download.hpp): every window of rateWindow seconds
// must bring MIN_BYTES_PER_SECOND bytes a second on average, the wait for the answer's headers included, or the
// request is aborted and the download refused in one line ("... fell below 1024 bytes/s for 60 s ..."). A
// server that sends a byte now and then, or a burst now and then, so ends: a file of B bytes within about
// B / 1024 + 60 seconds. The page's URL may set another window (?hub-rate-window=SECONDS, whole seconds from 1
// to 3600: a mirror on a connection that stalls for long, or a test that needs a short one); another value is
// refused in one line when a model is asked for, as the CLI refuses a bad ATTNVIZ_HUB_RATE_WINDOW.
const MIN_BYTES_PER_SECOND = 1024, RATE_WINDOW_SECONDS = 60, MAX_RATE_WINDOW_SECONDS = 3600;
let rateWindow = RATE_WINDOW_SECONDS, rateWindowError = '';
{
  const params = new URLSearchParams(location.search);
  const asked = params.get('hub');
  if (asked) {
    const why = setEndpoint(asked);
    if (why) console.warn('attnviz: ' + why);
  }
  const w = params.get('hub-rate-window');
  if (w !== null) {
    if (/^[0-9]{1,4}$/.test(w) && Number(w) >= 1 && Number(w) <= MAX_RATE_WINDOW_SECONDS)
      rateWindow = Number(w);
    else
      rateWindowError = `the page's hub-rate-window is "${w.slice(0, 32)}", not a whole number of seconds ` +
                        `from 1 to ${MAX_RATE_WINDOW_SECONDS}`;
  }
}

// The Model panel's list (the module draws it; a click comes back through the fetchHub hook).
export function showList() {
  if (!window.Module || !Module._attnviz_set_hub || !$('overlay').hidden) return;
  // The engine's format_bytes, as every size the page writes: "about 0 MB" was written for a model under 0.5 MB.
  const models = hubModels.map((m) => ({ repo: m.repo, note: `about ${formatBytes(m.bytes)}`, detail: m.about }));
  call('attnviz_set_hub', JSON.stringify({ endpoint: endpoint === HUB ? '' : endpoint, models }));
}

// What the downloads and reads did, for tests: {repo, phase: 'download' | 'storage', file, loaded, total,
// visible} per progress step.
export const hubLoads = [];

const host = () => endpoint.replace(/^https?:\/\//, '');
// A shard's name in model.safetensors.index.json: a plain file name beside the index.
const SHARD = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}\.safetensors$/;
const MAX_SHARDS = 1000;  // the engine's kMaxWeightShards: the most shards it reads
const MAX_CONFIG = 1 << 20, MAX_INDEX = 16 << 20, MAX_TOKENIZER = 64 << 20;  // the engine's own limits
const DTYPE_BYTES = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, BOOL: 1 };
// Every number the hub or a mirror sends (a Content-Range, a safetensors header's offsets and shapes) and every
// sum of them is a safe integer within a cap, else refused: the caps are below 2^53, so a sum within one is
// exact. One file: at most 1 TiB (the hub's largest shards are about 50 GB); the weights of a model together:
// at most 4 TiB (no model on the hub is half that); the values of a file or a model: at most 2^43 (a value takes
// half a byte at least, in the 4-bit types).
const MAX_FILE_BYTES = 2 ** 40, MAX_MODEL_BYTES = 2 ** 42, MAX_VALUES = 2 ** 43;

class HubError extends Error {}
const fail = (why) => { throw new HubError(why); };

function httpError(repo, file, r) {
  if (r.status === 404) return `${repo} has no ${file} on ${host()} (HTTP 404)`;
  if (r.status === 401 || r.status === 403)
    return `${repo} is not on ${host()}, or is gated or private (HTTP ${r.status}): the page does not sign in; ` +
           `accept its licence on the hub, download it with attnviz-cli download ${repo} (HF_TOKEN set) and ` +
           'choose its folder';
  return `${host()} answered HTTP ${r.status} for ${repo}'s ${file}`;
}

// a + b, refused with why() past `cap` (every cap is below 2^53: a sum within it is exact).
function add(a, b, cap, why) {
  const s = a + b;
  if (!Number.isSafeInteger(s) || s > cap) fail(why());
  return s;
}

// A request under the minimum rate (above): its response `r`, `read()` for its body's pieces, and `end()`,
// which stops its clock and its body (every caller ends it, whatever happens). A request that falls below the
// rate is aborted, and whatever waits on it fails with the one line that says so (`total`: the bytes it
// should bring, for that line). The visitor's Cancel (`signal`) aborts it too, and is not a refusal.
async function get(url, repo, file, signal, init = {}, total = null) {
  const controller = new AbortController();
  const cancel = () => controller.abort();
  if (signal.aborted) controller.abort();
  else signal.addEventListener('abort', cancel);
  let got = 0, windowStart = 0, slow = false, ended = false, reader = null, r;
  const timer = setInterval(() => {
    if (got - windowStart < MIN_BYTES_PER_SECOND * rateWindow) {
      slow = true;
      controller.abort();
    }
    windowStart = got;
  }, rateWindow * 1000);
  const end = () => {
    if (ended) return;
    ended = true;
    clearInterval(timer);
    signal.removeEventListener('abort', cancel);
    if (reader) reader.cancel().catch(() => {});
    else if (r && r.body && !r.bodyUsed) r.body.cancel().catch(() => {});
  };
  const refuseSlow = () => {
    const from = r && r.url ? new URL(r.url).host : host();
    const had = r ? `it had ${formatBytes(got)}${total === null ? '' : ` of ${formatBytes(total)}`}` :
                    'its answer had not begun';
    fail(`the download of ${repo}'s ${file} from ${from} fell below ${MIN_BYTES_PER_SECOND} bytes/s for ` +
         `${rateWindow} s (${had}): the files that came whole are kept, a second try goes on from there`);
  };
  try {
    r = await fetch(url, { ...init, signal: controller.signal, cache: 'no-store', credentials: 'omit' });
  } catch (e) {
    end();
    if (signal.aborted) throw e;
    if (slow) refuseSlow();
    fail(`${host()} could not be reached for ${repo}'s ${file} (${e.message}): the page is offline, or the ` +
         'server does not let this page read it (CORS)');
  }
  return {
    r,
    end,
    async read() {
      // A browser may answer an empty body with none at all (null): that is the end, not an error.
      if (!r.body) {
        end();
        return { done: true, value: undefined };
      }
      if (!reader) reader = r.body.getReader();
      try {
        const piece = await reader.read();
        if (piece.done) end();
        else got += piece.value.length;
        return piece;
      } catch (e) {
        end();
        if (slow && !signal.aborted) refuseSlow();
        throw e;
      }
    },
  };
}

// Reads a request's body, at most `cap` bytes (more is refused), with `progress(got)` as it comes.
async function readBody(req, cap, what, progress) {
  const chunks = [];
  let got = 0;
  for (;;) {
    const { done, value } = await req.read();
    if (done) break;
    got += value.length;
    if (got > cap) fail(`${what} is larger than the ${formatBytes(cap)} it should be`);
    chunks.push(value);
    if (progress) progress(got);
  }
  return { chunks, got };
}
const joined = ({ chunks, got }) => {
  const out = new Uint8Array(got);
  let at = 0;
  for (const c of chunks) out.set(c, at), (at += c.length);
  return out;
};

// A file's bytes against the ETag the hub gave them (as the native CLI's hub download checks every file): a
// 40-hex ETag is git's blob id, sha1 over "blob SIZE\0" and the bytes; a 64-hex one (`X-Linked-Etag`, an LFS
// file) the bytes' sha256. A `Content-Length` shorter than the body (the browser reads that many bytes: a cut
// merges.txt still tokenizes, wrongly) or other bytes are refused in one line, before anything of the file is
// used or stored. The hash is Web Crypto's (`crypto.subtle`), which browsers give secure contexts only (https,
// 127.0.0.1, localhost): on a page served over plain http from another host there is none, and the page
// refuses the hub's files in one line rather than keep bytes it cannot check (a chosen folder still opens).
// An answer from another origin than the endpoint's (an LFS file the hub redirects to its CDN) is not checked:
// the hub's ETag for it is on the redirect, which a page's fetch cannot read, and the CDN's own ETag is not the
// hub's; see docs/page.md ("What is checked"). A redirect within the endpoint's origin (a renamed repository)
// ends in the hub's own answer, with its ETag: that is checked.
const fromEndpoint = (res) => new URL(res.url).origin === new URL(endpoint).origin;
const BLOB_NAME = /^[0-9a-f]{40}$|^[0-9a-f]{64}$/;
function etagOf(res) {
  const raw = res.headers.get('X-Linked-Etag') || res.headers.get('ETag');
  return raw === null ? null : raw.trim().replace(/^W\//, '').replace(/^"(.*)"$/, '$1');
}
const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
async function verifyEtag(repo, file, res, bytes) {
  if (!fromEndpoint(res)) return;  // the hub's ETag is on the redirect: not readable here (above)
  const from = new URL(res.url).host, etag = etagOf(res);
  if (etag === null || !BLOB_NAME.test(etag))
    fail(`${from} sent ${repo}'s ${file} ` +
         (etag === null ? 'without an ETag the page can read' : `with the ETag "${etag.slice(0, 70)}", not a blob name`) +
         ' (a git blob sha1 or a sha256, in Access-Control-Expose-Headers), so its bytes cannot be checked; ' +
         'nothing of it is kept');
  if (!(globalThis.crypto && crypto.subtle))
    fail(`this page is not a secure context (https or 127.0.0.1), so it has no Web Crypto to check ${repo}'s ` +
         `${file} against its ETag; nothing of it is kept (a chosen folder still opens)`);
  let kind, hash;
  if (etag.length === 40) {
    kind = 'git blob sha1';
    const prefix = new TextEncoder().encode(`blob ${bytes.length}\0`);
    const all = new Uint8Array(prefix.length + bytes.length);
    all.set(prefix);
    all.set(bytes, prefix.length);
    hash = hex(await crypto.subtle.digest('SHA-1', all));
  } else {
    kind = 'sha256';
    hash = hex(await crypto.subtle.digest('SHA-256', bytes));
  }
  if (hash !== etag)
    fail(`${repo}'s ${file} does not hash to its ETag ${etag.slice(0, 8)}… (${from} sent ${bytes.length} ` +
         `bytes, whose ${kind} is ${hash.slice(0, 8)}…): the answer is cut or not this file; nothing of it is kept`);
}

// Bytes [start, start + length) of a file, through a Range request; a server that sends the whole file
// anyway is read only as far as needed. Also the file's size when the answer says it: a Content-Range of
// exactly "bytes START-LAST/SIZE" (or SIZE "*", unknown), its numbers safe integers, START the one asked for
// and SIZE at most MAX_FILE_BYTES; any other is refused.
async function readRange(url, repo, file, start, length, signal) {
  const asked = `${start}-${start + length - 1}`;
  const req = await get(url, repo, file, signal, { headers: { Range: `bytes=${asked}` } }, length);
  try {
    const r = req.r;
    if (!r.ok) fail(httpError(repo, file, r));
    let size = null;
    const range = r.status === 206 ? r.headers.get('Content-Range') : null;
    if (range !== null) {
      const m = /^bytes ([0-9]{1,16})-([0-9]{1,16})\/([0-9]{1,16}|\*)$/.exec(range.trim());
      const [first, last] = m ? [Number(m[1]), Number(m[2])] : [NaN, NaN];
      size = m && m[3] !== '*' ? Number(m[3]) : null;
      if (!m || first !== start || !(last >= first) || (size !== null && !(last < size && size <= MAX_FILE_BYTES)))
        fail(`${repo}'s ${file}: ${new URL(r.url).host} answered the range ${asked} with the Content-Range ` +
             `"${range.slice(0, 60)}", not that range of a file of at most ${formatBytes(MAX_FILE_BYTES)}`);
    }
    const skip = r.status === 206 ? 0 : start;
    const out = new Uint8Array(length);
    let seen = 0, kept = 0;
    while (kept < length) {
      const { done, value } = await req.read();
      if (done) break;
      const from = Math.max(0, skip - seen), to = Math.min(value.length, skip + length - seen);
      if (to > from) out.set(value.subarray(from, to), kept), (kept += to - from);
      seen += value.length;
    }
    if (kept < length) fail(`${repo}'s ${file} ended after ${start + kept} bytes, inside its safetensors header`);
    return { bytes: out, size };
  } finally {
    req.end();
  }
}

// A weights file's safetensors header: its size, the values it holds and their float32 bytes.
async function weightsHeader(url, repo, file, signal) {
  const head = await readRange(url, repo, file, 0, 8, signal);
  const n = Number(new DataView(head.bytes.buffer).getBigUint64(0, true));
  if (!(n >= 2 && n <= 100e6)) fail(`${repo}'s ${file} is not a safetensors file: its header length is ${n}`);
  const text = (await readRange(url, repo, file, 8, n, signal)).bytes;
  let header;
  try {
    header = JSON.parse(new TextDecoder().decode(text));
  } catch (e) {
    fail(`${repo}'s ${file} is not a safetensors file: its header is not JSON (${e.message})`);
  }
  if (!header || typeof header !== 'object' || Array.isArray(header))
    fail(`${repo}'s ${file} is not a safetensors file: its header is not an object`);
  const tensor = (key) => `${repo}'s ${file}: the tensor "${String(key).slice(0, 60)}"`;
  const tooMuch = () => `${repo}'s ${file}: its header describes more than a file holds (at most ` +
                        `${formatBytes(MAX_FILE_BYTES)} and ${MAX_VALUES} values)`;
  let numel = 0, numel16 = 0, end = 0;
  for (const [key, t] of Object.entries(header)) {
    if (key === '__metadata__') continue;
    const ok = t && Array.isArray(t.shape) && t.shape.every((d) => Number.isSafeInteger(d) && d >= 0) &&
               Array.isArray(t.data_offsets) && t.data_offsets.length === 2 &&
               t.data_offsets.every((d) => Number.isSafeInteger(d) && d >= 0) && t.data_offsets[0] <= t.data_offsets[1];
    if (!ok) fail(`${tensor(key)} has no valid shape and offsets`);
    const count = t.shape.reduce((a, b) => a * b, 1);
    if (!Number.isSafeInteger(count) || count > MAX_VALUES) fail(tooMuch());
    if (DTYPE_BYTES[t.dtype] && count * DTYPE_BYTES[t.dtype] !== t.data_offsets[1] - t.data_offsets[0])
      fail(`${tensor(key)} does not fill its offsets`);
    numel = add(numel, count, MAX_VALUES, tooMuch);
    if (t.dtype === 'BF16' || t.dtype === 'F16') numel16 += count;  // at most numel
    end = Math.max(end, t.data_offsets[1]);
  }
  const bytes = add(add(8, n, MAX_FILE_BYTES, tooMuch), end, MAX_FILE_BYTES, tooMuch);
  if (head.size !== null && head.size !== bytes)
    fail(`${repo}'s ${file} is ${head.size} bytes on ${host()} but its header describes ${bytes}`);
  return { bytes, numel, numel16 };
}

// The browser's storage: the Cache API where the page has it (a secure context: https or 127.0.0.1),
// else this tab's memory (gone when it closes).
const STORE = 'attnviz-hub-v1';
let memoryStore = null;
async function store() {
  if (typeof caches !== 'undefined')
    try {
      return await caches.open(STORE);
    } catch (e) { /* no storage here: memory */ }
  if (!memoryStore) {
    const m = new Map();
    const header = 'X-Attnviz-Bytes';
    memoryStore = {
      async match(k) {
        return m.has(k) ? new Response(m.get(k).blob, { headers: { [header]: m.get(k).bytes } }) : undefined;
      },
      async put(k, r) { m.set(k, { blob: await r.blob(), bytes: r.headers.get(header) }); },
      async delete(k) { return m.delete(k); },
    };
  }
  return memoryStore;
}
// Files the storage had no room for (a private window's small quota): kept in this tab only, and the model is
// fetched again on the next visit.
const session = new Map();
const fileKey = (repo, rev, file) => `${endpoint}/${repo}/resolve/${encodeURIComponent(rev)}/${file}`;
const manifestKey = (repo, rev) => `${endpoint}/.attnviz-hub/${repo}/${encodeURIComponent(rev)}/manifest.json`;

// Keeps a file; false when the storage had no room for it (then this tab holds it).
async function putFile(cache, key, blob) {
  try {
    await cache.put(key, new Response(blob, { headers: { 'X-Attnviz-Bytes': String(blob.size) } }));
    session.delete(key);
    return true;
  } catch (e) {
    session.set(key, blob);
    return false;
  }
}
async function match(cache, key) {
  if (session.has(key)) return new Response(session.get(key), { headers: { 'X-Attnviz-Bytes': String(session.get(key).size) } });
  return cache.match(key);
}
async function storedBytes(cache, key) {
  const r = await match(cache, key);
  return r ? Number(r.headers.get('X-Attnviz-Bytes')) : -1;
}

// The manifest of a model kept in this browser (null: none, or not all of its files are there).
export async function stored(repo, rev = 'main') {
  const cache = await store();
  const r = await cache.match(manifestKey(repo, rev));
  if (!r) return null;
  let m;
  try {
    m = JSON.parse(await r.text());
  } catch (e) {
    return null;
  }
  if (!m || !Array.isArray(m.files)) return null;
  for (const f of m.files)
    if ((await storedBytes(cache, fileKey(repo, rev, f.name))) !== f.bytes) return null;
  return m;
}
export async function forget(repo, rev = 'main') {
  const cache = await store();
  const m = await stored(repo, rev);
  await cache.delete(manifestKey(repo, rev));
  for (const f of (m && m.files) || []) await cache.delete(fileKey(repo, rev, f.name));
  return !!m;
}

// What the engine holds: GPT-2's weights widened to float32; other architectures keep BF16 / F16 matrices in 16
// bits (engine/include/attnviz/io/gpt_file.hpp, keep_16bit), and the files are held too while they load.
function memoryCheck(repo, m) {
  const kept16 = m.keeps16 && m.numel16 ? m.numel16 : 0;
  const floats = (m.numel - kept16) * 4 + kept16 * 2, need = floats + m.weightBytes;
  const free = attnviz.status().memory.free;
  if (!(need <= free))
    fail(`${repo} needs ${formatBytes(floats)} ${kept16 ? 'with its 16-bit weights kept 16-bit' : 'as float32'} ` +
         `(${formatBytes(need)} while it loads, a download of ` +
         `${formatBytes(m.weightBytes)}): the page can hold ${formatBytes(free)}; use the desktop app ` +
         `(attnviz-cli download ${repo})`);
}

// Progress for the panel and the log, at most every 100 ms.
function progressShower(repo, phase, verb) {
  let shown = 0;
  return (file, loaded, total, force) => {
    const now = performance.now();
    if (!force && now - shown < 100) return;
    shown = now;
    showBusy(`${verb} ${repo}: ${formatBytes(loaded)} of ${formatBytes(total)} (${file})`, total ? loaded / total : null,
             true);
    hubLoads.push({ repo, phase, file, loaded, total, visible: !$('busy').hidden });
  };
}

// Fetches what the model needs into the storage; returns its manifest.
async function download(repo, rev, cache, signal) {
  if (rateWindowError) fail(rateWindowError);
  showBusy(`Asking ${host()} for ${repo}…`, null, true);
  const at = (r, file) => `${endpoint}/${repo}/resolve/${encodeURIComponent(r)}/${file}`;
  const small = async (r, file, cap) => {
    const req = await get(at(r, file), repo, file, signal);
    try {
      const res = req.r;
      if (res.status === 404) return { missing: true };
      if (!res.ok) fail(httpError(repo, file, res));
      const body = joined(await readBody(req, cap, `${repo}'s ${file}`));
      await verifyEtag(repo, file, res, body);
      return { body, commit: res.headers.get('X-Repo-Commit') };
    } finally {
      req.end();
    }
  };
  const config = await small(rev, 'config.json', MAX_CONFIG);
  if (config.missing) fail(`${repo} has no config.json at ${rev} on ${host()} (HTTP 404): is it a model?`);
  // The rest from the commit the hub answered with, so that a push meanwhile cannot mix two versions.
  const pinned = /^[0-9a-f]{40}$/.test(config.commit || '') ? config.commit : rev;
  const files = [{ name: 'config.json', body: config.body }];
  // The weights: one file, or an index and its shards. Their headers first.
  let weights = ['model.safetensors'];
  let first;
  try {
    first = await weightsHeader(at(pinned, 'model.safetensors'), repo, 'model.safetensors', signal);
  } catch (e) {
    if (!(e instanceof HubError) || !/HTTP 404/.test(e.message)) throw e;
    const index = await small(pinned, 'model.safetensors.index.json', MAX_INDEX);
    if (index.missing)
      fail(`${repo} has no model.safetensors (nor model.safetensors.index.json) at ${rev} on ${host()}: the ` +
           'page reads safetensors weights only');
    let map;
    try {
      map = JSON.parse(new TextDecoder().decode(index.body)).weight_map;
    } catch (e2) {
      fail(`${repo}'s model.safetensors.index.json is not JSON (${e2.message})`);
    }
    if (!map || typeof map !== 'object' || Array.isArray(map))
      fail(`${repo}'s model.safetensors.index.json has no weight_map object`);
    weights = [...new Set(Object.values(map))];
    const bad = weights.find((w) => typeof w !== 'string' || !SHARD.test(w));
    if (bad !== undefined) fail(`${repo}'s index names a shard that is not a plain .safetensors file name: ${String(bad).slice(0, 80)}`);
    if (!weights.length || weights.length > MAX_SHARDS)
      fail(`${repo}'s index names ${weights.length} shards (1 to ${MAX_SHARDS} are read)`);
    files.push({ name: 'model.safetensors.index.json', body: index.body });
  }
  const sizes = [];
  let numel = 0, numel16 = 0, weightBytes = 0;
  for (const w of weights) {
    showBusy(`Reading the header of ${repo}'s ${w}…`, null, true);
    const h = first && w === 'model.safetensors' ? first : await weightsHeader(at(pinned, w), repo, w, signal);
    const tooMuch = () => `${repo}'s weights add up to more than a model holds (at most ` +
                          `${formatBytes(MAX_MODEL_BYTES)} and ${MAX_VALUES} values), at ${w}`;
    sizes.push(h.bytes);
    numel = add(numel, h.numel, MAX_VALUES, tooMuch);
    numel16 = add(numel16, h.numel16, MAX_VALUES, tooMuch);
    weightBytes = add(weightBytes, h.bytes, MAX_MODEL_BYTES, tooMuch);
  }
  let keeps16 = false;
  try {
    const type = JSON.parse(new TextDecoder().decode(config.body)).model_type;
    keeps16 = typeof type === 'string' && type !== 'gpt2';
  } catch (e) { /* the engine says what is wrong with it when it opens */ }
  const manifest = { repo, rev, commit: pinned === rev ? null : pinned, endpoint, numel, numel16, keeps16, weightBytes,
                     files: [] };
  memoryCheck(repo, manifest);
  // The tokenizer: tokenizer.json, else GPT-2's vocab.json + merges.txt.
  const tok = await small(pinned, 'tokenizer.json', MAX_TOKENIZER);
  if (!tok.missing) files.push({ name: 'tokenizer.json', body: tok.body });
  else {
    for (const f of ['vocab.json', 'merges.txt']) {
      const got = await small(pinned, f, MAX_TOKENIZER);
      if (got.missing) fail(`${repo} has neither tokenizer.json nor vocab.json and merges.txt at ${rev} on ${host()}`);
      files.push({ name: f, body: got.body });
    }
  }
  const unkept = [];
  for (const f of files) {
    if (!(await putFile(cache, fileKey(repo, rev, f.name), new Blob([f.body])))) unkept.push(f.name);
    manifest.files.push({ name: f.name, bytes: f.body.length });
  }
  // The weights, each kept whole once it has come: after a Cancel, a second try fetches only the rest.
  const show = progressShower(repo, 'download', 'Downloading');
  let done = 0;
  for (let i = 0; i < weights.length; ++i) {
    const w = weights[i], key = fileKey(repo, rev, w);
    if ((await storedBytes(cache, key)) !== sizes[i]) {
      const req = await get(at(pinned, w), repo, w, signal, {}, sizes[i]);
      let body;
      try {
        if (!req.r.ok) fail(httpError(repo, w, req.r));
        body = await readBody(req, sizes[i], `${repo}'s ${w}`, (got) => show(w, done + got, weightBytes));
      } finally {
        req.end();
      }
      if (body.got !== sizes[i]) fail(`${repo}'s ${w} ended after ${body.got} of its ${sizes[i]} bytes`);
      const blob = new Blob(body.chunks);
      body = null;
      // The whole file is held here: when the hub itself answered (not its CDN), its bytes are hashed against
      // its ETag before they are kept (one more copy of the file, for the hash, while it runs).
      if (fromEndpoint(req.r)) await verifyEtag(repo, w, req.r, new Uint8Array(await blob.arrayBuffer()));
      if (!(await putFile(cache, key, blob))) unkept.push(w);
    }
    done += sizes[i];
    show(w, done, weightBytes, true);
    manifest.files.push({ name: w, bytes: sizes[i] });
  }
  manifest.weights = weights;
  // The list of files last, and only when every file is in the storage: a second visit trusts it.
  if (!unkept.length) await putFile(cache, manifestKey(repo, rev), new Blob([JSON.stringify(manifest)]));
  session.delete(manifestKey(repo, rev));
  manifest.unkept = unkept.map((f) => `${f} (${formatBytes(manifest.files.find((x) => x.name === f).bytes)})`);
  return manifest;
}

// Reads a stored model into the module's file system and opens it.
async function openStored(repo, rev, manifest, cache, signal) {
  memoryCheck(repo, manifest);
  await ensureVocab().catch(() => {});
  const FS = Module.FS;
  const dir = '/models/' + repo.replace('/', '--');
  const remove = freshModelDir(dir);
  const show = progressShower(repo, 'storage', 'Reading');
  const total = manifest.files.reduce((a, f) => a + f.bytes, 0);
  let done = 0;
  try {
    for (const f of manifest.files) {
      const r = await match(cache, fileKey(repo, rev, f.name));
      if (!r) fail(`${repo}'s ${f.name} is no longer in this browser's storage: open it again online`);
      const path = dir + '/' + f.name;
      const stream = FS.open(path, 'w');
      try {
        FS.truncate(path, f.bytes);  // one allocation, not one per piece
        // An empty file's stored answer may have no body at all (null): nothing to read.
        const reader = r.body ? r.body.getReader() : null;
        let at = 0;
        while (reader) {
          const { done: end, value } = await reader.read();
          if (end) break;
          if (signal.aborted) throw new DOMException('cancelled', 'AbortError');
          if (at + value.length > f.bytes) fail(`${repo}'s ${f.name} in this browser's storage is not what was kept`);
          FS.write(stream, value, 0, value.length, at);
          at += value.length;
          show(f.name, done + at, total);
        }
        if (at !== f.bytes) fail(`${repo}'s ${f.name} in this browser's storage is not what was kept`);
      } finally {
        FS.close(stream);
      }
      done += f.bytes;
      show(f.name, done, total, true);
      await painted();
    }
  } catch (e) {
    remove();
    throw e;
  }
  showBusy(`Opening ${repo}…`, null, false);
  await painted();
  try {
    return call('attnviz_open_model', JSON.stringify({ kind: 'file', path: dir, seed: 123, train: false }));
  } finally {
    // The weights are packed in the module now: the files' bytes are not needed again.
    for (const w of manifest.weights || []) try { FS.unlink(dir + '/' + w); } catch (e) { /* gone */ }
    hideBusy();
    wake();
  }
}

// Opens ORG/NAME at `rev`: from this browser's storage when it holds the whole model, else from the hub
// first. A promise of '' or why not (also shown in the controls); the view keeps what it had.
export function openHub(repo, { rev = 'main' } = {}) {
  needModule();
  return serially(async () => {
    repo = String(repo);
    rev = String(rev);
    // ORG/NAME and a revision (a branch, a tag or a commit), checked by the engine as the CLI and the app
    // check --model ORG/NAME@REV (parse_hub_name): one rule for every host.
    // (The engine reads a C string: a NUL would end the name it checks before the rest that the URL and the
    // storage folder would use.)
    if (repo.includes('\0') || rev.includes('\0')) return refuse('a Hugging Face model name holds no NUL character');
    const bad = call('attnviz_check_hub_name', `${repo}@${rev}`);
    if (bad) return refuse(bad);
    const controller = new AbortController();
    setOnCancel(() => controller.abort());
    try {
      const cache = await store();
      const manifest = (await stored(repo, rev)) || (await download(repo, rev, cache, controller.signal));
      const error = await openStored(repo, rev, manifest, cache, controller.signal);
      if (error) return error;
      $('ask').hidden = true;
      if (manifest.unkept && manifest.unkept.length)
        call('attnviz_set_message', `${repo} is open, but the browser's storage had no room for ` +
             `${manifest.unkept.join(', ')}: it is kept until the page closes, and fetched again next time`);
      return '';
    } catch (e) {
      hideBusy();
      if (controller.signal.aborted)
        return refuse(`fetching ${repo} was cancelled (the files that came whole are kept: a second try goes on from there)`);
      if (e instanceof HubError) return refuse(e.message);
      return refuse(`fetching ${repo} failed: ${e.message}`);
    } finally {
      setOnCancel(null);
    }
  });
}
