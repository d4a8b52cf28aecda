#!/usr/bin/env bash
# Every test, C and Ruby: the README's test command (`make test`) runs this.
#   1. release build + ctest
#   2. the whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer
#   3. the libFuzzer targets for a short while (clang)
#   4. the Ruby gem's minitest suite
#   5. the suite built for aarch64 and run under qemu-user (NEON kernels;
#      scripts/test-arm64.sh, skipped where it cannot be set up)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-2}
bash scripts/install-deps.sh

echo "== release build and tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")

if [ "${LLAMAC_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== sanitizer build and tests"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLAMAC_SANITIZE=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$jobs")
fi

if [ "${LLAMAC_SKIP_FUZZ:-0}" != 1 ] && ls fuzz/fuzz_*.c >/dev/null 2>&1; then
  echo "== fuzzing"
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLAMAC_FUZZ=ON >/dev/null
  cmake --build build-fuzz -j"$jobs"
  bash scripts/fuzz.sh build-fuzz "${FUZZ_SECONDS:-60}"
fi

if [ -d ruby ] && [ -f ruby/Rakefile -o -d ruby/test ]; then
  echo "== ruby gem tests"
  bash scripts/ruby-test.sh
fi
if [ "${LLAMAC_SKIP_ARM64:-0}" != 1 ]; then
  bash scripts/test-arm64.sh
fi
echo "== all tests passed"
