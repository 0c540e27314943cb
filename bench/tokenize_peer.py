#!/usr/bin/env python3
"""HF `tokenizers` beside bench_tokenize (bench/tokenize.sh): the same corpus, the same modes.

usage: tokenize_peer.py TOKENIZER_JSON CORPUS ROUNDS

Prints "hf MODE TOKENS_PER_S TOKENS LINES" for:
  single   Tokenizer.encode per line in a Python loop
  batchN   Tokenizer.encode_batch of every line, N = RAYON_NUM_THREADS (set by the caller)
the median over ROUNDS, truncation and padding off.
"""
import os
import statistics
import sys
import time

from tokenizers import Tokenizer


def main():
    tok = Tokenizer.from_file(sys.argv[1])
    tok.no_truncation()
    tok.no_padding()
    with open(sys.argv[2], "rb") as f:
        lines = f.read().decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    rounds = int(sys.argv[3])
    tokens = sum(len(e.ids) for e in tok.encode_batch(lines))  # (and a warm-up)
    threads = os.environ.get("RAYON_NUM_THREADS", "?")
    if threads == "1":
        rates = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            n = 0
            for l in lines:
                n += len(tok.encode(l).ids)
            rates.append(n / (time.perf_counter() - t0))
        print(f"hf single {statistics.median(rates):.0f} {tokens} {len(lines)}")
    rates = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        encs = tok.encode_batch(lines)
        rates.append(sum(len(e.ids) for e in encs) / (time.perf_counter() - t0))
    print(f"hf batch{threads} {statistics.median(rates):.0f} {tokens} {len(lines)}")


if __name__ == "__main__":
    main()
