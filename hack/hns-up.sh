#!/usr/bin/env bash
# Installs hns on the local control plane in DIR the way a cluster install does (namespace,
# least-privilege RBAC, Service, APIService with caBundle) and runs hns-apiserver as a process
# on loopback, with the credentials its ServiceAccount would have.
#
#   hack/hns-up.sh up DIR     (re)start hns-apiserver and wait until its APIService is Available
#   hack/hns-up.sh down DIR   stop hns-apiserver
#
# HNS_APISERVER_BIN overrides the binary (default: target/debug/hns-apiserver).
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

cmd="${1:-}"; DIR="${2:-}"
[ -n "$cmd" ] && [ -d "${DIR:-/nonexistent}" ] || die "usage: $0 up|down DIR (a directory made by control-plane.sh)"
DIR="$(cd "$DIR" && pwd)"
set_dirs
if [ "$cmd" = down ]; then
  stop hns-apiserver
  exit 0
fi
[ "$cmd" = up ] || die "usage: $0 up|down DIR"
source "$DIR/env"
BIN="${HNS_APISERVER_BIN:-$ROOT/target/debug/hns-apiserver}"
[ -x "$BIN" ] || die "$BIN not found: build it first (cargo build -p hns-apiserver)"
export KUBECONFIG="$DIR/kubeconfig"

# A client certificate that authenticates as hns's ServiceAccount, so RBAC applies exactly as
# in-cluster. The serving certificate is hns's own business (--self-managed-certs), as in-cluster.
new_cert hns-apiserver-client ca \
  "/O=system:serviceaccounts/O=system:serviceaccounts:hns-system/CN=system:serviceaccount:hns-system:hns-apiserver" clientAuth
kubeconfig_for "$DIR/hns-apiserver.kubeconfig" hns-apiserver-client

HNS_PORT="${HNS_PORT:-$(free_port)}"
METRICS_PORT="${METRICS_PORT:-$(free_port)}"
log "applying config/dev (APIService and webhook → localhost:$HNS_PORT)"
kubectl kustomize "$ROOT/config/dev" | sed -e "s|HNS_PORT|$HNS_PORT|" \
  | kubectl apply -f - >/dev/null || die "applying config/dev failed"

stop hns-apiserver
log "starting hns-apiserver on 127.0.0.1:$HNS_PORT"
# The same allocator settings as the Deployment (config/default/deployment.yaml).
_RJEM_MALLOC_CONF="${_RJEM_MALLOC_CONF:-background_thread:true,narenas:2,dirty_decay_ms:1000,muzzy_decay_ms:0}" \
RUST_LOG="${RUST_LOG:-info}" start hns-apiserver "$BIN" \
  --kubeconfig "$DIR/hns-apiserver.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$HNS_PORT" \
  --self-managed-certs --cert-dns-name localhost --cert-dns-name 127.0.0.1 \
  --metrics-bind-address "127.0.0.1:$METRICS_PORT"
wait_for 60 curl -sfk "https://127.0.0.1:$HNS_PORT/readyz" || {
  tail -30 "$LOGS/hns-apiserver.log" >&2
  die "hns-apiserver did not become ready (log: $LOGS/hns-apiserver.log)"
}
kubectl wait --for=condition=Available --timeout=60s apiservice/v1alpha2.hnc.x-k8s.io >/dev/null || {
  kubectl get apiservice v1alpha2.hnc.x-k8s.io -o yaml >&2
  die "APIService v1alpha2.hnc.x-k8s.io did not become Available"
}
# The CA hns made for itself, for clients that talk to it directly (the e2e tests).
kubectl -n hns-system get secret hns-serving-cert -o jsonpath='{.data.ca\.crt}' | base64 -d > "$PKI/hns-ca.crt"
grep -vE '^(HNS_PORT|METRICS_PORT)=' "$DIR/env" > "$DIR/env.new" || true
echo "HNS_PORT=$HNS_PORT" >> "$DIR/env.new"
echo "METRICS_PORT=$METRICS_PORT" >> "$DIR/env.new"
mv "$DIR/env.new" "$DIR/env"
log "hns-apiserver ready; APIService v1alpha2.hnc.x-k8s.io Available"
