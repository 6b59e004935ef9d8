#!/usr/bin/python3
"""Writes tests/fixtures/lens/: what the interpretability tools (logit lens, direct logit attribution, head
ablation, activation patching) give on the repository's tiny models, computed in PyTorch, for the C++ tests to compare
attnviz against.

Needs only Debian's PyTorch (python3-torch 1.13) and python3-regex (make_gpt_fixtures imports it):

    /usr/bin/python3 tests/torch/make_lens_fixtures.py [--out DIR]

It writes one NAME.json per case (tests/fixtures/lens/README.md describes every field) and leaves the README alone.
The models are those of tests/fixtures/arch/ (llama, qwen2, qwen3, gemma3, pythia, neox_sequential), rebuilt by
make_arch_fixtures.py's own forwards from their seeds and checked tensor for tensor against the committed
model.safetensors and against expected.json's logits, and GPT-2's tests/fixtures/gpt/hf-folder/, run by a forward
written here from Hugging Face's GPT2LMHeadModel and checked against the book's GPTModel loaded from the same file
and against case 14's logits. Every pass is float32 in eval mode; the forwards' probe (make_arch_fixtures.no_probe)
records, replaces or patches the residual stream and the heads' context vectors.

The definitions (TransformerLens's conventions; L layers, H query heads, T tokens):
  residual point l       the stream entering block l (0 = the embeddings, with GPT-2's positions and Gemma's
                         sqrt(d) scale); point L = after the last block. L + 1 points.
  logit lens             each point through the final norm (its own statistics) and the unembedding.
  metric                 logit[p][target], or logit[p][target] - logit[p][versus].
  attribution            the metric split over components at position p along u = W_U[target] (- W_U[versus]),
                         in float64 from the float32 pass: the final norm's 1/sigma (LayerNorm) or 1/rms (RMSNorm)
                         frozen at the final residual's value at p, LayerNorm's centring applied to each component
                         on its own, Gemma's post-attention and post-feed-forward norms frozen at 1/rms of the
                         block's attention output and MLP output at p. Components: embeddings; each head's context
                         through its slice of W_O (no bias); each layer's out-projection bias; each layer's MLP
                         output (bias included); the final norm's bias. They sum to the metric.
  ablation               the named heads' context vectors replaced at every position by zero, or by their mean over
                         the T positions taken in the ablated pass itself; everything after recomputed.
  patching               (m_patched - m_corrupted) / (m_clean - m_corrupted): the corrupted ids' pass with one
                         activation taken from the clean pass: the residual entering block l at position t only,
                         or head h's context vectors in layer l at every position.
Self-checks (asserted before anything is written): each model against its references; the lens's last point equals
the logits; the components sum to the metric (and the heads plus the bias to the attention output); zeroing a head's
slice of W_O gives the zero-ablated logits; patching every position of the embeddings gives 1; m_clean - m_corrupted
is not near zero. Floats are written as %.9g. Deterministic: the same files every run on one machine (float32 sums
may differ in their last bits between CPUs, as make_arch_fixtures.py's do).
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_arch_fixtures as arch  # noqa: E402
from make_gpt_fixtures import F, book_state_from_hf, model_from_state, read_safetensors  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures')

# (name, model folder under tests/fixtures, T, position (None: the last), with a versus token)
CASES = [
    ('gpt2', 'gpt/hf-folder', 8, None, True),
    ('llama', 'arch/llama', 12, None, False),
    ('qwen2', 'arch/qwen2', 10, 4, True),  # a middle position: the tokens after it change nothing
    ('qwen3', 'arch/qwen3', 14, None, False),
    ('gemma3', 'arch/gemma3', 14, 8, True),  # a middle position past the sliding window of 5
    ('pythia', 'arch/pythia', 9, None, False),
    ('neox_sequential', 'arch/neox_sequential', 11, None, True),
]
GPT2_CASE = os.path.join(FIXTURES, 'gpt', '14_folder_hf_d64_h4_l2_p10_bias_f16.json')  # hf-folder's logits


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read_weights(path):
    with open(path, 'rb') as f:
        return read_safetensors(f.read())


def rel_err(a, b):
    """max |a - b| over max |b|: how far a pass is from its reference, on the reference's scale."""
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


# ==================================================================================================================
# The models: a forward with a probe, and the weights that attribution reads.
# ==================================================================================================================

