// A local imitation of the Hugging Face hub for the page's tests (nothing leaves 127.0.0.1): the hub's URL
// layout, GET /ORG/NAME/resolve/REV/FILE (REV: main or the repository's commit), its CORS headers,
// X-Repo-Commit and ETag on the first response, a 302 to a second server (the "CDN", another origin) for
// .safetensors files, Range requests answered with 206 there, 404 for a file a repository lacks and 401 for a
// repository it does not know (as the hub answers both).
//   const hub = await startHub({ 'ORG/NAME': { 'config.json': Buffer | { size, head } , ... } });
//   hub.url            the endpoint to give the page
//   hub.requests       every request seen: {server: 'hub' | 'cdn', method, path, range}
//   hub.delayMs        a pause before each 16 kB piece of a CDN body (to watch progress, to Cancel)
//   await hub.close()  both servers stop: the page is offline
// A file given as {size, head} is `head` followed by zeros up to `size` bytes, made as it is read (a file too
// large to hold, for the page's memory check). Misbehaviours, as a file's own fields (a Buffer's too):
//   drip: true       its whole-file GET sends one 16 kB piece, then 4 bytes every 250 ms (16 bytes/s)
//   total: 'TEXT'    the size its Range answers announce in Content-Range ("bytes 0-7/TEXT")
//   stall: true      the hub never answers for it (no headers), until the server closes
import { createServer } from 'node:http';
import { createHash } from 'node:crypto';

const CORS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Expose-Headers': 'X-Repo-Commit, ETag, Content-Range, Accept-Ranges, Content-Length, X-Error-Code',
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

export async function startHub(repos) {
  const requests = [];
  const commits = {}, etags = new Map(), blobs = new Map();
  for (const [repo, files] of Object.entries(repos)) {
    commits[repo] = createHash('sha1').update(repo).digest('hex');
    for (const [name, f] of Object.entries(files)) {
      const etag = createHash('sha256').update(repo + '/' + name).update(Buffer.isBuffer(f) ? f : String(f.size)).digest('hex');
      etags.set(`${repo}/${name}`, etag);
      blobs.set(etag, f);
    }
  }
  const state = { delayMs: 0 };

  const cdn = await listen(async (req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    requests.push({ server: 'cdn', method: req.method, path, range: req.headers.range || null });
    if (req.method === 'OPTIONS') {
      res.writeHead(204, { ...CORS, 'Access-Control-Allow-Headers': 'Range', 'Access-Control-Allow-Methods': 'GET, HEAD' });
      return res.end();
    }
    const f = blobs.get(path.replace(/^\/blobs\//, ''));
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
      res.write(slice(f, 0, Math.min(end, PIECE - 1)));
      for (let at = PIECE; at <= end && !closed; at += 4) {
        await new Promise((r) => setTimeout(r, 250));
        if (!closed) res.write(slice(f, at, Math.min(end, at + 3)));
      }
      return res.end();
    }
    for (let at = start; at <= end && !closed; at += PIECE) {
      if (state.delayMs) await new Promise((r) => setTimeout(r, state.delayMs));
      if (closed) break;
      res.write(slice(f, at, Math.min(end, at + PIECE - 1)));
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
      // Large files live on the CDN, another origin.
      res.writeHead(302, { ...headers, Location: `${cdn.url}/blobs/${etag}` });
      return res.end();
    }
    res.writeHead(200, { ...headers, 'Content-Type': 'application/octet-stream', 'Content-Length': String(sizeOf(f)) });
    res.end(req.method === 'HEAD' ? undefined : slice(f, 0, sizeOf(f) - 1));
  });

  return {
    url: hub.url,
    cdn: cdn.url,
    requests,
    commits,
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
