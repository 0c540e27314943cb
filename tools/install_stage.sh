# Sourced by the packaging checks (tools/check_cmake_consumer.sh, tools/check_static_link.sh):
# install_stage DIR installs build/ under DIR (meson install --destdir) and sets STAGE_ROOT
# (DIR + the configured prefix) and STAGE_LIBDIR (STAGE_ROOT + libdir); need_tool CMD PKG
# installs the Debian package PKG when CMD is missing (as ./run does: CI starts from a fresh
# Debian machine as root).

need_tool() {
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "==> installing $2"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "$2" >/dev/null
}

install_stage() {
  local dir=$1 dirs
  meson install -C build --destdir "$dir" >/dev/null
  dirs=$(meson introspect build --buildoptions | python3 -c '
import json, sys
opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
print(opts["prefix"], opts["libdir"])')
  read -r prefix libdir <<<"$dirs"
  STAGE_ROOT="$dir$prefix"
  case "$libdir" in
    /*) STAGE_LIBDIR="$dir$libdir" ;;
    *) STAGE_LIBDIR="$STAGE_ROOT/$libdir" ;;
  esac
}
