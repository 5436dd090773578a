#!/usr/bin/env python3
"""Make the decision-head goldens (tests/golden/decision/*.json) with PyTorch as the reference.

Run from the repository's root, after `make all` and `sh tests/fetch-tokenizer-refs.sh`
(Debian 12: /usr/bin/python3 with python3-torch, python3-jinja2 and python3-numpy from apt;
node for Hugging Face tokenizers):

    /usr/bin/python3 tools/gen_decision_goldens.py [--exe build/rontolisp] [--out tests/golden/decision]

Its output is committed: tests/golden/decision/VARIANT.json, one file per model variant, which
tests/lisp/test-decision-refs.lisp holds `model:decide` and `model:render` to. Run it again
only when the model files change (the random converter, the edit command) or the questions
(tests/golden/decision/questions.jsonl) do, and commit the result.

What it does, per variant (F32 and F16 files; post-norm and norm-first; relu and gelu):
1. Makes the model file with the project's own executable: `convert --random s1-pico` (with
   `--write-laya`, whose tokenizer/tokenizer.json is the Hugging Face tokenizer of the same
   vocabulary), then `edit --set modern-bert.decision.norm_first=true:bool --set
   modern-bert.decision.activation=gelu:string` for the other variants.  The exact commands
   are the golden's "recipe" (with {dir} for a scratch directory), so the test rebuilds the
   same files; the golden also holds each file's size and Adler-32 checksum.
2. Reads the file's tensors and metadata with the small GGUF reader below (numpy).
3. Renders each question of questions.jsonl with the file's tokenizer.chat_template through
   Jinja2 (jinja2.Template(t).render(type=, instructions=, options=, state=)), tokenizes the
   text with Hugging Face tokenizers (tests/ref/hf-tokenize.js, --no-special: the template
   holds the special tokens) and takes the markers as the positions of
   tokenizer.ggml.mask_token_id.
4. Gets the encoder's final hidden states H of those ids from the executable (`embed FILE
   --tokens-file F --pooling none --normalize none --json`; the encoder is checked against
   llama.cpp by other tests).
5. Runs the head in PyTorch: X = the first min(n, decision.max_head_tokens) rows of H plus row
   t of token_types (t = the type's index in decision.question_types; without that key, the
   types of the decision.temperature.* keys in file order); each head block is an
   nn.TransformerEncoderLayer (eval mode, dropout 0, batch_first, decision.head_count heads,
   decision.activation, decision.norm_first, decision.layer_norm_epsilon, defaults: the
   encoder's head count, relu, post-norm, 1e-5) loaded with the block's attn_qkv (in_proj),
   attn_output (out_proj), ffn_up (linear1), ffn_down (linear2), attn_norm (norm1), ffn_norm
   (norm2); per marker row h the logit cls.output . LayerNorm(gelu(cls.weight h + cls.bias)) +
   cls.output.bias (cls.norm.*, the encoder's epsilon); the probabilities are the softmax, in
   float64, of logits / T (T = decision.temperature.TYPE.N, else TYPE.LO_HI with LO <= N <=
   HI, else 1).  Everything but the softmax is float32, on one thread, through the layer's
   general (Python) path.  Two cross-checks must agree before anything is written: the same
   layer on PyTorch's fused inference path (torch.no_grad), and a float64 numpy transcription
   of the formulas above (max |dp| < 1e-5 and max |dlogit| < 1e-4 for both).
6. Writes the golden: versions (torch, jinja2, numpy, tokenizers), the recipe, the settings
   the head used, and per question the question, the rendered text, ids, markers, logits
   (float32 values) and probabilities (float64).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import jinja2
import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (name, recipe): each recipe step is the executable's arguments, {dir} the scratch directory;
# the last step's output is the variant's model file, the first step's --write-laya its
# tokenizer.json's directory.
HEAD_SET = {
    "post-relu": [],
    "post-gelu": ["--set", "modern-bert.decision.activation=gelu:string"],
    "pre-relu": ["--set", "modern-bert.decision.norm_first=true:bool"],
    "pre-gelu": ["--set", "modern-bert.decision.norm_first=true:bool",
                 "--set", "modern-bert.decision.activation=gelu:string"],
}
VARIANTS = [("f32", "post-relu"), ("f32", "post-gelu"), ("f32", "pre-relu"), ("f32", "pre-gelu"),
            ("f16", "post-relu"), ("f16", "pre-gelu")]


def recipe(ty, head):
    base = "{dir}/%s.gguf" % ty
    steps = [["convert", "--random", "s1-pico", base, "--type", ty, "--head-type", ty,
              "--write-laya", "{dir}/%s-laya" % ty]]
    model = base
    if HEAD_SET[head]:
        model = "{dir}/%s-%s.gguf" % (ty, head)
        steps.append(["edit", base, model] + HEAD_SET[head])
    return {"steps": steps, "model": model,
            "tokenizer_json": "{dir}/%s-laya/tokenizer/tokenizer.json" % ty}


# ------------------------------------------------------------------------------------------
# GGUF v3 reader (F32 and F16 tensors)
# ------------------------------------------------------------------------------------------

GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                10: "<Q", 11: "<q", 12: "<d"}
GGML_TYPES = {0: np.float32, 1: np.float16}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, vtype):
        if vtype in GGUF_SCALARS:
            return self.take(GGUF_SCALARS[vtype])
        if vtype == 8:
            return self.string()
        if vtype == 9:
            etype, n = self.take("<I"), self.take("<Q")
            return [self.value(etype) for _ in range(n)]
        raise ValueError("GGUF value type %d at byte %d" % (vtype, self.pos))


def read_gguf(path):
    """(metadata dict in file order, tensors dict name -> float32 array in row-major order)."""
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    if data[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    r.pos = 4
    version, ntensors, nkv = r.take("<I"), r.take("<Q"), r.take("<Q")
    if version != 3:
        raise ValueError("%s: GGUF version %d, expected 3" % (path, version))
    meta = {}
    for _ in range(nkv):
        key = r.string()
        meta[key] = r.value(r.take("<I"))
    infos = []
    for _ in range(ntensors):
        name = r.string()
        dims = [r.take("<Q") for _ in range(r.take("<I"))]
        infos.append((name, dims, r.take("<I"), r.take("<Q")))
    align = meta.get("general.alignment", 32)
    start = (r.pos + align - 1) // align * align
    tensors = {}
    for name, dims, gtype, offset in infos:
        if gtype not in GGML_TYPES:
            raise ValueError("%s: tensor %s has ggml type %d, not F32 or F16" % (path, name, gtype))
        count = int(np.prod(dims))
        a = np.frombuffer(data, dtype=GGML_TYPES[gtype], count=count, offset=start + offset)
        # ggml dims are innermost first: [ne0, ne1] is a (ne1, ne0) row-major array
        tensors[name] = a.astype(np.float32).reshape(tuple(reversed(dims)))
    return meta, tensors


# ------------------------------------------------------------------------------------------
# the head's settings from the file
# ------------------------------------------------------------------------------------------

def settings(meta):
    k = "modern-bert.decision."
    temps = {key[len(k + "temperature."):]: v for key, v in meta.items()
             if key.startswith(k + "temperature.")}
    if k + "question_types" in meta:
        types, types_from = list(meta[k + "question_types"]), "decision.question_types"
    else:
        types = []
        for key in temps:
            t = key.rsplit(".", 1)[0]
            if t not in types:
                types.append(t)
        types_from = "the decision.temperature.* keys in file order"
    block_count = meta["modern-bert.block_count"]
    head_blocks = meta[k + "block_count"]
    return {
        "question_types": types,
        "question_types_from": types_from,
        "head_count": meta.get(k + "head_count", meta["modern-bert.attention.head_count"]),
        "activation": meta.get(k + "activation", "relu"),
        "norm_first": bool(meta.get(k + "norm_first", False)),
        "layer_norm_epsilon": meta.get(k + "layer_norm_epsilon", 1e-5),
        "encoder_layer_norm_epsilon": meta["modern-bert.attention.layer_norm_epsilon"],
        "max_head_tokens": meta[k + "max_head_tokens"],
        "head_blocks": list(range(block_count - head_blocks, block_count)),
        "temperatures": temps,
        "keys_present": sorted(key[len(k):] for key in meta
                               if key.startswith(k) and not key.startswith(k + "temperature.")),
    }


def temperature(s, qtype, n):
    temps = s["temperatures"]
    if "%s.%d" % (qtype, n) in temps:
        return temps["%s.%d" % (qtype, n)]
    for key, v in temps.items():
        t, _, rng = key.rpartition(".")
        if t == qtype and "_" in rng:
            lo, hi = rng.split("_")
            if int(lo) <= n <= int(hi):
                return v
    return 1.0


# ------------------------------------------------------------------------------------------
# the head
# ------------------------------------------------------------------------------------------

def encoder_layer(t, b, s):
    d = t["blk.%d.attn_qkv.weight" % b].shape[1]
    layer = torch.nn.TransformerEncoderLayer(
        d_model=d, nhead=s["head_count"], dim_feedforward=t["blk.%d.ffn_up.weight" % b].shape[0],
        dropout=0.0, activation=s["activation"], layer_norm_eps=s["layer_norm_epsilon"],
        batch_first=True, norm_first=s["norm_first"])
    pairs = [("self_attn.in_proj_weight", "attn_qkv.weight"), ("self_attn.in_proj_bias", "attn_qkv.bias"),
             ("self_attn.out_proj.weight", "attn_output.weight"),
             ("self_attn.out_proj.bias", "attn_output.bias"),
             ("linear1.weight", "ffn_up.weight"), ("linear1.bias", "ffn_up.bias"),
             ("linear2.weight", "ffn_down.weight"), ("linear2.bias", "ffn_down.bias"),
             ("norm1.weight", "attn_norm.weight"), ("norm1.bias", "attn_norm.bias"),
             ("norm2.weight", "ffn_norm.weight"), ("norm2.bias", "ffn_norm.bias")]
    state = {ours: torch.from_numpy(t["blk.%d.%s" % (b, theirs)].copy()) for ours, theirs in pairs}
    missing, unexpected = layer.load_state_dict(state, strict=True)
    assert not missing and not unexpected
    return layer.eval()


def torch_head(t, s, X, markers, T, fused=False):
    """The logits (float32) and probabilities (float64) of PyTorch's layers on X (m x d)."""
    layers = [encoder_layer(t, b, s) for b in s["head_blocks"]]
    if fused:
        with torch.no_grad():       # PyTorch's fused inference path
            x = torch.from_numpy(X).unsqueeze(0)
            for layer in layers:
                x = layer(x)
    else:                           # grad enabled: the general path, layer by layer in Python
        x = torch.from_numpy(X).unsqueeze(0)
        for layer in layers:
            x = layer(x)
    x = x.detach()[0]
    h = x[torch.tensor(markers)]
    W = lambda name: torch.from_numpy(t[name].copy())
    z = F.gelu(F.linear(h, W("cls.weight"), W("cls.bias")))
    z = F.layer_norm(z, (z.shape[-1],), W("cls.norm.weight"), W("cls.norm.bias"),
                     s["encoder_layer_norm_epsilon"])
    logits = F.linear(z, W("cls.output.weight"), W("cls.output.bias"))[:, 0]
    probs = torch.softmax(logits.double() / float(T), dim=0)
    return logits.numpy(), probs.numpy()