class Model:
    """forward(ids, probe) -> {'logits': (T, V)}; final(x): the final norm and the unembedding, as the forward
    applies them; W_O(l): (d, H * hd), a view of the weights (zeroing a slice of it changes the model);
    attn_bias(l): the out-projection's bias or None; norm: the final norm for attribution ({'kind': 'layer' or
    'rms', 'scale': the effective scale ((1 + w) in Gemma), 'bias' or None, 'eps'}); sandwich: None or
    (eps, [post-attention scale per layer], [post-feed-forward scale per layer])."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def arch_model(name):
    """tests/fixtures/arch/NAME rebuilt by make_arch_fixtures.py from its seed, checked against the folder's file."""
    folder = os.path.join(FIXTURES, 'arch', name)
    cfg = read_json(os.path.join(folder, 'config.json'))
    seed, build = next((seed, c[3]) for seed, c in enumerate(arch.CASES, start=100) if c[0] == name)
    assert next(c[2] for c in arch.CASES if c[0] == name) == 'f32'
    tensors, forward = build(cfg, seed, 'f32')
    w = dict(tensors)
    stored = read_weights(os.path.join(folder, 'model.safetensors'))
    assert sorted(stored) == sorted(w) and all(torch.equal(stored[k], w[k]) for k in w), name
    L, H, d = cfg['num_hidden_layers'], cfg['num_attention_heads'], cfg['hidden_size']
    if cfg['model_type'] == 'gpt_neox':
        p = 'gpt_neox.layers.{}.attention.dense.'
        eps, fw, fb, U = cfg['layer_norm_eps'], w['gpt_neox.final_layer_norm.weight'], \
            w['gpt_neox.final_layer_norm.bias'], w['embed_out.weight']
        m = Model(n_layers=L, n_heads=H, head_dim=d // H, vocab=cfg['vocab_size'], unembed=U,
                  final=lambda x: arch.layer_norm(x, fw, fb, eps) @ U.T,
                  W_O=lambda l: w[p.format(l) + 'weight'], attn_bias=lambda l: w[p.format(l) + 'bias'],
                  norm={'kind': 'layer', 'scale': fw, 'bias': fb, 'eps': eps}, sandwich=None)
    else:
        gemma = cfg['model_type'] == 'gemma3_text'
        eps, nw = cfg['rms_norm_eps'], w['model.norm.weight']
        U = w.get('lm_head.weight', w['model.embed_tokens.weight'])
        p = 'model.layers.{}.'
        sandwich = (eps, [1 + w[p.format(l) + 'post_attention_layernorm.weight'] for l in range(L)],
                    [1 + w[p.format(l) + 'post_feedforward_layernorm.weight'] for l in range(L)]) if gemma else None
        m = Model(n_layers=L, n_heads=H, head_dim=cfg.get('head_dim') or d // H, vocab=cfg['vocab_size'], unembed=U,
                  final=lambda x: arch.rms_norm(x, nw, eps, gemma) @ U.T,
                  W_O=lambda l: w[p.format(l) + 'self_attn.o_proj.weight'], attn_bias=lambda l: None,
                  norm={'kind': 'rms', 'scale': 1 + nw if gemma else nw, 'bias': None, 'eps': eps},
                  sandwich=sandwich)
    m.forward = forward
    return m


def check_arch(name, m):
    exp = read_json(os.path.join(FIXTURES, 'arch', name, 'expected.json'))
    with torch.no_grad():
        logits = m.forward(exp['ids'])['logits']
    e = rel_err(logits.reshape(-1), torch.tensor(exp['logits']))
    assert e < 1e-5, (name, e)
    return e


