#!/usr/bin/python3
"""The tokenizer's second oracle: GPT-2's own encoding algorithm (openai/gpt-2 src/encoder.py) with Python's
`regex` module (Debian's python3-regex), on GPT-2's encoder.json and vocab.bpe.

    /usr/bin/python3 tests/tokenizer/oracle_gpt2.py VOCAB_DIR CORPUS.json OUT.json

Writes {"oracle": "GPT-2 encoder.py", "ids": [[...], ...]}. Unlike npm gpt-3-encoder (JavaScript's \\s), this
treats U+0085 as a space and U+FEFF as not, as GPT-2 does; tests/tokenizer/whitespace.json has such strings.
"""
import json
import sys

import regex

PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def main(vocab_dir, corpus_path, out_path):
    with open(f"{vocab_dir}/encoder.json", encoding="utf-8") as f:
        encoder = json.load(f)
    with open(f"{vocab_dir}/vocab.bpe", encoding="utf-8") as f:
        merges = [tuple(line.split()) for line in f.read().split("\n")[1:-1]]
    ranks = dict(zip(merges, range(len(merges))))
    byte_encoder = bytes_to_unicode()

    def bpe(token):  # encoder.py's Encoder.bpe, without its cache
        word = tuple(token)
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            bigram = min(pairs, key=lambda pair: ranks.get(pair, float("inf")))
            if bigram not in ranks:
                break
            first, second = bigram
            new_word, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and word[i] == first and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
        return word

    with open(corpus_path, encoding="utf-8") as f:
        corpus = json.load(f)
    ids = []
    for text in corpus:
        out = []
        for piece in regex.findall(PATTERN, text):
            out.extend(encoder[t] for t in bpe("".join(byte_encoder[b] for b in piece.encode("utf-8"))))
        ids.append(out)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"oracle": "GPT-2 encoder.py (python3-regex)", "ids": ids}, f)
        f.write("\n")
    print(f"GPT-2 encoder.py: {len(corpus)} strings, {sum(map(len, ids))} tokens -> {out_path}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: oracle_gpt2.py VOCAB_DIR CORPUS.json OUT.json")
    main(*sys.argv[1:])
