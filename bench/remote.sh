#!/usr/bin/env bash
# Measures pulls over loopback, one run: every variant of a model family
# (../shared/bench/genmodels.py writes one) is added to a store, then pulled
# into an empty store from `mstore serve` and from versitygw (a bucket),
# beside cp of the base model's files:
#
#   bench/remote.sh FAMILY_DIR WORK_DIR
#
# It prints, per variant, the bytes add stored and the bytes each pull
# moved (they must agree), seconds, MB/s and peak memory (GNU time).
# versitygw is taken from the cache folder .ci/run builds it into.
set -euo pipefail
fam=$1 work=$2
repo=$(cd "$(dirname "$0")/.." && pwd)
gw=${MSTORE_VERSITYGW:-${XDG_CACHE_HOME:-$HOME/.cache}/mstore-ci/versitygw-v1.8.0/versitygw}
rm -rf "$work" && mkdir -p "$work"
m=$work/mstore
(cd "$repo" && go build -o "$m" ./cmd/mstore)
variants="base $(cd "$fam" && ls -d */ | tr -d / | grep -vx base | tr '\n' ' ')" # base first
field() { /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
for v in $variants; do
  echo "add $v: new_bytes=$("$m" --store "$work/src" --json add "$fam/$v" --name "$v" | field new_bytes)"
done
sync
/usr/bin/time -f "cp -r base && sync: %e s" bash -c "cp -r '$fam/base' '$work/cp' && sync"

pull() { # LABEL URL STORE
  for v in $variants; do
    /usr/bin/time -o "$work/time" -f "%e %M" "$m" --store "$3" --json pull "$2" "$v" > "$work/pull.json"
    read -r secs rss < "$work/time"
    /usr/bin/python3 - "$1" "$v" "$secs" "$rss" "$work/pull.json" <<'PY'
import json, sys
label, v, secs, rss, path = sys.argv[1:]
d = json.load(open(path))
print(f"{label} pull {v}: bytes_moved={d['bytes_moved']} blobs_moved={d['blobs_moved']} present={d['blobs_present']} "
      f"{float(secs):.2f} s wall, {d['bytes_moved']/1e6/max(float(secs),1e-3):.0f} MB/s, peak {int(rss)//1024} MB")
PY
  done
}

"$m" --store "$work/src" serve --addr 127.0.0.1:0 > "$work/serve.out" & serve=$!
trap 'kill $serve ${gwpid:-} 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$work/serve.out" ] && break; sleep 0.1; done
pull serve "$(awk '{print $NF}' "$work/serve.out")" "$work/from-serve"

if [ -x "$gw" ]; then
  port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$work/gw/bench"
  ROOT_ACCESS_KEY=benchaccess ROOT_SECRET_KEY=benchsecret1234 "$gw" --port "127.0.0.1:$port" posix "$work/gw" > "$work/gw.log" 2>&1 & gwpid=$!
  export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_ACCESS_KEY_ID=benchaccess AWS_SECRET_ACCESS_KEY=benchsecret1234
  sleep 1
  for v in $variants; do "$m" --store "$work/src" push s3://bench/family "$v" --quiet > /dev/null; done
  pull s3 s3://bench/family "$work/from-s3"
else
  echo "versitygw not built at $gw: s3 pulls not measured"
fi
