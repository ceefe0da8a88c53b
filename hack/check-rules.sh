#!/usr/bin/env bash
# hns's alerts, checked by Prometheus's own tool: `promtool check rules` on
# config/prometheus/hns-rules.yaml and `promtool test rules` on its unit tests
# (hns-rules.test.yaml: every alert fires on a made-up broken install and stays quiet on a
# healthy one). `make lint` runs it.
#
# promtool is built from the Go module proxy (github.com/prometheus/prometheus, nothing of it kept
# here) and cached in $HNS_CACHE/promtool/vVERSION (a machine pays the build once, a few minutes
# on 2 cores).
#   HNS_PROMETHEUS_VERSION  the module version, 0.316.0 by default (Prometheus 3.x's Go module is
#                           numbered v0.3MM.P)
source "$(dirname "$0")/lib.sh"

command -v go >/dev/null || die "Go is needed to build promtool"
version="${HNS_PROMETHEUS_VERSION:-0.316.0}"
OUT="$HNS_CACHE/promtool/v$version"
if [ ! -x "$OUT/promtool" ]; then
  log "building promtool (github.com/prometheus/prometheus@v$version) from the Go module proxy; a few minutes the first time"
  mkdir -p "$OUT"
  GOFLAGS= CGO_ENABLED=0 GOBIN="$OUT" go install -ldflags "-s -w" \
    "github.com/prometheus/prometheus/cmd/promtool@v$version" \
    || die "building promtool failed (is github.com/prometheus/prometheus@v$version served by the Go module proxy?)"
fi
cd "$(dirname "$0")/../config/prometheus"
"$OUT/promtool" check rules hns-rules.yaml
"$OUT/promtool" test rules hns-rules.test.yaml
