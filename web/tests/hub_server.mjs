// A local imitation of the Hugging Face hub for the page's tests (nothing leaves 127.0.0.1): the hub's URL
// layout, GET /ORG/NAME/resolve/REV/FILE (REV: main or the repository's commit), its CORS headers,
// X-Repo-Commit and ETag on the first response, a 302 to a second server (the "CDN", another origin) for
// .safetensors files, Range requests answered with 206 there, 404 for a file a repository lacks and 401 for a
// repository it does not know (as the hub answers both).
//   const hub = await startHub({ 'ORG/NAME': { 'config.json': Buffer | { size, head } , ... } });
//   hub.renamed        {'OLD/NAME': 'ORG/NAME'}: the hub answers OLD/NAME's files with a 307 to ORG/NAME's, on
//                      its own origin (as for a renamed repository)
//   hub.url            the endpoint to give the page
//   hub.requests       every request seen: {server: 'hub' | 'cdn', method, path, range}
//   hub.delayMs        a pause before each 16 kB piece of a CDN body (to watch progress, to Cancel)
//   await hub.close()  both servers stop: the page is offline
// A file given as {size, head} is `head` followed by zeros up to `size` bytes, made as it is read (a file too
// large to hold, for the page's memory check). Misbehaviours, as a file's own fields (a Buffer's too):
//   drip: true       its whole-file GET sends one 16 kB piece, then 4 bytes every 250 ms (16 bytes/s)
//   total: 'TEXT'    the size its Range answers announce in Content-Range ("bytes 0-7/TEXT")
//   stall: true      the hub never answers for it (no headers), until the server closes
//   cut: N           the hub sends only its first N bytes, with a Content-Length of N and the whole file's ETag
//                    (as a browser reads an answer whose Content-Length is shorter than its body)
//   other: true      the hub (or the CDN) sends other bytes of its length (one byte changed), under its ETag
//   noEtag: true     the hub's answer for it has no ETag
//   direct: true     a .safetensors file the hub answers itself (no redirect), as a mirror may
// Flags are read at each request: a test may set or delete them (a server that is fixed).
// ETags are the hub's: a small file's is git's blob id (sha1 over "blob SIZE\0" and the bytes), a .safetensors
// file's its sha256 (also as X-Linked-Etag and X-Linked-Size, as the hub sends them); a file given as {size,
// head} gets the sha256 of its head and size instead (hashing gigabytes of zeros would take too long; the page
// does not hash weights that come through the redirect).
import { createServer } from 'node:http';
import { createHash } from 'node:crypto';

const CORS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Expose-Headers': 'X-Repo-Commit, ETag, X-Linked-Etag, X-Linked-Size, Content-Range, Accept-Ranges, ' +
                                   'Content-Length, X-Error-Code',
};
const PIECE = 16384;

