#!/usr/bin/env bash
# One fault-injection run across a real link (docs/FAULTS.md): two "hosts" as network namespaces
# joined by a veth pair made here, a TCP store (and optionally an aggregation switch) in host A,
# ranks alternating between A and B over UCX/TCP, running random checked collectives
# (trib-fault-rank) while one fault is injected. Then every rank's outcome is judged:
#   - none of them may report a wrong result or a wrong code (status=wrong), or hang;
#   - no fault, or one that only slows the link (none, delay, reorder, rate): every rank completes
#     every collective exactly;
#   - link faults that lose packets or cut the link for a while (loss, netem, flap): every rank
#     either completes every collective exactly or fails with an error that names a rank (a call
#     may time out waiting for TCP's retransmissions: that rank met the fault, counted injected);
#   - no call longer than TRIB_TIMEOUT (+1 s), for every scenario, bar the frozen rank's own call;
#   - a link down for good, a frozen (SIGSTOP) or killed (SIGKILL) rank: every survivor returns
#     within TRIB_TIMEOUT + 5 s of the fault with an error naming a rank (or had finished), and
#     for stop/kill one of them names the victim; a frozen rank, let go afterwards, must not hang;
#   - abort (tribCommAbort from another thread of one rank): that rank's calls return tribAborted
#     from then on; the others complete or fail naming a rank.
#
#   tests/faults/faults.sh --build DIR [--ranks N] [--ops N] [--max-count C] [--timeout S]
#                          [--seed S] [--switch] [--quiet] [--require-injected] SCENARIO
# --require-injected: a run whose fault came too late (some rank had already finished) fails
# instead of passing untested (CTest uses it).
#   SCENARIO: none delay loss1 loss10 reorder netem rate flap down stop kill abort switchd
#   (netem: delay, loss 1%, loss 10% and reordering in turn, TRIB_FAULTS_PHASE_S seconds each
#   (default 3), on one job.)
#   (switchd: the aggregation switch is killed mid-run; implies --switch. Every collective must
#   still complete exactly, on host algorithms.)
#
# Needs root (ip netns) and UCX; delay, loss and reorder need the kernel's sch_netem (this host's
# kernel may lack it: the RDMA VM suite runs them, tests/vm/). Prints one line
#   faults: scenario=... seed=... injected=0|1 ok=.. errors=.. aborted=.. wrong=.. hangs=..
#           named_victim=.. verdict=PASS|FAIL
# (ranks by outcome; named_victim: how many other ranks' errors named the stopped/killed rank).
# --ops caps each rank's sequence (default 100000; faults end it sooner). TRIB_FAULTS_KEEP=1
# keeps the ranks' outputs (always kept when a run fails).
# Exit status: 0 pass, 1 fail, 77 cannot run here (the reason on stderr).
set -uo pipefail

build= ranks=4 ops=100000 max_count=65536 timeout_s=5 seed=$$ with_switch=0 quiet=0 require_injected=0
while [ $# -gt 1 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --max-count) max_count=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --switch) with_switch=1; shift ;;
    --quiet) quiet=1; shift ;;
    --require-injected) require_injected=1; shift ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] && [ -n "$build" ] || { sed -n '2,/^set -uo/p' "$0" | sed '$d' >&2; exit 64; }
scenario=$1
[ "$scenario" = switchd ] && with_switch=1
case $scenario in none | delay | loss1 | loss10 | reorder | netem | rate | flap | down | stop | kill | abort | switchd) ;;
  *) echo "faults: unknown scenario '$scenario'" >&2; exit 64 ;;
esac
skip() { echo "faults: skipped: $*" >&2; exit 77; }
rank_bin=$build/tests/faults/trib-fault-rank store_bin=$build/tools/trib-store switchd_bin=$build/tools/trib-switchd
for b in "$rank_bin" "$store_bin" "$switchd_bin"; do [ -x "$b" ] || skip "$b is not built"; done
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
command -v ip > /dev/null || skip "needs iproute2 (ip)"