def numpy_head(t, s, X, markers, T):
    """The same in float64 numpy, transcribed from the formulas, no PyTorch: a cross-check of
    how the weights were loaded into PyTorch's layer."""
    from math import erf, sqrt
    gelu = np.vectorize(lambda v: 0.5 * v * (1.0 + erf(v / sqrt(2.0))))
    act = gelu if s["activation"] == "gelu" else (lambda v: np.maximum(v, 0.0))
    g = lambda name: t[name].astype(np.float64)

    def ln(x, w, b, eps):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w + b

    x = X.astype(np.float64)
    m, d = x.shape
    nh = s["head_count"]
    hd = d // nh
    eps = s["layer_norm_epsilon"]
    for b in s["head_blocks"]:
        p = lambda n: g("blk.%d.%s" % (b, n))

        def attn(y):
            qkv = y @ p("attn_qkv.weight").T + p("attn_qkv.bias")
            q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
            out = np.zeros_like(y)
            for i in range(nh):
                sl = slice(i * hd, (i + 1) * hd)
                sc = q[:, sl] @ k[:, sl].T / np.sqrt(hd)
                sc = np.exp(sc - sc.max(-1, keepdims=True))
                out[:, sl] = (sc / sc.sum(-1, keepdims=True)) @ v[:, sl]
            return out @ p("attn_output.weight").T + p("attn_output.bias")

        def ff(y):
            return act(y @ p("ffn_up.weight").T + p("ffn_up.bias")) @ p("ffn_down.weight").T + p("ffn_down.bias")

        n1 = lambda y: ln(y, p("attn_norm.weight"), p("attn_norm.bias"), eps)
        n2 = lambda y: ln(y, p("ffn_norm.weight"), p("ffn_norm.bias"), eps)
        if s["norm_first"]:
            x = x + attn(n1(x))
            x = x + ff(n2(x))
        else:
            x = n1(x + attn(x))
            x = n2(x + ff(x))
    h = x[markers]
    z = gelu(h @ g("cls.weight").T + g("cls.bias"))
    z = ln(z, g("cls.norm.weight"), g("cls.norm.bias"), s["encoder_layer_norm_epsilon"])
    logits = (z @ g("cls.output.weight").T + g("cls.output.bias"))[:, 0]
    e = np.exp(logits / T - (logits / T).max())
    return logits, e / e.sum()


