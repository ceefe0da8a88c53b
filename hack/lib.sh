# Shared helpers for the hack/ scripts. Sourced, never run.
set -euo pipefail

HNS_CACHE="${HNS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hns}"
# The Kubernetes version of the local control plane (hack/build-control-plane.sh builds it):
# the newest release by default; HNS_K8S_VERSION picks another (1.34 is the oldest supported).
K8S_DEFAULT_VERSION="1.37.2"
ETCD_VERSION="${HNS_ETCD_VERSION:-3.6.16}"
# Where cargo builds this workspace (CARGO_TARGET_DIR when set, as cargo reads it).
TARGET_DIR="${CARGO_TARGET_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target}"

log() { printf '\033[1;34m[hns]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[hns] error:\033[0m %s\n' "$*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=""
apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ -z "$apt_updated" ]; then
    log "apt-get update"
    as_root apt-get update -qq || die "apt-get update failed"
    apt_updated=1
  fi
  log "installing Debian packages: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}

# The full Kubernetes version asked for: HNS_K8S_VERSION as given when it has a patch number;
# for MAJOR.MINOR, the newest patch release the Go module proxy serves (or, offline, the newest
# one already built).
k8s_version() {
  local wanted="${HNS_K8S_VERSION:-$K8S_DEFAULT_VERSION}" found
  wanted="${wanted#v}"
  [[ "$wanted" =~ ^1\.[0-9]+(\.[0-9]+)?$ ]] || die "HNS_K8S_VERSION=$wanted: expected 1.MINOR or 1.MINOR.PATCH, e.g. 1.34 or 1.37.2"
  if [[ "$wanted" =~ ^1\.[0-9]+\.[0-9]+$ ]]; then echo "$wanted"; return; fi
  found="$(cd "${TMPDIR:-/tmp}" && GOFLAGS= go list -m -versions k8s.io/kubernetes 2>/dev/null | tr ' ' '\n' \
    | grep -E "^v${wanted//./\\.}\.[0-9]+$" | sort -V | tail -n1)" || true
  [ -n "$found" ] || found="$(ls -d "$HNS_CACHE"/k8s/v"$wanted".* 2>/dev/null | xargs -rn1 basename | sort -V | tail -n1)"
  [ -n "$found" ] || die "no release of Kubernetes $wanted found on the Go module proxy"
  echo "${found#v}"
}

# Where the binaries of Kubernetes VERSION (and etcd) are cached.
k8s_bin_dir() { echo "$HNS_CACHE/k8s/v$1/bin"; }

# A free TCP port on 127.0.0.1, chosen by the kernel.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# --- throw-away clusters -------------------------------------------------------------------
# throwaway_cluster PURPOSE: sets DIR to a new directory for a control plane with hns; when the
# script exits, both are stopped and the directory removed, after printing the components' last
# log lines if the script failed. Commands in TEARDOWN_ALSO run first (a second cluster's own
# teardown, say), their failures ignored.
TEARDOWN_ALSO=()
throwaway_cluster() {
  DIR="$(mktemp -d "${TMPDIR:-/tmp}/hns-$1.XXXXXX")"
  trap teardown EXIT
}
teardown() {
  local rc=$? hack also
  hack="$(dirname "${BASH_SOURCE[0]}")"
  if [ $rc -ne 0 ] && [ -d "$DIR/logs" ]; then
    for f in "$DIR"/logs/*.log; do echo "----- last lines of $f" >&2; tail -n 25 "$f" >&2; done
  fi
  if [ $rc -ne 0 ] && [ -f "$DIR/report.txt" ]; then
    echo "----- the end of the run's report again (the table of figures and what preceded it)" >&2
    tail -n 60 "$DIR/report.txt" >&2
  fi
  for also in "${TEARDOWN_ALSO[@]}"; do eval "$also" >/dev/null 2>&1 || true; done
  "$hack/hns-up.sh" down "$DIR" >/dev/null 2>&1 || true
  "$hack/control-plane.sh" down "$DIR" >/dev/null 2>&1 || true
  rm -rf "$DIR"
  exit $rc
}

# use_control_plane DIR: reads DIR/env (written by control-plane.sh) and puts the kubectl of the
# control plane's version first on PATH, for these scripts and the tests they start.
use_control_plane() {
  source "$1/env"
  export PATH="$K8S_BIN:$PATH"
}

# --- state directories ---------------------------------------------------------------------
# Callers set DIR; certificates go to $PKI, logs to $LOGS, pid files to $PIDS.
set_dirs() {
  PKI="$DIR/pki"; LOGS="$DIR/logs"; PIDS="$DIR/pids"
  mkdir -p "$PKI" "$LOGS" "$PIDS"
}

# Whether the process recorded as NAME is running.
alive() { [ -f "$PIDS/$1.pid" ] && kill -0 "$(cat "$PIDS/$1.pid")" 2>/dev/null; }

# start NAME CMD...: runs CMD in the background, logging to $LOGS/NAME.log.
start() {
  local name="$1"; shift
  "$@" >"$LOGS/$name.log" 2>&1 &
  echo $! > "$PIDS/$name.pid"
}

# stop NAME: TERM, then KILL after 5 s.
stop() {
  local f="$PIDS/$1.pid" pid
  [ -f "$f" ] || return 0
  pid="$(cat "$f")"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$f"
}

# wait_for SECONDS CMD...: retries CMD every 0.2 s until it succeeds.
wait_for() {
  local secs="$1"; shift
  for _ in $(seq 1 $((secs * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

# --- PKI (openssl) -------------------------------------------------------------------------
new_ca() { # name cn
  [ -f "$PKI/$1.crt" ] && return 0
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.crt" \
    -days 3650 -subj "/CN=$2" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
}
new_cert() { # name ca subject usage [san]
  [ -f "$PKI/$1.crt" ] && return 0
  local ext="$PKI/$1.ext"
  { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$4"; [ -n "${5:-}" ] && echo "subjectAltName=$5"; } > "$ext"
  openssl req -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.csr" -subj "$3" 2>/dev/null
  openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/$2.crt" -CAkey "$PKI/$2.key" -CAcreateserial \
    -out "$PKI/$1.crt" -days 3650 -extfile "$ext" 2>/dev/null
  rm -f "$PKI/$1.csr" "$ext"
}

# A kubeconfig for a client certificate: kubeconfig_for FILE CERTNAME
kubeconfig_for() {
  local f="$1"; rm -f "$f"
  kubectl config --kubeconfig "$f" set-cluster local --server "https://127.0.0.1:$KUBE_APISERVER_PORT" \
    --certificate-authority "$PKI/ca.crt" --embed-certs >/dev/null
  kubectl config --kubeconfig "$f" set-credentials user --client-certificate "$PKI/$2.crt" \
    --client-key "$PKI/$2.key" --embed-certs >/dev/null
  kubectl config --kubeconfig "$f" set-context local --cluster local --user user --namespace default >/dev/null
  kubectl config --kubeconfig "$f" use-context local >/dev/null
}

# kubectl completes `kubectl hns …` by running kubectl_complete-hns from PATH: kubectl-hns itself,
# under that name (see plugin/README.md). Put it beside the debug kubectl-hns just built.
link_completer() {
  ln -sf kubectl-hns "$TARGET_DIR/debug/kubectl_complete-hns"
}
