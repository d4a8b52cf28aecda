#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need, when some are
# missing and we may (root, or passwordless sudo). Safe to run repeatedly.
#   scripts/install-deps.sh          everything `make test` uses
#   scripts/install-deps.sh build    only what building libllama and llamac needs
set -u
packages=(gcc g++ make cmake libcjson-dev)
[ "${1:-}" = build ] || packages+=(clang libclang-rt-14-dev ruby ruby-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then sudo=""; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; else
  echo "cannot install (${missing[*]}): not root and no passwordless sudo" >&2; exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
