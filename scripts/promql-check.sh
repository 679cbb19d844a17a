#!/usr/bin/env bash
# Builds test/tools/promql (Prometheus's own PromQL parser, github.com/prometheus/prometheus
# v0.316.0, from the Go module proxy) into
# ~/.cache/browserplane/promql-check/<hash of its sources>/promql-check
# (BROWSERPLANE_PROMQL_CHECK_DIR overrides the root) with scripts/go-tool.sh, and prints the
# binary's path last.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/go-tool.sh" "$here/../test/tools/promql" promql-check "${BROWSERPLANE_PROMQL_CHECK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane/promql-check}"
