"""gpt_decode_peer.py: the PyTorch side of bench/gpt_decode.sh (issue 26 section 4).

A GPT-2-small-shaped decoder written in plain torch, the model of bench/bench_gpt_decode.cpp:
12 pre-norm layers (LayerNorm, multi-head self-attention with a fused QKV projection, GELU FFN
of 4x), hidden 768, 12 heads, vocabulary 50257, head tied to the token embedding; seeded random
weights. Decoding at batch 1 with a preallocated KV cache written in place at each position
(the usual hand-written KV-cache loop, as transformers' GPT2 with use_cache does in effect),
under torch.inference_mode: a 128-token prompt fed one token at a time, then greedy tokens; the
median ms per token over rounds. Prints the lines bench_gpt_decode prints:

    result impl=torch_eager|torch_eager_bf16|torch_eager_int8 threads=T prompt=P tokens=N
           ms_per_token=<median> tokens_per_s=<1000 / ms>

    python bench/gpt_decode_peer.py --threads 1 [--prompt 128] [--tokens 64] [--rounds 3] [--bf16]
                                    [--int8]

--int8: torch.ao.quantization.quantize_dynamic(model, {Linear}, qint8), PyTorch's dynamic int8
linear (per-tensor weight scales, fbgemm), with the tied head as a Linear sharing the embedding's
weight so that it is quantized too, as our quantize_int8 pass does.
"""
import argparse
import math
import statistics
import time
import warnings

import torch
import torch.nn.functional as F


class Gpt(torch.nn.Module):
    def __init__(self, vocab=50257, d=768, heads=12, layers=12, max_len=1024):
        super().__init__()
        self.d, self.heads = d, heads
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(max_len, d)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            b = torch.nn.Module()
            b.norm1 = torch.nn.LayerNorm(d)
            b.qkv = torch.nn.Linear(d, 3 * d)
            b.proj = torch.nn.Linear(d, d)
            b.norm2 = torch.nn.LayerNorm(d)
            b.fc1 = torch.nn.Linear(d, 4 * d)
            b.fc2 = torch.nn.Linear(4 * d, d)
            self.blocks.append(b)
        self.norm = torch.nn.LayerNorm(d)

    def step(self, token, pos, k_cache, v_cache):
        """token: int, pos: int; k_cache/v_cache [layers, 1, heads, max_len, head_dim]."""
        d, h = self.d, self.heads
        hd = d // h
        x = self.tok.weight[token].view(1, d) + self.pos.weight[pos].view(1, d)
        for i, b in enumerate(self.blocks):
            a = b.norm1(x)
            q, k, v = b.qkv(a).view(3, h, 1, hd).unbind(0)
            k_cache[i, 0, :, pos] = k.view(h, hd)
            v_cache[i, 0, :, pos] = v.view(h, hd)
            kk = k_cache[i, 0, :, : pos + 1]  # [h, pos + 1, hd]
            vv = v_cache[i, 0, :, : pos + 1]
            att = (q @ kk.transpose(1, 2)) * (1.0 / math.sqrt(hd))  # [h, 1, pos + 1]
            o = att.softmax(-1) @ vv  # [h, 1, hd]
            x = x + b.proj(o.reshape(1, d))
            x = x + b.fc2(F.gelu(b.fc1(b.norm2(x))))
        if hasattr(self, "head"):
            return self.head(self.norm(x)).view(-1)
        return F.linear(self.norm(x), self.tok.weight).view(-1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--int8", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    m = Gpt(layers=a.layers).eval()
    prompt = [(i * 7919) % 50257 for i in range(a.prompt)]
    impls = [("torch_eager", torch.float32)]
    if a.bf16:
        impls.append(("torch_eager_bf16", torch.bfloat16))
    if a.int8:
        impls.append(("torch_eager_int8", torch.qint8))
    for name, dt in impls:
        if dt == torch.qint8:
            m = m.to(torch.float32)
            m.head = torch.nn.Linear(m.d, m.tok.num_embeddings, bias=False)
            m.head.weight = m.tok.weight
            with warnings.catch_warnings():  # (quiet its deprecation notices: the API works)
                warnings.simplefilter("ignore")
                m = torch.ao.quantization.quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8)
            dt = torch.float32
        else:
            m = m.to(dt)
        k_cache = torch.zeros(a.layers, 1, m.heads, a.prompt + a.tokens, m.d // m.heads, dtype=dt)
        v_cache = torch.zeros_like(k_cache)
        per_token = []
        with torch.inference_mode():
            for _ in range(a.rounds):
                k_cache.zero_()
                v_cache.zero_()
                logits = None
                for p, t in enumerate(prompt):
                    logits = m.step(t, p, k_cache, v_cache)
                t0 = time.perf_counter()
                pos = len(prompt)
                for _ in range(a.tokens - 1):
                    t = int(logits.float().argmax())
                    logits = m.step(t, pos, k_cache, v_cache)
                    pos += 1
                per_token.append((time.perf_counter() - t0) * 1e3 / (a.tokens - 1))
        ms = statistics.median(per_token)
        print(f"result impl={name} threads={a.threads} prompt={a.prompt} tokens={a.tokens} "
              f"ms_per_token={ms:.3f} tokens_per_s={1e3 / ms:.2f}", flush=True)


if __name__ == "__main__":
    main()
