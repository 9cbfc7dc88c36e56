#!/usr/bin/env bash
# Repack throughput, builds side by side (issue 15's "repack at >= 300 MB/s
# a core"): each build repacks a copy of STORE (a store of raw blobs, e.g.
# the bench family's base just added), ROUNDS times, the builds taking
# turns coming first, and the medians of wall seconds, CPU seconds
# (user+sys) and repack's own mb_per_cpu_second are printed.
#
#   bench/repack.sh [-n ROUNDS] STORE -- BINARY...
#
# The copy is synced, and with DROP_CACHES=1 (root) the page cache is then
# emptied, as after an add, whose blobs go past it; the programs are read
# again so that none starts cold. The coded bytes of every build are
# printed too: a faster build that codes to other sizes shows it.
set -euo pipefail
. "$(dirname "$0")/steps.sh" # rounds, usage, med
rounds "[-n ROUNDS] STORE -- BINARY..." "$@"
shift $((OPTIND - 1))
[ $# -ge 3 ] && [ "$2" = -- ] || usage "[-n ROUNDS] STORE -- BINARY..."
src=$1
shift 2
bins=("$@")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
num() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(d['result'][sys.argv[1]])" "$1"; }
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= runs; r++)); do
  for ((k = 0; k < ${#bins[@]}; k++)); do
    i=$(((k + r) % ${#bins[@]}))
    rm -rf "$W/store" && cp -a "$src" "$W/store" && sync
    if [ "${DROP_CACHES:-0}" = 1 ]; then echo 1 >/proc/sys/vm/drop_caches; fi
    cat "${bins[@]}" >/dev/null
    /usr/bin/time -f "%e %U %S %M" -o "$W/t" "${bins[$i]}" --store "$W/store" --json repack >"$W/out.json"
    echo "$i $(cat "$W/t") $(num mb_per_cpu_second <"$W/out.json") $(num coded_stored <"$W/out.json") $(num raw_bytes <"$W/out.json")" >>"$W/raw"
  done
done
printf '| build | wall s | CPU s | MB per CPU s (repack) | raw bytes | coded bytes |\n| --- | ---: | ---: | ---: | ---: | ---: |\n'
for i in "${!bins[@]}"; do
  col() { awk -v i="$i" "\$1==i {print $1}" "$W/raw" | med; }
  printf '| %s | %s | %s | %.0f | %s | %s |\n' "${bins[$i]}" "$(col '$2')" "$(col '$3+$4')" "$(col '$6')" "$(col '$8')" "$(col '$7')"
done
printf '\n%d rounds, medians; load average before: %s, after: %s\n' "$runs" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '\nEach run (build, in the order given; wall, user, sys seconds, peak KiB, MB per CPU s, coded bytes, raw bytes):\n'
sed 's/^/    /' "$W/raw"
