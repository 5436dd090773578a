#!/usr/bin/env python3
"""gguf-py's numpy dequantizers as a reference: for each GGUF file given, write OUTDIR/NAME.deq.gguf
holding every tensor of NAME as F32, dequantized by gguf.quants.dequantize (F32 copied, F16
widened), with the same name and shape. tests/lisp/test-quant-goldens.lisp compares gguf:tensor
with them.

    /usr/bin/python3 tests/ref/gguf-dequantize.py OUTDIR FILE.gguf...

gguf-py is the copy in build/cache/gguf-py unless PYTHONPATH is set.
"""
import os
import sys
from pathlib import Path

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "build" / "cache" / "gguf-py"))

import numpy as np
import gguf
from gguf.quants import dequantize


def main(outdir, paths):
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    for p in paths:
        r = gguf.GGUFReader(p)
        w = gguf.GGUFWriter(str(out / (Path(p).name + ".deq.gguf")), "reference")
        for t in r.tensors:
            values = dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
            shape = tuple(int(d) for d in reversed(t.shape))  # row-major, ne[0] last
            w.add_tensor(t.name, np.ascontiguousarray(values).reshape(shape))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: gguf-dequantize.py OUTDIR FILE.gguf...")
    main(sys.argv[1], sys.argv[2:])
