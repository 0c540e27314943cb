#!/usr/bin/env python3
"""bert_peers.py: the peer side of bench/bert_infer.sh (issue 26 section 4).

    bert_peers.py make  DIR                      # config.json, model.safetensors, model.onnx, ref.safetensors
    bert_peers.py run   DIR --threads T --cases 1x128,32x128 [--secs 1.0]
    bert_peers.py table LOG [LOG ...]            # the summary table of a bench/bert_infer.sh run

The model is BertModel without the pooler, written in plain torch with Hugging Face's parameter
names, so that it is the model of examples/bert.h: embeddings (word + position + token type 0,
LayerNorm), then per layer self-attention with the additive mask (1 - mask) * -10000, dense +
residual + LayerNorm, exact-erf GELU FFN, dense + residual + LayerNorm. Inputs: input_ids int64
[B, S], attention_mask float32 [B, S] (1 = token, 0 = padding); output: last hidden state
[B, S, H].

`run` prints one line per measured case, the format bench_bert prints too:
    result impl=<name> batch=<B> seq=<S> threads=<T> ms=<median ms> runs=<n>
"""
import argparse
import warnings
import json
import math
import os
import statistics
import sys
import time

CONFIG = dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=6,
              intermediate_size=1536, max_position_embeddings=512, type_vocab_size=2,
              layer_norm_eps=1e-12, hidden_act="gelu", model_type="bert",
              architectures=["BertModel"])
# `make DIR --base`: the BERT-base shape (12 layers, hidden 768, 12 heads, FFN 3072)
BASE = dict(CONFIG, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
            intermediate_size=3072)
SEED = 0


