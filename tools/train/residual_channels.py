#!/usr/bin/env python3
"""Per-channel magnitudes of a Laya model's residual stream over its questions (tools/train/reference.py).

    nice -n 19 /usr/bin/python3 tools/train/residual_channels.py [tests/models/pico-tasks]

For the token embedding (after its norm) and the residual stream after each encoder layer: the
largest |x| per channel over every token of every question of DIR/questions.jsonl, and the
largest channel's over the median channel's.  A trained encoder with massive channels
(doc/outliers.md) shows a ratio in the tens or more; below about 2 there are none.
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import reference as R  # noqa: E402
from gen_decision_goldens import hf_ids  # noqa: E402


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests/models/pico-tasks")
    torch.set_num_threads(1)
    m = R.load_laya(d)
    with open(os.path.join(d, "questions.jsonl"), encoding="utf-8") as f:
        qs = [json.loads(line) for line in f if line.strip()]
    ids = hf_ids(os.path.join(ROOT, "build/cache/tokenizer-refs/tokenizers"),
                 os.path.join(d, "tokenizer/tokenizer.json"), [R.render(q) for q in qs])
    E, most = m.encoder, {}
    with torch.no_grad():
        for x in ids:
            n = len(x)
            mask = torch.ones(1, n, n, dtype=torch.bool)
            h = R.layer_norm(E.tok_embeddings(torch.tensor([x])), E.emb_norm, None, E.eps)
            stages = [("embedding (after its norm)", h)]
            for i, layer in enumerate(E.layers):
                glob = i % E.every == 0
                near = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs() <= E.window // 2
                h = layer(h, E.theta_global if glob else E.theta_local, mask if glob else mask & near[None])
                stages.append(("residual after layer %d" % i, h))
            for name, v in stages:
                mx = v[0].abs().max(0).values
                most[name] = torch.maximum(most[name], mx) if name in most else mx
    for name, mx in most.items():
        top = [round(float(v), 1) for v in mx.sort(descending=True).values[:5]]
        print("%-28s max %.2f  median %.2f  max/median %.1f  largest five %s"
              % (name, mx.max(), mx.median(), mx.max() / mx.median(), top))


if __name__ == "__main__":
    main()