RANDOM=$seed
work=$(mktemp -d /tmp/trib-faults-XXXXXX)
nsA=trf$$a nsB=trf$$b ipA=10.78.0.1 ipB=10.78.0.2
pids=()
# Signals `pid` only while it is still this script's child: a child that exited was reaped, and its
# pid may belong to anyone's process by now (pid_max is 32768 here and pids wrap within minutes).
signal_ours() { # signal pid
  [ -n "$2" ] && [ "$(ps -o ppid= -p "$2" 2> /dev/null | tr -d ' ')" = "$$" ] && kill -"$1" "$2" 2> /dev/null
  return 0
}
cleanup() {
  for p in "${pids[@]}"; do signal_ours CONT "$p"; signal_ours KILL "$p"; done
  wait 2> /dev/null
  ip netns del "$nsA" 2> /dev/null
  ip netns del "$nsB" 2> /dev/null
  [ "${keep_work:-0}" = 1 ] || [ -n "${TRIB_FAULTS_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
say() { [ $quiet = 1 ] || echo "faults: $*" >&2; }

# ---- the two hosts -------------------------------------------------------------------------
ip netns add "$nsA" 2> "$work/netns.err" || skip "ip netns add failed: $(cat "$work/netns.err")"
ip netns add "$nsB" || skip "ip netns add failed"
ip link add "trf$$x" type veth peer name "trf$$y" 2> "$work/veth.err" ||
  skip "cannot make a veth pair: $(cat "$work/veth.err")"
ip link set "trf$$x" netns "$nsA" && ip link set "trf$$y" netns "$nsB" || skip "cannot move the veth ends"
# Both ends are called tf0 inside their namespace, so UCX_NET_DEVICES names them alike.
ip -n "$nsA" link set "trf$$x" name tf0 && ip -n "$nsB" link set "trf$$y" name tf0 || skip "cannot rename"
ip -n "$nsA" addr add $ipA/24 dev tf0 && ip -n "$nsB" addr add $ipB/24 dev tf0 || skip "cannot address"
for ns in "$nsA" "$nsB"; do ip -n "$ns" link set lo up && ip -n "$ns" link set tf0 up; done
inA() { ip netns exec "$nsA" "$@"; }
inB() { ip netns exec "$nsB" "$@"; }

# ---- the fault, first checked that this kernel can do it -------------------------------------
qdisc=
case $scenario in
  delay) qdisc="netem delay 10ms" ;;
  loss1) qdisc="netem loss 1%" ;;
  loss10) qdisc="netem loss 10%" ;;
  reorder) qdisc="netem delay 10ms reorder 25% 50%" ;;
  rate) qdisc="tbf rate 20mbit burst 32kbit latency 400ms" ;;
  # Each netem fault in turn on one job (one join: the VM suite's emulated guest joins slowly).
  netem) qdisc="netem delay 10ms" ;;
esac
netem_phases=("netem delay 10ms" "netem loss 1%" "netem loss 10%" "netem delay 10ms reorder 25% 50%")
if [ -n "$qdisc" ]; then
  # shellcheck disable=SC2086
  inA tc qdisc add dev tf0 root $qdisc 2> "$work/tc.err" ||
    skip "tc qdisc $qdisc: $(cat "$work/tc.err") (needs sch_${qdisc%% *}; the VM suite runs it)"
  inA tc qdisc del dev tf0 root
fi

# ---- the job -------------------------------------------------------------------------------
key=faults-$$-$RANDOM
store=$ipA:29400
# Started by ip netns exec itself (which execs them), so $! is the server's own pid.
TRIB_AUTH_KEY=$key ip netns exec "$nsA" "$store_bin" --listen "$store" > "$work/store.out" 2>&1 &
pids+=($!)
switch_env=()
if [ $with_switch = 1 ]; then
  ip netns exec "$nsA" "$switchd_bin" --listen $ipA:29600 --key "$key" > "$work/switchd.out" 2>&1 &
  pids+=($!)
  # Every collective the switch can run goes through it (the others: host algorithms).
  switch_env=(TRIB_SWITCH=$ipA:29600 TRIB_SWITCH_KEY=$key TRIB_ALGO=switch)
  switchd_pid=$!
