#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the dependencies, builds redlease, and runs every test: in a normal build, again under
# AddressSanitizer + UndefinedBehaviorSanitizer, again under ThreadSanitizer, and the libFuzzer
# targets for a few thousand iterations each.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)
root=$PWD
section() { printf '\n=== %s ===\n' "$*"; }

section "build and test (RelWithDebInfo)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs" --timeout 300)

section "build and test under ASan + UBSan"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DREDLEASE_SANITIZE=address,undefined \
  -DREDLEASE_BUILD_BENCH=OFF -DREDLEASE_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j"$jobs" --timeout 300)

section "build and test under TSan"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DREDLEASE_SANITIZE=thread \
  -DREDLEASE_BUILD_BENCH=OFF -DREDLEASE_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-tsan -j"$jobs"
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/tests/tsan.supp" \
  ctest --output-on-failure -j"$jobs" --timeout 300)

section "fuzz targets (libFuzzer, clang)"
cmake -S tests/fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz -j"$jobs"
(cd build-fuzz && ctest --output-on-failure --timeout 300)
