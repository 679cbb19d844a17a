# Sourced by scripts/images.sh (and the image tests set the same two variables): podman
# configured by files written here, not /etc. runc, not crun (crun fails on this kind of
# hybrid cgroup v1 host); cgroupfs (no systemd); no default ulimits (podman's are refused
# here). The overlay driver where the kernel lets us mount overlayfs (root on ext4 or
# xfs), else vfs, which copies every layer in full (a cold build takes several times as
# long and each container start copies the image). Storage lives in the cache, outside
# the checkout, so every clone on the machine shares images and build layers; one
# directory per driver, as containers/storage refuses a graph made by another driver.
BROWSERPLANE_CACHE=${BROWSERPLANE_CACHE:-$HOME/.cache/browserplane}
PODMAN_STATE=$BROWSERPLANE_CACHE/containers
mkdir -p "$PODMAN_STATE"
if [ -z "${BROWSERPLANE_STORAGE_DRIVER:-}" ]; then
  BROWSERPLANE_STORAGE_DRIVER=vfs
  probe=$(mktemp -d "$PODMAN_STATE/overlay-probe.XXXXXX")
  mkdir -p "$probe/lower" "$probe/upper" "$probe/work" "$probe/merged"
  if mount -t overlay overlay -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" "$probe/merged" 2>/dev/null; then
    umount "$probe/merged"
    BROWSERPLANE_STORAGE_DRIVER=overlay
  fi
  rm -rf "$probe"
fi
cat >"$PODMAN_STATE/containers.conf" <<CONF
# Written by scripts/podman-env.sh
[containers]
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "/run/browserplane/libpod"
CONF
cat >"$PODMAN_STATE/storage.conf" <<CONF
# Written by scripts/podman-env.sh
[storage]
driver = "$BROWSERPLANE_STORAGE_DRIVER"
graphroot = "$PODMAN_STATE/storage-$BROWSERPLANE_STORAGE_DRIVER"
runroot = "/run/browserplane/containers"
CONF
export CONTAINERS_CONF=$PODMAN_STATE/containers.conf
export CONTAINERS_STORAGE_CONF=$PODMAN_STATE/storage.conf
