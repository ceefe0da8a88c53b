#!/usr/bin/env bash
# Builds the sandbox ("pause") image the nodes of hack/nodes.sh give containerd, without a
# registry: Kubernetes' own build/pause/linux/pause.c, taken from the k8s.io/kubernetes module of
# the control plane's version in the Go module cache (never copied into this repository),
# compiled static with gcc as Kubernetes' build/pause/Makefile does, and packed into an OCI image
# archive that `ctr images import` loads. Cached in $HNS_CACHE/pause/vVERSION; prints the
# archive's path. The image is named hns.local/pause:vVERSION (a name no registry serves, so
# containerd never tries to pull it) with the same user as Kubernetes' image (65535).
#
# The archive is deterministic (oci_image_archive in lib.sh): the same pause.c and gcc give
# the same image digest.
source "$(dirname "$0")/lib.sh"

apt_install gcc libc6-dev python3
command -v go >/dev/null || die "Go is needed to fetch k8s.io/kubernetes (go1.26 or newer)"
version="$(k8s_version)"
OUT="$HNS_CACHE/pause/v$version"
ARCHIVE="$OUT/pause.tar"
if [ -f "$ARCHIVE" ]; then
  echo "$ARCHIVE"
  exit 0
fi
mkdir -p "$OUT"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/hns-pause.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

src="$(cd "$WORK" && GOFLAGS='' go mod download -json "k8s.io/kubernetes@v$version" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')/build/pause/linux/pause.c" \
  || die "k8s.io/kubernetes@v$version is not served by the Go module proxy"
[ -f "$src" ] || die "$src not found in the module"
log "building the pause image from $src"
mkdir -p "$WORK/rootfs"
gcc -Os -Wall -Werror -static -DVERSION="v$version-hns" -o "$WORK/rootfs/pause" "$src" \
  || die "compiling pause.c failed"
strip "$WORK/rootfs/pause"
"$WORK/rootfs/pause" -v >/dev/null || die "the pause binary does not run"

oci_image_archive "$WORK/rootfs" "hns.local/pause:v$version" "$WORK/image.tar" 65535:65535 /pause
[ -s "$WORK/image.tar" ] || die "packing the pause image failed"
mv "$WORK/image.tar" "$ARCHIVE"
log "cached the pause image hns.local/pause:v$version in $ARCHIVE"
echo "$ARCHIVE"
