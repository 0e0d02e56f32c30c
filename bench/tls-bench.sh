#!/bin/sh
# SPDX-License-Identifier: MIT
# redlease-bench over TLS against a private redis-server: makes a CA and a server certificate
# (localhost, 127.0.0.1) in a temporary directory, starts redis-server on two free loopback ports,
# one TLS (no client certificate asked) and one plaintext, and runs the bench against
# rediss://127.0.0.1:TLS_PORT (the CA given with --cacert), then, unless TLS_ONLY=1, against the
# plaintext port of the same server: ROUNDS times (default 1), alternately. The server is stopped
# and the directory removed at the end. BENCHMARKS.md, "TLS", has the figures.
#
#   bench/tls-bench.sh [redlease-bench options, e.g. --only B1,B2-async --json]
#   BENCH=build/bench/redlease-bench ROUNDS=3 OUT=/tmp/tls-runs bench/tls-bench.sh --json
#
# With OUT set, each run's output goes to OUT/tls-N.out and OUT/plain-N.out instead of stdout.
set -eu
bench=${BENCH:-build/bench/redlease-bench}
rounds=${ROUNDS:-1}
[ -x "$bench" ] || { echo "tls-bench.sh: $bench not found (build redlease-bench, or set BENCH)" >&2; exit 69; }
command -v redis-server >/dev/null || { echo "tls-bench.sh: redis-server not on PATH" >&2; exit 69; }
command -v openssl >/dev/null || { echo "tls-bench.sh: openssl not on PATH" >&2; exit 69; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/redlease-tls-bench.XXXXXX")
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

# The tests' recipe (tests/support/test_certs.cpp): EC P-256 keys, a CA, a leaf it signs.
(
  cd "$dir"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
  openssl req -x509 -new -key ca.key -sha256 -days 2 -subj /CN=redlease-bench-ca -out ca.crt
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out server.key 2>/dev/null
  openssl req -new -key server.key -subj /CN=localhost -out server.csr
  printf '%s\n' 'subjectAltName=DNS:localhost,IP:127.0.0.1' > server.ext
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -sha256 \
    -extfile server.ext -out server.crt 2>/dev/null
)

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
tls_port=$(free_port)
plain_port=$(free_port)
redis-server --bind 127.0.0.1 --port "$plain_port" --tls-port "$tls_port" \
  --tls-cert-file "$dir/server.crt" --tls-key-file "$dir/server.key" --tls-ca-cert-file "$dir/ca.crt" \
  --tls-auth-clients no --save '' --appendonly no --dir "$dir" --logfile "$dir/redis.log" &
pid=$!
i=0
until redis-cli -p "$plain_port" ping >/dev/null 2>&1; do
  i=$((i + 1))
  [ $i -lt 100 ] || { echo "tls-bench.sh: redis-server did not start:" >&2; tail -5 "$dir/redis.log" >&2; exit 69; }
  sleep 0.05
done
echo "tls-bench.sh: redis-server pid $pid, TLS port $tls_port, plaintext port $plain_port" >&2

run() {  # name n url [tls flags]
  name=$1 n=$2 url=$3
  shift 3
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    "$bench" --redis "$url" "$@" > "$OUT/$name-$n.out"
  else
    "$bench" --redis "$url" "$@"
  fi
}
n=1
while [ $n -le "$rounds" ]; do
  run tls $n "rediss://127.0.0.1:$tls_port" --cacert "$dir/ca.crt" "$@"
  [ "${TLS_ONLY:-0}" = 1 ] || run plain $n "redis://127.0.0.1:$plain_port" "$@"
  n=$((n + 1))
done
