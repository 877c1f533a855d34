#!/usr/bin/env bash
# `make image`: build deploy/Dockerfile with buildah, without a Docker engine or a registry.
#
#   WITH_TENSORFLOW=true  (default) -> localhost/mlemu:latest
#   WITH_TENSORFLOW=false           -> localhost/mlemu:slim (scikit-learn, XGBoost, custom only)
#
# buildah runs with chroot isolation and the vfs storage driver, which need no daemon, no
# overlayfs and no user namespaces. The FROM image python:3.11-slim cannot be pulled here, so
# deploy/make_base_image.sh builds a local stand-in first (once). --layers keeps the dependency
# layers between builds, so a source change rebuilds in seconds. buildah and debootstrap are
# Debian packages (and curl, which `make image-test` uses); they are installed when missing
# and this runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."

WITH_TENSORFLOW=${WITH_TENSORFLOW:-true}
case "$WITH_TENSORFLOW" in
    true) default_tag=localhost/mlemu:latest ;;
    false) default_tag=localhost/mlemu:slim ;;
    *) echo "WITH_TENSORFLOW must be true or false, not '$WITH_TENSORFLOW'" >&2; exit 2 ;;
esac
IMAGE=${IMAGE:-$default_tag}
BUILDAH=${BUILDAH:-buildah --storage-driver vfs}
export BUILDAH

missing=()
for tool in buildah debootstrap curl; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "missing ${missing[*]}: apt-get install -y ${missing[*]} (as root)" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

bash deploy/make_base_image.sh

start=$(date +%s)
nice $BUILDAH bud --isolation chroot --pull=never --layers \
    -f deploy/Dockerfile --build-arg WITH_TENSORFLOW="$WITH_TENSORFLOW" -t "$IMAGE" .
echo "built $IMAGE (WITH_TENSORFLOW=$WITH_TENSORFLOW) in $(( $(date +%s) - start )) s"
$BUILDAH images "$IMAGE"
