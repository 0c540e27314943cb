#!/usr/bin/env bash
# gpt_decode.sh: GPT-2-small-shaped decoding at batch 1 (issue 26 section 4): our traced
# KV-cache decode step (bench/bench_gpt_decode.cpp, float32, bfloat16 and int8 weights) beside
# PyTorch eager with a hand-written KV cache (bench/gpt_decode_peer.py, float32, bfloat16 and its
# quantize_dynamic int8), and the bound:
# the bytes a token reads at the STREAM-triad rate measured in the same run.
#
#   bench/gpt_decode.sh [rounds, default 3] [tokens per round, default 64]
#
# Uses the virtual environment bench/bert_infer.sh makes (.venv-bench: torch from PyPI), making
# it if needed. Rounds alternate the order of the two sides; the table takes the median over
# rounds of each side's per-round median ms per token. Environment: THREADS (default "1 2"),
# PROMPT (default 128), BUILD_DIR (default build). The log: build/gpt_decode-<date>.log.
set -euo pipefail

ROUNDS=${1:-3}
TOKENS=${2:-64}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=$ROOT/.venv-bench
BUILD=${BUILD_DIR:-$ROOT/build}
THREADS=${THREADS:-1 2}
PROMPT=${PROMPT:-128}
PY=$VENV/bin/python
cd "$ROOT"

if ! { [ -x "$PY" ] && "$PY" -c "import torch" 2>/dev/null; }; then
  echo "== making $VENV (pip install torch)"
  [ -x "$PY" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install torch numpy
fi
if [ ! -f "$BUILD/build.ninja" ]; then meson setup "$BUILD" --buildtype=release; fi
ninja -C "$BUILD" bench/bench_gpt_decode >/dev/null

LOG=$BUILD/gpt_decode-$(date +%Y%m%d-%H%M%S).log
: >"$LOG"
csv_threads=$(echo "$THREADS" | tr ' ' ',')
ours() {
  "$BUILD/bench/bench_gpt_decode" --threads "$csv_threads" --prompt "$PROMPT" --tokens "$TOKENS" \
    --rounds 1 --bf16 --int8 | tee -a "$LOG"
}
peer() {
  for t in $THREADS; do
    "$PY" bench/gpt_decode_peer.py --threads "$t" --prompt "$PROMPT" --tokens "$TOKENS" \
      --rounds 1 --bf16 --int8 | tee -a "$LOG"
  done
}
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r"
  if ((r % 2)); then ours; peer; else peer; ours; fi
done

# the table: medians over rounds
"$PY" - "$LOG" <<'EOF'
import re, statistics, sys
from collections import defaultdict
ms, bound = defaultdict(list), defaultdict(list)
for line in open(sys.argv[1]):
    kv = dict(re.findall(r"(\w+)=([^\s]+)", line))
    if line.startswith("result"):
        ms[(kv["impl"], int(kv["threads"]))].append(float(kv["ms_per_token"]))
    elif line.startswith("limit"):
        bound[int(kv["threads"])].append((float(kv["triad_gbs"]), float(kv["bytes_per_token_mb"])))
threads = sorted({t for _, t in ms})
impls = ["ours_traced", "ours_eager", "ours_traced_bf16", "ours_traced_int8", "torch_eager",
         "torch_eager_bf16", "torch_eager_int8"]
print("| threads | " + " | ".join(f"{i} tokens/s" for i in impls) +
      " | ours / torch (float32) | ours eager / torch (float32) | ours bf16 / torch float32 |"
      " ours int8 / torch float32 |"
      " ours int8 / torch int8 | triad GB/s | float32 bound tokens/s | ours / bound |")
print("|---" * (len(impls) + 9) + "|")
for t in threads:
    tps = {i: 1e3 / statistics.median(ms[(i, t)]) for i in impls if ms[(i, t)]}
    nan = float("nan")
    gbs = statistics.median(b[0] for b in bound[t])
    mb = bound[t][0][1]
    b = gbs * 1e3 / mb
    print(f"| {t} | " + " | ".join(f"{tps.get(i, nan):.1f}" for i in impls) +
          f" | {tps['ours_traced'] / tps['torch_eager']:.2f}x"
          f" | {tps.get('ours_eager', nan) / tps['torch_eager']:.2f}x"
          f" | {tps['ours_traced_bf16'] / tps['torch_eager']:.2f}x"
          f" | {tps.get('ours_traced_int8', nan) / tps['torch_eager']:.2f}x"
          f" | {tps.get('ours_traced_int8', nan) / tps.get('torch_eager_int8', nan):.2f}x"
          f" | {gbs:.1f} | {b:.1f} | {tps['ours_traced'] / b:.2f} |")
print(f"(log: {sys.argv[1]})")
EOF
