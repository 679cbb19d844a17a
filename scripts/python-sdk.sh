#!/usr/bin/env bash
# Prints the path of a Python that has the Python SDK (`kernel` 0.131.0 from PyPI), which
# the e2e tier drives as a new user would. The venv is made once, outside the checkout
# (~/.cache/browserplane/python-kernel-<version>, or BROWSERPLANE_PYTHON_SDK_DIR), and
# reused (scripts/pip-venv.sh). Progress goes to stderr.
set -euo pipefail
VERSION=0.131.0
dir="${BROWSERPLANE_PYTHON_SDK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane/python-kernel-$VERSION}"
exec "$(dirname "${BASH_SOURCE[0]}")/pip-venv.sh" "$dir" "kernel==$VERSION" kernel "$VERSION" bin/python