function listen(handler) {
  const server = createServer(handler);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${server.address().port}` }));
  });
}

const sizeOf = (f) => (Buffer.isBuffer(f) ? f.length : f.size);
// Bytes [start, end] of a file.
function slice(f, start, end) {
  if (Buffer.isBuffer(f)) return f.subarray(start, end + 1);
  const out = Buffer.alloc(end + 1 - start);
  if (start < f.head.length) f.head.subarray(start, Math.min(end + 1, f.head.length)).copy(out);
  return out;
}
// Bytes [start, end] as sent: with `other`, the file's middle byte changed.
function sent(f, start, end) {
  const out = slice(f, start, end);
  if (!f.other) return out;
  const copy = Buffer.from(out), mid = Math.floor(sizeOf(f) / 2);
  if (mid >= start && mid <= end) copy[mid - start] ^= 0x5a;
  return copy;
}
function etagOf(name, f) {
  if (!Buffer.isBuffer(f)) return createHash('sha256').update(f.head || '').update(String(f.size)).digest('hex');
  if (name.endsWith('.safetensors')) return createHash('sha256').update(f).digest('hex');
  return createHash('sha1').update(`blob ${f.length}\0`).update(f).digest('hex');
}

export async function startHub(repos) {
  const requests = [];
  // The CDN's blobs by number (two repositories' files may hold the same bytes and differ in their flags).
  const commits = {}, etags = new Map(), blobIds = new Map(), blobs = [];
  for (const [repo, files] of Object.entries(repos)) {
    commits[repo] = createHash('sha1').update(repo).digest('hex');
    for (const [name, f] of Object.entries(files)) {
      etags.set(`${repo}/${name}`, etagOf(name, f));
      blobIds.set(`${repo}/${name}`, blobs.length);
      blobs.push(f);
    }
  }
  const state = { delayMs: 0 };
  const renamed = {};

  const cdn = await listen(async (req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    requests.push({ server: 'cdn', method: req.method, path, range: req.headers.range || null });
    if (req.method === 'OPTIONS') {
      res.writeHead(204, { ...CORS, 'Access-Control-Allow-Headers': 'Range', 'Access-Control-Allow-Methods': 'GET, HEAD' });
      return res.end();
    }
    const id = /^\/blobs\/(\d+)$/.exec(path);
    const f = id ? blobs[Number(id[1])] : undefined;
    if (!f) return res.writeHead(404, CORS).end('not found');
    const size = sizeOf(f);
    let start = 0, end = size - 1, status = 200;
    const headers = { ...CORS, 'Accept-Ranges': 'bytes', 'Content-Type': 'application/octet-stream' };
    const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range || '');
    if (m) {
      start = Number(m[1]);
      end = m[2] ? Math.min(Number(m[2]), size - 1) : size - 1;
      if (start >= size || start > end) {
        res.writeHead(416, { ...CORS, 'Content-Range': `bytes */${size}` });
        return res.end();
      }
      status = 206;
      headers['Content-Range'] = `bytes ${start}-${end}/${f.total ?? size}`;
    }
    headers['Content-Length'] = String(end + 1 - start);
    res.writeHead(status, headers);
    if (req.method === 'HEAD') return res.end();
    let closed = false;
    res.on('close', () => { closed = true; });
    if (f.drip && !m) {
      res.write(sent(f, 0, Math.min(end, PIECE - 1)));
      for (let at = PIECE; at <= end && !closed; at += 4) {
        await new Promise((r) => setTimeout(r, 250));
        if (!closed) res.write(sent(f, at, Math.min(end, at + 3)));
      }
      return res.end();
    }
    for (let at = start; at <= end && !closed; at += PIECE) {
      if (state.delayMs) await new Promise((r) => setTimeout(r, state.delayMs));
      if (closed) break;
      res.write(sent(f, at, Math.min(end, at + PIECE - 1)));
    }
    res.end();
  });

  const hub = await listen((req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    requests.push({ server: 'hub', method: req.method, path, range: req.headers.range || null });
    if (req.method === 'OPTIONS') {
      res.writeHead(204, { ...CORS, 'Access-Control-Allow-Headers': 'Range, Authorization',
                           'Access-Control-Allow-Methods': 'GET, HEAD' });
      return res.end();
    }
    const m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/([^/]+)$/.exec(path);
    if (m && renamed[m[1]]) {
      res.writeHead(307, { ...CORS, Location: `/${renamed[m[1]]}/resolve/${m[2]}/${m[3]}` });
      return res.end();
    }
    if (!m || !repos[m[1]]) {
      res.writeHead(401, { ...CORS, 'X-Error-Code': 'RepoNotFound', 'Content-Type': 'text/plain' });
      return res.end('Repository not found');
    }
    const [, repo, rev, name] = m;
    if (rev !== 'main' && rev !== commits[repo]) {
      res.writeHead(404, { ...CORS, 'X-Error-Code': 'RevisionNotFound' });
      return res.end('Revision not found');
    }
    const f = repos[repo][name];
    if (!f) {
      res.writeHead(404, { ...CORS, 'X-Error-Code': 'EntryNotFound', 'X-Repo-Commit': commits[repo] });
      return res.end('Entry not found');
    }
    if (f.stall) return;  // no answer: the connection stays open until close()
    const etag = etags.get(`${repo}/${name}`);
    const headers = { ...CORS, 'X-Repo-Commit': commits[repo], ETag: `"${etag}"` };
    if (name.endsWith('.safetensors')) {
      headers['X-Linked-Etag'] = `"${etag}"`;
      headers['X-Linked-Size'] = String(sizeOf(f));
      // Large files live on the CDN, another origin.
      if (!f.direct) {
        res.writeHead(302, { ...headers, Location: `${cdn.url}/blobs/${blobIds.get(`${repo}/${name}`)}` });
        return res.end();
      }
    }
    if (f.noEtag) delete headers.ETag;
    const length = f.cut !== undefined ? f.cut : sizeOf(f);
    res.writeHead(200, { ...headers, 'Content-Type': 'application/octet-stream', 'Content-Length': String(length) });
    res.end(req.method === 'HEAD' || length === 0 ? undefined : sent(f, 0, length - 1));
  });

  return {
    url: hub.url,
    cdn: cdn.url,
    requests,
    commits,
    renamed,
    get delayMs() { return state.delayMs; },
    set delayMs(v) { state.delayMs = v; },
    async close() {
      for (const s of [hub.server, cdn.server]) {
        s.closeAllConnections();
        await new Promise((r) => s.close(r));
      }
    },
  };
}
