#!/usr/bin/env bash
# Measures how mstore's costs grow with its store (issue 13: show, diff,
# du, fsck and gc "on a store with many such versions stay within the same
# bound"). VERSIONS models of 100,000 tensors of 512 B, each with other
# bytes (genmodel -seed K: every version brings 100,000 new blobs, as
# successive checkpoints of a training run do), are added into one store
# one after another, cp of the same model timed beside each add. On the
# full store it then times show, diff, du, fsck, gc --dry-run and a
# checkout of the first version. One pass: the store grows as it goes, so
# there is nothing to take a median of.
#
#   bench/growth.sh [-n VERSIONS] [-b NAME=MSTORE_BINARY]... WORK_DIR
#
# With no -b, mstore is built from this checkout. Each build has a store
# of its own; the builds take turns at each step. Every step is followed
# by `sync` and timed by /usr/bin/time -v (wall, user+sys, peak RSS); with
# DROP_CACHES=1 (root) each starts from an emptied page cache.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
versions=7
declare -a names=() bins=()
while getopts "n:b:" o; do
  case $o in
    n) versions=$OPTARG ;;
    b) names+=("${OPTARG%%=*}"); bins+=("${OPTARG#*=}") ;;
    *) echo "usage: $0 [-n VERSIONS] [-b NAME=BINARY]... WORK_DIR" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# = 1 ] || { echo "usage: $0 [-n VERSIONS] [-b NAME=BINARY]... WORK_DIR" >&2; exit 2; }
W=$(mkdir -p "$1" && cd "$1" && pwd)
mkdir -p "$W/bin" "$W/models" "$W/results"
if [ ${#bins[@]} = 0 ]; then
  (cd "$repo" && go build -o "$W/bin/mstore" ./cmd/mstore)
  names=(mstore); bins=("$W/bin/mstore")
fi
(cd "$repo" && go build -o "$W/bin/genmodel" ./bench/genmodel)
for ((v = 1; v <= versions; v++)); do
  [ -d "$W/models/v$v" ] || "$W/bin/genmodel" -seed "$v" small "$W/models/v$v"
done

RAW=$W/results/growth.tsv
: >"$RAW"
# measure TOOL STEP CMD: one timed run of CMD followed by sync.
measure() {
  local tool=$1 step=$2 tf="$W/results/time.txt"; shift 2
  sync
  if [ "${DROP_CACHES:-0}" = 1 ]; then echo 1 >/proc/sys/vm/drop_caches; fi
  /usr/bin/time -v -o "$tf" bash -c "$*"'; rc=$?; sync; exit $rc' >"$W/results/last.log" 2>&1 ||
    { echo "$tool $step failed:" >&2; tail -5 "$W/results/last.log" >&2; exit 1; }
  local wall user sys rss
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tf" | awk -F: '{s=0; for(i=1;i<=NF;i++) s=s*60+$i; print s}')
  user=$(sed -n 's/.*User time (seconds): //p' "$tf")
  sys=$(sed -n 's/.*System time (seconds): //p' "$tf")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tf")
  printf '%s\t%s\t%s\t%s\t%s\n' "$tool" "$step" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" "$rss" >>"$RAW"
}

for ((k = 0; k < ${#bins[@]}; k++)); do rm -rf "$W/store-${names[$k]}"; done
steps=()
for ((v = 1; v <= versions; v++)); do
  rm -rf "$W/cp"; measure cp "add v$v" "cp -r '$W/models/v$v/.' '$W/cp'"
  for ((k = 0; k < ${#bins[@]}; k++)); do
    i=$(((k + v) % ${#bins[@]}))
    measure "${names[$i]}" "add v$v" "'${bins[$i]}' --store '$W/store-${names[$i]}' add '$W/models/v$v' --name v$v --quiet"
  done
  steps+=("add v$v")
done
rm -rf "$W/cp"
for cmd in "show v1" "diff v1 v2" "du" "fsck" "gc --dry-run" "checkout v1"; do
  for ((k = 0; k < ${#bins[@]}; k++)); do
    st="$W/store-${names[$k]}" out=""
    [ "$cmd" = "checkout v1" ] && { rm -rf "$W/out"; out="'$W/out'"; }
    measure "${names[$k]}" "$cmd" "'${bins[$k]}' --store '$st' $cmd $out >/dev/null"
  done
  steps+=("$cmd")
done
rm -rf "$W/out"

field() { awk -F'\t' -v t="$1" -v s="$2" -v f="$3" '$1==t && $2==s {print $f}' "$RAW"; }
{
  printf '| step | cp |'
  for n in "${names[@]}"; do printf ' %s wall | CPU | peak RSS |' "$n"; done
  printf '\n| --- | ---: |'
  for _ in "${names[@]}"; do printf ' ---: | ---: | ---: |'; done
  printf '\n'
  for s in "${steps[@]}"; do
    c=$(field cp "$s" 3)
    printf '| %s | %s |' "$s" "${c:+$c s}"
    for n in "${names[@]}"; do
      printf ' %s s | %s s | %s MiB |' "$(field "$n" "$s" 3)" "$(field "$n" "$s" 4)" "$(awk -v k="$(field "$n" "$s" 5)" 'BEGIN{printf "%.0f", k/1024}')"
    done
    printf '\n'
  done
  printf '\n%d versions of 100,000 tensors of 512 B (61 MB each), one pass; wall time includes a sync; CPU is user+sys; index sizes:' "$versions"
  for n in "${names[@]}"; do printf ' %s %s MB' "$n" $(($(stat -c %s "$W/store-$n/index.db") / 1000000)); done
  printf '\n'
} | tee "$W/results/growth.md"
