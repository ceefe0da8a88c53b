#!/usr/bin/env bash
# make dev-down: stop hns-apiserver and the local control plane started by make dev-up.
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="$ROOT/.dev"
[ -d "$DIR" ] || { log "nothing to stop ($DIR does not exist)"; exit 0; }
"$ROOT/hack/hns-up.sh" down "$DIR"
"$ROOT/hack/control-plane.sh" down "$DIR"
