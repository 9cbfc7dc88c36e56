#!/usr/bin/env bash
# Measures how mstore's costs grow with its store (issue 13: show, diff,
# du, fsck and gc "on a store with many such versions stay within the same
# bound"). VERSIONS models of 100,000 tensors of 512 B, each with other
# bytes (genmodel -seed K: every version brings 100,000 new blobs, as
# successive checkpoints of a training run do), are added into one store
# one after another, cp of the same model timed beside each add. On the
# full store it then times show, diff, du, fsck, gc --dry-run and a
# checkout of the first version, and last a gc once the first half of the
# versions are removed (then fsck, which must pass). One pass: the store
# grows as it goes, so there is nothing to take a median of.
#
#   bench/growth.sh [-n VERSIONS] WORK_DIR [BINARY...]
#
# VERSIONS is 5 unless given. With no BINARY, mstore is built from this
# checkout. Each build has a store of its own; the builds take turns at
# each add. Every step is followed by `sync` and timed by /usr/bin/time
# (wall, user+sys, peak RSS); with DROP_CACHES=1 (root) each starts from
# an emptied page cache (steps.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/steps.sh" # rounds, usage, fresh, step
args="[-n VERSIONS] WORK_DIR [BINARY...]"
rounds "$args" "$@"
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage "$args"
versions=$runs
W=$(mkdir -p "$1" && cd "$1" && pwd)
shift
mkdir -p "$W/bin" "$W/models"
bins=("$@")
if [ ${#bins[@]} = 0 ]; then
  (cd "$here/.." && go build -o "$W/bin/mstore" ./cmd/mstore)
  bins=("$W/bin/mstore")
fi
(cd "$here/.." && go build -o "$W/bin/genmodel" ./bench/genmodel)
for ((v = 1; v <= versions; v++)); do
  [ -d "$W/models/v$v" ] || "$W/bin/genmodel" -seed "$v" small "$W/models/v$v"
done

: >"$W/raw"
for k in "${!bins[@]}"; do rm -rf "$W/store-$k"; done
steps=()
for ((v = 1; v <= versions; v++)); do
  rm -rf "$W/cp"; step "add.v$v cp" "$W/models/v$v" "cp -r '$W/models/v$v/.' '$W/cp'"
  for ((k = 0; k < ${#bins[@]}; k++)); do
    i=$(((k + v) % ${#bins[@]}))
    step "add.v$v $i" "$W/models/v$v" "'${bins[$i]}' --store '$W/store-$i' add '$W/models/v$v' --name v$v --quiet"
  done
  steps+=("add.v$v")
done
rm -rf "$W/cp"
for cmd in show diff du fsck gc checkout; do
  case $cmd in
    show) argv="show v1" ;;
    diff) argv="diff v1 v2" ;;
    gc) argv="gc --dry-run" ;;
    checkout) argv="checkout v1 '$W/out'" ;;
    *) argv=$cmd ;;
  esac
  for i in "${!bins[@]}"; do
    rm -rf "$W/out"
    step "$cmd $i" "$W/store-$i" "'${bins[$i]}' --store '$W/store-$i' $argv"
  done
  steps+=("$cmd")
done
rm -rf "$W/out"
# Then the first half of the versions go (rm), and gc frees them: its plan
# holds what the rest need up to its budget, and removes the dead records
# in batches. fsck checks what it left.
half=$((versions / 2))
if [ "$half" -gt 0 ]; then
  for i in "${!bins[@]}"; do
    for ((v = 1; v <= half; v++)); do "${bins[$i]}" --store "$W/store-$i" rm "v$v" >/dev/null; done
    step "gc.rm$half $i" "$W/store-$i" "'${bins[$i]}' --store '$W/store-$i' gc --grace 0 --quiet"
    "${bins[$i]}" --store "$W/store-$i" fsck >/dev/null
  done
  steps+=("gc.rm$half")
fi

# field STEP TOOL N: figure N of the step (1 wall, 2 user, 3 sys, 4 peak KiB).
field() { awk -v s="$1" -v t="$2" -v n="$3" '$1==s && $2==t {print $(2+n)}' "$W/raw"; }
{
  printf '| step | cp |'
  for i in "${!bins[@]}"; do printf ' %s: wall | CPU | peak RSS |' "$i"; done
  printf '\n| --- | ---: |'
  for _ in "${bins[@]}"; do printf ' ---: | ---: | ---: |'; done
  printf '\n'
  for s in "${steps[@]}"; do
    c=$(field "$s" cp 1)
    printf '| %s | %s |' "$s" "${c:+$c s}"
    for i in "${!bins[@]}"; do
      printf ' %s s | %s s | %s MiB |' "$(field "$s" "$i" 1)" \
        "$(awk -v u="$(field "$s" "$i" 2)" -v y="$(field "$s" "$i" 3)" 'BEGIN{print u+y}')" \
        "$(awk -v k="$(field "$s" "$i" 4)" 'BEGIN{printf "%.0f", k/1024}')"
    done
    printf '\n'
  done
  printf '\n%d versions of 100,000 tensors of 512 B (61 MB each), one pass; wall time includes a sync; CPU is user+sys\n' "$versions"
  for i in "${!bins[@]}"; do
    printf '%s: %s, index %d MB\n' "$i" "${bins[$i]}" $(($(stat -c %s "$W/store-$i/index.db") / 1000000))
  done
} | tee "$W/growth.md"
