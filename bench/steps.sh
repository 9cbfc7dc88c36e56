# Sourced by pullcp.sh and checkoutcp.sh: one timed step of an interleaved
# comparison, and the median of its figures. The caller sets W (a work directory) and bins (the builds).

# fresh INPUT...: with DROP_CACHES=1 (root) the page cache is emptied
# first (see perf.sh); then INPUT and the programs (cp and every build)
# are read, so that every step starts warm.
fresh() {
  if [ "${DROP_CACHES:-0}" = 1 ]; then sync; echo 1 >/proc/sys/vm/drop_caches; fi
  find -L "$@" "${bins[@]}" "$(command -v cp)" -type f -exec cat {} + >/dev/null
}

# step LABEL INPUT CMD: one timed run of CMD, then sync, appended to
# $W/raw as LABEL wall user sys peak-KiB.
step() {
  fresh "$2"; sync
  /usr/bin/time -f "%e %U %S %M" -o "$W/t" bash -c "$3"' >/dev/null; rc=$?; sync; exit $rc' ||
    { echo "$1 failed" >&2; exit 1; }
  echo "$1 $(cat "$W/t")" >>"$W/raw"
}

# med: the median of the numbers on stdin, one a line (the lower middle of
# an even count).
med() { sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
