#!/usr/bin/env bash
# Links tools/static_link_check.cpp into a single executable from the installed archive, as the
# README's "Static linking" does:
#   g++ -std=c++20 app.cpp $(pkg-config --static --cflags --libs oneflow)
# with only liboneflow.a in the libdir (what a default_library=static install holds), checks that
# it needs no liboneflow shared library, and runs it: ops of every family of the op table, trace
# and replay, each against a value worked out by hand (NOTE [Static library], meson.build).
# build/ builds the archive from the shared library's objects (default_library=both): a build
# folder configured before that default is switched over here, without recompiling.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/install_stage.sh
if [ ! -f build/liboneflow.a ]; then
  echo "==> build/ has no liboneflow.a: meson configure -Ddefault_library=both (same objects)"
  meson configure build -Ddefault_library=both
  ninja -C build
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
install_stage "$tmp/stage"
rm -f "$STAGE_LIBDIR"/liboneflow*.so*
export PKG_CONFIG_PATH="$STAGE_LIBDIR/pkgconfig"
flags=$(pkg-config --define-variable=prefix="$STAGE_ROOT" --static --cflags --libs oneflow)
echo "==> g++ -std=c++20 -O1 tools/static_link_check.cpp $flags"
g++ -std=c++20 -O1 tools/static_link_check.cpp $flags -o "$tmp/static_link_check"
if readelf -d "$tmp/static_link_check" | grep NEEDED | grep -q liboneflow; then
  echo "==> FAILED: the executable needs a liboneflow shared library"
  readelf -d "$tmp/static_link_check" | grep NEEDED
  exit 1
fi
"$tmp/static_link_check" "$tmp" | tee "$tmp/out.txt"
# with the CUDA backend built, a CUDA request says why a static program has none
if grep -q "^cuda: .*not available" "$tmp/out.txt" && [ -n "$(ls build/liboneflow_cuda.so 2>/dev/null)" ]; then
  grep -q "links oneflow statically" "$tmp/out.txt" ||
    { echo "==> FAILED: the CUDA error does not say the program links oneflow statically"; exit 1; }
fi
echo "==> linked from liboneflow.a with pkg-config --static into one executable ($(du -h \
  "$tmp/static_link_check" | cut -f1)), every op family ran"
