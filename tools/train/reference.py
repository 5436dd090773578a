"""A PyTorch reference of a Laya model: the ModernBERT encoder of doc/encoder.md and the decision
head of doc/decision.md, written from those documents (not from the C or Lisp code).

It reads and writes the Laya layout doc/converter.md describes (model.safetensors, config.json,
encoder/config.json, rl_agent_config.json, tokenizer/tokenizer.json).  Batches are padded: a
question's tokens never see another's, nor the padding, so a batch gives each question what it
would get alone (to float rounding).

Debian 12: /usr/bin/python3 with python3-torch and python3-numpy (apt).
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# ------------------------------------------------------------------------------------------
# safetensors (the format is a little-endian u64 header length, a JSON header, the raw data)
# ------------------------------------------------------------------------------------------

ST_DTYPES = {"F32": np.float32, "F16": np.float16}


def read_safetensors(path):
    """name -> float32 numpy array, in file order."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack_from("<Q", data, 0)[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        a = np.frombuffer(data[8 + n + lo:8 + n + hi], dtype=ST_DTYPES[info["dtype"]])
        out[name] = a.astype(np.float32).reshape(info["shape"])
    return out


def write_safetensors(path, tensors):
    """Write name -> float32 array (in the dict's order) as f32 safetensors, byte for byte the
    same for the same arrays: the header's keys in order, no spaces, padded to 8 bytes."""
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


# ------------------------------------------------------------------------------------------
# the encoder (doc/encoder.md section 1)
# ------------------------------------------------------------------------------------------

