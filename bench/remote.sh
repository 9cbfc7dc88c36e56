#!/usr/bin/env bash
# Measures pulls over loopback, one run: every variant of a model family
# (../shared/bench/genmodels.py writes one) is added to a store, then pulled
# into an empty store from `mstore serve` and from versitygw (a bucket),
# beside cp of the base model's files:
#
#   bench/remote.sh [-b NAME=MSTORE_BINARY]... FAMILY_DIR WORK_DIR
#
# With no -b, mstore is built from this checkout. Several -b pull with each
# build in turn, variant by variant (the store, serve and the bucket are the
# first build's), with a `cp -r base && sync` before each round of base
# pulls. It prints, per variant, the bytes add stored and the bytes each
# pull moved (they must agree), seconds (wall, and CPU as user+sys), MB/s
# and peak memory (GNU time). versitygw is taken from the cache folder
# .ci/run builds it into.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
declare -a names=() bins=()
while getopts "b:" o; do
  case $o in
    b) names+=("${OPTARG%%=*}"); bins+=("${OPTARG#*=}") ;;
    *) echo "usage: $0 [-b NAME=BINARY]... FAMILY_DIR WORK_DIR" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# = 2 ] || { echo "usage: $0 [-b NAME=BINARY]... FAMILY_DIR WORK_DIR" >&2; exit 2; }
fam=$1 work=$2
gw=${MSTORE_VERSITYGW:-${XDG_CACHE_HOME:-$HOME/.cache}/mstore-ci/versitygw-v1.8.0/versitygw}
rm -rf "$work" && mkdir -p "$work"
if [ ${#bins[@]} = 0 ]; then
  (cd "$repo" && go build -o "$work/mstore" ./cmd/mstore)
  names=(mstore); bins=("$work/mstore")
fi
m=${bins[0]}
variants="base $(cd "$fam" && ls -d */ | tr -d / | grep -vx base | tr '\n' ' ')" # base first
field() { /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
for v in $variants; do
  echo "add $v: new_bytes=$("$m" --store "$work/src" --json add "$fam/$v" --name "$v" | field new_bytes)"
done
sync

cpbase() {
  rm -rf "$work/cp"
  /usr/bin/time -o "$work/time" -f "%e %U %S" bash -c "cp -r '$fam/base' '$work/cp' && sync"
  read -r secs user sys < "$work/time"
  echo "cp -r base && sync: $secs s wall, $(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}') s CPU"
}

pull() { # LABEL URL STORE_PREFIX
  for v in $variants; do
    [ "$v" = base ] && cpbase
    for i in "${!bins[@]}"; do
      sync
      /usr/bin/time -o "$work/time" -f "%e %M %U %S" "${bins[$i]}" --store "$3-${names[$i]}" --json pull "$2" "$v" > "$work/pull.json"
      read -r secs rss user sys < "$work/time"
      /usr/bin/python3 - "$1 ${names[$i]}" "$v" "$secs" "$rss" "$user" "$sys" "$work/pull.json" <<'PY'
import json, sys
label, v, secs, rss, user, sys_, path = sys.argv[1:]
d = json.load(open(path))
print(f"{label} pull {v}: bytes_moved={d['bytes_moved']} blobs_moved={d['blobs_moved']} present={d['blobs_present']} "
      f"{float(secs):.2f} s wall, {float(user)+float(sys_):.2f} s CPU, {d['bytes_moved']/1e6/max(float(secs),1e-3):.0f} MB/s, peak {int(rss)//1024} MB")
PY
    done
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
