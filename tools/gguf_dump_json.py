#!/usr/bin/env python3
"""Write the JSON dump of a GGUF file beside it (FILE.gguf -> FILE.gguf.json), with gguf-py's
GGUFReader: the format of every tests/golden/*.gguf.json (tests/golden/README.md, "JSON dumps").

Run (Debian 12, python3-numpy from apt, gguf-py of the llama.cpp source tests/golden/README.md
names):
    PYTHONPATH=$LLAMA_CPP/gguf-py /usr/bin/python3 tools/gguf_dump_json.py FILE.gguf...

Fields: file, file_size, sha256, version, tensor_count, kv_count, alignment (general.alignment,
else 32), data_offset, kv (every key in file order, with the value; arrays longer than 64 give
their first and last 8 values as head and tail), tensors (name, n_dims as written, ne in ggml
order, type_id, type_name, offset relative to the data section, nbytes, sha256 of the bytes).
"""
import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np
import gguf

ARRAY_FULL = 64   # arrays up to this length are written whole
HEAD_TAIL = 8


def scalar(kind, part):
    """The Python value of one scalar field part (a numpy array) of GGUF value type KIND."""
    if kind == gguf.GGUFValueType.STRING:
        b = bytes(part)
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            return {"hex": b.hex()}
    v = part[0]
    if kind == gguf.GGUFValueType.BOOL:
        return bool(v)
    if kind in (gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.FLOAT64):
        f = float(v)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f
    return int(v)


def kv_entry(field):
    kind = field.types[0]
    e = {"key": field.name, "type": kind.name, "type_id": int(kind)}
    if kind != gguf.GGUFValueType.ARRAY:
        e["value"] = scalar(kind, field.parts[field.data[0]])
        return e
    sub = field.types[1] if len(field.types) > 1 else gguf.GGUFValueType.UINT8
    vals = [scalar(sub, field.parts[i]) for i in field.data]
    e["array_type"] = sub.name
    e["array_type_id"] = int(sub)
    e["length"] = len(vals)
    if len(vals) <= ARRAY_FULL:
        e["values"] = vals
    else:
        e["head"] = vals[:HEAD_TAIL]
        e["tail"] = vals[-HEAD_TAIL:]
    return e


def dump(path):
    path = Path(path)
    raw = path.read_bytes()
    r = gguf.GGUFReader(path)
    fields = [f for f in r.fields.values() if not f.name.startswith("GGUF.")]
    align = r.fields.get("general.alignment")
    out = {
        "file": path.name,
        "file_size": len(raw),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "version": int(r.fields["GGUF.version"].parts[-1][0]),
        "tensor_count": int(r.fields["GGUF.tensor_count"].parts[-1][0]),
        "kv_count": int(r.fields["GGUF.kv_count"].parts[-1][0]),
        "alignment": int(align.parts[align.data[0]][0]) if align else 32,
        "data_offset": int(r.data_offset),
        "kv": [kv_entry(f) for f in fields],
        "tensors": [],
    }
    for t in r.tensors:
        start = int(t.data_offset)
        out["tensors"].append({
            "name": t.name,
            "n_dims": len(t.shape),
            "ne": [int(x) for x in t.shape],
            "type_id": int(t.tensor_type),
            "type_name": t.tensor_type.name,
            "offset": start - int(r.data_offset),
            "nbytes": int(t.n_bytes),
            "sha256": hashlib.sha256(raw[start:start + int(t.n_bytes)]).hexdigest(),
        })
    return out


def main(paths):
    for p in paths:
        text = json.dumps(dump(p), indent=1, ensure_ascii=False) + "\n"
        Path(str(p) + ".json").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: gguf_dump_json.py FILE.gguf...")
    main(sys.argv[1:])
