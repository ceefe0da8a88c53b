#!/usr/bin/env bash
# Builds HNC v1.1 (sigs.k8s.io/hierarchical-namespaces, the project hns succeeds) for the
# migration test (hack/migration-test.sh) and the benchmark against it (hack/bench.sh hnc), from
# the module the Go module proxy serves. Nothing of HNC is kept in this repository; the results
# are cached in $HNS_CACHE/hnc/vVERSION (a machine pays the build once, about a minute on 2
# cores). Prints that directory, which holds:
#   manager        HNC's controller manager (cmd/manager)
#   kubectl-hns    HNC's kubectl plugin (cmd/kubectl), to compare trees with
#   crds.yaml      HNC's four CRDs. The module ships them as its `make manifests` generated and
#                  patched them (config/crd/bases); the controller-gen its go.mod pins (v0.8.0)
#                  cannot run with today's Go (go/types panics in its loader), so they are taken
#                  as shipped.
#   webhooks.yaml  HNC's webhook configurations as shipped (config/webhook/manifests.yaml), for
#                  the test to point at the manager on loopback
#
#   HNS_HNC_VERSION  1.1.0 (default)
source "$(dirname "$0")/lib.sh"

command -v go >/dev/null || die "Go is needed to build HNC"
version="${HNS_HNC_VERSION:-1.1.0}"
OUT="$HNS_CACHE/hnc/v$version"
if [ -x "$OUT/manager" ] && [ -x "$OUT/kubectl-hns" ] && [ -s "$OUT/crds.yaml" ] && [ -s "$OUT/webhooks.yaml" ]; then
  log "HNC v$version cached in $OUT"
  echo "$OUT"
  exit 0
fi
mkdir -p "$OUT"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/hns-hnc.XXXXXX")"
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT

log "fetching sigs.k8s.io/hierarchical-namespaces@v$version from the Go module proxy"
src="$(cd "$WORK" && GOFLAGS= go mod download -json "sigs.k8s.io/hierarchical-namespaces@v$version" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')" \
  || die "sigs.k8s.io/hierarchical-namespaces@v$version is not served by the Go module proxy"
# The module zip carries vendor/modules.txt only (the proxy strips vendored code), so the
# dependencies come from the proxy at the versions HNC's go.sum pins. The module cache is
# read-only: build from a copy.
cp -r "$src" "$WORK/hnc"; chmod -R u+w "$WORK/hnc"; rm -rf "$WORK/hnc/vendor"
cd "$WORK/hnc"
log "building HNC's manager (about a minute on 2 cores the first time)"
GOFLAGS=-mod=mod CGO_ENABLED=0 go build -o "$WORK/manager" -ldflags "-s -w" ./cmd/manager \
  || die "building HNC's manager failed"
GOFLAGS=-mod=mod CGO_ENABLED=0 go build -o "$WORK/kubectl-hns" -ldflags "-s -w" ./cmd/kubectl \
  || die "building HNC's kubectl plugin failed"
for f in config/crd/bases/*.yaml; do cat "$f"; echo ---; done > "$WORK/crds.yaml"
grep -q 'kind: CustomResourceDefinition' "$WORK/crds.yaml" || die "found no CRDs in HNC's module"
cp config/webhook/manifests.yaml "$WORK/webhooks.yaml"
mv "$WORK/manager" "$WORK/kubectl-hns" "$WORK/crds.yaml" "$WORK/webhooks.yaml" "$OUT/"
log "cached HNC v$version in $OUT"
echo "$OUT"