def layer_norm(x, weight, bias, eps):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def rope(x, theta):
    """NEOX rotary embedding of x (batch, heads, n, head_dim) at positions 0..n-1: the first and
    second halves of each head are the pairs, pair i turning by position * theta^(-2i/head_dim)."""
    hd = x.shape[-1]
    half = hd // 2
    inv = theta ** (-torch.arange(0, half, dtype=torch.float64) * 2.0 / hd)
    ang = torch.arange(x.shape[-2], dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class EncoderLayer(nn.Module):
    def __init__(self, d, ff, heads, eps, has_attn_norm):
        super().__init__()
        self.heads, self.eps = heads, eps
        self.attn_norm = nn.Parameter(torch.ones(d)) if has_attn_norm else None
        self.Wqkv = nn.Linear(d, 3 * d, bias=False)
        self.Wo = nn.Linear(d, d, bias=False)
        self.mlp_norm = nn.Parameter(torch.ones(d))
        self.Wi = nn.Linear(d, 2 * ff, bias=False)
        self.Wo_mlp = nn.Linear(ff, d, bias=False)

    def forward(self, x, theta, mask):
        bsz, n, d = x.shape
        hd = d // self.heads
        y = x if self.attn_norm is None else layer_norm(x, self.attn_norm, None, self.eps)
        q, k, v = self.Wqkv(y).split(d, dim=-1)
        q, k, v = (t.view(bsz, n, self.heads, hd).transpose(1, 2) for t in (q, k, v))
        q, k = rope(q, theta), rope(k, theta)
        scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
        a = torch.softmax(scores, dim=-1) @ v
        x = x + self.Wo(a.transpose(1, 2).reshape(bsz, n, d))
        u, g = self.Wi(layer_norm(x, self.mlp_norm, None, self.eps)).chunk(2, dim=-1)
        return x + self.Wo_mlp(F.gelu(u) * g)


class Encoder(nn.Module):
    """ModernBERT from encoder/config.json: LayerNorms without bias, layer i global when
    i mod global_attn_every_n_layers = 0 (rope theta global_rope_theta, every token), else
    local (local_rope_theta, tokens with |i - j| <= local_attention / 2)."""

    def __init__(self, c):
        super().__init__()
        d, self.eps = c["hidden_size"], c["norm_eps"]
        self.every, self.window = c["global_attn_every_n_layers"], c["local_attention"]
        self.theta_global, self.theta_local = c["global_rope_theta"], c["local_rope_theta"]
        self.tok_embeddings = nn.Embedding(c["vocab_size"], d)
        self.emb_norm = nn.Parameter(torch.ones(d))
        self.layers = nn.ModuleList(EncoderLayer(d, c["intermediate_size"], c["num_attention_heads"],
                                                 self.eps, i > 0)
                                    for i in range(c["num_hidden_layers"]))
        self.final_norm = nn.Parameter(torch.ones(d))

    def forward(self, ids, lengths):
        """ids (batch, n) padded; lengths (batch,).  The final hidden states (batch, n, d)."""
        n = ids.shape[1]
        pos = torch.arange(n)
        valid = pos[None, :] < lengths[:, None]                       # (batch, n) keys
        near = (pos[:, None] - pos[None, :]).abs() <= self.window // 2  # (n, n)
        x = layer_norm(self.tok_embeddings(ids), self.emb_norm, None, self.eps)
        for i, layer in enumerate(self.layers):
            glob = i % self.every == 0
            mask = valid[:, None, :] if glob else valid[:, None, :] & near[None]
            x = layer(x, self.theta_global if glob else self.theta_local, mask.expand(-1, n, -1))
        return layer_norm(x, self.final_norm, None, self.eps)


# ------------------------------------------------------------------------------------------
# the head (doc/decision.md section 2)
# ------------------------------------------------------------------------------------------

class Head(nn.Module):
    def __init__(self, d, rl, heads, eps_encoder):
        super().__init__()
        self.max_head_tokens = rl["head_max_len"]
        self.types = question_types(rl)
        self.type_embeddings = nn.Embedding(3, d)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d, rl.get("head_heads", heads), dim_feedforward=4 * d, dropout=0.0,
                                       activation=rl.get("head_activation", "relu"),
                                       layer_norm_eps=rl.get("head_norm_eps", 1e-5), batch_first=True,
                                       norm_first=rl.get("head_norm_first", False))
            for _ in range(rl["head_layers"]))
        self.dense = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d, eps=eps_encoder)
        self.out = nn.Linear(d, 1)
        self.temperatures = rl.get("temperatures", {})

    def forward(self, h, lengths, type_idx, markers, marker_valid):
        """h (batch, n, d) the encoder's states; type_idx (batch,); markers (batch, k) positions,
        marker_valid (batch, k).  The logits (batch, k), -inf where no option."""
        m = min(h.shape[1], self.max_head_tokens)
        x = h[:, :m] + self.type_embeddings(type_idx)[:, None, :]
        pad = torch.arange(m)[None, :] >= lengths[:, None]
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=pad if bool(pad.any()) else None)
        rows = torch.gather(x, 1, markers[:, :, None].expand(-1, -1, x.shape[-1]))
        logits = self.out(self.norm(F.gelu(self.dense(rows))))[..., 0]
        return logits.masked_fill(~marker_valid, float("-inf"))

    def temperature(self, qtype, n):
        """doc/decision.md section 2 step 4, on rl_agent_config.json's buckets TYPE:N and TYPE:LO-HI
        (the GGUF keys TYPE.N and TYPE.LO_HI, in the same order)."""
        from gen_decision_goldens import temperature
        keys = {k.replace(":", ".").replace("-", "_"): v for k, v in self.temperatures.items()}
        return temperature({"temperatures": keys}, qtype, n)


def question_types(rl):
    if "question_types" in rl:
        return list(rl["question_types"])
    types = []
    for key in rl.get("temperatures", {}):
        t = key.rpartition(":")[0]
        if t not in types:
            types.append(t)
    return types