# ------------------------------------------------------------------------------------------
# the steps that need other programs
# ------------------------------------------------------------------------------------------

def run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, timeout=600, **kw)
    if r.returncode != 0:
        sys.exit("%s: exit %d: %s" % (" ".join(argv), r.returncode, r.stderr.decode(errors="replace")))
    return r.stdout.decode("utf-8")


def hf_ids(tokenizers_dir, tokenizer_json, texts):
    out = run(["node", os.path.join(ROOT, "tests/ref/hf-tokenize.js"), tokenizers_dir, tokenizer_json,
               "--no-special"],
              input="".join(json.dumps(x, ensure_ascii=False) + "\n" for x in texts).encode("utf-8"))
    ids = [json.loads(line) for line in out.splitlines()]
    assert len(ids) == len(texts)
    return ids


def hidden_states(exe, model, id_lists, tmp):
    path = os.path.join(tmp, "tokens.txt")
    with open(path, "w") as f:
        for ids in id_lists:
            f.write(",".join(map(str, ids)) + "\n")
    out = run([exe, "embed", model, "--tokens-file", path, "--pooling", "none", "--normalize", "none",
               "--json"])
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == len(id_lists)
    hs = []
    for row, ids in zip(rows, id_lists):
        assert row["tokens"] == ids and row["pooling"] == "none"
        hs.append(np.array(row["embeddings"], dtype=np.float64).astype(np.float32))
    return hs


