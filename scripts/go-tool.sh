#!/usr/bin/env bash
# Builds a Go program of the repository's test tools (its own go.mod, its modules from the Go
# module proxy) into <cache root>/<hash of its sources>/<name>, outside the checkout so fresh
# clones on one machine share it, and prints the binary's path as the last line of stdout
# (progress goes to stderr). Idempotent: does nothing when the binary for these sources exists.
#   go-tool.sh SOURCE_DIR NAME CACHE_ROOT
# An interrupted build never leaves a binary that looks complete.
set -euo pipefail
src=$1 name=$2 root=$3

# A go line newer than the local toolchain must fail here, not fetch another toolchain.
export GOTOOLCHAIN=local
export CGO_ENABLED=0
# Go as the polyglot machines install it, when no go is on PATH.
command -v go >/dev/null || { [[ -x /usr/local/go/bin/go ]] && export PATH="/usr/local/go/bin:$PATH"; }
command -v go >/dev/null || { echo "$name: go is not installed" >&2; exit 1; }

hash=$(cat "$src"/go.mod "$src"/go.sum "$src"/*.go | sha256sum | cut -c1-16)
out="$root/$hash"
if [[ -x "$out/$name" ]]; then
  echo "$out/$name"
  exit 0
fi
mkdir -p "$out"
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "$name: building $src (cold: a minute or two)" >&2
(cd "$src" && go build -mod=readonly -trimpath -o "$tmp/$name" .) >&2
mv "$tmp/$name" "$out/$name"
echo "$out/$name"
