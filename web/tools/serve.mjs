// Serves the built page on 127.0.0.1 only (nothing else listens, nothing is fetched from elsewhere).
//   node web/tools/serve.mjs [--dir build/wasm-release/web/site] [--port 8000] [--no-isolation]
// Tries the next ports when one is taken, and prints the URL. Also imported by the browser tests.
// The page is cross-origin isolated (COOP same-origin, COEP require-corp), so it runs the threaded module
// (WebAssembly threads need it); --no-isolation serves it without those headers, to see the one-thread
// fallback. The hub's downloads still work isolated: they are CORS requests, and the hub answers them with
// CORS headers, which is all require-corp asks of a cross-origin fetch.
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { resolve, join, extname, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.png': 'image/png',
  '.css': 'text/css; charset=utf-8',
};

// The headers that make a page cross-origin isolated (crossOriginIsolated, SharedArrayBuffer).
export const ISOLATION = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

// isolated: send ISOLATION's headers (the command line's default; the tests choose per server).
export function serve(dir, port = 8000, { tries = 20, quiet = true, isolated = false } = {}) {
  const root = resolve(dir);
  const server = createServer(async (req, res) => {
    let path;
    try {
      path = decodeURIComponent(new URL(req.url, 'http://127.0.0.1').pathname);
    } catch {
      res.writeHead(400).end('bad request');
      return;
    }
    if (path.endsWith('/')) path += 'index.html';
    const file = join(root, path);
    if (file !== root && !file.startsWith(root + sep)) {
      res.writeHead(403).end('forbidden');
      return;
    }
    try {
      const body = await readFile(file);
      res.writeHead(200, {
        'Content-Type': TYPES[extname(file)] || 'application/octet-stream',
        'Cache-Control': 'no-store',
        ...(isolated ? ISOLATION : {}),
      });
      res.end(req.method === 'HEAD' ? undefined : body);
      if (!quiet) console.log(`${req.method} ${path} 200`);
    } catch {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found');
      if (!quiet) console.log(`${req.method} ${path} 404`);
    }
  });
  return new Promise((resolvePromise, reject) => {
    let attempt = 0;
    const listen = (p) => {
      server.once('error', (e) => {
        if (e.code === 'EADDRINUSE' && ++attempt < tries && port !== 0) listen(p + 1);
        else reject(e);
      });
      server.listen(p, '127.0.0.1', () => {
        const { port: bound } = server.address();
        resolvePromise({ server, url: `http://127.0.0.1:${bound}/` });
      });
    };
    listen(port);
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opt = (name, fallback) => {
    const i = args.indexOf(name);
    return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
  };
  const here = fileURLToPath(new URL('.', import.meta.url));
  const dir = opt('--dir', join(here, '..', '..', 'build', 'wasm-release', 'web', 'site'));
  const port = Number(opt('--port', '8000'));
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`serve: --port must be 0..65535, not ${opt('--port')}`);
    process.exit(2);
  }
  try {
    await readFile(join(dir, 'index.html'));
  } catch {
    console.error(`serve: no index.html in ${dir} (build the page first: cmake --build --preset wasm-release)`);
    process.exit(1);
  }
  const isolated = !args.includes('--no-isolation');
  const { url } = await serve(dir, port, { quiet: true, isolated });
  console.log(`attnviz: serving ${dir}` + (isolated ? ' (cross-origin isolated: WebAssembly threads)'
                                                  : ' without isolation (one thread)'));
  console.log(`attnviz: open ${url}  (Ctrl+C stops the server)`);
}
