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
cargo test -p hns-e2e --test diagnose -- --test-threads=1 "$@"
# The per-user views again, decided by SubjectAccessReviews alone (docs/access.md): the mode for
# authorizers hns cannot read.
log "per-user views with --view-authorization=review"
HNS_VIEW_AUTHORIZATION=review "$ROOT/hack/hns-up.sh" up "$DIR"
cargo test -p hns-e2e --test views -- "$@"
# New namespaces again, with lone namespaces unlabelled (config/components/unlabelled-lone-namespaces).
log "new namespaces with --label-lone-namespaces=false"
HNS_LONE_NAMESPACE_LABELS=false "$ROOT/hack/hns-up.sh" up "$DIR"
HNS_LONE_NAMESPACE_LABELS=false cargo test -p hns-e2e --test namespace_labels -- "$@"
