#!/usr/bin/python3
"""Prints the hash attnviz-rng-bench prints for `torch.manual_seed(123); GPTModel(GPT_CONFIG_124M)`, computed
from PyTorch itself, and how long PyTorch takes to build the model.

    /usr/bin/python3 bench/torch_gpt2_init.py        # python3-torch 1.13 and numpy

GPTModel is the book's chapter 4 model (Build a Large Language Model From Scratch), the fixture script's copy. The
hash is sum of bits(x[i]) * (2 i + 1) mod 2^64 over every drawn parameter in construction order; LayerNorm's
scale and shift (ones and zeros) are not drawn and not hashed.
"""
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'torch'))
import make_gpt_fixtures as fx  # noqa: E402  (the book's GPTModel, as the fixtures build it)

CFG = fx.GPT_CONFIG_124M
GPTModel = fx.GPTModel


def main():
    torch.set_num_threads(1)
    torch.manual_seed(123)
    t0 = time.perf_counter()
    model = GPTModel(CFG)
    seconds = time.perf_counter() - t0
    h, at = 0, 0
    for name, p in model.named_parameters():
        if name.endswith('.scale') or name.endswith('.shift'):
            continue
        bits = p.detach().reshape(-1).numpy().view(np.uint32).astype(np.uint64)
        weights = np.arange(at, at + bits.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        h = (h + int(np.sum(bits * weights, dtype=np.uint64))) % 2**64
        at += bits.size
    print('GPTModel(GPT_CONFIG_124M) after torch.manual_seed(123): %d drawn floats, hash %016x, built in %.0f ms'
          % (at, h, seconds * 1e3))


if __name__ == '__main__':
    main()
