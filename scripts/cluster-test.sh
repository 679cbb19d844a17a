#!/usr/bin/env bash
# Runs a command (by default the cluster test tier) inside a private node: new network, mount
# and PID namespaces that this script creates, so nothing the cluster does touches the host's
# network (hard rule: no addresses, bridges or iptables rules outside namespaces we create).
#
#   scripts/cluster-test.sh                      # vitest run --config test/vitest.cluster.ts
#   scripts/cluster-test.sh node_modules/.bin/vitest run --config test/vitest.cluster.ts test/cluster/x.test.ts
#
# Inside: lo up, an interface `node0` (a portless bridge) with the node IP 10.200.0.1/24 and a default route
# through it (so Service IPs route and kube-proxy's DNAT applies), IP forwarding on, / made
# rshared (kubelet wants shared propagation for its volumes), tmpfs over the fixed host paths
# containerd/CNI/kubelet write (/run/containerd, /run/netns, /var/lib/cni, /var/log/containers,
# /var/log/pods). test/cluster/support/cluster.ts starts the control plane, containerd, kubelet
# and kube-proxy in there. Vitest itself runs inside too: Pod, Service and node IPs exist only
# in this namespace, and Node cannot switch namespaces per call (setns is per thread).
#
# Cleanup needs no bookkeeping for processes, mounts or the namespace: when the command ends,
# PID 1 of the namespace exits, the kernel kills everything left in it (containerd shims and
# containers included) and the mount and network namespaces disappear with it. What outlives
# them are the cgroup directories the kubelet and runc created; this script made their root
# (under this process's own cgroup) and removes it afterwards.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

if [[ "${1:-}" == "--inside" ]]; then
  shift
  ip link set lo up
  # A bridge with no ports stands in for a dummy interface (this kernel has no CONFIG_DUMMY).
  ip link add node0 type bridge
  ip addr add 10.200.0.1/24 dev node0
  ip link set node0 up
  ip route add default dev node0
  sysctl -qw net.ipv4.ip_forward=1
  sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
  mount --make-rshared /
  for d in /run/containerd /run/netns /var/lib/cni /var/log/containers /var/log/pods; do
    mount -t tmpfs -o mode=0755 tmpfs "$d"
  done
  export BROWSERPLANE_CLUSTER_NETNS=1 BROWSERPLANE_CLUSTER_NODE_IP=10.200.0.1
  # Not exec: PID 1 must stay a shell that reaps orphans (containerd shims re-parent to it).
  "$@" &
  child=$!
  trap 'kill -TERM $child 2>/dev/null' TERM INT
  wait $child || { rc=$?; exit $rc; }
  exit 0
fi

[[ $(id -u) -eq 0 ]] || { echo "cluster-test: needs root (namespaces, mounts, cgroups)" >&2; exit 1; }
started=$(date +%s)
scripts/ensure-debian-packages.sh containerd=containerd runc=runc ctr=containerd \
  /usr/lib/cni/bridge=containernetworking-plugins iptables=iptables conntrack=conntrack unshare=util-linux
scripts/k8s-test-binaries.sh >/dev/null
scripts/k8s-test-binaries.sh node >/dev/null
images=$(scripts/cluster-test-image.sh | tail -n1)
# Everything that needs the package registries happens out here: inside the namespace there
# is no network but the cluster's own (and the egress proxy below). Helm (the chart tests) and
# our three images (`make images`; lines `api=<ref> <archive>`, `browser=…`, `runner=…`) for
# the Helm and app end-to-end tests.
scripts/helm-binary.sh >/dev/null
built_images=$(scripts/images.sh | grep -E '^(api|browser|runner)=')
echo "cluster-test: binaries and images ready in $(( $(date +%s) - started ))s" >&2

