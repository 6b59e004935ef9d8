#!/usr/bin/python3
"""Writes the golden fixtures in tests/fixtures/ that the C++ tests compare the attnviz engine against.

Run with Debian's PyTorch (python3-torch 1.13, no MKL; numpy not needed):

    /usr/bin/python3 tests/torch/make_fixtures.py [--out DIR]

Each fixture is one JSON object in the schema of docs/cli.md (the CLI's --json output). For every
configuration in CONFIGS:
  1. inputs come from a separate generator, torch.Generator().manual_seed(10_000 + index), so that they do not
     consume the global generator (an "mkl" fixture uses the index of its "cpu" twin, so the two differ only in
     the dropout; a few configurations use the book's example sentences instead);
  2. torch.manual_seed(seed), then the module is built exactly as the book builds it (ch. 3 of "Build a Large
     Language Model From Scratch", classes copied below);
  3. one forward pass (batch of 1; train mode unless train=False) through an instrumented copy of the class that
     records, per head, the raw scores, softmax weights, weights after dropout and context; the plain book class
     is then run with the same seed and its output must equal the instrumented one bit for bit.
Dropout flavour "cpu" is Debian's own nn.Dropout (a build without MKL). Flavour "mkl" replaces nn.Dropout with
MklDropout, a simulation of the official x86-64 wheels on Intel CPUs (docs/torch-rng.md). Both flavours are
self-checked against outputs printed in the book's chapter-3 examples before anything is written.
Numbers are written as %.9g (float32 round trip). The script is deterministic.
"""
import argparse
import json
import math
import os
import sys

import torch
from torch import nn

# ==================================================================================================================
# The book's classes (ch. 3), as printed. SelfAttention_v1/_v2 take a 2-D input (T, d_in) as in the book (they use
# `keys.T`); the other classes take a batch (b, T, d_in).
# ==================================================================================================================


class SelfAttention_v1(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x):
        keys = x @ self.W_key
        queries = x @ self.W_query
        values = x @ self.W_value
        attn_scores = queries @ keys.T
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        context_vec = attn_weights @ values
        return context_vec


class SelfAttention_v2(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.T
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        context_vec = attn_weights @ values
        return context_vec


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer('mask', torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values
        return context_vec


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)])

    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer('mask', torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)
        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        context_vec = self.out_proj(context_vec)
        return context_vec

# ==================================================================================================================
# Instrumented copies: same construction (inherited __init__), same tensor operations in the same order, plus
# `self.rec`, a list of per-head dicts {scores, weights, dropped, context} of 2-D tensors.
# ==================================================================================================================


def _snap(t):
    return t.detach().clone()


def simplified(x, rec=None):
    """The book's attention without weights (section 3.3): 2-D x, no scale, no mask, no dropout."""
    attn_scores = x @ x.T
    attn_weights = torch.softmax(attn_scores, dim=-1)
    context_vec = attn_weights @ x
    if rec is not None:
        rec.append(dict(scores=_snap(attn_scores), weights=_snap(attn_weights), dropped=_snap(attn_weights),
                         context=_snap(context_vec)))
    return context_vec


class SelfAttention_v1_Rec(SelfAttention_v1):
    def forward(self, x):
        keys = x @ self.W_key
        queries = x @ self.W_query
        values = x @ self.W_value
        attn_scores = queries @ keys.T
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        context_vec = attn_weights @ values
        self.rec = [dict(scores=_snap(attn_scores), weights=_snap(attn_weights), dropped=_snap(attn_weights),
                         context=_snap(context_vec))]
        return context_vec


class SelfAttention_v2_Rec(SelfAttention_v2):
    def forward(self, x):
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.T
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        context_vec = attn_weights @ values
        self.rec = [dict(scores=_snap(attn_scores), weights=_snap(attn_weights), dropped=_snap(attn_weights),
                         context=_snap(context_vec))]
        return context_vec


class CausalAttention_Rec(CausalAttention):
    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        scores = _snap(attn_scores[0])
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        weights = _snap(attn_weights[0])
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values
        self.rec = [dict(scores=scores, weights=weights, dropped=_snap(attn_weights[0]), context=_snap(context_vec[0]))]
        return context_vec


class MultiHeadAttentionWrapper_Rec(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention_Rec(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)])

    def forward(self, x):
        out = torch.cat([head(x) for head in self.heads], dim=-1)
        self.rec = [head.rec[0] for head in self.heads]
        return out


