#!/usr/bin/env bash
# make bench: release builds against a fresh local control plane; prints figures and ratios.
#   hack/bench.sh [BENCHMARK...]   (default: deletion watches api propagation tree views diagnose quotas subtree-get)
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/release"
cargo build --release -p hns-apiserver -p kubectl-hns || die "cargo build failed"
cargo build --release -p hns-e2e --bin hns-bench || die "cargo build failed"
throwaway_cluster bench
"$ROOT/hack/control-plane.sh" up "$DIR"
HNS_APISERVER_BIN="$TARGET/hns-apiserver" RUST_LOG=warn "$ROOT/hack/hns-up.sh" up "$DIR"
use_control_plane "$DIR"
log "benchmarks against Kubernetes $K8S_VERSION"
export HNS_E2E_KUBECONFIG="$DIR/kubeconfig" HNS_E2E_DIR="$DIR"
# The diagnose and subtree-get benchmarks time the release kubectl-hns built above.
export HNS_PLUGIN_DIR="$TARGET"
for b in ${@:-deletion watches api propagation tree views diagnose quotas subtree-get}; do
  log "benchmark: $b"
  case "$b" in
    # The diagnoser's figures come from its e2e harness (real stuck namespaces, real kubectl).
    diagnose) cargo test --release -p hns-e2e --test diagnose -- --ignored --nocapture diagnose_bench 2>&1 | grep -E "^bench|test result" ;;
    *) "$TARGET/hns-bench" "$b" ;;
  esac
done
