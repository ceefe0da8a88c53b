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
# die MESSAGE: fails the script. The message is also kept in $DIR/errors (when the script has a
# state directory), so that teardown can repeat it after the logs' tails: a CI log shows only its end.
die() {
  printf '\033[1;31m[hns] error:\033[0m %s\n' "$*" >&2
  if [ -n "${DIR:-}" ] && [ -d "$DIR" ]; then printf '%s\n' "$*" >> "$DIR/errors" || true; fi
  exit 1
}

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
    # A panic's message is followed by its backtrace; name it again where a CI log ends.
    grep -h "panicked at" -A1 "$DIR/report.txt" >&2 || true
  fi
  if [ $rc -ne 0 ] && [ -s "$DIR/errors" ]; then
    echo "----- why the run failed (again)" >&2
    sed 's/^/[hns] error: /' "$DIR/errors" >&2
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

# --- node mode (hack/nodes.sh) -------------------------------------------------------------
# Every address comes from 198.18.0.0/15, reserved for network tests (RFC 2544), and stays on
# this machine: the bridge hack/nodes.sh creates holds $NODE_BRIDGE_IP (kube-apiserver listens
# there), node i is $(node_ip i) in its own network namespace $(node_name i), its pods are in
# $(node_pod_cidr i), and Services get ClusterIPs from $NODE_SERVICE_CIDR. One node-mode cluster
# per machine (the bridge and namespace names are fixed).
NODE_BRIDGE=hns-br0
NODE_BRIDGE_IP=198.18.0.1
NODE_CLUSTER_CIDR=198.18.0.0/16
NODE_SERVICE_CIDR=198.19.0.0/16
NODE_KUBERNETES_SERVICE_IP=198.19.0.1
# Outside the kernel's ephemeral range, so never a port free_port hands out.
NODE_APISERVER_PORT=6443
node_name() { echo "hns-node-$1"; }
node_ip() { echo "198.18.0.$((10 + $1))"; }
node_pod_cidr() { echo "198.18.$1.0/24"; }

# oci_image_archive ROOTFS NAME OUT USER ENTRYPOINT...: packs the directory ROOTFS (files,
# directories and symbolic links, owned by root) as the one layer of an OCI image named NAME
# (containerd normalises a name without a registry to docker.io/library/NAME) into the
# archive OUT, which `ctr images import` loads. Deterministic: fixed times, owners and order.
oci_image_archive() {
  local rootfs="$1" name="$2" out="$3" user="$4"; shift 4
  python3 - "$rootfs" "$name" "$out" "$user" "$@" <<'PY'
import hashlib, io, json, os, sys, tarfile
rootfs, name, out, user, *entrypoint = sys.argv[1:]

def blob(data):
    return "sha256:" + hashlib.sha256(data).hexdigest(), data

def tar_bytes(entries):  # [(path, kind, data, mode)]: kind "dir", "file" or "link" (data: target)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path, kind, data, mode in entries:
            info = tarfile.TarInfo(path)
            info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = mode, 0, 0, 0, "", ""
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                t.addfile(info)
            elif kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, data
                t.addfile(info)
            else:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()

files = []
for d, dirs, names in os.walk(rootfs):
    dirs.sort()
    for n in sorted(dirs + names):
        p = os.path.join(d, n)
        rel = os.path.relpath(p, rootfs)
        if os.path.islink(p):
            files.append((rel, "link", os.readlink(p), 0o777))
        elif os.path.isdir(p):
            files.append((rel, "dir", None, os.stat(p).st_mode & 0o7777))
        else:
            files.append((rel, "file", open(p, "rb").read(), os.stat(p).st_mode & 0o7777))
files.sort(key=lambda e: e[0])
layer_digest, layer = blob(tar_bytes(files))
config_digest, config = blob(json.dumps({
    "architecture": "amd64", "os": "linux",
    "config": {"User": user, "Entrypoint": entrypoint, "WorkingDir": "/",
               "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
    "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
}, sort_keys=True).encode())
manifest_digest, manifest = blob(json.dumps({
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": len(config)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": len(layer)}],
}, sort_keys=True).encode())
index = json.dumps({
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest, "size": len(manifest),
        "platform": {"architecture": "amd64", "os": "linux"},
        # containerd names an imported image after this annotation.
        "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]},
    }],
}, sort_keys=True).encode()
entries = [("blobs", "dir", None, 0o755), ("blobs/sha256", "dir", None, 0o755)]
for digest, data in sorted([(layer_digest, layer), (config_digest, config), (manifest_digest, manifest)]):
    entries.append(("blobs/sha256/" + digest.split(":")[1], "file", data, 0o644))
entries += [("index.json", "file", index, 0o644), ("oci-layout", "file", b'{"imageLayoutVersion":"1.0.0"}', 0o644)]
with open(out + ".tmp", "wb") as f:
    f.write(tar_bytes(entries))
os.rename(out + ".tmp", out)
PY
}