class MultiHeadAttention_Rec(MultiHeadAttention):
    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)
        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        scores = _snap(attn_scores[0])
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        weights = _snap(attn_weights[0])
        attn_weights = self.dropout(attn_weights)
        dropped = _snap(attn_weights[0])
        per_head = attn_weights @ values
        context_vec = per_head.transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        context_vec = self.out_proj(context_vec)
        self.rec = [dict(scores=scores[h], weights=weights[h], dropped=dropped[h], context=_snap(per_head[0, h]))
                    for h in range(self.num_heads)]
        return context_vec

# ==================================================================================================================
# Dropout as the MKL build draws it (docs/torch-rng.md): one 32-bit seed from the global generator, then an
# MCG31m1 stream over the whole input tensor in row-major order.
# ==================================================================================================================

M31 = 2**31 - 1
MCG31_A = 1132489760


def draw_u32():
    """Consumes exactly one 32-bit draw of the global generator and returns it (2**32-1 reads as 0)."""
    return torch.randint(-2**31, 2**31 - 1, (1,), dtype=torch.int64).item() + 2**31


def mcg31_keep(seed, n, q):
    """Bernoulli(q) samples of MKL's viRngBernoulli(ICDF) on a VSL_BRNG_MCG31 stream seeded with `seed`."""
    x = seed % M31 or 1
    keep = []
    for _ in range(n):
        keep.append(1.0 if x / M31 < q else 0.0)
        x = x * MCG31_A % M31
    return keep


class MklDropout(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):  # mirrors ATen's _dropout_impl: noise.bernoulli_(1 - p); noise.div_(1 - p); x * noise
        if self.p == 0 or not self.training or x.numel() == 0:
            return x
        noise = torch.tensor(mcg31_keep(draw_u32(), x.numel(), 1 - self.p), dtype=x.dtype).view(x.shape)
        noise.div_(1 - self.p)
        return x * noise

# ==================================================================================================================
# Configurations
# ==================================================================================================================

