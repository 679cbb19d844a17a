#!/usr/bin/env bash
# Prints the path of a Python that has the Python SDK (`kernel` 0.131.0 from PyPI), which
# the e2e tier drives as a new user would. The venv is made once, outside the checkout
# (~/.cache/browserplane/python-kernel-<version>, or BROWSERPLANE_PYTHON_SDK_DIR), and
# reused; a half-made one (no .complete marker) is made again. Progress goes to stderr.
set -euo pipefail
VERSION=0.131.0
dir="${BROWSERPLANE_PYTHON_SDK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane/python-kernel-$VERSION}"
python="$dir/bin/python"

ready() { [ -f "$dir/.complete" ] && [ -x "$python" ]; }
if ready; then echo "$python"; exit 0; fi

mkdir -p "$(dirname "$dir")"
# Two e2e runs starting at once make the venv once.
exec 9>"$dir.lock"
flock 9
if ready; then echo "$python"; exit 0; fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/ensure-debian-packages.sh" python3=python3 >&2
# Debian ships venv's pip bootstrap (ensurepip) in a package of its own, with no command to look for.
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "installing Debian package python3-venv (one time)…" >&2
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >&2
fi

echo "making a venv with kernel==$VERSION in $dir (one time)…" >&2
rm -rf "$dir"
python3 -m venv "$dir" >&2
"$python" -m pip install --quiet --disable-pip-version-check --no-input "kernel==$VERSION" >&2
"$python" -c "import kernel, sys; sys.exit(0 if kernel.__version__ == '$VERSION' else 'kernel ' + kernel.__version__ + ' installed, not $VERSION')"
touch "$dir/.complete"
echo "$python"