class Laya(nn.Module):
    def __init__(self, enc_config, rl):
        super().__init__()
        self.enc_config, self.rl = enc_config, rl
        self.encoder = Encoder(enc_config)
        self.head = Head(enc_config["hidden_size"], rl, enc_config["num_attention_heads"], enc_config["norm_eps"])

    def forward(self, batch):
        h = self.encoder(batch["ids"], batch["lengths"])
        return self.head(h, batch["lengths"], batch["type_idx"], batch["markers"], batch["marker_valid"])

    # the Laya tensor names (what `rontolisp convert` reads) <-> this module's parameters
    def name_map(self):
        pairs = [("encoder.model.embeddings.tok_embeddings.weight", self.encoder.tok_embeddings.weight),
                 ("encoder.model.embeddings.norm.weight", self.encoder.emb_norm)]
        for i, L in enumerate(self.encoder.layers):
            p = "encoder.model.layers.%d." % i
            if L.attn_norm is not None:
                pairs.append((p + "attn_norm.weight", L.attn_norm))
            pairs += [(p + "attn.Wqkv.weight", L.Wqkv.weight), (p + "attn.Wo.weight", L.Wo.weight),
                      (p + "mlp_norm.weight", L.mlp_norm), (p + "mlp.Wi.weight", L.Wi.weight),
                      (p + "mlp.Wo.weight", L.Wo_mlp.weight)]
        pairs.append(("encoder.model.final_norm.weight", self.encoder.final_norm))
        for i, L in enumerate(self.head.layers):
            p = "head.layers.%d." % i
            for n in ("self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                      "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                      "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"):
                pairs.append((p + n, L.get_parameter(n)))
        H = self.head
        pairs += [("head.type_embeddings.weight", H.type_embeddings.weight),
                  ("head.dense.weight", H.dense.weight), ("head.dense.bias", H.dense.bias),
                  ("head.norm.weight", H.norm.weight), ("head.norm.bias", H.norm.bias),
                  ("head.out.weight", H.out.weight), ("head.out.bias", H.out.bias)]
        return pairs

    def load_tensors(self, tensors):
        pairs = self.name_map()
        names = {n for n, _ in pairs}
        if names != set(tensors):
            raise ValueError("tensors: missing %s, unexpected %s" % (sorted(names - set(tensors)),
                                                                     sorted(set(tensors) - names)))
        with torch.no_grad():
            for name, p in pairs:
                if tuple(p.shape) != tuple(tensors[name].shape):
                    raise ValueError("%s: shape %s, expected %s" % (name, tensors[name].shape, tuple(p.shape)))
                p.copy_(torch.from_numpy(np.array(tensors[name], dtype=np.float32)))

    def tensors(self):
        return {n: p.detach().numpy().astype(np.float32) for n, p in self.name_map()}


def load_laya(directory):
    with open(os.path.join(directory, "encoder/config.json")) as f:
        enc = json.load(f)
    with open(os.path.join(directory, "rl_agent_config.json")) as f:
        rl = json.load(f)
    model = Laya(enc, rl)
    model.load_tensors(read_safetensors(os.path.join(directory, "model.safetensors")))
    return model.eval()


# ------------------------------------------------------------------------------------------
# questions to batches
# ------------------------------------------------------------------------------------------

TEMPLATE = ("[CLS]{{ type }} question: {{ instructions }}[SEP]"
            "{% for o in options %}[MASK]{{ o.text if o.text is defined else o }}{% endfor %}"
            "[SEP]{{ state }}[SEP]")


def render(q, template=TEMPLATE):
    """The question's text through the chat template `rontolisp convert` writes (Jinja2)."""
    import jinja2
    return jinja2.Template(template).render(**q)


def make_batch(model, questions, id_lists, mask_id):
    """Pad the questions' token ids into the tensors Laya.forward takes, with each question's
    temperature; markers are the positions of mask_id (doc/decision.md section 1 step 3)."""
    n = max(len(x) for x in id_lists)
    k = max(len(q["options"]) for q in questions)
    ids = torch.zeros(len(questions), n, dtype=torch.long)
    markers = torch.zeros(len(questions), k, dtype=torch.long)
    valid = torch.zeros(len(questions), k, dtype=torch.bool)
    temps = torch.ones(len(questions), dtype=torch.float64)
    m = model.head.max_head_tokens
    for i, (q, x) in enumerate(zip(questions, id_lists)):
        ids[i, :len(x)] = torch.tensor(x)
        mk = [j for j, t in enumerate(x) if t == mask_id]
        if len(mk) != len(q["options"]):
            raise ValueError("question %d: %d markers for %d options" % (i, len(mk), len(q["options"])))
        if mk[-1] >= min(len(x), m):
            raise ValueError("question %d: marker at %d, the head's window is %d" % (i, mk[-1], m))
        markers[i, :len(mk)] = torch.tensor(mk)
        valid[i, :len(mk)] = True
        temps[i] = model.head.temperature(q["type"], len(mk))
    return {"ids": ids, "lengths": torch.tensor([len(x) for x in id_lists]),
            "type_idx": torch.tensor([model.head.types.index(q["type"]) for q in questions]),
            "markers": markers, "marker_valid": valid, "temperatures": temps}


def probabilities(logits, temps):
    """The softmax in float64 of logits / T per question (doc/decision.md section 2 step 4)."""
    return torch.softmax(logits.double() / temps[:, None], dim=-1)
