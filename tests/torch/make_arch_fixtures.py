#!/usr/bin/python3
"""Writes tests/fixtures/arch/: tiny random decoders of today's open architectures in Hugging Face's layout, and what
PyTorch computes for them, for the C++ tests to compare attnviz against.

Needs only Debian's PyTorch (python3-torch 1.13):

    /usr/bin/python3 tests/torch/make_arch_fixtures.py [--out DIR]

Each case is a folder NAME/ holding what a Hugging Face model folder holds for the engine:
  config.json                       as Hugging Face's configuration classes write it (model_type, sizes, norms, rope);
  model.safetensors                 Hugging Face's tensor names (F32, or BF16 / F16 for the *_bf16 / *_f16 cases),
  or model.safetensors.index.json   with the shards it names (the *_sharded case);
  expected.json                     {"ids": [...], "weights": [[layer 0's (H, T, T) softmax weights, flat], ...],
                                     "logits": [(T, V) flat], "q_rot": [layer 0's (T, H * head_dim) queries after
                                     their norm and rotation, flat], "k_rot": [layer 0's (T, KV * head_dim) keys]}.
The models below are written from the published modeling code of transformers (LlamaForCausalLM, Qwen2ForCausalLM,
Qwen3ForCausalLM, Gemma3ForCausalLM, GPTNeoXForCausalLM) in eval mode, float32 throughout: RMSNorm in float32, rotary
positions from inv_freq = 1 / base^(2i / dim) in float32 (llama3 and linear scaling included), rotate-half,
grouped key/value heads repeated per query head, eager attention (q k^T * scaling, causal mask, a sliding window where
the layer has one, softmax in float32), the gated MLPs, Gemma's (1 + w) norms, embedding scale and sandwich norms, and
GPT-NeoX's fused query_key_value (per head [q | k | v]), partial rotary and parallel residual. Weights are drawn from a
fixed seed with scales large enough that every step matters (norm weights away from 1, biases non-zero).
The forwards take a probe (no_probe below: the pass unchanged) through which make_lens_fixtures.py records, replaces
and patches the residual stream, the heads' context vectors and the attention and MLP outputs.
Deterministic: the same files every run. CI only reads them.
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_gpt_fixtures import safetensors_bytes  # noqa: E402

T = 14  # tokens per case: more than the sliding window below, so the band shows


# ==================================================================================================================
# The steps
# ==================================================================================================================

def rms_norm(x, w, eps, plus_one=False):
    """Llama/Qwen: w * (x / sqrt(mean(x^2) + eps)); Gemma: (x / sqrt(...)) * (1 + w)."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return y * (1.0 + w.float()) if plus_one else w * y


def layer_norm(x, w, b, eps):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def default_inv_freq(base, dim):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def llama3_inv_freq(inv_freq, s):
    factor, low, high, old = s['factor'], s['low_freq_factor'], s['high_freq_factor'], s['original_max_position_embeddings']
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv_freq
    out = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, out)


def rope_cos_sin(inv_freq, n):
    pos = torch.arange(n, dtype=torch.int64).float()
    freqs = (inv_freq[None, :, None].float() @ pos[None, None, :]).transpose(1, 2)[0]  # (T, dim/2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def apply_rope(x, cos, sin):
    """x: (heads, T, rot)."""
    return (x * cos) + (rotate_half(x) * sin)


def gelu_tanh(x):
    return torch.nn.functional.gelu(x, approximate='tanh')


def attention(q, k, v, scaling, window):
    """q: (H, T, hd); k, v: (KV, T, hd). Returns the (H, T, T) weights and the (T, H * hd) context."""
    H, n, hd = q.shape
    rep = H // k.shape[0]
    k = k.repeat_interleave(rep, dim=0)
    v = v.repeat_interleave(rep, dim=0)
    s = torch.matmul(q, k.transpose(1, 2)) * scaling
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    allowed = j <= i
    if window:
        allowed = allowed & (j > i - window)
    s = s.masked_fill(~allowed, float('-inf'))
    w = torch.softmax(s, dim=-1, dtype=torch.float32)
    ctx = torch.matmul(w, v).transpose(0, 1).reshape(n, H * hd)
    return w, ctx


