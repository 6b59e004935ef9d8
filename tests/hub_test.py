"""attnviz-cli and the Hugging Face hub, end to end, against the local stand-in (hub_server.py): never the network.

  hub_test.py ATTNVIZ_CLI FIXTURES_GPT_DIR [ATTNVIZ_APP]

The served model is tests/fixtures/gpt/hf-folder (a two-layer GPT-2 with its own 512-token vocabulary): after
a download into an empty cache, with the server stopped, `--model ORG/NAME` must give exactly the output that
`--model hf-folder` gives. Then: resume after a cut connection (with the Range request seen), Ctrl-C, a 404, a
missing revision, a gated model with and without HF_TOKEN, a size that differs from the announced one, a
redirect loop, a model too large for the disk, shards and an index naming a shard outside the folder. HF_TOKEN
must never appear in any output, cache file or cache path, nor reach the CDN's host.

Numbers from a hub are untrusted (issue 44), each class with inputs generated here: sizes that overflow a sum
or uint64 (refused before any weights are written), ETags that are no blob name or that two files share, a
download that drips a byte now and then (ended by the minimum rate, its .incomplete kept for the resume; headers
that drip or never end too), and a
refs/ entry that is a link to a file outside the cache (its contents never in the refusal).
"""

import hashlib
import json
import os
import random
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


def run(args, cache, token=None, endpoint=None, program=None, extra_env=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and not k.startswith("ATTNVIZ_HUB")}
    env.update(extra_env or {})
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


def cdn_gets(hub, repo_id):
    return [r for r in hub.log if r["method"] == "GET" and r["path"].startswith("/cdn/%s/" % repo_id)]


