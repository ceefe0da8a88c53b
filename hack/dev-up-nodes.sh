#!/usr/bin/env bash
# make dev-up-nodes: the local control plane with real nodes, and hns installed on them exactly as
# users install it: `kubectl apply -f deploy/hns.yaml` as rendered, its two hns-apiserver pods
# scheduled by the Deployment, probed by kubelets, reached by kube-apiserver through the Service's
# EndpointSlices. Then a short demonstration. State in .dev/nodes-cluster/; make dev-down stops it.
#
#   HNS_NODES=N             the number of nodes (default 2; hack/nodes.sh says what a node is)
#   HNS_IMAGE_ARCHIVE=FILE  import this image archive instead of building one (hack/build-image.sh)
#
# Needs root (network namespaces, a bridge, cgroups, mounts). The first run builds kubelet and
# kube-proxy (cached beside the control plane), the pause image and a toolbox image for checks
# from pods (cached in $HNS_CACHE); hns's image is built every time (cargo decides what changed).
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="$ROOT/.dev/nodes-cluster"
cd "$ROOT"
[ "$(id -u)" = 0 ] || die "make dev-up-nodes needs root (network namespaces, a bridge, cgroups, mounts)"
started="$(date +%s)"

# The image the Deployment runs; containerd names an image without a registry docker.io/library/….
IMAGE="$(sed -n 's/^ *image: *//p' deploy/hns.yaml | head -n1)"
[ -n "$IMAGE" ] || die "no image in deploy/hns.yaml"
if [[ "$IMAGE" != */* ]]; then FULL_IMAGE="docker.io/library/$IMAGE"
elif [[ "${IMAGE%%/*}" == *[.:]* || "${IMAGE%%/*}" == localhost ]]; then FULL_IMAGE="$IMAGE"
else FULL_IMAGE="docker.io/$IMAGE"; fi
if [ -n "${HNS_IMAGE_ARCHIVE:-}" ]; then
  ARCHIVE="$HNS_IMAGE_ARCHIVE"
else
  [ -x "$ROOT/hack/build-image.sh" ] || die "hack/build-image.sh not found: set HNS_IMAGE_ARCHIVE to an image archive of $IMAGE"
  ARCHIVE="$("$ROOT/hack/build-image.sh" | tail -n1)" || die "building the image failed"
fi
[ -f "$ARCHIVE" ] || die "image archive $ARCHIVE not found"
log "building kubectl-hns"
cargo build -p kubectl-hns || die "cargo build failed"
link_completer

"$ROOT/hack/control-plane.sh" up "$DIR" --nodes
HNS_NODES="${HNS_NODES:-2}" "$ROOT/hack/nodes.sh" up "$DIR"
"$ROOT/hack/nodes.sh" load "$DIR" "$ARCHIVE"
use_control_plane "$DIR"
for nd in "$DIR"/nodes/*/; do
  ctr --address "$nd/containerd.sock" -n k8s.io images ls -q | grep -qFx "$FULL_IMAGE" \
    || die "$ARCHIVE did not give $(basename "$nd")'s containerd the image $FULL_IMAGE that deploy/hns.yaml runs"
done

export KUBECONFIG="$DIR/kubeconfig" PATH="$TARGET_DIR/debug:$PATH"
log "kubectl apply -f deploy/hns.yaml"
kubectl apply -f deploy/hns.yaml >/dev/null || die "kubectl apply -f deploy/hns.yaml failed"
# A new image under the same tag (a rebuilt archive) is only used by new pods.
if [ -f "$DIR/image.digest" ] && [ "$(cat "$DIR/image.digest")" != "$(sha256sum "$ARCHIVE" | cut -d' ' -f1)" ]; then
  kubectl -n hns-system rollout restart deployment/hns-apiserver >/dev/null
fi
sha256sum "$ARCHIVE" | cut -d' ' -f1 > "$DIR/image.digest"
kubectl -n hns-system rollout status deployment/hns-apiserver --timeout=180s || {
  kubectl -n hns-system get pods -o wide >&2; kubectl -n hns-system describe pods >&2
  die "the hns-apiserver Deployment did not become ready"
}
kubectl wait --for=condition=Available --timeout=120s apiservice/v1alpha2.hnc.x-k8s.io >/dev/null || {
  kubectl get apiservice v1alpha2.hnc.x-k8s.io -o yaml >&2
  die "APIService v1alpha2.hnc.x-k8s.io did not become Available"
}
wait_for 30 kubectl get --raw /apis/hnc.x-k8s.io/v1alpha2/subnamespaces || die "kube-apiserver does not route hnc.x-k8s.io to hns"
log "up in $(($(date +%s) - started)) s"

echo
log "kubectl get nodes -o wide"
kubectl get nodes -o wide
echo
log "kubectl -n hns-system get pods -o wide"
kubectl -n hns-system get pods -o wide
echo
log "kubectl get apiservice v1alpha2.hnc.x-k8s.io"
kubectl get apiservice v1alpha2.hnc.x-k8s.io
echo
log "a subnamespace through the admission webhooks (hns's pods): demo-team-a in demo-org"
kubectl get ns demo-org >/dev/null 2>&1 || kubectl create ns demo-org >/dev/null
kubectl get ns demo-team-a >/dev/null 2>&1 || kubectl create -f - <<'YAML'
apiVersion: hnc.x-k8s.io/v1alpha2
kind: Subnamespace
metadata: {name: demo-team-a, namespace: demo-org}
YAML
wait_for 30 kubectl get ns demo-team-a || die "the subnamespace demo-team-a was not created"
kubectl get subnamespaces -n demo-org
kubectl hns tree demo-org
echo
log "kubectl get hierarchyconfigurations -A"
kubectl get hierarchyconfigurations -A
echo
log "a pod in demo-team-a asks kube-apiserver for its version at the kubernetes Service's ClusterIP, with its ServiceAccount's CA and token"
wait_for 30 kubectl -n demo-team-a get serviceaccount default || die "no ServiceAccount default in demo-team-a"
kubectl -n demo-team-a delete pod probe --ignore-not-found >/dev/null
kubectl -n demo-team-a run probe --image="$TOOLBOX_IMAGE" --restart=Never --command -- kubectl get --raw /version >/dev/null
wait_for 60 sh -c "kubectl -n demo-team-a get pod probe -o jsonpath='{.status.phase}' | grep -qx Succeeded" \
  || { kubectl -n demo-team-a describe pod probe >&2; kubectl -n demo-team-a logs probe >&2; die "the probe pod did not reach the kubernetes Service"; }
kubectl -n demo-team-a logs probe | grep -E 'gitVersion'
kubectl -n demo-team-a delete pod probe --wait=false >/dev/null
echo
log "kubectl delete ns of a namespace completes"
kubectl create ns demo-deleted >/dev/null
kubectl delete ns demo-deleted --timeout=60s
cat <<MSG

hns is running on $(kubectl get nodes --no-headers | wc -l) nodes. To use it:

  export KUBECONFIG=$DIR/kubeconfig
  export PATH=$TARGET_DIR/debug:$K8S_BIN:\$PATH
  kubectl get pods -A -o wide
  kubectl hns tree -A
  kubectl -n demo-org run -it --rm sh --image=$TOOLBOX_IMAGE --restart=Never   # a shell in a pod

A node's containerd: ctr --address $DIR/nodes/hns-node-1/containerd.sock -n k8s.io containers ls
Logs: $DIR/logs/   Stop everything: make dev-down
MSG
