#!/usr/bin/env bash
# netns_hosts.sh: two "hosts" on one Linux machine for the multi-host tests (tests/test_multihost.cpp,
# docs/GLOBAL.md "Multi-host launching"): two network namespaces joined by a veth pair, with
# addresses on a private /24 that exists only between them. Needs root (CAP_NET_ADMIN) and `ip`.
#   netns_hosts.sh up TAG        makes TAG_a (10.231.0.1) and TAG_b (10.231.0.2)
#   netns_hosts.sh down TAG      kills what runs in them and removes them
#   netns_hosts.sh exec NS CMD...  runs CMD (words) on the host of namespace NS
#   netns_hosts.sh agent HOST CMD...
#                                Open MPI's plm_rsh_agent: runs CMD (a shell command line, as ssh
#                                would) on the host whose namespace holds address HOST
# The namespaces share the file system, so the same binaries serve both hosts. A host also gets
# its own UTS namespace and host name (the namespace's, "_" made "-"): Open MPI names its session
# directory and its shared-memory segments after the host name, and two hosts of one name would
# map each other's segments in the shared /dev/shm.
set -euo pipefail

subnet_prefix=10.231.0

ns_holding() {  # the namespace with address $1, or nothing
  # every pair uses the same addresses: look among the caller's own pair first (the agent runs in
  # mpirun's namespace, TAG_a), then among all
  local ns self candidates
  self="$(ip netns identify $$ 2>/dev/null || true)"
  candidates="$(ip netns list | awk '{print $1}')"
  [ -n "$self" ] && candidates="${self%_*}_a ${self%_*}_b $candidates"
  for ns in $candidates; do
    if ip -n "$ns" -4 -o addr show 2>/dev/null | grep -q " inet $1/"; then
      echo "$ns"
      return 0
    fi
  done
}

on_host() {  # on_host NS CMD...: CMD (words) in NS, under the host's own name
  local ns="$1"
  shift
  exec ip netns exec "$ns" unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' "${ns//_/-}" "$@"
}

cmd="${1:-}"
shift || true
case "$cmd" in
  up)
    tag="$1"
    ip netns add "${tag}_a"
    ip netns add "${tag}_b"
    # the veth ends are made directly inside the namespaces: nothing appears in the root one
    ip link add veth_a netns "${tag}_a" type veth peer name veth_b netns "${tag}_b"
    ip -n "${tag}_a" addr add "${subnet_prefix}.1/24" dev veth_a
    ip -n "${tag}_b" addr add "${subnet_prefix}.2/24" dev veth_b
    for h in a b; do
      ip -n "${tag}_$h" link set lo up
      ip -n "${tag}_$h" link set "veth_$h" up
    done
    ;;
  down)
    tag="$1"
    for h in a b; do
      ns="${tag}_$h"
      ip netns list | grep -qw "^$ns" || continue
      # deleting a namespace does not end its processes (an orted cut off by a partition)
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
      ip netns del "$ns" || true
    done
    ;;
  agent)
    # ssh-style: options first (none are used), then the host, then the command words
    while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
    host="$1"
    shift
    ns="$(ns_holding "$host")"
    if [ -z "$ns" ]; then
      echo "netns_hosts.sh agent: no network namespace holds address $host" >&2
      exit 255
    fi
    on_host "$ns" /bin/sh -c "$*"
    ;;
  exec)
    on_host "$@"
    ;;
  *)
    echo "usage: netns_hosts.sh up TAG | down TAG | exec NS CMD... | agent HOST CMD..." >&2
    exit 2
    ;;
esac