def hostile_numbers(hub, root, model, sharded, shards, index):
    """Sizes, ETags and rates from the hub, each class with generated inputs; every refusal one line."""
    ep = hub.endpoint
    rng = random.Random(44)
    cache = os.path.join(root, "cache-numbers")
    names = sorted(shards)
    limit = "more than the %d bytes" % 2 ** 53
    serial = [0]

    def serve(files, **kw):
        serial[0] += 1
        repo_id = "hostile/n%d" % serial[0]
        hub.repos[repo_id] = Repo(files, COMMIT, **kw)
        return repo_id

    def refused_before_weights(repo_id, needles, what):
        p = run(["download", repo_id], cache, None, ep)
        last = p.stderr.splitlines()[-1] if p.stderr else ""
        check(p.returncode == 1 and p.stderr.startswith("attnviz-cli: ") and any(n in last for n in needles),
              "%s: %r" % (what, p.stderr))
        check(not cdn_gets(hub, repo_id), "%s: no weights requested" % what)
        blobs = os.path.join(cache, "models--" + repo_id.replace("/", "--"), "blobs")
        kept = os.listdir(blobs) if os.path.isdir(blobs) else []
        weights = {HubServer.etag(d, True) for n, d in sharded.items() if n.endswith(".safetensors")}
        check(not [b for b in kept if b.split(".")[0] in weights], "%s: no weights written: %r" % (what, kept))
        return last

    # Sizes: several shards announcing 2^63 and 2^64-1 (a sum that wraps a uint64 to a few bytes), sums past
    # the limit from sizes each below it, numbers past uint64, and a random mix of them.
    wrap = {names[0]: str(2 ** 63), names[1]: str(2 ** 64 - 1)}
    last = refused_before_weights(serve(sharded, sizes=wrap), [limit], "sizes 2^63 and 2^64-1")
    check("9223372036854775808 bytes for '%s'" % names[0] in last, "the size and the file named: %r" % last)
    last = refused_before_weights(serve(sharded, sizes={n: str(2 ** 52 + 1) for n in names}), [limit],
                                  "a sum past the limit")
    check("up to '%s'" % names[1] in last, "the sum names where it passed the limit: %r" % last)
    for text in [str(2 ** 64), "99999999999999999999999", "-1", "1e3", "0x10", "+5", "12 34", ""]:
        refused_before_weights(serve(sharded, sizes={names[1]: text}), ["not a number of bytes"],
                               "the size %r" % text)
    refused_before_weights(serve(sharded, sizes={"config.json": str(2 ** 64 - 1)}), [limit], "a small file's size")
    refused_before_weights(serve(sharded, sizes={"model.safetensors.index.json": str(2 ** 40)}),
                           ["an index may have"], "an index larger than its cap")
    hostile = [2 ** 64 - 1, 2 ** 63, 2 ** 63 + 1, 2 ** 62, 2 ** 53 + 1, 2 ** 53, 2 ** 52 + 12345]
    for i in range(12):
        count = rng.randint(2, 5)
        parts = ["m-%05d-of-%05d.safetensors" % (k + 1, count) for k in range(count)]
        many = dict(model)
        del many["model.safetensors"]
        data = model["model.safetensors"]
        for k, part in enumerate(parts):  # distinct bytes: distinct blobs
            many[part] = data + bytes([k])
        many["model.safetensors.index.json"] = json.dumps(
            {"weight_map": {"t%d" % k: part for k, part in enumerate(parts)}}).encode()
        sizes = {part: str(rng.choice(hostile)) for part in rng.sample(parts, rng.randint(2, count))}
        refused_before_weights(serve(many, sizes=sizes), [limit, "free"], "generated sizes %r" % sizes)
    for total in [2 ** 64, 2 ** 70, -1, 1.5, "12", 2 ** 53 + 1]:
        bad = json.loads(index)
        bad["metadata"]["total_size"] = total
        refused_before_weights(serve(dict(sharded, **{"model.safetensors.index.json": json.dumps(bad).encode()})),
                               ["metadata.total_size"], "total_size %r" % total)

    # ETags: only a sha1 or a sha256 in lowercase hex names a blob; no two files share one; none can be
    # another's .incomplete.
    sha1 = HubServer.etag(model["config.json"], False)
    sha256 = HubServer.etag(model["model.safetensors"], True)
    shapes = [sha1[:39], sha1 + "0", sha256[:63], sha256 + "0", sha1.upper(), sha256.upper(), sha256 + ".incomplete",
              sha1 + ".lock", "../" + sha1, sha1[:20] + "/" + sha1[21:], "g" * 40, "", "W/", "redirect-etag",
              sha256[:32] + "-" + sha256[33:]]
    shapes += ["".join(rng.choice("0123456789abcdef.-_") for _ in range(rng.choice([40, 64]))) for _ in range(6)]
    for shape in shapes:
        for name in ["config.json", "model.safetensors"]:
            etag = '"%s"' % shape
            if name == "model.safetensors" or rng.random() < 0.5:
                etag = "W/" + etag
            bad = "-" in shape or "." in shape or "/" in shape or "_" in shape or len(shape) not in (40, 64) \
                or shape != shape.lower() or "g" in shape
            if not bad:
                continue
            last = refused_before_weights(serve(model, etags={name: etag}), ["not a blob name"],
                                          "ETag %r for %s" % (etag, name))
            check("'%s'" % name in last, "the ETag's file is named: %r" % last)
    shared = [("config.json", "model.safetensors", sha256), ("vocab.json", "merges.txt", HubServer.etag(model["merges.txt"], False)),
              ("model.safetensors", "vocab.json", HubServer.etag(model["vocab.json"], False))]
    for a, b, etag in shared:
        last = refused_before_weights(serve(model, etags={a: '"%s"' % etag, b: '"%s"' % etag}), ["same blob name"],
                                      "%s and %s share a blob" % (a, b))
        check("'%s' and '%s'" % (a, b) in last or "'%s' and '%s'" % (b, a) in last, "both named: %r" % last)
    last = refused_before_weights(serve(sharded, etags={names[1]: '"%s"' % HubServer.etag(shards[names[0]], True)}),
                                  ["same blob name"], "two shards share a blob")
    check(names[0] in last and names[1] in last, "both shards named: %r" % last)
    for other in ["config.json", "vocab.json", "model.safetensors.index.json"]:
        bad = json.loads(index)
        bad["weight_map"]["extra"] = other
        last = refused_before_weights(serve(dict(sharded, **{"model.safetensors.index.json": json.dumps(bad).encode()})),
                                      ["as a shard"], "a shard named %s" % other)
    weak = serve(model, etags={"config.json": 'W/"%s"' % sha1})
    p = run(["download", weak], cache, None, ep)
    check(p.returncode == 0, "a weak ETag of the right shape: %r" % p.stderr)
    check(os.path.isfile(os.path.join(cache, "models--" + weak.replace("/", "--"), "blobs", sha1)), "its blob")

    # A download that drips a byte every half second: the minimum rate ends it (a window of 4 s here: 4096
    # bytes asked, 8 sent; the first window carries half the file), the .incomplete stays, and running again
    # resumes it.
    for bad in ["0", "3601", "-1", "1.5", "abc", "99999999999999999999"]:
        one_line_error(run(["download", "tiny/gpt2"], cache, None, ep, extra_env={"ATTNVIZ_HUB_RATE_WINDOW": bad}),
                       "ATTNVIZ_HUB_RATE_WINDOW", "a window of %r" % bad)
    # An answer without a body that never ends (a header line every half second): ended by the same window.
    # One that sends header after header fast: ended past 256 kB of them.
    p = run(["download", serve(model, modes={"slowhead"})], cache, None, ep, extra_env={"ATTNVIZ_HUB_RATE_WINDOW": "4"})
    one_line_error(p, "the hub's answer for 'config.json' from 127.0.0.1:%d did not come within 4 s" % hub.port,
                   "headers that drip")
    one_line_error(run(["download", serve(model, modes={"headers"})], cache, None, ep),
                   "has more than 262144 bytes of headers", "header after header")
    drip = serve(model, modes={"drip"})
    window = {"ATTNVIZ_HUB_RATE_WINDOW": "4"}
    p = run(["download", drip], cache, None, ep, extra_env=window)
    one_line_error(p, "fell below 1024 bytes/s for 4 s", "a drip")
    last = p.stderr.splitlines()[-1] if p.stderr else ""
    check("the download of 'model.safetensors' from localhost:%d" % hub.port in last and
          last.endswith("running again resumes it"), "the drip's refusal: %r" % last)
    part = os.path.join(cache, "models--" + drip.replace("/", "--"), "blobs", sha256 + ".incomplete")
    half = len(model["model.safetensors"]) // 2
    check(os.path.isfile(part) and half <= os.path.getsize(part) < len(model["model.safetensors"]),
          "the drip's .incomplete is kept")
    p = run(["download", drip], cache, None, ep, extra_env=window)
    check(p.returncode == 0, "the drip resumed: %r" % p.stderr)
    ranges = [r["range"] for r in cdn_gets(hub, drip)]
    check(len(ranges) == 2 and ranges[1] and int(ranges[1][6:-1]) >= half, "the resume asks a Range: %r" % ranges)


