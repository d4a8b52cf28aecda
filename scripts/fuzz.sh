#!/usr/bin/env bash
# Runs every libFuzzer target built in BUILD_DIR for SECONDS in total (split
# evenly between them), seeded from fuzz/corpus/<name>/ where it exists
# (fuzz_gguf -> fuzz/corpus/gguf/). New inputs go to a scratch corpus inside
# BUILD_DIR, never into the committed seeds. Exits non-zero when a target
# crashes, leaks or times out; the crashing input is kept in BUILD_DIR/fuzz-artifacts/.
#   usage: scripts/fuzz.sh BUILD_DIR SECONDS
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "$1" && pwd)"
seconds=$2
targets=()
for src in "$root"/fuzz/fuzz_*.c; do
  [ -e "$src" ] || continue
  name=$(basename "$src" .c)
  if [ ! -x "$build/$name" ]; then
    echo "fuzz.sh: $build/$name is not built (configure with CC=clang -DLLAMAC_FUZZ=ON)" >&2
    exit 1
  fi
  targets+=("$name")
done
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz.sh: no fuzz targets under $root/fuzz" >&2
  exit 1
fi
per_target=$(( seconds / ${#targets[@]} ))
[ "$per_target" -ge 1 ] || per_target=1
mkdir -p "$build/fuzz-artifacts"
status=0
for name in "${targets[@]}"; do
  scratch="$build/fuzz-corpus/$name"
  mkdir -p "$scratch"
  seeds="$root/fuzz/corpus/${name#fuzz_}"
  dirs=("$scratch")
  [ -d "$seeds" ] && dirs+=("$seeds")
  echo "== $name for ${per_target}s"
  if ! "$build/$name" -max_total_time="$per_target" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$name-" "${dirs[@]}" \
       >"$build/fuzz-artifacts/$name.log" 2>&1; then
    echo "fuzz.sh: $name failed; the last lines of $build/fuzz-artifacts/$name.log:" >&2
    tail -n 40 "$build/fuzz-artifacts/$name.log" >&2
    status=1
  else
    grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$build/fuzz-artifacts/$name.log" || true
  fi
done
exit $status
