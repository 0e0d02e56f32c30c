#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Open-ended fuzzing: each libFuzzer target for SECONDS seconds (default 60) with a random seed,
# starting from the repository's corpus (tests/fuzz/corpus/<target>/, only read) and from what earlier
# runs found (build-fuzz/corpus-work/<target>/, kept between runs). A crash, leak, timeout or
# out-of-memory input is written to build-fuzz/crashes/<target>/; once the bug is fixed, add the input
# to tests/fuzz/corpus/<target>/ so that the CI step replays it. See docs/reliability.md, "Fuzzing".
#   bash scripts/fuzz.sh [SECONDS]            every target
#   FUZZ_TARGETS="reply" bash scripts/fuzz.sh 3600
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS]  (per target, default 60)" >&2
  exit 64
fi
targets=(${FUZZ_TARGETS:-url duration reply info sentinel cluster})
bash scripts/install-deps.sh
if [[ ! -f build-fuzz/CMakeCache.txt ]]; then
  cmake -S tests/fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ >/dev/null
fi
cmake --build build-fuzz -j"$(nproc)"

failed=()
for t in "${targets[@]}"; do
  work=build-fuzz/corpus-work/$t
  crashes=build-fuzz/crashes/$t
  mkdir -p "$work" "$crashes"
  printf '\n=== fuzz_%s: %s s, random seed ===\n' "$t" "$seconds"
  # The same limits as the CI step (tests/fuzz/CMakeLists.txt); no -seed: libFuzzer picks one and
  # prints it ("Seed: N"), so a run can be repeated with -seed=N.
  if ! build-fuzz/fuzz_"$t" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=512 \
      -malloc_limit_mb=256 -timeout=10 -print_final_stats=1 -artifact_prefix="$crashes/" \
      "$work" "tests/fuzz/corpus/$t"; then
    failed+=("$t")
  fi
done

if ((${#failed[@]} != 0)); then
  printf '\nfuzz.sh: failures in: %s\n' "${failed[*]}" >&2
  printf 'inputs: build-fuzz/crashes/<target>/ - fix, then add each to tests/fuzz/corpus/<target>/\n' >&2
  exit 1
fi
printf '\nfuzz.sh: no failures; new inputs kept in build-fuzz/corpus-work/\n'
