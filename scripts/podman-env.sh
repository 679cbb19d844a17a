# Sourced by scripts/images.sh (and the image tests set the same two variables): podman
# configured by files written here, not /etc. runc, not crun (crun fails on this kind of
# hybrid cgroup v1 host); cgroupfs (no systemd); the vfs driver (no overlay inside a
# container); no default ulimits (podman's are refused here). Storage lives in the cache,
# outside the checkout, so every clone on the machine shares images and build layers.
BROWSERPLANE_CACHE=${BROWSERPLANE_CACHE:-$HOME/.cache/browserplane}
PODMAN_STATE=$BROWSERPLANE_CACHE/containers
mkdir -p "$PODMAN_STATE"
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
driver = "vfs"
graphroot = "$PODMAN_STATE/storage"
runroot = "/run/browserplane/containers"
CONF
export CONTAINERS_CONF=$PODMAN_STATE/containers.conf
export CONTAINERS_STORAGE_CONF=$PODMAN_STATE/storage.conf
