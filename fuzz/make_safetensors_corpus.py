#!/usr/bin/env python3
"""Writes fuzz/corpus/safetensors/: tiny valid GPT-2 files in both namings and all three dtypes, and a few
broken ones (one rule each), as seeds for fuzz/safetensors.cpp. Run from the repository root."""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors")
PACK = {"F32": ("<f", 4), "F16": ("<e", 2)}


def encode(dtype, values):
    if dtype == "BF16":  # the top half of each float32
        return b"".join(struct.pack("<f", v)[2:] for v in values)
    fmt, _ = PACK[dtype]
    return b"".join(struct.pack(fmt, v) for v in values)


def safetensors(tensors, metadata=None, pad=0):
    """tensors: [(name, dtype, shape)], filled with small exact values."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for k, (name, dtype, shape) in enumerate(tensors):
        n = 1
        for s in shape:
            n *= s
        blob = encode(dtype, [((i * 37 + k * 101) % 255 - 127) / 64 for i in range(n)])
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    h = json.dumps(header, separators=(",", ":")).encode() + b" " * pad
    return struct.pack("<Q", len(h)) + h + data


def hf(dtype, prefix="", d=4, vocab=3, ctx=2, layers=1, lm_head=False):
    t = [(prefix + "wte.weight", dtype, [vocab, d]), (prefix + "wpe.weight", dtype, [ctx, d])]
    for i in range(layers):
        b = f"{prefix}h.{i}."
        t += [(b + "ln_1.weight", dtype, [d]), (b + "ln_1.bias", dtype, [d]),
              (b + "attn.bias", dtype, [1, 1, ctx, ctx]),
              (b + "attn.c_attn.weight", dtype, [d, 3 * d]), (b + "attn.c_attn.bias", dtype, [3 * d]),
              (b + "attn.c_proj.weight", dtype, [d, d]), (b + "attn.c_proj.bias", dtype, [d]),
              (b + "ln_2.weight", dtype, [d]), (b + "ln_2.bias", dtype, [d]),
              (b + "mlp.c_fc.weight", dtype, [d, 4 * d]), (b + "mlp.c_fc.bias", dtype, [4 * d]),
              (b + "mlp.c_proj.weight", dtype, [4 * d, d]), (b + "mlp.c_proj.bias", dtype, [d])]
    t += [(prefix + "ln_f.weight", dtype, [d]), (prefix + "ln_f.bias", dtype, [d])]
    if lm_head:
        t.append(("lm_head.weight", dtype, [vocab, d]))
    return t


def book(dtype, d=4, vocab=3, ctx=2, layers=1, qkv_bias=True):
    t = [("tok_emb.weight", dtype, [vocab, d]), ("pos_emb.weight", dtype, [ctx, d])]
    for i in range(layers):
        b = f"trf_blocks.{i}."
        for m in ("W_query", "W_key", "W_value"):
            t.append((b + f"att.{m}.weight", dtype, [d, d]))
            if qkv_bias:
                t.append((b + f"att.{m}.bias", dtype, [d]))
        t += [(b + "att.out_proj.weight", dtype, [d, d]), (b + "att.out_proj.bias", dtype, [d]),
              (b + "att.mask", dtype, [ctx, ctx]),
              (b + "ff.layers.0.weight", dtype, [4 * d, d]), (b + "ff.layers.0.bias", dtype, [4 * d]),
              (b + "ff.layers.2.weight", dtype, [d, 4 * d]), (b + "ff.layers.2.bias", dtype, [d]),
              (b + "norm1.scale", dtype, [d]), (b + "norm1.shift", dtype, [d]),
              (b + "norm2.scale", dtype, [d]), (b + "norm2.shift", dtype, [d])]
    t += [("final_norm.scale", dtype, [d]), ("final_norm.shift", dtype, [d]), ("out_head.weight", dtype, [vocab, d])]
    return t


def raw(header, data=b""):
    h = header.encode()
    return struct.pack("<Q", len(h)) + h + data


def many_empty(n):
    """n zero-size tensors, all at data offset 0: a valid file that is all header (the parse's cost)."""
    return raw("{" + ",".join(f'"t{i}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}' for i in range(n)) + "}")


def many_tiled(n):
    """n one-element F16 tensors tiling the data section, named like GPT-2 blocks."""
    entries = [f'"h.{i}.ln_1.weight":{{"dtype":"F16","shape":[1],"data_offsets":[{2 * i},{2 * i + 2}]}}'
               for i in range(n)]
    return raw("{" + ",".join(entries) + "}", bytes(2 * n))


FILES = {
    # valid models (the fuzzer passes __metadata__'s "config.json" as config.json)
    "hf_f32": safetensors(hf("F32")),
    "hf_f16_two_layers": safetensors(hf("F16", layers=2), pad=3),
    "hf_bf16_prefix_config": safetensors(hf("BF16", prefix="transformer.", lm_head=True),
                                         {"config.json": '{"n_head": 2, "n_layer": 1}'}),
    "book_f16_bias": safetensors(book("F16")),
    "book_f32_nobias": safetensors(book("F32", qkv_bias=False), pad=1),
    "empty": raw("{}"),
    "metadata_only": raw('{"__metadata__":{"format":"pt"}}'),
    # one broken rule each
    "offsets_mismatch": raw('{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,8]}}', bytes(8)),
    "overlap": raw('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                   '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', bytes(12)),
    "hole": raw('{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},'
                '"b":{"dtype":"F16","shape":[2],"data_offsets":[6,10]}}', bytes(10)),
    "bad_dtype": raw('{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}', bytes(8)),
    "not_json": raw('{"a":{"dtype":"F32",'),
    "header_past_eof": struct.pack("<Q", 64) + b"{}",
    "missing_tensor": safetensors([t for t in hf("F32") if not t[0].endswith("mlp.c_fc.bias")]),
    # big headers, where a parse that is not linear shows (17,000 entries took 4 s before it was)
    "many_empty_tensors": many_empty(17000),  # under libFuzzer's 1 MB default -max_len
    "many_tiled_tensors": many_tiled(5000),
    "many_metadata": raw('{"__metadata__":{' + ",".join(f'"k{i}":"v"' for i in range(10000)) + "}}"),
    "long_shape": raw('{"a":{"dtype":"F32","shape":[' + ",".join(["1"] * 20000) + '],"data_offsets":[0,4]}}',
                      bytes(4)),
    "names_with_structure": raw('{"a{[:,\\"]}\\\\":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', bytes(4)),
}

os.makedirs(OUT, exist_ok=True)
for name, blob in FILES.items():
    with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
        f.write(blob)
print(f"{len(FILES)} files in {OUT}")
