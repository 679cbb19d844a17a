#!/usr/bin/env bash
# Builds the Kubernetes test control plane (etcd, kube-apiserver, kube-controller-manager)
# from the Go module proxy; with the argument `node`, builds the node half the cluster tier
# runs (kubelet, kube-scheduler, kube-proxy) instead, using the pinned wrapper module in test/k8s/tools, into
# ~/.cache/browserplane/k8s-bin/<kubernetes version>/ (BROWSERPLANE_K8S_BIN_DIR overrides). Idempotent: does nothing when the binaries exist.
# Prints the binary directory as the last line of stdout (everything else goes to stderr),
# so callers can do: BIN=$(scripts/k8s-test-binaries.sh | tail -n1)
#
# Why from source: there is no kube-apiserver package for Debian, npm or PyPI, Debian's
# etcd-server (3.4.23) is below what Kubernetes supports, and only package registries are
# reachable (no dl.k8s.io, no Docker).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/test/k8s/tools"

# A go line newer than the local toolchain must fail here, not fetch another toolchain.
export GOTOOLCHAIN=local
# Static binaries, like upstream's release builds (hack/lib/golang.sh).
export CGO_ENABLED=0

# Go as the polyglot machines install it, when no go is on PATH.
command -v go >/dev/null || { [[ -x /usr/local/go/bin/go ]] && export PATH="/usr/local/go/bin:$PATH"; }
command -v go >/dev/null || { echo "k8s-test-binaries: go is not installed" >&2; exit 1; }

# The version comes from the wrapper's go.mod, so bumping it there is the only edit needed.
k8s_version=$(cd "$tools" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
[[ "$k8s_version" =~ ^v1\.([0-9]+)\.[0-9]+$ ]] \
  || { echo "k8s-test-binaries: cannot read k8s.io/kubernetes version from $tools/go.mod" >&2; exit 1; }
k8s_minor=${BASH_REMATCH[1]}

# Outside the checkout, so fresh clones on one machine (CI runs in one) share the build.
out="${BROWSERPLANE_K8S_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane/k8s-bin}/$k8s_version"
set_name=${1:-control-plane}
case "$set_name" in
  control-plane)
    binaries=(etcd kube-apiserver kube-controller-manager)
    packages=(go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)
    estimate="~12 min" ;;
  # Upstream builds all three with CGO_ENABLED=0 too (kubelet since v1.31: KUBE_CGO_OVERRIDES
  # is empty in hack/lib/golang.sh), so the static build is the release configuration.
  node)
    binaries=(kubelet kube-scheduler kube-proxy kubectl)
    packages=(k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl)
    estimate="~8 min" ;;
  *) echo "k8s-test-binaries: unknown set '$set_name' (control-plane or node)" >&2; exit 2 ;;
esac

missing=0
for b in "${binaries[@]}"; do [[ -x "$out/$b" ]] || missing=1; done
if (( missing == 0 )); then
  echo "k8s-test-binaries: $set_name up to date ($k8s_version)" >&2
  echo "$out"
  exit 0
fi

# Stamp the version the release build would (hack/lib/version.sh); unstamped builds say
# v0.0.0-master, which breaks /version consumers such as Helm's kubeVersion checks. The
# build date is the tag's commit time from the proxy, so rebuilds are reproducible.
build_date=$(cd "$tools" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

# Build into a scratch directory and move the files in only when all succeeded, so an
# interrupted build never leaves a set that looks complete.
mkdir -p "$out"
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

start=$(date +%s)
echo "k8s-test-binaries: building ${binaries[*]} $k8s_version (cold, 2 busy cores: $estimate)" >&2
(
  cd "$tools"
  go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${packages[@]}"
)
# go build names go.etcd.io/etcd/server/v3 after its last non-version element: "server".
[[ -e "$tmp/server" ]] && mv "$tmp/server" "$tmp/etcd"
for b in "${binaries[@]}"; do mv "$tmp/$b" "$out/$b"; done
echo "k8s-test-binaries: built in $(( $(date +%s) - start ))s" >&2
ls -l "${binaries[@]/#/$out/}" >&2
echo "$out"
