#!/usr/bin/env bash
# End-to-end tests. Against HNS_E2E_KUBECONFIG when set (a cluster with hns installed);
# otherwise against a fresh local control plane with hns, started here and stopped at exit.
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

cargo build -p hns-apiserver -p kubectl-hns || die "cargo build failed"
if [ -n "${HNS_E2E_KUBECONFIG:-}" ]; then
  log "running e2e tests against $HNS_E2E_KUBECONFIG"
  exec cargo test -p hns-e2e -- "$@"
fi

DIR="$(mktemp -d "${TMPDIR:-/tmp}/hns-e2e.XXXXXX")"
cleanup() {
  local rc=$?
  if [ $rc -ne 0 ] && [ -d "$DIR/logs" ]; then
    for f in "$DIR"/logs/*.log; do echo "----- last lines of $f" >&2; tail -n 25 "$f" >&2; done
  fi
  "$ROOT/hack/hns-up.sh" down "$DIR" >/dev/null 2>&1 || true
  "$ROOT/hack/control-plane.sh" down "$DIR" >/dev/null 2>&1 || true
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT
"$ROOT/hack/control-plane.sh" up "$DIR"
"$ROOT/hack/hns-up.sh" up "$DIR"
export HNS_E2E_KUBECONFIG="$DIR/kubeconfig" HNS_E2E_DIR="$DIR"
log "running e2e tests against the local control plane in $DIR"
cargo test -p hns-e2e -- --skip diagnose_ "$@"
cargo test -p hns-e2e --test diagnose -- --test-threads=1 "$@"