# ==================================================================================================================
# The architectures: a config.json, random weights under Hugging Face's names, and the forward pass.
# ==================================================================================================================

def no_probe(kind, layer, t):
    """The forwards' probe: called with each activation below, it returns what the pass goes on with (the lens
    fixtures in make_lens_fixtures.py record, replace or patch them; this default leaves the pass as it is).
      'resid', l   (T, d)       the residual stream entering block l; l = L: after the last block, before the final norm
      'ctx', l     (T, H * hd)  the heads' context vectors (attention weights times values) before the output projection
      'attn', l    (T, d)       the attention's output: ctx @ W_O^T (+ its bias), before any post-attention norm
      'mlp', l     (T, d)       the MLP's output with its bias, before any post-feed-forward norm"""
    return t


class Draw:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)
        self.tensors = []  # (name, tensor) in file order

    def __call__(self, name, *shape, scale=None, around=0.0):
        fan_in = shape[-1]
        s = scale if scale is not None else 1.0 / math.sqrt(fan_in)
        t = torch.randn(*shape, generator=self.g) * s + around
        self.tensors.append((name, t))
        return t


def llama_like(cfg, seed, dtype):
    """llama, qwen2, qwen3 and gemma3_text: weights under model.*, and a forward function."""
    mt = cfg['model_type']
    gemma = mt == 'gemma3_text'
    d, L, H, KV = cfg['hidden_size'], cfg['num_hidden_layers'], cfg['num_attention_heads'], cfg['num_key_value_heads']
    hd = cfg.get('head_dim') or d // H
    ff, V = cfg['intermediate_size'], cfg['vocab_size']
    bias = mt == 'qwen2'
    qk_norm = mt in ('qwen3', 'gemma3_text')
    draw = Draw(seed)
    norm_around = 0.0 if gemma else 1.0  # Gemma's norm weights are offsets from 1
    W = {'embed': draw('model.embed_tokens.weight', V, d, scale=1.0), 'layers': []}
    for l in range(L):
        p = f'model.layers.{l}.'
        lw = {'ln1': draw(p + 'input_layernorm.weight', d, scale=0.2, around=norm_around)}
        lw['q'] = draw(p + 'self_attn.q_proj.weight', H * hd, d)
        lw['k'] = draw(p + 'self_attn.k_proj.weight', KV * hd, d)
        lw['v'] = draw(p + 'self_attn.v_proj.weight', KV * hd, d)
        if bias:
            lw['qb'] = draw(p + 'self_attn.q_proj.bias', H * hd, scale=0.3)
            lw['kb'] = draw(p + 'self_attn.k_proj.bias', KV * hd, scale=0.3)
            lw['vb'] = draw(p + 'self_attn.v_proj.bias', KV * hd, scale=0.3)
        lw['o'] = draw(p + 'self_attn.o_proj.weight', d, H * hd)
        if qk_norm:
            lw['qn'] = draw(p + 'self_attn.q_norm.weight', hd, scale=0.2, around=norm_around)
            lw['kn'] = draw(p + 'self_attn.k_norm.weight', hd, scale=0.2, around=norm_around)
        lw['ln2'] = draw(p + 'post_attention_layernorm.weight', d, scale=0.2, around=norm_around)
        if gemma:
            lw['pre_ff'] = draw(p + 'pre_feedforward_layernorm.weight', d, scale=0.2)
            lw['post_ff'] = draw(p + 'post_feedforward_layernorm.weight', d, scale=0.2)
        lw['gate'] = draw(p + 'mlp.gate_proj.weight', ff, d)
        lw['up'] = draw(p + 'mlp.up_proj.weight', ff, d)
        lw['down'] = draw(p + 'mlp.down_proj.weight', d, ff)
        W['layers'].append(lw)
    W['norm'] = draw('model.norm.weight', d, scale=0.2, around=norm_around)
    if not cfg['tie_word_embeddings']:
        W['head'] = draw('lm_head.weight', V, d)
    round_weights(draw.tensors, dtype)

    eps = cfg['rms_norm_eps']
    types = cfg.get('layer_types') or ['full_attention'] * L

    def inv_freq_for(layer_type):
        if gemma and layer_type == 'sliding_attention':
            return default_inv_freq(cfg['rope_local_base_freq'], hd)
        rp = cfg.get('rope_parameters')  # the newest form: the base and the scaling in one object
        s = rp if rp else cfg.get('rope_scaling')
        inv = default_inv_freq(rp['rope_theta'] if rp else cfg['rope_theta'], hd)
        if s and s['rope_type'] == 'llama3':
            inv = llama3_inv_freq(inv, s)
        elif s and s['rope_type'] == 'linear':
            inv = inv / s['factor']
        return inv

    def forward(ids, probe=no_probe):
        n = len(ids)
        x = W['embed'][torch.tensor(ids)]
        if gemma:
            x = x * torch.tensor(d ** 0.5, dtype=x.dtype)
        rec = {'weights': []}
        for l, lw in enumerate(W['layers']):
            x = probe('resid', l, x)
            h = rms_norm(x, lw['ln1'], eps, gemma)
            q = h @ lw['q'].T + (lw['qb'] if bias else 0)
            k = h @ lw['k'].T + (lw['kb'] if bias else 0)
            v = h @ lw['v'].T + (lw['vb'] if bias else 0)
            q = q.view(n, H, hd).transpose(0, 1)
            k = k.view(n, KV, hd).transpose(0, 1)
            v = v.view(n, KV, hd).transpose(0, 1)
            if qk_norm:
                q = rms_norm(q, lw['qn'], eps, gemma)
                k = rms_norm(k, lw['kn'], eps, gemma)
            cos, sin = rope_cos_sin(inv_freq_for(types[l]), n)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            if l == 0:
                rec['q_rot'] = q.transpose(0, 1).reshape(n, H * hd)
                rec['k_rot'] = k.transpose(0, 1).reshape(n, KV * hd)
            scaling = cfg['query_pre_attn_scalar'] ** -0.5 if gemma else hd ** -0.5
            window = cfg['sliding_window'] if types[l] == 'sliding_attention' else 0
            w, ctx = attention(q, k, v, scaling, window)
            rec['weights'].append(w)
            ctx = probe('ctx', l, ctx)
            a = probe('attn', l, ctx @ lw['o'].T)
            if gemma:
                a = rms_norm(a, lw['ln2'], eps, True)
                x = x + a
                m = rms_norm(x, lw['pre_ff'], eps, True)
                m = probe('mlp', l, (gelu_tanh(m @ lw['gate'].T) * (m @ lw['up'].T)) @ lw['down'].T)
                x = x + rms_norm(m, lw['post_ff'], eps, True)
            else:
                x = x + a
                m = rms_norm(x, lw['ln2'], eps)
                m = probe('mlp', l, (torch.nn.functional.silu(m @ lw['gate'].T) * (m @ lw['up'].T)) @ lw['down'].T)
                x = x + m
        x = probe('resid', len(W['layers']), x)
        x = rms_norm(x, W['norm'], eps, gemma)
        rec['logits'] = x @ W.get('head', W['embed']).T
        return rec

    return draw.tensors, forward


