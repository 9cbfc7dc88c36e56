#!/usr/bin/env bash
# Measures checkouts that convert (re-layouts, --dtype casts, OCI layouts)
# against cp of the same model, in one run: the dense model of 74 tensors
# (302 MB, F16) and the model of 100,000 tensors of 512 B (perf.sh's
# models, made with bench/genmodel).
#
#   bench/convert.sh [-n RUNS] [-b NAME=MSTORE_BINARY]... WORK_DIR
#
# With no -b, mstore is built from this checkout. Each build adds the
# models to a store of its own first (not timed); then every conversion
# is timed RUNS times by /usr/bin/time -v (wall, user+sys, peak RSS), the
# builds taking turns to go first, each step followed by sync, its inputs
# read into the page cache before it. The table gives medians.
# CONVERSIONS picks the rows ("MODEL:FLAGS;..." as in the default below).
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
M=$W/models
for m in dense small; do [ -d "$M/$m" ] || "$W/bin/genmodel" "$m" "$M/$m"; done
IFS=';' read -ra rows <<<"${CONVERSIONS:-dense:--dtype bf16;dense:--format gguf;dense:--format npz;small:--format npz;small:--format pytorch;small:--dtype f16 --clamp;small:--max-shard-size 20MB;small:--layout oci}"

RAW=$W/results/convert.tsv
: >"$RAW"
measure() { # TOOL ROW CMD...
  local tool=$1 row=$2 tf="$W/results/time.txt"; shift 2
  sync
  /usr/bin/time -v -o "$tf" bash -c "$*"'; rc=$?; sync; exit $rc' >"$W/results/last.log" 2>&1 ||
    { echo "$tool $row failed:" >&2; tail -5 "$W/results/last.log" >&2; exit 1; }
  local wall user sys rss
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tf" | awk -F: '{s=0; for(i=1;i<=NF;i++) s=s*60+$i; print s}')
  user=$(sed -n 's/.*User time (seconds): //p' "$tf")
  sys=$(sed -n 's/.*System time (seconds): //p' "$tf")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tf")
  printf '%s\t%s\t%s\t%s\t%s\n' "$tool" "$row" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" "$rss" >>"$RAW"
}
warm() { find -L "$@" -type f -exec cat {} + >/dev/null; }

for ((i = 0; i < ${#bins[@]}; i++)); do
  for m in dense small; do
    st="$W/store-${names[$i]}-$m"
    [ -d "$st" ] || "${bins[$i]}" --store "$st" add "$M/$m" --name m --quiet
  done
done
for ((r = 1; r <= runs; r++)); do
  for k in "${!rows[@]}"; do
    m=${rows[$k]%%:*} flags=${rows[$k]#*:}
    rm -rf "$W/out-cp"; sync; warm "$M/$m"
    measure cp "$k" "cp -r '$M/$m/.' '$W/out-cp'"
    rm -rf "$W/out-cp"
    for ((j = 0; j < ${#bins[@]}; j++)); do
      i=$(((j + r) % ${#bins[@]})) # the builds take turns coming first
      st="$W/store-${names[$i]}-$m"; out="$W/out-$i"
      rm -rf "$out"; sync; warm "$st"
      measure "${names[$i]}" "$k" "'${bins[$i]}' --store '$st' checkout m '$out' $flags --quiet"
      rm -rf "$out"
    done
  done
done

median() { # TOOL ROW FIELD(3 wall, 4 cpu, 5 rss)
  awk -F'\t' -v t="$1" -v s="$2" -v f="$3" '$1==t && $2==s {print $f}' "$RAW" | sort -g |
    awk '{a[NR]=$1} END{if(NR==0){print "-"; exit} if(NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'
}
{
  printf '| checkout | cp |'
  for n in "${names[@]}"; do printf ' %s | ratio | peak RSS |' "$n"; done
  printf '\n| --- | ---: |'
  for _ in "${names[@]}"; do printf ' ---: | ---: | ---: |'; done
  printf '\n'
  for k in "${!rows[@]}"; do
    m=${rows[$k]%%:*} flags=${rows[$k]#*:}
    cw=$(median cp "$k" 3)
    printf '| %s `%s` | %s s |' "$m" "$flags" "$cw"
    for n in "${names[@]}"; do
      w=$(median "$n" "$k" 3) kb=$(median "$n" "$k" 5)
      printf ' %s s | %s | %s MiB |' "$w" "$(awk -v a="$w" -v b="$cw" 'BEGIN{printf "%.1f×", a/b}')" "$(awk -v k="$kb" 'BEGIN{printf "%.0f", k/1024}')"
    done
    printf '\n'
  done
  printf '\n%d runs each, medians; wall time includes a sync\n' "$runs"
} | tee "$W/results/convert.md"
