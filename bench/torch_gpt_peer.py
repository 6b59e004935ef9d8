#!/usr/bin/python3
"""PyTorch peer for attnviz-gpt-bench: the book's chapter-4 GPTModel, timed on the same passes.

Run with Debian's PyTorch (python3-torch, with libopenblas0-pthread so torch does not fall back to the slow
reference BLAS):

    /usr/bin/python3 bench/torch_gpt_peer.py [--threads N] [--quick] [--preset gpt2-small]

Prints the seeded construction time (torch.manual_seed(123); GPTModel(cfg)) and the median milliseconds of one
forward pass in eval mode under torch.no_grad() at T = 16, 128, 512 and 1024, batch 1, float32. Every head's
attention weights of every layer are kept (each MultiHeadAttention stores its attn_weights tensor, as attnviz
keeps them); GPTModel computes the logits of every position.
"""
import argparse
import os
import statistics
import time

import torch
from torch import nn

PRESETS = {
    "gpt2-small": {"emb_dim": 768, "n_layers": 12, "n_heads": 12},
    "gpt2-medium": {"emb_dim": 1024, "n_layers": 24, "n_heads": 16},
    "gpt2-large": {"emb_dim": 1280, "n_layers": 36, "n_heads": 20},
    "gpt2-xl": {"emb_dim": 1600, "n_layers": 48, "n_heads": 25},
}


class MultiHeadAttention(nn.Module):  # the book's chapter-3 class, keeping its weights
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))
        self.kept = None

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        self.kept = attn_weights
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


class LayerNorm(nn.Module):
    def __init__(self, emb_dim):
        super().__init__()
        self.eps = 1e-5
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        norm_x = (x - mean) / torch.sqrt(var + self.eps)
        return self.scale * norm_x + self.shift


class GELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(torch.sqrt(torch.tensor(2.0 / torch.pi)) * (x + 0.044715 * torch.pow(x, 3))))


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(cfg["emb_dim"], 4 * cfg["emb_dim"]), GELU(),
                                    nn.Linear(4 * cfg["emb_dim"], cfg["emb_dim"]))

    def forward(self, x):
        return self.layers(x)


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.att = MultiHeadAttention(d_in=cfg["emb_dim"], d_out=cfg["emb_dim"], context_length=cfg["context_length"],
                                      num_heads=cfg["n_heads"], dropout=cfg["drop_rate"], qkv_bias=cfg["qkv_bias"])
        self.ff = FeedForward(cfg)
        self.norm1 = LayerNorm(cfg["emb_dim"])
        self.norm2 = LayerNorm(cfg["emb_dim"])
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

    def forward(self, x):
        shortcut = x
        x = self.norm1(x)
        x = self.att(x)
        x = self.drop_shortcut(x)
        x = x + shortcut
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = self.drop_shortcut(x)
        return x + shortcut


class GPTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.Sequential(*[TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = LayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)

    def forward(self, in_idx):
        batch_size, seq_len = in_idx.shape
        tok_embeds = self.tok_emb(in_idx)
        pos_embeds = self.pos_emb(torch.arange(seq_len, device=in_idx.device))
        x = self.drop_emb(tok_embeds + pos_embeds)
        x = self.trf_blocks(x)
        x = self.final_norm(x)
        return self.out_head(x)


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
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--preset", default="gpt2-small", choices=sorted(PRESETS))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = {"vocab_size": 50257, "context_length": 1024, "drop_rate": 0.1, "qkv_bias": False, **PRESETS[args.preset]}
    blas = "/etc/alternatives/libblas.so.3-x86_64-linux-gnu"  # Debian's torch uses the system libblas
    blas = os.path.realpath(blas) if os.path.exists(blas) else "unknown"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, BLAS {blas}, {args.preset}")
    t0 = time.perf_counter()
    torch.manual_seed(123)
    model = GPTModel(cfg).eval()
    print(f"seeded init (torch.manual_seed(123); GPTModel(cfg)): {time.perf_counter() - t0:.3f} s, "
          f"{sum(p.numel() for p in model.parameters())} parameters")
    print(f"{'T':>6} {'median ms':>10}")
    for T in (16, 128, 512, 1024):
        ids = (torch.arange(1, T + 1, dtype=torch.int64) * 2654435761) % cfg["vocab_size"]
        ids = ids.unsqueeze(0)

        def forward():
            with torch.no_grad():
                logits = model(ids)
            assert logits.shape == (1, T, cfg["vocab_size"])
            assert all(b.att.kept.shape == (1, cfg["n_heads"], T, T) for b in model.trf_blocks)
            return logits

        ms = median_ms(forward, 1.0 if args.quick else 5.0, 3)
        print(f"{T:>6} {ms:>10.1f}")


if __name__ == "__main__":
    main()
