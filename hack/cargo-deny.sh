#!/usr/bin/env bash
# Supply-chain check of the workspace with cargo-deny, configured by deny.toml: licences, banned
# and duplicate crates, and where crates come from. cargo-deny is built from crates.io once per
# machine (a few minutes on 2 cores) and cached in $HNS_CACHE/cargo-deny.
#
# Advisories (RustSec) need the advisory database, a git repository on github.com; they are
# checked only when github.com is reachable from this machine.
source "$(dirname "$0")/lib.sh"

CARGO_DENY_VERSION="0.20.2"
ROOT="$HNS_CACHE/cargo-deny"
DENY="$ROOT/bin/cargo-deny"

if [ -x "$DENY" ] && [ "$("$DENY" --version 2>/dev/null)" = "cargo-deny $CARGO_DENY_VERSION" ]; then
  log "cargo-deny $CARGO_DENY_VERSION cached in $ROOT"
else
  log "installing cargo-deny $CARGO_DENY_VERSION from crates.io into $ROOT (a few minutes on 2 cores)"
  # Build in a scratch directory: only the binary is kept, and disk is tight.
  BUILD="$(mktemp -d)"
  trap 'rm -rf "$BUILD"' EXIT
  CARGO_TARGET_DIR="$BUILD" cargo install --locked --force --quiet cargo-deny \
    --version "$CARGO_DENY_VERSION" --root "$ROOT" \
    || die "cargo install cargo-deny $CARGO_DENY_VERSION failed; see the output above"
  rm -rf "$BUILD"
  [ -x "$DENY" ] || die "cargo install finished but $DENY was not found"
fi

cd "$(dirname "$0")/.."
export PATH="$ROOT/bin:$PATH"

# --locked: check the committed Cargo.lock, and never rewrite it. The inclusion graph of every
# duplicate-version warning runs to hundreds of lines; a failure says how to see the graphs.
deny() {
  cargo deny --locked check --hide-inclusion-graph "$@" \
    || die "cargo deny check $* failed (policy: deny.toml); to see which crates pull the offenders in: PATH=$ROOT/bin:\$PATH cargo deny check $*"
}

log "cargo deny check licenses bans sources"
deny licenses bans sources

if ! command -v curl >/dev/null; then
  log "advisories not checked: curl, needed to test whether github.com is reachable, is not installed"
elif curl -fsS -m 8 -o /dev/null https://github.com/rustsec/advisory-db 2>/dev/null; then
  log "cargo deny check advisories"
  deny advisories
else
  log "advisories not checked: github.com (the RustSec advisory-db) is unreachable from this machine"
fi
