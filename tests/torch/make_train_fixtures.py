#!/usr/bin/python3
"""Writes the training fixtures in tests/fixtures/train/ that the C++ training tests compare attnviz against.

Needs Debian's PyTorch (python3-torch 1.13, no MKL) and python3-regex; the tokenizer is the truncated GPT-2
vocabulary already in tests/fixtures/gpt/vocab/ (512 ids), so nothing else is needed:

    /usr/bin/python3 tests/torch/make_train_fixtures.py [--out DIR]

What it writes (tests/fixtures/train/README.md describes every file and field):
  story.txt       a short text made here from a seeded grammar (about 6,000 characters, a few of them non-ASCII),
                  the corpus of the book-run fixture;
  grads.json      per case: torch.manual_seed(seed); GPTModel(cfg) (the book's chapter-4 class, or its
                  attention-only variant); one forward pass of a batch in train or eval mode; cross_entropy;
                  backward(); the loss and every parameter's gradient, in named_parameters() order; and the
                  same step in float64 (the same weights and dropout masks): loss64 and grads64;
  adamw.json      per case: N optimizer steps (zero_grad, loss, backward, [clip_grad_norm_], AdamW.step) on batches
                  drawn from a separate generator, with the book's warmup + cosine schedule as an option; the loss
                  of every step and every parameter at the end;
  loader.json     the book's create_dataloader_v1 iterated in a scripted order after torch.manual_seed(123): each
                  iteration's batches (window indices), then 4 more torch.rand draws that show where the global
                  generator stands; and torch.randperm(n) for a few n;
  book_run.json   the book's train_model_simple on story.txt at a reduced size, every line it prints;
  book_runs.json  more short book runs, each with its text, its token ids, the training loader's first epoch
                  (drawn right after torch.manual_seed) and every printed line: texts holding "<|endoftext|>"
                  tokenized as the book's GPTDatasetV1 does (tiktoken's allowed_special), one of them split at
                  90% inside the special string, and a run with the "mkl" dropout flavour;
  vocab/          the truncated vocabulary with "<|endoftext|>" added after its last merge (id 512), where
                  GPT-2's holds it (50256 = 256 + 50,000 merges), for the runs above.
The script is deterministic (the same bytes every run). Numbers are written as Python's shortest repr of the
float32 value (exact round trip).
"""
import argparse
import copy
import contextlib
import io
import json
import math
import os
import random
import re
import shutil
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_fixtures import MultiHeadAttention, MklDropout  # noqa: E402
from make_gpt_fixtures import (GPTModel, LayerNorm, TransformerBlock, Encoder, read_merges,  # noqa: E402
                               generate_text_simple)

# ==================================================================================================================
# The attention-only variant: the chapter-4 block without norm2 and the feed-forward network, so a block is
# x = x + drop(att(norm1(x))). Construction draws tok_emb, pos_emb, each block's att, then out_head.
# ==================================================================================================================


class AttentionOnlyBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.att = MultiHeadAttention(d_in=cfg["emb_dim"], d_out=cfg["emb_dim"],
                                      context_length=cfg["context_length"], num_heads=cfg["n_heads"],
                                      dropout=cfg["drop_rate"], qkv_bias=cfg["qkv_bias"])
        self.norm1 = LayerNorm(cfg["emb_dim"])
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

    def forward(self, x):
        shortcut = x
        x = self.drop_shortcut(self.att(self.norm1(x)))
        return x + shortcut


