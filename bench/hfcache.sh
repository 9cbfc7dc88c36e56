#!/usr/bin/env bash
# Measures `mstore add` of a whole Hugging Face cache against cp of it (issue
# 16's closing figure): the bench family's variants as the revisions of one
# cache repo (models--bench--family, blobs named by SHA-256 as the hub does,
# snapshots linking into them, refs/main at the last), added in one command.
#
#   bench/hfcache.sh [-n RUNS] WORK_DIR
#
# $FAMILY is a genmodels.py output directory (made in WORK_DIR/family-full,
# about a minute and 5 GB, when unset). Its files are hard-linked into the
# cache when it is on WORK_DIR's file system (else copied). Runs are
# interleaved (cp -a of the cache, then mstore add into a fresh store), the
# page cache warm, each timed by /usr/bin/time with a sync at its end; the
# table gives medians, and what mstore stored and saved by dedup.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
runs=3
while getopts "n:" o; do
  case $o in
    n) runs=$OPTARG ;;
    *) echo "usage: $0 [-n RUNS] WORK_DIR" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# = 1 ] || { echo "usage: $0 [-n RUNS] WORK_DIR" >&2; exit 2; }
W=$(mkdir -p "$1" && cd "$1" && pwd)
mkdir -p "$W/bin" "$W/results"
(cd "$repo" && go build -o "$W/bin/mstore" ./cmd/mstore)
FAMILY=${FAMILY:-$W/family-full}
if [ ! -d "$FAMILY/base" ]; then
  /usr/bin/python3 "$repo/../shared/bench/genmodels.py" "$FAMILY" --preset full >/dev/null
fi

# The cache: one revision per variant, in the order genmodels.py writes them.
HUB=$W/hub
R=$HUB/models--bench--family
if [ ! -f "$R/refs/main" ]; then
  rm -rf "$HUB"; mkdir -p "$R/blobs" "$R/refs"
  for v in base ft-lastlayers ft-lora-merged ft-vocab-ext base-resharded base-gguf; do
    [ -d "$FAMILY/$v" ] || continue
    rev=$(printf '%s' "$v" | sha1sum | cut -c1-40)
    mkdir -p "$R/snapshots/$rev"
    for f in "$FAMILY/$v"/*; do
      sum=$(sha256sum "$f" | cut -c1-64)
      [ -e "$R/blobs/$sum" ] || ln "$f" "$R/blobs/$sum" 2>/dev/null || cp "$f" "$R/blobs/$sum"
      ln -s "../../blobs/$sum" "$R/snapshots/$rev/$(basename "$f")"
    done
    printf '%s' "$rev" >"$R/refs/main"
    touch "$R/snapshots/$rev"; sleep 0.01 # the snapshots' order is their folders' times
  done
fi
revisions=$(ls "$R/snapshots" | wc -l)
cache_bytes=$(du -sb "$R/blobs" | cut -f1)

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
RAW=$W/results/hfcache.tsv
: >"$RAW"
measure() { # TOOL CMD
  local tool=$1 tf="$W/results/time.txt"; shift
  sync
  /usr/bin/time -v -o "$tf" bash -c "$*"'; rc=$?; sync; exit $rc' >"$W/results/last.log" 2>&1 ||
    { echo "$tool failed:" >&2; tail -5 "$W/results/last.log" >&2; exit 1; }
  local wall rss
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tf" | awk -F: '{s=0; for(i=1;i<=NF;i++) s=s*60+$i; print s}')
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tf")
  printf '%s\t%s\t%s\n' "$tool" "$wall" "$rss" >>"$RAW"
}
for ((r = 1; r <= runs; r++)); do
  find -L "$R/snapshots" -type f -exec cat {} + >/dev/null
  rm -rf "$W/cp-hub"; measure cp "cp -a '$HUB' '$W/cp-hub'"; rm -rf "$W/cp-hub"
  rm -rf "$W/store"; measure mstore "'$W/bin/mstore' --store '$W/store' --json add '$HUB' >'$W/results/summary.json'"
done
median() {
  awk -F'\t' -v t="$1" -v f="$2" '$1==t {print $f}' "$RAW" | sort -g |
    awk '{a[NR]=$1} END{if(NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'
}
read -r logical new saved versions < <(/usr/bin/python3 -c '
import json,sys; s=json.load(open(sys.argv[1]))
print(s["logical_bytes"], s["new_bytes"], s["saved_bytes"], len(s["versions"]))' "$W/results/summary.json")
store_bytes=$(du -sb "$W/store" | cut -f1)
cw=$(median cp 2); mw=$(median mstore 2)
{
  printf '| %d revisions of models--bench--family (%d MB of blobs in the cache) | cp -a | mstore add HUB | ratio |\n' "$revisions" $((cache_bytes / 1000000))
  printf '| --- | ---: | ---: | ---: |\n'
  printf '| wall time | %s s | %s s | %s× |\n' "$cw" "$mw" "$(awk -v a="$mw" -v b="$cw" 'BEGIN{printf "%.2f", a/b}')"
  printf '| peak RSS | %d MB | %d MB | |\n' $(($(median cp 3) / 1024)) $(($(median mstore 3) / 1024))
  printf '| bytes written | %d MB | %d MB new (store on disk %d MB) | |\n' $((cache_bytes / 1000000)) $((new / 1000000)) $((store_bytes / 1000000))
  printf '\n%d versions, %d MB logical; the dedup saved %d MB (logical − new). %d runs, medians, interleaved; wall includes a sync; load before: %s\n' \
    "$versions" $((logical / 1000000)) $((saved / 1000000)) "$runs" "$LOAD0"
} | tee "$W/results/hfcache.md"
