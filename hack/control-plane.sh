#!/usr/bin/env bash
# A real Kubernetes control plane on loopback: etcd, kube-apiserver and kube-controller-manager
# of the version HNS_K8S_VERSION asks for (default: the newest; built from the Go module proxy
# by build-control-plane.sh), with the aggregation layer configured.
#
#   hack/control-plane.sh up DIR     start (or find running) in DIR; writes DIR/env and DIR/kubeconfig
#                                    (DIR/env's K8S_BIN holds the kubectl of the same version)
#   hack/control-plane.sh up DIR --nodes
#                                    the same for real nodes (hack/nodes.sh up DIR adds them)
#   hack/control-plane.sh down DIR   stop everything started in DIR (the nodes too)
#
# DIR holds the PKI, data, logs and pid files. Nothing listens anywhere but 127.0.0.1 (but in
# node mode).
#
# With --nodes (node mode), kube-apiserver listens on the bridge hack/nodes.sh creates
# ($NODE_BRIDGE_IP:$NODE_APISERVER_PORT, lib.sh), where kubelets in the node network namespaces
# reach it; 127.0.0.1:$NODE_APISERVER_PORT is forwarded to it, so DIR/kubeconfig stays on
# loopback. It differs from the loopback mode only where real nodes need it: Services get
# ClusterIPs from $NODE_SERVICE_CIDR (the serving certificate names the `kubernetes` Service's
# one, which pods use) and the `kubernetes` Service's endpoint is the bridge address; Node
# authorization and NodeRestriction admission for the kubelets, and a client certificate for
# kube-apiserver's calls to them (logs, exec; at their node address: a node's name would be
# looked up in the machine's DNS); --enable-aggregator-routing always: kube-apiserver
# runs on the host, outside the pod network's Service routing (kube-proxy's rules are in the
# node namespaces), so it reaches APIServices and webhooks at a ready endpoint of their Service's
# EndpointSlices, which the endpointslice controller writes from pod readiness; and
# kube-controller-manager runs node-lifecycle (NotReady, taints, eviction). Node IPAM stays off:
# each node's pod range is fixed in its CNI configuration. kube-scheduler runs too (pods need
# nodes; on loopback there are none).
# HNS_AGGREGATOR_ROUTING=1 makes kube-apiserver reach aggregated APIs and webhooks through
# Service EndpointSlices (as with several hns replicas, hack/hns-up.sh HNS_REPLICAS) rather than one
# address. HNS_KCM_DISABLE=a,b disables kube-controller-manager's controllers a and b as well
# (a cluster for the e2e test of a controller that is not there).
source "$(dirname "$0")/lib.sh"

cmd="${1:-}"; DIR="${2:-}"
[ -n "$cmd" ] && [ -n "$DIR" ] || die "usage: $0 up|down DIR [--nodes]"
want_nodes=""
case "${3:-}" in --nodes) want_nodes=1 ;; "") ;; *) die "usage: $0 up|down DIR [--nodes]" ;; esac
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
set_dirs

stop_all() {
  stop kube-scheduler
  stop kube-controller-manager
  stop kube-apiserver
  stop etcd
}

if [ "$cmd" = down ]; then
  # Nodes first: they hold the bridge and iptables rule of a node-mode control plane.
  if [ -d "$DIR/nodes" ]; then "$(dirname "$0")/nodes.sh" down "$DIR"; fi
  stop_all
  log "stopped the control plane in $DIR"
  exit 0
fi
[ "$cmd" = up ] || die "usage: $0 up|down DIR [--nodes]"

if alive etcd && alive kube-apiserver && alive kube-controller-manager && [ -f "$DIR/env" ] \
  && { [ -z "$want_nodes" ] || alive kube-scheduler; }; then
  NODE_MODE=""
  source "$DIR/env"
  if [ "$NODE_MODE" = "$want_nodes" ] && kubectl --kubeconfig "$DIR/kubeconfig" get --raw /readyz >/dev/null 2>&1; then
    log "control plane already running in $DIR (kube-apiserver on 127.0.0.1:$KUBE_APISERVER_PORT)"
    exit 0
  fi
fi
# A node-mode control plane restarted on loopback leaves no nodes behind.
if [ -z "$want_nodes" ] && [ -d "$DIR/nodes" ]; then "$(dirname "$0")/nodes.sh" down "$DIR"; fi
stop_all