fi
for _ in $(seq 1 100); do
  grep -q listening "$work/store.out" && { [ $with_switch = 0 ] || grep -q listening "$work/switchd.out"; } && break
  sleep 0.1
done
grep -q listening "$work/store.out" || { echo "faults: the store did not start: $(cat "$work/store.out")" >&2; exit 1; }

victim=$((RANDOM % ranks))
abort_ms=$((200 + RANDOM % 2000))
fault_delay_ms=$((100 + RANDOM % 900))
rank_pid=()
for ((r = 0; r < ranks; ++r)); do
  ns=$nsA
  [ $((r % 2)) = 1 ] && ns=$nsB
  extra=()
  [ "$scenario" = abort ] && [ $r = $victim ] && extra=(--abort-after-ms $abort_ms)
  ip netns exec "$ns" env TRIB_RANK=$r TRIB_NRANKS=$ranks TRIB_STORE=$store TRIB_AUTH_KEY=$key \
    TRIB_TIMEOUT=$timeout_s TRIB_TRANSPORT=ucx UCX_TLS=tcp UCX_NET_DEVICES=tf0 "${switch_env[@]}" \
    "$rank_bin" --seed "$seed" --ops "$ops" --max-count "$max_count" --until-file "$work/stop" "${extra[@]}" \
    > "$work/rank$r.out" 2>&1 &
  rank_pid[$r]=$!
  pids+=($!)
done
ready_all() {
  local r
  for ((r = 0; r < ranks; ++r)); do grep -q '^ready' "$work/rank$r.out" || return 1; done
}
for _ in $(seq 1 600); do
  ready_all && break
  sleep 0.1
done
if ! ready_all; then
  echo "faults: the ranks did not all join within 60 s" >&2
  tail -n 5 "$work"/rank*.out >&2
  exit 1
fi
say "scenario $scenario seed $seed: $ranks ranks joined (victim rank $victim)"

now_ms() { date +%s%3N; }
finished() { grep -q '^RESULT' "$work/rank$1.out"; }
field() { sed -n "s/^RESULT.* $2=\([^ ]*\).*/\1/p" "$work/rank$1.out" | head -1; }
injected=1
fault_ms=$(now_ms)
if [ -n "$qdisc" ]; then
  # Both directions of the link.
  # shellcheck disable=SC2086
  inA tc qdisc add dev tf0 root $qdisc && inB tc qdisc add dev tf0 root $qdisc
  if [ "$scenario" = netem ]; then
    for phase in "${netem_phases[@]:1}"; do
      sleep "${TRIB_FAULTS_PHASE_S:-3}"
      # shellcheck disable=SC2086
      inA tc qdisc replace dev tf0 root $phase && inB tc qdisc replace dev tf0 root $phase
      say "now: $phase"
    done
  fi
else
  case $scenario in
    flap | down | stop | kill | switchd)
      sleep "$(printf '%d.%03d' $((fault_delay_ms / 1000)) $((fault_delay_ms % 1000)))"
      # A fault after some rank already finished tests nothing new: counted as not injected.
      for ((r = 0; r < ranks; ++r)); do finished $r && injected=0; done
      fault_ms=$(now_ms)
      ;;
  esac
  case $scenario in
    flap) inB ip link set tf0 down; sleep 2; inB ip link set tf0 up ;;
    down) inB ip link set tf0 down ;;
    stop) signal_ours STOP "${rank_pid[$victim]}" ;;
    kill) signal_ours KILL "${rank_pid[$victim]}" ;;
    switchd) signal_ours KILL "$switchd_pid" ;;
    abort) fault_ms=$((fault_ms + abort_ms)) ;;
  esac
