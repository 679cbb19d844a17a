#!/usr/bin/env bash
# Builds client_golang's promlint (test/tools/promlint, the rules `promtool check metrics`
# applies) from the Go module proxy into ~/.cache/browserplane/promlint/<hash of its
# sources>/promlint (BROWSERPLANE_PROMLINT_DIR overrides the root) with scripts/go-tool.sh.
# Prints its path as the last line of stdout: PROMLINT=$(scripts/promlint-binary.sh | tail -n1)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/go-tool.sh" "$here/../test/tools/promlint" promlint "${BROWSERPLANE_PROMLINT_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane/promlint}"
