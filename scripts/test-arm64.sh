#!/usr/bin/env bash
# The whole ctest suite built for aarch64 and run under qemu-user on an x86-64
# machine, so that the NEON kernels (src/quant/quant_neon.c, the arm64 paths
# of the CPU backend) meet the same golden tests as the x86 ones. `make test`
# runs it after the native suites; `make test-arm64` runs it alone.
#
# Needs: the aarch64 cross compilers, qemu-user, the arm64 C/C++ runtimes and
# libcjson (Debian multiarch), and binfmt_misc so that tests which start the
# llamac binary can exec it. The script installs what is missing when it may
# (root or passwordless sudo); when it cannot set something up it says why and
# skips (exit 0), unless LLAMAC_REQUIRE_ARM64=1, where that is a failure.
# Any test that runs and fails fails the script.
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-2}
build=build-arm64

skip() {
  echo "== arm64 tests skipped: $*"
  [ "${LLAMAC_REQUIRE_ARM64:-0}" = 1 ] && exit 1
  exit 0
}

[ "$(uname -m)" = x86_64 ] || skip "this machine is $(uname -m), not x86_64 (a native arm64 machine runs the normal suite)"

if [ "$(id -u)" -eq 0 ]; then sudo=""; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; else sudo=none; fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
packages=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user libc6:arm64 libstdc++6:arm64 libcjson-dev:arm64)
missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$sudo" = none ] && skip "missing ${missing[*]} and not root (no passwordless sudo)"
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64; } &&
    $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null ||
    skip "could not install ${missing[*]}"
fi

# binfmt_misc: arm64 executables started by tests (llamac, self re-execs) run under qemu
binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e "$binfmt/qemu-aarch64" ]; then
  [ "$sudo" = none ] && skip "binfmt_misc has no qemu-aarch64 entry and not root"
  [ -e "$binfmt/register" ] || $sudo mount -t binfmt_misc binfmt_misc "$binfmt" 2>/dev/null ||
    skip "cannot mount binfmt_misc"
  magic='\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
  mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
  echo ":qemu-aarch64:M::$magic:$mask:$(command -v qemu-aarch64):F" | $sudo tee "$binfmt/register" >/dev/null ||
    skip "cannot register qemu-aarch64 with binfmt_misc"
fi

echo "== arm64 build (cross) and tests (qemu-user)"
# RelWithDebInfo (-O2): Debian 12's aarch64 GCC 12 stops with an internal
# compiler error vectorizing two of the tests at -O3.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_SYSTEM_NAME=Linux \
  -DCMAKE_SYSTEM_PROCESSOR=aarch64 -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc \
  -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ -DCJSON_INCLUDE_DIR=/usr/include \
  -DCJSON_LIBRARY=/usr/lib/aarch64-linux-gnu/libcjson.so >/dev/null || exit 1
cmake --build "$build" -j"$jobs" || exit 1
# The arm64 programs load the multiarch runtimes under / (one glibc for all of
# them: the cross toolchain's own older copy beside it hangs them). The
# `_scalar` and `_fast` reruns of the golden tests repeat x86 questions.
export QEMU_LD_PREFIX=/ QEMU_CPU=max
(cd "$build" && ctest --output-on-failure -j"$jobs" -E '_scalar$|_fast$') || exit 1

# The build above targets every arm64 CPU (no sdot); a build for ARMv8.2 with
# the dot-product extension checks the sdot variants against the scalar ones.
echo "== arm64 with the dot-product extension: SIMD kernels"
cmake -S . -B "$build-dotprod" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_SYSTEM_NAME=Linux \
  -DCMAKE_SYSTEM_PROCESSOR=aarch64 -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc \
  -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ -DCJSON_INCLUDE_DIR=/usr/include \
  -DCJSON_LIBRARY=/usr/lib/aarch64-linux-gnu/libcjson.so -DCMAKE_C_FLAGS=-march=armv8.2-a+dotprod >/dev/null || exit 1
cmake --build "$build-dotprod" -j"$jobs" --target test_simd_kernels test_eval_stories || exit 1
(cd "$build-dotprod" && ctest --output-on-failure -R '^test_(simd_kernels|eval_stories)$')