class TrainGPT(GPTModel):
    """GPTModel, or with cfg["attention_only"] its attention-only variant (the same construction order)."""

    def __init__(self, cfg):
        if not cfg.get("attention_only"):
            super().__init__(cfg)
            return
        nn.Module.__init__(self)
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.Sequential(*[AttentionOnlyBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = LayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)


assert TransformerBlock  # the full block is the book's own


def CFG(vocab, ctx, d, heads, layers, p, bias=False, attention_only=False):
    return {"vocab_size": vocab, "context_length": ctx, "emb_dim": d, "n_heads": heads, "n_layers": layers,
            "drop_rate": p, "qkv_bias": bias, "attention_only": attention_only}


def use_mkl_dropout(model):
    """The "mkl" flavour: every nn.Dropout replaced by make_fixtures.py's MklDropout (nn.Dropout draws nothing
    when built, so swapping after construction changes no parameter)."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Dropout):
                setattr(module, name, MklDropout(child.p))
    return model


def floats(t):
    return [float(x) for x in t.detach().float().contiguous().view(-1).tolist()]


def calc_loss_batch(input_batch, target_batch, model):
    logits = model(input_batch)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), target_batch.flatten())

# ==================================================================================================================
# grads.json
# ==================================================================================================================


GRAD_CASES = [  # (cfg, seed, train, batch, tokens)
    (CFG(37, 8, 12, 3, 2, 0.1), 123, True, 2, 8),
    (CFG(37, 8, 12, 3, 2, 0.1, bias=True), 7, False, 2, 5),
    (CFG(37, 8, 12, 3, 2, 0.1, bias=True), 7, True, 2, 5),
    (CFG(29, 6, 8, 2, 2, 0.2, attention_only=True), 42, True, 3, 6),
    (CFG(29, 6, 8, 2, 1, 0.0, attention_only=True), 3, True, 1, 6),
    (CFG(41, 10, 16, 4, 1, 0.5), 0, True, 2, 10),
    # the models of cases 0, 3 and 5 with the mkl flavour of dropout
    (CFG(37, 8, 12, 3, 2, 0.1), 123, True, 2, 8, "mkl"),
    (CFG(29, 6, 8, 2, 2, 0.2, attention_only=True), 42, True, 3, 6, "mkl"),
    (CFG(41, 10, 16, 4, 1, 0.5), 0, True, 2, 10, "mkl"),
]


def grad_case(index, cfg, seed, train, batch, tokens, dropout_rng="cpu"):
    gen = torch.Generator().manual_seed(1000 + index)
    ids = torch.randint(0, cfg["vocab_size"], (batch, tokens + 1), generator=gen)
    torch.manual_seed(seed)
    model = TrainGPT(cfg)
    if dropout_rng == "mkl":
        use_mkl_dropout(model)
    if not train:
        model.eval()
    exact = copy.deepcopy(model).double()
    state = torch.get_rng_state()
    loss = calc_loss_batch(ids[:, :-1], ids[:, 1:], model)
    loss.backward()
    # The same step in float64 from the same weights and generator state (the same dropout masks: the draws do
    # not depend on the dtype): PyTorch's gradient without float32's rounding, which for a sum that cancels
    # (case 2's query bias) is itself several 1e-6 off.
    torch.set_rng_state(state)
    loss64 = calc_loss_batch(ids[:, :-1], ids[:, 1:], exact)
    loss64.backward()
    assert abs(float(loss64) - float(loss)) <= 1e-5 * abs(float(loss64)), "float64 drew other masks"
    return {"config": cfg, "seed": seed, "train": train, "dropout_rng": dropout_rng, "inputs": ids[:, :-1].tolist(),
            "targets": ids[:, 1:].tolist(), "loss": float(loss), "loss64": float(loss64),
            "grads": [{"name": n, "shape": list(p.shape), "values": floats(p.grad)}
                      for n, p in model.named_parameters()],
            "grads64": [{"name": n, "shape": list(p.shape), "values": [float(x) for x in p.grad.view(-1).tolist()]}
                        for n, p in exact.named_parameters()]}

# ==================================================================================================================
# adamw.json
# ==================================================================================================================


ADAMW_CASES = [  # (cfg, seed, steps, batch, tokens, lr, weight_decay, schedule)
    (CFG(37, 8, 12, 3, 2, 0.1), 123, 20, 2, 8, 4e-3, 0.1, None),
    (CFG(29, 6, 8, 2, 2, 0.0, bias=True, attention_only=True), 5, 20, 2, 6, 1e-2, 0.0, None),
    (CFG(37, 8, 12, 3, 1, 0.1), 9, 20, 2, 8, 5e-3, 0.1,
     {"warmup_steps": 4, "initial_lr": 1e-4, "min_lr": 1e-4, "max_norm": 1.0}),
]


def schedule_lr(s, step, total, peak):
    """The book's appendix D: linear warmup from initial_lr, then cosine decay to min_lr."""
    if step < s["warmup_steps"]:
        return s["initial_lr"] + step * (peak - s["initial_lr"]) / s["warmup_steps"]
    progress = (step - s["warmup_steps"]) / (total - s["warmup_steps"])
    return s["min_lr"] + (peak - s["min_lr"]) * 0.5 * (1 + math.cos(math.pi * progress))


def adamw_case(index, cfg, seed, steps, batch, tokens, lr, wd, schedule):
    gen = torch.Generator().manual_seed(2000 + index)
    data = torch.randint(0, cfg["vocab_size"], (steps, batch, tokens + 1), generator=gen)
    torch.manual_seed(seed)
    model = TrainGPT(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)
    losses, lrs = [], []
    for step in range(steps):
        optimizer.zero_grad()
        if schedule:
            now = schedule_lr(schedule, step, steps, lr)
            for group in optimizer.param_groups:
                group["lr"] = now
            lrs.append(now)
        loss = calc_loss_batch(data[step, :, :-1], data[step, :, 1:], model)
        loss.backward()
        if schedule and step > schedule["warmup_steps"]:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=schedule["max_norm"])
        optimizer.step()
        losses.append(float(loss))
    return {"config": cfg, "seed": seed, "lr": lr, "weight_decay": wd, "schedule": schedule,
            "batches": data.tolist(), "losses": losses, "lrs": lrs,
            "params": [{"name": n, "values": floats(p)} for n, p in model.named_parameters()]}