# The kubelet's cgroup root: a child of this process's own memory cgroup path, created in
# every v1 hierarchy, so container memory is charged where this session's is.
own=$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
cgroup_root="${own%/}/browserplane-cluster-$$"
created=()
for h in /sys/fs/cgroup/*/; do
  h=${h%/}
  [[ "$(basename "$h")" == unified ]] && continue
  mountpoint -q "$h" || continue
  path=$h
  for part in ${cgroup_root//\// }; do
    path="$path/$part"
    if [[ ! -d "$path" ]]; then
      mkdir "$path"
      created+=("$path")
      if [[ -f "$path/cpuset.cpus" ]]; then
        cat "$(dirname "$path")/cpuset.cpus" >"$path/cpuset.cpus"
        cat "$(dirname "$path")/cpuset.mems" >"$path/cpuset.mems"
      fi
    fi
  done
done
cleanup_cgroups() {
  local i d try
  # The kernel kills what was left in the PID namespace when its PID 1 exits, but the last
  # tasks can take a moment to leave their cgroups.
  for try in {1..50}; do
    for h in /sys/fs/cgroup/*/; do
      d="${h%/}$cgroup_root"
      [[ -d "$d" ]] && { find "$d" -depth -mindepth 1 -type d -exec rmdir {} + 2>/dev/null || true; }
    done
    [[ -z "$(for h in /sys/fs/cgroup/*/; do find "${h%/}$cgroup_root" -mindepth 1 -type d 2>/dev/null; done)" ]] && break
    sleep 0.2
  done
  for (( i=${#created[@]}-1; i>=0; i-- )); do rmdir "${created[i]}" 2>/dev/null || echo "cluster-test: could not remove ${created[i]}" >&2; done
}
trap cleanup_cgroups EXIT

# Mount points for the tmpfs the namespace puts over fixed paths; removed again when this
# script made them (they stay empty on the host: the mounts exist only in the namespace).
made_dirs=()
for d in /run/containerd /run/netns /var/lib/cni /var/log/containers /var/log/pods; do
  [[ -d "$d" ]] || { mkdir -p "$d"; made_dirs+=("$d"); }
done

# Temp files of the run (etcd data, containerd root, kubelet root, logs) go in one directory
# that is removed once the namespaces, and with them every mount into it, are gone.
tmp=$(mktemp -d /tmp/browserplane-cluster.XXXXXX)
# Traversable (not listable) by others: Postgres of the Helm test runs as its own user and
# initdb reads its password file from TMPDIR.
chmod 0711 "$tmp"
trap 'cleanup_cgroups; for d in "${made_dirs[@]}"; do rmdir "$d" 2>/dev/null || true; done; [[ -n "${BROWSERPLANE_K8S_KEEP_LOGS:-}" ]] && echo "cluster-test: logs kept in $tmp" >&2 || rm -rf "$tmp"' EXIT

# The tier's only way out: an HTTP forward proxy here, in the host's network namespace, on a
# unix socket (a file: reachable from inside, where test/cluster/support/egress.ts bridges
# <node ip>:3128 to it for the pods' app builds: npm, PyPI). Names on ports 80 and 443 only;
# every request is logged to $tmp/egress-proxy.log.
egress_socket="$tmp/egress-proxy.sock"
node scripts/cluster-egress-proxy.mjs "$egress_socket" >"$tmp/egress-proxy.log" 2>&1 &
egress_pid=$!
trap 'kill "$egress_pid" 2>/dev/null; cleanup_cgroups; for d in "${made_dirs[@]}"; do rmdir "$d" 2>/dev/null || true; done; [[ -n "${BROWSERPLANE_K8S_KEEP_LOGS:-}" ]] && echo "cluster-test: logs kept in $tmp" >&2 || rm -rf "$tmp"' EXIT
for _ in {1..50}; do [[ -S "$egress_socket" ]] && break; sleep 0.1; done
[[ -S "$egress_socket" ]] || { echo "cluster-test: the egress proxy did not start: $(cat "$tmp/egress-proxy.log")" >&2; exit 1; }

(( $# )) || set -- node_modules/.bin/vitest run --config test/vitest.cluster.ts
TMPDIR="$tmp" BROWSERPLANE_CLUSTER_CGROUP_ROOT="$cgroup_root" BROWSERPLANE_CLUSTER_IMAGES="$images" BROWSERPLANE_TEST_IMAGES="$built_images" \
  BROWSERPLANE_CLUSTER_EGRESS_SOCKET="$egress_socket" BROWSERPLANE_CLUSTER_EGRESS_LOG="$tmp/egress-proxy.log" \
  unshare --net --mount --pid --fork --mount-proc --propagation private -- "$0" --inside "$@"
