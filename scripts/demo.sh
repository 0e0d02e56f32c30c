#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the dependencies, builds redlease, and runs the demo against a private redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREDLEASE_WITH_PROMETHEUS=ON >/dev/null
cmake --build build -j"$(nproc)" --target redlease-cli
exec build/tools/redlease demo "$@"
