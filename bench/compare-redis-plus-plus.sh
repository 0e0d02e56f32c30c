#!/usr/bin/env bash
# Compare redlease with redis-plus-plus, a blocking C++ client that does its I/O on the calling
# thread, on the B1 and B2-sync workloads of redlease-bench.
#
#   bench/compare-redis-plus-plus.sh [--redlease PATH] [--rounds N] [--seconds S] [RPP_SRC]
#
# RPP_SRC (or $REDIS_PLUS_PLUS_SRC): a redis-plus-plus source tree. This script downloads nothing;
# get one yourself, e.g.
#   git clone https://github.com/sewenew/redis-plus-plus /tmp/redis-plus-plus
# It needs cmake, a C++20 compiler, hiredis' headers and library (Debian: libhiredis-dev) and
# redis-server / redis-cli on PATH.
#
# --redlease PATH  the redlease-bench program to compare (default build/bench/redlease-bench), e.g.
#                  from cmake -S . -B /tmp/rl-build -DCMAKE_BUILD_TYPE=Release \
#                        -DREDLEASE_BUILD_TESTS=OFF -DREDLEASE_BUILD_EXAMPLES=OFF
#                  cmake --build /tmp/rl-build --target redlease-bench
# --rounds N       interleaved rounds (default 3; the order of the two libraries alternates)
# --seconds S      measuring time per case (default 3; 0.3 s warm-up before each case)
#
# What it does, all in a scratch directory that is removed at the end: builds redis-plus-plus
# (static, -O2, no TLS, no tests) and bench/compare_redis_plus_plus.cpp against it, starts a
# private redis-server on a free loopback port (127.0.0.1 only, no persistence), then per round
# runs `redlease-bench --redis redis://127.0.0.1:N --only B1,B2-sync --json` and the same two
# workloads on redis-plus-plus (RedMutex and RedLock<RedLockMutex>, one master; B2: 16 threads, a
# 16-connection pool; RedMutex also with one LockWatcher shared by the 16 mutexes). It never
# touches the project's build.
#
# Output: stdout gets one JSON object per line per case (redlease's rows, ceiling rows included,
# and the rpp-* rows), each with a "round" field; stderr gets the build log's tail on failure and,
# at the end, a table of the medians over the rounds.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
redlease="$repo/build/bench/redlease-bench"
rounds=3
seconds=3
src="${REDIS_PLUS_PLUS_SRC:-}"

while [ $# -gt 0 ]; do
  case "$1" in
    --redlease) redlease=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option: $1" >&2; exit 2 ;;
    *) src=$1; shift ;;
  esac
done

die() { echo "compare-redis-plus-plus: $*" >&2; exit 1; }
[ -n "$src" ] || die "give the redis-plus-plus source directory (argument or \$REDIS_PLUS_PLUS_SRC)"
[ -f "$src/src/sw/redis++/patterns/redlock.h" ] || die "$src: no src/sw/redis++/patterns/redlock.h (not a redis-plus-plus tree?)"
[ -x "$redlease" ] || die "$redlease: not an executable (build redlease-bench, or pass --redlease PATH)"
[[ "$rounds" =~ ^[0-9]+$ ]] && [ "$rounds" -ge 1 ] && [ "$rounds" -le 20 ] || die "--rounds: 1..20"
command -v redis-server >/dev/null || die "redis-server not on PATH"
command -v redis-cli >/dev/null || die "redis-cli not on PATH"
command -v cmake >/dev/null || die "cmake not on PATH"
src=$(cd "$src" && pwd)
redlease=$(cd "$(dirname "$redlease")" && pwd)/$(basename "$redlease")

