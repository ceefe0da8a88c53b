#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v4 from the Go module proxy, at HELM_VERSION) and prints the binary's
# path. Cached in $HNS_CACHE/helm/VERSION. The chart's tests (tests/tests/helm.rs and `make
# chart-lint`) and `make release` (the packaged chart) use it.
source "$(dirname "$0")/lib.sh"

HELM_VERSION="${HELM_VERSION:-v4.3.1}"
OUT="$HNS_CACHE/helm/$HELM_VERSION"
if [ ! -x "$OUT/helm" ]; then
  command -v go >/dev/null || die "Go is needed to build helm"
  log "building helm $HELM_VERSION from the Go module proxy (a few minutes, once)"
  mkdir -p "$OUT"
  # Tests may build it concurrently: each writes its own directory and the rename is atomic.
  tmp="$(mktemp -d "$OUT/build.XXXXXX")"
  GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS=-mod=mod go install \
    -ldflags "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" >&2 || { rm -rf "$tmp"; die "building helm failed"; }
  mv "$tmp/helm" "$OUT/helm"
  rm -rf "$tmp"
fi
echo "$OUT/helm"
