#!/usr/bin/env bash
# One entry point for people and CI:
#   tools/dev.sh bench   install packages, build, run the all-reduce benchmark on 4 local processes
#   tools/dev.sh test    install packages, build, run every test (plus ASan/UBSan and TSan builds)
#   tools/dev.sh build   install packages and build (Release-with-debug-info, in build/)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}

setup() { bash tools/setup-debian.sh; }

# ccache (when installed: setup does), keyed on paths relative to the checkout, so another clone of
# the same sources (CI's clean clone) reuses what an earlier build compiled.
use_ccache() {  # sets launchers=(cmake arguments)
  launchers=()
  if command -v ccache >/dev/null; then
    export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
    launchers=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
      -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
}

configure_build() {  # dir, extra cmake args...
  local dir=$1
  shift
  use_ccache
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRIB_WERROR=ON "${launchers[@]}" "$@" >/dev/null
  ninja -C "$dir" -j"$JOBS"
}

# Free disk on the checkout's file system, in MiB.
free_mib() { df -Pm . | awk 'NR == 2 {print $4}'; }

# A build of the suite takes 1-2 GiB. On a nearly full disk (CI machines have been seen with a few
# hundred MiB free), drop a finished sanitizer build before the next one starts; ccache keeps its
# objects, so the next `dev.sh test` rebuilds it quickly.
make_room() {  # finished build dir
  local need_mib=6144
  echo "disk: $(free_mib) MiB free after $1"
  if [ "$(free_mib)" -lt "$need_mib" ]; then
    echo "disk: under $need_mib MiB free: removing $1 (its tests have run)"
    rm -rf "$1"
  fi
}

# CTest lists skipped tests by name; say why each one skipped (GoogleTest's GTEST_SKIP message).
report_skips() {  # build dir
  awk '/^[0-9]+\/[0-9]+ Testing: /{name=$3} /: Skipped$/{getline why; print "skipped: " name ": " why}' \
    "$1/Testing/Temporary/LastTest.log"
}

# Runs a build's tests: the single-threaded computations (label compute: nothing in them is timed
# and they share nothing) JOBS at a time, then everything else one at a time, since the
# multi-process tests expect the cores to themselves.
run_tests() {  # build dir, [labels to leave out, a regex]
  local dir=$1 skip=${2:-}
  local leave_out=()
  [ -z "$skip" ] || leave_out=(-LE "$skip")
  (cd "$dir" && ctest --output-on-failure -j"$JOBS" --timeout 900 -L compute "${leave_out[@]}")
  report_skips "$dir"
  (cd "$dir" && ctest --output-on-failure -j1 --timeout 900 -LE "compute${skip:+|$skip}")
  report_skips "$dir"
}

case "${1:-}" in
  build)
    setup
    configure_build build
    ;;
  bench)
    setup
    configure_build build
    shift
    # The main job: all-reduce bus bandwidth over 4 local processes (shared memory), 8 B .. 64 MiB,
    # every result checked.
    ./build/bench/trib-perf --ranks 4 -b 8 -e 64M -f 4 "$@"
    ;;
  test)
    setup
    echo "disk: $(free_mib) MiB free before the builds"
    configure_build build
    run_tests build
    # Sanitizers: the whole suite under ASan+UBSan; the concurrency-heavy tests under TSan. Both
    # without CUDA: the normal build above compiles and tests it, and nvcc would double their time.
    # ASan's build is Debug (assertions on) at -O1, as ASan's authors advise: -O0 made its run
    # about 3x slower (test_verify_sync's DataLess cases: 50 s of CPU at -O0, 17 s at -O1).
    configure_build build-asan -DTRIB_SANITIZE=address,undefined -DTRIB_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug -DTRIB_DEBUG_INFO=lines \
      -DTRIB_WITH_CUDA=OFF "-DCMAKE_C_FLAGS_DEBUG=-O1 -g" "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g"
    # intercept_tls_get_addr=0 for every sanitizer run below: these runtimes (GCC 12's, clang 14's for
    # the fuzzers) take a dynamic TLS block that malloc happened to place 16 bytes past a page
    # boundary for glibc 2.19's header and record the two words before it as the block's range
    # (google/sanitizers#1322); LeakSanitizer's tracer then faults scanning it at exit ("Tracer
    # caught signal 11") after every test passed, and TSan resets the shadow of that range. Here the
    # block is a 16-byte malloc (1 in 128 of its places). Off, ASan does not scan dynamic TLS for
    # roots and TSan leaves the block's shadow to its malloc.
    export ASAN_OPTIONS=intercept_tls_get_addr=0 TSAN_OPTIONS=intercept_tls_get_addr=0
    LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp run_tests build-asan nosan
    make_room build-asan
    configure_build build-tsan -DTRIB_SANITIZE=thread -DTRIB_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug -DTRIB_DEBUG_INFO=lines -DTRIB_WITH_CUDA=OFF
    # UCX's libucm hooks madvise(), which crashes TSan's runtime at thread exit: turn its memory
    # hooks off for this run (Tributary does not rely on them).
    (cd build-tsan && UCX_MEM_MMAP_HOOK_MODE=none ctest --output-on-failure -j1 --timeout 900 -L tsan)
    report_skips build-tsan
    make_room build-tsan
    # Fuzzing (docs/FUZZING.md): the libFuzzer targets alone (and the sources they read), built by
    # clang with ASan+UBSan, each run TRIB_FUZZ_SECONDS (20) on a copy of its seed corpus.
    fuzz_start=$SECONDS
    use_ccache
    cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRIB_WERROR=ON -DTRIB_FUZZ=ON -DTRIB_DEBUG_INFO=lines \
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DTRIB_BUILD_TESTS=OFF -DTRIB_BUILD_BENCH=OFF \
      -DTRIB_WITH_CUDA=OFF -DTRIB_WITH_TORCH=OFF "${launchers[@]}" >/dev/null
    ninja -C build-fuzz -j"$JOBS" trib_fuzz
    (cd build-fuzz && ctest --output-on-failure -j"$JOBS" -L fuzz)
    echo "fuzz: build and runs took $((SECONDS - fuzz_start)) s"
    ;;
  *)
    echo "usage: tools/dev.sh bench|test|build" >&2
    exit 2
    ;;
esac
