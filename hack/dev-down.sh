#!/usr/bin/env bash
# make dev-down: stop hns-apiserver and the local control plane started by make dev-up, and the
# cluster with nodes of make dev-up-nodes (its nodes, bridge, network namespaces, mounts, cgroups).
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="$ROOT/.dev"
[ -d "$DIR" ] || { log "nothing to stop ($DIR does not exist)"; exit 0; }
if [ -d "$DIR/nodes-cluster" ]; then "$ROOT/hack/control-plane.sh" down "$DIR/nodes-cluster"; fi
"$ROOT/hack/hns-up.sh" down "$DIR"
"$ROOT/hack/control-plane.sh" down "$DIR"
