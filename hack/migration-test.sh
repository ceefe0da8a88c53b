#!/usr/bin/env bash
# The migration from HNC to hns and back, tried for real (part of `make test`).
#
# Starts a local control plane WITHOUT hns, runs HNC v1.1 itself (built from the Go module proxy
# by hack/build-hnc.sh: its CRDs, its manager on loopback, its webhooks pointed at it) and builds
# a hierarchy with it: full namespaces with parents, nested subnamespaces, a propagated
# RoleBinding and Secret (HNCConfiguration: secrets Propagate), allowCascadingDeletion on one
# namespace. Then it follows docs/migration.md: every fenced block tagged `sh migration to-hns`,
# in document order, run as written; installs hns; and checks that nothing was lost. Then the
# same for `sh migration to-hnc` (the way back), checking HNC has the same hierarchy again.
#
# The only blocks not run as written are tagged `local=ACTION`: steps that need a cluster's
# nodes (installing hns's or HNC's Deployment, stopping HNC's Pod). This control plane has no
# nodes, so ACTION, the same step for processes on loopback, runs instead:
#   install-hns   hack/hns-up.sh (config/dev: hns-apiserver on loopback, as `make dev-up`)
#   stop-hns      hack/hns-up.sh down (the block deletes hns's Deployment)
#   stop-hnc      HNC's manager process is stopped (the block deletes its Deployment)
#   download-hnc  writes default.yaml from HNC's CRDs and webhooks (the block downloads HNC's
#                 release manifest; this machine reaches no web site)
#   install-hnc   HNC's CRDs, webhooks and manager, as at the start
#
# HNC's webhooks are wired as in a cluster (its validating and mutating configurations as HNC
# ships them, prefixed hnc- as its kustomization does, pointed at the manager by URL with a
# certificate from the test's CA), because the migration's traps are theirs: with the manager
# gone, its fail-closed webhooks block every change in HNC's namespaces.
#
#   HNS_MIGRATION_KEEP=1      leave the cluster (and HNC's manager) running at the end
#   HNS_MIGRATION_STOP=hnc|hns stop once HNC has built its hierarchy, or once hns has taken over
#
# Takes about a minute on 2 cores once HNC is built (hack/build-hnc.sh: about 3 minutes the first
# time on a machine, with nothing in Go's caches).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hnc.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
DOC="$ROOT/docs/migration.md"

cargo build -p hns-apiserver -p kubectl-hns || die "cargo build failed"
HNC="$("$ROOT/hack/build-hnc.sh")"

on_exit() {
  local rc=$?
  if [ -n "${HNS_MIGRATION_KEEP:-}" ]; then
    log "kept: export KUBECONFIG=$DIR/kubeconfig; stop with kill \$(cat $DIR/pids/hnc-manager.pid); hack/hns-up.sh down $DIR; hack/control-plane.sh down $DIR"
    exit $rc
  fi
  if [ -n "${PIDS:-}" ]; then hnc_down; fi
  # teardown reads the exit status from $?; under `set -e` a failing `(exit $rc)` on its own
  # would end this handler before it, leaving the control plane running.
  if [ "$rc" = 0 ]; then teardown; else (exit "$rc") || teardown; fi
}
DIR="$(mktemp -d "${TMPDIR:-/tmp}/hns-migration.XXXXXX")"
trap on_exit EXIT
"$ROOT/hack/control-plane.sh" up "$DIR"
use_control_plane "$DIR"
set_dirs
export KUBECONFIG="$DIR/kubeconfig" PATH="$TARGET_DIR/debug:$PATH" NO_COLOR=1
WORK="$DIR/work"; mkdir -p "$WORK"

