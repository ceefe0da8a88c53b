#!/usr/bin/env bash
# make availability / availability-short: hns as users install it, on real nodes, through the
# disruptions a cluster meets.
#
#   hack/availability.sh [--short] [--scenarios-only] [SCENARIO...]   scenarios: a b c d e f control
#
# Builds the image (hack/build-image.sh), brings up a throw-away control plane with two real
# nodes (hack/nodes.sh), imports the image into each node's containerd and installs hns with
# `kubectl apply -f deploy/hns.yaml` exactly as rendered. Then:
#
# 0. the Helm chart (charts/hns) installed, upgraded from the previous chart and image, rolled
#    back and uninstalled, before that (tests/tests/helm.rs);
# 1. the end-to-end suites against that install (HNS_E2E_KUBECONFIG alone: the tests that need
#    to stop a local hns process skip themselves) — a representative set with --short, all of
#    them without;
# 2. the stuck-Terminating diagnoses (tests/tests/diagnose.rs), among them pods on a really lost
#    node: a kubelet stopped while its pod, with a PersistentVolumeClaim mounted, has a grace
#    period;
# 3. the availability scenarios (tests/src/availability): a rollout restart, an image upgrade, a
#    drain, SIGKILL of the leader, both replicas deleted, the leader's node lost, under a steady
#    client load; a table of figures that fails the run if one misses its target.
#
# The image upgrade starts from the previous commit's image, built the same way from a worktree
# of HEAD~1 (a second release build); with --short it starts from this build's image under
# another tag, which rolls the Deployment just the same (new pods, a new ReplicaSet).
# Needs root (network namespaces, a bridge, cgroups, mounts); one node cluster per machine.
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
[ "$(id -u)" = 0 ] || die "the availability suite needs root (network namespaces, a bridge, cgroups, mounts)"

short=""; scenarios=(); only=""
for a in "$@"; do
  case "$a" in
    --short) short=1 ;;
    --scenarios-only) only=1 ;;
    [a-f] | control) scenarios+=("$a") ;;
    *) die "usage: $0 [--short] [--scenarios-only] [a b c d e f control]" ;;
  esac
done

# kube-controller-manager's --node-monitor-grace-period (its default since Kubernetes 1.32): how
# long a node that stopped posting its status stays Ready.
export HNS_NODE_MONITOR_GRACE=50

cargo build -p kubectl-hns -p hns-e2e --bin hns-availability || die "cargo build failed"
cargo test -p hns-e2e --no-run >/dev/null 2>&1 || cargo test -p hns-e2e --no-run || die "building the e2e tests failed"
link_completer
ARCHIVE="$("$ROOT/hack/build-image.sh" | tail -n1)" || die "building the image failed"
REF="$(cat "$(dirname "$ARCHIVE")/hns-apiserver.ref")"
export HNS_IMAGE="$REF" HNS_PREVIOUS_IMAGE="hns-apiserver:previous"

# The previous commit's image, for the upgrade: a worktree of HEAD~1 built by this build's
# script, its release build in a target directory of its own.
PREVIOUS_ARCHIVE=""
if [ -z "$short" ]; then
  prev="$(git rev-parse HEAD~1)" || die "no previous commit to upgrade from"
  WT="$TARGET_DIR/previous-commit"
  rm -rf "$WT"; git worktree prune
  git worktree add --detach "$WT" "$prev" >/dev/null || die "git worktree add failed"
  cp "$ROOT/hack/build-image.sh" "$WT/hack/build-image.sh"
  [ -f "$WT/hack/lib.sh" ] || die "the previous commit has no hack/lib.sh"
  log "building the previous commit's image ($prev)"
  PREVIOUS_ARCHIVE="$(cd "$WT" && CARGO_TARGET_DIR="$TARGET_DIR/previous-target" hack/build-image.sh | tail -n1)" \
    || die "building the previous commit's image failed"
fi

