#!/usr/bin/env bash
# Prints the path of moto's S3-compatible server (`moto[server]` 5.2.5 from PyPI), which the
# S3 store tests run on 127.0.0.1 as a real S3 endpoint. The venv is made once, outside the
# checkout (~/.cache/browserplane/moto-<version>, or BROWSERPLANE_MOTO_DIR), and reused
# (scripts/pip-venv.sh). Progress goes to stderr.
set -euo pipefail
VERSION=5.2.5
dir="${BROWSERPLANE_MOTO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane/moto-$VERSION}"
exec "$(dirname "${BASH_SOURCE[0]}")/pip-venv.sh" "$dir" "moto[server]==$VERSION" moto "$VERSION" bin/moto_server
