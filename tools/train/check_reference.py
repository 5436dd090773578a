#!/usr/bin/env python3
"""Check the PyTorch reference (tools/train/reference.py) against the executable on random models.

Run from the repository's root after `make all` and `sh tests/fetch-tokenizer-refs.sh`
(Debian 12: /usr/bin/python3 with python3-torch, python3-jinja2 and python3-numpy; node):

    nice -n 19 /usr/bin/python3 tools/train/check_reference.py [--exe build/rontolisp] [--model DIR]

For each preset (s1-pico, s1-nano, s1-micro; or the one Laya directory --model), it writes the
random model with `convert --random NAME --type f32 --write-laya DIR`, loads DIR into the
reference, and compares:
- `embed --pooling none --normalize none` on the questions' token ids and on a long random
  sequence (longer than the local attention window, so the local layers' band matters) with the
  reference encoder: max |dh| < 1e-5;
- `decide --json` on tests/golden/decision/questions.jsonl (and, with --model, on that
  directory's questions.jsonl): ids and markers equal (the reference's ids are Hugging Face
  tokenizers' on the Jinja2 rendering), max |dp| < 1e-5, max |dlogit| < 1e-4.
Prints the worst differences; exit 1 when a bound is broken.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import reference as ref  # noqa: E402
from gen_decision_goldens import hf_ids, run  # noqa: E402


def decide(exe, gguf, questions, tmp):
    path = os.path.join(tmp, "q.jsonl")
    with open(path, "w") as f:
        for q in questions:
            f.write(json.dumps(q) + "\n")
    return [json.loads(line) for line in run([exe, "decide", gguf, path, "--json"]).splitlines()]


def embed(exe, gguf, id_lists, tmp):
    path = os.path.join(tmp, "tokens.txt")
    with open(path, "w") as f:
        for ids in id_lists:
            f.write(",".join(map(str, ids)) + "\n")
    out = run([exe, "embed", gguf, "--tokens-file", path, "--pooling", "none", "--normalize", "none", "--json"])
    return [np.array(json.loads(line)["embeddings"], dtype=np.float64) for line in out.splitlines()]


def reference_answers(model, questions, ids, mask_id):
    """(hidden states per question, logits, probabilities), one question at a time."""
    out = []
    with torch.no_grad():
        for q, x in zip(questions, ids):
            b = ref.make_batch(model, [q], [x], mask_id)
            h = model.encoder(b["ids"], b["lengths"])
            logits = model.head(h, b["lengths"], b["type_idx"], b["markers"], b["marker_valid"])
            out.append((h[0].numpy(), logits[0].numpy(), ref.probabilities(logits, b["temperatures"])[0].numpy()))
    return out


def check(exe, laya, gguf, questions, tokenizers, tmp, seed):
    model = ref.load_laya(laya)
    tok = os.path.join(laya, "tokenizer/tokenizer.json")
    ids = hf_ids(tokenizers, tok, [ref.render(q) for q in questions])
    mask_id = json.load(open(tok))["model"]["vocab"]["[MASK]"]
    mine = reference_answers(model, questions, ids, mask_id)
    theirs = decide(exe, gguf, questions, tmp)
    worst = {"dh": 0.0, "dp": 0.0, "dlogit": 0.0}
    for (h, lo, p), t, x in zip(mine, theirs, ids):
        if t["ids"] != x or t["markers"] != [j for j, v in enumerate(x) if v == mask_id]:
            sys.exit("question %d: ids or markers differ" % t["question"])
        worst["dp"] = max(worst["dp"], float(np.abs(np.array(t["probabilities"]) - p).max()))
        worst["dlogit"] = max(worst["dlogit"], float(np.abs(np.array(t["logits"]) - lo).max()))
    g = torch.Generator().manual_seed(seed)
    vocab = model.enc_config["vocab_size"]
    long_ids = [2] + torch.randint(5, vocab, (300,), generator=g).tolist() + [3]
    seqs = ids + [long_ids]
    for H, x in zip(embed(exe, gguf, seqs, tmp), seqs):
        with torch.no_grad():
            h = model.encoder(torch.tensor([x]), torch.tensor([len(x)]))[0].numpy()
        worst["dh"] = max(worst["dh"], float(np.abs(H - h).max()))
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exe", default=os.path.join(ROOT, "build/rontolisp"))
    ap.add_argument("--model", help="a Laya directory with questions.jsonl (default: the random presets)")
    ap.add_argument("--tokenizers", default=os.path.join(ROOT, "build/cache/tokenizer-refs/tokenizers"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    with open(os.path.join(ROOT, "tests/golden/decision/questions.jsonl")) as f:
        questions = [json.loads(line) for line in f if line.strip()]
    bad = False
    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            gguf = os.path.join(tmp, "model.gguf")
            run([args.exe, "convert", args.model, gguf, "--type", "f32"])
            with open(os.path.join(args.model, "questions.jsonl")) as f:
                qs = [json.loads(line) for line in f if line.strip()]
            for q in qs:
                q.pop("answer", None)
            cases = [(os.path.basename(os.path.normpath(args.model)), args.model, gguf, qs)]
        else:
            cases = []
            for name in ("s1-pico", "s1-nano", "s1-micro"):
                laya, gguf = os.path.join(tmp, name), os.path.join(tmp, name + ".gguf")
                run([args.exe, "convert", "--random", name, gguf, "--type", "f32", "--write-laya", laya])
                cases.append((name, laya, gguf, questions))
        for i, (name, laya, gguf, qs) in enumerate(cases):
            w = check(args.exe, laya, gguf, qs, args.tokenizers, tmp, i + 1)
            ok = w["dh"] < 1e-5 and w["dp"] < 1e-5 and w["dlogit"] < 1e-4
            bad |= not ok
            print("%-10s %3d questions  max|dh| %.2e  max|dlogit| %.2e  max|dp| %.2e  %s"
                  % (name, len(qs), w["dh"], w["dlogit"], w["dp"], "ok" if ok else "BROKEN"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
