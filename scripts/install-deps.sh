#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs redlease's build and test dependencies from Debian's packages. Idempotent: installs only
# what is missing, and does not touch the network when everything is present.
set -euo pipefail
pkgs=(g++ cmake make pkg-config libasio-dev libhiredis-dev libssl-dev libgtest-dev libgmock-dev
      libbenchmark-dev libcli11-dev prometheus-cpp-dev redis-server redis-tools openssl
      clang libclang-rt-14-dev  # clang: the libFuzzer targets
      dpkg-dev file groff-base  # the Debian packages (cpack: dpkg-shlibdeps, file) and their test (groff)
      tmux)  # a real terminal for the tests of `redlease top`
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-deps: run as root to install ${missing[*]} (no sudo on this machine)" >&2
    exit 1
  fi
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The package starts a system-wide redis-server on 6379; redlease's tests and demo start their own.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet redis-server 2>/dev/null; then
  $SUDO systemctl stop redis-server || true
fi
