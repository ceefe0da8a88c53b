#!/usr/bin/env bash
# make reliability: the reliability suites (bad input, auth matrix, load, faults, outage safety)
# against a fresh local control plane with two hns replicas behind their Service; prints one
# table of figures and fails if a figure misses its target.
#   hack/reliability.sh [--short] [SUITE...]
# --short is the version CI runs (minutes, debug builds); without it, release builds and the
# full sizes (5 minutes of load, 50+ fault trials).
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

profile=release; flag=--release
for a in "$@"; do [ "$a" = --short ] && { profile=debug; flag=; }; done
cargo build $flag -p hns-apiserver -p kubectl-hns || die "cargo build failed"
cargo build $flag -p hns-e2e --bin hns-reliability || die "cargo build failed"
TARGET="$TARGET_DIR/$profile"

# schemathesis, pinned, in a virtualenv in the cache.
VENV="$HNS_CACHE/venv-schemathesis"
if [ ! -x "$VENV/bin/schemathesis" ]; then
  python3 -m venv --help >/dev/null 2>&1 || apt_install python3-venv
  log "installing schemathesis into $VENV"
  python3 -m venv "$VENV" || die "python3 -m venv failed"
  "$VENV/bin/pip" install -q -r "$ROOT/hack/reliability-requirements.txt" || die "pip install schemathesis failed"
fi

throwaway_cluster reliability
HNS_AGGREGATOR_ROUTING=1 "$ROOT/hack/control-plane.sh" up "$DIR"
HNS_REPLICAS=2 HNS_APISERVER_BIN="$TARGET/hns-apiserver" RUST_LOG="${RUST_LOG:-warn}" "$ROOT/hack/hns-up.sh" up "$DIR"
use_control_plane "$DIR"
export HNS_E2E_KUBECONFIG="$DIR/kubeconfig" HNS_E2E_DIR="$DIR" HNS_SCHEMATHESIS="$VENV/bin/schemathesis"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
# kubectl hns (for the outage suite's diagnose) from the same build.
export HNS_PLUGIN_DIR="$TARGET"
# The report is kept so that, if the run fails, teardown can print the table again after the
# components' log tails: the figure that missed is then the last thing a CI log shows.
set -o pipefail
"$TARGET/hns-reliability" "$@" 2>&1 | tee "$DIR/report.txt"
