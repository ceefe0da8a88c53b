#!/usr/bin/env bash
# Builds kube-apiserver and kube-controller-manager from Debian's `kubernetes`
# source package with Debian's Go, and installs etcd from Debian. The binaries
# are cached in $HNS_CACHE/bin so the ~5 minute build happens once per machine.
source "$(dirname "$0")/lib.sh"

BIN="$HNS_CACHE/bin"
if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kube-controller-manager" ]; then
  apt_install etcd-server openssl python3
  log "control-plane binaries cached in $BIN"
  exit 0
fi

apt_install etcd-server golang-1.19-go rsync dpkg-dev openssl python3 make

# `apt-get source` needs a deb-src line for the same archive as the deb lines.
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  log "adding deb-src lines to /etc/apt/sources.list.d/hns-deb-src.sources"
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      | as_root tee /etc/apt/sources.list.d/hns-deb-src.sources >/dev/null
  else
    grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' | as_root tee /etc/apt/sources.list.d/hns-deb-src.list >/dev/null
  fi
  as_root apt-get update -qq || die "apt-get update (with deb-src) failed"
fi

SRC="$HNS_CACHE/src"
mkdir -p "$SRC" "$BIN"
cd "$SRC"
if ! ls -d kubernetes-*/ >/dev/null 2>&1; then
  log "fetching Debian's kubernetes source package into $SRC"
  apt-get source -qq kubernetes >/dev/null || die "apt-get source kubernetes failed (is there a deb-src line?)"
fi
KDIR="$(ls -d "$SRC"/kubernetes-*/ | head -n1)"
log "building from $KDIR"

# reflect2 v1.0.1 (vendored) corrupts memory under Go >= 1.18: kube-apiserver
# segfaults the first time it iterates a map through json-iterator. Apply what
# reflect2 v1.0.2 did: give hiter the runtime's full layout and let the runtime
# initialise an iterator we allocate.
R2="$KDIR/vendor/github.com/modern-go/reflect2"
if ! grep -q 'checkBucket' "$R2/unsafe_link.go"; then
  log "patching vendored reflect2 for Go 1.19"
  python3 - "$R2" <<'PY'
import re, sys, pathlib
d = pathlib.Path(sys.argv[1])
link = d / "unsafe_link.go"
s = link.read_text()
s = re.sub(r"type hiter struct \{.*?\n\}", """type hiter struct {
	key         unsafe.Pointer
	value       unsafe.Pointer
	t           unsafe.Pointer
	h           unsafe.Pointer
	buckets     unsafe.Pointer
	bptr        unsafe.Pointer
	overflow    *[]unsafe.Pointer
	oldoverflow *[]unsafe.Pointer
	startBucket uintptr
	offset      uint8
	wrapped     bool
	B           uint8
	i           uint8
	bucket      uintptr
	checkBucket uintptr
}""", s, flags=re.S)
s = re.sub(r"//go:linkname mapiterinit reflect.mapiterinit\nfunc mapiterinit\(rtype unsafe.Pointer, m unsafe.Pointer\) \*hiter\n", "", s)
link.write_text(s)
m = d / "unsafe_map.go"
s = m.read_text()
s = s.replace("""func (type2 *UnsafeMapType) UnsafeIterate(obj unsafe.Pointer) MapIterator {
	return &UnsafeMapIterator{
		hiter:      mapiterinit(type2.rtype, *(*unsafe.Pointer)(obj)),
		pKeyRType:  type2.pKeyRType,
		pElemRType: type2.pElemRType,
	}
}""", """//go:noescape
//go:linkname mapiterinit reflect.mapiterinit
func mapiterinit(rtype unsafe.Pointer, m unsafe.Pointer, it *hiter)

func (type2 *UnsafeMapType) UnsafeIterate(obj unsafe.Pointer) MapIterator {
	var it hiter
	mapiterinit(type2.rtype, *(*unsafe.Pointer)(obj), &it)
	return &UnsafeMapIterator{
		hiter:      &it,
		pKeyRType:  type2.pKeyRType,
		pElemRType: type2.pElemRType,
	}
}""")
m.write_text(s)
PY
  grep -q 'checkBucket' "$R2/unsafe_link.go" || die "reflect2 patch did not apply to unsafe_link.go"
  grep -q 'var it hiter' "$R2/unsafe_map.go" || die "reflect2 patch did not apply to unsafe_map.go"
fi

log "make WHAT='cmd/kube-apiserver cmd/kube-controller-manager' (about 5 minutes on 2 cores)"
( cd "$KDIR" && PATH=/usr/lib/go-1.19/bin:$PATH make WHAT="cmd/kube-apiserver cmd/kube-controller-manager" ) \
  || die "building kube-apiserver failed; see the output above"
OUT="$(find "$KDIR/_output" -path '*bin/kube-apiserver' -type f | head -n1)"
[ -n "$OUT" ] || die "build finished but kube-apiserver was not found under $KDIR/_output"
cp "$(dirname "$OUT")/kube-apiserver" "$(dirname "$OUT")/kube-controller-manager" "$BIN/"
log "cached kube-apiserver and kube-controller-manager in $BIN"
# The source tree and Go's build cache under it take over 2 GiB; only the binaries are needed.
rm -rf "$SRC"
