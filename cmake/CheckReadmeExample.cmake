# Fails if the README's C example and tests/examples/readme_allreduce.c (which CI compiles and
# runs) have drifted apart.
file(READ ${README} readme)
file(READ ${EXAMPLE} example)
string(REGEX REPLACE "^/\\*[^\n]*\\*/\n" "" example "${example}")
string(FIND "${readme}" "${example}" pos)
if(pos EQUAL -1)
  message(FATAL_ERROR "README.md's C example differs from ${EXAMPLE}: update both together")
endif()
