#!/usr/bin/env bash
# gpu_check.sh: the one prepared script for a lent GPU (issue 10). Configures and builds
# build-gpu/ with -Dcuda=enabled (all cores), runs the CUDA tests (every case that skips
# without a device runs here), then the GPU benchmarks, and writes a report to $OUT (default
# ./gpu-report). Each step has its own deadline so the whole run stays under 8 minutes:
# configure 60 s, build 230 s, tests 80 s, benchmarks 60 s, the GPU example 40 s (470 s at most). Usage: bench/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
OUT="${OUT:-$PWD/gpu-report}"
mkdir -p "$OUT"
report="$OUT/report.txt"
: > "$report"
say() { echo "$*" | tee -a "$report"; }
step() {  # step <name> <seconds> <command...>: runs it, logs to $OUT/<name>.log, notes the result
  local name="$1" secs="$2"
  shift 2
  local t0=$SECONDS
  timeout "$secs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  say "==> $name: rc=$rc in $((SECONDS - t0)) s ($( [ $rc -eq 124 ] && echo "timed out after $secs s" || echo done))"
  tail -n 40 "$OUT/$name.log" >> "$report"
  return $rc
}
say "gpu_check $(date -u +%FT%TZ) on $(hostname)"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi failed"; } 2>&1 | tee -a "$report"
{ nvcc --version | tail -n 2; } 2>&1 | tee -a "$report"
for tool in meson ninja pkg-config nvcc; do
  command -v "$tool" > /dev/null || say "missing: $tool (the build below will fail; install it or carry a build)"
done
jobs=$(nproc)
if [ ! -f build-gpu/build.ninja ]; then
  step configure 60 meson setup build-gpu -Dcuda=enabled -Dexamples=true -Dbench=true -Dnative=false || exit 1
fi
step build 230 ninja -C build-gpu -j "$jobs" tests/oneflow_tests bench/bench_cuda examples/gpu_mlp || exit 1
step tests 80 ./build-gpu/tests/oneflow_tests -tc='cuda*,autocast*,GradScaler*,op table: CUDA*' --duration=true
step bench 60 ./build-gpu/bench/bench_cuda
step example 40 ./build-gpu/examples/gpu_mlp 256
say "==> report: $report (logs beside it)"
