#!/usr/bin/python3
"""Exports the seeded gpt2-small (torch.manual_seed(123); GPTModel(GPT_CONFIG_124M), eval) to ONNX for the
onnxruntime-web peer of the page's whole-model benchmark (web/bench/model_peer.mjs).

    /usr/bin/python3 bench/export_gpt2_onnx.py [--out build/bench]    # python3-torch 1.13; no onnx package needed

Writes two files (about 650 MB each; build outputs, never committed):
  gpt2-small.onnx       the book's GPTModel as it is: input `ids` (1, T) int64; outputs `logits` (1, T, V), the
                        logits of every position, then `weights_0` .. `weights_{L-1}`, each layer's attention
                        weights after softmax (1, H, T, T), every head's, as attnviz keeps them;
  gpt2-small-last.onnx  the same, but out_head is applied to the last position only: `logits` is (1, 1, V), which
                        is what attnviz computes unless asked for every position's.
T is a dynamic axis (1 .. context_length). The weights are taken where the book's MultiHeadAttention hands them to
its dropout (an identity in eval mode): a forward hook on that dropout returns them from the exported graph, so
the attention's own forward is the book's, unchanged. GPTModel is the fixture script's copy of the book's class.
"""
import argparse
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'torch'))
import make_gpt_fixtures as fx  # noqa: E402  (the book's GPTModel)


class WithWeights(nn.Module):
    """GPTModel whose forward also returns every layer's attention weights; with last_only, the logits of the
    last position only (out_head sees the final norm's last row)."""

    def __init__(self, model, last_only):
        super().__init__()
        self.model = model
        self.weights = []
        for blk in model.trf_blocks:
            blk.att.dropout.register_forward_hook(lambda module, inputs, output: self.weights.append(output))
        if last_only:
            model.final_norm.register_forward_hook(lambda module, inputs, output: output[:, -1:, :])

    def forward(self, ids):
        self.weights = []
        logits = self.model(ids)
        return (logits, *self.weights)


def export(cfg, last_only, path):
    torch.manual_seed(123)
    model = fx.GPTModel(cfg).eval()
    wrapper = WithWeights(model, last_only).eval()
    ids = torch.tensor([[6109, 3626, 6100, 345, 11, 314, 716, 257]], dtype=torch.int64)  # any T works: dynamic axis
    with torch.no_grad():
        outputs = wrapper(ids)
        assert torch.equal(outputs[0], model(ids)[:, -1:, :] if last_only else model(ids)), 'hooks changed the logits'
    L, H, T = cfg['n_layers'], cfg['n_heads'], ids.shape[1]
    assert len(outputs) == 1 + L and all(w.shape == (1, H, T, T) for w in outputs[1:])
    names = ['logits'] + [f'weights_{i}' for i in range(L)]
    axes = {'ids': {1: 'T'}, 'logits': {} if last_only else {1: 'T'}}
    axes.update({f'weights_{i}': {2: 'T', 3: 'T'} for i in range(L)})
    t0 = time.perf_counter()
    with torch.no_grad():
        torch.onnx.export(wrapper, (ids,), path, input_names=['ids'], output_names=names, dynamic_axes=axes,
                          opset_version=17, do_constant_folding=True)
    print(f'{path}: {os.path.getsize(path) / 1e6:.0f} MB, exported in {time.perf_counter() - t0:.1f} s '
          f'(outputs: logits {"(1, 1, V)" if last_only else "(1, T, V)"}, weights_0..{L - 1} (1, {H}, T, T))')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument('--out', default=os.path.normpath(os.path.join(here, '..', 'build', 'bench')))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    print(f'torch {torch.__version__}')
    export(fx.GPT_CONFIG_124M, False, os.path.join(args.out, 'gpt2-small.onnx'))
    export(fx.GPT_CONFIG_124M, True, os.path.join(args.out, 'gpt2-small-last.onnx'))


if __name__ == '__main__':
    main()
