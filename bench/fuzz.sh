#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz (or those named) for a number of executions or seconds,
# at the lowest priority, and prints one table row per target (docs/FUZZING.md):
#   bench/fuzz.sh [-b BUILD_DIR] [-n RUNS] [-t SECONDS] [-j JOBS] [target ...]
# -n and -t: whichever comes first ends a target's run (-n 0: no limit on executions). BUILD_DIR
# (default build-fuzz) is configured with TRIB_FUZZ=ON and built here if needed; each target starts
# from a copy of its committed seeds, in BUILD_DIR/fuzz-bench/ (logs, corpus, crashes), never the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-fuzz runs=10000000 seconds=3600 jobs=1
while getopts "b:n:t:j:" o; do
  case $o in
    b) build=$OPTARG ;;
    n) runs=$OPTARG ;;
    t) seconds=$OPTARG ;;
    j) jobs=$OPTARG ;;
    *) sed -n 2,7p "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [ ! -f "$build/CMakeCache.txt" ]; then
  launchers=()
  if command -v ccache >/dev/null; then
    launchers=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRIB_FUZZ=ON -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DTRIB_BUILD_TESTS=OFF -DTRIB_BUILD_BENCH=OFF -DTRIB_WITH_CUDA=OFF \
    -DTRIB_WITH_TORCH=OFF "${launchers[@]}" >/dev/null
fi
nice -n 19 ninja -C "$build" -j2 trib_fuzz >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
out=$(realpath "$build")/fuzz-bench
bin=$(realpath "$build")/tests/fuzz
mkdir -p "$out"
echo "| target | executions | seconds | exec/s | coverage (edges) | features | corpus | crashes | slow units |"
echo "|---|---|---|---|---|---|---|---|---|"
failed=0
for t in "${targets[@]}"; do
  work=$out/$t
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp tests/fuzz/corpus/"$t"/* "$work/corpus/" 2>/dev/null || true
  par=()
  [ "$jobs" -gt 1 ] && par=(-jobs="$jobs" -workers="$jobs")
  start=$(date +%s.%N)
  rc=0
  # In the work folder: with -jobs, libFuzzer writes one fuzz-N.log per job into the current one.
  (cd "$work" && nice -n 19 "$bin/$t" -runs="$([ "$runs" -gt 0 ] && echo "$runs" || echo -1)" \
    -max_total_time="$seconds" "${par[@]}" -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
    "$work/corpus" >"$work/log" 2>&1) || rc=$?
  end=$(date +%s.%N)
  logs=("$work/log")
  [ "$jobs" -gt 1 ] && logs=("$work"/fuzz-*.log)
  execs=$(grep -h "stat::number_of_executed_units" "${logs[@]}" | awk '{s += $2} END {print s + 0}')
  cov=$(grep -h -o "cov: [0-9]*" "${logs[@]}" | awk '{if ($2 > m) m = $2} END {print m + 0}')
  ft=$(grep -h -o "ft: [0-9]*" "${logs[@]}" | awk '{if ($2 > m) m = $2} END {print m + 0}')
  # Crashes, leaks, out-of-memory and time-outs fail the run; a slow unit (> 10 s, often a loaded
  # machine) is only counted.
  crashes=$(find "$work/artifacts" -type f ! -name 'slow-unit-*' | wc -l)
  slow=$(find "$work/artifacts" -type f -name 'slow-unit-*' | wc -l)
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.0f", b - a}')
  rate=$(awk -v e="$execs" -v s="$secs" 'BEGIN {printf "%.0f", (s > 0 ? e / s : 0)}')
  echo "| $t | $execs | $secs | $rate | $cov | $ft | $(ls "$work/corpus" | wc -l) | $crashes | $slow |"
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    failed=1
    echo "  $t failed (exit $rc): see $work/log and $work/artifacts/" >&2
  fi
done
exit $failed