def gpt2_model():
    """GPT-2 from tests/fixtures/gpt/hf-folder, written from Hugging Face's GPT2LMHeadModel: learned positions,
    pre-norm blocks, Conv1D weights stored (in, out), fused c_attn [q | k | v], gelu_new, tied head."""
    folder = os.path.join(FIXTURES, 'gpt', 'hf-folder')
    cfg = read_json(os.path.join(folder, 'config.json'))
    w = read_weights(os.path.join(folder, 'model.safetensors'))
    d, H, L, eps = cfg['n_embd'], cfg['n_head'], cfg['n_layer'], cfg['layer_norm_epsilon']
    assert cfg['activation_function'] == 'gelu_new'
    hd = d // H

    def ln(x, k):
        return arch.layer_norm(x, w[k + '.weight'], w[k + '.bias'], eps)

    def final(x):
        return ln(x, 'ln_f') @ w['wte.weight'].T

    def forward(ids, probe=arch.no_probe):
        n = len(ids)
        x = w['wte.weight'][torch.tensor(ids)] + w['wpe.weight'][:n]
        for l in range(L):
            b = f'h.{l}.'
            x = probe('resid', l, x)
            qkv = ln(x, b + 'ln_1') @ w[b + 'attn.c_attn.weight'] + w[b + 'attn.c_attn.bias']
            q, k, v = (t.reshape(n, H, hd).transpose(0, 1) for t in qkv.split(d, dim=-1))
            _, ctx = arch.attention(q, k, v, hd ** -0.5, 0)
            ctx = probe('ctx', l, ctx)
            x = x + probe('attn', l, ctx @ w[b + 'attn.c_proj.weight'] + w[b + 'attn.c_proj.bias'])
            h = arch.gelu_tanh(ln(x, b + 'ln_2') @ w[b + 'mlp.c_fc.weight'] + w[b + 'mlp.c_fc.bias'])
            x = x + probe('mlp', l, h @ w[b + 'mlp.c_proj.weight'] + w[b + 'mlp.c_proj.bias'])
        x = probe('resid', L, x)
        return {'logits': final(x)}

    return Model(n_layers=L, n_heads=H, head_dim=hd, vocab=cfg['vocab_size'], unembed=w['wte.weight'], final=final,
                 forward=forward, W_O=lambda l: w[f'h.{l}.attn.c_proj.weight'].T,
                 attn_bias=lambda l: w[f'h.{l}.attn.c_proj.bias'],
                 norm={'kind': 'layer', 'scale': w['ln_f.weight'], 'bias': w['ln_f.bias'], 'eps': eps},
                 sandwich=None), cfg, w


def check_gpt2(m, cfg, w):
    """Against the book's GPTModel loaded from the same file (an independent forward) and case 14's logits."""
    assert (F['emb_dim'], F['n_heads'], F['n_layers'], F['vocab_size'], F['context_length']) == \
        (cfg['n_embd'], cfg['n_head'], cfg['n_layer'], cfg['vocab_size'], cfg['n_positions'])
    book = model_from_state(F, book_state_from_hf(w, F), tied=True)
    case = read_json(GPT2_CASE)
    with torch.no_grad():
        logits = m.forward(case['ids'])['logits']
        e_book = rel_err(logits, book(torch.tensor([case['ids']]))[0])
    e_case = rel_err(logits, torch.tensor(case['logits']))
    assert e_book < 1e-5 and e_case < 1e-5, (e_book, e_case)
    return max(e_book, e_case)


# ==================================================================================================================
# Passes, probes and the tools
# ==================================================================================================================

class Probe:
    """Applies edits {(kind, layer): f(tensor) -> tensor} and records what the pass goes on with."""

    def __init__(self, edits=None):
        self.edits = edits or {}
        self.acts = {}

    def __call__(self, kind, layer, t):
        f = self.edits.get((kind, layer))
        if f is not None:
            t = f(t)
        self.acts[kind, layer] = t
        return t


def run(m, ids, edits=None):
    """One float32 pass; returns (logits (T, V), {(kind, layer): activation})."""
    probe = Probe(edits)
    with torch.no_grad():
        logits = m.forward(ids, probe)['logits']
    return logits, probe.acts


def metric(logits, p, t, v):
    return float(logits[p, t]) - (float(logits[p, v]) if v is not None else 0.0)


def head_slice(m, h):
    return slice(h * m.head_dim, (h + 1) * m.head_dim)


