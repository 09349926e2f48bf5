#!/usr/bin/env bash
# The randomized fault campaign (docs/FAULTS.md): RUNS runs of tests/faults/faults.sh, each with a
# random fault, seed (so random collectives, victim and moment of the fault) and rank count
# (2..4), half of the fatal ones with an aggregation switch attached. Prints the counts:
# runs, faults injected, hangs, wrong results, failed verdicts, and per scenario.
#
#   bench/faults-campaign.sh --build DIR [--runs 200] [--seed S] [--timeout S] [--log DIR]
#
# Needs root; netem faults are drawn only where the kernel has sch_netem. Run it at low priority
# (nice -n 19) on a shared machine. Exit status 0 when no run failed.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build= runs=200 seed=$$ timeout_s=4 log=
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    *) sed -n '2,/^set -uo/p' "$0" | sed '$d' >&2; exit 64 ;;
  esac
done
[ -n "$build" ] || { echo "faults-campaign: --build DIR is required" >&2; exit 64; }
[ -n "$log" ] || log=$(mktemp -d /tmp/trib-faults-campaign-XXXXXX)
mkdir -p "$log"
driver=$here/tests/faults/faults.sh
RANDOM=$seed

# The mix: the issue's SIGSTOP/SIGKILL runs first of all, then abort and the link faults.
scenarios=(kill kill kill stop stop stop abort abort down flap rate switchd)
if ip netns add trfprobe$$ 2> /dev/null; then
  ip -n trfprobe$$ link add p0 type veth peer name p1 2> /dev/null &&
    ip netns exec trfprobe$$ tc qdisc add dev p0 root netem delay 1ms 2> /dev/null &&
    scenarios+=(delay loss1 loss10 reorder)
  ip netns del trfprobe$$
fi
echo "faults-campaign: $runs runs (seed $seed, TRIB_TIMEOUT=$timeout_s s) of: ${scenarios[*]}; logs in $log"

declare -A per_runs per_injected per_fail
total=0 injected=0 hangs=0 wrong=0 failed=0 skipped=0 ok=0 errors=0 aborted=0 victim_errors=0 named=0
start=$(date +%s)
for ((i = 1; i <= runs; ++i)); do
  s=${scenarios[RANDOM % ${#scenarios[@]}]}
  n=$((2 + RANDOM % 3))
  run_seed=$((RANDOM * 32768 + RANDOM))
  flags=(--build "$build" --ranks $n --timeout "$timeout_s" --seed $run_seed --quiet)
  case $s in kill | stop | down) [ $((RANDOM % 2)) = 0 ] && flags+=(--switch) ;; esac
  bash "$driver" "${flags[@]}" "$s" > "$log/run$i.log" 2>&1
  rc=$?
  line=$(grep '^faults: scenario=' "$log/run$i.log" | tail -1)
  if [ $rc = 77 ]; then
    skipped=$((skipped + 1))
    continue
  fi
  get() { echo "$line" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
  total=$((total + 1))
  per_runs[$s]=$((${per_runs[$s]:-0} + 1))
  if [ -z "$line" ]; then
    failed=$((failed + 1)) per_fail[$s]=$((${per_fail[$s]:-0} + 1))
    echo "run $i ($s, seed $run_seed, $n ranks): no verdict (exit $rc): $(tail -n 2 "$log/run$i.log" | tr '\n' ' ')"
    continue
  fi
  inj=$(get injected)
  if [ "$inj" = 1 ] && [ $s != none ]; then
    injected=$((injected + 1))
    per_injected[$s]=$((${per_injected[$s]:-0} + 1))
  fi
  hangs=$((hangs + $(get hangs))) wrong=$((wrong + $(get wrong)))
  ok=$((ok + $(get ok))) errors=$((errors + $(get errors))) aborted=$((aborted + $(get aborted)))
  # Stop and kill: how many of the survivors' errors named the victim itself.
  case $s in stop | kill)
    [ "$inj" = 1 ] && victim_errors=$((victim_errors + $(get errors))) named=$((named + $(get named_victim))) ;;
  esac
  if [ $rc != 0 ]; then
    failed=$((failed + 1)) per_fail[$s]=$((${per_fail[$s]:-0} + 1))
    echo "run $i ($s, seed $run_seed, $n ranks): FAILED, see $log/run$i.log"
    grep '^faults:   ' "$log/run$i.log"
  fi
done
echo "faults-campaign: $total runs in $(($(date +%s) - start)) s ($skipped skipped): faults injected $injected," \
  "hangs $hangs, wrong results $wrong, failed runs $failed"
echo "faults-campaign: rank outcomes: ok $ok, errors naming a rank $errors, aborted $aborted"
echo "faults-campaign: stop/kill: $named of the $victim_errors ranks that failed named the victim itself (the" \
  "rest: a survivor that had given up first, or, for stop, the frozen rank itself once let go)"
for s in $(printf '%s\n' "${!per_runs[@]}" | sort); do
  echo "  $s: runs ${per_runs[$s]}, injected ${per_injected[$s]:-0}, failed ${per_fail[$s]:-0}"
done
[ $failed = 0 ]
