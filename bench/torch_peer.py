#!/usr/bin/python3
"""PyTorch peer for attnviz-bench: times nn.MultiheadAttention on the same GPT-2 attention layers.

Run with Debian's PyTorch (python3-torch, with libopenblas0-pthread so torch does not fall back to the slow
reference BLAS):

    /usr/bin/python3 bench/torch_peer.py [--threads N] [--quick]

Each layer: nn.MultiheadAttention(d, heads, bias=True, batch_first=True) in eval mode (no dropout), causal
boolean mask, need_weights=True and average_attn_weights=False (every head's weights materialized, as attnviz
keeps them), batch 1, float32. Prints the median milliseconds per forward pass, under torch.no_grad().
"""
import argparse
import os
import statistics
import time

import torch_blas  # before torch: runs this script without OpenBLAS's pins
import torch
from torch import nn

SHAPES = [("gpt2-small", 768, 12, 16), ("gpt2-small", 768, 12, 128), ("gpt2-small", 768, 12, 512),
          ("gpt2-small", 768, 12, 1024), ("gpt2-xl", 1600, 25, 256)]


def median_ms(fn, budget, min_reps):
    fn()  # warm-up
    times = []
    start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - start < budget and len(times) < 1000):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(torch_blas.describe(torch))
    print(f"{'layer':<12} {'T':>5} {'median ms':>10}")
    for name, d, heads, T in SHAPES:
        mha = nn.MultiheadAttention(d, heads, bias=True, batch_first=True).eval()
        x = torch.rand(1, T, d) * 2 - 1
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)

        def forward():
            with torch.no_grad():
                out, weights = mha(x, x, x, attn_mask=mask, need_weights=True, average_attn_weights=False)
            assert weights.shape == (1, heads, T, T)
            return out

        ms = median_ms(forward, 0.2 if args.quick else 1.0, 5)
        print(f"{name:<12} {T:>5} {ms:>10.3f}")


if __name__ == "__main__":
    main()
