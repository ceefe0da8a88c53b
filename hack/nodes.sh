#!/usr/bin/env bash
# Real nodes for the local control plane, on this one machine: each node is a network namespace
# with its own containerd, kubelet and kube-proxy, so hns runs as users run it (its Deployment's
# pods, probes, Service, EndpointSlices) and stopping a node's processes is a real node loss.
#
#   hack/nodes.sh bridge DIR         create the bridge (hack/control-plane.sh up DIR --nodes calls
#                                    it: kube-apiserver listens on it)
#   hack/nodes.sh up DIR             start HNS_NODES nodes (default 2) for the control plane in DIR
#                                    (started with --nodes) and wait until they are Ready; with
#                                    HNS_NODE_CPUS (a taskset list, e.g. 1), the nodes' processes
#                                    and pods run on those CPUs only, as on machines of their own
#   hack/nodes.sh load DIR ARCHIVE   import an image archive into every node's containerd
#   hack/nodes.sh stop DIR NODE      lose one node (e.g. hns-node-2): its processes and containers
#                                    die, as in a power cut; `up` brings it back (empty)
#   hack/nodes.sh down DIR           stop the nodes and remove what up and bridge made: processes
#                                    (containerd shims and containers too), mounts, pod network
#                                    namespaces, the node namespaces, veths, the bridge, the host
#                                    iptables rule, cgroups
#
# Network (addresses in lib.sh; everything in 198.18.0.0/15, reserved for tests, and nothing is
# routed off this machine):
#   host ── bridge hns-br0 198.18.0.1/24 ─┬─ veth ── netns hns-node-1: eth0 198.18.0.11 ── ptp ── pods 198.18.1.0/24
#   (kube-apiserver, etcd, kcm)           └─ veth ── netns hns-node-2: eth0 198.18.0.12 ── ptp ── pods 198.18.2.0/24
# Each node namespace forwards (ip_forward there only) between its pods and the bridge, routes
# the other nodes' pod ranges via their node addresses and the Service range to the host, and has
# no default route: a pod's packet to anywhere else is unreachable. The host routes each pod
# range via its node (kube-apiserver reaches hns's pods by their EndpointSlices,
# --enable-aggregator-routing) and does not forward. The CNI plugin is `ptp` (a veth per pod into
# the node's namespace): pod traffic is routed through the node namespace, so its kube-proxy's
# iptables rules apply without br_netfilter. kube-proxy runs in iptables mode, in the node
# namespace, so each node has its own rules.
#
# Processes run in the node's network namespace via `nsenter --net` (not `ip netns exec`, which
# also makes a mount namespace and would hide kubelet's volume mounts from containerd). Each node
# has its own containerd (root, state, socket, runc root, CNI config and IP allocations under
# DIR/nodes/NAME) and cgroup root (/NAME in every cgroup hierarchy, kubelet's cgroupRoot): two
# kubelets must not share /kubepods or garbage-collect each other's containers.
#
# kubelet is the control plane's own version (1.37 by default). This machine mounts cgroup v1
# controllers (cgroup v2 only at /sys/fs/cgroup/unified) and PID 1 is not systemd; kubelet 1.35+
# refuses cgroup v1 unless failCgroupV1 is false, so it is set, with cgroupDriver cgroupfs and
# containerd's SystemdCgroup = false. Like every kubelet (protectKernelDefaults false), it sets
# vm.overcommit_memory=1, kernel.panic=10 and kernel.panic_on_oops=1 on the machine.
#
# Every node also gets the pause image (hack/build-pause.sh) and hns.local/toolbox:TAG (DIR/env's
# TOOLBOX_IMAGE) for checks from inside pods: busybox (sh, nc, …) and kubectl (toolbox_archive).
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

