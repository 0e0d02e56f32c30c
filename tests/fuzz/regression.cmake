# SPDX-License-Identifier: MIT
# One fuzz target's CTest step, deterministic: (1) replay every input of the repository's corpus,
# (2) RUNS iterations with the fixed SEED, starting from that corpus. Both with explicit memory limits;
# new inputs and crash artifacts go to WORK, never into the repository.
# Script mode: -DFUZZER= -DCORPUS= -DWORK= -DRUNS= -DSEED= -DMAX_LEN= -DRSS_LIMIT_MB= -DMALLOC_LIMIT_MB=
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts)
set(common -rss_limit_mb=${RSS_LIMIT_MB} -malloc_limit_mb=${MALLOC_LIMIT_MB} -timeout=10
           -artifact_prefix=${WORK}/artifacts/)

file(GLOB inputs LIST_DIRECTORIES false ${CORPUS}/*)
list(SORT inputs)
list(LENGTH inputs n)
message(STATUS "replaying ${n} inputs of ${CORPUS}")
# Files given one by one are each run once, whole (no -max_len cut): a crasher added to the corpus
# stays a failing test until it is fixed.
execute_process(COMMAND ${FUZZER} ${common} ${inputs} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "corpus replay failed (${rc}); artifacts in ${WORK}/artifacts")
endif()

# A fixed seed alone does not make a run repeatable: with address-space randomisation the compared
# values libFuzzer collects (pointers among them) differ from run to run, and so do the mutations.
# setarch -R (util-linux) runs the fuzzer without it. Nor does libFuzzer's default -reload=1, which
# reads the corpus directories again every second: whether a reload falls within a run of a second or
# two depends on the machine's speed (fuzz_sentinel's coverage varied 665-681 between runs of one
# binary, and one CI run met an input the others never reached). -reload=0: the same binary makes
# the same run.
find_program(SETARCH setarch)
set(no_aslr)
if(SETARCH)
  execute_process(COMMAND ${SETARCH} -R true RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    set(no_aslr ${SETARCH} -R)
  endif()
endif()
if(NOT no_aslr)
  message(STATUS "setarch -R is not available: the seeded run may vary between runs")
endif()
message(STATUS "${RUNS} runs, -seed=${SEED}")
# New inputs go to the first directory (scratch, emptied above); the corpus is only read.
execute_process(COMMAND ${no_aslr} ${FUZZER} ${common} -seed=${SEED} -runs=${RUNS} -max_len=${MAX_LEN} -reload=0
                        ${WORK}/corpus ${CORPUS}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzing with -seed=${SEED} failed (${rc}); the input is in ${WORK}/artifacts: "
                      "fix the bug, then add the input to ${CORPUS}")
endif()
