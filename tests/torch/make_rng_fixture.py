#!/usr/bin/python3
"""Writes tests/fixtures/rng/torch_rng.txt: what PyTorch's CPU generator draws for torch.randn / normal_ /
uniform_ on float32 tensors, which tests/engine/test_rng.cpp reproduces bit for bit.

Run with Debian's PyTorch (python3-torch 1.13, x86-64; numpy is needed for the hash):

    /usr/bin/python3 tests/torch/make_rng_fixture.py [--out FILE]

Each case seeds the global generator (torch.manual_seed) and makes a list of calls on one generator, in order:
  n COUNT MEAN STD   torch.empty(COUNT).normal_(MEAN, STD), made through nn.Embedding(V, d) where the case says
                     so (its init is normal_(0, 1); the script checks that it equals torch.randn(V * d));
  u COUNT FROM TO    torch.empty(COUNT).uniform_(FROM, TO), made through nn.Linear where the case says so.
MEAN, STD, FROM and TO are written as Python's repr of the double that PyTorch received. The outputs of all calls
are concatenated into one float32 sequence x; the case records
  hash  sum over i of bits(x[i]) * (2 i + 1), mod 2^64 (bits = the uint32 pattern; covers every value, in order),
  sample lines "INDEX BITS" (hex) at spread positions: block edges, the redrawn tail block, a few random ones.
The script is deterministic: the same file every run.
"""
import argparse
import math
import os
import random

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, '..', 'fixtures', 'rng', 'torch_rng.txt')


def normal(n, mean=0.0, std=1.0):
    return ('n', n, mean, std)


def uniform(n, lo, hi):
    return ('u', n, lo, hi)


def embedding(v, d):
    return ('emb', v, d)


def linear(fan_in, fan_out, bias=True):
    return ('lin', fan_in, fan_out, bias)


# (name, seed, calls)
CASES = [
    ('gpt2-small wte: nn.Embedding(50257, 768)', 123, [embedding(50257, 768)]),
    ('gpt2-small wpe: nn.Embedding(1024, 768)', 0, [embedding(1024, 768)]),
    ('randn(1000003), tail of 3', 42, [normal(1000003)]),
    ('randn(50257), tail of 1', 2024, [normal(50257)]),
    ('randn(17) and randn(31)', 5, [normal(17), normal(31)]),
    ('normal_(0.5, 0.02) over 12345679', 99, [normal(12345679, 0.5, 0.02)]),
    ('normal_(-2.5, 3.7) over 1000 and 16', 3, [normal(1000, -2.5, 3.7), normal(16, -2.5, 3.7)]),
    # n < 16: double Box-Muller per element; the cached sine half survives a call of n >= 16 in between.
    ('n < 16 and the cached normal', 8,
     [normal(1), normal(2), normal(3), normal(5, 0.3, 0.02), normal(16), normal(15), normal(33), normal(7),
      normal(1, -1.0, 10.0), normal(1), normal(9, 0.0, 0.02), normal(64, 0.0, 0.02)]),
    ('uniform_', 7, [uniform(2359296, -1 / math.sqrt(768), 1 / math.sqrt(768)), uniform(1000, 0.0, 1.0),
                     uniform(777, -3.0, 5.0), uniform(5, 1e10, 1e10 + 1e4)]),
    # A small GPTModel's draw order: token and position embeddings, then per block the attention projections,
    # out_proj and the feed-forward Linear layers (LayerNorms draw nothing), then the output head.
    ('a small GPT-2 init', 321,
     [embedding(1000, 64), embedding(32, 64),
      linear(64, 64, False), linear(64, 64, False), linear(64, 64, False), linear(64, 64),
      linear(64, 256), linear(256, 64),
      linear(64, 1000, False)]),
]


def run_case(seed, calls):
    """Returns the concatenated outputs and the call list as written (kind, count, a, b)."""
    torch.manual_seed(seed)
    outs, written = [], []
    for c in calls:
        if c[0] == 'n':
            _, n, mean, std = c
            outs.append(torch.empty(n).normal_(mean, std))
            written.append(('n', n, float(mean), float(std)))
        elif c[0] == 'u':
            _, n, lo, hi = c
            outs.append(torch.empty(n).uniform_(lo, hi))
            written.append(('u', n, float(lo), float(hi)))
        elif c[0] == 'emb':
            _, v, d = c
            outs.append(nn.Embedding(v, d).weight.detach().reshape(-1))
            written.append(('n', v * d, 0.0, 1.0))
        else:
            _, fan_in, fan_out, bias = c
            layer = nn.Linear(fan_in, fan_out, bias=bias)
            # nn.init.kaiming_uniform_(a=sqrt(5)) and the bias bound, in double as PyTorch computes them.
            gain = math.sqrt(2.0 / (1 + math.sqrt(5) ** 2))
            bound = math.sqrt(3.0) * (gain / math.sqrt(fan_in))
            outs.append(layer.weight.detach().reshape(-1))
            written.append(('u', fan_in * fan_out, -bound, bound))
            if bias:
                b = 1 / math.sqrt(fan_in)
                outs.append(layer.bias.detach().reshape(-1))
                written.append(('u', fan_out, -b, b))
    # Replay with plain tensor calls: nn.Embedding and nn.Linear must draw exactly these.
    torch.manual_seed(seed)
    for (kind, n, a, b), got in zip(written, outs):
        want = torch.empty(n).normal_(a, b) if kind == 'n' else torch.empty(n).uniform_(a, b)
        assert torch.equal(want.view(torch.int32), got.view(torch.int32)), (seed, kind, n)
    return torch.cat(outs), written


def check_embedding_is_randn():
    for seed, v, d in [(123, 50257, 768), (1, 3, 5), (2, 4, 4)]:
        torch.manual_seed(seed)
        e = nn.Embedding(v, d).weight.detach().reshape(-1)
        torch.manual_seed(seed)
        r = torch.randn(v * d)
        assert torch.equal(e.view(torch.int32), r.view(torch.int32)), (seed, v, d)


def sample_indices(calls, seed):
    rng = random.Random(seed)
    picks, start = set(), 0
    for _, n, _, _ in calls:
        local = {0, 1, 7, 8, 15, 16, 17, n // 2, n - 17, n - 16, n - 9, n - 8, n - 1}
        local |= {rng.randrange(n) for _ in range(4)}
        picks |= {start + i for i in local if 0 <= i < n}
        start += n
    return sorted(picks)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', default=DEFAULT_OUT)
    args = ap.parse_args()
    torch.set_num_threads(1)
    check_embedding_is_randn()
    lines = [
        '# PyTorch %s CPU generator, float32 draws (written by tests/torch/make_rng_fixture.py).' % torch.__version__,
        '# case NAME... / seed SEED / hash HASH / call n|u COUNT A B ... / INDEX BITS samples ... / end',
        '# hash = sum of bits(x[i]) * (2i + 1) mod 2^64 over all outputs of the case, concatenated in order.',
    ]
    total = 0
    for name, seed, calls in CASES:
        x, written = run_case(seed, calls)
        bits = x.numpy().view(np.uint32).astype(np.uint64)
        weights = np.arange(bits.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        h = int(np.sum(bits * weights, dtype=np.uint64))
        lines += ['case ' + name, 'seed %d' % seed, 'hash %016x' % h]
        lines += ['call %s %d %r %r' % c for c in written]
        lines += ['%d %08x' % (i, int(bits[i])) for i in sample_indices(written, seed)]
        lines.append('end')
        total += bits.size
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('wrote %s: %d cases, %d values' % (args.out, len(CASES), total))


if __name__ == '__main__':
    main()
