#!/usr/bin/env bash
# A checkout beside cp, interleaved (issue 15's delta checkout target): each
# of NAME... is checked out of STORE by each build and copied with `cp -r`
# from MODEL_ROOT/NAME, ROUNDS times (cp, then each build), each step
# followed by `sync`, with medians of wall and CPU (user+sys) seconds.
#
#   bench/checkoutcp.sh [-n ROUNDS] STORE MODEL_ROOT NAME... -- BINARY...
#
# STORE holds each NAME (e.g. bench/compress.sh's WORK/store, repacked, and
# the family it was added from). Every build reads the same store. The
# store and the model are read before each step (a warm page cache); with
# DROP_CACHES=1 (root) the page cache is emptied first (see perf.sh).
set -euo pipefail
. "$(dirname "$0")/steps.sh" # rounds, usage, fresh, step, med
rounds "[-n ROUNDS] STORE MODEL_ROOT NAME... -- BINARY..." "$@"
shift $((OPTIND - 1))
st=$1 root=$2; shift 2
declare -a names=() bins=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do names+=("$1"); shift; done
[ $# -gt 1 ] || usage "[-n ROUNDS] STORE MODEL_ROOT NAME... -- BINARY..."
shift
bins=("$@")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg)
# settle: the last output goes, and its blocks' discards (a file system
# mounted with -o discard issues them after the commit) are given time
# before the next step: a build that came second in every round ran
# 10-20% slower, with more system time, than the same build first.
settle() { rm -rf "$W/out"; sync; sleep "${SETTLE:-1}"; }
for ((r = 1; r <= runs; r++)); do
  for n in "${names[@]}"; do
    settle; step "$n cp" "$root/$n" "cp -r '$root/$n' '$W/out'"
    # The builds take turns coming first.
    for ((k = 0; k < ${#bins[@]}; k++)); do
      i=$(((k + r) % ${#bins[@]}))
      settle; step "$n $i" "$st" "'${bins[$i]}' --store '$st' --quiet checkout '$n' '$W/out'"
    done
  done
done
printf '| model | tool | wall s | CPU s | wall × cp |\n| --- | --- | ---: | ---: | ---: |\n'
for n in "${names[@]}"; do
  cpw=$(awk -v n="$n" '$1==n && $2=="cp" {print $3}' "$W/raw" | med)
  for t in cp "${!bins[@]}"; do
    w=$(awk -v n="$n" -v t="$t" '$1==n && $2==t {print $3}' "$W/raw" | med)
    c=$(awk -v n="$n" -v t="$t" '$1==n && $2==t {print $4+$5}' "$W/raw" | med)
    label="cp -r"
    [ "$t" != cp ] && label=${bins[$t]}
    printf '| %s | %s | %s | %s | %s× |\n' "$n" "$label" "$w" "$c" "$(awk -v a="$w" -v b="$cpw" 'BEGIN{printf "%.2f", a/b}')"
  done
done
printf '\n%d rounds, medians; each step followed by sync; load average before: %s, after: %s\n' "$runs" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '\nEach step (model, tool: cp or 0, 1, ... in the order given; wall, user, sys seconds, peak KiB):\n'
sed 's/^/    /' "$W/raw"
