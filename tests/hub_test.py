"""attnviz-cli and the Hugging Face hub, end to end, against the local stand-in (hub_server.py): never the network.

  hub_test.py ATTNVIZ_CLI FIXTURES_GPT_DIR [ATTNVIZ_APP]

The served model is tests/fixtures/gpt/hf-folder (a two-layer GPT-2 with its own 512-token vocabulary): after
a download into an empty cache, with the server stopped, `--model ORG/NAME` must give exactly the output that
`--model hf-folder` gives. Then: resume after a cut connection (with the Range request seen), Ctrl-C, a 404, a
missing revision, a gated model with and without HF_TOKEN, a size that differs from the announced one, a
redirect loop, a model too large for the disk, shards and an index naming a shard outside the folder. HF_TOKEN
must never appear in any output, cache file or cache path, nor reach the CDN's host.
"""

import hashlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hub_server import HubServer, Repo  # noqa: E402

CLI, GPT = sys.argv[1], sys.argv[2]
APP = sys.argv[3] if len(sys.argv) > 3 and shutil.which("xvfb-run") else None  # the desktop app, under Xvfb
TOKEN = "hf_SECRETtoken0123456789abcdef"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
FOLDER = os.path.join(GPT, "hf-folder")
TEXT = "Every effort moves you"
failures = []
outputs = []  # every stdout and stderr, for the token check


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(args, cache, token=None, endpoint=None, program=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env["HF_HUB_CACHE"] = cache
    if endpoint:
        env["HF_ENDPOINT"] = endpoint
    if token:
        env["HF_TOKEN"] = token
    command = [CLI]
    if program:  # the app under Xvfb; Mesa's own allocations are not ours to leak-check (as ui.render)
        command = ["xvfb-run", "-a", "-s", "-screen 0 1280x800x24", program]
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    p = subprocess.run(command + args, env=env, capture_output=True, text=True, timeout=120)
    outputs.extend([p.stdout, p.stderr])
    return p


def one_line_error(p, needle, what):
    check(p.returncode == 1, "%s: exit %d, stderr %r" % (what, p.returncode, p.stderr))
    check(p.stderr.startswith("attnviz-cli: ") and p.stderr.count("\n") >= 1, "%s: %r" % (what, p.stderr))
    last = p.stderr.splitlines()[-1] if p.stderr else ""
    check(needle in last, "%s: %r not in %r" % (what, needle, last))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def shard(st_bytes, names):
    """The safetensors file split into len(names) shards and their index."""
    n = struct.unpack("<Q", st_bytes[:8])[0]
    header = json.loads(st_bytes[8:8 + n])
    data = st_bytes[8 + n:]
    tensors = [k for k in header if k != "__metadata__"]
    groups = [tensors[i::len(names)] for i in range(len(names))]
    files, weight_map = {}, {}
    for name, group in zip(names, groups):
        h, blob = {}, b""
        for t in group:
            b, e = header[t]["data_offsets"]
            h[t] = dict(header[t], data_offsets=[len(blob), len(blob) + e - b])
            blob += data[b:e]
            weight_map[t] = name
        text = json.dumps(h).encode()
        files[name] = struct.pack("<Q", len(text)) + text + blob
    index = {"metadata": {"total_size": len(data)}, "weight_map": weight_map}
    return files, json.dumps(index).encode()


def main():
    model = {f: read(os.path.join(FOLDER, f)) for f in os.listdir(FOLDER)}
    root = tempfile.mkdtemp(prefix="attnviz_hub_")
    try:
        with HubServer(TOKEN) as hub:
            hub.repos["tiny/gpt2"] = Repo(model, COMMIT)
            hub.repos["tiny/cut"] = Repo(model, COMMIT, modes={"cut"})
            hub.repos["tiny/hold"] = Repo(model, COMMIT, modes={"hold"})
            hub.repos["tiny/badsize"] = Repo(model, COMMIT, modes={"badsize"})
            hub.repos["tiny/loop"] = Repo(model, COMMIT, modes={"loop"})
            hub.repos["tiny/huge"] = Repo(model, COMMIT, modes={"huge"})
            hub.repos["gated/gpt2"] = Repo(model, COMMIT, gated=True)
            hub.repos["tiny/noweights"] = Repo({"config.json": model["config.json"]}, COMMIT)
            shards, index = shard(model["model.safetensors"], ["model-00001-of-00002.safetensors",
                                                               "model-00002-of-00002.safetensors"])
            sharded = dict(model, **shards)
            del sharded["model.safetensors"]
            sharded["model.safetensors.index.json"] = index
            hub.repos["tiny/sharded"] = Repo(sharded, COMMIT)
            evil = dict(sharded)
            evil["model.safetensors.index.json"] = json.dumps(
                {"weight_map": {"wte.weight": "../../../evil.safetensors"}}).encode()
            hub.repos["tiny/evil"] = Repo(evil, COMMIT)
            ep = hub.endpoint

            # A download into an empty cache: the layout huggingface_hub writes.
            cache = os.path.join(root, "cache")
            p = run(["download", "tiny/gpt2"], cache, TOKEN, ep)
            first_run = list(hub.log)
            check(p.returncode == 0, "download: %r" % p.stderr)
            repo = os.path.join(cache, "models--tiny--gpt2")
            snap = os.path.join(repo, "snapshots", COMMIT)
            check(p.stdout == snap + "\n", "download prints the snapshot: %r" % p.stdout)
            check(read(os.path.join(repo, "refs", "main")) == COMMIT.encode(), "refs/main holds the commit")
            for name, data in model.items():
                link = os.path.join(snap, name)
                large = name.endswith(".safetensors")
                etag = HubServer.etag(data, large)
                check(os.path.islink(link) and os.readlink(link) == "../../blobs/" + etag,
                      "%s links to ../../blobs/%s" % (name, etag))
                check(read(link) == data, "%s has the served bytes" % name)
            check(not [f for f in os.listdir(os.path.join(repo, "blobs")) if f.endswith(".incomplete")],
                  "no .incomplete left")
            cdn = [r for r in first_run if r["path"].startswith("/cdn/")]
            resolve = [r for r in first_run if "/resolve/" in r["path"]]
            check(cdn and all(not r["auth"] for r in cdn), "HF_TOKEN never reaches the CDN's host")
            check(cdn and all(r["host"].startswith("localhost:") for r in cdn), "the CDN is another host")
            check(resolve and all(r["auth"] for r in resolve), "HF_TOKEN goes to the endpoint")
            later = [r["path"] for r in resolve[1:]]
            check(later and all("/resolve/%s/" % COMMIT in q for q in later),
                  "every file after the first is asked at the commit: %r" % later)

            # Again: everything is in the cache, nothing is transferred.
            before = len([r for r in hub.log if r["method"] == "GET"])
            p = run(["download", "tiny/gpt2"], cache, TOKEN, ep)
            check(p.returncode == 0 and "all in the cache already" in p.stderr, "second download: %r" % p.stderr)
            check(len([r for r in hub.log if r["method"] == "GET"]) == before, "no GET the second time")

            # --download in one command, into another empty cache.
            cache2 = os.path.join(root, "cache2")
            p = run(["--model", "tiny/gpt2", "--download", "--eval", "--text", TEXT, "--json"], cache2, TOKEN, ep)
            check(p.returncode == 0, "--model --download: %r" % p.stderr)
            check(os.path.isdir(os.path.join(cache2, "models--tiny--gpt2", "snapshots", COMMIT)),
                  "--download fills the cache")

            # An interrupted download, then resumed with a Range request.
            p = run(["download", "tiny/cut"], cache, TOKEN, ep)
            one_line_error(p, "run the same command again to resume", "cut connection")
            blobs = os.path.join(cache, "models--tiny--cut", "blobs")
            etag = HubServer.etag(model["model.safetensors"], True)
            part = os.path.join(blobs, etag + ".incomplete")
            half = len(model["model.safetensors"]) // 2
            check(os.path.isfile(part) and os.path.getsize(part) == half, "the .incomplete holds the half sent")
            p = run(["download", "tiny/cut"], cache, TOKEN, ep)
            check(p.returncode == 0, "resume: %r" % p.stderr)
            ranges = [r["range"] for r in hub.log if r["path"].startswith("/cdn/tiny/cut/")]
            check("bytes=%d-" % half in ranges, "the resume asked for bytes=%d-: %r" % (half, ranges))
            check(read(os.path.join(blobs, etag)) == model["model.safetensors"], "the resumed file is whole")

            # Ctrl-C: exit 130, the .incomplete stays.
            env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
            env.update(HF_HUB_CACHE=cache, HF_ENDPOINT=ep)
            hub.half_sent.clear()  # the cut download above set it
            proc = subprocess.Popen([CLI, "download", "tiny/hold"], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            check(hub.half_sent.wait(60), "the held download started")
            time.sleep(0.2)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
            hub.released.set()
            outputs.extend([out, err])
            check(proc.returncode == 130, "Ctrl-C: exit %d, %r" % (proc.returncode, err))
            check(err.endswith("\n") and "stopped by Ctrl-C" in err.splitlines()[-1], "Ctrl-C: %r" % err)
            check(os.path.isfile(os.path.join(cache, "models--tiny--hold", "blobs", etag + ".incomplete")),
                  "Ctrl-C keeps the .incomplete")

            # Refusals, each in one line.
            one_line_error(run(["download", "tiny/nothing"], cache, None, ep), "set HF_TOKEN", "no such repo")
            one_line_error(run(["download", "tiny/gpt2@nobranch"], cache, None, ep), "has no revision",
                           "no such revision")
            one_line_error(run(["download", "tiny/noweights"], cache, None, ep),
                           "neither model.safetensors nor model.safetensors.index.json", "no weights")
            one_line_error(run(["download", "gated/gpt2"], cache, None, ep), "set HF_TOKEN", "gated, no token")
            one_line_error(run(["download", "gated/gpt2"], cache, "hf_wrong", ep), "HF_TOKEN does not give access",
                           "gated, wrong token")
            check(run(["download", "gated/gpt2"], cache, TOKEN, ep).returncode == 0, "gated with the token")
            one_line_error(run(["download", "tiny/badsize"], cache, None, ep), "announced", "size mismatch")
            check(not os.path.exists(os.path.join(cache, "models--tiny--badsize", "blobs", etag)),
                  "a file of the wrong size is not kept")
            one_line_error(run(["download", "tiny/loop"], cache, None, ep), "redirect loop", "redirect loop")
            one_line_error(run(["download", "tiny/huge"], cache, None, ep), "free", "disk space")
            one_line_error(run(["download", "tiny/evil"], cache, None, ep), "plain file name", "shard outside")
            check(not os.path.exists(os.path.join(root, "evil.safetensors")), "nothing written outside")
            one_line_error(run(["download", "../etc/passwd"], cache, None, ep), "Hugging Face model name",
                           "a path is not a name")
            one_line_error(run(["download", "a/b"], cache, None, "http://127.0.0.1:1"), "cannot reach",
                           "connection refused")

            # The desktop app: --download, then the cache alone (below).
            if APP:
                png = os.path.join(root, "app.png")
                p = run(["--model", "tiny/gpt2", "--download", "--screenshot", png], os.path.join(root, "cache3"),
                        TOKEN, ep, APP)
                check(p.returncode == 0 and os.path.getsize(png) > 0, "the app's --download: %r" % p.stderr)

            # Shards: the index and each shard it names.
            p = run(["download", "tiny/sharded"], cache, None, ep)
            check(p.returncode == 0, "sharded: %r" % p.stderr)
            ssnap = os.path.join(cache, "models--tiny--sharded", "snapshots", COMMIT)
            for name, data in shards.items():
                check(read(os.path.join(ssnap, name)) == data, "shard %s downloaded" % name)

        # The server is gone: the cache alone opens the model, as the folder itself opens.
        want = run(["--model", FOLDER, "--eval", "--text", TEXT, "--json", "--top-k", "5"], cache)
        check(want.returncode == 0, "the folder itself: %r" % want.stderr)
        expected = json.loads(want.stdout)
        for name in ["tiny/gpt2", "tiny/gpt2@main", "tiny/gpt2@" + COMMIT, "tiny/cut"]:
            p = run(["--model", name, "--eval", "--text", TEXT, "--json", "--top-k", "5"], cache)
            check(p.returncode == 0, "%s offline: %r" % (name, p.stderr))
            if p.returncode == 0:
                got = json.loads(p.stdout)
                for key in ("tokens", "next", "layers"):
                    check(got.get(key) == expected.get(key), "%s: %s as the folder's" % (name, key))
        p = run(["--model", "tiny/gpt2", "--tokenize", "--text", TEXT], cache)
        q = run(["--model", FOLDER, "--tokenize", "--text", TEXT], cache)
        check(p.returncode == 0 and p.stdout == q.stdout, "--tokenize through the cache: %r" % p.stderr)
        one_line_error(run(["--model", "tiny/absent", "--text", TEXT], cache), "--download", "not in the cache")
        if APP:
            png = os.path.join(root, "app-offline.png")
            p = run(["--model", "tiny/gpt2", "--screenshot", png], cache, None, None, APP)
            check(p.returncode == 0 and "wrote" in p.stdout, "the app opens the cache: %r" % p.stderr)
            p = run(["--model", "tiny/absent", "--screenshot", png], cache, None, None, APP)
            check(p.returncode == 1 and "not in the Hugging Face cache" in p.stderr, "the app: %r" % p.stderr)
        one_line_error(run(["--model", "tiny/gpt2", "--download", "--text", TEXT], cache, None, ep),
                       "cannot reach", "--download with the server gone")

        # HF_TOKEN nowhere: outputs, cache paths, cache files.
        check(all(TOKEN not in o for o in outputs), "HF_TOKEN in an output")
        for d, dirs, files in os.walk(root):
            for n in dirs + files:
                check(TOKEN not in n, "HF_TOKEN in a path")
                path = os.path.join(d, n)
                if os.path.isfile(path) and not os.path.islink(path):
                    check(TOKEN.encode() not in read(path), "HF_TOKEN in " + path)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if failures:
        print("%d check(s) failed" % len(failures), file=sys.stderr)
        return 1
    print("hub_test: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
