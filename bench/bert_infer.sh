#!/usr/bin/env bash
# bert_infer.sh: BERT inference on the CPU, ours (eager and traced, bench/bench_bert.cpp) beside
# ONNX Runtime, PyTorch eager and torch.compile (bench/bert_peers.py) on the same model with the
# same weights: the baseline of issue 26 section 4.
#
#   bench/bert_infer.sh [rounds, default 5] [seconds per case per implementation, default 1.0]
#
# 1. Makes (or reuses) the virtual environment .venv-bench in the repository root and installs
#    the peers from PyPI: torch, onnxruntime, onnx, safetensors, numpy.
# 2. bert_peers.py make: a 6-layer BERT (hidden 384, 6 heads, FFN 1536, vocabulary 30522) with
#    seeded random weights in plain torch under Hugging Face's names -> config.json,
#    model.safetensors, model.onnx (opset 17, dynamic batch/seq; input_ids int64 [B, S],
#    attention_mask float32 [B, S]) and ref.safetensors (an input and PyTorch's last hidden
#    state) in $BERT_BENCH_DIR (default build/bench_bert). Made again when bert_peers.py changes.
# 3. Builds build/bench/bench_bert only (ninja -C $BUILD_DIR bench/bench_bert).
# 4. Rounds: each round runs our binary and one peer process per peer thread count, the order
#    alternating by round; each prints per-case medians ("result ..." lines). The table takes the
#    median over rounds of those medians. Correctness ("check ..." lines): ours eager and traced,
#    ORT and torch.compile against PyTorch eager's output (tolerance 1e-3); the script exits 3
#    if one fails.
#
# Environment: MODEL (small, the default, or base: BERT-base's 12 layers x hidden 768, in
# build/bench_bert_base), CASES (ours, BxS@threads; default 1x128@1,1x128@2,32x128@2), PEER_THREADS
# (default "1 2": every peer runs every BxS at each, so the table can show the peer at our thread
# count and at its best), PEER_ARGS (extra bert_peers.py run arguments, e.g. --freezing or
# --no-compile), BUILD_DIR (default build), BERT_BENCH_DIR, PIP_INSTALL_ARGS (extra pip args).
# The log of a run: $BERT_BENCH_DIR/run-<date>.log (every line each side printed).
set -euo pipefail

ROUNDS=${1:-5}
SECS=${2:-1.0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=$ROOT/.venv-bench
BUILD=${BUILD_DIR:-$ROOT/build}
MODEL=${MODEL:-small}  # small: 6 x 384; base: BERT-base's 12 x 768
if [ "$MODEL" = base ]; then
  WORK=${BERT_BENCH_DIR:-$ROOT/build/bench_bert_base}
  MAKE_ARGS=--base
else
  WORK=${BERT_BENCH_DIR:-$ROOT/build/bench_bert}
  MAKE_ARGS=
fi
CASES=${CASES:-1x128@1,1x128@2,32x128@2}
PEER_THREADS=${PEER_THREADS:-1 2}
PY=$VENV/bin/python
export TORCHINDUCTOR_CACHE_DIR=$WORK/inductor-cache  # later rounds reuse the compiled kernels
cd "$ROOT"
t_start=$(date +%s)

# 1. the peers' virtual environment
if ! { [ -x "$PY" ] && "$PY" -c "import torch, onnxruntime, onnx, safetensors, numpy" 2>/dev/null; }; then
  echo "== making $VENV (pip install torch onnxruntime onnx safetensors numpy; several GB)"
  [ -x "$PY" ] || python3 -m venv "$VENV"
  # shellcheck disable=SC2086
  "$VENV/bin/pip" install ${PIP_INSTALL_ARGS:-} torch onnxruntime onnx safetensors numpy
fi

# 2. the model, its ONNX export and the reference output
mkdir -p "$WORK"
if [ ! -f "$WORK/ref.safetensors" ] || [ ! -f "$WORK/model.onnx" ] ||
   [ "$ROOT/bench/bert_peers.py" -nt "$WORK/model.onnx" ]; then
  echo "== making the model in $WORK"
  # shellcheck disable=SC2086
  "$PY" bench/bert_peers.py make "$WORK" $MAKE_ARGS
fi

# 3. our binary
if [ ! -f "$BUILD/build.ninja" ]; then meson setup "$BUILD" --buildtype=release; fi
ninja -C "$BUILD" bench/bench_bert >/dev/null
OURS=$BUILD/bench/bench_bert

# The peers' cases: every BxS of ours.
PEER_CASES=$(echo "$CASES" | tr ',' '\n' | sed 's/@.*//' | sort -u -t x -k1,1n -k2,2n | paste -sd, -)
LOG=$WORK/run-$(date +%Y%m%d-%H%M%S).log
echo "== $ROUNDS rounds of $SECS s per case per implementation; ours: $CASES; peers: $PEER_CASES" \
     "at threads $PEER_THREADS; log $LOG"
echo "load average at start: $(cat /proc/loadavg)" | tee -a "$LOG"

run_ours() {  # round
  local check=--no-check
  if [ "$1" = 1 ]; then check=; fi
  # shellcheck disable=SC2086
  "$OURS" "$WORK" --cases "$CASES" --secs "$SECS" --bf16 --int8 $check >>"$LOG" 2>&1 || {
    rc=$?; [ $rc = 3 ] || { echo "bench_bert failed ($rc); see $LOG"; tail -5 "$LOG"; exit 1; }; }
}
run_peers() {  # round
  for t in $PEER_THREADS; do
    # shellcheck disable=SC2086
    "$PY" bench/bert_peers.py run "$WORK" --threads "$t" --cases "$PEER_CASES" --secs "$SECS" \
      --round "$1" ${PEER_ARGS:-} >>"$LOG" 2>&1 ||
      { echo "bert_peers.py failed; see $LOG"; tail -5 "$LOG"; exit 1; }
  done
}

for r in $(seq 1 "$ROUNDS"); do
  echo "round $r" >>"$LOG"
  if [ $((r % 2)) = 1 ]; then run_ours "$r"; run_peers "$r"; else run_peers "$r"; run_ours "$r"; fi
  echo "  round $r/$ROUNDS done ($(($(date +%s) - t_start)) s)"
done
echo "load average at end: $(cat /proc/loadavg)" | tee -a "$LOG"

"$PY" bench/bert_peers.py table "$LOG"
echo "total $(($(date +%s) - t_start)) s"
if grep -q '^check .* FAIL' "$LOG"; then
  echo "a correctness check FAILED (see above)"
  exit 3
fi
