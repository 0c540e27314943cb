#!/usr/bin/env bash
# gpu_bundle.sh: builds the GPU check's programs here (build-gpu/, -Dcuda=enabled, generic x86-64
# code) and packs them into .gpu-build/bundle.tar.xz (git-ignored, ~15 MB), so that
# bench/gpu_check.sh on the lent GPU machine spends its minutes running them, not compiling
# (a whole build there takes most of a lease). Carry it with the device tool's run beside
# .gpu-deps (carry: [".gpu-deps", ".gpu-build"]); gpu_check.sh unpacks it into build-gpu/ and
# skips its configure and build steps. This machine's CUDA toolkit must be the lent machine's
# (13.0 on both, checked there: the bundle records this one's `nvcc --version`).
# Usage: tools/gpu_bundle.sh   (then tools/gpu_deps.sh once, if .gpu-deps/ is missing)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
TARGETS=(tests/oneflow_tests tests/cpu_only_probe tests/global_worker bench/bench_cuda bench/bench_gpu_models examples/gpu_mlp)
if [ ! -f build-gpu/build.ninja ]; then
  meson setup build-gpu -Dcuda=enabled -Dexamples=true -Dbench=true -Dnative=false
fi
ninja -C build-gpu liboneflow_cuda.so "${TARGETS[@]}"
rm -rf .gpu-build
mkdir -p .gpu-build/stage
(cd build-gpu && cp --parents liboneflow.so liboneflow_cuda.so "${TARGETS[@]}" ../.gpu-build/stage/)
# the tests name files of the source tree by the absolute path this build was configured in
# (ONEFLOW_SOURCE_ROOT): gpu_check.sh links that path to its own checkout when it differs
pwd > .gpu-build/stage/source_root.txt
{ nvcc --version | tail -n 2; git rev-parse HEAD; } > .gpu-build/stage/built_with.txt
find .gpu-build/stage -type f -perm -u+x -exec strip --strip-unneeded {} +
tar -C .gpu-build/stage -cJf .gpu-build/bundle.tar.xz .
rm -rf .gpu-build/stage
ls -la .gpu-build
