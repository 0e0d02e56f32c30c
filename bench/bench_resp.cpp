// SPDX-License-Identifier: MIT
// Micro benchmarks without a server: RESP encoding and decoding.
#include <benchmark/benchmark.h>

#include "net/resp.hpp"

static void encode_evalsha(benchmark::State& state) {
  std::string out;
  for (auto _ : state) {
    out.clear();
    redlease::detail::encode_command(out, {"EVALSHA", "0123456789012345678901234567890123456789", "1", "orders:42",
                                           "30000", "2b1f7c1e-1c9e-4a44-9d55-0e8f3c2f3d10:17"});
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(encode_evalsha);

static void decode_integer_replies(benchmark::State& state) {
  redlease::detail::resp_reader r;
  redlease::reply out;
  const char chunk[] = ":29999\r\n$-1\r\n";
  for (auto _ : state) {
    r.feed(chunk, sizeof chunk - 1);
    while (r.next(out) == redlease::detail::resp_reader::status::reply) benchmark::DoNotOptimize(out.integer);
  }
}
BENCHMARK(decode_integer_replies);

BENCHMARK_MAIN();