def tokenizers_version(tokenizers_dir):
    with open(os.path.join(tokenizers_dir, "package.json")) as f:
        p = json.load(f)
    return "%s@%s" % (p.get("name"), p.get("version"))


# ------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exe", default=os.path.join(ROOT, "build/rontolisp"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/golden/decision"))
    ap.add_argument("--questions", default=os.path.join(ROOT, "tests/golden/decision/questions.jsonl"))
    ap.add_argument("--tokenizers", default=os.path.join(ROOT, "build/cache/tokenizer-refs/tokenizers"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    with open(args.questions, encoding="utf-8") as f:
        questions = [json.loads(line) for line in f if line.strip()]
    versions = {"torch": torch.__version__, "jinja2": jinja2.__version__, "numpy": np.__version__,
                "tokenizers": tokenizers_version(args.tokenizers),
                "python": sys.version.split()[0]}
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        done = set()
        for ty, head in VARIANTS:
            name = "%s-%s" % (ty, head)
            rec = recipe(ty, head)
            for step in rec["steps"]:
                argv = [a.replace("{dir}", tmp) for a in step]
                if tuple(argv) not in done:
                    run([args.exe] + argv)
                    done.add(tuple(argv))
            model = rec["model"].replace("{dir}", tmp)
            with open(model, "rb") as f:
                raw = f.read()
            meta, t = read_gguf(model)
            s = settings(meta)
            mask = meta["tokenizer.ggml.mask_token_id"]
            template = meta["tokenizer.chat_template"]
            texts = [jinja2.Template(template).render(**q) for q in questions]
            ids = hf_ids(args.tokenizers, rec["tokenizer_json"].replace("{dir}", tmp), texts)
            hs = hidden_states(args.exe, model, ids, tmp)
            entries = []
            worst = {"torch_fused_dp": 0.0, "torch_fused_dlogit": 0.0,
                     "numpy_f64_dp": 0.0, "numpy_f64_dlogit": 0.0}
            for i, (q, text, qids, H) in enumerate(zip(questions, texts, ids, hs)):
                markers = [j for j, x in enumerate(qids) if x == mask]
                if len(markers) != len(q["options"]):
                    sys.exit("question %d: %d markers for %d options" % (i, len(markers), len(q["options"])))
                m = min(len(qids), s["max_head_tokens"])
                if markers[-1] >= m:
                    sys.exit("question %d: marker %d at or past %d" % (i, markers[-1], m))
                tt = s["question_types"].index(q["type"])
                X = (H[:m] + t["token_types.weight"][tt]).astype(np.float32)
                T = temperature(s, q["type"], len(q["options"]))
                logits, probs = torch_head(t, s, X, markers, T)
                for what, (lo, pr) in (("torch_fused", torch_head(t, s, X, markers, T, fused=True)),
                                       ("numpy_f64", numpy_head(t, s, X, markers, T))):
                    for key, v in (("_dp", np.abs(pr - probs).max()),
                                   ("_dlogit", np.abs(lo - logits.astype(np.float64)).max())):
                        worst[what + key] = max(worst[what + key], float(v))
                entries.append({"question": q, "text": text, "ids": qids, "markers": markers,
                                "type_index": tt, "head_tokens": m, "temperature": float(T),
                                "logits": [float(x) for x in logits],
                                "probabilities": [float(x) for x in probs]})
            for what, v in worst.items():
                if not v < (1e-5 if what.endswith("_dp") else 1e-4):
                    sys.exit("%s: the cross-check %s is %g" % (name, what, v))
            golden = {
                "comment": "Made by tools/gen_decision_goldens.py (see its header); do not edit.",
                "variant": name, "versions": versions,
                "recipe": rec,
                "model_bytes": len(raw), "model_adler32": zlib.adler32(raw),
                "settings": s, "cross_checks": worst}
            # one question a line
            text = json.dumps(golden, ensure_ascii=False, indent=1)
            assert text.endswith("\n}")
            text = (text[:-2] + ',\n "questions": [\n'
                    + ",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in entries)
                    + "\n ]\n}\n")
            assert json.loads(text)["questions"] == entries
            path = os.path.join(args.out, name + ".json")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            print("%s: %d questions, settings %s; cross-checks (max): %s"
                  % (path, len(entries), {k: s[k] for k in ("head_count", "activation", "norm_first",
                                                          "layer_norm_epsilon")},
                     ", ".join("%s %.3g" % kv for kv in worst.items())))


if __name__ == "__main__":
    main()