work=$(mktemp -d "${TMPDIR:-/tmp}/rpp-compare.XXXXXX")
redis_pid=""
cleanup() {
  if [ -n "$redis_pid" ] && kill -0 "$redis_pid" 2>/dev/null; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- build redis-plus-plus and the benchmark -----------------------------------------------------
cxx=${CXX:-c++}
jobs=$(nproc 2>/dev/null || echo 2)
version=$(sed -n 's/^const int VERSION_\(MAJOR\|MINOR\|PATCH\) = \([0-9]*\);$/\2/p' "$src/src/sw/redis++/version.h" | paste -sd. -)
commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
echo "compare-redis-plus-plus: building redis-plus-plus $version ($commit) in $work" >&2
if ! { cmake -S "$src" -B "$work/rpp-build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
         -DREDIS_PLUS_PLUS_BUILD_STATIC=ON -DREDIS_PLUS_PLUS_BUILD_SHARED=OFF -DREDIS_PLUS_PLUS_BUILD_TEST=OFF \
         -DREDIS_PLUS_PLUS_USE_TLS=OFF -DREDIS_PLUS_PLUS_CXX_STANDARD=17 -DCMAKE_INSTALL_PREFIX="$work/rpp" &&
       cmake --build "$work/rpp-build" -j "$jobs" && cmake --install "$work/rpp-build"; } >"$work/build.log" 2>&1; then
  tail -30 "$work/build.log" >&2
  die "building redis-plus-plus failed"
fi
rpp_lib=$(find "$work/rpp" -name 'libredis++.a' | head -1)
[ -n "$rpp_lib" ] || die "no libredis++.a after the install"
if ! "$cxx" -std=c++20 -O2 -DNDEBUG -I"$work/rpp/include" "$here/compare_redis_plus_plus.cpp" "$rpp_lib" \
       -lhiredis -pthread -o "$work/compare_redis_plus_plus" >"$work/build.log" 2>&1; then
  tail -30 "$work/build.log" >&2
  die "building bench/compare_redis_plus_plus.cpp failed"
fi

# ---- a private redis-server on a free loopback port ------------------------------------------------
port=""
for _ in $(seq 1 20); do
  p=$((20000 + RANDOM % 30000))
  if redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1; then continue; fi  # something answers there
  redis-server --bind 127.0.0.1 --port "$p" --save '' --appendonly no --dir "$work" \
    --logfile "$work/redis.log" --daemonize no &
  redis_pid=$!
  for _ in $(seq 1 50); do
    if ! kill -0 "$redis_pid" 2>/dev/null; then break; fi
    if [ "$(redis-cli -h 127.0.0.1 -p "$p" ping 2>/dev/null)" = PONG ]; then port=$p; break; fi
    sleep 0.1
  done
  [ -n "$port" ] && break
  kill "$redis_pid" 2>/dev/null || true
  wait "$redis_pid" 2>/dev/null || true
  redis_pid=""
done
[ -n "$port" ] || die "could not start redis-server on a loopback port"
echo "compare-redis-plus-plus: redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on 127.0.0.1:$port" \
     "(pid $redis_pid); $rounds rounds, $seconds s per case" >&2

# ---- interleaved rounds ------------------------------------------------------------------------------
out="$work/results.jsonl"
: >"$out"
tag() { sed "s/}\$/,\"round\":$1}/"; }
run_redlease() {
  "$redlease" --redis "redis://127.0.0.1:$port" --only B1,B2-sync --json --seconds "$seconds" | tag "$1"
}
run_rpp() {
  "$work/compare_redis_plus_plus" --host 127.0.0.1 --port "$port" --seconds "$seconds" --warmup 0.3 \
    --threads 16 --pool 16 --only rpp-B1-redmutex,rpp-B1-redlock,rpp-B2-redmutex,rpp-B2-redmutex-shared-watcher,rpp-B2-redlock |
    sed "s/}\$/,\"version\":\"$version\",\"commit\":\"$commit\"}/" | tag "$1"
}
for r in $(seq 1 "$rounds"); do
  echo "compare-redis-plus-plus: round $r/$rounds" >&2
  if [ $((r % 2)) -eq 1 ]; then
    run_redlease "$r" | tee -a "$out"
    run_rpp "$r" | tee -a "$out"
  else
    run_rpp "$r" | tee -a "$out"
    run_redlease "$r" | tee -a "$out"
  fi
  redis-cli -h 127.0.0.1 -p "$port" flushall >/dev/null  # leftovers of a failed case, if any
done

# ---- medians ------------------------------------------------------------------------------------------
if command -v python3 >/dev/null; then
  python3 - "$out" >&2 <<'EOF'
import json, sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith('{'):
        continue
    d = json.loads(line)
    rows.setdefault(d['case'], []).append(d)
cases = ['B1', 'rpp-B1-redmutex', 'rpp-B1-redlock', 'B2-sync-reentrant', 'B2-sync-mutex',
         'rpp-B2-redmutex', 'rpp-B2-redmutex-shared-watcher', 'rpp-B2-redlock']
print(f"\nmedians over {max((len(v) for v in rows.values()), default=0)} rounds")
print(f"{'case':31}{'pairs/s':>10}{'client us/pair':>16}{'ctx sw/pair':>13}{'p50 us':>9}{'p99 us':>9}")
for c in cases:
    rs = [r for r in rows.get(c, []) if 'error' not in r]
    if not rs:
        print(f"{c:31}  (no rows{': ' + rows[c][0]['error'] if c in rows else ''})")
        continue
    m = lambda k: st.median(r[k] for r in rs)
    rng = f"[{min(r['ops_per_s'] for r in rs):,.0f}..{max(r['ops_per_s'] for r in rs):,.0f}]"
    print(f"{c:31}{m('ops_per_s'):>10,.0f}{m('client_cpu_us_per_op'):>16.1f}"
          f"{m('context_switches_per_op'):>13.2f}{m('p50_us'):>9.0f}{m('p99_us'):>9.0f}  {rng}")
EOF
fi