def neox(cfg, seed, dtype):
    d, L, H = cfg['hidden_size'], cfg['num_hidden_layers'], cfg['num_attention_heads']
    hd, ff, V = d // H, cfg['intermediate_size'], cfg['vocab_size']
    rot = int(hd * cfg['rotary_pct'])
    draw = Draw(seed)
    W = {'embed': draw('gpt_neox.embed_in.weight', V, d, scale=1.0), 'layers': []}
    for l in range(L):
        p = f'gpt_neox.layers.{l}.'
        lw = {'ln1w': draw(p + 'input_layernorm.weight', d, scale=0.2, around=1.0),
              'ln1b': draw(p + 'input_layernorm.bias', d, scale=0.2),
              'ln2w': draw(p + 'post_attention_layernorm.weight', d, scale=0.2, around=1.0),
              'ln2b': draw(p + 'post_attention_layernorm.bias', d, scale=0.2),
              'qkv': draw(p + 'attention.query_key_value.weight', 3 * d, d),
              'qkvb': draw(p + 'attention.query_key_value.bias', 3 * d, scale=0.3),
              'o': draw(p + 'attention.dense.weight', d, d),
              'ob': draw(p + 'attention.dense.bias', d, scale=0.3),
              'fc': draw(p + 'mlp.dense_h_to_4h.weight', ff, d),
              'fcb': draw(p + 'mlp.dense_h_to_4h.bias', ff, scale=0.3),
              'proj': draw(p + 'mlp.dense_4h_to_h.weight', d, ff),
              'projb': draw(p + 'mlp.dense_4h_to_h.bias', d, scale=0.3)}
        W['layers'].append(lw)
    W['fw'] = draw('gpt_neox.final_layer_norm.weight', d, scale=0.2, around=1.0)
    W['fb'] = draw('gpt_neox.final_layer_norm.bias', d, scale=0.2)
    W['head'] = draw('embed_out.weight', V, d)
    round_weights(draw.tensors, dtype)
    eps = cfg['layer_norm_eps']
    inv = default_inv_freq(cfg['rotary_emb_base'], rot)

    def forward(ids, probe=no_probe):
        n = len(ids)
        x = W['embed'][torch.tensor(ids)]
        rec = {'weights': []}
        cos, sin = rope_cos_sin(inv, n)
        for l, lw in enumerate(W['layers']):
            x = probe('resid', l, x)
            h = layer_norm(x, lw['ln1w'], lw['ln1b'], eps)
            qkv = (h @ lw['qkv'].T + lw['qkvb']).view(n, H, 3 * hd).transpose(0, 1)  # (H, T, 3 hd)
            q, k, v = qkv[..., :hd], qkv[..., hd:2 * hd], qkv[..., 2 * hd:]
            q = torch.cat((apply_rope(q[..., :rot], cos, sin), q[..., rot:]), dim=-1)
            k = torch.cat((apply_rope(k[..., :rot], cos, sin), k[..., rot:]), dim=-1)
            if l == 0:
                rec['q_rot'] = q.transpose(0, 1).reshape(n, d)
                rec['k_rot'] = k.transpose(0, 1).reshape(n, d)
            w, ctx = attention(q, k, v, hd ** -0.5, 0)
            rec['weights'].append(w)
            ctx = probe('ctx', l, ctx)
            a = probe('attn', l, ctx @ lw['o'].T + lw['ob'])
            if cfg['use_parallel_residual']:
                m = layer_norm(x, lw['ln2w'], lw['ln2b'], eps)
                m = probe('mlp', l, torch.nn.functional.gelu(m @ lw['fc'].T + lw['fcb']) @ lw['proj'].T + lw['projb'])
                x = m + a + x
            else:
                a = a + x
                m = layer_norm(a, lw['ln2w'], lw['ln2b'], eps)
                m = probe('mlp', l, torch.nn.functional.gelu(m @ lw['fc'].T + lw['fcb']) @ lw['proj'].T + lw['projb'])
                x = m + a
        x = probe('resid', len(W['layers']), x)
        x = layer_norm(x, W['fw'], W['fb'], eps)
        rec['logits'] = x @ W['head'].T
        return rec

    return draw.tensors, forward


