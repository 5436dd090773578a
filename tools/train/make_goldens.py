#!/usr/bin/env python3
"""The reference's answers on a Laya directory's questions.jsonl, as DIR/golden.json.

    nice -n 19 /usr/bin/python3 tools/train/make_goldens.py tests/models/pico-tasks

Each question is rendered with the template `rontolisp convert` writes (Jinja2), tokenized by
Hugging Face tokenizers (tests/ref/hf-tokenize.js, the special tokens parsed from the text) and
answered alone by tools/train/reference.py in float32 on one thread, the softmax in float64.
golden.json holds the versions, the head's settings and per question: the ids, the markers,
the logits (float32 values), the probabilities (float64), the winning option and the answer.
train.py calls it after training; run it alone when only the questions change.
"""
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import reference as ref  # noqa: E402
from gen_decision_goldens import hf_ids, tokenizers_version  # noqa: E402


def make(directory, tokenizers):
    torch.set_num_threads(1)
    model = ref.load_laya(directory)
    with open(os.path.join(directory, "questions.jsonl"), encoding="utf-8") as f:
        questions = [json.loads(line) for line in f if line.strip()]
    tok_path = os.path.join(directory, "tokenizer/tokenizer.json")
    with open(tok_path, encoding="utf-8") as f:
        mask_id = json.load(f)["model"]["vocab"]["[MASK]"]
    ids = hf_ids(tokenizers, tok_path, [ref.render(q) for q in questions])
    entries, right, win_p, right_p = [], 0, [], []
    with torch.no_grad():
        for i, (q, x) in enumerate(zip(questions, ids)):
            b = ref.make_batch(model, [q], [x], mask_id)
            logits = model(b)
            p = ref.probabilities(logits, b["temperatures"])[0].numpy()
            win = int(np.argmax(p))
            right += win == q["answer"]
            win_p.append(float(p[win]))
            right_p.append(float(p[q["answer"]]))
            entries.append({"question": i + 1, "ids": x, "markers": b["markers"][0].tolist(),
                            "logits": [float(v) for v in logits[0].numpy()],
                            "probabilities": [float(v) for v in p], "winner": win, "answer": q["answer"]})
    import jinja2
    golden = {
        "what": "tools/train/reference.py's answers on questions.jsonl (float32, one thread; "
                "probabilities: the softmax of logits / T in float64)",
        "versions": {"torch": torch.__version__, "jinja2": jinja2.__version__, "numpy": np.__version__,
                     "tokenizers": tokenizers_version(tokenizers)},
        "question_types": model.head.types,
        "temperatures": model.head.temperatures,
        "accuracy": right / len(questions),
        "mean_winning_p": float(np.mean(win_p)),
        "mean_right_p": float(np.mean(right_p)),
        "questions": entries,
    }
    head = json.dumps({k: v for k, v in golden.items() if k != "questions"}, indent=1)
    with open(os.path.join(directory, "golden.json"), "w", encoding="utf-8") as f:
        f.write(head[:-2] + ',\n "questions": [\n')
        f.write(",\n".join("  " + json.dumps(e) for e in entries))
        f.write("\n ]\n}\n")
    return golden


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_goldens.py LAYA_DIR")
    g = make(sys.argv[1], os.path.join(ROOT, "build/cache/tokenizer-refs/tokenizers"))
    print("accuracy %.3f, mean winning p %.4f" % (g["accuracy"], g["mean_winning_p"]))
