#!/usr/bin/env bash
# make release: everything a release publishes, in one folder, $TARGET_DIR/dist/vVERSION, with
# a SHA256SUMS file over it (`sha256sum -c SHA256SUMS` checks a download):
#   kubectl-hns-OS-ARCH.tar.gz   the plugin for this machine's platform (kubectl-hns and its
#                                README), whose sha256 is written into deploy/krew/hns.yaml
#   hns-apiserver.oci.tar        the image (make image), and hns-apiserver.digest beside it
#   hns.yaml, hns-cert-manager.yaml
#                                deploy/'s manifests with the image pinned by that digest
#                                (hns-apiserver:vVERSION@sha256:…)
#   hns-prometheusrule.yaml      the alerts (docs/runbooks.md)
#   hns-VERSION.tgz              the Helm chart (charts/hns), packaged by helm (hack/build-helm.sh)
#                                with image.digest set to that digest
#   hns-apiserver.cdx.json, kubectl-hns.cdx.json
#                                a CycloneDX SBOM of each binary: every crate compiled into it, by
#                                cargo-cyclonedx (built from crates.io once, cached in
#                                $HNS_CACHE/cargo-cyclonedx)
# The folder's contents are what the release location the README names serves.
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

CYCLONEDX_VERSION="0.5.9"
VERSION="$(sed -n 's/^ *image: *hns-apiserver:v\([^ ]*\) *$/\1/p' config/default/deployment.yaml | head -n1)"
[ -n "$VERSION" ] || die "no 'image: hns-apiserver:vVERSION' in config/default/deployment.yaml"
grep -q "^  version: v$VERSION\$" deploy/krew/hns.yaml \
  || die "deploy/krew/hns.yaml is not for v$VERSION: update its version and URIs with the image tag"
OUT="$TARGET_DIR/dist/v$VERSION"
rm -rf "$OUT"
mkdir -p "$OUT"

# --- the plugin -------------------------------------------------------------------------------
cargo build --release -p kubectl-hns || die "cargo build --release -p kubectl-hns failed"
os="$(uname -s | tr '[:upper:]' '[:lower:]')"
case "$(uname -m)" in
  x86_64 | amd64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) die "unsupported machine $(uname -m)" ;;
esac
archive="kubectl-hns-$os-$arch.tar.gz"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp "$TARGET_DIR/release/kubectl-hns" plugin/README.md "$stage/"
# Reproducible: fixed owner, modes, order and times, and gzip without a timestamp.
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}"
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mode=u=rwX,go=rX --mtime="@$SOURCE_DATE_EPOCH" \
  -cf - kubectl-hns README.md | gzip -n >"$OUT/$archive"
sum="$(sha256sum "$OUT/$archive" | cut -d' ' -f1)"
sed -i "\|/$archive\$|,/sha256:/ s/sha256: .*/sha256: $sum/" deploy/krew/hns.yaml
grep -q "sha256: $sum" deploy/krew/hns.yaml || die "no $os/$arch entry in deploy/krew/hns.yaml"
log "$archive: sha256 $sum, written to deploy/krew/hns.yaml"

# --- the image and the manifests pinned to it -------------------------------------------------
image="$("$ROOT/hack/build-image.sh" | tail -n1)" || die "make image failed"
cp "$image" "$(dirname "$image")/hns-apiserver.digest" "$OUT/"
digest="$(cat "$OUT/hns-apiserver.digest")"
[[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || die "unexpected image digest '$digest'"
for manifest in hns.yaml hns-cert-manager.yaml; do
  sed "s|^\( *image: *hns-apiserver:v$VERSION\) *\$|\1@$digest|" "deploy/$manifest" >"$OUT/$manifest"
  grep -q "image: hns-apiserver:v$VERSION@$digest" "$OUT/$manifest" || die "no image to pin in deploy/$manifest"
done
cp deploy/hns-prometheusrule.yaml "$OUT/"

# --- the Helm chart, its image pinned by the same digest ----------------------------------------
helm="$("$ROOT/hack/build-helm.sh")" || die "building helm failed"
grep -q "^appVersion: v$VERSION\$" charts/hns/Chart.yaml || die "charts/hns/Chart.yaml's appVersion is not v$VERSION"
# One version for the chart and hns: a release's chart is never another release's.
grep -q "^version: $VERSION\$" charts/hns/Chart.yaml || die "charts/hns/Chart.yaml's version is not $VERSION"
cp -r charts/hns "$stage/hns"
sed -i "s|^  digest: \"\"\$|  digest: \"$digest\"|" "$stage/hns/values.yaml"
grep -q "^  digest: \"$digest\"\$" "$stage/hns/values.yaml" || die "no image digest to set in charts/hns/values.yaml"
"$helm" lint --strict "$stage/hns" >/dev/null || die "helm lint of the release's chart failed"
"$helm" package "$stage/hns" --destination "$OUT" >/dev/null || die "helm package failed"
chart="$(ls "$OUT"/hns-*.tgz)"
"$helm" template hns "$chart" --namespace hns-system | grep -q "image: hns-apiserver:v$VERSION@$digest" \
  || die "the packaged chart does not install the image by its digest"
log "$(basename "$chart"): the chart, installing hns-apiserver:v$VERSION@$digest"

# --- SBOMs --------------------------------------------------------------------------------------
CDX_ROOT="$HNS_CACHE/cargo-cyclonedx"
# It says "cargo-cyclonedx-cyclonedx 0.5.9".
if [ "$("$CDX_ROOT/bin/cargo-cyclonedx" cyclonedx --version 2>/dev/null | awk '{print $2}')" != "$CYCLONEDX_VERSION" ]; then
  log "installing cargo-cyclonedx $CYCLONEDX_VERSION from crates.io into $CDX_ROOT (a few minutes on 2 cores)"
  build="$(mktemp -d)"
  CARGO_TARGET_DIR="$build" cargo install --locked --force --quiet cargo-cyclonedx \
    --version "$CYCLONEDX_VERSION" --root "$CDX_ROOT" \
    || { rm -rf "$build"; die "cargo install cargo-cyclonedx $CYCLONEDX_VERSION failed"; }
  rm -rf "$build"
fi
# One SBOM per binary of the workspace, beside each package's Cargo.toml (<bin>_bin.cdx.json):
# the crates compiled into it for this platform, as Cargo.lock pins them; build-time
# dependencies are not in the binary and are left out. The two released ones are kept.
PATH="$CDX_ROOT/bin:$PATH" cargo cyclonedx --format json --spec-version 1.5 --describe binaries \
  --no-build-deps -q || die "cargo cyclonedx failed"
mv apiserver/hns-apiserver_bin.cdx.json "$OUT/hns-apiserver.cdx.json"
mv plugin/kubectl-hns_bin.cdx.json "$OUT/kubectl-hns.cdx.json"
rm -f -- */*_bin.cdx.json

# --- checksums ----------------------------------------------------------------------------------
(cd "$OUT" && sha256sum -- * >SHA256SUMS && sha256sum --quiet -c SHA256SUMS) || die "SHA256SUMS does not check"
log "release v$VERSION in $OUT:"
(cd "$OUT" && ls -l | tail -n +2 >&2)
