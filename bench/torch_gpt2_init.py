#!/usr/bin/python3
"""Prints the hash attnviz-rng-bench prints for `torch.manual_seed(123); GPTModel(GPT_CONFIG_124M)`, computed
from PyTorch itself, and how long PyTorch takes to build the model.

    /usr/bin/python3 bench/torch_gpt2_init.py        # python3-torch 1.13 and numpy

GPTModel is the book's chapter 4 model (Build a Large Language Model From Scratch), reduced to what draws random
numbers: the same modules, registered in the same order (dropout, GELU and the causal mask draw nothing). The
hash is sum of bits(x[i]) * (2 i + 1) mod 2^64 over every drawn parameter in construction order; LayerNorm's
scale and shift (ones and zeros) are not drawn and not hashed.
"""
import time

import numpy as np
import torch
from torch import nn

CFG = {'vocab_size': 50257, 'context_length': 1024, 'emb_dim': 768, 'n_heads': 12, 'n_layers': 12,
       'drop_rate': 0.1, 'qkv_bias': False}


class LayerNorm(nn.Module):
    def __init__(self, emb_dim):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer('mask', torch.triu(torch.ones(context_length, context_length), diagonal=1))


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(cfg['emb_dim'], 4 * cfg['emb_dim']), nn.GELU(),
                                    nn.Linear(4 * cfg['emb_dim'], cfg['emb_dim']))


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.att = MultiHeadAttention(cfg['emb_dim'], cfg['emb_dim'], cfg['context_length'], cfg['drop_rate'],
                                      cfg['n_heads'], cfg['qkv_bias'])
        self.ff = FeedForward(cfg)
        self.norm1 = LayerNorm(cfg['emb_dim'])
        self.norm2 = LayerNorm(cfg['emb_dim'])
        self.drop_shortcut = nn.Dropout(cfg['drop_rate'])


class GPTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg['vocab_size'], cfg['emb_dim'])
        self.pos_emb = nn.Embedding(cfg['context_length'], cfg['emb_dim'])
        self.drop_emb = nn.Dropout(cfg['drop_rate'])
        self.trf_blocks = nn.Sequential(*[TransformerBlock(cfg) for _ in range(cfg['n_layers'])])
        self.final_norm = LayerNorm(cfg['emb_dim'])
        self.out_head = nn.Linear(cfg['emb_dim'], cfg['vocab_size'], bias=False)


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
