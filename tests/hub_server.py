"""A local stand-in for the Hugging Face hub, for tests that must never touch the network.

It serves the hub's file layout from repositories the test describes in memory:
  HEAD/GET /ORG/NAME/resolve/REV/FILE   REV a branch (refs) or a commit; small files answer 200 with an ETag,
                                        .safetensors files a 302 to /cdn/... on another host name (localhost
                                        instead of 127.0.0.1, as the hub sends large files to its CDN) with
                                        X-Linked-Etag and X-Linked-Size; every answer carries X-Repo-Commit
  GET /cdn/ORG/NAME/COMMIT/FILE         the bytes, with Range (206 / 416)
Errors as the hub gives them: 401 RepoNotFound, 404 RevisionNotFound / EntryNotFound, 401/403 GatedRepo for a
gated repository without the right token. Misbehaviours a repository can ask for (Repo.modes):
  cut      the first GET of a CDN file sends half of it, then closes the connection
  hold     the first GET of a CDN file sends half of it, then waits for `released` before closing
  badsize  X-Linked-Size announces 7 bytes more than the file has
  loop     model.safetensors redirects to itself
  huge     X-Linked-Size announces 2^50 bytes
  drip     the first GET of a CDN file sends half of it, then one byte every half second (for up to 60 s)
  slowhead config.json's answer sends a header line every half second (for up to 60 s), never its end
  headers  config.json's answer sends 100,000 header lines of 100 bytes, as fast as it can
  corrupt  every small file's GET sends other bytes of the same length (its last byte flipped) than its ETag
           names; corruptlfs the same for .safetensors files (their CDN answers)
A short Content-Length for a small file (its body sent whole after it): Repo.sizes, below.
What a repository announces can be set per file: Repo.sizes (name -> the size header's text, X-Linked-Size
for a .safetensors file, else Content-Length, e.g. str(2**64 - 1)) and Repo.etags (name -> the ETag header's
text, X-Linked-Etag for a .safetensors file, e.g. '"%s.incomplete"' % sha256).
Every request is logged (method, path, Range, whether it carried Authorization, Host).
"""

import hashlib
import http.server
import threading
import urllib.parse


class Repo:
    def __init__(self, files, commit, branches=("main",), gated=False, modes=(), sizes=None, etags=None):
        self.files = dict(files)  # name -> bytes
        self.commit = commit
        self.branches = set(branches)
        self.gated = gated
        self.modes = set(modes)
        self.sizes = dict(sizes or {})  # name -> the announced size's text
        self.etags = dict(etags or {})  # name -> the announced ETag's text


