#!/usr/bin/env bash
# gpu_deps.sh: downloads the Debian packages the build needs into .gpu-deps/ (git-ignored,
# ~15 MB), for bench/gpu_check.sh on the lent GPU machine. That machine has the CUDA toolkit,
# a host compiler, meson and ninja (in its Python), but none of these libraries and no network:
# carry the folder with the device tool's run (carry: [".gpu-deps"]). gpu_check.sh unpacks the
# packages into .gpu-deps/root and points pkg-config, the compiler and the loader there.
# Usage: tools/gpu_deps.sh   (run here, where Debian's archive is reachable)
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libgfortran5
      libfmt-dev libfmt9 doctest-dev zlib1g-dev zlib1g pkgconf pkgconf-bin libpkgconf3)
rm -rf .gpu-deps
mkdir -p .gpu-deps/debs
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
(cd .gpu-deps/debs && apt-get download "${PKGS[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed")
ls .gpu-deps/debs
du -sh .gpu-deps
