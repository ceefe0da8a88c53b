# Shared helpers for the hack/ scripts. Sourced, never run.
set -euo pipefail

HNS_CACHE="${HNS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hns}"
K8S_VERSION_WANTED="1.20"

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

# A free TCP port on 127.0.0.1, chosen by the kernel.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
