#!/usr/bin/env bash
# Runs a command several times in a row while busy-loop processes compete for the cores, and
# fails at the first failing run: a test that passes only on a quiet machine is a race to find.
#   tools/stress.sh [--runs N] [--busy K] [--log DIR] [-- command...]
# Default: 5 runs of the README's test command (`bash tools/dev.sh test`) against 2 busy loops.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=5
BUSY=2
LOG=$(mktemp -d /tmp/trib-stress-XXXXXX)
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --busy) BUSY=$2; shift 2 ;;
    --log) LOG=$2; mkdir -p "$LOG"; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: tools/stress.sh [--runs N] [--busy K] [--log DIR] [-- command...]" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || set -- bash tools/dev.sh test
case "$RUNS$BUSY" in *[!0-9]*) echo "stress.sh: --runs and --busy take whole numbers" >&2; exit 2 ;; esac

pids=()
stop_busy() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; }
trap stop_busy EXIT INT TERM
for ((i = 0; i < BUSY; ++i)); do
  # Each loop ends by itself after a day, should this script be killed without its trap.
  timeout 86400 bash -c 'while :; do :; done' &
  pids+=($!)
done
echo "stress.sh: $RUNS run(s) of '$*' against $BUSY busy loop(s); logs in $LOG"
for ((r = 1; r <= RUNS; ++r)); do
  start=$(date +%s)
  if "$@" >"$LOG/run$r.log" 2>&1; then
    echo "run $r: passed in $(($(date +%s) - start)) s"
  else
    echo "run $r: FAILED after $(($(date +%s) - start)) s; the failures:"
    grep -E "\(Failed\)|\(Timeout\)|\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception" "$LOG/run$r.log" | head -20 || tail -20 "$LOG/run$r.log"
    exit 1
  fi
done
echo "stress.sh: all $RUNS run(s) passed"
