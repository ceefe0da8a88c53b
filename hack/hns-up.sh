#!/usr/bin/env bash
# Installs hns on the local control plane in DIR the way a cluster install does (namespace,
# least-privilege RBAC, Service, APIService with caBundle) and runs hns-apiserver as a process
# on loopback, with the credentials its ServiceAccount would have.
#
#   hack/hns-up.sh up DIR     (re)start hns-apiserver and wait until its APIService is Available
#   hack/hns-up.sh down DIR   stop hns-apiserver
#   hack/hns-up.sh uninstall DIR  stop it and remove its APIService and webhooks, keeping every
#                             namespace and its labels: the cluster as without hns (the tax benchmark)
#
# HNS_APISERVER_ARGS adds flags to hns-apiserver's (split on spaces). HNS_LONE_NAMESPACE_LABELS=false installs
# hns with lone namespaces unlabelled (config/components/unlabelled-lone-namespaces).
# HNS_APISERVER_BIN overrides the binary (default: the debug build, in $CARGO_TARGET_DIR or
# target/). The label `env` may be managed through the hierarchy (spec.labels), as in HNC's own
# examples and in the e2e tests.
# HNS_REPLICAS=N (N > 1) runs N processes behind the hns-apiserver Service, as the Deployment's
# replicas (config/replicas); it needs a control plane started with HNS_AGGREGATOR_ROUTING=1.
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

cmd="${1:-}"; DIR="${2:-}"
[ -n "$cmd" ] && [ -d "${DIR:-/nonexistent}" ] || die "usage: $0 up|down|uninstall DIR (a directory made by control-plane.sh)"
DIR="$(cd "$DIR" && pwd)"
set_dirs
# Replica 0 is "hns-apiserver", replica i > 0 "hns-apiserver-i" (pid and log file names).
replica_name() { if [ "$1" = 0 ]; then echo hns-apiserver; else echo "hns-apiserver-$1"; fi; }
stop_all() {
  local f
  for f in "$PIDS"/hns-apiserver*.pid; do [ -e "$f" ] && stop "$(basename "$f" .pid)"; done
  return 0
}
if [ "$cmd" = down ]; then
  stop_all
  exit 0
fi
if [ "$cmd" = uninstall ]; then
  stop_all
  use_control_plane "$DIR"
  KUBECONFIG="$DIR/kubeconfig" kubectl delete --ignore-not-found apiservice/v1alpha2.hnc.x-k8s.io \
    validatingwebhookconfiguration/hns mutatingwebhookconfiguration/hns >/dev/null \
    || die "removing hns's APIService and webhooks failed"
  # The garbage collector would remove hns's admission policy (Kubernetes 1.36 and later) after
  # its owner, the MutatingWebhookConfiguration; the benchmark must not measure that moment.
  if KUBECONFIG="$DIR/kubeconfig" kubectl api-resources --api-group=admissionregistration.k8s.io -o name \
      | grep -q '^mutatingadmissionpolicies\.'; then
    KUBECONFIG="$DIR/kubeconfig" kubectl delete --ignore-not-found \
      mutatingadmissionpolicy/hns-namespace-labels mutatingadmissionpolicybinding/hns-namespace-labels >/dev/null \
      || die "removing hns's admission policy failed"
  fi
  exit 0
fi
[ "$cmd" = up ] || die "usage: $0 up|down|uninstall DIR"
use_control_plane "$DIR"
BIN="${HNS_APISERVER_BIN:-$TARGET_DIR/debug/hns-apiserver}"
[ -x "$BIN" ] || die "$BIN not found: build it first (cargo build -p hns-apiserver)"
export KUBECONFIG="$DIR/kubeconfig"

# A client certificate that authenticates as hns's ServiceAccount, so RBAC applies exactly as
# in-cluster. The serving certificate is hns's own business (--self-managed-certs), as in-cluster.
new_cert hns-apiserver-client ca \
  "/O=system:serviceaccounts/O=system:serviceaccounts:hns-system/CN=system:serviceaccount:hns-system:hns-apiserver" clientAuth
kubeconfig_for "$DIR/hns-apiserver.kubeconfig" hns-apiserver-client

REPLICAS="${HNS_REPLICAS:-1}"
PORTS=(); METRICS=()
for ((i = 0; i < REPLICAS; i++)); do
  if [ "$i" = 0 ]; then PORTS+=("${HNS_PORT:-$(free_port)}"); METRICS+=("${METRICS_PORT:-$(free_port)}")
  else PORTS+=("$(free_port)"); METRICS+=("$(free_port)"); fi
done

# HNS_LONE_NAMESPACE_LABELS=false: lone namespaces unlabelled (config/dev-unlabelled and
# --label-lone-namespaces=false; config/components/unlabelled-lone-namespaces).
DEV_CONFIG=dev; LONE_FLAG=()
if [ "${HNS_LONE_NAMESPACE_LABELS:-true}" = false ]; then
  [ "$REPLICAS" = 1 ] || die "HNS_LONE_NAMESPACE_LABELS=false works with one replica only"
  DEV_CONFIG=dev-unlabelled; LONE_FLAG=(--label-lone-namespaces=false)
