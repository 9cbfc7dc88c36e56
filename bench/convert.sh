#!/usr/bin/env bash
# Checkouts that convert (re-layouts, --dtype casts, OCI layouts) beside
# cp of the same model, interleaved: the dense model of 74 tensors (302 MB,
# F16) and the model of 100,000 tensors of 512 B (perf.sh's models, made
# with bench/genmodel in WORK_DIR/models unless there).
#
#   bench/convert.sh [-n ROUNDS] WORK_DIR BINARY...
#
# Each build adds the models to a store of its own first (not timed).
# Then, ROUNDS times, each conversion is timed for cp and each build (the
# builds taking turns to go first), each step followed by sync, its input
# read first (DROP_CACHES=1, as root, empties the page cache before). The
# table gives medians of wall time and peak RSS. CONVERSIONS picks the rows
# ("MODEL:FLAGS;...", as in the default below).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/steps.sh" # rounds, usage, fresh, step, med
args="[-n ROUNDS] WORK_DIR BINARY..."
rounds "$args" "$@"
shift $((OPTIND - 1))
[ $# -ge 2 ] || usage "$args"
W=$(mkdir -p "$1" && cd "$1" && pwd)
shift
bins=("$@")
mkdir -p "$W/models"
(cd "$here/.." && go build -o "$W/genmodel" ./bench/genmodel)
M=$W/models
for m in dense small; do [ -d "$M/$m" ] || "$W/genmodel" "$m" "$M/$m"; done
IFS=';' read -ra rows <<<"${CONVERSIONS:-dense:--dtype bf16;dense:--format gguf;dense:--format npz;small:--format npz;small:--format pytorch;small:--dtype f16 --clamp;small:--max-shard-size 20MB;small:--layout oci}"

for i in "${!bins[@]}"; do
  for m in dense small; do
    st="$W/store-$i-$m"
    [ -d "$st" ] || "${bins[$i]}" --store "$st" add "$M/$m" --name m --quiet
  done
done
: >"$W/raw"
for ((r = 1; r <= runs; r++)); do
  for k in "${!rows[@]}"; do
    m=${rows[$k]%%:*} flags=${rows[$k]#*:}
    rm -rf "$W/out"; sync
    step "$k cp" "$M/$m" "cp -r '$M/$m/.' '$W/out'"
    for ((j = 0; j < ${#bins[@]}; j++)); do
      i=$(((j + r) % ${#bins[@]})) # the builds take turns coming first
      rm -rf "$W/out"; sync
      step "$k $i" "$W/store-$i-$m" "'${bins[$i]}' --store '$W/store-$i-$m' checkout m '$W/out' $flags --quiet"
    done
  done
done
rm -rf "$W/out"

printf '| checkout | cp |'
for i in "${!bins[@]}"; do printf ' %s | × cp | peak RSS |' "${bins[$i]}"; done
printf '\n| --- | ---: |'
for _ in "${bins[@]}"; do printf ' ---: | ---: | ---: |'; done
printf '\n'
for k in "${!rows[@]}"; do
  cw=$(awk -v k="$k" '$1==k && $2=="cp" {print $3}' "$W/raw" | med)
  printf '| %s `%s` | %s s |' "${rows[$k]%%:*}" "${rows[$k]#*:}" "$cw"
  for i in "${!bins[@]}"; do
    w=$(awk -v k="$k" -v t="$i" '$1==k && $2==t {print $3}' "$W/raw" | med)
    kb=$(awk -v k="$k" -v t="$i" '$1==k && $2==t {print $6}' "$W/raw" | med)
    printf ' %s s | %s× | %s MiB |' "$w" "$(awk -v a="$w" -v b="$cw" 'BEGIN{printf "%.1f", a/b}')" "$((kb / 1024))"
  done
  printf '\n'
done
printf '\n%d rounds, medians; each step followed by sync\n' "$runs"
