#!/usr/bin/python3
"""The PyTorch side of attnviz-decoder-bench: a model of a real decoder's shape with random weights (SmolLM2-135M,
Qwen2.5-0.5B, ...), written once as a Hugging Face folder for attnviz to open, then timed in PyTorch with float32
weights (the same values: BF16 files are widened, as transformers does when it loads one in float32).

    /usr/bin/python3 bench/torch_decoder_peer.py --shape smollm2-135m --out /tmp/smollm2 [--dtype bf16] [--write]
    build/native-release/bench/attnviz-decoder-bench --model /tmp/smollm2

The forward pass is tests/torch/make_arch_fixtures.py's reference (written from transformers' modeling code):
eval, every layer's attention weights computed and returned (as output_attentions=True), every position's
logits. Timed as the median of runs after one warm-up, with torch.set_num_threads(--threads).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch_blas  # before torch: runs this script without OpenBLAS's pins
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'torch'))
from make_arch_fixtures import llama_like  # noqa: E402
from make_gpt_fixtures import safetensors_bytes  # noqa: E402

SHAPES = {
    'smollm2-135m': {'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'hidden_act': 'silu',
                     'hidden_size': 576, 'intermediate_size': 1536, 'num_hidden_layers': 30,
                     'num_attention_heads': 9, 'num_key_value_heads': 3, 'max_position_embeddings': 8192,
                     'rms_norm_eps': 1e-05, 'rope_theta': 100000.0, 'rope_scaling': None,
                     'tie_word_embeddings': True, 'vocab_size': 49152},
    'qwen2.5-0.5b': {'architectures': ['Qwen2ForCausalLM'], 'model_type': 'qwen2', 'hidden_act': 'silu',
                     'hidden_size': 896, 'intermediate_size': 4864, 'num_hidden_layers': 24,
                     'num_attention_heads': 14, 'num_key_value_heads': 2, 'max_position_embeddings': 32768,
                     'rms_norm_eps': 1e-06, 'rope_theta': 1000000.0, 'rope_scaling': None,
                     'tie_word_embeddings': True, 'use_sliding_window': False, 'vocab_size': 151936},
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--shape', choices=sorted(SHAPES), required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--dtype', choices=['f32', 'bf16'], default='bf16')
    ap.add_argument('--write', action='store_true', help='write the folder for attnviz (else only time)')
    ap.add_argument('--tokens', default='64,128')
    ap.add_argument('--threads', type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = dict(SHAPES[args.shape], torch_dtype={'f32': 'float32', 'bf16': 'bfloat16'}[args.dtype])
    tensors, forward = llama_like(cfg, 1, args.dtype)
    if args.write:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, 'config.json'), 'w') as f:
            json.dump(cfg, f, indent=2)
        with open(os.path.join(args.out, 'model.safetensors'), 'wb') as f:
            f.write(safetensors_bytes(tensors, args.dtype, {'format': 'pt'}))
        print(f'wrote {args.out}: {sum(t.numel() for _, t in tensors) / 1e6:.1f}M parameters, {args.dtype}')
    print(f'{torch_blas.describe(torch)}; {args.shape} shape, float32 weights')
    for T in [int(t) for t in args.tokens.split(',')]:
        ids = [(2654435761 * (i + 1)) % cfg['vocab_size'] for i in range(T)]
        times = []
        with torch.no_grad():
            forward(ids)
            for _ in range(5):
                t0 = time.perf_counter()
                forward(ids)
                times.append(time.perf_counter() - t0)
        print(f'  full forward T = {T}: {statistics.median(times) * 1e3:.1f} ms (every layer\'s weights, '
              f'every position\'s logits; median of {len(times)})')


if __name__ == '__main__':
    main()
