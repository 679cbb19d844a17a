#!/usr/bin/env bash
# Builds test/go-client (a test client on the Go SDK github.com/onkernel/kernel-go-sdk
# v0.24.0, from the Go module proxy) into
# ~/.cache/browserplane/go-client/<hash of its sources>/go-client (BROWSERPLANE_GO_CLIENT_DIR
# overrides the root) with scripts/go-tool.sh, and prints the binary's path last.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/go-tool.sh" "$here/../test/go-client" go-client "${BROWSERPLANE_GO_CLIENT_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane/go-client}"