fi

if [ "$REPLICAS" = 1 ]; then
  HOST=127.0.0.1
  log "applying config/$DEV_CONFIG (APIService and webhooks → localhost:${PORTS[0]})"
  kubectl kustomize "$ROOT/config/$DEV_CONFIG" | sed -e "s|HNS_PORT|${PORTS[0]}|" \
    | kubectl apply -f - >/dev/null || die "applying config/$DEV_CONFIG failed"
else
  HOST="$(ip -4 -o addr show scope global | awk '{sub("/.*", "", $4); print $4; exit}')"
  [ -n "$HOST" ] || die "HNS_REPLICAS=$REPLICAS needs a non-loopback IPv4 address for the EndpointSlices; this machine has none"
  log "applying config/replicas (Service hns-apiserver → $REPLICAS processes on $HOST)"
  kubectl kustomize "$ROOT/config/replicas" | kubectl apply -f - >/dev/null || die "applying config/replicas failed"
  # kube-apiserver resolves Services through EndpointSlices; the processes share one address
  # and differ by port, and a slice has one port list, so each process gets a slice.
  kubectl -n hns-system delete endpointslices -l hns.local/replicas=true --ignore-not-found >/dev/null
  for i in "${!PORTS[@]}"; do
    printf 'apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: hns-apiserver-%s\n  namespace: hns-system\n  labels: {kubernetes.io/service-name: hns-apiserver, hns.local/replicas: "true"}\naddressType: IPv4\nports: [{name: https, port: %s, protocol: TCP}]\nendpoints: [{addresses: ["%s"], conditions: {ready: true}}]\n' \
      "$i" "${PORTS[$i]}" "$HOST"
    echo ---
  done | kubectl apply -f - >/dev/null || die "writing the hns-apiserver EndpointSlices failed"
fi

stop_all
for ((i = 0; i < REPLICAS; i++)); do
  name="$(replica_name "$i")"
  log "starting $name on $HOST:${PORTS[$i]}"
  # The same allocator settings as the Deployment (config/default/deployment.yaml). No drain
  # on SIGTERM: these replicas' endpoints are written by this script, not taken from pods.
  MALLOC_CONF="${MALLOC_CONF:-background_thread:true,narenas:2,dirty_decay_ms:1000,muzzy_decay_ms:0}" \
  RUST_LOG="${RUST_LOG:-info}" HOSTNAME="$name" start "$name" "$BIN" \
    --kubeconfig "$DIR/hns-apiserver.kubeconfig" \
    --bind-address "$HOST" --secure-port "${PORTS[$i]}" \
    --self-managed-certs --cert-dns-name localhost --cert-dns-name 127.0.0.1 --cert-dns-name "$HOST" \
    --managed-namespace-label env \
    --metrics-bind-address "127.0.0.1:${METRICS[$i]}" \
    --shutdown-delay-duration 0s "${LONE_FLAG[@]}" ${HNS_APISERVER_ARGS:-}
done
for ((i = 0; i < REPLICAS; i++)); do
  name="$(replica_name "$i")"
  wait_for 60 curl -sfk "https://$HOST:${PORTS[$i]}/readyz" || {
    tail -30 "$LOGS/$name.log" >&2
    die "$name did not become ready (log: $LOGS/$name.log)"
  }
done
kubectl wait --for=condition=Available --timeout=60s apiservice/v1alpha2.hnc.x-k8s.io >/dev/null || {
  kubectl get apiservice v1alpha2.hnc.x-k8s.io -o yaml >&2
  die "APIService v1alpha2.hnc.x-k8s.io did not become Available"
}
# Available can precede kube-apiserver's proxy routing the group (a plain "404 page not found"
# for the first requests); wait until a request through it is answered.
wait_for 30 kubectl get --raw /apis/hnc.x-k8s.io/v1alpha2/subnamespaces || die "kube-apiserver does not route hnc.x-k8s.io to hns"
# The CA hns made for itself, for clients that talk to it directly (the e2e tests).
kubectl -n hns-system get secret hns-serving-cert -o jsonpath='{.data.ca\.crt}' | base64 -d > "$PKI/hns-ca.crt"
grep -vE '^(HNS_HOST|HNS_PORTS?|METRICS_PORTS?|HNS_REPLICA_NAMES)=' "$DIR/env" > "$DIR/env.new" || true
NAMES=(); for ((i = 0; i < REPLICAS; i++)); do NAMES+=("$(replica_name "$i")"); done
{
  echo "HNS_HOST=$HOST"
  echo "HNS_PORT=${PORTS[0]}"
  echo "METRICS_PORT=${METRICS[0]}"
  (IFS=,; echo "HNS_PORTS=${PORTS[*]}"; echo "METRICS_PORTS=${METRICS[*]}"; echo "HNS_REPLICA_NAMES=${NAMES[*]}")
} >> "$DIR/env.new"
mv "$DIR/env.new" "$DIR/env"
log "hns-apiserver ready ($REPLICAS replica(s)); APIService v1alpha2.hnc.x-k8s.io Available"