fi
say "fault injected ($scenario, after $fault_delay_ms ms where timed)"
# Faults the ranks should ride out: they run on under it (and after a flap or the switch's death)
# for TRIB_FAULTS_PHASE_S seconds more, then the stop file ends their sequence (checked, at once
# on every rank: trib-fault-rank --until-file). A rank that ran out of ops first saw less; one
# that failed under the fault (a call timed out across a flap) met it, and is judged below.
case $scenario in
  down | stop | kill | abort) ;;
  *)
    sleep "${TRIB_FAULTS_PHASE_S:-3}"
    for ((r = 0; r < ranks; ++r)); do [ "$(field $r status)" = ok ] && injected=0; done
    touch "$work/stop"
    ;;
esac

# ---- waiting, bounded ------------------------------------------------------------------------
# Fatal faults: survivors must be back within TRIB_TIMEOUT + 5 s (and their destroy, 2 s more).
# The others run their whole sequence under the fault: bounded by a generous run budget.
case $scenario in
  down | stop | kill) deadline_ms=$((fault_ms + (timeout_s + 7) * 1000)) ;;
  *) deadline_ms=$((fault_ms + ${TRIB_FAULTS_RUN_BUDGET:-120} * 1000)) ;;
esac
survivors=()
for ((r = 0; r < ranks; ++r)); do
  case $scenario in stop | kill) [ $r = $victim ] && continue ;; esac
  survivors+=($r)
done
declare -A exit_of
wait_rank() { # rank deadline_ms: sets exit_of[rank] to its exit status, or "hang"
  local r=$1 until=$2 pid=${rank_pid[$1]}
  while [ "$(awk '{print $3}' /proc/"$pid"/stat 2> /dev/null)" != Z ] &&
    [ "$(ps -o ppid= -p "$pid" 2> /dev/null | tr -d ' ')" = "$$" ]; do  # ours, still running
    [ "$(now_ms)" -lt "$until" ] || { exit_of[$r]=hang; return; }
    sleep 0.05
  done
  wait "$pid"
  exit_of[$r]=$?
}
for r in "${survivors[@]}"; do wait_rank "$r" "$deadline_ms"; done
if [ "$scenario" = stop ]; then
  # Let the frozen rank go: its peers are gone, it must not hang either.
  signal_ours CONT "${rank_pid[$victim]}"
  wait_rank "$victim" $(($(now_ms) + (timeout_s + 7) * 1000))
fi
[ "$scenario" = kill ] && { wait "${rank_pid[$victim]}" 2> /dev/null; exit_of[$victim]=killed; }

