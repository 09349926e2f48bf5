# One CTest run of a fuzz target: copy its seeds into the build dir, fuzz for SECONDS from SEED, fail on any
# crash, leak or sanitizer report (libFuzzer exits non-zero and leaves the input under WORK/).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts)
if(EXISTS ${SEEDS})
  file(COPY ${SEEDS}/ DESTINATION ${WORK}/corpus)
endif()
execute_process(COMMAND ${FUZZER} -max_total_time=${SECONDS} -seed=${SEED} -print_final_stats=1
  -artifact_prefix=${WORK}/artifacts/ ${WORK}/corpus RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${rc}): the input that broke it is in ${WORK}/artifacts/")
endif()