# ==================================================================================================================
# The book's data pipeline (chapter 2's GPTDatasetV1 and create_dataloader_v1, chapter 5's loop), with the
# truncated tokenizer passed in instead of tiktoken's.
# ==================================================================================================================


class GPTDatasetV1(Dataset):
    def __init__(self, txt, tokenizer, max_length, stride):
        self.input_ids = []
        self.target_ids = []
        token_ids = tokenizer.encode(txt, allowed_special={"<|endoftext|>"})
        for i in range(0, len(token_ids) - max_length, stride):
            input_chunk = token_ids[i:i + max_length]
            target_chunk = token_ids[i + 1: i + max_length + 1]
            self.input_ids.append(torch.tensor(input_chunk))
            self.target_ids.append(torch.tensor(target_chunk))

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, idx):
        return self.input_ids[idx], self.target_ids[idx]


def create_dataloader_v1(txt, tokenizer, batch_size, max_length, stride, shuffle, drop_last):
    dataset = GPTDatasetV1(txt, tokenizer, max_length, stride)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, num_workers=0)


class IndexSet(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def loader_fixture():
    """A shuffled loader (drop_last) and a plain one (no drop_last) over window indices, iterated in the order the
    book's loop does (a whole epoch, an evaluation that stops after some batches, the plain loader whole), with a
    dropout-sized draw between iterations."""
    train = DataLoader(IndexSet(9), batch_size=2, shuffle=True, drop_last=True, num_workers=0)
    val = DataLoader(IndexSet(3), batch_size=2, shuffle=False, drop_last=False, num_workers=0)
    script = [("train", None), ("train", 2), ("val", None), ("rand", 5), ("train", None), ("val", 1),
              ("train", 1), ("rand", 3), ("train", None)]
    torch.manual_seed(123)
    events = []
    for what, n in script:
        if what == "rand":
            events.append({"rand": n, "values": floats(torch.rand(n))})
            continue
        loader = train if what == "train" else val
        batches = []
        for i, b in enumerate(loader):
            if n is not None and i >= n:
                break
            batches.append(b.tolist())
        events.append({"loader": what, "stop_after": n, "batches": batches})
    state = bytes(torch.get_rng_state().tolist()).hex()  # where the script leaves the generator
    tail = floats(torch.rand(4))
    torch.manual_seed(2**40 + 5)
    torch.randn(3)  # under 16 values: Box-Muller in double, one normal cached
    cached_state = bytes(torch.get_rng_state().tolist()).hex()
    cached_next = floats(torch.randn(3))
    perms = []
    for n, seed in [(1, 5), (2, 5), (9, 3624216819017203053), (100, 77), (1000, 2**40 + 9)]:
        g = torch.Generator().manual_seed(seed)
        perms.append({"n": n, "seed": seed, "perm": torch.randperm(n, generator=g).tolist()})
    return {"train": {"windows": 9, "batch_size": 2, "shuffle": True, "drop_last": True},
            "val": {"windows": 3, "batch_size": 2, "shuffle": False, "drop_last": False},
            "seed": 123, "events": events, "state": state, "tail_rand": tail, "randperm": perms,
            "cached_normal": {"state": cached_state, "randn": cached_next}}

# ==================================================================================================================
# book_run.json: chapter 5's train_model_simple, as printed in the book, at a reduced size.
# ==================================================================================================================


def calc_loss_loader(data_loader, model, num_batches=None):
    total_loss = 0.
    if len(data_loader) == 0:
        return float("nan")
    elif num_batches is None:
        num_batches = len(data_loader)
    else:
        num_batches = min(num_batches, len(data_loader))
    for i, (input_batch, target_batch) in enumerate(data_loader):
        if i < num_batches:
            loss = calc_loss_batch(input_batch, target_batch, model)
            total_loss += loss.item()
        else:
            break
    return total_loss / num_batches


def evaluate_model(model, train_loader, val_loader, eval_iter):
    model.eval()
    with torch.no_grad():
        train_loss = calc_loss_loader(train_loader, model, num_batches=eval_iter)
        val_loss = calc_loss_loader(val_loader, model, num_batches=eval_iter)
    model.train()
    return train_loss, val_loss


def generate_and_print_sample(model, tokenizer, start_context):
    model.eval()
    context_size = model.pos_emb.weight.shape[0]
    encoded = torch.tensor(tokenizer.encode(start_context, allowed_special={"<|endoftext|>"})).unsqueeze(0)
    with torch.no_grad():
        token_ids = generate_text_simple(model=model, idx=encoded, max_new_tokens=50, context_size=context_size)
    decoded_text = tokenizer.decode(token_ids.squeeze(0).tolist())
    print(decoded_text.replace("\n", " "))
    model.train()


def train_model_simple(model, train_loader, val_loader, optimizer, num_epochs, eval_freq, eval_iter,
                       start_context, tokenizer):
    train_losses, val_losses, track_tokens_seen = [], [], []
    tokens_seen, global_step = 0, -1
    for epoch in range(num_epochs):
        model.train()
        for input_batch, target_batch in train_loader:
            optimizer.zero_grad()
            loss = calc_loss_batch(input_batch, target_batch, model)
            loss.backward()
            optimizer.step()
            tokens_seen += input_batch.numel()
            global_step += 1
            if global_step % eval_freq == 0:
                train_loss, val_loss = evaluate_model(model, train_loader, val_loader, eval_iter)
                train_losses.append(train_loss)
                val_losses.append(val_loss)
                track_tokens_seen.append(tokens_seen)
                print(f"Ep {epoch+1} (Step {global_step:06d}): "
                      f"Train loss {train_loss:.3f}, Val loss {val_loss:.3f}")
        generate_and_print_sample(model, tokenizer, start_context)
    return train_losses, val_losses, track_tokens_seen


WORDS = {
    "name": ["Gisburn", "Mrs. Thwing", "the painter", "Stroud", "my friend", "the widow", "Rickham"],
    "verb": ["painted", "watched", "admired", "forgot", "remembered", "sold", "kept", "hid"],
    "thing": ["the portrait", "a sketch of the sea", "his last picture", "the donkey", "a small canvas",
              "the studio", "the Riviera villa", "her café table"],
    "how": ["slowly", "with a smile", "without a word", "in the morning light", "as if by chance", "again"],
    "said": ["said", "whispered", "laughed", "answered", "observed"],
}


def make_story():
    """About 6,000 characters of seeded, grammatical English: sentences that repeat with variations, a few
    non-ASCII characters (so a split at 90% of the characters differs from one at 90% of the bytes), and
    paragraph breaks."""
    rng = random.Random(20261126)
    w = lambda k: rng.choice(WORDS[k])  # noqa: E731
    paras = []
    while sum(len(p) + 2 for p in paras) < 6000:
        sents = []
        for _ in range(rng.randint(3, 6)):
            form = rng.randint(0, 3)
            if form == 0:
                sents.append(f"{w('name').capitalize()} {w('verb')} {w('thing')} {w('how')}.")
            elif form == 1:
                sents.append(f"\"I {w('verb')} {w('thing')},\" {w('name')} {w('said')}.")
            elif form == 2:
                sents.append(f"It was {w('thing')} that {w('name')} {w('verb')}, {w('how')}.")
            else:
                sents.append(f"Every effort moves you {w('how')}, and {w('name')} {w('verb')} {w('thing')}.")
        paras.append(" ".join(sents))
    return "\n\n".join(paras) + "\n"


BOOK_RUN = {  # the book's run, reduced: the settings attnviz-cli train gets in the test
    "config": CFG(512, 32, 32, 4, 2, 0.1),
    "seed": 123, "batch_size": 2, "epochs": 4, "lr": 2e-3, "weight_decay": 0.1, "eval_freq": 5, "eval_iter": 5,
    "start_context": "Every effort moves you", "train_ratio": 0.90,
}


def book_run(text, tokenizer):
    r = BOOK_RUN
    cfg = dict(r["config"])
    split_idx = int(r["train_ratio"] * len(text))
    train_data, val_data = text[:split_idx], text[split_idx:]
    torch.manual_seed(r["seed"])
    train_loader = create_dataloader_v1(train_data, tokenizer, r["batch_size"], cfg["context_length"],
                                        cfg["context_length"], shuffle=True, drop_last=True)
    val_loader = create_dataloader_v1(val_data, tokenizer, r["batch_size"], cfg["context_length"],
                                      cfg["context_length"], shuffle=False, drop_last=False)
    torch.manual_seed(r["seed"])
    model = TrainGPT(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=r["lr"], weight_decay=r["weight_decay"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        train_model_simple(model, train_loader, val_loader, optimizer, r["epochs"], r["eval_freq"], r["eval_iter"],
                           r["start_context"], tokenizer)
    return dict(r, split_chars=split_idx, train_windows=len(train_loader.dataset),
                val_windows=len(val_loader.dataset), lines=out.getvalue().splitlines())


def encode_allowed(self, text, allowed_special=frozenset()):
    """tiktoken's Encoding.encode(text, allowed_special=...): each allowed special string found in the text
    (leftmost first, not overlapping) becomes its id, and the text between is encoded on its own with the
    ordinary regex and merges. A special string the vocabulary lacks stays plain text (the truncated
    vocabularies; tiktoken's GPT-2 always has it)."""
    specials = [t for t in sorted(allowed_special) if t in self.encoder]
    if not specials:
        return self.plain_encode(text)
    pattern = re.compile("|".join(re.escape(t) for t in specials))
    ids, start = [], 0
    for m in pattern.finditer(text):
        ids.extend(self.plain_encode(text[start:m.start()]))
        ids.append(self.encoder[m.group(0)])
        start = m.end()
    ids.extend(self.plain_encode(text[start:]))
    return ids


SHORT_RUNS = [  # (name, vocabulary, dropout flavour, seed)
    ("endoftext", "train/vocab", "cpu", 7),
    ("endoftext_split", "train/vocab", "cpu", 11),
    ("mkl", "gpt/vocab", "mkl", 123),
]


def short_text(story, name):
    """The run's text: the story's paragraphs as documents joined by "<|endoftext|>" (as the book's larger
    corpora are), or for "endoftext_split" a text whose 90% split falls 5 characters into one; "mkl" the
    story's first half."""
    paras = story.split("\n\n")
    if name == "mkl":
        return story[:len(story) // 2]
    if name == "endoftext":
        return "<|endoftext|>".join(paras[:10]) + "<|endoftext|>"
    head = "<|endoftext|>".join(paras[:8]) + " "
    tail = " " + story
    for n in range(len(tail)):
        text = head + "<|endoftext|>" + tail[:n]
        if int(0.9 * len(text)) == len(head) + 5:
            return text
    raise AssertionError("no split inside <|endoftext|>")


def short_run(story, tok_plain, tok_eot, name, vocab, dropout_rng, seed):
    tokenizer = tok_eot if vocab == "train/vocab" else tok_plain
    cfg = CFG(len(tokenizer.encoder), 16, 16, 2, 2, 0.1)
    r = {"name": name, "vocab": vocab, "dropout_rng": dropout_rng, "config": cfg, "seed": seed,
         "batch_size": 2, "epochs": 3, "lr": 4e-3, "weight_decay": 0.1, "eval_freq": 4, "eval_iter": 3,
         "start_context": "Every effort moves you<|endoftext|>The", "train_ratio": 0.90}
    text = short_text(story, name)
    split_idx = int(r["train_ratio"] * len(text))
    train_data, val_data = text[:split_idx], text[split_idx:]
    ctx = cfg["context_length"]
    train_loader = create_dataloader_v1(train_data, tokenizer, r["batch_size"], ctx, ctx, shuffle=True,
                                        drop_last=True)
    val_loader = create_dataloader_v1(val_data, tokenizer, r["batch_size"], ctx, ctx, shuffle=False,
                                      drop_last=False)
    torch.manual_seed(seed)  # the loader's first epoch, drawn from a fresh generator
    first_epoch = [x.tolist() for x, _ in train_loader]
    torch.manual_seed(seed)
    model = TrainGPT(cfg)
    if dropout_rng == "mkl":
        use_mkl_dropout(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=r["lr"], weight_decay=r["weight_decay"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        train_model_simple(model, train_loader, val_loader, optimizer, r["epochs"], r["eval_freq"], r["eval_iter"],
                           r["start_context"], tokenizer)
    return dict(r, text=text, split_chars=split_idx, train_ids=tokenizer.encode(train_data, allowed_special={"<|endoftext|>"}),
                val_ids=tokenizer.encode(val_data, allowed_special={"<|endoftext|>"}),
                start_ids=tokenizer.encode(r["start_context"], allowed_special={"<|endoftext|>"}),
                first_epoch=first_epoch, lines=out.getvalue().splitlines())


def decode(self, ids):
    text = "".join(self.decoder[i] for i in ids)
    return bytearray([self.byte_decoder[c] for c in text]).decode("utf-8", errors="replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', default=os.path.join(HERE, '..', 'fixtures', 'train'))
    args = ap.parse_args()
    torch.set_num_threads(1)
    vocab = os.path.join(HERE, '..', 'fixtures', 'gpt', 'vocab')
    with open(os.path.join(vocab, 'encoder.json'), encoding='utf-8') as f:
        encoder = json.load(f)
    with open(os.path.join(vocab, 'vocab.bpe'), encoding='utf-8') as f:
        tok = Encoder(encoder, read_merges(f.read()))
    tok.byte_decoder = {v: k for k, v in __import__('make_gpt_fixtures').bytes_to_unicode().items()}
    Encoder.decode = decode
    Encoder.plain_encode = Encoder.encode
    Encoder.encode = encode_allowed

    story = make_story()
    files = {"story.txt": story.encode("utf-8")}
    files["grads.json"] = json.dumps([grad_case(i, *c) for i, c in enumerate(GRAD_CASES)]).encode()
    files["adamw.json"] = json.dumps([adamw_case(i, *c) for i, c in enumerate(ADAMW_CASES)]).encode()
    files["loader.json"] = json.dumps(loader_fixture()).encode()
    files["book_run.json"] = json.dumps(book_run(story, tok), indent=1, ensure_ascii=False).encode("utf-8")
    # the truncated vocabulary with "<|endoftext|>" after its last merge, as GPT-2's holds it
    eot_encoder = dict(encoder, **{"<|endoftext|>": len(encoder)})
    tok_eot = Encoder(eot_encoder, tok.bpe_ranks.keys())
    tok_eot.byte_decoder = tok.byte_decoder
    files["vocab/encoder.json"] = json.dumps(eot_encoder, ensure_ascii=False).encode("utf-8")
    with open(os.path.join(vocab, 'vocab.bpe'), 'rb') as f:
        files["vocab/vocab.bpe"] = f.read()
    files["book_runs.json"] = json.dumps([short_run(story, tok, tok_eot, *r) for r in SHORT_RUNS], indent=1,
                                         ensure_ascii=False).encode("utf-8")
    os.makedirs(os.path.join(args.out, "vocab"), exist_ok=True)
    for name, data in sorted(files.items()):
        with open(os.path.join(args.out, name), 'wb') as f:
            f.write(data + (b"\n" if not data.endswith(b"\n") else b""))
        print(f"{len(data):>9}  {name}")


if __name__ == '__main__':
    sys.exit(main())
