#!/usr/bin/env bash
# make dev-up: a local control plane in .dev/ with hns installed, then a short demonstration.
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="$ROOT/.dev"
cd "$ROOT"

log "building hns-apiserver and kubectl-hns"
cargo build -p hns-apiserver -p kubectl-hns || die "cargo build failed"
link_completer
"$ROOT/hack/control-plane.sh" up "$DIR"
"$ROOT/hack/hns-up.sh" up "$DIR"
use_control_plane "$DIR"

export KUBECONFIG="$DIR/kubeconfig" PATH="$TARGET_DIR/debug:$PATH"
log "Kubernetes $K8S_VERSION"
echo
log "kubectl get apiservice v1alpha2.hnc.x-k8s.io"
kubectl get apiservice v1alpha2.hnc.x-k8s.io
echo
log "kubectl api-resources --api-group=hnc.x-k8s.io"
kubectl api-resources --api-group=hnc.x-k8s.io
echo
log "a small demo hierarchy: demo-org with subnamespaces demo-team-a and demo-team-b"
kubectl get ns demo-org >/dev/null 2>&1 || kubectl create ns demo-org >/dev/null
for team in demo-team-a demo-team-b; do
  kubectl get ns "$team" >/dev/null 2>&1 || kubectl hns create "$team" -n demo-org
done
echo
log "kubectl hns tree demo-org"
kubectl hns tree demo-org
echo
log "kubectl get subnamespaces -n demo-org"
kubectl get subnamespaces -n demo-org
cat <<MSG

hns is running. To use it:

  export KUBECONFIG=$DIR/kubeconfig
  export PATH=$TARGET_DIR/debug:$K8S_BIN:\$PATH
                       # kubectl-hns, and a kubectl of the control plane's version ($K8S_VERSION)
  kubectl get hierarchyconfigurations -A
  kubectl hns tree -A
  kubectl hns version

Logs: $DIR/logs/   Stop everything: make dev-down
MSG
