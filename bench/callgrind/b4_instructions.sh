#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# B4-1k's client cost in instructions, which a loaded or virtual machine does not change (wall-clock
# CPU of 0.1 % of a core does): builds b4_drive.cpp against a redlease build tree, holds 1,000 locks
# under the watchdog (3 s lease, renewed every second) on a private redis-server, and counts with
# callgrind the instructions the whole process executes in 10 s of holding (about 10,000 renewals).
# Usage: bench/callgrind/b4_instructions.sh <source dir> <build dir> [runs]   (needs valgrind)
set -euo pipefail
src=$1 build=$2 runs=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'kill "$rpid" 2>/dev/null || true; rm -rf "$work"' EXIT
g++ -std=c++20 -O2 -I"$src/include" -I"$build/include" -I"$build/generated" "$here/b4_drive.cpp" \
  "$build/libredlease.a" -lssl -lcrypto -pthread -o "$work/drive"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$work/redis.log" 2>&1 &
rpid=$!
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
for ((k = 0; k < runs; k++)); do
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/cg.%p" \
    "$work/drive" "redis://127.0.0.1:$port" 1000 16 >"$work/pid" 2>"$work/err" &
  vpid=$!
  until [[ -s $work/pid ]]; do sleep 0.1; done
  sleep 1
  callgrind_control -i on "$(head -1 "$work/pid")" >/dev/null 2>&1
  sleep 10
  callgrind_control -i off "$(head -1 "$work/pid")" >/dev/null 2>&1
  wait "$vpid"
  grep -o 'Collected : [0-9]*' "$work/err" | awk '{print $3}'
  : >"$work/pid"
  redis-cli -p "$port" flushall >/dev/null
done
