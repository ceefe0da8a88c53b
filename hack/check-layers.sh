#!/usr/bin/env bash
# make lint: hns-apiserver's modules import only downwards, from the composition root to the
# pure logic (see apiserver/src/lib.rs). A module may use its own folder and any lower layer;
# an import of a peer or of a higher layer is reported, with the line, and fails the check.
set -euo pipefail
cd "$(dirname "$0")/../apiserver/src"

# The layer of each top-level module, highest first.
layer() {
  case "$1" in
    main | app) echo 10 ;;
    options) echo 9 ;;
    server) echo 8 ;;
    discovery | openapi | health | admission) echo 7 ;;
    resources | controller) echo 6 ;;
    state | metrics) echo 5 ;;
    propagation) echo 4 ;;
    store | auth) echo 3 ;;
    hierarchy | http) echo 2 ;;
    ssa | resource_version | replicas | shutdown) echo 1 ;;
    watching) echo 0 ;;
    test_support) echo -1 ;;
    *) echo "unknown" ;;
  esac
}

# "line:module" for every crate:: path in the code lines of a file (doc comments may point
# anywhere), braces included: `use crate::{a, b::c};` names a and b.
used_modules() {
  grep -n 'crate::' "$1" | grep -v '^[0-9]*:[[:space:]]*//' | awk -F: '{
    line = $1; text = substr($0, length(line) + 2)
    while (match(text, /crate::(\{[^}]*\}|[a-z_]+)/)) {
      found = substr(text, RSTART + 7, RLENGTH - 7); text = substr(text, RSTART + RLENGTH)
      gsub(/[{} ]/, "", found); n = split(found, parts, ",")
      for (i = 1; i <= n; i++) { split(parts[i], path, "::"); if (path[1] != "") print line ":" path[1] }
    }
  }' | sort -u
}

failed=0
while IFS= read -r file; do
  own="${file#./}"
  own="${own%%/*}"
  own="${own%.rs}"
  [ "$own" = lib ] && continue
  mine=$(layer "$own")
  if [ "$mine" = unknown ]; then
    echo "check-layers: $file: module '$own' has no layer in hack/check-layers.sh" >&2
    failed=1
    continue
  fi
  # Code lines only (doc comments may point anywhere), every crate:: path they name.
  while IFS=: read -r line used; do
    [ "$used" = "$own" ] && continue
    theirs=$(layer "$used")
    if [ "$theirs" = unknown ] || [ "$theirs" -ge "$mine" ]; then
      echo "check-layers: $file:$line: '$own' (layer $mine) uses '$used' (layer $theirs)" >&2
      failed=1
    fi
  done < <(used_modules "$file")
done < <(find . -name '*.rs' | sort)
if [ "$failed" -ne 0 ]; then
  echo "check-layers: imports must point down the layers listed in apiserver/src/lib.rs" >&2
  exit 1
fi
echo "check-layers: hns-apiserver's imports all point down"
