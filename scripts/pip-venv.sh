#!/usr/bin/env bash
# Makes a venv holding one PyPI package at one version, once, outside the checkout, and prints
# the path of an executable in it (the last line of stdout; progress goes to stderr):
#   pip-venv.sh DIR REQUIREMENT MODULE VERSION EXECUTABLE
# DIR is the venv (reused when its .complete marker is there; a half-made one is made again),
# REQUIREMENT what pip installs ("kernel==0.131.0"), MODULE the module whose __version__ must
# then be VERSION, EXECUTABLE the venv's program to print ("bin/python"). Two runs starting at
# once make the venv once. Installs python3 and Debian's python3-venv when missing.
set -euo pipefail
dir=$1 requirement=$2 module=$3 version=$4 executable=$5
program="$dir/$executable"

ready() { [ -f "$dir/.complete" ] && [ -x "$program" ]; }
if ready; then echo "$program"; exit 0; fi

mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
if ready; then echo "$program"; exit 0; fi

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

echo "making a venv with $requirement in $dir (one time)…" >&2
rm -rf "$dir"
python3 -m venv "$dir" >&2
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "$requirement" >&2
"$dir/bin/python" -c "import $module, sys; sys.exit(0 if $module.__version__ == '$version' else '$module ' + $module.__version__ + ' installed, not $version')"
touch "$dir/.complete"
echo "$program"