cmd="${1:-}"; DIR="${2:-}"
[ -n "$cmd" ] && [ -n "$DIR" ] || die "usage: $0 bridge|up|load|stop|down DIR [ARCHIVE|NODE]"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
[[ "$DIR" =~ ^[A-Za-z0-9/._+-]+$ ]] || die "$DIR: node mode needs a directory path without spaces or special characters"
[ "$(id -u)" = 0 ] || die "node mode needs root (network namespaces, bridges, cgroups, mounts)"
set_dirs
NODES_DIR="$DIR/nodes"
# The host's one iptables rule: 127.0.0.1:$NODE_APISERVER_PORT reaches kube-apiserver on the
# bridge, so kubeconfigs and scripts that use loopback keep working (kube-apiserver binds one
# address, and kubelets in node namespaces cannot reach the host's loopback).
LOOPBACK_RULE=(OUTPUT -d 127.0.0.1/32 -p tcp --dport "$NODE_APISERVER_PORT"
  -m comment --comment "hns-nodes: loopback to kube-apiserver on $NODE_BRIDGE" -j DNAT --to-destination "$NODE_BRIDGE_IP:$NODE_APISERVER_PORT")

bridge_owner() { cat "/sys/class/net/$NODE_BRIDGE/ifalias" 2>/dev/null || true; }

