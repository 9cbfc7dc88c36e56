#!/usr/bin/env bash
# Measures mstore against cp in one run (issue 13's table): add and checkout
# of the bench family's base model, a dense 300 MB model (74 tensors), a
# mixture-of-experts model of 19,502 tensors in 10 shards and a model of
# 100,000 tensors of 512 B in one file; then the dense model as a PyTorch
# checkpoint (pytorch_model.bin, written by the first build's checkout).
#
#   bench/perf.sh [-n RUNS] [-b NAME=MSTORE_BINARY]... WORK_DIR
#
# With no -b, mstore is built from this checkout. Several -b give one column
# each (e.g. -b before=/tmp/mstore-aa1d921 -b after=/tmp/mstore-new). The
# family's base comes from $FAMILY (a genmodels.py output directory), made
# in WORK_DIR/family-full when unset (about a minute, 5 GB). The page cache
# is warm (inputs are read before each step); every step is timed with
# `sync` at its end, by /usr/bin/time -v (wall, user+sys, peak RSS); with
# DROP_CACHES=1 (root) each step starts from an emptied page cache, its
# inputs read again. Runs are
# interleaved (cp, then each mstore, RUNS times, the builds taking turns
# to go first); the table gives medians.
# STEPS (default "base dense moe small densept") picks the models measured.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
runs=5
declare -a names=() bins=()
while getopts "n:b:" o; do
  case $o in
    n) runs=$OPTARG ;;
    b) names+=("${OPTARG%%=*}"); bins+=("${OPTARG#*=}") ;;
    *) echo "usage: $0 [-n RUNS] [-b NAME=BINARY]... WORK_DIR" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# = 1 ] || { echo "usage: $0 [-n RUNS] [-b NAME=BINARY]... WORK_DIR" >&2; exit 2; }
