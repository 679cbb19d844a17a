#!/usr/bin/env bash
# Builds the cluster tier's two test images as docker-archive tars (what `podman save` writes
# and `ctr -n k8s.io images import` reads), from test/cluster/image/main.go:
#   testbox.tar  localhost/browserplane/testbox:test   entrypoint /bpbox, cmd serve
#   pause.tar    localhost/browserplane/pause:test     entrypoint /bpbox pause (containerd's sandbox image)
# into ~/.cache/browserplane/cluster-images/ (BROWSERPLANE_CLUSTER_IMAGE_DIR overrides), and
# prints that directory as the last line. No registry, Docker or podman is needed: each image is
# one layer holding one static Go binary, and the archive is written with tar and sha256sum.
# Rebuilt every run (about a second with a warm Go cache); the output is byte-for-byte stable.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$root/test/cluster/image"
out="${BROWSERPLANE_CLUSTER_IMAGE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane/cluster-images}"
export GOTOOLCHAIN=local CGO_ENABLED=0
command -v go >/dev/null || { [[ -x /usr/local/go/bin/go ]] && export PATH="/usr/local/go/bin:$PATH"; }

case "$(uname -m)" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

start=$(date +%s%N)
mkdir -p "$work/rootfs/tmp" "$work/rootfs/scratch" "$work/rootfs/etc"
chmod 1777 "$work/rootfs/tmp"
(cd "$src" && go build -trimpath -ldflags "-s -w" -o "$work/rootfs/bpbox" .)
printf 'root:x:0:0:root:/:/bpbox\nbrowser:x:10001:10001:browser:/tmp:/bpbox\n' >"$work/rootfs/etc/passwd"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/rootfs" -cf "$work/layer.tar" .
layer=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)

# name, entrypoint JSON
pack() {
  local name=$1 tag=$2 entrypoint=$3 dir="$work/$1"
  mkdir -p "$dir/$layer"
  cp "$work/layer.tar" "$dir/$layer/layer.tar"
  printf '{"architecture":"%s","os":"linux","created":"1970-01-01T00:00:00Z","config":{"Entrypoint":%s,"Env":["PATH=/"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"scripts/cluster-test-image.sh"}]}' \
    "$arch" "$entrypoint" "$layer" >"$dir/config.json"
  local config
  config=$(sha256sum "$dir/config.json" | cut -d' ' -f1)
  mv "$dir/config.json" "$dir/$config.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$config" "$tag" "$layer" >"$dir/manifest.json"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$dir" -cf "$out/.$name.tar.tmp" .
  mv "$out/.$name.tar.tmp" "$out/$name.tar"
}
pack testbox localhost/browserplane/testbox:test '["/bpbox","serve"]'
pack pause localhost/browserplane/pause:test '["/bpbox","pause"]'
echo "cluster-test-image: testbox.tar and pause.tar in $(( ($(date +%s%N) - start) / 1000000 )) ms" >&2
echo "$out"