# cluster_running DIR: whether the cluster in DIR may still run: a process it started runs, or
# it has started none yet (it makes the bridge first: a cluster starting up). A pid counts only if
# its command line names DIR (every process of a cluster has a path under DIR in its arguments),
# so a pid reused since a reboot or a kill does not.
cluster_running() {
  local f pid cmdline started=0
  for f in "$1"/pids/*.pid; do
    [ -f "$f" ] || continue
    started=1
    pid="$(cat "$f")"
    # Read whole, not piped into grep -q: under pipefail a reader that stops early fails the pipe.
    cmdline="$( { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null)" || continue
    [[ "$cmdline" == *"$1/"* ]] && return 0
  done
  [ -d "$1" ] && [ "$started" = 0 ]
}

bridge_up() {
  apt_install iproute2 iptables
  mkdir -p "$NODES_DIR"
  local owner; owner="$(bridge_owner)"
  if [ -e "/sys/class/net/$NODE_BRIDGE" ] && [ -n "$owner" ] && [ "$owner" != "$DIR" ] && ! cluster_running "$owner"; then
    # Left by a run that was killed before it could clean up (a CI job timed out, a session
    # ended): nothing of it runs, so take down what remains rather than refuse every later run.
    log "bridge $NODE_BRIDGE was left by the node-mode cluster in $owner, which no longer runs; removing what remains of it"
    "$0" down "$owner" || die "could not remove what the stopped cluster in $owner left; try: hack/nodes.sh down $owner"
  fi
  if [ -e "/sys/class/net/$NODE_BRIDGE" ]; then
    [ "$(bridge_owner)" = "$DIR" ] \
      || die "bridge $NODE_BRIDGE belongs to the node-mode cluster in $(bridge_owner), which is running; stop it first: hack/nodes.sh down $(bridge_owner)"
  else
    log "creating bridge $NODE_BRIDGE ($NODE_BRIDGE_IP/24)"
    ip link add "$NODE_BRIDGE" type bridge
    # The alias records which cluster owns it (one node-mode cluster per machine).
    ip link set "$NODE_BRIDGE" alias "$DIR"
    # Frames between nodes are switched here; keep them out of the host's iptables even where
    # br_netfilter is loaded (a host FORWARD policy of DROP would otherwise cut nodes apart).
    ip link set "$NODE_BRIDGE" type bridge nf_call_iptables 0 2>/dev/null || true
    ip addr add "$NODE_BRIDGE_IP/24" dev "$NODE_BRIDGE"
    ip link set "$NODE_BRIDGE" up
  fi
  iptables -t nat -C "${LOOPBACK_RULE[@]}" 2>/dev/null || iptables -t nat -A "${LOOPBACK_RULE[@]}"
}

bridge_down() {
  local owner; owner="$(bridge_owner)"
  [ -z "$owner" ] || [ "$owner" = "$DIR" ] || return 0  # another cluster's
  [ -z "$owner" ] || ip link del "$NODE_BRIDGE"
  while iptables -t nat -C "${LOOPBACK_RULE[@]}" 2>/dev/null; do iptables -t nat -D "${LOOPBACK_RULE[@]}"; done
  return 0
}

# Mount points of the cgroup hierarchies: v1 controllers (where the nodes' cgroups are made) and,
# for removal, v2 too (runc also places containers there on a hybrid machine).
cgroup_mounts() { # v1|all
  awk -v want="$1" '$3 == "cgroup" || (want == "all" && $3 == "cgroup2") { print $2 }' /proc/self/mounts
}

mounts_under() { findmnt -rn -o TARGET | awk -v d="$1" '$0 == d || index($0, d "/") == 1'; }

# --- images ---------------------------------------------------------------------------------
# The toolbox image, for checks from inside pods: Debian's busybox-static (sh, nc, httpd, …; its
# wget crashes here, use `printf 'GET / HTTP/1.0\r\n\r\n' | nc HOST PORT`) and the control
# plane's own kubectl, which in a pod talks to kube-apiserver as a pod's client does: at the
# `kubernetes` Service (KUBERNETES_SERVICE_HOST/PORT), trusting only the ServiceAccount's CA,
# with its token (`kubectl get --raw /version`). Its tag is a digest of what goes in; cached in
# $HNS_CACHE/toolbox.
toolbox_archive() {
  local version work deb tag out
  version="$(apt-cache show busybox-static 2>/dev/null | awk '/^Version:/ { print $2; exit }')"
  if [ -z "$version" ]; then as_root apt-get update -qq; version="$(apt-cache show busybox-static | awk '/^Version:/ { print $2; exit }')"; fi
  [ -n "$version" ] || die "Debian's busybox-static package not found"
  tag="$( { echo "$version"; sha256sum "$K8S_BIN/kubectl"; } | sha256sum | cut -c1-12)"
  out="$HNS_CACHE/toolbox/$tag/toolbox.tar"
  if [ ! -f "$out" ]; then
    log "building hns.local/toolbox:$tag (busybox-static $version and kubectl)"
    work="$(mktemp -d "${TMPDIR:-/tmp}/hns-toolbox.XXXXXX")"
    chmod 755 "$work"  # apt-get download writes as the _apt user when it can
    ( cd "$work" && apt-get download -qq busybox-static 2>/dev/null ) || { rm -rf "$work"; die "apt-get download busybox-static failed"; }
    deb="$(ls "$work"/busybox-static_*.deb)"
    dpkg-deb -x "$deb" "$work/pkg"
    mkdir -p "$work/rootfs/bin" "$work/rootfs/tmp" "$(dirname "$out")"
    chmod 1777 "$work/rootfs/tmp"
    cp "$work/pkg/bin/busybox" "$work/rootfs/bin/busybox"
    for applet in $("$work/rootfs/bin/busybox" --list); do
      [ "$applet" = busybox ] || ln -s busybox "$work/rootfs/bin/$applet"
    done
    cp "$K8S_BIN/kubectl" "$work/rootfs/bin/kubectl"
    oci_image_archive "$work/rootfs" "hns.local/toolbox:$tag" "$out" 65534:65534 /bin/sh
    rm -rf "$work"
  fi
  echo "$out"
}

# import_image NAME ARCHIVE: into node NAME's containerd, in the namespace CRI uses.
import_image() {
  ctr --address "$NODES_DIR/$1/containerd.sock" -n k8s.io images import "$2" >/dev/null \
    || die "importing $2 into $1's containerd failed"
}

# --- one node -------------------------------------------------------------------------------
node_alive() {
  local name; name="$(node_name "$1")"
  alive "$name-containerd" && alive "$name-kubelet" && alive "$name-kube-proxy" && [ -e "/run/netns/$name" ]
}

# pin_pods NAME: with HNS_NODE_CPUS, the node's pods run on those CPUs only. kubelet gives its
# pods' cgroups (/NAME/kubepods) every CPU of the machine when it starts, and new pods copy their
# parent's cpuset: the tree is narrowed once kubelet has made it, deepest first, as a cpuset must
# stay within its parent's.
pin_pods() {
  local name="$1" mnt d
  [ -n "${HNS_NODE_CPUS:-}" ] || return 0
  for mnt in $(cgroup_mounts v1); do
    [ -f "$mnt/$name/kubepods/cpuset.cpus" ] || continue
    while read -r d; do
      echo "$HNS_NODE_CPUS" > "$d/cpuset.cpus" || die "$name: HNS_NODE_CPUS=$HNS_NODE_CPUS: cannot narrow $d"
    done < <(find "$mnt/$name/kubepods" -depth -type d)
    return 0
  done
  die "$name: no cpuset cgroup kubepods to pin its pods to CPUs $HNS_NODE_CPUS"
}

node_up() { # I
  local i="$1" name ip nd ns j mnt
  name="$(node_name "$i")"; ip="$(node_ip "$i")"; nd="$NODES_DIR/$name"; ns="/run/netns/$name"
  log "starting node $name ($ip, pods $(node_pod_cidr "$i"))"
  mkdir -p "$nd"/{containerd,cni/net.d,cni/ipam,kubelet,pod-logs,runc}

  # Network namespace, with a veth into the bridge.
  ip netns add "$name"
  ip link add "hns-veth$i" type veth peer name eth0 netns "$name"
  ip link set "hns-veth$i" master "$NODE_BRIDGE" up
  ip -n "$name" link set lo up
  ip -n "$name" addr add "$ip/24" dev eth0
  ip -n "$name" link set eth0 up
  nsenter --net="$ns" sysctl -qw net.ipv4.ip_forward=1
  for ((j = 1; j <= NODE_COUNT; j++)); do
    [ "$j" = "$i" ] || ip -n "$name" route add "$(node_pod_cidr "$j")" via "$(node_ip "$j")"
  done
  # ClusterIPs are rewritten by kube-proxy's rules; a route lets the node's own processes send
  # to them (a packet needs a route before the OUTPUT chain sees it). The host does not forward.
  ip -n "$name" route add "$NODE_SERVICE_CIDR" via "$NODE_BRIDGE_IP"
  ip route replace "$(node_pod_cidr "$i")" via "$ip" dev "$NODE_BRIDGE"

  # HNS_NODE_CPUS: the node's processes run on those CPUs only (its pods too: pin_pods).
  PIN=(); [ -z "${HNS_NODE_CPUS:-}" ] || PIN=(taskset -c "$HNS_NODE_CPUS")
  # Cgroup root: /NAME in every v1 hierarchy (kubelet requires its cgroupRoot to exist).
  for mnt in $(cgroup_mounts v1); do
    mkdir -p "$mnt/$name"
    if [ -f "$mnt/cpuset.cpus" ]; then  # a new cpuset is empty, and no process may join it so
      cat "$mnt/cpuset.cpus" > "$mnt/$name/cpuset.cpus"
      cat "$mnt/cpuset.mems" > "$mnt/$name/cpuset.mems"
    fi
  done

  # containerd: its own root, state, sockets, runc root and CNI configuration.
  cat > "$nd/containerd.toml" <<TOML
version = 2
root = "$nd/containerd/root"
state = "$nd/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "$nd/containerd.sock"
[ttrpc]
  address = "$nd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$nd/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "hns.local/pause:v$K8S_VERSION_NUM"
  # Root may lack CAP_SYS_RESOURCE (it does on this project's machines): no process may then
  # get a lower oom_score_adj than containerd's own (CRI asks -998 for sandboxes).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$nd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$nd/cni/net.d"
    max_conf_num = 1
TOML
  cat > "$nd/cni/net.d/10-hns.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "hns-pods",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$(node_pod_cidr "$i")", "gateway": "198.18.$i.1"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$nd/cni/ipam"
      }
    }
  ]
}
CNI
  start "$name-containerd" "${PIN[@]}" nsenter --net="$ns" containerd --config "$nd/containerd.toml"
  wait_for 30 ctr --address "$nd/containerd.sock" version \
    || { tail -20 "$LOGS/$name-containerd.log" >&2; die "$name: containerd did not start (log: $LOGS/$name-containerd.log)"; }
  import_image "$name" "$PAUSE_ARCHIVE"
  import_image "$name" "$TOOLBOX_ARCHIVE"

  # kubelet: the node's identity (Node authorizer, NodeRestriction) and its serving certificate.
  new_cert "$name" ca "/O=system:nodes/CN=system:node:$name" clientAuth
  new_cert "$name-serving" ca "/CN=$name" serverAuth "IP:$ip,DNS:$name"
  kubeconfig_for "$nd/kubelet.kubeconfig" "$name"
  kubectl config --kubeconfig "$nd/kubelet.kubeconfig" set-cluster local --server "https://$NODE_BRIDGE_IP:$NODE_APISERVER_PORT" >/dev/null
  cat > "$nd/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 (see the top of hack/nodes.sh): allowed explicitly since kubelet 1.35.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$name
containerRuntimeEndpoint: unix://$nd/containerd.sock
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $PKI/$name-serving.crt
tlsPrivateKeyFile: $PKI/$name-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
# No cluster DNS, and pods must not get the machine's resolvers (they are off the machine).
resolvConf: ""
# Per node: a kubelet removes the log directories of pods it does not know.
podLogsDir: $nd/pod-logs
failSwapOn: false
# Images cannot be pulled here: never garbage-collect them, and tolerate a fuller disk than a
# dedicated node would.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%}
YAML
  start "$name-kubelet" "${PIN[@]}" nsenter --net="$ns" "$K8S_BIN/kubelet" --config "$nd/kubelet.yaml" \
    --kubeconfig "$nd/kubelet.kubeconfig" --root-dir "$nd/kubelet" \
    --hostname-override "$name" --node-ip "$ip"

  # kube-proxy: iptables mode, in the node's namespace.
  cat > "$nd/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $DIR/kube-proxy.kubeconfig}
hostnameOverride: $name
mode: iptables
clusterCIDR: $NODE_CLUSTER_CIDR
# NodePorts on the node address only.
nodePortAddresses: [primary]
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# conntrack's table size is the machine's (not settable in a network namespace): leave it, and
# the timeouts, as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
  start "$name-kube-proxy" "${PIN[@]}" nsenter --net="$ns" "$K8S_BIN/kube-proxy" --config "$nd/kube-proxy.yaml"
}

# node_down NAME: everything of one node, whatever state it is in (a crashed node included).
node_down() {
  local name="$1" nd ns pids pid mnt f netns_paths=() shim_sockets=()
  nd="$NODES_DIR/$name"; ns="/run/netns/$name"
  stop "$name-kube-proxy"
  stop "$name-kubelet"
  # The pods' network namespaces and the shims' sockets are recorded in the task bundles; read
  # them before the state goes.
  for f in "$nd"/containerd/state/io.containerd.runtime.v2.task/*/*/config.json; do
    [ -f "$f" ] || continue
    while read -r p; do netns_paths+=("$p"); done < <(python3 -c '
import json, sys
for n in json.load(open(sys.argv[1])).get("linux", {}).get("namespaces", []):
    if n.get("type") == "network" and n.get("path", "").startswith(("/var/run/netns/", "/run/netns/")):
        print(n["path"])' "$f")
  done
  for f in "$nd"/containerd/state/io.containerd.runtime.v2.task/*/*/address; do
    [ -f "$f" ] && shim_sockets+=("$(sed 's|^unix://||' "$f")")
  done
  stop "$name-containerd"
  # containerd's shims (they outlive containerd): the processes started with this node's socket.
  pids=""
  for f in /proc/[0-9]*/cmdline; do
    { tr '\0' ' ' < "$f"; } 2>/dev/null | grep -q -- "-address $nd/containerd.sock " && pids+=" $(basename "$(dirname "$f")")"
  done
  # Containers: every process in the node's cgroups.
  for _ in 1 2 3 4 5; do
    for mnt in $(cgroup_mounts all); do
      [ -d "$mnt/$name" ] && pids+=" $(find "$mnt/$name" -name cgroup.procs -exec cat {} + 2>/dev/null | tr '\n' ' ')"
    done
    pids="$(echo "$pids" | tr ' ' '\n' | grep -E '^[0-9]+$' | sort -u | tr '\n' ' ')" || true
    [ -z "$pids" ] && break
    for pid in $pids; do kill -9 "$pid" 2>/dev/null || true; done
    sleep 0.5; pids=""
  done
  # Mounts under the node's directory (kubelet's volumes and its own bind mount, container root
  # filesystems, sandbox /dev/shm), deepest first.
  if [ -d "$nd" ]; then
    mounts_under "$nd" | sort -r | while read -r mnt; do
      umount "$mnt" 2>/dev/null || umount -l "$mnt"
    done
  fi
  for p in "${netns_paths[@]}"; do
    umount "$p" 2>/dev/null || true; rm -f "$p"
  done
  for p in "${shim_sockets[@]}"; do rm -f "$p"; done
  # kubelet's links to its containers' logs (the machine-wide /var/log/containers).
  for f in /var/log/containers/*.log; do
    [ -L "$f" ] && [[ "$(readlink "$f")" == "$nd/"* ]] && rm -f "$f"
  done
  [ -e "$ns" ] && ip netns del "$name"
  # A deleted namespace lives on while the kernel holds references to it (closing sockets); its
  # veth would too, so the pair is deleted explicitly, which frees the node's address at once.
  ip link del "hns-veth${name##*-}" 2>/dev/null || true
  ip route del "$(node_pod_cidr "${name##*-}")" 2>/dev/null || true
  for mnt in $(cgroup_mounts all); do
    [ -d "$mnt/$name" ] && find "$mnt/$name" -depth -type d -exec rmdir {} + 2>/dev/null
    [ -d "$mnt/$name" ] && log "$name: could not remove cgroup $mnt/$name"
  done
  # Runtime state goes (a node comes back as after a reboot); the image store stays.
  if [ -d "$nd" ]; then
    if [ -n "$(mounts_under "$nd")" ]; then
      log "$name: mounts remain under $nd; not removing its state"
    else
      rm -rf "$nd/kubelet" "$nd/containerd/state" "$nd/runc" "$nd/pod-logs" "$nd/cni/ipam"
    fi
  fi
  return 0
}

# --- commands -------------------------------------------------------------------------------
case "$cmd" in
  bridge)
    bridge_up
    ;;
  down)
    nodes=()
    for nd in "$NODES_DIR"/*/; do [ -d "$nd" ] && nodes+=("$(basename "$nd")"); done
    # Node namespaces whose directory is gone (DIR was deleted after a killed run): theirs too
    # when the bridge is this cluster's, the one cluster those fixed names can belong to.
    if [ "$(bridge_owner)" = "$DIR" ]; then
      for ns in /run/netns/hns-node-*; do
        [ -e "$ns" ] && [[ " ${nodes[*]} " != *" $(basename "$ns") "* ]] && nodes+=("$(basename "$ns")")
      done
    fi
    for name in "${nodes[@]}"; do node_down "$name"; done
    bridge_down
    log "stopped the nodes in $DIR"
    ;;
  stop)
    NODE="${3:-}"
    [ -n "$NODE" ] && [ -d "$NODES_DIR/$NODE" ] || die "usage: $0 stop DIR NODE (one of: $(ls "$NODES_DIR" 2>/dev/null | tr '\n' ' '))"
    node_down "$NODE"
    log "stopped node $NODE"
    ;;
  load)
    ARCHIVE="${3:-}"
    [ -f "$ARCHIVE" ] || die "usage: $0 load DIR ARCHIVE (an OCI or docker image archive)"
    for nd in "$NODES_DIR"/*/; do
      [ -S "$nd/containerd.sock" ] || continue
      log "importing $(basename "$ARCHIVE") into $(basename "$nd")"
      import_image "$(basename "$nd")" "$ARCHIVE"
    done
    ;;
  up)
    [ -f "$DIR/env" ] || die "no control plane in $DIR: start it first with hack/control-plane.sh up $DIR --nodes"
    use_control_plane "$DIR"
    [ "${NODE_MODE:-}" = 1 ] || die "the control plane in $DIR is on loopback: start it with hack/control-plane.sh up $DIR --nodes"
    NODE_COUNT="${HNS_NODES:-2}"
    [[ "$NODE_COUNT" =~ ^[1-9]$ ]] || die "HNS_NODES=$NODE_COUNT: 1 to 9 nodes"
    apt_install containerd runc containernetworking-plugins iptables conntrack iproute2 util-linux python3
    bridge_up
    K8S_VERSION_NUM="${K8S_VERSION#v}"
    K8S_BIN="$(HNS_K8S_VERSION="$K8S_VERSION_NUM" "$ROOT/hack/build-control-plane.sh" --nodes)"
    PAUSE_ARCHIVE="$(HNS_K8S_VERSION="$K8S_VERSION_NUM" "$ROOT/hack/build-pause.sh")"
    TOOLBOX_ARCHIVE="$(toolbox_archive)"
    export KUBECONFIG="$DIR/kubeconfig"
    new_cert kube-proxy ca "/CN=system:kube-proxy" clientAuth
    kubeconfig_for "$DIR/kube-proxy.kubeconfig" kube-proxy
    kubectl config --kubeconfig "$DIR/kube-proxy.kubeconfig" set-cluster local --server "https://$NODE_BRIDGE_IP:$NODE_APISERVER_PORT" >/dev/null
    for ((i = 1; i <= NODE_COUNT; i++)); do
      name="$(node_name "$i")"
      if node_alive "$i"; then log "node $name already running"; continue; fi
      node_down "$name"
      node_up "$i"
    done
    for ((i = 1; i <= NODE_COUNT; i++)); do
      name="$(node_name "$i")"
      wait_for 120 kubectl wait --for=condition=Ready --timeout=2s "node/$name" || {
        for c in containerd kubelet kube-proxy; do echo "----- last lines of $LOGS/$name-$c.log" >&2; tail -n 15 "$LOGS/$name-$c.log" >&2; done
        die "node $name did not become Ready"
      }
      pin_pods "$name"
    done
    grep -vE '^(NODE_COUNT|TOOLBOX_IMAGE)=' "$DIR/env" > "$DIR/env.new" || true
    echo "NODE_COUNT=$NODE_COUNT" >> "$DIR/env.new"
    echo "TOOLBOX_IMAGE=hns.local/toolbox:$(basename "$(dirname "$TOOLBOX_ARCHIVE")")" >> "$DIR/env.new"
    mv "$DIR/env.new" "$DIR/env"
    log "$NODE_COUNT node(s) Ready: $(kubectl get nodes -o name | tr '\n' ' ')"
    ;;
  *) die "usage: $0 bridge|up|load|stop|down DIR [ARCHIVE|NODE]" ;;
esac