def round_weights(tensors, dtype):
    """The weights as the file stores them: rounded to BF16 / F16 in place (the model computes in float32 with
    the widened values, as transformers does when it loads a BF16 file in float32)."""
    if dtype == 'f32':
        return
    tdt = {'bf16': torch.bfloat16, 'f16': torch.float16}[dtype]
    for _, t in tensors:
        t.copy_(t.to(tdt).float())


# ==================================================================================================================
# The cases
# ==================================================================================================================

def llama_cfg(**over):
    c = {'architectures': ['LlamaForCausalLM'], 'attention_bias': False, 'attention_dropout': 0.0,
         'bos_token_id': 1, 'eos_token_id': 2, 'hidden_act': 'silu', 'hidden_size': 48, 'initializer_range': 0.02,
         'intermediate_size': 80, 'max_position_embeddings': 64, 'mlp_bias': False, 'model_type': 'llama',
         'num_attention_heads': 6, 'num_hidden_layers': 2, 'num_key_value_heads': 2, 'pretraining_tp': 1,
         'rms_norm_eps': 1e-05, 'rope_scaling': None, 'rope_theta': 10000.0, 'tie_word_embeddings': True,
         'torch_dtype': 'float32', 'transformers_version': '4.45.0', 'use_cache': True, 'vocab_size': 96}
    c.update(over)
    return c


CASES = [
    # SmolLM2's shape in small: grouped heads (6 query heads on 2 key/value heads), tied head.
    ('llama', llama_cfg(), 'f32', llama_like),
    # Llama 3.2's rotary scaling, an untied head, and a config in the newest form (rope_parameters).
    ('llama3_scaled', llama_cfg(rope_theta=None, rope_scaling=None, tie_word_embeddings=False,
                                rope_parameters={'rope_type': 'llama3', 'rope_theta': 500000.0, 'factor': 8.0,
                                                 'low_freq_factor': 1.0, 'high_freq_factor': 4.0,
                                                 'original_max_position_embeddings': 16}), 'f32', llama_like),
    ('llama_bf16', llama_cfg(torch_dtype='bfloat16'), 'bf16', llama_like),
    ('qwen2', {'architectures': ['Qwen2ForCausalLM'], 'attention_dropout': 0.0, 'bos_token_id': 5, 'eos_token_id': 5,
               'hidden_act': 'silu', 'hidden_size': 48, 'initializer_range': 0.02, 'intermediate_size': 64,
               'max_position_embeddings': 64, 'max_window_layers': 2, 'model_type': 'qwen2',
               'num_attention_heads': 4, 'num_hidden_layers': 2, 'num_key_value_heads': 2, 'rms_norm_eps': 1e-06,
               'rope_scaling': None, 'rope_theta': 1000000.0, 'sliding_window': 64, 'tie_word_embeddings': False,
               'torch_dtype': 'float32', 'transformers_version': '4.43.1', 'use_cache': True,
               'use_sliding_window': False, 'vocab_size': 90}, 'f32', llama_like),
    ('qwen2_sharded', None, 'f32', llama_like),  # qwen2's model split into two shards with an index
    ('qwen3', {'architectures': ['Qwen3ForCausalLM'], 'attention_bias': False, 'attention_dropout': 0.0,
               'bos_token_id': 5, 'eos_token_id': 6, 'head_dim': 16, 'hidden_act': 'silu', 'hidden_size': 32,
               'initializer_range': 0.02, 'intermediate_size': 48, 'max_position_embeddings': 64,
               'max_window_layers': 2, 'model_type': 'qwen3', 'num_attention_heads': 4, 'num_hidden_layers': 2,
               'num_key_value_heads': 2, 'rms_norm_eps': 1e-06, 'rope_scaling': None, 'rope_theta': 1000000,
               'sliding_window': None, 'tie_word_embeddings': True, 'torch_dtype': 'float32',
               'transformers_version': '4.51.0', 'use_cache': True, 'use_sliding_window': False,
               'vocab_size': 80}, 'f32', llama_like),
    ('gemma3', {'architectures': ['Gemma3ForCausalLM'], 'attention_bias': False, 'attention_dropout': 0.0,
                'attn_logit_softcapping': None, 'bos_token_id': 2, 'cache_implementation': 'hybrid',
                'eos_token_id': 1, 'final_logit_softcapping': None, 'head_dim': 16,
                'hidden_activation': 'gelu_pytorch_tanh', 'hidden_size': 32, 'initializer_range': 0.02,
                'intermediate_size': 64, 'layer_types': ['sliding_attention', 'sliding_attention',
                                                         'full_attention'],
                'max_position_embeddings': 64, 'model_type': 'gemma3_text', 'num_attention_heads': 4,
                'num_hidden_layers': 3, 'num_key_value_heads': 1, 'pad_token_id': 0, 'query_pre_attn_scalar': 24,
                'rms_norm_eps': 1e-06, 'rope_local_base_freq': 10000.0,
                'rope_scaling': {'factor': 8.0, 'rope_type': 'linear'}, 'rope_theta': 1000000.0,
                'sliding_window': 5, 'sliding_window_pattern': 3, 'tie_word_embeddings': True,
                'torch_dtype': 'float32', 'transformers_version': '4.53.0', 'use_bidirectional_attention': False,
                'use_cache': True, 'vocab_size': 72}, 'f32', llama_like),
    ('pythia', {'architectures': ['GPTNeoXForCausalLM'], 'attention_bias': True, 'attention_dropout': 0.0,
                'bos_token_id': 0, 'classifier_dropout': 0.1, 'eos_token_id': 0, 'hidden_act': 'gelu',
                'hidden_dropout': 0.0, 'hidden_size': 32, 'initializer_range': 0.02, 'intermediate_size': 128,
                'layer_norm_eps': 1e-05, 'max_position_embeddings': 64, 'model_type': 'gpt_neox',
                'num_attention_heads': 4, 'num_hidden_layers': 2, 'rope_scaling': None, 'rotary_emb_base': 10000,
                'rotary_pct': 0.25, 'tie_word_embeddings': False, 'torch_dtype': 'float32',
                'transformers_version': '4.24.0', 'use_cache': True, 'use_parallel_residual': True,
                'vocab_size': 70}, 'f32', neox),
    ('neox_sequential', None, 'f32', neox),  # pythia with use_parallel_residual false and full rotary
]


