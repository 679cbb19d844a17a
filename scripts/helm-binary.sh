#!/usr/bin/env bash
# Builds Helm v3 from the Go module proxy into
# ~/.cache/browserplane/helm/<helm version>/helm (BROWSERPLANE_HELM_DIR overrides the root).
# Idempotent: does nothing when the binary exists. Prints the binary's path as the last
# line of stdout (everything else goes to stderr), so callers can do:
#   HELM=$(scripts/helm-binary.sh | tail -n1)
#
# Why from source: only package registries are reachable (no get.helm.sh, no Docker), and
# helm.sh/helm/v3's go.mod has no replace directives, so `go install pkg@version` works
# without a wrapper module.
set -euo pipefail

# Pinned here; bumping it is the only edit needed (its go line must be <= the local Go).
helm_version=${BROWSERPLANE_HELM_VERSION:-v3.22.0}
module=helm.sh/helm/v3

# A go line newer than the local toolchain must fail here, not fetch another toolchain.
export GOTOOLCHAIN=local
# A static binary, like Helm's own release builds (Makefile build-cross).
export CGO_ENABLED=0

# Outside the checkout, so fresh clones on one machine (CI runs in one) share the build.
out="${BROWSERPLANE_HELM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane/helm}/$helm_version"
if [[ -x "$out/helm" ]]; then
  echo "helm-binary: up to date ($helm_version)" >&2
  echo "$out/helm"
  exit 0
fi

# Go as the polyglot machines install it, when no go is on PATH.
command -v go >/dev/null || { [[ -x /usr/local/go/bin/go ]] && export PATH="/usr/local/go/bin:$PATH"; }
command -v go >/dev/null || { echo "helm-binary: go is not installed" >&2; exit 1; }

# The client-go version comes from helm's go.mod on the module proxy. (The proxy does not
# say which git commit a tag is, so `helm version` shows an empty GitCommit.)
gomod=$(go mod download -json "$module@$helm_version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
client_go=$(awk '$1 == "k8s.io/client-go" { print $2 }' "$gomod")
[[ "$client_go" =~ ^v0\.([0-9]+)\.[0-9]+$ ]] \
  || { echo "helm-binary: cannot read k8s.io/client-go's version from $gomod" >&2; exit 1; }
k8s_minor=${BASH_REMATCH[1]}

# Without these, Helm's built-in capabilities (used when no cluster is asked: helm
# template, helm lint) claim Kubernetes v1.20 and `helm version` says v3.x-unreleased.
# Helm's Makefile derives the Kubernetes version from client-go: v0.N -> 1.N.
ldflags="-s -w"
ldflags+=" -X $module/internal/version.version=$helm_version"
ldflags+=" -X $module/internal/version.metadata="
ldflags+=" -X $module/internal/version.gitTreeState=clean"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X $module/$pkg.k8sVersionMajor=1 -X $module/$pkg.k8sVersionMinor=$k8s_minor"
done

# Build into a scratch directory and move the file in only when it succeeded, so an
# interrupted build never leaves a binary that looks complete.
mkdir -p "$out"
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

start=$(date +%s)
echo "helm-binary: building helm $helm_version (cold, 2 busy cores: a few minutes)" >&2
GOBIN="$tmp" go install -trimpath -ldflags "$ldflags" "$module/cmd/helm@$helm_version"
mv "$tmp/helm" "$out/helm"
echo "helm-binary: built in $(( $(date +%s) - start ))s" >&2
"$out/helm" version >&2
echo "$out/helm"
