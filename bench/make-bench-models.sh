#!/bin/sh
# Makes the benchmark models of issue 6 in DIR: a TinyLlama-1.1B-shaped model
# with random weights (llamac make-model --preset tinyllama) as F16, and its
# Q8_0, Q4_0 and Q4_K_M quantizations (llamac quantize).
#
#   bench/make-bench-models.sh DIR [PRESET]
#
# PRESET defaults to tinyllama (llama7b and mixtral work too, but their F16
# files are 13 GB and 93 GB). Files that already exist are kept, so a rerun
# only makes what is missing. The llamac binary is $LLAMAC, else
# build/llamac beside this script's directory; the vocabulary is found by
# llamac make-model ($LLAMAC_SHARED or ../shared).
set -eu

if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
dir=$1
preset=${2:-tinyllama}
root=$(cd "$(dirname "$0")/.." && pwd)
llamac=${LLAMAC:-$root/build/llamac}
if [ ! -x "$llamac" ]; then
    echo "make-bench-models: $llamac not found; build it (cmake --build build) or set LLAMAC" >&2
    exit 1
fi
mkdir -p "$dir"

f16=$dir/$preset-f16.gguf
if [ ! -f "$f16" ]; then
    "$llamac" make-model --preset "$preset" --type f16 --seed 1 -o "$f16.tmp"
    mv "$f16.tmp" "$f16"
fi
for type in Q8_0 Q4_0 Q4_K_M; do
    out=$dir/$preset-$(echo "$type" | tr 'A-Z' 'a-z').gguf
    if [ ! -f "$out" ]; then
        # (quantize writes a temporary file and renames it when done)
        "$llamac" quantize "$f16" "$out" "$type" 2> "$out.log"
        rm -f "$out.log"
    fi
done
ls -l "$dir"/"$preset"-*.gguf