apt_install curl openssl python3
BIN="$("$(dirname "$0")/build-control-plane.sh" ${want_nodes:+--nodes})"
# kubectl of the control plane's own version, for these scripts and whoever sources DIR/env.
export PATH="$BIN:$PATH"

# --- PKI --------------------------------------------------------------------------------
# ca: cluster CA (serving cert, client certs); front-proxy-ca: the aggregation layer's proxy
# identity, deliberately separate so a proxy cert is never taken for a user.
log "creating certificates in $PKI"
new_ca ca "hns-local-ca"
new_ca front-proxy-ca "hns-local-front-proxy-ca"
new_cert kube-apiserver ca "/CN=kube-apiserver" serverAuth \
  "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1"
if [ -n "$want_nodes" ]; then
  # Pods reach kube-apiserver at the `kubernetes` Service's ClusterIP, kubelets at the bridge.
  new_cert kube-apiserver-nodes ca "/CN=kube-apiserver" serverAuth \
    "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:$NODE_KUBERNETES_SERVICE_IP,IP:$NODE_BRIDGE_IP"
  new_cert kube-apiserver-kubelet-client ca "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
fi
new_cert admin ca "/O=system:masters/CN=admin" clientAuth
new_cert kube-controller-manager ca "/CN=system:kube-controller-manager" clientAuth
[ -z "$want_nodes" ] || new_cert kube-scheduler ca "/CN=system:kube-scheduler" clientAuth
new_cert front-proxy-client front-proxy-ca "/CN=front-proxy-client" clientAuth
[ -f "$PKI/sa.key" ] || { openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null; openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null; }

# kube-apiserver calls webhooks without a client certificate unless its admission configuration
# names one. It presents the front-proxy client certificate here, so hns's webhook can tell
# kube-apiserver from anyone else who reaches its port (see docs: a cluster does the same).
cat > "$DIR/webhook.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: $PKI/front-proxy-client.crt
    client-key: $PKI/front-proxy-client.key
KUBECONFIG
cat > "$DIR/admission.yaml" <<ADMISSION
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $DIR/webhook.kubeconfig
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $DIR/webhook.kubeconfig
ADMISSION

ETCD_PORT="$(free_port)"; ETCD_PEER_PORT="$(free_port)"
KUBE_APISERVER_PORT="$(free_port)"; KCM_PORT="$(free_port)"
# What the two modes set differently (the loopback mode's values first).
APISERVER_HOST=127.0.0.1 APISERVER_CERT=kube-apiserver
APISERVER_MODE_FLAGS=(--authorization-mode RBAC --service-cluster-ip-range 10.96.0.0/12 --endpoint-reconciler-type none
  ${HNS_AGGREGATOR_ROUTING:+--enable-aggregator-routing=true})
KCM_DISABLED="-node-ipam-controller,-node-lifecycle-controller"
if [ -n "$want_nodes" ]; then
  "$(dirname "$0")/nodes.sh" bridge "$DIR"
  APISERVER_HOST="$NODE_BRIDGE_IP" APISERVER_CERT=kube-apiserver-nodes KUBE_APISERVER_PORT="$NODE_APISERVER_PORT"
  APISERVER_MODE_FLAGS=(--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction
    --service-cluster-ip-range "$NODE_SERVICE_CIDR"
    --kubelet-client-certificate "$PKI/kube-apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/kube-apiserver-kubelet-client.key"
    --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP
    --enable-aggregator-routing=true)
  KCM_DISABLED="-node-ipam-controller"
fi

log "starting etcd on 127.0.0.1:$ETCD_PORT"
start etcd "$BIN/etcd" --name hns-local --data-dir "$DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "hns-local=http://127.0.0.1:$ETCD_PEER_PORT" \
  --quota-backend-bytes 8589934592  # etcd's suggested maximum: 100,000 namespaces outgrow the 2 GiB default
wait_for 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health" \
  || { tail -20 "$LOGS/etcd.log" >&2; die "etcd did not become healthy (log: $LOGS/etcd.log)"; }

