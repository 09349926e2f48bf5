#!/usr/bin/env bash
# On a machine with a GPU: configures a CUDA build (warnings as errors), builds what the GPU tests
# need, runs them (the CUDA engine against the CPU reducer, device-memory classification, the
# library's contents, stream-ordered collectives on device memory and their CPU counterpart), then
# compute-sanitizer memcheck over the engine and stream tests, then short trib-perf sweeps on device
# buffers (their tables: LOG_DIR/trib-perf-*.txt and .json), and writes every log
# to the folder given as the argument. Bounded to 7.5 minutes in all (each step gets what is left).
# Offline: nothing is downloaded; GoogleTest must be installed or its sources found (below).
#
#   tests/gpu/run-on-device.sh LOG_DIR
#
# It fails (exit 1, and says why in LOG_DIR/summary.txt) when anything is missing or any test
# fails or skips: on a GPU a skipped device test is a failure, never a pass.
set -uo pipefail

[ $# -eq 1 ] || { echo "usage: $0 LOG_DIR" >&2; exit 2; }
mkdir -p "$1" || exit 1
out=$(cd "$1" && pwd)
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${TRIB_GPU_BUILD_DIR:-$root/build-gpu}
summary=$out/summary.txt
deadline=$((SECONDS + 440))  # the whole run stays under 7.5 minutes
# Seconds a step may take: its own limit, or what is left of the run.
limit() {
  local left=$((deadline - SECONDS))
  [ "$left" -gt 5 ] || left=5
  [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}
: >"$summary"
failed=0
say() { echo "$*" | tee -a "$summary"; }
fail() {
  say "FAILED: $*"
  failed=1
}
die() {
  say "FAILED: $*"
  exit 1
}

say "run-on-device $(date -u +%FT%TZ) on $(hostname), tree $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

# ---- what the machine must have ----
export PATH=$PATH:/usr/local/cuda/bin
for tool in cmake ninja nvcc timeout; do
  command -v "$tool" >/dev/null || die "$tool not found (PATH=$PATH)"
done
# What the driver sees, for the log (a missing GPU also shows as skipped device tests: a failure).
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L >"$out/gpus.txt" 2>&1 || die "nvidia-smi sees no GPU: $(cat "$out/gpus.txt")"
  say "GPUs: $(tr '\n' ';' <"$out/gpus.txt")"
else
  say "nvidia-smi not found: relying on the tests to find the device"
fi
nvcc --version >"$out/nvcc.txt" 2>&1
say "nvcc: $(grep -o 'release [0-9.]*' "$out/nvcc.txt")"

# GoogleTest: installed (find_package finds it), else sources: TRIB_GTEST_SOURCE_DIR, a copy in the
# tree (shared/googletest, third_party/googletest), or Debian's googletest package (/usr/src).
gtest_args=()
installed=""
for config in /usr/lib/*/cmake/GTest/GTestConfig.cmake /usr/lib/cmake/GTest/GTestConfig.cmake \
  /usr/local/lib/cmake/GTest/GTestConfig.cmake /usr/local/lib64/cmake/GTest/GTestConfig.cmake; do
  [ -f "$config" ] && installed=$config
done
if [ -n "$installed" ] && [ -z "${TRIB_GTEST_SOURCE_DIR:-}" ]; then
  say "GoogleTest installed: $installed"
else
  src=""
  for d in "${TRIB_GTEST_SOURCE_DIR:-}" shared/googletest third_party/googletest .device/googletest \
    /usr/src/googletest; do
    if [ -n "$d" ] && [ -f "$d/CMakeLists.txt" ]; then
      src=$(cd "$d" && pwd)
      break
    fi
  done
  [ -n "$src" ] || die "GoogleTest is neither installed nor found as sources (set TRIB_GTEST_SOURCE_DIR, or put \
googletest's sources in shared/googletest): this machine has no package registry"
  gtest_args=(-DTRIB_GTEST_SOURCE_DIR="$src")
  say "GoogleTest from sources: $src"
fi

# OpenSSL (libcrypto: the rendezvous's authentication): installed, else a copy carried in
# .device/openssl (include/openssl, lib/libcrypto.so*), as the device machines have no headers.
ssl_args=()
if [ ! -f /usr/include/openssl/evp.h ] && [ -f .device/openssl/include/openssl/evp.h ]; then
  ssl_args=(-DOPENSSL_ROOT_DIR="$root/.device/openssl")
  say "OpenSSL from $root/.device/openssl"
fi
# The project's CUDA architectures (test_library_contents checks them), unless told otherwise.
arch_args=()
[ -n "${TRIB_CUDA_ARCHITECTURES:-}" ] && arch_args=(-DCMAKE_CUDA_ARCHITECTURES="$TRIB_CUDA_ARCHITECTURES")

# ---- configure and build (of bench/, trib-perf only) ----
jobs=$(nproc)
timeout "$(limit 60)" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRIB_WERROR=ON \
  -DTRIB_WITH_CUDA=ON -DTRIB_BUILD_BENCH=ON "${gtest_args[@]}" "${ssl_args[@]}" "${arch_args[@]}" \
  >"$out/configure.log" 2>&1 ||
  die "configure failed: see configure.log ($(tail -3 "$out/configure.log" | tr '\n' ' '))"
tests=(test_cuda_engine test_cuda_stream test_stream_progress test_element_ops test_library_contents test_reduce
  test_nvlink test_nvlink_gpu)
timeout "$(limit 240)" ninja -C "$build" -j"$jobs" tributary trib-perf "${tests[@]}" >"$out/build.log" 2>&1 ||
  die "build failed: see build.log ($(grep -m3 -E 'error|FAILED' "$out/build.log" | tr '\n' ' '))"
say "built in $build"

# ---- the tests: every one must pass, none may skip (CudaEngine.WithoutADeviceSaysSoClearly is
# the no-device check, the one test that has nothing to do on a GPU) ----
# run_test NAME BINARY FILTER: runs one test binary under a filter; NAME names its logs.
run_test() {
  local name=$1 t=$2 filter=$3
  if timeout "$(limit 90)" "$build/tests/$t" --gtest_filter="$filter" --gtest_output="xml:$out/$name.xml" \
    >"$out/$name.log" 2>&1; then
    if grep -q '^\[  SKIPPED \]' "$out/$name.log"; then
      fail "$name: skipped on a GPU machine: $(grep -A1 'Skipped$' "$out/$name.log" | tail -1)"
    else
      say "passed: $name ($(grep -m1 -o '[0-9]* tests\? from [0-9]* test suites\? ran' "$out/$name.log"))"
    fi
  else
    fail "$name (exit $?): see $name.log ($(grep -m3 -E 'Failure|FAILED' "$out/$name.log" | tr '\n' ' '))"
  fi
}
for t in "${tests[@]}"; do
  filter='*'
  [ "$t" = test_cuda_engine ] && filter='-CudaEngine.WithoutADeviceSaysSoClearly'
  [ "$t" = test_stream_progress ] && filter='-StreamOrdered.WithoutADeviceAStreamSaysSo:StreamOrdered.ARefusedStreamSendShiftsNoSequence'
  # The fork test needs a parent that has not initialised CUDA: its own process (below).
  [ "$t" = test_cuda_stream ] && filter='-CudaStream.TwoProcessesShareOneGpu*'
  [ "$t" = test_nvlink_gpu ] && filter='-NvlinkGpu.TwoProcessesAllReduceOverDeviceWindows'
  run_test "$t" "$t" "$filter"
done
run_test test_cuda_stream-processes test_cuda_stream CudaStream.TwoProcessesShareOneGpu
run_test test_cuda_stream-processes-blocking test_cuda_stream CudaStream.TwoProcessesShareOneGpuOnBlockingStreams
# The CUDA-IPC windows between processes (VMM fds over a Unix socket), one-shot and two-shot.
run_test test_nvlink_gpu-processes test_nvlink_gpu NvlinkGpu.TwoProcessesAllReduceOverDeviceWindows

# ---- compute-sanitizer memcheck over the engine (out-of-bounds or misaligned device accesses) ----
sanitizer=$(command -v compute-sanitizer || true)
if [ -z "$sanitizer" ]; then
  fail "compute-sanitizer not found: memcheck not run"
elif timeout "$(limit 120)" "$sanitizer" --tool memcheck --error-exitcode 3 "$build/tests/test_cuda_engine" \
  --gtest_filter='CudaEngine.AvgDivision*:CudaEngine.Overlapping*:CudaMemory.*' >"$out/memcheck.log" 2>&1; then
  say "passed: compute-sanitizer memcheck (test_cuda_engine)"
else
  fail "compute-sanitizer memcheck: see memcheck.log ($(grep -m2 -E 'ERROR SUMMARY|Invalid' "$out/memcheck.log" | tr '\n' ' '))"
fi
# The stream-ordered path (one process: the fork test leaves the sanitizer's view).
if [ -n "$sanitizer" ]; then
  if timeout "$(limit 150)" "$sanitizer" --tool memcheck --error-exitcode 3 "$build/tests/test_cuda_stream" \
    --gtest_filter='CudaStream.OrderedOnTheCallersStream:CudaStream.DefaultStreamsInAGroup:CudaStream.NullStreamAndSendRecv:CudaStream.AbortAndTimeoutReleaseTheStream' \
    >"$out/memcheck-stream.log" 2>&1; then
    say "passed: compute-sanitizer memcheck (test_cuda_stream)"
  else
    fail "compute-sanitizer memcheck (stream): see memcheck-stream.log ($(grep -m2 -E 'ERROR SUMMARY|Invalid' "$out/memcheck-stream.log" | tr '\n' ' '))"
  fi
fi

# The device windows of one process's ranks (peer-memory steps: copy engine and kernels on them).
if [ -n "$sanitizer" ]; then
  if timeout "$(limit 120)" "$sanitizer" --tool memcheck --error-exitcode 3 "$build/tests/test_nvlink_gpu" \
    --gtest_filter='NvlinkGpu.ThreeRanksOfOneProcessAllReduceOverDeviceWindows' >"$out/memcheck-nvlink.log" 2>&1; then
    say "passed: compute-sanitizer memcheck (test_nvlink_gpu)"
  else
    fail "compute-sanitizer memcheck (nvlink): see memcheck-nvlink.log ($(grep -m2 -E 'ERROR SUMMARY|Invalid' "$out/memcheck-nvlink.log" | tr '\n' ' '))"
  fi
fi

# ---- trib-perf on device buffers (about a minute in all): 1 rank; 2 ranks as threads sharing the
# GPU; 2 ranks of one thread in a group (-g 2); 2 processes over shm; another collective and dtype.
# Each must check clean ("Out of bounds values : 0 OK"); the tables are the run's benchmark record.
# run_perf NAME ARGS...: runs trib-perf --mem device ARGS, table in trib-perf-NAME.txt.
run_perf() {
  local name=$1
  shift
  if timeout "$(limit 45)" "$build/bench/trib-perf" --mem device "$@" -J "$out/trib-perf-$name.json" \
    >"$out/trib-perf-$name.txt" 2>&1 && grep -q 'Out of bounds values : 0 OK' "$out/trib-perf-$name.txt"; then
    say "passed: trib-perf --mem device $* ($(grep -m1 'Avg bus bandwidth' "$out/trib-perf-$name.txt" | tr -s ' '))"
  else
    fail "trib-perf --mem device $*: see trib-perf-$name.txt ($(tail -3 "$out/trib-perf-$name.txt" | tr '\n' ' '))"
  fi
}
sweep=(-b 8 -e 64M -f 8 -n 10 -w 3)
run_perf t1 -t 1 "${sweep[@]}"
run_perf t2 -t 2 "${sweep[@]}"
run_perf g2 -g 2 "${sweep[@]}"
run_perf N2-shm -N 2 -T shm -b 8 -e 16M -f 8 -n 10 -w 3
run_perf t2-allgather-bf16 -t 2 -C allgather -d bf16 -b 8 -e 16M -f 8 -n 10 -w 3
run_perf t2-reducescatter-avg -t 2 -C reducescatter -d half -o avg -b 8 -e 16M -f 8 -n 10 -w 3

if [ "$failed" -ne 0 ]; then
  say "RESULT: FAILED"
  exit 1
fi
say "RESULT: all GPU checks passed"