W=$(mkdir -p "$1" && cd "$1" && pwd)
mkdir -p "$W/bin" "$W/models" "$W/results"
if [ ${#bins[@]} = 0 ]; then
  (cd "$repo" && go build -o "$W/bin/mstore" ./cmd/mstore)
  names=(mstore); bins=("$W/bin/mstore")
fi
(cd "$repo" && go build -o "$W/bin/genmodel" ./bench/genmodel)
FAMILY=${FAMILY:-$W/family-full}
if [ ! -d "$FAMILY/base" ]; then
  /usr/bin/python3 "$repo/../shared/bench/genmodels.py" "$FAMILY" --preset full --no-gguf >/dev/null
fi
M=$W/models
ln -sfn "$FAMILY/base" "$M/base"
for m in dense moe small; do [ -d "$M/$m" ] || "$W/bin/genmodel" "$m" "$M/$m"; done
if [ ! -d "$M/densept" ]; then # the dense model's tensors as torch.save lays them out
  rm -rf "$W/densept-store"
  "${bins[0]}" --store "$W/densept-store" add "$M/dense" --name d --quiet
  "${bins[0]}" --store "$W/densept-store" checkout d "$M/densept" --format pytorch --quiet
  rm -rf "$W/densept-store"
fi
# Model sizes and tensor counts, for the table's labels.
label() {
  local bytes; bytes=$(du -sbL "$M/$1" | cut -f1)
  printf '%s (%d MB)' "$2" $((bytes / 1000000))
}

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
RAW=$W/results/raw.tsv
: >"$RAW"
# measure TOOL STEP CMD: one timed run of CMD followed by sync.
measure() {
  local tool=$1 step=$2 tf="$W/results/time.txt"; shift 2
  sync
  /usr/bin/time -v -o "$tf" bash -c "$*"'; rc=$?; sync; exit $rc' >"$W/results/last.log" 2>&1 ||
    { echo "$tool $step failed:" >&2; tail -5 "$W/results/last.log" >&2; exit 1; }
  local wall user sys rss
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tf" | awk -F: '{s=0; for(i=1;i<=NF;i++) s=s*60+$i; print s}')
  user=$(sed -n 's/.*User time (seconds): //p' "$tf")
  sys=$(sed -n 's/.*System time (seconds): //p' "$tf")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tf")
  printf '%s\t%s\t%s\t%s\t%s\n' "$tool" "$step" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" "$rss" >>"$RAW"
}
warm() { find -L "$@" -type f -exec cat {} + >/dev/null; }
# fresh INPUT...: with DROP_CACHES=1 (as root) the page cache is emptied
# first, so that every step starts with the same free memory: in a VM
# whose page cache has filled its memory, writing a fresh page costs a
# reclaim, and the system time of the same step varied fivefold with it.
# The programs are read again too (cp and every build): a build of 25 MB
# read from the disk cost each of its steps 30-100 ms that cp, of 150 KB,
# did not pay.
fresh() {
  if [ "${DROP_CACHES:-0}" = 1 ]; then sync; echo 1 >/proc/sys/vm/drop_caches; fi
  warm "$@" "${bins[@]}" "$(command -v cp)"
}

# settle: after a removal, its blocks' discards (the file system here is
# mounted with -o discard, which issues them after the commit) are given
# time before the next timed step, as in checkoutcp.sh.
settle() { sync; sleep "${SETTLE:-1}"; }

read -ra steps <<<"${STEPS:-base dense moe small densept}" # e.g. STEPS="dense moe small": no family base
for ((r = 1; r <= runs; r++)); do
  for m in "${steps[@]}"; do
    rm -rf "$W/cp-$m"; settle; fresh "$M/$m"; measure cp "add.$m" "cp -r '$M/$m/.' '$W/cp-$m'"
    for ((k = 0; k < ${#bins[@]}; k++)); do
      i=$(((k + r) % ${#bins[@]})) # the builds take turns coming first (see checkoutcp.sh)
      st="$W/store-${names[$i]}-$m"; rm -rf "$st"; settle; fresh "$M/$m"
      measure "${names[$i]}" "add.$m" "'${bins[$i]}' --store '$st' add '$M/$m' --name m --quiet"
    done
    [ "$m" = base ] && continue # the issue's table has no checkout of the base model
    rm -rf "$W/out-cp-$m"; settle; fresh "$W/cp-$m"; measure cp "checkout.$m" "cp -r '$W/cp-$m' '$W/out-cp-$m'"
    for ((k = 0; k < ${#bins[@]}; k++)); do
      i=$(((k + r) % ${#bins[@]}))
      st="$W/store-${names[$i]}-$m"; rm -rf "$W/out-$i-$m"; settle; fresh "$st"
      measure "${names[$i]}" "checkout.$m" "'${bins[$i]}' --store '$st' checkout m '$W/out-$i-$m' --quiet"
      cmp -s "$W/out-$i-$m/config.json" "$M/$m/config.json" || { echo "checkout of $m by ${names[$i]} differs" >&2; exit 1; }
    done
    rm -rf "$W/out-cp-$m" "$W"/out-*-"$m"
  done
done

# median TOOL STEP FIELD(3 wall, 4 cpu, 5 rss)
median() {
  awk -F'\t' -v t="$1" -v s="$2" -v f="$3" '$1==t && $2==s {print $f}' "$RAW" | sort -g |
    awk '{a[NR]=$1} END{if(NR==0){print "-"; exit} if(NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b>0) printf "%.2f×", a/b; else print "-" }'; }

{
  printf '| work | cp |'
  for n in "${names[@]}"; do printf ' %s | ratio | CPU vs cp |' "$n"; done
  printf '\n| --- | ---: |'
  for _ in "${names[@]}"; do printf ' ---: | ---: | ---: |'; done
  printf '\n'
  for row in add.base add.dense checkout.dense add.moe checkout.moe add.small checkout.small add.densept checkout.densept; do
    m=${row#*.}
    case $m in
      base) what=$(label base "full bench family base, 2 shards") ;;
      dense) what=$(label dense "a dense model of 74 tensors") ;;
      moe) what=$(label moe "19,502 tensors in 10 shards") ;;
      small) what=$(label small "100,000 tensors of 512 B") ;;
      densept) what=$(label densept "the dense model as a PyTorch checkpoint") ;;
    esac
    cw=$(median cp "$row" 3); cc=$(median cp "$row" 4)
    printf '| %s, %s | %s s |' "${row%%.*}" "$what" "$cw"
    for n in "${names[@]}"; do
      w=$(median "$n" "$row" 3); c=$(median "$n" "$row" 4)
      printf ' %s s | %s | %s |' "$w" "$(ratio "$w" "$cw")" "$(ratio "$c" "$cc")"
    done
    printf '\n'
  done
  for row in add.moe add.small checkout.small; do
    printf '| peak RSS, %s |  |' "$row"
    for n in "${names[@]}"; do
      kb=$(median "$n" "$row" 5)
      tensors=$([ "${row#*.}" = moe ] && echo 19502 || echo 100000)
      # kb is a median: the mean of two with an even RUNS, "-" without the step.
      printf ' %s |  |  |' "$(awk -v k="$kb" -v t="$tensors" 'BEGIN{ if (k == "-") print "-"; else printf "%.0f MiB (%.1f KB/tensor)", k/1024, k*1.024/t }')"
    done
    printf '\n'
  done
  printf '\n%d runs each, medians; wall time includes a sync; CPU is user+sys; load average before: %s\n' "$runs" "$LOAD0"
} | tee "$W/results/table.md"
