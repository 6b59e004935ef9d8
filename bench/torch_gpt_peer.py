#!/usr/bin/python3
"""PyTorch peer for attnviz-gpt-bench: the book's chapter-4 GPTModel, timed on the same passes.

Run with Debian's PyTorch (python3-torch, with libopenblas0-pthread so torch does not fall back to the slow
reference BLAS):

    /usr/bin/python3 bench/torch_gpt_peer.py [--threads N] [--quick] [--preset gpt2-small]

Prints the seeded construction time (torch.manual_seed(123); GPTModel(cfg)) and the median milliseconds of one
forward pass in eval mode under torch.no_grad() at T = 16, 128, 512 and 1024, batch 1, float32. Every head's
attention weights of every layer are kept (each MultiHeadAttention stores its attn_weights tensor, as attnviz
keeps them: a hook on its dropout keeps a reference to the weights, no copy); GPTModel computes the logits of every
position. The classes are the fixture script's (tests/torch/make_gpt_fixtures.py, the book's as printed).
"""
import argparse
import os
import sys
import time

import torch_blas  # before torch: runs this script without OpenBLAS's pins
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'torch'))
sys.path.insert(0, HERE)
import make_gpt_fixtures as fx  # noqa: E402  (the book's GPTModel)
from torch_peer import median_ms  # noqa: E402

PRESETS = {
    "gpt2-small": {"emb_dim": 768, "n_layers": 12, "n_heads": 12},
    "gpt2-medium": {"emb_dim": 1024, "n_layers": 24, "n_heads": 16},
    "gpt2-large": {"emb_dim": 1280, "n_layers": 36, "n_heads": 20},
    "gpt2-xl": {"emb_dim": 1600, "n_layers": 48, "n_heads": 25},
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--preset", default="gpt2-small", choices=sorted(PRESETS))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = {**fx.GPT_CONFIG_124M, **PRESETS[args.preset]}
    print(f"{torch_blas.describe(torch)}; {args.preset}")
    t0 = time.perf_counter()
    torch.manual_seed(123)
    model = fx.GPTModel(cfg).eval()
    print(f"seeded init (torch.manual_seed(123); GPTModel(cfg)): {time.perf_counter() - t0:.3f} s, "
          f"{sum(p.numel() for p in model.parameters())} parameters")
    for blk in model.trf_blocks:  # the attention weights reach the dropout module: keep them, as attnviz does
        blk.att.dropout.register_forward_hook(lambda module, inputs, output: setattr(module, "kept", inputs[0]))
    print(f"{'T':>6} {'median ms':>10}")
    for T in (16, 128, 512, 1024):
        ids = ((torch.arange(1, T + 1, dtype=torch.int64) * 2654435761) % cfg["vocab_size"]).unsqueeze(0)

        def forward():
            with torch.no_grad():
                logits = model(ids)
            assert logits.shape == (1, T, cfg["vocab_size"])
            assert all(b.att.dropout.kept.shape == (1, cfg["n_heads"], T, T) for b in model.trf_blocks)
            return logits

        print(f"{T:>6} {median_ms(forward, 1.0 if args.quick else 5.0, 3):>10.1f}")


if __name__ == "__main__":
    main()
