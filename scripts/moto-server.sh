#!/usr/bin/env bash
# Prints the path of moto's S3-compatible server (`moto[server]` 5.2.5 from PyPI), which the
# S3 store tests run on 127.0.0.1 as a real S3 endpoint. The venv is made once, outside the
# checkout (~/.cache/browserplane/moto-<version>, or BROWSERPLANE_MOTO_DIR), and reused; a
# half-made one (no .complete marker) is made again. Progress goes to stderr.
set -euo pipefail
VERSION=5.2.5
dir="${BROWSERPLANE_MOTO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane/moto-$VERSION}"
server="$dir/bin/moto_server"

ready() { [ -f "$dir/.complete" ] && [ -x "$server" ]; }
if ready; then echo "$server"; exit 0; fi

mkdir -p "$(dirname "$dir")"
# Two test runs starting at once make the venv once.
exec 9>"$dir.lock"
flock 9
if ready; then echo "$server"; exit 0; fi

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

echo "making a venv with moto[server]==$VERSION in $dir (one time)…" >&2
rm -rf "$dir"
python3 -m venv "$dir" >&2
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "moto[server]==$VERSION" >&2
"$dir/bin/python" -c "import moto, sys; sys.exit(0 if moto.__version__ == '$VERSION' else 'moto ' + moto.__version__ + ' installed, not $VERSION')"
touch "$dir/.complete"
echo "$server"