def build_model(cfg):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class DenseNorm(nn.Module):  # attention.output / output
        def __init__(self, i, o, eps):
            super().__init__()
            self.dense = nn.Linear(i, o)
            self.LayerNorm = nn.LayerNorm(o, eps=eps)

        def forward(self, x, residual):
            return self.LayerNorm(self.dense(x) + residual)

    class SelfAttention(nn.Module):
        def __init__(self, c):
            super().__init__()
            h = c["hidden_size"]
            self.heads = c["num_attention_heads"]
            self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)

        def forward(self, x, mask_add):
            b, s, h = x.shape
            d = h // self.heads

            def split(t):
                return t.view(b, s, self.heads, d).transpose(1, 2)

            ctx = F.scaled_dot_product_attention(split(self.query(x)), split(self.key(x)),
                                                 split(self.value(x)), attn_mask=mask_add)
            return ctx.transpose(1, 2).reshape(b, s, h)

    class Attention(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.self = SelfAttention(c)
            self.output = DenseNorm(c["hidden_size"], c["hidden_size"], c["layer_norm_eps"])

    class Intermediate(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.dense = nn.Linear(c["hidden_size"], c["intermediate_size"])

    class Layer(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.attention = Attention(c)
            self.intermediate = Intermediate(c)
            self.output = DenseNorm(c["intermediate_size"], c["hidden_size"], c["layer_norm_eps"])

        def forward(self, x, mask_add):
            a = self.attention.output(self.attention.self(x, mask_add), x)
            return self.output(F.gelu(self.intermediate.dense(a)), a)

    class Embeddings(nn.Module):
        def __init__(self, c):
            super().__init__()
            h = c["hidden_size"]
            self.word_embeddings = nn.Embedding(c["vocab_size"], h)
            self.position_embeddings = nn.Embedding(c["max_position_embeddings"], h)
            self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], h)
            self.LayerNorm = nn.LayerNorm(h, eps=c["layer_norm_eps"])

    class Encoder(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.layer = nn.ModuleList([Layer(c) for _ in range(c["num_hidden_layers"])])

    class Bert(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.embeddings = Embeddings(c)
            self.encoder = Encoder(c)

        def forward(self, input_ids, attention_mask):
            s = input_ids.shape[1]
            pos = torch.arange(s, device=input_ids.device)
            e = self.embeddings
            h = (e.word_embeddings(input_ids) + e.position_embeddings(pos) +
                 e.token_type_embeddings(torch.zeros_like(input_ids)))
            h = e.LayerNorm(h)
            mask_add = ((1.0 - attention_mask) * -10000.0)[:, None, None, :]
            for layer in self.encoder.layer:
                h = layer(h, mask_add)
            return h

    return Bert(cfg)


def ids_for(b, s, vocab):
    """The timing input both sides use: a fixed pattern of token ids, every token kept."""
    import numpy as np
    i = np.arange(b * s, dtype=np.int64)
    return (i * 7919 + 13) % vocab, np.ones(b * s, dtype=np.float32)


def cmd_make(args):
    import numpy as np
    import torch
    from safetensors.torch import save_file

    os.makedirs(args.dir, exist_ok=True)
    torch.manual_seed(SEED)
    config = BASE if args.base else CONFIG
    model = build_model(config).eval()
    with torch.no_grad():  # seeded random weights; biases and norms random too, so a check sees them
        for name, p in model.named_parameters():
            if name.endswith("LayerNorm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.02 * torch.randn_like(p) if p.dim() > 1 else 0.05 * torch.randn_like(p))
    with open(os.path.join(args.dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              os.path.join(args.dir, "model.safetensors"))

    # The reference: batch 2 x seq 128, random ids, the second sequence padded after 100 tokens.
    g = torch.Generator().manual_seed(SEED + 1)
    ids = torch.randint(0, CONFIG["vocab_size"], (2, 128), generator=g, dtype=torch.int64)
    mask = torch.ones(2, 128, dtype=torch.float32)
    mask[1, 100:] = 0
    with torch.inference_mode():
        out = model(ids, mask)
    save_file({"input_ids": ids, "attention_mask": mask, "last_hidden_state": out.contiguous()},
              os.path.join(args.dir, "ref.safetensors"))

    onnx_path = os.path.join(args.dir, "model.onnx")
    axes = {0: "batch", 1: "seq"}
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask), onnx_path, input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                          dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                        "last_hidden_state": axes})
    import onnx
    onnx.checker.check_model(onnx_path)
    import onnxruntime as ort
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    o = sess.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
    d = float(np.abs(o - out.numpy()).max())
    print(f"made {args.dir}: torch {torch.__version__}, onnxruntime {ort.__version__}, "
          f"onnx {onnx.__version__}; ORT vs torch max abs diff {d:.3g}")
    print(f"check impl=ort_vs_torch max_abs_diff={d:.6g}")
    # ONNX Runtime's int8 row: its dynamic quantization of the same model (int8 weights,
    # activations quantized at run time), what a user of ORT would pick for int8 on the CPU
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(onnx_path, os.path.join(args.dir, "model.int8.onnx"),
                     weight_type=QuantType.QInt8)


def timed(f, secs, min_runs=3, warmup=1, max_runs=200):
    """Median seconds per call of f, timed in one block (a peer's thread pool stays warm between
    its own calls, as in its own serving loop), and the number of timed calls."""
    for _ in range(warmup):
        f()
    ts = []
    start = time.perf_counter()
    while len(ts) < max_runs and (len(ts) < min_runs or time.perf_counter() - start < secs):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), len(ts)


def cmd_run(args):
    import numpy as np
    import torch
    import onnxruntime as ort
    from safetensors.torch import load_file

    t = args.threads
    torch.set_num_threads(t)
    cfg = json.load(open(os.path.join(args.dir, "config.json")))
    model = build_model(cfg).eval()
    model.load_state_dict(load_file(os.path.join(args.dir, "model.safetensors")))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = t
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(os.path.join(args.dir, "model.onnx"), so,
                                providers=["CPUExecutionProvider"])
    int8_path = os.path.join(args.dir, "model.int8.onnx")
    sess8 = (ort.InferenceSession(int8_path, so, providers=["CPUExecutionProvider"])
             if os.path.exists(int8_path) else None)
    if args.freezing:  # constant-fold the weights into the graph (inductor's CPU inference mode)
        import torch._inductor.config as inductor_config
        inductor_config.freezing = True
    # dynamic=False: each shape gets a graph specialized to it, as our traced replay does
    compiled = None if args.no_compile else torch.compile(model, dynamic=False)
    print(f"versions torch={torch.__version__} onnxruntime={ort.__version__} "
          f"freezing={int(args.freezing)}", flush=True)

    ref = load_file(os.path.join(args.dir, "ref.safetensors"))
    with torch.inference_mode():
        if compiled is not None:
            t0 = time.perf_counter()
            c = compiled(ref["input_ids"], ref["attention_mask"])
            d = float((c - ref["last_hidden_state"]).abs().max())
            print(f"check impl=torch_compile threads={t} max_abs_diff={d:.6g} tol={args.tol:g} "
                  f"{'ok' if d <= args.tol else 'FAIL'} "
                  f"first_call_s={time.perf_counter() - t0:.1f}", flush=True)
        o = sess.run(None, {"input_ids": ref["input_ids"].numpy(),
                            "attention_mask": ref["attention_mask"].numpy()})[0]
        d = float(np.abs(o - ref["last_hidden_state"].numpy()).max())
        print(f"check impl=ort threads={t} max_abs_diff={d:.6g} tol={args.tol:g} "
              f"{'ok' if d <= args.tol else 'FAIL'}", flush=True)
        if sess8 is not None:  # int8: reported, not held to the float32 tolerance
            o = sess8.run(None, {"input_ids": ref["input_ids"].numpy(),
                                 "attention_mask": ref["attention_mask"].numpy()})[0]
            d = float(np.abs(o - ref["last_hidden_state"].numpy()).max())
            mean = float(np.abs(o - ref["last_hidden_state"].numpy()).mean())
            print(f"check impl=ort_int8 threads={t} max_abs_diff={d:.6g} mean_abs_diff={mean:.6g} "
                  f"info", flush=True)

        for case in args.cases.split(","):
            b, s = (int(x) for x in case.split("x"))
            ids_np, mask_np = ids_for(b, s, cfg["vocab_size"])
            ids_np, mask_np = ids_np.reshape(b, s), mask_np.reshape(b, s)
            ids, mask = torch.from_numpy(ids_np), torch.from_numpy(mask_np)
            feed = {"input_ids": ids_np, "attention_mask": mask_np}
            names = ["ort", "torch_eager"]
            fns = [lambda: sess.run(None, feed), lambda: model(ids, mask)]
            if sess8 is not None:
                names.append("ort_int8")
                fns.append(lambda: sess8.run(None, feed))
            if compiled is not None:
                compiled(ids, mask)  # compile this shape before timing
                names.append("torch_compile")
                fns.append(lambda: compiled(ids, mask))
            for k in range(len(fns)):  # the order rotates with the round
                i = (k + args.round) % len(fns)
                m, runs = timed(fns[i], args.secs)
                print(f"result impl={names[i]} batch={b} seq={s} threads={t} ms={m * 1e3:.4f} "
                      f"runs={runs}", flush=True)


def parse(lines):
    """{(impl, b, s, t): [ms per round]}, {key: value} of the other lines, checks."""
    res, info, checks = {}, {}, []
    for line in lines:
        parts = line.split()
        if not parts:
            continue
        kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        if parts[0] == "result":
            key = (kv["impl"], int(kv["batch"]), int(kv["seq"]), int(kv["threads"]))
            res.setdefault(key, []).append(float(kv["ms"]))
        elif parts[0] == "limit":  # keep the round whose raw sgemm ran fastest: the lowest bound
            key = ("limit", int(kv["batch"]), int(kv["seq"]), int(kv["threads"]))
            if key not in info or float(kv["sgemm_gflops"]) > float(info[key]["sgemm_gflops"]):
                info[key] = kv
        elif parts[0] == "check":
            checks.append(line.strip())
        elif parts[0] == "machine:":
            info["machine"] = line.strip()
        elif parts[0] == "versions":
            info["versions"] = line.strip()
    return res, info, checks


def cmd_table(args):
    lines = []
    for p in args.logs:
        lines += open(p).read().splitlines()
    res, info, checks = parse(lines)

    def med(impl, b, s, t):
        v = res.get((impl, b, s, t))
        return (statistics.median(v), len(v)) if v else (None, 0)

    def cell(x):
        return "-" if x is None else f"{x:.2f}"

    peer_threads = sorted({k[3] for k in res if k[0] == "ort"})
    cases = [(k[1], k[2], k[3]) for k in res if k[0] == "ours_traced"]
    cases = sorted(set(cases), key=lambda c: (c[0], c[1], c[2]))
    head = ["case (BxS, threads)", "ours eager", "ours traced", "ours traced bf16", "ORT",
            "torch eager", "torch.compile", "traced/ORT", "bf16/ORT", "ORT best (thr)",
            "traced/ORT best", "ours traced int8", "ORT int8", "int8/ORT int8",
            "limit (GEMM FLOPs at raw sgemm peak)", "rounds"]
    rows = []
    for b, s, t in cases:
        oe, n = med("ours_eager", b, s, t)
        ot, _ = med("ours_traced", b, s, t)
        ob, _ = med("ours_traced_bf16", b, s, t)
        ort_, _ = med("ort", b, s, t)
        te, _ = med("torch_eager", b, s, t)
        tc, _ = med("torch_compile", b, s, t)
        oi, _ = med("ours_traced_int8", b, s, t)
        oq, _ = med("ort_int8", b, s, t)
        best = [(med("ort", b, s, pt)[0], pt) for pt in peer_threads]
        best = min([x for x in best if x[0] is not None], default=(None, None))
        lim = info.get(("limit", b, s, t))
        lim_cell = "-"
        if lim:
            lim_cell = (f"{float(lim['bound_ms']):.2f} ms ({float(lim['gflop_per_seq']):.2f} "
                        f"GFLOP/seq x {b} at {float(lim['sgemm_gflops']):.0f} GFLOP/s)")
        rows.append([f"{b}x{s}, {t} thr", cell(oe), cell(ot), cell(ob), cell(ort_), cell(te),
                     cell(tc), f"{ot / ort_:.2f}x" if ot and ort_ else "-",
                     f"{ob / ort_:.2f}x" if ob and ort_ else "-",
                     f"{best[0]:.2f} ({best[1]})" if best[0] else "-",
                     f"{ot / best[0]:.2f}x" if ot and best[0] else "-", cell(oi), cell(oq),
                     f"{oi / oq:.2f}x" if oi and oq else "-", lim_cell, str(n)])
    for k in ("machine", "versions"):
        if k in info:
            print(info[k])
    print("median over rounds of each round's median, ms per forward (last hidden state);"
          " ratio < 1: ours faster")
    w = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    print("| " + " | ".join(h.ljust(w[i]) for i, h in enumerate(head)) + " |")
    print("|" + "|".join("-" * (x + 2) for x in w) + "|")
    for r in rows:
        print("| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r)) + " |")
    # the checks, one line per distinct check (the last round's)
    seen = {}
    for c in checks:
        kv = c.split()
        seen[" ".join(x for x in kv if not x.startswith(("max_abs_diff", "first_call")))] = c
    for c in seen.values():
        print(c)


def main():
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--base", action="store_true", help="the BERT-base shape (12 x 768)")
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--threads", type=int, required=True)
    r.add_argument("--cases", default="1x128,32x128")
    r.add_argument("--secs", type=float, default=1.0,
                   help="seconds of timed calls per case per implementation (at least 3 calls)")
    r.add_argument("--tol", type=float, default=1e-3, help="max abs difference the checks allow")
    r.add_argument("--round", type=int, default=0, help="rotates the order of the peers")
    r.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    r.add_argument("--freezing", action="store_true", help="torch.compile with inductor freezing")
    t = sub.add_parser("table")
    t.add_argument("logs", nargs="+")
    args = ap.parse_args()
    {"make": cmd_make, "run": cmd_run, "table": cmd_table}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
