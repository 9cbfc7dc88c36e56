# Sourced by pullcp.sh, checkoutcp.sh, repack.sh, growth.sh and convert.sh: their options, one
# timed step of an interleaved comparison, and the median of its figures.
# The caller sets W (a work directory) and bins (the builds).

# usage ARGS: the script's usage line, then exit 2.
usage() { echo "usage: $0 $1" >&2; exit 2; }

# rounds ARGS "$@": sets runs from -n ROUNDS (5 without it), or prints the
# usage line ARGS; the caller then shifts $((OPTIND - 1)).
rounds() {
  local args=$1 o; shift
  runs=5
  while getopts "n:" o; do
    case $o in
      n) runs=$OPTARG ;;
      *) usage "$args" ;;
    esac
  done
}

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
