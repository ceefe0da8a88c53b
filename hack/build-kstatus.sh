#!/usr/bin/env bash
# Builds hack/kstatus (a few lines of Go over sigs.k8s.io/cli-utils/pkg/kstatus, the status
# library of Flux and kpt, from the Go module proxy at the version hack/kstatus/go.mod pins) and
# prints the binary's path. Cached in $HNS_CACHE/kstatus/DIGEST, DIGEST being that of the
# program's files; the e2e test tests/tests/kstatus.rs runs it on hns's objects.
source "$(dirname "$0")/lib.sh"

command -v go >/dev/null || die "Go is needed to build the kstatus checker"
SRC="$(cd "$(dirname "$0")/kstatus" && pwd)"
digest="$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC/main.go" | sha256sum | cut -c1-12)"
OUT="$HNS_CACHE/kstatus/$digest"
if [ ! -x "$OUT/kstatus" ]; then
  log "building the kstatus checker (sigs.k8s.io/cli-utils from the Go module proxy)"
  mkdir -p "$OUT"
  (cd "$SRC" && GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -o "$OUT/kstatus.tmp.$$" .) >&2 \
    || die "building hack/kstatus failed"
  # Tests build it concurrently: each writes its own file and the rename is atomic.
  mv "$OUT/kstatus.tmp.$$" "$OUT/kstatus"
fi
echo "$OUT/kstatus"