def hostile_bytes(hub, root, model, sharded):
    """Bytes that are not what the hub names them (ETag: a small file's git blob id, an LFS file's sha256): a
    Content-Length shorter than the body of a small file (libcurl reads that many bytes and drops the rest),
    other bytes of the announced length (a small and an LFS file), and a resumed file whose first part was other
    bytes. Each is refused in one line naming the file and both hashes, and nothing of it enters the cache."""
    ep = hub.endpoint
    rng = random.Random(4408)
    cache = os.path.join(root, "cache-bytes")
    # The server's small-file ETag is git's blob id (these two are what `git hash-object` prints).
    check(HubServer.etag(b"", False) == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391", "the git blob id of b''")
    check(HubServer.etag(b"hello\n", False) == "ce013625030ba8dba906f756967f9e9ca394464a",
          "the git blob id of b'hello\\n'")
    serial = [0]

    def folder(repo_id):
        return os.path.join(cache, "models--" + repo_id.replace("/", "--"))

    def every_blob_is_its_name(repo_id, what):
        blobs = os.path.join(folder(repo_id), "blobs")
        for b in os.listdir(blobs) if os.path.isdir(blobs) else []:
            if "." in b:
                continue  # an .incomplete: checked by the callers
            data = read(os.path.join(blobs, b))
            got = HubServer.etag(data, len(b) == 64)
            check(got == b, "%s: the blob %s holds bytes that hash to %s" % (what, b, got))

    def refused(files, name, sent, what, repo_id=None, **kw):
        if repo_id is None:
            serial[0] += 1
            repo_id = "bytes/b%d" % serial[0]
            hub.repos[repo_id] = Repo(files, COMMIT, **kw)
        p = run(["download", repo_id], cache, None, ep)
        large = name.endswith(".safetensors")
        want = HubServer.etag(files[name], large)
        got = hashlib.sha256(sent).hexdigest() if large else HubServer.etag(sent, False)
        one_line_error(p, "%s: %s's bytes do not hash to its ETag %s (the hub sent %d bytes, whose %s is %s)" %
                       (repo_id, name, want, len(sent), "sha256" if large else "git blob sha1", got), what)
        blobs = os.path.join(folder(repo_id), "blobs")
        kept = os.listdir(blobs) if os.path.isdir(blobs) else []
        check(not [b for b in kept if b.startswith(want)], "%s: nothing of %s kept: %r" % (what, name, kept))
        check(not os.path.lexists(os.path.join(folder(repo_id), "snapshots", COMMIT, name)),
              "%s: no snapshot link for %s" % (what, name))
        check(not os.path.exists(os.path.join(folder(repo_id), "refs", "main")), "%s: no ref" % what)
        every_blob_is_its_name(repo_id, what)
        return repo_id

    # A short Content-Length (the body is sent whole after it) on each small file: 0, 1, 3 bytes and one
    # byte short of the file, and a generated length below it.
    for name in ["config.json", "vocab.json", "merges.txt"]:
        data = model[name]
        for size in [0, 1, 3, len(data) - 1, rng.randrange(4, len(data) - 1)]:
            repo_id = refused(model, name, data[:size], "%s announcing %d bytes" % (name, size),
                              sizes={name: str(size)})
    # The shard index, fetched and read before the shards are asked about: cut, it is refused before any weights.
    index = sharded["model.safetensors.index.json"]
    cut_index = refused(sharded, "model.safetensors.index.json", index[:3], "the index announcing 3 bytes",
                        sizes={"model.safetensors.index.json": "3"})
    check(not cdn_gets(hub, cut_index), "the cut index: no weights requested")
    # The server fixed: the same name downloads whole, and the model tokenizes as the folder does.
    hub.repos[repo_id] = Repo(model, COMMIT)
    p = run(["download", repo_id], cache, None, ep)
    check(p.returncode == 0, "the fixed server: %r" % p.stderr)
    snap = os.path.join(folder(repo_id), "snapshots", COMMIT)
    for name, data in model.items():
        check(os.path.isfile(os.path.join(snap, name)) and read(os.path.join(snap, name)) == data,
              "after the fixed server: %s whole" % name)
    every_blob_is_its_name(repo_id, "the fixed server")
    p = run(["--model", repo_id, "--tokenize", "--text", TEXT], cache)
    q = run(["--model", FOLDER, "--tokenize", "--text", TEXT], cache)
    check(p.returncode == 0 and p.stdout == q.stdout, "the fixed download tokenizes as the folder: %r" % p.stderr)

    # Other bytes of the announced length: a small file (its last byte flipped), an LFS file (the CDN's).
    flipped = {n: d[:-1] + bytes([d[-1] ^ 1]) for n, d in model.items()}
    refused(model, "config.json", flipped["config.json"], "a small file's other bytes", modes={"corrupt"})
    lfs = refused(model, "model.safetensors", flipped["model.safetensors"], "an LFS file's other bytes",
                  modes={"corruptlfs"})
    check(not os.path.exists(os.path.join(folder(lfs), "blobs", HubServer.etag(model["model.safetensors"], True) +
                                          ".incomplete")), "the LFS file's .incomplete is deleted")

    # A resumed download is checked over the whole file: the first half, kept from a cut connection, changed on
    # disk; the resume (a Range for the rest) is refused and its .incomplete deleted; the next run starts over.
    serial[0] += 1
    resumed = "bytes/b%d" % serial[0]
    hub.repos[resumed] = Repo(model, COMMIT, modes={"cut"})
    p = run(["download", resumed], cache, None, ep)
    one_line_error(p, "run the same command again to resume", "the cut connection before a resume")
    weights = model["model.safetensors"]
    etag = HubServer.etag(weights, True)
    part = os.path.join(folder(resumed), "blobs", etag + ".incomplete")
    half = len(weights) // 2
    check(os.path.isfile(part) and os.path.getsize(part) == half, "the .incomplete holds the half sent")
    at = rng.randrange(half)
    with open(part, "r+b") as f:
        f.seek(at)
        f.write(bytes([weights[at] ^ 0x80]))
    changed = weights[:at] + bytes([weights[at] ^ 0x80]) + weights[at + 1:]
    refused(model, "model.safetensors", changed, "a resume over changed bytes", repo_id=resumed)
    check(not os.path.exists(part), "the changed .incomplete is deleted")
    ranges = [r["range"] for r in cdn_gets(hub, resumed)]
    check(len(ranges) == 2 and ranges[1] == "bytes=%d-" % half, "the refused run resumed: %r" % ranges)
    p = run(["download", resumed], cache, None, ep)
    check(p.returncode == 0, "after the refused resume: %r" % p.stderr)
    ranges = [r["range"] for r in cdn_gets(hub, resumed)]
    check(len(ranges) == 3 and ranges[2] is None, "the next run starts over: %r" % ranges)
    check(read(os.path.join(folder(resumed), "snapshots", COMMIT, "model.safetensors")) == weights,
          "the weights whole after starting over")
    every_blob_is_its_name(resumed, "after starting over")


def hostile_refs(root, cache):
    """refs/REV that is a link (or through a linked folder) to a file outside the cache: refused, and no
    refusal shows the file's bytes, whatever they hold (a valid commit too)."""
    rng = random.Random(4401)
    source = os.path.join(cache, "models--tiny--gpt2")
    secrets = ["SECRET-%032x" % rng.getrandbits(128), "%040x" % rng.getrandbits(160),
               "%040x SECRET-%08x" % (rng.getrandbits(160), rng.getrandbits(32))]
    for i, secret in enumerate(secrets):
        outside = os.path.join(root, "outside-%d" % i)
        os.makedirs(outside)
        with open(os.path.join(outside, "main"), "w") as f:
            f.write(secret)
        for how in ["link", "folder", "plain"]:
            name = "refs%d%s" % (i, how)
            repo = os.path.join(cache, "models--tiny--" + name)
            shutil.copytree(source, repo, symlinks=True)
            refs = os.path.join(repo, "refs")
            shutil.rmtree(refs)
            if how == "link":
                os.makedirs(refs)
                os.symlink(os.path.join(outside, "main"), os.path.join(refs, "main"))
            elif how == "folder":
                os.symlink(outside, refs)
            else:
                os.makedirs(refs)
                with open(os.path.join(refs, "main"), "w") as f:
                    f.write(secret)
            p = run(["--model", "tiny/" + name, "--eval", "--text", TEXT], cache)
            if how == "plain" and secret.count(" ") == 0 and len(secret) == 40:
                check(p.returncode == 1 and "has no snapshot" in p.stderr, "a plain ref: %r" % p.stderr)
                continue
            needle = {"link": "is a link", "folder": "leads outside", "plain": "not a 40-hex commit"}[how]
            one_line_error(p, needle, "refs/main by %s" % how)
            check(secret not in p.stderr and secret[:12] not in p.stderr, "the ref's bytes in %r" % p.stderr)


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

            hostile_numbers(hub, root, model, sharded, shards, index)
            hostile_bytes(hub, root, model, sharded)

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
        hostile_refs(root, cache)

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
