# TRIB_FUZZ: every library source is built with libFuzzer's coverage counters plus ASan and UBSan,
# so the fuzz targets of tests/fuzz see (and check) the real parsers. clang only: gcc has no libFuzzer.
if(NOT TRIB_FUZZ)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "TRIB_FUZZ=ON needs clang (-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang), "
                      "not ${CMAKE_CXX_COMPILER_ID}")
endif()
if(TRIB_SANITIZE)
  message(FATAL_ERROR "TRIB_FUZZ=ON brings its own sanitizers (address,undefined): leave TRIB_SANITIZE empty")
endif()
# clang 14's -fsanitize=function cannot emit its prologue data for inline functions of this code
# ("Cannot represent a difference across sections"): the rest of UBSan stays.
add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link,address,undefined;-fno-sanitize=function>"
  "$<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer;-fno-sanitize-recover=all>")
add_link_options(-fsanitize=address,undefined -fno-sanitize=function)
