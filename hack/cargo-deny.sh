#!/usr/bin/env bash
# Supply-chain check of the workspace with cargo-deny, configured by deny.toml: licences, banned
# and duplicate crates, and where crates come from. cargo-deny is built from crates.io once per
# machine (a few minutes on 2 cores) and cached in $HNS_CACHE/cargo-deny.
#
# Advisories (RustSec) are checked against a local copy of the advisory database when one is
# given (HNS_ADVISORY_DB, or ../shared/advisory-db beside the checkout), else against github.com
# when it is reachable; an unignored advisory fails the check.
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

# Advisories: from $HNS_ADVISORY_DB, else the snapshot in ../shared/advisory-db beside the
# checkout when there is one (no fetch), else the network. cargo-deny reads a database only as a
# git checkout in its db-path under a name derived from the database's URL, so a snapshot of
# plain files is copied into one, committed at the snapshot's date (from its SNAPSHOT.md).
LOCAL_DB="${HNS_ADVISORY_DB:-}"
[ -n "$LOCAL_DB" ] || { [ -d "$PWD/../shared/advisory-db/crates" ] && LOCAL_DB="$PWD/../shared/advisory-db"; }
if [ -n "$LOCAL_DB" ]; then
  [ -d "$LOCAL_DB/crates" ] || die "HNS_ADVISORY_DB=$LOCAL_DB does not hold a RustSec advisory database (no crates/)"
  DB_PATH="$HNS_CACHE/advisory-dbs"
  DB="$DB_PATH/advisory-db-3157b0e258782691"   # cargo-deny's name for github.com/rustsec/advisory-db
  rm -rf "$DB_PATH"; mkdir -p "$DB_PATH"
  cp -r "$LOCAL_DB" "$DB"
  date="$(grep -oE '[0-9]{4}-[0-9]{2}-[0-9]{2}' "$DB/SNAPSHOT.md" 2>/dev/null | head -n1)"
  if [ ! -d "$DB/.git" ]; then
    when="${date:+${date}T00:00:00Z}"
    ( cd "$DB" && git init -q && git add -A \
      && GIT_COMMITTER_DATE="${when:-now}" git -c user.name=hns -c user.email=hns@localhost \
           commit -q -m "advisory-db snapshot" ${when:+--date "$when"} ) \
      || die "could not prepare the advisory database copy in $DB"
  fi
  cp "$DB/.git/HEAD" "$DB/.git/FETCH_HEAD"
  CONFIG="$DB_PATH/deny.toml"
  sed "s|^\[advisories\]|[advisories]\ndb-path = \"$DB_PATH\"|" deny.toml > "$CONFIG"
  age=""
  [ -n "$date" ] && age=", $(( ( $(date +%s) - $(date -d "$date" +%s) ) / 86400 )) days old"
  log "cargo deny check advisories against $LOCAL_DB (snapshot of ${date:-an unknown date}$age)"
  cargo deny --offline --config "$CONFIG" check --hide-inclusion-graph advisories \
    || die "cargo deny check advisories failed against $LOCAL_DB (policy: deny.toml); upgrade the crate named above, or ignore the advisory in deny.toml with a reason"
elif ! command -v curl >/dev/null; then
  log "advisories not checked: curl, needed to test whether github.com is reachable, is not installed"
elif curl -fsS -m 8 -o /dev/null https://github.com/rustsec/advisory-db 2>/dev/null; then
  log "cargo deny check advisories (the RustSec advisory-db, fetched)"
  deny advisories
else
  log "advisories not checked: no HNS_ADVISORY_DB, no ../shared/advisory-db, and github.com (the RustSec advisory-db) is unreachable from this machine"
fi
