#!/usr/bin/env bash
# Builds test/go-client (a test client on the Go SDK github.com/onkernel/kernel-go-sdk
# v0.24.0, from the Go module proxy) into
# ~/.cache/browserplane/go-client/<hash of its sources>/go-client (BROWSERPLANE_GO_CLIENT_DIR
# overrides the root), outside the checkout so fresh clones on one machine share it.
# Idempotent: does nothing when the binary for these sources exists. Prints the binary's
# path as the last line of stdout (progress goes to stderr).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/../test/go-client"

# A go line newer than the local toolchain must fail here, not fetch another toolchain.
export GOTOOLCHAIN=local
export CGO_ENABLED=0
# Go as the polyglot machines install it, when no go is on PATH.
command -v go >/dev/null || { [[ -x /usr/local/go/bin/go ]] && export PATH="/usr/local/go/bin:$PATH"; }
command -v go >/dev/null || { echo "go-client: go is not installed" >&2; exit 1; }

hash=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16)
out="${BROWSERPLANE_GO_CLIENT_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane/go-client}/$hash"
if [[ -x "$out/go-client" ]]; then
  echo "$out/go-client"
  exit 0
fi

# Build into a scratch directory and move the file in only when it succeeded, so an
# interrupted build never leaves a binary that looks complete.
mkdir -p "$out"
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "go-client: building test/go-client (cold: a minute or two)" >&2
(cd "$src" && go build -mod=readonly -trimpath -o "$tmp/go-client" .)
mv "$tmp/go-client" "$out/go-client"
echo "$out/go-client"
