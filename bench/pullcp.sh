#!/usr/bin/env bash
# Issue 12's pull target, interleaved: a pull of one model from `mstore
# serve` on loopback into an empty store, beside `cp -rL` of the model's
# files, ROUNDS times (cp, then each build), each step followed by `sync`,
# with medians of wall and CPU (user+sys) seconds and peak RSS.
#
#   bench/pullcp.sh [-n ROUNDS] SOURCE_STORE NAME MODEL_DIR BINARY...
#
# SOURCE_STORE holds NAME (e.g. bench/remote.sh's WORK/src and "base");
# MODEL_DIR holds the files it was added from. Each build serves
# SOURCE_STORE itself. With DROP_CACHES=1 (root) every step starts from an
# emptied page cache and its input read again (see perf.sh).
set -euo pipefail
. "$(dirname "$0")/steps.sh" # rounds, usage, fresh, step, med
rounds "[-n ROUNDS] SOURCE_STORE NAME MODEL_DIR BINARY..." "$@"
shift $((OPTIND - 1))
[ $# -ge 4 ] || usage "[-n ROUNDS] SOURCE_STORE NAME MODEL_DIR BINARY..."
src=$1 name=$2 model=$3; shift 3
bins=("$@")
W=$(mktemp -d)
declare -a pids=() urls=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$W"' EXIT
for i in "${!bins[@]}"; do
  port=$((47300 + i))
  "${bins[$i]}" --store "$src" serve --addr "127.0.0.1:$port" >"$W/serve-$i.log" 2>&1 &
  pids+=($!); urls+=("http://127.0.0.1:$port")
done
sleep 1
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= runs; r++)); do
  rm -rf "$W/cp"; step cp "$model" "cp -rL '$model' '$W/cp'"
  for i in "${!bins[@]}"; do
    rm -rf "$W/st"; step "$i" "$src" "'${bins[$i]}' --store '$W/st' pull '${urls[$i]}' '$name' --quiet"
  done
done
# col TOOL FIELD: the figures of TOOL's steps (2 wall, 3+4 CPU, 5 peak KiB).
col() { awk -v l="$1" -v f="$2" '$1==l {print (f == "cpu") ? $3+$4 : $f}' "$W/raw"; }
cpw=$(col cp 2 | med)
printf '| tool | wall s | CPU s | peak MiB | wall × cp |\n| --- | ---: | ---: | ---: | ---: |\n'
printf '| cp -rL | %s | %s | |  |\n' "$cpw" "$(col cp cpu | med)"
for i in "${!bins[@]}"; do
  w=$(col "$i" 2 | med)
  printf '| %s | %s | %s | %s | %s× |\n' "${bins[$i]}" "$w" "$(col "$i" cpu | med)" $(($(col "$i" 5 | med) / 1024)) "$(awk -v a="$w" -v b="$cpw" 'BEGIN{printf "%.2f", a/b}')"
done
printf '\n%d rounds, medians; each step followed by sync; load average before: %s, after: %s\n' "$runs" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '\nEach step (tool: 0, 1, ... in the order given; wall, user, sys seconds, peak KiB):\n'
sed 's/^/    /' "$W/raw"
