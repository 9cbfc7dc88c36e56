#!/bin/bash
# bench/compress.sh: issue 15's table for the bench family, one run, beside cp.
#
#   bench/compress.sh MSTORE FAMILY WORK
#
# FAMILY is genmodels.py's output (its unique_bytes.txt is read); WORK is
# emptied. Each variant is copied with cp -r and added (the base first,
# every fine-tune with --base base), each add followed by `repack`, so
# that the stored bytes a variant adds are the difference of `du`'s
# stored blob bytes around its add and repack. Then the delta-coded
# variants are checked out beside cp -r of their source, and a split of a
# stored GGUF is added again. Timings are wall seconds on whatever else
# the machine runs (cp and mstore alternate, page cache warm for both);
# repack's throughput a core is raw MB per CPU second of the process.
set -euo pipefail
M=$1 FAM=$2 WORK=$3
export MSTORE_DIR=$WORK/store
rm -rf "$WORK" && mkdir -p "$WORK"
get() { sed -n "s/^$1=//p" "$FAM/unique_bytes.txt"; }
num() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(eval('d'+sys.argv[1]))" "$1"; }
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null; sync; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
stored() { "$M" --json du | num "['stored_blob_bytes']"; }

echo "| variant | cp s | add s | add × cp | new bytes | stored after repack | repack MB/s a core (CPU) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
prev=0 rawsum=0 cpusum=0
declare -A added
for v in base ft-lastlayers ft-lora-merged ft-vocab-ext base-resharded base-gguf; do
	tcp=$(secs cp -r "$FAM/$v" "$WORK/cp-$v")
	rm -rf "$WORK/cp-$v"
	extra=()
	[ "$v" != base ] && extra=(--base base)
	t0=$(date +%s.%N)
	"$M" --json add "$FAM/$v" --name "$v" "${extra[@]}" >"$WORK/add-$v.json"
	sync
	tadd=$(echo "$(date +%s.%N) - $t0" | bc)
	"$M" --json repack >"$WORK/repack-$v.json"
	raw=$(num "['result']['raw_bytes']" <"$WORK/repack-$v.json")
	cpu=$(num "['result']['cpu_seconds']" <"$WORK/repack-$v.json")
	rawsum=$(echo "$rawsum + $raw" | bc) cpusum=$(echo "$cpusum + $cpu" | bc)
	now=$(stored)
	added[$v]=$((now - prev))
	prev=$now
	printf "| %s | %.2f | %.2f | %.2f | %s | %s | %s |\n" "$v" "$tcp" "$tadd" "$(echo "$tadd / $tcp" | bc -l)" \
		"$(num "['new_bytes']" <"$WORK/add-$v.json")" "${added[$v]}" \
		"$(num "['result']['mb_per_cpu_second']" <"$WORK/repack-$v.json" | xargs printf %.0f)"
done
unique=$(get unique_tensor_bytes)
echo
echo "| figure | result |"
echo "| --- | ---: |"
printf "| store / unique tensor bytes, whole family | %.3f× |\n" "$(echo "$prev / $unique" | bc -l)"
printf "| base stored / its bytes (compression alone) | %.3f× |\n" "$(echo "${added[base]} / $(get base_tensor_bytes)" | bc -l)"
printf "| ft-lastlayers stored / its changed bytes | %.3f× |\n" "$(echo "${added[ft-lastlayers]} / $(get new_unique_bytes.ft-lastlayers)" | bc -l)"
printf "| ft-lora-merged stored / its changed bytes | %.3f× |\n" "$(echo "${added[ft-lora-merged]} / $(get new_unique_bytes.ft-lora-merged)" | bc -l)"
printf "| repack, raw MB per CPU second, all runs | %.0f |\n" "$(echo "$rawsum / 1000000 / $cpusum" | bc -l)"
warm() { find -L "$@" -type f -exec cat {} + >/dev/null; }
for v in ft-lora-merged ft-lastlayers; do
	warm "$FAM/$v"
	tcp=$(secs cp -r "$FAM/$v" "$WORK/cp-$v")
	warm "$MSTORE_DIR" # repack wrote its packs past the page cache
	tco=$(secs "$M" checkout "$v" "$WORK/co-$v")
	cmp -s <(cd "$WORK/co-$v" && cat ./*.safetensors) <(cd "$FAM/$v" && cat ./*.safetensors)
	printf "| checkout of %s (deltas) × cp | %.2f× (%.2f s vs %.2f s) |\n" "$v" "$(echo "$tco / $tcp" | bc -l)" "$tco" "$tcp"
	rm -rf "$WORK/cp-$v" "$WORK/co-$v"
done
"$M" --json du >"$WORK/du.json"
"$M" checkout base-gguf "$WORK/split" --split-max-tensors 100 >/dev/null
printf "| base-gguf split (%s files) re-added: new bytes | %s |\n" "$(ls "$WORK/split" | wc -l)" \
	"$("$M" --json add "$WORK/split" --name base-gguf-split | num "['new_bytes']")"
tiny=$(dirname "$0")/../../shared/testdata/gguf/llama-2-tiny-random.gguf
if [ -f "$tiny" ]; then
	"$M" -q add "$tiny" --name tiny >/dev/null
	"$M" checkout tiny "$WORK/tiny-split" --split-max-tensors 4 >/dev/null
	printf "| llama-2-tiny-random split re-added: new bytes | %s |\n" "$("$M" --json add "$WORK/tiny-split" --name tiny-split | num "['new_bytes']")"
fi
echo
echo "codings: $(num "['codings']" <"$WORK/du.json")"