# The hierarchy HNC manages before the migration:
#   acme-org                      full root, managed label env=prod; RoleBinding acme-admins
#   ├── team-a                    full, allowCascadingDeletion
#   │   └── team-a-dev      (s)   subnamespace (anchor in team-a)
#   │       └── team-a-feat (s)   subnamespace of a subnamespace
#   └── team-b                    full; Secret db-creds (secrets: Propagate)
#       └── svc-x                 full
build_with_hnc() {
  log "building a hierarchy with HNC"
  local ns
  for ns in acme-org team-a team-b svc-x; do kubectl create ns "$ns" >/dev/null; done
  hc() { printf 'apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchyConfiguration\nmetadata: {name: hierarchy, namespace: %s}\nspec: %s\n' "$1" "$2"; }
  anchor() { printf 'apiVersion: hnc.x-k8s.io/v1alpha2\nkind: SubnamespaceAnchor\nmetadata: {name: %s, namespace: %s}\n' "$2" "$1"; }
  { hc acme-org '{labels: [{key: env, value: prod}]}'; echo ---
    hc team-a '{parent: acme-org, allowCascadingDeletion: true}'; echo ---
    hc team-b '{parent: acme-org}'; echo ---; hc svc-x '{parent: team-b}'; } | kubectl apply -f - >/dev/null
  anchor team-a team-a-dev | kubectl apply -f - >/dev/null
  wait_for 60 kubectl get ns team-a-dev || die "HNC did not create subnamespace team-a-dev"
  anchor team-a-dev team-a-feat | kubectl apply -f - >/dev/null
  wait_for 60 kubectl get ns team-a-feat || die "HNC did not create subnamespace team-a-feat"
  kubectl patch hncconfiguration config --type merge \
    -p '{"spec":{"resources":[{"resource":"secrets","mode":"Propagate"}]}}' >/dev/null
  kubectl -n acme-org create rolebinding acme-admins --clusterrole view --group acme-admins >/dev/null
  kubectl -n team-b create secret generic db-creds --from-literal password=s3cr3t >/dev/null
  wait_copies "HNC"
}

# wait_copies WHO: until every descendant holds its copies.
wait_copies() {
  local ns
  for ns in team-a team-b svc-x team-a-dev team-a-feat; do
    wait_for 90 kubectl -n "$ns" get rolebinding acme-admins \
      || die "$1 did not propagate RoleBinding acme-admins to $ns"
  done
  wait_for 90 kubectl -n svc-x get secret db-creds || die "$1 did not propagate Secret db-creds to svc-x"
}

# --- what must survive ----------------------------------------------------------------------
# The hierarchy as the API shows it, whoever serves it (HNC's CRDs or hns): parents and
# allowCascadingDeletion, subnamespaces and their state, the propagation modes, and the copies
# with their UIDs (an adopted copy keeps its UID; a deleted and recreated one does not).
snapshot() {
  {
    echo "# hierarchyconfigurations"
    kubectl get hierarchyconfigurations -A -o go-template='{{range .items}}{{.metadata.namespace}} parent={{or .spec.parent "-"}} cascading={{or .spec.allowCascadingDeletion false}} labels={{range .spec.labels}}{{.key}}={{.value}}{{end}}{{"\n"}}{{end}}' \
      | grep -E '^(acme-org|team-|svc-)' | sort
    echo "# namespaces' managed label env"
    kubectl get ns -o go-template='{{range .items}}{{.metadata.name}} env={{or .metadata.labels.env "-"}}{{"\n"}}{{end}}' \
      | grep -E '^(acme-org|team-|svc-)' | sort
    echo "# subnamespaceanchors"
    kubectl get subnamespaceanchors -A -o go-template='{{range .items}}{{.metadata.namespace}}/{{.metadata.name}} {{.status.status}}{{"\n"}}{{end}}' | sort
    echo "# hncconfiguration"
    kubectl get hncconfiguration config -o go-template='{{range .spec.resources}}{{or .group "core"}}/{{.resource}}={{.mode}}{{"\n"}}{{end}}'
    echo "# copies"
    kubectl get rolebindings,secrets -A -l hnc.x-k8s.io/inherited-from \
      -o go-template='{{range .items}}{{.kind}} {{.metadata.namespace}}/{{.metadata.name}} from={{index .metadata.labels "hnc.x-k8s.io/inherited-from"}} uid={{.metadata.uid}}{{"\n"}}{{end}}' | sort
  } > "$1"
}

