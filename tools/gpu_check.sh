#!/usr/bin/env bash
# gpu_check.sh: build oneflow with CUDA in a fresh directory and run the test suite on a machine
# with a GPU. Usage: tools/gpu_check.sh [build-dir]   (default: build-gpu; removed first)
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build-gpu}"
export PATH="/usr/local/cuda/bin:${PATH}"

stage() { printf '\n==== %s ====\n' "$*"; }

stage "device"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi || echo "nvidia-smi failed (exit $?)"
else
  echo "nvidia-smi not found"
fi
command -v nvcc >/dev/null 2>&1 && nvcc --version | tail -n 2 || echo "nvcc not found"

stage "configure ${BUILD_DIR} (-Dcuda=enabled)"
rm -rf "${BUILD_DIR}"
meson setup "${BUILD_DIR}" -Dcuda=enabled -Dbench=false -Dexamples=false

stage "build"
ninja -C "${BUILD_DIR}" -j "$(nproc)"

TESTS="${BUILD_DIR}/tests/oneflow_tests"
if [[ ! -x "${TESTS}" ]]; then
  echo "test binary ${TESTS} not found" >&2
  exit 1
fi

status=0
stage "CUDA test cases"
"${TESTS}" --test-case='*cuda*' || status=$?

stage "whole suite"
"${TESTS}" || status=$?

stage "device after the tests"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi || true

stage "done: exit ${status}"
exit "${status}"
