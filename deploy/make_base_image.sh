#!/usr/bin/env bash
# Create a local stand-in for `python:3.11-slim` when no registry can be reached (`make image`).
#
# deploy/Dockerfile starts FROM python:3.11-slim. Where that image cannot be pulled (no Docker Hub,
# no Docker engine), this script builds an image of the same shape from Debian bookworm packages,
# whose python3 is CPython 3.11: a minimal debootstrap root with python3 and python3-venv,
# /usr/local/bin/python{,3} links, LANG=C.UTF-8 and CMD python3, and tags it
# docker.io/library/python:3.11-slim in buildah's local storage so `buildah bud --pull=never`
# resolves the Dockerfile's FROM to it. It does nothing when that tag already exists.
#
# Certificate authorities the host trusts locally (/usr/local/share/ca-certificates, e.g. a
# proxy's) are added to the stand-in and PIP_CERT points pip at the system bundle, so `pip install`
# inside the build trusts what the host trusts. The real python:3.11-slim needs neither.
#
# Environment: BUILDAH (default "buildah --storage-driver vfs"), DEBIAN_MIRROR (default: the
# host's first apt mirror, else deb.debian.org), BASE_TAG (default docker.io/library/python:3.11-slim).
set -euo pipefail

BUILDAH=${BUILDAH:-buildah --storage-driver vfs}
BASE_TAG=${BASE_TAG:-docker.io/library/python:3.11-slim}
SUITE=bookworm

if $BUILDAH images --quiet "$BASE_TAG" >/dev/null 2>&1; then
    echo "base image $BASE_TAG already present"
    exit 0
fi
for tool in debootstrap buildah; do
    command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install -y $tool" >&2; exit 1; }
done

if [ -z "${DEBIAN_MIRROR:-}" ]; then
    DEBIAN_MIRROR=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/*.sources \
        2>/dev/null | head -n1)
    DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
fi

work=$(mktemp -d /var/tmp/mlemu-base.XXXXXX)
rootfs="$work/rootfs"
cleanup() {
    # debootstrap may leave /proc or /sys mounted inside the root on failure.
    for m in proc sys dev/pts dev; do umount -l "$rootfs/$m" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

echo "debootstrap $SUITE from $DEBIAN_MIRROR into $rootfs"
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    "$SUITE" "$rootfs" "$DEBIAN_MIRROR" >"$work/debootstrap.log" 2>&1 || {
    tail -n 40 "$work/debootstrap.log" >&2
    exit 1
}

# Shape it like python:3.11-slim: python/python3 on /usr/local/bin, no apt lists or docs.
ln -sf /usr/bin/python3 "$rootfs/usr/local/bin/python3"
ln -sf /usr/bin/python3 "$rootfs/usr/local/bin/python"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null
fi
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* \
    "$rootfs"/usr/share/locale/* "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/*.log
chroot "$rootfs" python3 --version

tar -C "$rootfs" -cf "$work/rootfs.tar" .
ctr=$($BUILDAH from scratch)
$BUILDAH add "$ctr" "$work/rootfs.tar" /
$BUILDAH config \
    --env PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 \
    --env PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    --cmd python3 \
    --label org.opencontainers.image.description="Local stand-in for python:3.11-slim (Debian $SUITE python3)" \
    "$ctr"
$BUILDAH commit --rm "$ctr" "$BASE_TAG"
$BUILDAH images "$BASE_TAG"
