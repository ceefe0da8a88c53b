# HNC v1.1 (hack/build-hnc.sh) run on loopback against a local control plane, for the migration
# test (hack/migration-test.sh) and the benchmark against HNC (hack/bench.sh hnc): one way of
# installing it, so both measure and test the same HNC. Sourced after lib.sh, never run.
#
# hnc_up needs HNC (build-hnc.sh's directory), ROOT (the repository), DIR with set_dirs done
# (the control plane's PKI, logs and pid files: the manager is process `hnc-manager`), and
# KUBECONFIG set to the control plane's admin kubeconfig.

hnc_up() {
  log "installing HNC v1.1: CRDs, webhooks, manager on loopback"
  kubectl apply -f "$HNC/crds.yaml" >/dev/null
  kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null
  kubectl get ns hnc-system >/dev/null 2>&1 || kubectl create ns hnc-system >/dev/null
  local port probe; port="$(free_port)"; probe="$(free_port)"
  # HNC's webhooks let HNC's own writes through by the group of its ServiceAccounts, so the
  # manager authenticates as its ServiceAccount (a client certificate, as hack/hns-up.sh does
  # for hns), bound to cluster-admin: HNC's in-cluster RBAC is not what is tested here.
  new_cert hnc-manager-client ca \
    "/O=system:serviceaccounts/O=system:serviceaccounts:hnc-system/CN=system:serviceaccount:hnc-system:hnc-manager" clientAuth
  kubeconfig_for "$DIR/hnc-manager.kubeconfig" hnc-manager-client
  kubectl create clusterrolebinding hnc-manager-test --clusterrole cluster-admin \
    --serviceaccount hnc-system:hnc-manager --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  # controller-runtime reads its serving certificate from $TMPDIR/k8s-webhook-server/serving-certs.
  new_cert hnc-webhook ca "/CN=hnc-webhook" serverAuth "DNS:localhost,IP:127.0.0.1"
  local certs="$DIR/hnc-tmp/k8s-webhook-server/serving-certs"
  mkdir -p "$certs"; cp "$PKI/hnc-webhook.crt" "$certs/tls.crt"; cp "$PKI/hnc-webhook.key" "$certs/tls.key"
  kubectl create --dry-run=client -o json -f "$HNC/webhooks.yaml" \
    | python3 "$ROOT/hack/migration/hnc-webhooks.py" "https://localhost:$port" "$PKI/ca.crt" \
    | kubectl apply -f - >/dev/null
  # Metrics and probes on loopback; HNC has no flag for its webhook server's address, so that
  # one port listens on every interface of this machine while the test runs.
  KUBECONFIG="$DIR/hnc-manager.kubeconfig" TMPDIR="$DIR/hnc-tmp" start hnc-manager "$HNC/manager" \
    --webhook-server-port "$port" --metrics-addr "127.0.0.1:$(free_port)" \
    --health-probe-bind-address "127.0.0.1:$probe" --enable-stackdriver=false \
    --max-reconciles 10 --excluded-namespace kube-system --excluded-namespace kube-public \
    --excluded-namespace hnc-system --excluded-namespace kube-node-lease \
    --nopropagation-label cattle.io/creator=norman --managed-namespace-label env
  # Ready once its webhooks serve (its readyz), its HNCConfiguration exists and a namespace has
  # HNC's label. When HNC is installed again (the migration's way back) the last two are already
  # true, so readyz is what tells the manager has started.
  wait_for 90 curl -sf "http://127.0.0.1:$probe/readyz" \
    || { tail -30 "$LOGS/hnc-manager.log" >&2; die "HNC's manager did not become ready (log: $LOGS/hnc-manager.log)"; }
  wait_for 90 kubectl get hncconfiguration config \
    || { tail -30 "$LOGS/hnc-manager.log" >&2; die "HNC's manager did not start (log: $LOGS/hnc-manager.log)"; }
  wait_for 60 sh -c "kubectl get ns default -o jsonpath='{.metadata.labels}' | grep -q included-namespace" \
    || die "HNC does not label namespaces"
}

# hnc_down: stops HNC's manager (started by hnc_up in $DIR).
hnc_down() { stop hnc-manager; }

# hnc_cluster_up DIR: a throw-away control plane in DIR with HNC installed by hnc_up, for when
# the caller's own DIR is another cluster (hns's, which cannot share a cluster with HNC: HNC's
# CRDs and hns's APIService claim the same group). Runs in a subshell so the caller's DIR, PKI,
# KUBECONFIG and PATH stay its own; the manager outlives it, recorded in DIR/pids.
hnc_cluster_up() (
  DIR="$1"
  "$ROOT/hack/control-plane.sh" up "$DIR"
  use_control_plane "$DIR"
  set_dirs
  export KUBECONFIG="$DIR/kubeconfig"
  hnc_up
)

# hnc_cluster_down DIR: stops HNC's manager and the control plane in DIR, and removes DIR.
hnc_cluster_down() (
  DIR="$1"
  [ -d "$DIR" ] || exit 0
  set_dirs
  hnc_down
  "$ROOT/hack/control-plane.sh" down "$DIR" >/dev/null 2>&1 || true
  rm -rf "$DIR"
)
