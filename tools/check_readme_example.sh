#!/usr/bin/env bash
# Builds the README's example against the build tree through pkg-config (the way another
# project links oneflow) and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^```cpp$/{f=1;next} /^```$/{if(f){exit}} f' README.md > "$tmp/example.cpp"
export PKG_CONFIG_PATH="$PWD/build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
g++ -std=c++20 -O1 "$tmp/example.cpp" $(pkg-config --cflags --libs oneflow) \
    -Wl,-rpath,"$PWD/build" -o "$tmp/example"
"$tmp/example" > "$tmp/out.txt"
cat "$tmp/out.txt"
echo "==> README example built through pkg-config and ran"
