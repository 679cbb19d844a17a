#!/usr/bin/env bash
# The last step of `make test`: the two tiers that run our own container images,
# `make test-images` (both images as the chart's pods, podman + runc) and `make test-cluster`
# (a real kubelet + containerd node, Helm end to end), when this machine's caches are warm.
#
# Why only then: on a fresh machine these tiers first build the kubelet, kube-scheduler,
# kube-proxy and kubectl from Go modules (~8 min on 2 cores) and a Debian base, Node and both
# images (~6 min), on top of the ~20 min of Go builds the Kubernetes tier already needs; a cold
# `make test` would pass an hour. So a cold machine builds those caches here (progress on
# stderr), skips the two tiers with a line saying so, and every later run, CI's included,
# runs them (about 7 min with the caches warm, ~1 min more when the sources changed and the
# images rebuild).
#
#   BROWSERPLANE_CONTAINER_TIERS=auto    (default) as above
#   BROWSERPLANE_CONTAINER_TIERS=always  build what is missing, then run both tiers
#   BROWSERPLANE_CONTAINER_TIERS=never   skip both
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${BROWSERPLANE_CONTAINER_TIERS:-auto}
cache=${BROWSERPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/browserplane}

case "$mode" in
  never) echo "container tiers: skipped (BROWSERPLANE_CONTAINER_TIERS=never)" >&2; exit 0 ;;
  always|auto) ;;
  *) echo "container tiers: BROWSERPLANE_CONTAINER_TIERS must be auto, always or never, not '$mode'" >&2; exit 2 ;;
esac

warm=1
# The control-plane set is already built (the Kubernetes tier ran before this); its folder is the node set's.
bin=$(scripts/k8s-test-binaries.sh 2>/dev/null | tail -n1)
for b in kubelet kube-scheduler kube-proxy kubectl; do [[ -x "$bin/$b" ]] || warm=0; done
[[ -x "$(command -v podman || true)" || -x "$(command -v docker || true)" ]] || warm=0
compgen -G "$cache/images/api-*.tar" >/dev/null && compgen -G "$cache/images/browser-*.tar" >/dev/null || warm=0

if [[ "$mode" == auto && "$warm" == 0 ]]; then
  start=$SECONDS
  echo "container tiers: cold caches; building the node binaries and the images for the next run" >&2
  scripts/k8s-test-binaries.sh node >/dev/null
  scripts/images.sh >/dev/null
  echo "container tiers: caches built in $((SECONDS - start)) s; test-images and test-cluster SKIPPED on this cold run (run 'make test-images test-cluster', or the next 'make test')" >&2
  exit 0
fi
make --no-print-directory test-images test-cluster