# ---- the verdict -----------------------------------------------------------------------------
ok=0 errors=0 aborted=0 wrong=0 hangs=0 named_victim=0 named_count=0 problems=()
for ((r = 0; r < ranks; ++r)); do
  e=${exit_of[$r]:-}
  [ "$e" = killed ] && continue
  if [ "$e" = hang ]; then
    hangs=$((hangs + 1))
    problems+=("rank $r did not return in time (hang)")
    continue
  fi
  status=$(field $r status)
  line=$(grep '^RESULT' "$work/rank$r.out" | head -1)
  msg=${line#*msg=}
  call_s=$(field $r call_s)
  case $status in
    ok) ok=$((ok + 1)) ;;
    aborted) aborted=$((aborted + 1)) ;;
    error)
      errors=$((errors + 1))
      # Every message names its own rank; it must also name another (the peer it lost).
      named=$(echo "$msg" | grep -oE 'ranks? [0-9]+(, [0-9]+)*' | grep -oE '[0-9]+' | awk -v me=$r '$1 != me' |
        sort -u | tr '\n' ' ')
      [ -n "$named" ] || problems+=("rank $r: the error names no peer: $msg")
      case " $named" in *" $victim "*) [ $r != $victim ] && named_victim=1 && named_count=$((named_count + 1)) ;; esac
      ;;
    wrong) wrong=$((wrong + 1)); problems+=("rank $r: WRONG: $line") ;;
    *) problems+=("rank $r: exit $e, no result: $(tail -n 3 "$work/rank$r.out" | tr '\n' ' ')") ;;
  esac
  # Every call bounded by the timeout (a second of slack for the machine); not the frozen rank's,
  # whose call also counts the seconds it was stopped (until the survivors had returned).
  if [ -n "$call_s" ] && { [ "$scenario" != stop ] || [ $r != $victim ]; } && awk -v c="$call_s" -v t="$timeout_s" 'BEGIN { exit !(c > t + 1) }'; then
    problems+=("rank $r: a call took $call_s s, past TRIB_TIMEOUT=$timeout_s")
  fi
  # Fatal faults: an error within TRIB_TIMEOUT + 5 s of the fault.
  at_ms=$(field $r at_ms)
  case $scenario in
    down | stop | kill)
      # (The frozen rank is let go only after the others returned: not timed.)
      if [ "$status" = error ] && [ -n "$at_ms" ] && { [ "$scenario" != stop ] || [ $r != $victim ]; } && [ $((at_ms - fault_ms)) -gt $(((timeout_s + 5) * 1000)) ]; then
        problems+=("rank $r: failed $((at_ms - fault_ms)) ms after the fault, past TRIB_TIMEOUT + 5 s")
      fi
      ;;
  esac
  # An aborted status belongs to the rank that aborted only.
  if [ "$status" = aborted ] && { [ "$scenario" != abort ] || [ $r != $victim ]; }; then
    problems+=("rank $r: tribAborted without an abort of its own: $line")
  fi
  grep -q '^destroyed' "$work/rank$r.out" || [ "$e" = hang ] || problems+=("rank $r: exit $e before its destroy")
done
# An abort that came after the rank's last call tests nothing: not injected.
[ "$scenario" = abort ] && [ "$(field $victim status)" = ok ] && injected=0
if [ $injected = 1 ]; then
  case $scenario in
    stop | kill)
      # The others fail naming a rank; one of them names the victim (the rest may name a
      # survivor whose own failure reached them first).
      [ $errors -gt 0 ] && [ $named_victim = 0 ] && problems+=("no survivor named rank $victim")
      [ $ok = $((ranks - 1)) ] && problems+=("every survivor completed every collective without rank $victim")
      ;;
    down) [ $ok = $ranks ] && problems+=("every rank completed across a link that was down") ;;
    switchd) [ $ok = $ranks ] || problems+=("a rank did not complete every collective without the switch") ;;
    # Faults that only slow the link: every collective completes (loss, netem and flap may time
    # a call out, named above).
    none | delay | reorder | rate) [ $ok = $ranks ] || problems+=("a rank did not complete every collective ($scenario)") ;;
  esac
fi
[ $require_injected = 1 ] && [ $injected = 0 ] && problems+=("the fault came after a rank had finished (raise --ops)")
verdict=PASS
[ ${#problems[@]} = 0 ] || verdict=FAIL
echo "faults: scenario=$scenario seed=$seed ranks=$ranks switch=$with_switch injected=$injected ok=$ok errors=$errors aborted=$aborted wrong=$wrong hangs=$hangs named_victim=$named_count verdict=$verdict"
for p in "${problems[@]}"; do echo "faults:   $p"; done
if [ $verdict = FAIL ] || [ $quiet = 0 ]; then
  for ((r = 0; r < ranks; ++r)); do echo "rank $r: $(grep '^RESULT' "$work/rank$r.out" | head -1)"; done
fi
if [ $verdict = FAIL ]; then
  keep_work=1
  echo "faults: rank outputs kept in $work" >&2
  exit 1
fi
exit 0
