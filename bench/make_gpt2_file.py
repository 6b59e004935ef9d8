#!/usr/bin/python3
"""Writes a GPT-2-sized weights file for attnviz-gpt-bench --load: the book's seeded GPTModel with GPT-2's sizes
(qkv_bias on, head tied), in Hugging Face's GPT-2 layout (the published gpt2 file's names, Conv1D weights stored
(in, out), the attn.bias masks), float32. The real file is the user's to download; this one has the same shapes.

    /usr/bin/python3 bench/make_gpt2_file.py OUT.safetensors [--preset gpt2-small] [--dtype f32|f16|bf16]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'torch'))
import make_gpt_fixtures as fx  # noqa: E402  (the fixtures' GPTModel and safetensors writer)

SIZES = {'gpt2-small': (768, 12, 12), 'gpt2-medium': (1024, 16, 24), 'gpt2-large': (1280, 20, 36),
         'gpt2-xl': (1600, 25, 48)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('out')
    parser.add_argument('--preset', default='gpt2-small', choices=sorted(SIZES))
    parser.add_argument('--dtype', default='f32', choices=['f32', 'f16', 'bf16'])
    args = parser.parse_args()
    d, heads, layers = SIZES[args.preset]
    cfg = {'vocab_size': 50257, 'context_length': 1024, 'emb_dim': d, 'n_heads': heads, 'n_layers': layers,
           'drop_rate': 0.1, 'qkv_bias': True}
    torch.manual_seed(123)
    model = fx.GPTModel(cfg).eval()
    model.out_head.weight = model.tok_emb.weight
    data = fx.safetensors_bytes(fx.hf_tensors(model, cfg), args.dtype, {'format': 'pt'})
    with open(args.out, 'wb') as f:
        f.write(data)
    print(f'{args.out}: {len(data)} bytes')


if __name__ == '__main__':
    main()
