#!/usr/bin/env bash
# make image: the OCI image of hns-apiserver that deploy/hns.yaml runs, built from the release
# binary without a container daemon, a registry or a base image, and reproducible: the same
# commit, toolchain and Debian libraries give the same digest, wherever the checkout is.
#
# The root filesystem is one layer holding only what the binary needs: the binary, the shared
# libraries ldd lists and the dynamic loader, /etc/passwd and /etc/group for uid/gid 65532, and
# /etc/nsswitch.conf. No shell, no CA bundle (hns-apiserver trusts only the cluster CA of its
# ServiceAccount, or of --kubeconfig), no /tmp (it writes no files; the Deployment mounts the
# root read-only).
#
# Writes $TARGET_DIR/image/hns-apiserver.oci.tar, an OCI image layout as a tar, which also holds
# the manifest.json `docker load` reads, as `docker save` of Docker 25 writes both. Beside it:
# hns-apiserver.digest (the manifest digest, sha256:…) and hns-apiserver.ref (the reference,
# e.g. hns-apiserver:v0.1.0). The archive's path is the last line of stdout, so that
# ARCHIVE=$(hack/build-image.sh) works; everything else goes to stderr.
#
# SOURCE_DATE_EPOCH (default: the commit time of HEAD) fixes every timestamp in the image.
source "$(dirname "$0")/lib.sh"

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
# cargo reads a relative CARGO_TARGET_DIR from where it runs: here.
[[ "$TARGET_DIR" = /* ]] || TARGET_DIR="$ROOT/$TARGET_DIR"
export LC_ALL=C
apt_install jq

OUT="$TARGET_DIR/image"
ARCHIVE="$OUT/hns-apiserver.oci.tar"
ENTRYPOINT=/usr/local/bin/hns-apiserver

# The reference is the one the Deployment runs, so that a node that imports the archive needs no
# pull; containerd and docker name it in full (docker.io/library/hns-apiserver:v0.1.0).
REF="$(sed -n 's/^ *image: *\(hns-apiserver:[^ ]*\) *$/\1/p' config/default/deployment.yaml | head -n1)"
[ -n "$REF" ] || die "no 'image: hns-apiserver:TAG' in config/default/deployment.yaml"
TAG="${REF##*:}"
FULL_REF="docker.io/library/$REF"

REVISION="$(git rev-parse HEAD)" || die "$ROOT is not a git checkout: the image is labelled with its commit"
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}"
[[ "$SOURCE_DATE_EPOCH" =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH: expected seconds since 1970"
CREATED="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
# Read-only: a plain `git status` may rewrite the index while others use the checkout.
if [ -n "$(git --no-optional-locks status --porcelain --untracked-files=no)" ]; then
  log "the work tree has uncommitted changes: the image is labelled $REVISION but is not exactly that commit"
fi
case "$(uname -m)" in
  x86_64 | amd64) ARCH=amd64 ;;
  aarch64 | arm64) ARCH=arm64 ;;
  *) die "unsupported machine $(uname -m)" ;;
esac

# --- the binary --------------------------------------------------------------------------------
# The same source gives the same bytes, but absolute paths reach the binary through panic
# locations: the registry sources under CARGO_HOME and the code build scripts generate in
# TARGET_DIR. Mapping them to fixed names makes the binary independent of where the checkout,
# the target directory and cargo's home are. The flags are passed only here, so the other builds
# keep theirs; the artifacts of both live side by side in target/release.
CARGO_HOME_DIR="${CARGO_HOME:-$HOME/.cargo}"
read -ra flags <<<"${RUSTFLAGS:-}"
flags+=("--remap-path-prefix=$ROOT=/hns" "--remap-path-prefix=$CARGO_HOME_DIR=/cargo")
# The last matching prefix wins, so a target directory outside the checkout comes after it.
[ "${TARGET_DIR#"$ROOT"/}" = "$TARGET_DIR" ] && flags+=("--remap-path-prefix=$TARGET_DIR=/hns/target")
# The encoded form keeps paths with spaces whole.
CARGO_ENCODED_RUSTFLAGS="$(IFS=$'\x1f'; printf '%s' "${flags[*]}")"
export CARGO_ENCODED_RUSTFLAGS
log "cargo build --release --locked -p hns-apiserver (path prefixes remapped)"
# Without SOURCE_DATE_EPOCH: C compilers read it only for __DATE__ and __TIME__, which none of
# the C sources built here use, but cc makes cargo rebuild the C code (jemalloc, OpenSSL's shim)
# and most crates above it whenever it changes, as it does with every commit.
env -u SOURCE_DATE_EPOCH cargo build --release --locked -p hns-apiserver >&2 || die "cargo build --release failed"
BIN="$TARGET_DIR/release/hns-apiserver"

# --- the root filesystem -----------------------------------------------------------------------
WORK="$OUT/work"
rm -rf "$WORK"
trap 'rm -rf "$WORK"' EXIT
ROOTFS="$WORK/rootfs"
LAYOUT="$WORK/layout"
BLOBS="$LAYOUT/blobs/sha256"
mkdir -p "$ROOTFS" "$BLOBS"

# Every mode is set explicitly, so that the umask of the build does not reach the image.
install -D -m 0755 "$BIN" "$ROOTFS$ENTRYPOINT"
# A build of the same target directory without these flags (make bench's) may have replaced the
# binary since cargo finished; that one names cargo's home, ours does not.
if grep -qF "$CARGO_HOME_DIR/registry/" "$ROOTFS$ENTRYPOINT"; then
  die "$BIN names $CARGO_HOME_DIR: it was built without the remapped paths (another build replaced it?); run again"
fi
# Each library at the path ldd resolved it to, which is on the loader's default search path; the
# loader at the path the binary names (PT_INTERP). No symbolic links: the files themselves.
ldd_out="$(ldd "$BIN")" || die "ldd $BIN failed"
if grep -q 'not found' <<<"$ldd_out"; then die "libraries of $BIN not found: $ldd_out"; fi
while read -r lib; do
  install -D -m 0644 "$(readlink -f "$lib")" "$ROOTFS$lib"
done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 }' <<<"$ldd_out")
loader="$(awk '$1 ~ /^\// && $2 != "=>" { print $1 }' <<<"$ldd_out")"
[ -n "$loader" ] || die "ldd names no dynamic loader for $BIN"
install -D -m 0755 "$(readlink -f "$loader")" "$ROOTFS$loader"

mkdir -p "$ROOTFS/etc"
printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
  'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' >"$ROOTFS/etc/passwd"
printf '%s\n' 'root:x:0:' 'nonroot:x:65532:' >"$ROOTFS/etc/group"
# Without this file glibc asks DNS before /etc/hosts, where the kubelet writes a Pod's hostAliases.
printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"$ROOTFS/etc/nsswitch.conf"
chmod 0644 "$ROOTFS"/etc/*
find "$ROOTFS" -type d -exec chmod 0755 {} +

# --- the layer, config, manifest and index -----------------------------------------------------
# tar and gzip as reproducible-builds.org advises: names sorted, one mtime, owner root, no
# atime/ctime, no name or time in the gzip header.
repro_tar() { # DIR OUTPUT: DIR's entries, without a leading ./
  local entries
  mapfile -t entries < <(find "$1" -mindepth 1 -maxdepth 1 -printf '%P\n' | sort)
  tar --create --file "$2" --directory "$1" --sort=name --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner "${entries[@]}"
}
sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }
# blob FILE: moves FILE into the layout under its digest and prints the digest.
blob() {
  local d
  d="$(sha "$1")"
  mv "$1" "$BLOBS/$d"
  echo "$d"
}

repro_tar "$ROOTFS" "$WORK/layer.tar"
DIFF_ID="$(sha "$WORK/layer.tar")"
UNCOMPRESSED="$(size "$WORK/layer.tar")"
gzip -9 --no-name <"$WORK/layer.tar" >"$WORK/layer.tar.gz"
rm "$WORK/layer.tar"
COMPRESSED="$(size "$WORK/layer.tar.gz")"
LAYER="$(blob "$WORK/layer.tar.gz")"

SOURCE="$(sed -n 's/^repository = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
LICENSE="$(sed -n 's/^license = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
# jq -S sorts keys and -j writes no newline: the same input gives the same bytes.
jq -njcS --arg created "$CREATED" --arg arch "$ARCH" --arg diff "sha256:$DIFF_ID" \
  --arg entry "$ENTRYPOINT" --arg source "$SOURCE" --arg version "$TAG" \
  --arg revision "$REVISION" --arg license "$LICENSE" '{
    created: $created, architecture: $arch, os: "linux",
    config: {
      User: "65532:65532", Entrypoint: [$entry], WorkingDir: "/",
      Labels: {
        "org.opencontainers.image.title": "hns-apiserver",
        "org.opencontainers.image.source": $source,
        "org.opencontainers.image.version": $version,
        "org.opencontainers.image.revision": $revision,
        "org.opencontainers.image.created": $created,
        "org.opencontainers.image.licenses": $license
      }
    },
    rootfs: {type: "layers", diff_ids: [$diff]},
    history: [{created: $created, created_by: "hack/build-image.sh"}]
  }' >"$WORK/config.json"
CONFIG_SIZE="$(size "$WORK/config.json")"
CONFIG="$(blob "$WORK/config.json")"

jq -njcS --arg config "sha256:$CONFIG" --argjson config_size "$CONFIG_SIZE" \
  --arg layer "sha256:$LAYER" --argjson layer_size "$COMPRESSED" '{
    schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $config, size: $config_size},
    layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $layer, size: $layer_size}]
  }' >"$WORK/manifest.json"
MANIFEST_SIZE="$(size "$WORK/manifest.json")"
MANIFEST="$(blob "$WORK/manifest.json")"
DIGEST="sha256:$MANIFEST"

# ref.name is the tag, as the OCI layout means it (skopeo's oci-archive:FILE:v0.1.0);
# io.containerd.image.name is the full name under which `ctr images import` stores the image
# and Docker ≥ 25 loads it.
jq -njcS --arg digest "$DIGEST" --argjson size "$MANIFEST_SIZE" --arg arch "$ARCH" \
  --arg tag "$TAG" --arg name "$FULL_REF" '{
    schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
    manifests: [{
      mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $digest, size: $size,
      platform: {architecture: $arch, os: "linux"},
      annotations: {"io.containerd.image.name": $name, "org.opencontainers.image.ref.name": $tag}
    }]
  }' >"$LAYOUT/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$LAYOUT/oci-layout"
# What docker load reads before Docker 25 (and skopeo's docker-archive:); the blobs are shared.
jq -njcS --arg config "blobs/sha256/$CONFIG" --arg layer "blobs/sha256/$LAYER" --arg ref "$REF" \
  '[{Config: $config, RepoTags: [$ref], Layers: [$layer]}]' >"$LAYOUT/manifest.json"
find "$LAYOUT" -type f -exec chmod 0644 {} +
find "$LAYOUT" -type d -exec chmod 0755 {} +

repro_tar "$LAYOUT" "$WORK/image.tar"
mv "$WORK/image.tar" "$ARCHIVE"
printf '%s\n' "$DIGEST" >"$OUT/hns-apiserver.digest"
printf '%s\n' "$REF" >"$OUT/hns-apiserver.ref"

mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1000000 }'; }
log "image $REF ($FULL_REF), $ARCH, revision $REVISION, created $CREATED"
log "digest $DIGEST"
log "size $(mb "$COMPRESSED") compressed ($COMPRESSED bytes), $(mb "$UNCOMPRESSED") uncompressed"
[ "$COMPRESSED" -lt 25000000 ] || log "warning: the compressed layer is over the 25 MB goal"
log "archive $ARCHIVE ($(mb "$(size "$ARCHIVE")")); digest and reference beside it"
echo "$ARCHIVE"