BOOK_INPUTS = {  # sentence -> (tokens, rows)
    'journey': (['Your', 'journey', 'starts', 'with', 'one', 'step'],
                [[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                 [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]]),
    'dream': (['Dream', 'big', 'and', 'work', 'for', 'it'],
              [[0.72, 0.45, 0.31], [0.75, 0.20, 0.55], [0.30, 0.80, 0.40],
               [0.85, 0.35, 0.60], [0.55, 0.15, 0.75], [0.25, 0.20, 0.85]]),
}


def C(variant, T, d_in, d_out=None, heads=1, p=0.0, rng='cpu', bias=False, seed=123, train=True, ctx=1024,
      book=None, raw=False):
    """One configuration. `book`: use a BOOK_INPUTS sentence; `raw`: inputs not rounded to 2 decimals."""
    return dict(variant=variant, T=T, d_in=d_in, d_out=d_out, heads=heads, p=p, rng=rng, bias=bias, seed=seed,
                train=train, ctx=ctx, book=book, raw=raw)


CONFIGS = [
    # simplified (no parameters)
    C('simplified', 6, 3, book='journey'),
    C('simplified', 1, 1),
    C('simplified', 7, 5, raw=True),
    C('simplified', 33, 13),
    # SelfAttention_v1
    C('self_v1', 6, 3, 2, seed=123, book='journey'),
    C('self_v1', 1, 1, 1, seed=0),
    C('self_v1', 13, 7, 5, seed=789, raw=True),
    C('self_v1', 33, 33, 3, seed=7),
    # SelfAttention_v2
    C('self_v2', 6, 3, 2, seed=789, book='journey'),
    C('self_v2', 2, 5, 3, bias=True, seed=7),
    C('self_v2', 33, 13, 7, bias=True, seed=42, raw=True),
    C('self_v2', 64, 33, 1, seed=0),
    # CausalAttention
    C('causal', 1, 1, 1, seed=123),
    C('causal', 2, 3, 2, p=0.5, seed=123),
    C('causal', 2, 3, 2, p=0.5, rng='mkl', seed=123),
    C('causal', 7, 5, 3, p=0.1, bias=True, seed=0, ctx=7),
    C('causal', 7, 5, 3, p=0.1, rng='mkl', bias=True, seed=0, ctx=7),
    C('causal', 13, 7, 13, p=0.9, seed=789, raw=True),
    C('causal', 13, 7, 13, p=0.9, rng='mkl', seed=789, raw=True),
    C('causal', 64, 33, 5, p=0.5, seed=7),
    C('causal', 64, 33, 5, p=0.5, rng='mkl', seed=7),
    C('causal', 6, 3, 2, p=0.5, train=False, seed=123, book='journey'),
    # MultiHeadAttentionWrapper (d_out per head)
    C('wrapper', 6, 3, 2, heads=4, seed=0, ctx=6, book='dream'),
    C('wrapper', 1, 1, 1, heads=1, p=0.5, seed=123),
    C('wrapper', 7, 5, 3, heads=3, p=0.1, bias=True, seed=0),
    C('wrapper', 7, 5, 3, heads=3, p=0.1, rng='mkl', bias=True, seed=0),
    C('wrapper', 13, 13, 1, heads=8, p=0.5, seed=789, ctx=13),
    C('wrapper', 13, 13, 1, heads=8, p=0.5, rng='mkl', seed=789, ctx=13),
    C('wrapper', 33, 7, 5, heads=2, p=0.9, train=False, seed=7, raw=True),
    # MultiHeadAttention (d_out total)
    C('mha', 6, 3, 2, heads=2, seed=123, ctx=6, book='journey'),
    C('mha', 1, 1, 1, heads=1, p=0.1, seed=123),
    C('mha', 2, 5, 5, heads=5, p=0.5, bias=True, seed=0),
    C('mha', 2, 5, 5, heads=5, p=0.5, rng='mkl', bias=True, seed=0),
    C('mha', 7, 7, 9, heads=3, p=0.1, seed=789, ctx=7),
    C('mha', 7, 7, 9, heads=3, p=0.1, rng='mkl', seed=789, ctx=7),
    C('mha', 13, 13, 25, heads=25, p=0.5, seed=7),
    C('mha', 33, 33, 56, heads=8, p=0.1, bias=True, seed=42, raw=True),
    C('mha', 33, 33, 56, heads=8, p=0.1, rng='mkl', bias=True, seed=42, raw=True),
    C('mha', 16, 64, 128, heads=2, p=0.1, seed=123),
    C('mha', 64, 16, 16, heads=1, p=0.9, seed=0),
    C('mha', 64, 16, 16, heads=1, p=0.9, rng='mkl', seed=0),
    C('mha', 13, 5, 4, heads=2, p=0.5, train=False, bias=True, seed=123),
]

DROPOUT_VARIANTS = ('causal', 'wrapper', 'mha')


def effective_config(c):
    """The `config` object: options a variant does not use are reset (as attnviz::effective does)."""
    v = c['variant']
    has_dropout = v in DROPOUT_VARIANTS
    return {
        'variant': v,
        'd_in': c['d_in'],
        'd_out': c['d_in'] if v == 'simplified' else c['d_out'],
        'num_heads': c['heads'] if v in ('wrapper', 'mha') else 1,
        'context_length': c['ctx'],
        'dropout': float(c['p']) if has_dropout else 0.0,
        'qkv_bias': bool(c['bias']) and v not in ('simplified', 'self_v1'),
        'seed': c['seed'],
        'train': c['train'],
        'dropout_rng': c['rng'] if has_dropout else 'cpu',
    }


def file_name(i, c):
    e = effective_config(c)
    parts = [f"{i:02d}", e['variant'], f"T{c['T']}", f"din{e['d_in']}"]
    if e['variant'] != 'simplified':
        parts.append(f"dout{e['d_out']}")
    if e['variant'] in ('wrapper', 'mha'):
        parts.append(f"h{e['num_heads']}")
    if e['variant'] in DROPOUT_VARIANTS:
        parts += [f"p{round(e['dropout'] * 100):02d}", e['dropout_rng']]
    if e['qkv_bias']:
        parts.append('bias')
    if not e['train']:
        parts.append('eval')
    if c['ctx'] == c['T']:
        parts.append('ctxT')
    if c['book']:
        parts.append(c['book'])
    parts.append(f"s{e['seed']}")
    return '_'.join(parts) + '.json'


def make_inputs(i, c):
    if c['book']:
        tokens, rows = BOOK_INPUTS[c['book']]
        assert len(rows) == c['T'] and len(rows[0]) == c['d_in']
        return tokens, torch.tensor(rows)
    # The mkl twin of a configuration reuses the cpu twin's inputs (the first configuration equal but for rng).
    i = next(j for j, o in enumerate(CONFIGS) if dict(o, rng=c['rng']) == c)
    g = torch.Generator().manual_seed(10_000 + i)
    x = torch.rand(c['T'], c['d_in'], generator=g) * 2 - 1
    if not c['raw']:
        x = torch.round(x * 100) / 100
    return [f"x{t + 1}" for t in range(c['T'])], x


def build(c, instrumented):
    """torch.manual_seed(seed), then the module exactly as the book builds it (None for `simplified`)."""
    v = c['variant']
    torch.manual_seed(c['seed'])
    if v == 'simplified':
        return None
    if v == 'self_v1':
        m = (SelfAttention_v1_Rec if instrumented else SelfAttention_v1)(c['d_in'], c['d_out'])
    elif v == 'self_v2':
        m = (SelfAttention_v2_Rec if instrumented else SelfAttention_v2)(c['d_in'], c['d_out'], c['bias'])
    elif v == 'causal':
        cls = CausalAttention_Rec if instrumented else CausalAttention
        m = cls(c['d_in'], c['d_out'], c['ctx'], c['p'], c['bias'])
    elif v == 'wrapper':
        cls = MultiHeadAttentionWrapper_Rec if instrumented else MultiHeadAttentionWrapper
        m = cls(c['d_in'], c['d_out'], c['ctx'], c['p'], c['heads'], c['bias'])
    else:
        cls = MultiHeadAttention_Rec if instrumented else MultiHeadAttention
        m = cls(c['d_in'], c['d_out'], c['ctx'], c['p'], c['heads'], c['bias'])
    if c['rng'] == 'mkl':  # nn.Dropout draws nothing when built, so swapping it afterwards changes no weights
        for mod in (m.heads if v == 'wrapper' else [m]):
            mod.dropout = MklDropout(c['p'])
    if not c['train']:
        m.eval()
    return m


def run(c, x):
    """Forward through the instrumented module; returns (module or None, per-head records, output 2-D)."""
    v = c['variant']
    with torch.no_grad():
        if v == 'simplified':
            rec = []
            return None, rec, simplified(x, rec)
        m = build(c, instrumented=True)
        out = m(x) if v in ('self_v1', 'self_v2') else m(x.unsqueeze(0))[0]
        plain = build(c, instrumented=False)
        ref = plain(x) if v in ('self_v1', 'self_v2') else plain(x.unsqueeze(0))[0]
        assert torch.equal(out, ref), f"instrumented {v} differs from the book class"
        return m, m.rec, out


def fixture(i, c):
    tokens, x = make_inputs(i, c)
    m, rec, out = run(c, x)
    e = effective_config(c)
    params = {} if m is None else {k: t for k, t in m.state_dict().items() if k.split('.')[-1] != 'mask'}
    T, hd = c['T'], (c['d_in'] if m is None else (c['d_out'] // c['heads'] if c['variant'] == 'mha' else c['d_out']))
    assert len(rec) == e['num_heads']
    assert all(r['scores'].shape == (T, T) and r['context'].shape == (T, hd) for r in rec)
    return {
        'config': e,
        'tokens': tokens,
        'inputs': x,
        'params': params,
        'heads': [{k: r[k] for k in ('scores', 'weights', 'dropped', 'context')} for r in rec],
        'output': out,
    }

# ==================================================================================================================
# JSON text: floats as %.9g (F64: %.17g), matrices one row per line.
# ==================================================================================================================


class F64(float):
    """A float64 that is written with 17 significant digits instead of 9."""


def _num(v):
    if isinstance(v, bool):
        return 'true' if v else 'false'
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"non-finite number {v}")
        return ('%.17g' if isinstance(v, F64) else '%.9g') % v
    return json.dumps(v)


def encode(v, ind=0):
    pad, pad1 = '  ' * ind, '  ' * (ind + 1)
    if isinstance(v, torch.Tensor):
        v = v.detach().tolist()
    if isinstance(v, dict):
        if all(not isinstance(x, (dict, list, torch.Tensor)) for x in v.values()):
            return '{' + ', '.join(f"{json.dumps(k)}: {_num(x)}" for k, x in v.items()) + '}'
        items = (f"{pad1}{json.dumps(k)}: {encode(x, ind + 1)}" for k, x in v.items())
        return '{\n' + ',\n'.join(items) + '\n' + pad + '}'
    if isinstance(v, list):
        if all(not isinstance(x, (dict, list, torch.Tensor)) for x in v):
            return '[' + ','.join(_num(x) for x in v) + ']'
        return '[\n' + ',\n'.join(pad1 + encode(x, ind + 1) for x in v) + '\n' + pad + ']'
    return _num(v)

# ==================================================================================================================
# Self-checks against outputs printed in the book's chapter-3 examples (000-004, listed in docs/testing.md).
# ==================================================================================================================


def _close(t, printed, tol):
    return torch.allclose(t, torch.tensor(printed), rtol=0, atol=tol)


def self_checks():
    # 1. cpu flavour: Debian's nn.Dropout is the book's own printed example.
    torch.manual_seed(123)
    d = nn.Dropout(0.5)(torch.ones(6, 6))
    assert d[0].tolist() == [2, 2, 0, 2, 2, 0] and d[1].tolist() == [0, 0, 0, 2, 0, 2], d[:2]
    # 2. draw_u32 returns the raw Mersenne Twister output (std::mt19937(0)() == 2357136044).
    torch.manual_seed(0)
    assert draw_u32() == 2357136044
    # 3. mkl flavour: seed 000's "Stepwise implementation of multi-head attention" (p = 0.1).
    x = torch.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [6.0, 5.0, 4.0, 3.0, 2.0, 1.0], [1.0] * 6]])
    torch.manual_seed(0)
    Wq, Wk, Wv = torch.randn(6, 6), torch.randn(6, 6), torch.randn(6, 6)
    Q, K, V = [(x @ W).view(1, 3, 2, 3).transpose(1, 2) for W in (Wq, Wk, Wv)]
    s = Q @ K.transpose(2, 3)
    s.masked_fill_(torch.triu(torch.ones(3, 3), diagonal=1).bool(), -torch.inf)
    w = MklDropout(0.1)(torch.softmax(s / 3**0.5, dim=-1))
    assert _close(w[0], [[[1.111, 0, 0], [0, 1.111, 0], [0, 1.109, 0]],
                         [[1.111, 0, 0], [1.094, 0, 0], [1.108, 0.003, 0]]], 6e-4), w
    assert _close((w @ V)[0], [[[0.564, -3.817, 2.064], [-2.124, -4.104, 2.056], [-2.120, -4.097, 2.052]],
                               [[3.116, 9.936, 14.649], [3.068, 9.786, 14.427], [3.113, 9.915, 14.620]]], 6e-4)
    # 4. book outputs (seeds 004 and 001), via the fixture machinery.
    for i, c in enumerate(CONFIGS):
        key = (c['variant'], c['book'], c['seed'])
        printed = {('self_v1', 'journey', 123): [[0.2996, 0.8053], [0.3061, 0.8210], [0.3058, 0.8203],
                                                  [0.2948, 0.7939], [0.2927, 0.7891], [0.2990, 0.8040]],
                   ('self_v2', 'journey', 789): [[-0.0739, 0.0713], [-0.0748, 0.0703], [-0.0749, 0.0702],
                                                  [-0.0760, 0.0685], [-0.0763, 0.0679], [-0.0754, 0.0693]],
                   ('simplified', 'journey', 123): [[0.4421, 0.5931, 0.5790], [0.4419, 0.6515, 0.5683],
                                                     [0.4431, 0.6496, 0.5671], [0.4304, 0.6298, 0.5510],
                                                     [0.4671, 0.5910, 0.5266], [0.4177, 0.6503, 0.5645]],
                   ('wrapper', 'dream', 0): [
                       [-0.6430, 0.2255, -0.0536, -0.5405, -0.0793, 0.5405, 0.1871, 0.1333],
                       [-0.6319, 0.2390, -0.1641, -0.5589, -0.0362, 0.5299, 0.2138, 0.1721],
                       [-0.6097, 0.2691, -0.0483, -0.5788, -0.0075, 0.4847, 0.2282, 0.0269],
                       [-0.6439, 0.2779, -0.0935, -0.6058, -0.0053, 0.5151, 0.2411, 0.0674],
                       [-0.6230, 0.2833, -0.1427, -0.6075, 0.0220, 0.4946, 0.2532, 0.0693],
                       [-0.5880, 0.2937, -0.1667, -0.6075, 0.0578, 0.4567, 0.2675, 0.0352]]}.get(key)
        if printed is not None:
            assert _close(run(c, make_inputs(i, c)[1])[2], printed, 6e-5), f"book output differs: {key}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures'))
    args = ap.parse_args()
    torch.set_num_threads(1)
    self_checks()
    os.makedirs(args.out, exist_ok=True)
    total = 0
    for i, c in enumerate(CONFIGS):
        text = encode(fixture(i, c)) + '\n'
        path = os.path.join(args.out, file_name(i, c))
        with open(path, 'w', encoding='ascii', newline='\n') as f:
            f.write(text)
        total += len(text)
        print(f"{len(text):>9}  {os.path.relpath(path)}")
    print(f"{len(CONFIGS)} fixtures, {total} bytes")


if __name__ == '__main__':
    sys.exit(main())
