#!/usr/bin/env bash
# Installs Debian's chromium when it is missing. Browser sessions (later features) launch it;
# Playwright's own browser downloads are never used.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "chromium is missing and this user cannot install it: run 'apt-get install -y chromium' as root" >&2
    exit 1
  fi
fi
echo "installing Debian's chromium (one time)…"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium
