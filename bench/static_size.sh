#!/usr/bin/env bash
# The size of a stripped static inference executable: examples/trace_inference (loads a graph
# saved by of::jit::save and runs it) linked from liboneflow.a into one file
# (build/examples/trace_inference_static, NOTE [Static library]), beside what the shared build
# ships for the same program (its executable plus liboneflow.so, stripped). With a saved graph
# (./run demo writes fashion_mnist_cnn.oftrace) the static executable runs it too.
#   bench/static_size.sh [graph file]
set -euo pipefail
cd "$(dirname "$0")/.."
ninja -C build examples/trace_inference examples/trace_inference_static >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in build/examples/trace_inference_static build/examples/trace_inference build/liboneflow.so; do
  strip -o "$tmp/$(basename "$f")" "$f"
done
mib() {
  awk -v b="$(stat -c %s "$1")" \
    'BEGIN { if (b < 1048576) printf "%.0f KiB", b / 1024; else printf "%.1f MiB", b / 1048576 }'
}
echo "static inference executable, stripped: $(mib "$tmp/trace_inference_static")" \
     "(examples/trace_inference linked from liboneflow.a)"
echo "  beside the shared build, stripped: executable $(mib "$tmp/trace_inference")" \
     "+ liboneflow.so $(mib "$tmp/liboneflow.so")"
echo "  shared libraries it still loads: $(readelf -d "$tmp/trace_inference_static" |
  sed -nE 's/.*NEEDED.*\[(.*)\]/\1/p' | tr '\n' ' ')"
graph=${1:-fashion_mnist_cnn.oftrace}
if [ -f "$graph" ]; then
  "$tmp/trace_inference_static" "$graph"
else
  echo "  (no $graph: ./run demo saves one; the static executable was not run)"
fi
