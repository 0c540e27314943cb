#!/usr/bin/env bash
# gpu_check.sh: the one prepared script for a lent GPU (issue 10). Configures and builds
# build-gpu/ with -Dcuda=enabled (all cores), runs the CUDA tests (every case that skips
# without a device runs here), then the GPU benchmarks, and writes a report to $OUT (default
# ./gpu-report). Each step has its own deadline so the whole run stays under 8 minutes:
# configure 45 s, build 200 s, tests 80 s, benchmarks 40 s, PyTorch's ResNet-50/BERT steps 50 s,
# ours 50 s, the GPU example 15 s (480 s at most).
# Usage: tools/gpu_deps.sh here once (the libraries the lent machine lacks, as Debian packages),
# then on the GPU machine, carrying .gpu-deps: bench/gpu_check.sh
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
# Libraries the machine lacks, carried as Debian packages (tools/gpu_deps.sh writes .gpu-deps/;
# the device tool's run carries it): unpacked once into .gpu-deps/root, and pkg-config (pkgconf
# from the same packages), the compiler and the loader pointed there. Without the folder the
# machine's own packages are used.
use_carried_deps() {
  local root="$PWD/.gpu-deps/root" lib l t f
  [ -d .gpu-deps/debs ] || return 0
  if [ ! -d "$root" ]; then
    mkdir -p "$root"
    for f in .gpu-deps/debs/*.deb; do
      if command -v dpkg-deb > /dev/null; then
        dpkg-deb -x "$f" "$root"
      else  # an ar archive whose data member is a tarball
        (cd "$root" && ar p "$OLDPWD/$f" "$(ar t "$OLDPWD/$f" | grep '^data\.tar')" | tar -xJ) ||
          say "could not unpack $f"
      fi
    done
    # absolute symlinks (libz.so -> /lib/x86_64-linux-gnu/...) point into the root instead
    find "$root" -type l | while read -r l; do
      t=$(readlink "$l")
      case "$t" in /*) ln -sfn "$root$t" "$l" ;; esac
    done
  fi
  lib="$root/usr/lib/x86_64-linux-gnu"
  export PKG_CONFIG="$root/usr/bin/pkgconf"
  export PKG_CONFIG_LIBDIR="$lib/pkgconfig:$lib/openblas-pthread/pkgconfig:$root/usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$root"
  export CPATH="$root/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$lib:$lib/openblas-pthread${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  say "using the carried packages unpacked in $root"
}
say "gpu_check $(date -u +%FT%TZ) on $(hostname)"
use_carried_deps
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi failed"; } 2>&1 | tee -a "$report"
{ nvcc --version | tail -n 2; } 2>&1 | tee -a "$report"
for tool in meson ninja nvcc; do
  command -v "$tool" > /dev/null || say "missing: $tool (the build below will fail; install it or carry a build)"
done
[ -n "${PKG_CONFIG:-}" ] || command -v pkg-config > /dev/null ||
  say "missing: pkg-config (run tools/gpu_deps.sh here and carry .gpu-deps)"
jobs=$(nproc)
if [ ! -f build-gpu/build.ninja ]; then
  step configure 45 meson setup build-gpu -Dcuda=enabled -Dexamples=true -Dbench=true -Dnative=false || exit 1
fi
step build 200 ninja -C build-gpu -j "$jobs" tests/oneflow_tests bench/bench_cuda \
  bench/bench_gpu_models examples/gpu_mlp || exit 1
step tests 80 ./build-gpu/tests/oneflow_tests -tc='cuda*,autocast*,GradScaler*,op table: CUDA*' --duration=true
step bench 40 ./build-gpu/bench/bench_cuda
# ResNet-50 and BERT-base training: PyTorch's eager steps first (the machine's python3 holds
# PyTorch), then ours, which prints them beside its own
step torch_models 50 python3 bench/gpu_models.py "$OUT/torch_models.json"
step models 50 ./build-gpu/bench/bench_gpu_models --torch "$OUT/torch_models.json"
step example 15 ./build-gpu/examples/gpu_mlp 256
say "==> report: $report (logs beside it)"
