#!/usr/bin/env bash
# Measures push and pull against versitygw (a bucket on loopback) with two
# mstore binaries side by side, interleaved, one run each: what packing
# small blobs in the bucket changes.
#
#   bench/s3packs.sh BEFORE_BIN AFTER_BIN WORK_DIR MODEL_DIR...
#
# (`go run ./bench/genmodel small DIR` writes the 100,000 × 512 B model.)
# Each model is added once to a source store; then, per binary, pushed to
# a new bucket prefix and pulled from it into an empty store. It prints
# seconds, MB/s, blobs moved and peak memory (GNU time) per step.
set -euo pipefail
before=$1 after=$2 work=$3; shift 3
gw=${MSTORE_VERSITYGW:-${XDG_CACHE_HOME:-$HOME/.cache}/mstore-ci/versitygw-v1.8.0/versitygw}
rm -rf "$work" && mkdir -p "$work/gw/bench"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
ROOT_ACCESS_KEY=benchaccess ROOT_SECRET_KEY=benchsecret1234 "$gw" --port "127.0.0.1:$port" posix "$work/gw" > "$work/gw.log" 2>&1 & gwpid=$!
trap 'kill $gwpid 2>/dev/null || true' EXIT
export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_ACCESS_KEY_ID=benchaccess AWS_SECRET_ACCESS_KEY=benchsecret1234
sleep 1
step() { # LABEL BIN STORE ARGS...
  local label=$1 bin=$2 store=$3; shift 3
  /usr/bin/time -o "$work/time" -f "%e %M" "$bin" --store "$store" --json "$@" > "$work/out.json"
  read -r secs rss < "$work/time"
  /usr/bin/python3 - "$label" "$secs" "$rss" "$work/out.json" <<'PY'
import json, sys
label, secs, rss, path = sys.argv[1:]
d = json.load(open(path))
print(f"{label}: {float(secs):.2f} s, {d['bytes_moved']/1e6/max(float(secs),1e-3):.0f} MB/s, "
      f"blobs_moved={d['blobs_moved']} bytes_moved={d['bytes_moved']}, peak {int(rss)//1024} MB")
PY
}
for model in "$@"; do
  m=$(basename "$model")
  "$after" --store "$work/src" --json add "$model" --name "$m" > /dev/null
  for which in before after; do
    bin=${!which}
    step "$m $which push" "$bin" "$work/src" push "s3://bench/$which/$m" "$m"
    step "$m $which pull" "$bin" "$work/dst-$which-$m" pull "s3://bench/$which/$m" "$m"
  done
  echo "$m: objects in the bucket: before $(find "$work/gw/bench/before/$m" -type f | wc -l), after $(find "$work/gw/bench/after/$m" -type f | wc -l)"
done