def attribution(m, logits, acts, p, t, v, worst):
    """Direct logit attribution at position p (float64 from the float32 pass), checked to sum to the metric."""
    u = m.unembed[t].double() - (m.unembed[v].double() if v is not None else 0)
    n = m.norm
    xf = acts['resid', m.n_layers][p].double()
    layer = n['kind'] == 'layer'
    if layer:
        inv = 1 / math.sqrt(float(xf.var(unbiased=False)) + n['eps'])
    else:
        inv = 1 / math.sqrt(float(xf.pow(2).mean()) + n['eps'])
    scale = n['scale'].double()

    def through_final(c):
        c = c.double()
        if layer:
            c = c - c.mean()
        return float(u @ (scale * c)) * inv

    def rms(x):
        return math.sqrt(float(x.pow(2).mean()) + m.sandwich[0])

    heads, attn_bias, mlp = [], [], []
    for l in range(m.n_layers):
        ctx, W_O = acts['ctx', l][p].double(), m.W_O(l).double()
        per = [W_O[:, head_slice(m, h)] @ ctx[head_slice(m, h)] for h in range(m.n_heads)]
        b = m.attn_bias(l)
        b = b.double() if b is not None else torch.zeros(W_O.shape[0], dtype=torch.float64)
        a = acts['attn', l][p].double()
        e = float((sum(per) + b - a).abs().max() / a.abs().max())
        assert e < 1e-5, e
        worst['heads_sum_to_attention'] = max(worst['heads_sum_to_attention'], e)
        mo = acts['mlp', l][p].double()
        if m.sandwich:
            g = m.sandwich[1][l].double() / rms(a)
            per, b = [g * c for c in per], g * b
            mo = m.sandwich[2][l].double() * mo / rms(mo)
        heads.append([through_final(c) for c in per])
        attn_bias.append(through_final(b))
        mlp.append(through_final(mo))
    comp = {'embeddings': through_final(acts['resid', 0][p]), 'heads': heads, 'attention_bias': attn_bias,
            'mlp': mlp, 'final_bias': float(u @ n['bias'].double()) if layer else 0.0}
    value = metric(logits, p, t, v)
    total = comp['embeddings'] + sum(map(sum, heads)) + sum(attn_bias) + sum(mlp) + comp['final_bias']
    e = abs(total - value) / max(abs(value), 1.0)
    assert e < 1e-4, (total, value)
    worst['attribution_sum'] = max(worst['attribution_sum'], e)
    return {'value': value, 'components': comp}


def ablation_edits(m, heads, how):
    """Replaces the named heads' context vectors, at every position, by zero or by their mean over the positions."""
    by_layer = {}
    for l, h in heads:
        by_layer.setdefault(l, []).append(h)

    def edit(hs):
        def f(ctx):
            ctx = ctx.clone()
            for h in hs:
                s = head_slice(m, h)
                ctx[:, s] = 0.0 if how == 'zero' else ctx[:, s].mean(dim=0, keepdim=True)
            return ctx
        return f

    return {('ctx', l): edit(hs) for l, hs in by_layer.items()}


def replace_rows(rows, clean_rows):
    def f(x):
        x = x.clone()
        x[rows] = clean_rows
        return x
    return f


def replace_cols(cols, clean_cols):
    def f(x):
        x = x.clone()
        x[:, cols] = clean_cols
        return x
    return f


