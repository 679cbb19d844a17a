#!/usr/bin/env bash
# Builds client_golang's promlint (test/tools/promlint, the rules `promtool check metrics`
# applies) from the Go module proxy into ~/.cache/browserplane/bin/ (BROWSERPLANE_BIN_DIR
# overrides), outside the checkout so clones on one machine share it. Idempotent: does
# nothing when the binary exists. Prints its path as the last line of stdout, so callers
# can do: PROMLINT=$(scripts/promlint-binary.sh | tail -n1)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tool="$root/test/tools/promlint"
export GOTOOLCHAIN=local CGO_ENABLED=0
command -v go >/dev/null || { [[ -x /usr/local/go/bin/go ]] && export PATH="/usr/local/go/bin:$PATH"; }
command -v go >/dev/null || { echo "promlint-binary: go is not installed" >&2; exit 1; }

version=$(cd "$tool" && go list -m -f '{{.Version}}' github.com/prometheus/client_golang)
out="${BROWSERPLANE_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane/bin}"
bin="$out/promlint-$version"
if [[ ! -x "$bin" ]]; then
  mkdir -p "$out"
  echo "promlint-binary: building promlint (client_golang $version) into $out" >&2
  (cd "$tool" && go build -trimpath -o "$bin.tmp" .) >&2
  mv "$bin.tmp" "$bin"
fi
echo "$bin"