class HubServer:
    def __init__(self, token):
        self.repos = {}  # "org/name" -> Repo
        self.token = token
        self.log = []
        self.half_sent = threading.Event()
        self.released = threading.Event()
        self.closing = threading.Event()  # the server stops: a drip ends
        self._served_once = set()
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub._handle(self, head=True)

            def do_GET(self):
                hub._handle(self, head=False)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self.released.set()
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    @staticmethod
    def etag(data, large):
        """The hub's ETag: an LFS file's sha256, or a small file's git blob id (git hash-object: sha1 over
        b"blob SIZE\\0" and then the bytes)."""
        if large:
            return hashlib.sha256(data).hexdigest()
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    def _answer(self, h, code, headers, body=b"", head=False):
        h.send_response(code)
        for k, v in headers.items():
            h.send_header(k, v)
        if "Content-Length" not in headers:
            h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head and body:
            h.wfile.write(body)

    def _handle(self, h, head):
        path = urllib.parse.urlsplit(h.path).path
        auth = h.headers.get("Authorization")
        self.log.append({"method": h.command, "path": path, "range": h.headers.get("Range"),
                         "auth": auth is not None, "host": h.headers.get("Host")})
        parts = [urllib.parse.unquote(p) for p in path.split("/")[1:]]
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._resolve(h, head, parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:]), auth)
        if len(parts) == 5 and parts[0] == "cdn":
            return self._cdn(h, head, parts[1] + "/" + parts[2], parts[3], parts[4])
        self._answer(h, 404, {}, b"not found", head)

    def _resolve(self, h, head, repo_id, rev, name, auth):
        repo = self.repos.get(repo_id)
        if repo is None:
            return self._answer(h, 401, {"X-Error-Code": "RepoNotFound"}, b"Repository not found", head)
        if repo.gated and auth != "Bearer " + self.token:
            return self._answer(h, 401 if auth is None else 403, {"X-Error-Code": "GatedRepo"},
                                b"Access restricted", head)
        if rev not in repo.branches and rev != repo.commit:
            return self._answer(h, 404, {"X-Error-Code": "RevisionNotFound"}, b"Invalid rev", head)
        common = {"X-Repo-Commit": repo.commit}
        if name == "config.json" and {"slowhead", "headers"} & repo.modes:
            try:
                h.wfile.write(b"HTTP/1.1 200 OK\r\nX-Repo-Commit: %s\r\n" % repo.commit.encode())
                for i in range(120 if "slowhead" in repo.modes else 100000):
                    if "slowhead" in repo.modes and self.closing.wait(0.5):
                        break
                    h.wfile.write(b"X-Pad-%06d: %s\r\n" % (i, b"x" * 85))
                    h.wfile.flush()
            except OSError:
                pass
            h.close_connection = True
            return
        if name == "model.safetensors" and "loop" in repo.modes:
            return self._answer(h, 302, dict(common, Location="/%s/resolve/%s/%s" % (repo_id, rev, name)),
                                b"", head)
        if name not in repo.files:
            return self._answer(h, 404, dict(common, **{"X-Error-Code": "EntryNotFound"}), b"Entry not found",
                                head)
        data = repo.files[name]
        if name.endswith(".safetensors"):
            size = len(data) + 7 if "badsize" in repo.modes else 2 ** 50 if "huge" in repo.modes else len(data)
            location = "http://localhost:%d/cdn/%s/%s/%s" % (self.port, repo_id, repo.commit, name)
            return self._answer(h, 302, dict(common, **{
                "Location": location, "X-Linked-Etag": repo.etags.get(name, '"%s"' % self.etag(data, True)),
                "X-Linked-Size": repo.sizes.get(name, str(size)), "ETag": '"redirect-etag"'}), b"", head)
        headers = dict(common, ETag=repo.etags.get(name, '"%s"' % self.etag(data, False)))
        if name in repo.sizes:  # announced only: a GET would then send another length than it says
            headers["Content-Length"] = repo.sizes[name]
        return self._answer(h, 200, headers, self._corrupt(repo, data, "corrupt"), head)

    @staticmethod
    def _corrupt(repo, data, mode):
        if mode not in repo.modes or not data:
            return data
        return data[:-1] + bytes([data[-1] ^ 0x01])

    def _cdn(self, h, head, repo_id, commit, name):
        repo = self.repos.get(repo_id)
        if repo is None or commit != repo.commit or name not in repo.files:
            return self._answer(h, 404, {}, b"no such object", head)
        data = repo.files[name]
        rng = h.headers.get("Range")
        start = 0
        if rng:
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                return self._answer(h, 416, {"Content-Range": "bytes */%d" % len(data)}, b"", head)
        body = self._corrupt(repo, data, "corruptlfs")[start:]
        headers = {"Content-Length": str(len(body)), "ETag": '"%s"' % self.etag(data, True)}
        code = 200
        if rng:
            code = 206
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, len(data) - 1, len(data))
        key = (repo_id, name)
        misbehave = ({"cut", "hold", "drip"} & repo.modes) and key not in self._served_once and not head
        self._served_once.add(key)
        if not misbehave:
            return self._answer(h, code, headers, body, head)
        h.send_response(code)
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body[: len(body) // 2])
        h.wfile.flush()
        self.half_sent.set()
        if "hold" in repo.modes:
            self.released.wait(30)
        if "drip" in repo.modes:  # until the client gives up (the write fails) or a minute has passed
            try:
                for i in range(120):
                    if self.closing.wait(0.5):
                        break
                    h.wfile.write(body[len(body) // 2 + i: len(body) // 2 + i + 1])
                    h.wfile.flush()
            except OSError:
                pass
        h.close_connection = True
