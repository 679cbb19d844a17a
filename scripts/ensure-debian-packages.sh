#!/usr/bin/env bash
# Installs the Debian packages whose commands are missing. Arguments: COMMAND=PACKAGE pairs,
# e.g. `chromium=chromium zstd=zstd`. Browser sessions launch Debian's chromium (Playwright's
# own browser downloads are never used); profile downloads stream through zstd.
set -euo pipefail
missing=()
for pair in "$@"; do
  command_name=${pair%%=*}
  package=${pair#*=}
  if ! command -v "$command_name" >/dev/null 2>&1 && [ ! -x "/usr/bin/$command_name" ]; then
    missing+=("$package")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "missing Debian packages and no way to install them: run 'apt-get install -y ${missing[*]}' as root" >&2
    exit 1
  fi
fi
echo "installing Debian packages: ${missing[*]} (one time)…"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
