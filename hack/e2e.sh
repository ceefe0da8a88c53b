#!/usr/bin/env bash
# End-to-end tests. Against HNS_E2E_KUBECONFIG when set (a cluster with hns installed);
# otherwise against a fresh local control plane with hns, started here and stopped at exit.
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

cargo build -p hns-apiserver -p kubectl-hns || die "cargo build failed"
link_completer
if [ -n "${HNS_E2E_KUBECONFIG:-}" ]; then
  log "running e2e tests against $HNS_E2E_KUBECONFIG"
  exec cargo test -p hns-e2e -- "$@"
fi

throwaway_cluster e2e
"$ROOT/hack/control-plane.sh" up "$DIR"
"$ROOT/hack/hns-up.sh" up "$DIR"
use_control_plane "$DIR"
export HNS_E2E_KUBECONFIG="$DIR/kubeconfig" HNS_E2E_DIR="$DIR"
log "running e2e tests against the local control plane in $DIR"
cargo test -p hns-e2e -- --skip diagnose_ "$@"
# The diagnose tests wait on the namespace controller's conditions: let it first finish the
# deletions the suites above left behind (hundreds of namespaces), or their waits count its
# backlog. Namespaces still terminating after that are listed, not waited for.
for _ in $(seq 300); do
  terminating="$(kubectl --kubeconfig "$DIR/kubeconfig" get namespaces --no-headers 2>/dev/null | awk '$2 == "Terminating" { print $1 }')" || true
  [ -z "$terminating" ] && break
  sleep 1
done
[ -z "$terminating" ] || log "still terminating before the diagnose tests: $(echo "$terminating" | tr '\n' ' ')"
cargo test -p hns-e2e --test diagnose -- --test-threads=1 "$@"
# The per-user views again, decided by SubjectAccessReviews alone (docs/access.md): the mode for
# authorizers hns cannot read.
log "per-user views with --view-authorization=review"
HNS_VIEW_AUTHORIZATION=review "$ROOT/hack/hns-up.sh" up "$DIR"
cargo test -p hns-e2e --test views -- "$@"
# New namespaces again, with lone namespaces unlabelled (config/components/unlabelled-lone-namespaces).
log "new namespaces with --label-lone-namespaces=false"
HNS_LONE_NAMESPACE_LABELS=false "$ROOT/hack/hns-up.sh" up "$DIR"
# The tests read the mode from the webhook's match conditions: check they will find this one.
kubectl --kubeconfig "$DIR/kubeconfig" get mutatingwebhookconfiguration hns \
  -o jsonpath='{.webhooks[*].matchConditions[*].name}' | grep -qw has-hns-keys \
  || die "config/dev-unlabelled did not register the has-hns-keys match condition"
cargo test -p hns-e2e --test namespace_labels -- "$@"