def flat(t):
    return [float('%.9g' % v) for v in t.detach().reshape(-1).tolist()]


def write_case(out, name, cfg, dtype, build, seed):
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    for f in os.listdir(folder):
        os.remove(os.path.join(folder, f))
    tensors, forward = build(cfg, seed, dtype)
    files_cfg = dict(cfg)
    if files_cfg.get('rope_theta', 0) is None:
        del files_cfg['rope_theta']
    with open(os.path.join(folder, 'config.json'), 'w') as f:
        json.dump(files_cfg, f, indent=2, sort_keys=True)
        f.write('\n')
    if name.endswith('_sharded'):
        half = len(tensors) // 2
        shards = [tensors[:half], tensors[half:]]
        weight_map, total = {}, 0
        for i, part in enumerate(shards):
            fname = f'model-{i + 1:05d}-of-{len(shards):05d}.safetensors'
            data = safetensors_bytes(part, dtype)
            with open(os.path.join(folder, fname), 'wb') as f:
                f.write(data)
            for n, t in part:
                weight_map[n] = fname
                total += t.numel() * 4
        with open(os.path.join(folder, 'model.safetensors.index.json'), 'w') as f:
            json.dump({'metadata': {'total_size': total}, 'weight_map': weight_map}, f, indent=2, sort_keys=True)
            f.write('\n')
    else:
        with open(os.path.join(folder, 'model.safetensors'), 'wb') as f:
            f.write(safetensors_bytes(tensors, dtype, {'format': 'pt'}))
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, cfg['vocab_size'], (T,), generator=g).tolist()
    with torch.no_grad():
        rec = forward(ids)
    assert all(torch.isfinite(w).all() for w in rec['weights'])
    exp = {'ids': ids, 'weights': [flat(w) for w in rec['weights']], 'logits': flat(rec['logits']),
           'q_rot': flat(rec['q_rot']), 'k_rot': flat(rec['k_rot'])}
    with open(os.path.join(folder, 'expected.json'), 'w') as f:
        json.dump(exp, f, separators=(',', ':'))
        f.write('\n')
    print(f'{name}: {len(tensors)} tensors, {cfg["model_type"]}, T = {T}')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default=os.path.join(os.path.dirname(__file__), '..', 'fixtures', 'arch'))
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfgs = {}
    for seed, (name, cfg, dtype, build) in enumerate(CASES, start=100):
        if name == 'qwen2_sharded':
            cfg = cfgs['qwen2']
        if name == 'neox_sequential':
            cfg = dict(cfgs['pythia'], use_parallel_residual=False, rotary_pct=1.0)
        cfgs[name] = cfg
        write_case(args.out, name, cfg, dtype, build, seed)


if __name__ == '__main__':
    main()
