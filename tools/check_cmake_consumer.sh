#!/usr/bin/env bash
# Installs build/ into a scratch folder and builds the README's example as a CMake project
# against it, the way another project consumes oneflow (NOTE [CMake package], meson.build):
#   find_package(oneflow 0.1 CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE oneflow::oneflow)
# and, where the archive is installed, the same program linked with oneflow::oneflow_static.
# Runs both (their output must agree), checks which library each one loads, and that a request
# for another minor version is refused. Installs cmake when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/install_stage.sh
need_tool cmake cmake
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
install_stage "$tmp/stage"

mkdir -p "$tmp/app" "$tmp/old"
awk '/^```cpp$/{f=1;next} /^```$/{if(f){exit}} f' README.md > "$tmp/app/app.cpp"
# No CMAKE_CXX_STANDARD: C++20 must come from the imported target (cxx_std_20).
cat > "$tmp/app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(oneflow_consumer CXX)
find_package(oneflow 0.1 CONFIG REQUIRED)
add_executable(app app.cpp)
target_link_libraries(app PRIVATE oneflow::oneflow)
if(TARGET oneflow::oneflow_static)
  add_executable(app_static app.cpp)
  target_link_libraries(app_static PRIVATE oneflow::oneflow_static)
endif()
CMAKE
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$STAGE_ROOT" >"$tmp/configure.log" ||
  { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/app/build" -j 2 >"$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }

"$tmp/app/build/app" >"$tmp/shared.txt"
cat "$tmp/shared.txt"
# the shared program loads the staged liboneflow.so (CMake's build RPATH), nothing else
loaded=$(ldd "$tmp/app/build/app" | awk '/liboneflow/ {print $3}')
if [ "$loaded" != "$(realpath "$STAGE_LIBDIR/liboneflow.so")" ] &&
   [ "$loaded" != "$STAGE_LIBDIR/liboneflow.so" ]; then
  echo "==> FAILED: app loads '$loaded', expected $STAGE_LIBDIR/liboneflow.so"
  exit 1
fi
if [ -x "$tmp/app/build/app_static" ]; then
  if ldd "$tmp/app/build/app_static" | grep -q liboneflow; then
    echo "==> FAILED: app_static needs a liboneflow shared library"
    exit 1
  fi
  "$tmp/app/build/app_static" >"$tmp/static.txt"
  diff "$tmp/shared.txt" "$tmp/static.txt"
  echo "==> oneflow::oneflow_static: the same output from one executable"
fi

# find_package(oneflow 0.2) must not accept 0.1.x (before 1.0 a minor version changes the API)
cat > "$tmp/old/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(oneflow_wrong_version CXX)
find_package(oneflow 0.2 CONFIG REQUIRED)
CMAKE
if cmake -S "$tmp/old" -B "$tmp/old/build" -DCMAKE_PREFIX_PATH="$STAGE_ROOT" >"$tmp/old.log" 2>&1; then
  echo "==> FAILED: find_package(oneflow 0.2) accepted $(grep -o 'set(PACKAGE_VERSION "[^"]*' \
    "$STAGE_LIBDIR/cmake/oneflow/oneflowConfigVersion.cmake")"
  exit 1
fi
grep -q "not compatible\|version" "$tmp/old.log"
echo "==> README example built with CMake (find_package(oneflow CONFIG), oneflow::oneflow) and ran"