# tree_of PLUGIN FILE: the tree as a kubectl plugin draws it, modulo markers: HNC's plugin
# ($HNC/kubectl-hns) or hns's.
tree_of() {
  "$1" tree -A | grep -E '(acme-org|team-|svc-)' | sed -E 's/ \((s|[a-z ]+)\)//g; s/\[s\] //g; s/ +$//' > "$2"
}

# snapshot_without_uids FILE: the snapshot, with the copies' UIDs left out.
snapshot_without_uids() { snapshot "$1"; sed -i 's/ uid=.*//' "$1"; }

# --- the guide's steps ----------------------------------------------------------------------
# run_phase PHASE: runs the guide's blocks tagged `sh migration PHASE` in order, in one working
# directory (files the steps save are there for later steps), each with bash -euo pipefail.
run_phase() {
  local blocks="$DIR/blocks-$1" f where
  python3 "$ROOT/hack/migration/doc-blocks.py" "$DOC" "$1" "$blocks" || die "cannot read $DOC"
  for f in "$blocks"/*.sh; do
    where="$(cat "${f%.sh}.where")"
    if [ -f "${f%.sh}.local" ]; then
      log "$where: $(cat "${f%.sh}.local") (the local equivalent of the block)"
      local_action "$(cat "${f%.sh}.local")" || die "$where: the local equivalent of this step failed"
      continue
    fi
    log "$where: running the guide's block"
    sed 's/^/    /' "$f" >&2
    (cd "$WORK" && bash -euo pipefail "$f") || die "$where: this block of the guide failed"
  done
}

local_action() {
  case "$1" in
    install-hns) "$ROOT/hack/hns-up.sh" up "$DIR" ;;
    stop-hns) "$ROOT/hack/hns-up.sh" down "$DIR" ;;
    stop-hnc) stop hnc-manager ;;
    # HNC's release manifest, as far as this test has it: its CRDs and webhook configurations
    # (the steps pick the CRDs out of it).
    download-hnc) cat "$HNC/crds.yaml" "$HNC/webhooks.yaml" > "$WORK/default.yaml" ;;
    install-hnc) hnc_up ;;
    *) die "unknown local action $1" ;;
  esac
}

# --- checks ---------------------------------------------------------------------------------
# The namespaces carrying hns's finalizer for their subnamespaces, one per line.
held_namespaces() {
  kubectl get namespaces -o go-template='{{range .items}}{{$ns := .metadata.name}}{{range .metadata.finalizers}}{{if eq . "hnc.x-k8s.io/hasSubnamespace"}}{{$ns}}{{"\n"}}{{end}}{{end}}{{end}}'
}

same() { # same WHAT EXPECTED_FILE ACTUAL_FILE
  diff -u "$2" "$3" >&2 || die "$1 differs (- before, + after)"
  log "$1: the same"
}

# settled WHAT EXPECTED_FILE ACTUAL_FILE PRODUCER...: runs `PRODUCER... ACTUAL_FILE` until it
# writes EXPECTED_FILE (90 s at most), then compares them as `same` does. A controller that has
# just started sets its anchors' states and its tree a moment later: HNC's manager, on the way
# back, is ready before it has reconciled what the restored objects say.
settled() {
  local what="$1" expected="$2" actual="$3"; shift 3
  wait_for 90 produces "$expected" "$actual" "$@" || true
  same "$what" "$expected" "$actual"
}
produces() { local expected="$1" actual="$2"; shift 2; "$@" "$actual" && cmp -s "$expected" "$actual"; }

# Propagation is live, not just left over: a change to the source reaches its copy, and
# deleting the source removes its copies.
check_propagation_follows() {
  local who="$1" value="changed-$RANDOM"
  kubectl -n team-b patch secret db-creds --type merge -p "{\"stringData\":{\"password\":\"$value\"}}" >/dev/null
  wait_for 60 sh -c "kubectl -n svc-x get secret db-creds -o jsonpath='{.data.password}' | base64 -d | grep -qx $value" \
    || die "$who: editing Secret db-creds in team-b did not update its copy in svc-x"
  kubectl -n acme-org delete rolebinding acme-admins >/dev/null
  local ns
  for ns in team-a team-b svc-x team-a-dev team-a-feat; do
    wait_for 60 sh -c "! kubectl -n $ns get rolebinding acme-admins" \
      || die "$who: deleting RoleBinding acme-admins in acme-org left its copy in $ns"
  done
  log "$who propagates: an edited source updates its copy, a deleted source removes its copies"
}

hnc_up
build_with_hnc
snapshot "$WORK/hnc.snapshot"
tree_of "$HNC/kubectl-hns" "$WORK/hnc.tree"
log "HNC's hierarchy:"; cat "$WORK/hnc.snapshot" "$WORK/hnc.tree" >&2
[ "${HNS_MIGRATION_STOP:-}" = hnc ] && exit 0

log "from HNC to hns, following $DOC"
run_phase to-hns
settled "the hierarchy after moving to hns (copies with their UIDs)" "$WORK/hnc.snapshot" "$WORK/hns.snapshot" snapshot
settled "kubectl hns tree -A" "$WORK/hnc.tree" "$WORK/hns.tree" tree_of kubectl-hns
kubectl -n team-a get subnamespace team-a-dev >/dev/null || die "hns does not serve team-a-dev as a Subnamespace"
# hns holds a parent for its subnamespaces only once the parent is deleted.
[ -z "$(held_namespaces)" ] || die "hns holds live namespaces with its finalizer: $(held_namespaces | tr '\n' ' ')"
check_propagation_follows "hns"
kubectl -n acme-org create rolebinding acme-admins --clusterrole view --group acme-admins >/dev/null
wait_copies "hns"
[ "${HNS_MIGRATION_STOP:-}" = hns ] && exit 0

# HNC recreates some copies when it starts (its object reconciler can run before its hierarchy
# reconciler has set a namespace's parent), and the RoleBinding was recreated above: the way
# back is compared without UIDs.
log "from hns back to HNC, following $DOC"
run_phase to-hnc
[ -z "$(held_namespaces)" ] || die "after uninstalling hns, namespaces still carry its finalizer: $(held_namespaces | tr '\n' ' ')"
# hns lets every user list its resources (it answers with their view); HNC's CRDs would answer
# with everything, so none of hns's cluster-wide grants may outlive it.
left="$(kubectl get clusterroles,clusterrolebindings -o name | grep '/hns-' || true)"
[ -z "$left" ] || die "after uninstalling hns, its cluster RBAC is still there: $(echo "$left" | tr '\n' ' ')"
kubectl auth can-i list hierarchyconfigurations.hnc.x-k8s.io -A --as=migration-nobody >/dev/null 2>&1 \
  && die "after uninstalling hns, any user may list HNC's hierarchy configurations across namespaces"
wait_copies "HNC, after the way back,"
sed 's/ uid=.*//' "$WORK/hnc.snapshot" > "$WORK/hnc.snapshot-without-uids"
settled "the hierarchy after moving back to HNC (copies without UIDs)" \
  "$WORK/hnc.snapshot-without-uids" "$WORK/back.snapshot" snapshot_without_uids
settled "HNC's tree -A after the way back" "$WORK/hnc.tree" "$WORK/back.tree" tree_of "$HNC/kubectl-hns"
check_propagation_follows "HNC after the way back"
log "migration from HNC to hns and back: nothing lost"