throwaway_cluster availability
"$ROOT/hack/control-plane.sh" up "$DIR" --nodes
HNS_NODES=2 "$ROOT/hack/nodes.sh" up "$DIR"
"$ROOT/hack/nodes.sh" load "$DIR" "$ARCHIVE"
# The image the upgrade starts from, under its own tag in every node's containerd.
for nd in "$DIR"/nodes/*/; do
  sock="$nd/containerd.sock"
  if [ -n "$PREVIOUS_ARCHIVE" ]; then
    prev_ref="docker.io/library/$(cat "$(dirname "$PREVIOUS_ARCHIVE")/hns-apiserver.ref")"
    ctr --address "$sock" -n k8s.io images import "$PREVIOUS_ARCHIVE" >/dev/null || die "importing the previous image failed"
  else
    prev_ref="docker.io/library/$REF"
  fi
  ctr --address "$sock" -n k8s.io images rm "docker.io/library/$HNS_PREVIOUS_IMAGE" >/dev/null 2>&1 || true
  ctr --address "$sock" -n k8s.io images tag "$prev_ref" "docker.io/library/$HNS_PREVIOUS_IMAGE" >/dev/null \
    || die "tagging $prev_ref as $HNS_PREVIOUS_IMAGE failed"
done
# The previous commit's image has the same tag as this one's: import this build's last.
[ -z "$PREVIOUS_ARCHIVE" ] || "$ROOT/hack/nodes.sh" load "$DIR" "$ARCHIVE"
use_control_plane "$DIR"
# Not target/debug on PATH: the plugin tests put kubectl-hns on PATH themselves.
export KUBECONFIG="$DIR/kubeconfig"
# 0. The Helm chart's life on these nodes before hns is installed the kubectl way
#    (tests/tests/helm.rs, helm_lifecycle_on_nodes): install (the previous commit's chart, when it
#    has one, with the previous image), upgrade, rollback, uninstall; every namespace and copy
#    survives the uninstall.
log "helm: install, upgrade, rollback and uninstall of charts/hns"
unset HNS_E2E_DIR
HNS_HELM_LIFECYCLE=1 HNS_E2E_KUBECONFIG="$DIR/kubeconfig" HNS_PREVIOUS_CHART="${WT:+$WT/charts/hns}" \
  cargo test -p hns-e2e --test helm -- --exact helm_lifecycle_on_nodes --nocapture \
  || die "the Helm chart's install, upgrade, rollback or uninstall failed"
log "kubectl apply -f deploy/hns.yaml"
kubectl apply -f deploy/hns.yaml >/dev/null || die "kubectl apply -f deploy/hns.yaml failed"
kubectl -n hns-system rollout status deployment/hns-apiserver --timeout=180s || die "hns did not roll out"
kubectl wait --for=condition=Available --timeout=120s apiservice/v1alpha2.hnc.x-k8s.io >/dev/null \
  || die "APIService v1alpha2.hnc.x-k8s.io did not become Available"

# 1. The e2e suites against the in-cluster install.
export HNS_E2E_KUBECONFIG="$DIR/kubeconfig" HNS_NODES_DIR="$DIR"
if [ -n "$only" ]; then
  log "--scenarios-only: no e2e suites"
elif [ -n "$short" ]; then
  log "e2e against hns on the nodes: a representative set"
  cargo test -p hns-e2e --test foundation --test hierarchy --test views --test propagation \
    --test quotas_enforcement --test plugin || die "the e2e tests against the in-cluster install failed"
else
  # Every suite assumes what the tests' hns-apiserver allows (hack/hns-up.sh, and docs/how-to.md
  # says so): the managed label env. The install gets that one flag, as a user would add it.
  log "e2e against hns on the nodes: every suite (with --managed-namespace-label env)"
  kubectl -n hns-system patch deployment hns-apiserver --type json \
    -p '[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--managed-namespace-label=env"}]' >/dev/null \
    || die "adding --managed-namespace-label to the Deployment failed"
  kubectl -n hns-system rollout status deployment/hns-apiserver --timeout=300s || die "hns did not roll out with the flag"
  cargo test -p hns-e2e --no-fail-fast -- --skip diagnose_ || die "the e2e tests against the in-cluster install failed"
fi

# 2. The stuck-Terminating diagnoses, with pods on a really lost node among them (with --short,
#    that one only). Losing the node moved its hns replica; a restart spreads them again.
if [ -n "$only" ]; then
  :
elif [ -n "$short" ]; then
  cargo test -p hns-e2e --test diagnose -- --test-threads=1 diagnose_pods_on_a_really_lost_node     || die "the diagnosis of a really lost node failed"
else
  cargo test -p hns-e2e --test diagnose -- --test-threads=1 || die "the diagnose tests against the in-cluster install failed"
fi
kubectl -n hns-system rollout restart deployment/hns-apiserver >/dev/null
kubectl -n hns-system rollout status deployment/hns-apiserver --timeout=300s || die "hns did not roll out again"

# 3. The availability scenarios.
set -o pipefail
"$TARGET_DIR/debug/hns-availability" ${short:+--short} "${scenarios[@]}" 2>&1 | tee "$DIR/report.txt"
