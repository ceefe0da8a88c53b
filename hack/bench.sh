#!/usr/bin/env bash
# make bench: release builds against a fresh local control plane; prints figures and ratios.
#   hack/bench.sh [BENCHMARK...]   (default: deletion watches api propagation tree views diagnose
#                                   quotas subtree-get plugin-tree tax tax-nodes hnc)
#
# tax-nodes is hns's tax with hns installed as users install it: deploy/hns.yaml's image and
# Deployment on real nodes (hack/nodes.sh; it needs root and 2 CPUs), the nodes on the last CPU
# and the control plane and the benchmark on the others, as on a cluster where hns's pods run on
# other machines than kube-apiserver. It runs on a cluster of its own, after the others.
# HNS_BENCH_TAX_MANIFEST installs another rendering than deploy/hns.yaml (say, with
# config/components/unlabelled-lone-namespaces; the benchmark reads which from the cluster).
#
# hnc compares hns with HNC v1.1 itself (hack/build-hnc.sh builds it from the Go module proxy;
# when it cannot, the benchmark is skipped and says so). It runs on two clusters of its own,
# both fresh, so that the two sides start from the same state whatever ran before: one with
# hns, and one with HNC installed as the migration test installs it (hack/hnc.sh), since HNC's
# CRDs and hns's APIService claim the same group. The other benchmarks' cluster is stopped
# first, so the two share the machine with nothing else of this script's.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hnc.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# A manifest named relative to where the script was started, before it moves to the repository.
if [ -f "${HNS_BENCH_TAX_MANIFEST:-}" ]; then HNS_BENCH_TAX_MANIFEST="$(realpath "$HNS_BENCH_TAX_MANIFEST")"; fi
cd "$ROOT"
TARGET="$TARGET_DIR/release"
cargo build --release -p hns-apiserver -p kubectl-hns || die "cargo build failed"
cargo build --release -p hns-e2e --bin hns-bench || die "cargo build failed"
BENCHMARKS=(${@:-deletion watches api propagation tree views diagnose quotas subtree-get plugin-tree tax tax-nodes hnc})

# hns_cluster DIR: a control plane in DIR with the release hns-apiserver built above.
hns_cluster() {
  "$ROOT/hack/control-plane.sh" up "$1"
  HNS_APISERVER_BIN="$TARGET/hns-apiserver" RUST_LOG=warn "$ROOT/hack/hns-up.sh" up "$1"
}

# stop_other_cluster: stops the cluster of the other benchmarks, if one runs, so that a benchmark
# on clusters of its own shares the machine with nothing else of this script's.
stop_other_cluster() {
  [ -n "${DIR:-}" ] || return 0
  log "stopping the other benchmarks' cluster"
  "$ROOT/hack/hns-up.sh" down "$DIR" >/dev/null 2>&1 || true
  "$ROOT/hack/control-plane.sh" down "$DIR" >/dev/null 2>&1 || true
}

# bench_tax_nodes: `hns-bench tax` against hns's Deployment on real nodes, on a cluster of its
# own removed when it ends, failed or not (a subshell, for its own EXIT trap).
bench_tax_nodes() (
  [ "$(id -u)" = 0 ] || { log "tax-nodes needs root (network namespaces, a bridge, cgroups): skipped"; exit 0; }
  # The CPUs this script may use: the last for the nodes, the others for everything else.
  read -r nodes_cpu others < <(python3 - "$(taskset -pc $$ | sed 's/.*: //')" <<'PY'
import sys
cpus = []
for part in filter(None, sys.argv[1].split(",")):
    lo, _, hi = part.partition("-")
    cpus.extend(range(int(lo), int(hi or lo) + 1))
print(cpus[-1], ",".join(map(str, cpus[:-1])) or "-")
PY
)
  [ "$others" != - ] || { log "tax-nodes needs 2 CPUs (the nodes get one of their own): skipped"; exit 0; }
  grep -qE '^cgroup [^ ]+ cgroup [^ ]*cpuset' /proc/self/mounts && grep -qE '^cgroup [^ ]+ cgroup [^ ]*cpuacct' /proc/self/mounts \
    || { log "tax-nodes needs cgroup v1's cpuset and cpuacct (hack/nodes.sh): skipped"; exit 0; }
  ARCHIVE="$("$ROOT/hack/build-image.sh" | tail -n1)" || die "building the image failed"
  stop_other_cluster
  throwaway_cluster bench-tax-nodes
  # Called in an `||` list, where errexit is off: each step says when it fails.
  "$ROOT/hack/control-plane.sh" up "$DIR" --nodes || die "the control plane did not start"
  HNS_NODES=2 HNS_NODE_CPUS="$nodes_cpu" "$ROOT/hack/nodes.sh" up "$DIR" || die "the nodes did not start"
  "$ROOT/hack/nodes.sh" load "$DIR" "$ARCHIVE" || die "loading the image into the nodes failed"
  use_control_plane "$DIR"
  for p in etcd kube-apiserver kube-controller-manager kube-scheduler; do
    taskset -a -cp "$others" "$(cat "$DIR/pids/$p.pid")" >/dev/null || die "pinning $p to CPUs $others failed"
  done
  export KUBECONFIG="$DIR/kubeconfig"
  manifest="${HNS_BENCH_TAX_MANIFEST:-deploy/hns.yaml}"
  kubectl apply -f "$manifest" >/dev/null || die "kubectl apply -f $manifest failed"
  kubectl -n hns-system rollout status deployment/hns-apiserver --timeout=300s || die "hns did not roll out"
  kubectl wait --for=condition=Available --timeout=180s apiservice/v1alpha2.hnc.x-k8s.io >/dev/null \
    || die "APIService v1alpha2.hnc.x-k8s.io did not become Available"
  # The figures mean something only if hns's pods run where they were put.
  pids="$(pgrep -x hns-apiserver)" || die "no hns-apiserver process on the nodes"
  for pid in $pids; do
    allowed="$(sed -n 's/^Cpus_allowed_list:\s*//p' "/proc/$pid/status")"
    [ "$allowed" = "$nodes_cpu" ] || die "hns-apiserver (pid $pid) may run on CPUs $allowed, not only on the nodes' CPU $nodes_cpu"
  done
  log "hns's Deployment on 2 nodes on CPU $nodes_cpu; the control plane and the benchmark on CPUs $others"
  unset HNS_E2E_DIR
  HNS_E2E_KUBECONFIG="$DIR/kubeconfig" HNS_NODES_DIR="$DIR" RUST_LOG=warn taskset -c "$others" "$TARGET/hns-bench" tax \
    || die "hns-bench tax failed"
)

