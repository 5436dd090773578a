#!/usr/bin/env python3
"""Train s1-pico on the questions of tools/train/questions.py and write it as a Laya directory.

Run from the repository's root after `make all` and `sh tests/fetch-tokenizer-refs.sh`
(Debian 12: /usr/bin/python3 with python3-torch, python3-jinja2 and python3-numpy; node):

    nice -n 19 /usr/bin/python3 tools/train/train.py [--out tests/models/pico-tasks]

It remakes the committed tests/models/pico-tasks bit for bit (one thread, fixed seeds,
deterministic algorithms, the same torch build): the checkpoint in the Laya layout `rontolisp
convert` reads (config.json, encoder/config.json, rl_agent_config.json, model.safetensors in
f32, tokenizer/tokenizer.json), questions.jsonl (200 held-out questions, never trained on, in
decide's form plus "answer", the right option's index) and golden.json (the reference's answers
on them: ids, markers, logits, probabilities in float64; see make_goldens.py).

The steps:
1. The shape and the base tokenizer are the executable's `convert --random s1-pico
   --write-laya`; the tokenizer's merges are refitted to the training questions' texts
   (questions.bpe_tokenizer), so a word is mostly one token and the vocabulary stays 1024.
2. The held-out questions come from one seed, 200 validation questions from a second (they
   only decide when training stops: every 250 steps, once they reach --stop-accuracy and
   --stop-p), the training questions from a third, any of them equal to a held-out or
   validation one skipped.  Both are rendered with the template convert writes
   and tokenized with Hugging Face tokenizers.
3. AdamW with a linear warm-up and decay, cross-entropy of the softmax of logits / T (the
   probabilities decide reports) against the answer, plus --aux times an auxiliary loss: each
   marker's final hidden state predicts the token after it (the option's first token) through
   the token embeddings.  Without it training sits on a plateau where every [MASK] row of the
   encoder is nearly the same and every option scores alike (doc/decision.md section 6); with
   it the markers learn to read their options within a hundred steps.  It changes nothing the
   model ships: the head still scores the markers as doc/decision.md says.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import questions as Q  # noqa: E402
import reference as ref  # noqa: E402
import make_goldens  # noqa: E402
from gen_decision_goldens import hf_ids, run  # noqa: E402

RL_CONFIG = {
    "head_layers": 1,
    "max_len": 1024,
    "head_max_len": 96,
    "question_types": Q.TYPES,
    "temperatures": {"pick:2-6": 1.0, "count:2-6": 1.0, "most:2": 0.9, "most:3-6": 1.1},
}


def write_json(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write("\n")


def evaluate(model, batch, answers):
    with torch.no_grad():
        p = ref.probabilities(model(batch), batch["temperatures"])
    win = p.argmax(-1)
    right = (win == answers).double()
    per_type = {t: float(right[batch["type_idx"] == i].mean()) for i, t in enumerate(Q.TYPES)}
    return {"accuracy": float(right.mean()), "per_type": per_type,
            "mean_winning_p": float(p.max(-1).values.mean()),
            "mean_right_p": float(p.gather(1, answers[:, None]).mean())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exe", default=os.path.join(ROOT, "build/rontolisp"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/models/pico-tasks"))
    ap.add_argument("--tokenizers", default=os.path.join(ROOT, "build/cache/tokenizer-refs/tokenizers"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train", type=int, default=20000, help="training questions")
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--stop-accuracy", type=float, default=0.97,
                    help="stop when the validation questions reach this accuracy ...")
    ap.add_argument("--stop-p", type=float, default=0.93, help="... and this mean winning probability")
    ap.add_argument("--aux", type=float, default=1.0, help="the weight of the auxiliary loss")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    t0 = time.time()

    held = Q.generate(1000 + args.seed, 200)
    valid = Q.generate(2000 + args.seed, 200, exclude={Q.key(q) for q in held})
    train = Q.generate(args.seed, args.train, exclude={Q.key(q) for q in held + valid})

    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "base")
        run([args.exe, "convert", "--random", "s1-pico", os.path.join(tmp, "base.gguf"), "--type", "f32",
             "--write-laya", base])
        with open(os.path.join(base, "encoder/config.json")) as f:
            enc = json.load(f)
        with open(os.path.join(base, "tokenizer/tokenizer.json")) as f:
            tok = Q.bpe_tokenizer([ref.render(q) for q in train[:5000]], json.load(f), enc["vocab_size"])
    out = args.out
    if os.path.isdir(out):
        shutil.rmtree(out)
    write_json(os.path.join(out, "config.json"), {"model_type": "laya", "name": "s1-pico-tasks"})
    write_json(os.path.join(out, "encoder/config.json"), enc)
    write_json(os.path.join(out, "rl_agent_config.json"), RL_CONFIG)
    tok_path = os.path.join(out, "tokenizer/tokenizer.json")
    write_json(tok_path, tok)
    mask_id = tok["model"]["vocab"]["[MASK]"]

    ids_train = hf_ids(args.tokenizers, tok_path, [ref.render(q) for q in train])
    ids_valid = hf_ids(args.tokenizers, tok_path, [ref.render(q) for q in valid])
    lengths = [len(x) for x in ids_train]
    print("tokenizer: %d tokens; training questions %d, tokens %d..%d (mean %.1f); %.1f s"
          % (len(tok["model"]["vocab"]), len(train), min(lengths), max(lengths), np.mean(lengths),
             time.time() - t0), flush=True)

    torch.manual_seed(args.seed)
    model = ref.Laya(enc, RL_CONFIG)
    valid_batch = ref.make_batch(model, valid, ids_valid, mask_id)
    valid_answers = torch.tensor([q["answer"] for q in valid])
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / args.warmup) * (1.0 - 0.9 * s / args.steps))
    g = torch.Generator().manual_seed(args.seed)
    order, at = torch.randperm(len(train), generator=g), 0
    t1 = time.time()
    model.train()
    for step in range(args.steps):
        if at + args.batch > len(order):
            order, at = torch.randperm(len(train), generator=g), 0
        idx = order[at:at + args.batch].tolist()
        at += args.batch
        qs = [train[i] for i in idx]
        b = ref.make_batch(model, qs, [ids_train[i] for i in idx], mask_id)
        h = model.encoder(b["ids"], b["lengths"])
        logits = model.head(h, b["lengths"], b["type_idx"], b["markers"], b["marker_valid"])
        loss = F.cross_entropy((logits.double() / b["temperatures"][:, None]),
                               torch.tensor([q["answer"] for q in qs]))
        if args.aux > 0:
            v = b["marker_valid"]
            rows = torch.gather(h, 1, b["markers"][:, :, None].expand(-1, -1, h.shape[-1]))[v]
            following = torch.gather(b["ids"], 1, b["markers"] + 1)[v]
            loss = loss + args.aux * F.cross_entropy(rows @ model.encoder.tok_embeddings.weight.T, following)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if (step + 1) % 250 == 0 or step + 1 == args.steps:
            model.eval()
            e = evaluate(model, valid_batch, valid_answers)
            model.train()
            print("step %5d  loss %.4f  validation accuracy %.3f (%s)  mean winning p %.3f  (%.0f s)"
                  % (step + 1, float(loss), e["accuracy"],
                     " ".join("%s %.2f" % kv for kv in e["per_type"].items()), e["mean_winning_p"],
                     time.time() - t1), flush=True)
            if e["accuracy"] >= args.stop_accuracy and e["mean_winning_p"] >= args.stop_p:
                break
    steps = step + 1
    model.eval()
    train_seconds = time.time() - t1

    ref.write_safetensors(os.path.join(out, "model.safetensors"), model.tensors())
    with open(os.path.join(out, "questions.jsonl"), "w", encoding="utf-8") as f:
        for q in held:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    g = make_goldens.make(out, args.tokenizers)
    print("trained %d steps in %.0f s (one thread); held-out: accuracy %.3f, mean winning p %.4f, "
          "mean p of the answer %.4f" % (steps, train_seconds, g["accuracy"], g["mean_winning_p"],
                                         g["mean_right_p"]))


if __name__ == "__main__":
    main()
