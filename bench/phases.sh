#!/usr/bin/env bash
# Interleaved probes of one size, to see how Tributary and Open MPI fare in this machine's two
# phases (docs/BENCHMARKS.md, "Two machine phases"): each round prints the core-to-core round trip
# trib-perf measured at its start, then out-of-place/in-place busbw (GB/s) of Tributary and of
# Open MPI's shared-memory path, for 2 and 4 processes; Tributary with heap buffers ("trib") and
# with tribMemAlloc buffers ("trib-R1") when trib-perf has -R. Twelve
# warm-up calls: two-shot settles its cell mode over its first ten operations of a size.
#
#   bench/phases.sh [--build DIR] [--rounds 30] [--size 16M] [--algo twoshot]
set -u
BUILD=build ROUNDS=30 SIZE=16M ALGO=twoshot
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --algo) ALGO=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "phases.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
TRIB=$BUILD/bench/trib-perf MPIB=$BUILD/bench/peers/mpi_allreduce_bench
[ -x "$TRIB" ] || { echo "phases.sh: $TRIB not found (ninja -C $BUILD trib-perf)" >&2; exit 2; }
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_plm_rsh_agent=false
MPIRUN="mpirun --oversubscribe --bind-to none"
[ "$(id -u)" = 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
rates() { grep -E '^ +[0-9]' | awk '{printf "%s/%s", $8, $12}'; }
for i in $(seq 1 "$ROUNDS"); do
  line="$(date +%H:%M:%S)"
  for n in 2 4; do
    out=$(timeout 120 "$TRIB" --ranks "$n" --transport shm -b "$SIZE" -e "$SIZE" -n 8 -w 12 -c 0 -A "$ALGO" 2>&1)
    rtt=$(sed -n 's/^# core-to-core round trip.*: \([0-9]*\) ns/\1/p' <<<"$out")
    line="$line | n=$n rtt=${rtt:-?}ns trib $(rates <<<"$out")"
    if "$TRIB" --help 2>&1 | grep -q -- '--registered'; then
      line="$line trib-R1 $(timeout 120 "$TRIB" --ranks "$n" --transport shm -b "$SIZE" -e "$SIZE" -n 8 -w 12 -c 0 \
        -A "$ALGO" -R 1 2>&1 | rates)"
    fi
    if [ -x "$MPIB" ] && command -v mpirun >/dev/null; then
      line="$line ompi $(timeout 120 $MPIRUN -np "$n" --mca pml ob1 --mca btl self,vader "$MPIB" -b "$SIZE" \
        -e "$SIZE" -n 8 -w 12 2>&1 | rates)"
    fi
  done
  echo "$line"
done
