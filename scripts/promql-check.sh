#!/usr/bin/env bash
# Builds test/tools/promql (Prometheus's own PromQL parser, github.com/prometheus/prometheus
# v0.316.0, from the Go module proxy) into
# ~/.cache/browserplane/promql-check/<hash of its sources>/promql-check (BROWSERPLANE_PROMQL_CHECK_DIR
# overrides the root), outside the checkout so fresh clones on one machine share it.
# Idempotent: does nothing when the binary for these sources exists. Prints the binary's
# path as the last line of stdout (progress goes to stderr).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/../test/tools/promql"

# A go line newer than the local toolchain must fail here, not fetch another toolchain.
export GOTOOLCHAIN=local
export CGO_ENABLED=0
# Go as the polyglot machines install it, when no go is on PATH.
command -v go >/dev/null || { [[ -x /usr/local/go/bin/go ]] && export PATH="/usr/local/go/bin:$PATH"; }
command -v go >/dev/null || { echo "promql-check: go is not installed" >&2; exit 1; }

hash=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16)
out="${BROWSERPLANE_PROMQL_CHECK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane/promql-check}/$hash"
if [[ -x "$out/promql-check" ]]; then
  echo "$out/promql-check"
  exit 0
fi

# Build into a scratch directory and move the file in only when it succeeded, so an
# interrupted build never leaves a binary that looks complete.
mkdir -p "$out"
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "promql-check: building test/tools/promql (cold: a minute or two)" >&2
(cd "$src" && go build -mod=readonly -trimpath -o "$tmp/promql-check" .)
mv "$tmp/promql-check" "$out/promql-check"
echo "$out/promql-check"
