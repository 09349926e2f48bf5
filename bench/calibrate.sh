#!/usr/bin/env bash
# Local calibration of the planner: float32 sum all-reduce measured by trib-perf (ranks as threads
# over loopback, and as processes over shm) next to the cost model's prediction on this machine's
# detected topology, ranks placed as the communicator places them (trib-plan --calibrate).
#
#   bench/calibrate.sh [--build DIR] [--out DIR] [--ranks "2 4"] [--minbytes 1M] [--maxbytes 64M]
#                      [--iters 10] [--mem-gbps X]
#
# The memory rate the model uses is the memcpy bandwidth trib-perf measures in the same run (its
# JSON field memcpy_GBps) unless --mem-gbps gives one. Needs DIR/bench/trib-perf and DIR/tools/trib-plan.
set -u
BUILD=build
OUT=""
RANKS="2 4"
MINB=1M
MAXB=64M
ITERS=10
MEM=()
RUN_TIMEOUT=300  # seconds per trib-perf invocation
usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit "$1"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --minbytes) MINB=$2; shift 2 ;;
    --maxbytes) MAXB=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --mem-gbps) MEM=(--mem-gbps "$2"); shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "calibrate.sh: unknown argument '$1'" >&2; usage 2 ;;
  esac
done
PERF=$BUILD/bench/trib-perf
PLAN=$BUILD/tools/trib-plan
for b in "$PERF" "$PLAN"; do
  [ -x "$b" ] || { echo "calibrate.sh: $b not found; build it: ninja -C $BUILD -j1 trib-perf trib-plan" >&2; exit 2; }
done
[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/trib-calibrate-XXXXXX)
mkdir -p "$OUT" || exit 2
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); results in $OUT"
measured=()
for n in $RANKS; do
  for mode in threads shm; do
    json=$OUT/$mode$n.json
    if [ "$mode" = threads ]; then args=(--threads "$n"); else args=(--ranks "$n" --transport shm); fi
    if timeout "$RUN_TIMEOUT" "$PERF" "${args[@]}" -b "$MINB" -e "$MAXB" -n "$ITERS" -w 2 -J "$json" \
        >"$OUT/$mode$n.txt" 2>&1; then
      measured+=(--measured "$json")
    else
      echo "# trib-perf ${args[*]} failed or timed out; see $OUT/$mode$n.txt" >&2
    fi
  done
done
[ ${#measured[@]} -gt 0 ] || { echo "calibrate.sh: no measurement succeeded" >&2; exit 1; }
"$PLAN" --calibrate "${measured[@]}" "${MEM[@]}"