log "starting kube-apiserver on $APISERVER_HOST:$KUBE_APISERVER_PORT"
start kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address "$APISERVER_HOST" --advertise-address "$APISERVER_HOST" --secure-port "$KUBE_APISERVER_PORT" \
  --tls-cert-file "$PKI/$APISERVER_CERT.crt" --tls-private-key-file "$PKI/$APISERVER_CERT.key" \
  --client-ca-file "$PKI/ca.crt" \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --service-account-issuer https://kubernetes.default.svc \
  "${APISERVER_MODE_FLAGS[@]}" \
  --requestheader-client-ca-file "$PKI/front-proxy-ca.crt" \
  --requestheader-allowed-names front-proxy-client \
  --requestheader-username-headers X-Remote-User \
  --requestheader-group-headers X-Remote-Group \
  --requestheader-extra-headers-prefix X-Remote-Extra- \
  --proxy-client-cert-file "$PKI/front-proxy-client.crt" --proxy-client-key-file "$PKI/front-proxy-client.key" \
  --admission-control-config-file "$DIR/admission.yaml"
kubeconfig_for "$DIR/kubeconfig" admin
wait_for 60 kubectl --kubeconfig "$DIR/kubeconfig" get --raw /readyz \
  || { tail -30 "$LOGS/kube-apiserver.log" >&2; die "kube-apiserver did not become ready (log: $LOGS/kube-apiserver.log)"; }

log "starting kube-controller-manager"
kubeconfig_for "$DIR/kube-controller-manager.kubeconfig" kube-controller-manager
[ -z "$want_nodes" ] || kubectl config --kubeconfig "$DIR/kube-controller-manager.kubeconfig" \
  set-cluster local --server "https://$APISERVER_HOST:$KUBE_APISERVER_PORT" >/dev/null
start_kcm() {
  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig "$DIR/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig "$DIR/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig "$DIR/kube-controller-manager.kubeconfig" \
    --use-service-account-credentials=true \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --controllers "*,$KCM_DISABLED${HNS_KCM_DISABLE:+,-${HNS_KCM_DISABLE//,/,-}}" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$KCM_PORT"
}
start_kcm
# It exits if the RBAC bootstrap is not there yet; restart it until it stays up.
for _ in 1 2 3 4 5; do
  sleep 2
  alive kube-controller-manager && break
  log "kube-controller-manager exited early; restarting"
  start_kcm
done
alive kube-controller-manager || { tail -30 "$LOGS/kube-controller-manager.log" >&2; die "kube-controller-manager keeps exiting"; }
wait_for 60 kubectl --kubeconfig "$DIR/kubeconfig" -n default get serviceaccount default \
  || die "the controllers did not create the default ServiceAccount (log: $LOGS/kube-controller-manager.log)"
SCHEDULER_PORT=""
if [ -n "$want_nodes" ]; then
  log "starting kube-scheduler"
  SCHEDULER_PORT="$(free_port)"
  kubeconfig_for "$DIR/kube-scheduler.kubeconfig" kube-scheduler
  kubectl config --kubeconfig "$DIR/kube-scheduler.kubeconfig" \
    set-cluster local --server "https://$APISERVER_HOST:$KUBE_APISERVER_PORT" >/dev/null
  start kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig "$DIR/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig "$DIR/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig "$DIR/kube-scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT"
  wait_for 30 curl -sfk "https://127.0.0.1:$SCHEDULER_PORT/healthz" \
    || { tail -30 "$LOGS/kube-scheduler.log" >&2; die "kube-scheduler did not become healthy (log: $LOGS/kube-scheduler.log)"; }
fi

cat > "$DIR/env" <<ENV
ETCD_PORT=$ETCD_PORT
KUBE_APISERVER_PORT=$KUBE_APISERVER_PORT
KCM_PORT=$KCM_PORT
CONTROL_PLANE_DIR=$DIR
K8S_VERSION=$("$BIN/kube-apiserver" --version | awk '{print $2}')
K8S_BIN=$BIN
ENV
[ -z "$want_nodes" ] || printf 'NODE_MODE=1\nSCHEDULER_PORT=%s\n' "$SCHEDULER_PORT" >> "$DIR/env"
log "control plane $("$BIN/kube-apiserver" --version) ready: $BIN/kubectl --kubeconfig $DIR/kubeconfig"
