#!/usr/bin/python3
"""PyTorch peer for attnviz-lens-bench: activation patching and the logit lens done the usual way, with hooks.

Run with Debian's PyTorch (python3-torch 1.13, no transformers); attnviz-lens-bench --peer runs it after its own
figures. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset (torch_blas.py: OpenBLAS picks its kernels itself):

    /usr/bin/python3 bench/torch_lens_peer.py [--threads N] [--quick]

The model is the book's chapter-4 GPTModel (tests/torch/make_gpt_fixtures.py) at gpt2-small's shape, seeded
(torch.manual_seed(123)), in eval mode under torch.no_grad(), batch 1, float32: the architecture attnviz's seeded
gpt2-small runs. Each figure is the median of 3 runs (1 with --quick). On the same texts as attnviz-lens-bench
(token_ids: a multiplicative hash of the position; the corrupted text changes tokens 4 and 11), with the clean
run's top next token's logit at the last position as the metric, it prints the median milliseconds of:
- the heads' patching map at T = 20: a clean run keeping every layer's context vectors (a forward pre-hook on
  out_proj), a corrupted run, then for each of the 12 x 12 heads a full corrupted forward whose pre-hook puts that
  head's clean context vectors back (TransformerLens's act_patch with hooks: one forward per patched site);
- the residual stream's map at T = 20: the same with a pre-hook on block l replacing position t's residual,
  12 x 20 full forwards;
- the logit lens at T = 64: one forward keeping the residual entering each block and the last block's output
  (13 points), then every point at every position through final_norm and out_head, with the top 5 tokens.
"""
import argparse
import os
import statistics
import sys
import time

import torch_blas  # before torch: runs this script without OpenBLAS's pins
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'torch'))
sys.path.insert(0, HERE)
import make_gpt_fixtures as fx  # noqa: E402  (the book's GPTModel)


def token_ids(T, vocab):
    return [(2654435761 * (i + 1)) % 2**32 % vocab for i in range(T)]


def median_ms(fn, reps):
    """The median of `reps` runs of fn (warmed up by the model's first forward, not by a run of its own: a map
    is hundreds of forwards)."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--quick', action='store_true')
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = fx.GPT_CONFIG_124M
    print(torch_blas.describe(torch))
    torch.manual_seed(123)
    model = fx.GPTModel(cfg).eval()
    blocks = list(model.trf_blocks)
    L, H = len(blocks), cfg['n_heads']
    hd = cfg['emb_dim'] // H
    reps = 1 if args.quick else 3

    T = 20
    clean = torch.tensor([token_ids(T, cfg['vocab_size'])])
    corrupted = clean.clone()
    corrupted[0, 4] = (corrupted[0, 4] + 1) % cfg['vocab_size']
    corrupted[0, 11] = (corrupted[0, 11] + 7) % cfg['vocab_size']

    def metric(ids, hooks):
        handles = [module.register_forward_pre_hook(fn) for module, fn in hooks]
        try:
            return model(ids)[0, -1, target].item()
        finally:
            for h in handles:
                h.remove()

    with torch.no_grad():
        target = int(model(clean)[0, -1].argmax())  # and the warm-up

        def clean_and_corrupted(points):
            """The clean run keeping `points` (module -> its input), and the two metrics."""
            kept = {}
            hooks = [(m, lambda mod, inp, m=m: kept.__setitem__(m, inp[0].clone())) for m in points]
            return kept, metric(clean, hooks), metric(corrupted, [])

        def heads_map():
            outs = [b.att.out_proj for b in blocks]
            kept, m_clean, m_corr = clean_and_corrupted(outs)
            out = torch.empty(L, H)
            for l in range(L):
                for h in range(H):
                    def put_head(mod, inp, l=l, h=h):
                        x = inp[0].clone()
                        x[..., h * hd:(h + 1) * hd] = kept[outs[l]][..., h * hd:(h + 1) * hd]
                        return (x,)
                    out[l, h] = (metric(corrupted, [(outs[l], put_head)]) - m_corr) / (m_clean - m_corr)
            return out

        def residual_map():
            kept, m_clean, m_corr = clean_and_corrupted(blocks)
            out = torch.empty(L, T)
            for l in range(L):
                for t in range(T):
                    def put_row(mod, inp, l=l, t=t):
                        x = inp[0].clone()
                        x[:, t] = kept[blocks[l]][:, t]
                        return (x,)
                    out[l, t] = (metric(corrupted, [(blocks[l], put_row)]) - m_corr) / (m_clean - m_corr)
            return out

        TL = 64
        text = torch.tensor([token_ids(TL, cfg['vocab_size'])])

        def lens():
            kept = []
            handles = [b.register_forward_pre_hook(lambda mod, inp: kept.append(inp[0])) for b in blocks]
            handles.append(blocks[-1].register_forward_hook(lambda mod, inp, out: kept.append(out)))
            try:
                model(text)
            finally:
                for h in handles:
                    h.remove()
            logits = model.out_head(model.final_norm(torch.cat(kept)))  # (L + 1, T, V)
            top = torch.softmax(logits, -1).topk(5, -1)
            assert top.indices.shape == (L + 1, TL, 5)
            return top

        print(f'activation patching at T = {T}, gpt2-small shape, one full forward per patched site, '
              f'median ms:')
        print(f'  the heads\' map, {L} x {H} sites (with the clean and corrupted runs): '
              f'{median_ms(heads_map, reps):.1f}')
        print(f'  the residual stream\'s map, {L} x {T} sites: {median_ms(residual_map, reps):.1f}')
        print(f'  one forward at T = {T}: {median_ms(lambda: model(corrupted), 5):.2f}')
        print(f'the logit lens at T = {TL}, {L + 1} points at every position (a forward with hooks, then '
              f'final_norm, out_head, softmax, top 5): {median_ms(lens, reps):.1f} ms; '
              f'one forward at T = {TL}: {median_ms(lambda: model(text), 5):.1f} ms')


if __name__ == '__main__':
    main()
