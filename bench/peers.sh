#!/usr/bin/env bash
# Runs ../shared/bench/peers.sh with an mstore peer, so that mstore and the
# tools people use instead are measured in one run on the same family:
#
#   bench/peers.sh [peers.sh options] FAMILY_DIR WORK_DIR
#   e.g. bench/peers.sh -p "mstore cp restic borg" /tmp/bench/family-full /tmp/bench/work-full
#
# It builds mstore into WORK_DIR/bin and fills in the peer slots that
# peers.sh leaves for it (mstore_init/ingest/restore/store). Every variant is
# added as a version of one ref, tagged with the variant's name; the restore
# checks out the tag "base".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
peers=${PEERS_SH:-$repo/../shared/bench/peers.sh}
[ -f "$peers" ] || { echo "peers.sh not found at $peers (set PEERS_SH)" >&2; exit 2; }
work=${*: -1}
mkdir -p "$work/bin"
(cd "$repo" && go build -o "$work/bin/mstore" ./cmd/mstore)
export MSTORE_BIN="$work/bin/mstore"

script=$(mktemp "${TMPDIR:-/tmp}/peers-mstore.XXXXXX.sh")
trap 'rm -f "$script"' EXIT
awk '
  /^# Future peer/ {
    print "mstore_init()    { \"$MSTORE_BIN\" --store \"$R\" init >/dev/null; }"
    print "mstore_ingest()  { \"$MSTORE_BIN\" --store \"$R\" add \"$FAM/$1\" --name family --tag \"$1\" -m \"$1\" --quiet; }"
    print "mstore_restore() { \"$MSTORE_BIN\" --store \"$R\" checkout family:base \"$1/base\" --quiet; }"
    print "mstore_store()   { echo \"$R\"; }"
    print "LABEL[mstore]=\"mstore\""
    skip = 1; next
  }
  skip && /^#/ { next }
  { skip = 0; print }
' "$peers" >"$script"
grep -q '^mstore_ingest' "$script" || { echo "could not find the mstore slot in $peers" >&2; exit 2; }
export MSTORE_BIN
bash "$script" "$@"
