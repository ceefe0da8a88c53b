#!/usr/bin/env bash
# Builds the local control plane of one Kubernetes version with Go, from the Go module proxy:
# kube-apiserver, kube-controller-manager and a kubectl of the same version, and etcd. Each is
# cached per version in $HNS_CACHE, so a machine pays a build once (about 11 minutes for
# Kubernetes on 2 cores, 1 for etcd). Prints the directory holding the four binaries.
#
#   hack/build-control-plane.sh           the control plane
#   hack/build-control-plane.sh --nodes   also what real nodes need (hack/nodes.sh): kubelet,
#                                         kube-proxy and kube-scheduler, into the same directory;
#                                         with the control plane already cached, only those three
#                                         are built
#
#   HNS_K8S_VERSION   1.37.2 (default), a full version, or MAJOR.MINOR for the newest patch
#                     release of that minor the module proxy serves (e.g. 1.34)
#   HNS_ETCD_VERSION  3.6.16 (default)
#
# k8s.io/kubernetes lists its staging modules (k8s.io/api, k8s.io/apiserver, …) at v0.0.0 and
# maps them to its own ./staging tree with `replace` lines that only apply inside that
# repository. A small wrapper module requires k8s.io/kubernetes and maps every staging module to
# its published v0.MINOR.PATCH release instead; that is all `go build` needs (the generated code
# is checked in).
source "$(dirname "$0")/lib.sh"

command -v go >/dev/null || die "Go is needed to build the control plane (go1.26 or newer)"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

want_nodes=""
case "${1:-}" in --nodes) want_nodes=1 ;; "") ;; *) die "usage: $0 [--nodes]" ;; esac
version="$(k8s_version)"
etcd_version="$ETCD_VERSION"
BIN="$(k8s_bin_dir "$version")"
have_control_plane() { [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kube-controller-manager" ] && [ -x "$BIN/kubectl" ]; }
NODE_CMDS=(kubelet kube-proxy kube-scheduler)
have_nodes() {
  local c
  [ -n "$want_nodes" ] || return 0
  for c in "${NODE_CMDS[@]}"; do [ -x "$BIN/$c" ] || return 1; done
}
if have_control_plane && have_nodes && [ -x "$BIN/etcd" ]; then
  log "control plane v$version binaries cached in $BIN"
  echo "$BIN"
  exit 0
fi
mkdir -p "$BIN"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/hns-build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

build_kubernetes() { # COMMAND...: the commands of k8s.io/kubernetes/cmd to build, in one go build
  local minor="${version#*.}"; minor="${minor%%.*}"
  local staging="v0.$minor.${version##*.}"
  log "fetching k8s.io/kubernetes@v$version from the Go module proxy"
  local mod
  mod="$(cd "$WORK" && go mod download -json "k8s.io/kubernetes@v$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')" \
    || die "k8s.io/kubernetes@v$version is not served by the Go module proxy"
  mkdir -p "$WORK/kubernetes"
  {
    printf 'module hns.local/control-plane\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$version"
    sed -n '/^replace (/,/^)/p' "$mod" | awk -v v="$staging" '$2 == "=>" && $3 ~ /^\.\/staging\// { print "\t" $1 " => " $1 " " v }'
    printf ')\n'
  } > "$WORK/kubernetes/go.mod"
  grep -q 'k8s.io/apiserver =>' "$WORK/kubernetes/go.mod" || die "found no staging modules in $mod"
  local ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  local cmds=("$@") pkgs=() c
  for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  if have_control_plane; then
    log "building ${cmds[*]} v$version (2 to 6 minutes on 2 cores: less when Go's build cache has the control plane's packages)"
  else
    log "building ${cmds[*]} v$version (about 11 minutes on 2 cores the first time)"
  fi
  ( cd "$WORK/kubernetes" && go build -o "$WORK/out/" -ldflags "$ldflags" "${pkgs[@]}" ) \
    || die "building Kubernetes v$version failed; see the output above"
  for c in "${cmds[@]}"; do mv "$WORK/out/$c" "$BIN/"; done
}

build_etcd() {
  local cached
  cached="$HNS_CACHE/etcd/v$etcd_version/etcd"
  if [ ! -x "$cached" ]; then
    log "building etcd v$etcd_version (about a minute)"
    mkdir -p "$WORK/etcd" "$(dirname "$cached")"
    printf 'module hns.local/etcd\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$etcd_version" > "$WORK/etcd/go.mod"
    ( cd "$WORK/etcd" && go build -o "$WORK/etcd/etcd" -ldflags "-s -w" go.etcd.io/etcd/server/v3 ) \
      || die "building etcd v$etcd_version failed; see the output above"
    mv "$WORK/etcd/etcd" "$cached"
  fi
  ln -sf "$cached" "$BIN/etcd"
}

cmds=()
have_control_plane || cmds+=(kube-apiserver kube-controller-manager kubectl)
have_nodes || cmds+=("${NODE_CMDS[@]}")
[ ${#cmds[@]} -eq 0 ] || build_kubernetes "${cmds[@]}"
build_etcd
log "cached the control plane v$version in $BIN"
echo "$BIN"