def patch_ids_for(m, ids, p, t, v, m_clean):
    """The corrupted text: positions 1, p / 2 and p - 1 changed, each id shifted by V / 3 + s + 5k (k-th position)
    with the first s = 0, 1, ... that moves the metric by at least 0.5, so that the patching ratios are well scaled."""
    V = m.vocab
    for s in range(16):
        out = list(ids)
        for k, i in enumerate(sorted({1, p // 2, p - 1})):
            out[i] = (ids[i] + V // 3 + s + 5 * k) % V
        corrupted = run(m, out)[0]
        if abs(m_clean - metric(corrupted, p, t, v)) >= 0.5:
            return out, corrupted
    sys.exit('no shift up to 15 moves the metric by 0.5: change patch_ids_for')


# ==================================================================================================================
# The cases
# ==================================================================================================================

def flat(t):
    return [float('%.9g' % x) for x in t.detach().reshape(-1).tolist()]


def g9(x):
    return float('%.9g' % x) + 0.0  # + 0.0: a ratio whose numerator is -0.0 is written as 0.0


def rounded(attr):
    c = attr['components']
    return {'value': g9(attr['value']),
            'components': {'embeddings': g9(c['embeddings']), 'heads': [[g9(x) for x in r] for r in c['heads']],
                           'attention_bias': [g9(x) for x in c['attention_bias']], 'mlp': [g9(x) for x in c['mlp']],
                           'final_bias': g9(c['final_bias'])}}


def make_case(name, folder, n_tokens, position, with_versus, worst):
    if name == 'gpt2':
        m, cfg, w = gpt2_model()
        worst['model_vs_reference'] = max(worst['model_vs_reference'], check_gpt2(m, cfg, w))
        ids = read_json(GPT2_CASE)['ids'][:n_tokens]
    else:
        m = arch_model(name)
        worst['model_vs_reference'] = max(worst['model_vs_reference'], check_arch(name, m))
        ids = read_json(os.path.join(FIXTURES, folder, 'expected.json'))['ids'][:n_tokens]
    L, H, T, V = m.n_layers, m.n_heads, len(ids), m.vocab
    assert T == n_tokens and 8 <= T <= 14 and V <= 512
    p = T - 1 if position is None else position

    logits, acts = run(m, ids)
    top = torch.argsort(logits[p], descending=True).tolist()
    t, v = top[0], (top[1] if with_versus else None)
    assert float(logits[p, top[0]]) > float(logits[p, top[1]])  # a unique argmax

    lens = torch.stack([m.final(acts['resid', l]) for l in range(L + 1)])
    worst['lens_last_point'] = max(worst['lens_last_point'], rel_err(lens[L], logits))
    assert worst['lens_last_point'] < 1e-5

    ablate = [[0, 1], [L - 1, 2]]
    ablated = {}
    for how in ('zero', 'mean'):
        a_logits, a_acts = run(m, ids, ablation_edits(m, ablate, how))
        ablated[how] = {'logits': flat(a_logits), 'attribution': rounded(attribution(m, a_logits, a_acts, p, t, v,
                                                                                       worst))}
        if how == 'zero':
            # Zero ablation is the model with the heads' slices of W_O zeroed (a fresh copy of its weights).
            zm = gpt2_model()[0] if name == 'gpt2' else arch_model(name)
            for l, h in ablate:
                zm.W_O(l)[:, head_slice(zm, h)] = 0.0
            e = rel_err(run(zm, ids)[0], a_logits)
            worst['zero_ablation_vs_W_O'] = max(worst['zero_ablation_vs_W_O'], e)
            assert e < 1e-5, e

    m_clean = metric(logits, p, t, v)
    patch_ids, corr_logits = patch_ids_for(m, ids, p, t, v, m_clean)
    assert patch_ids[T - 1] == ids[T - 1] and sum(a != b for a, b in zip(ids, patch_ids)) in (2, 3)
    m_corr = metric(corr_logits, p, t, v)
    assert abs(m_clean - m_corr) > 0.1

    def patched(edits):
        return (metric(run(m, patch_ids, edits)[0], p, t, v) - m_corr) / (m_clean - m_corr)

    residual = [[patched({('resid', l): replace_rows([i], acts['resid', l][[i]])}) for i in range(T)]
                for l in range(L)]
    heads = [[patched({('ctx', l): replace_cols(head_slice(m, h), acts['ctx', l][:, head_slice(m, h)])})
              for h in range(H)] for l in range(L)]
    e = abs(patched({('resid', 0): replace_rows(list(range(T)), acts['resid', 0])}) - 1)
    worst['patch_all_embeddings'] = max(worst['patch_all_embeddings'], e)
    assert e < 1e-5, e

    case = {'case': name, 'model': folder, 'n_layers': L, 'n_heads': H, 'vocab_size': V,
            'ids': ids, 'position': p, 'target': t, 'versus': v,
            'logits': flat(logits), 'lens_logits': flat(lens),
            'attribution': rounded(attribution(m, logits, acts, p, t, v, worst)),
            'ablate': ablate, 'ablated': ablated, 'patch_ids': patch_ids,
            'patching': {'metric': 'logit' if v is None else 'logit_difference', 'clean': g9(m_clean),
                         'corrupted': g9(m_corr), 'residual': [[g9(x) for x in r] for r in residual],
                         'heads': [[g9(x) for x in r] for r in heads]}}
    print(f'{name}: L {L}, H {H}, T {T}, V {V}, position {p}, target {t}, versus {v}, '
          f'm_clean {m_clean:.4f}, m_corrupted {m_corr:.4f}')
    return case


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default=os.path.join(FIXTURES, 'lens'))
    args = ap.parse_args()
    torch.set_num_threads(1)
    worst = dict.fromkeys(['model_vs_reference', 'lens_last_point', 'attribution_sum', 'heads_sum_to_attention',
                           'zero_ablation_vs_W_O', 'patch_all_embeddings'], 0.0)
    cases = [make_case(*c, worst) for c in CASES]  # every check passes before anything is written
    os.makedirs(args.out, exist_ok=True)
    for case in cases:
        with open(os.path.join(args.out, case['case'] + '.json'), 'w') as f:
            json.dump(case, f, separators=(',', ':'))
            f.write('\n')
    for k, e in worst.items():
        print(f'worst {k}: {e:.3g}')


if __name__ == '__main__':
    main()