# bench_hnc: `hns-bench hnc` on a fresh hns cluster beside a fresh HNC cluster, both removed
# when it ends, failed or not. A subshell, so that its clusters have their own EXIT trap.
bench_hnc() (
  HNC="$("$ROOT/hack/build-hnc.sh")" || {
    log "HNC v${HNS_HNC_VERSION:-1.1.0} could not be had from the Go module proxy (hack/build-hnc.sh failed): hnc benchmark skipped"
    exit 0
  }
  stop_other_cluster
  HNC_DIR="$(mktemp -d "${TMPDIR:-/tmp}/hns-bench-hnc.XXXXXX")"
  throwaway_cluster bench-hnc-hns
  TEARDOWN_ALSO=("hnc_cluster_down $HNC_DIR")
  hns_cluster "$DIR"
  log "HNC's cluster in $HNC_DIR"
  hnc_cluster_up "$HNC_DIR"
  use_control_plane "$DIR"
  log "hns and HNC on Kubernetes $K8S_VERSION"
  HNS_E2E_KUBECONFIG="$DIR/kubeconfig" HNS_E2E_DIR="$DIR" \
    HNS_BENCH_HNC_KUBECONFIG="$HNC_DIR/kubeconfig" HNS_BENCH_HNC_DIR="$HNC_DIR" \
    HNS_BENCH_HNC_PLUGIN="$HNC/kubectl-hns" "$TARGET/hns-bench" hnc
)

for b in "${BENCHMARKS[@]}"; do
  [ "$b" = hnc ] || [ "$b" = tax-nodes ] && continue
  # The plugin's own work in tree -A at 100,000 namespaces needs no cluster
  # (plugin/tests/tree_bench.rs).
  if [ "$b" = plugin-tree ]; then
    log "benchmark: plugin-tree"
    cargo test --release -p kubectl-hns --test tree_bench -- --ignored --nocapture 2>&1 | grep -E "^bench|test result"
    continue
  fi
  if [ -z "${DIR:-}" ]; then
    throwaway_cluster bench
    hns_cluster "$DIR"
    use_control_plane "$DIR"
    log "benchmarks against Kubernetes $K8S_VERSION"
    export HNS_E2E_KUBECONFIG="$DIR/kubeconfig" HNS_E2E_DIR="$DIR"
    # The diagnose, subtree-get and hnc benchmarks time the release kubectl-hns built above.
    export HNS_PLUGIN_DIR="$TARGET"
  fi
  log "benchmark: $b"
  case "$b" in
    # The diagnoser's figures come from its e2e harness (real stuck namespaces, real kubectl).
    # tax uninstalls and reinstalls hns between rounds (hack/hns-up.sh), with this release build.
    tax) HNS_APISERVER_BIN="$TARGET/hns-apiserver" RUST_LOG=warn "$TARGET/hns-bench" tax ;;
    diagnose) cargo test --release -p hns-e2e --test diagnose -- --ignored --nocapture diagnose_bench 2>&1 | grep -E "^bench|test result" ;;
    *) "$TARGET/hns-bench" "$b" ;;
  esac
done
# tax-nodes and hnc run last, whatever the order asked: they stop the other benchmarks' cluster.
for b in "${BENCHMARKS[@]}"; do
  if [ "$b" = tax-nodes ]; then
    log "benchmark: tax-nodes (hns's Deployment on real nodes, on a cluster of its own)"
    # A failure here is reported at the end: hnc still runs.
    bench_tax_nodes || tax_nodes_failed=1
  fi
done
for b in "${BENCHMARKS[@]}"; do
  if [ "$b" = hnc ]; then
    log "benchmark: hnc (hns and HNC v1.1, each on a cluster of its own)"
    HNS_PLUGIN_DIR="$TARGET" bench_hnc
  fi
done
[ -z "${tax_nodes_failed:-}" ] || die "benchmark tax-nodes failed (its output is above)"
# HNS_BENCH_KEEP=1 leaves the benchmarks' cluster running when they succeed (to profile hns at
# the size a benchmark built, say), unless tax-nodes or hnc stopped it.
if [ -n "${HNS_BENCH_KEEP:-}" ] && [ -n "${DIR:-}" ] && [ -f "$DIR/pids/kube-apiserver.pid" ] \
  && kill -0 "$(cat "$DIR/pids/kube-apiserver.pid")" 2>/dev/null; then
  trap - EXIT
  log "cluster kept in $DIR: KUBECONFIG=$DIR/kubeconfig; stop it with hack/hns-up.sh down $DIR; hack/control-plane.sh down $DIR"
fi
