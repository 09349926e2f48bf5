#!/bin/bash
# In the RDMA test guest (tests/vm/rdma-vm.sh): trib-perf over the verbs transport against
# perftest's ib_write_bw, ib_write_lat and ib_send_lat on the same two rxe devices, in the same
# boot, and the all-reduce over verbs vs UCX. Prints each tool's output and then the ratios
# (docs/BENCHMARKS.md).
#   perf.sh TRIB_PERF [BW_ITERS] [LAT_ITERS] [TRIB_LAT_ITERS]
# LAT_ITERS: perftest's 8-byte round trips; TRIB_LAT_ITERS: trib-perf's 8-byte calls, timed
# together (one clock reading before and after them all), so a coarse guest clock adds at most
# one tick to their total, and the all-reduce's also one by one (-L 1: its fastest and median
# call, against perftest's t_min and t_typical; a guest clock's step bounds their resolution). Every run is bounded (TRIB_VM_PERF_TIMEOUT seconds, default 300: under
# TCG on a loaded host an 8-byte all-reduce can take 5 ms, 10 s per 1,000 calls in and out of place).
set -u
perf=$1 bw_iters=${2:-200} lat_iters=${3:-10000} trib_lat_iters=${4:-3000}
bound=${TRIB_VM_PERF_TIMEOUT:-300}
dir=$(mktemp -d)

# The clock both sides read: the guest kernel's clocksource (trib-perf's steady_clock) and the
# smallest step CLOCK_MONOTONIC takes; perftest reads the TSC itself (rdtsc) and converts with the
# CPU frequency it is given or measures.
cs=/sys/devices/system/clocksource/clocksource0
echo "perf: clocksource $(cat $cs/current_clocksource 2> /dev/null) (available: $(cat $cs/available_clocksource 2> /dev/null));" \
  "kernel command line: $(cat /proc/cmdline)"
command -v python3 > /dev/null && timeout 20 python3 -c '
import time
steps, last, end = [], time.monotonic_ns(), time.monotonic_ns() + 200_000_000
while len(steps) < 200 and time.monotonic_ns() < end:
    now = time.monotonic_ns()
    if now != last:
        steps.append(now - last)
        last = now
steps.sort()
print("perf: CLOCK_MONOTONIC steps (ns): min %d, median %d, max %d over %d steps" %
      (steps[0], steps[len(steps) // 2], steps[-1], len(steps)) if steps else "perf: CLOCK_MONOTONIC did not step in 0.2 s")'

# perftest: server on rxe0, client on rxe1 (the client prints the same table).
perftest() {  # tool args...
  local tool=$1
  shift
  timeout "$bound" "$tool" -d "$TRIB_VM_HCA0" -x "$TRIB_VM_GID0" -F "$@" > "$dir/$tool.server" 2>&1 &
  local server=$! try
  # The server may take more than a few seconds to listen on a loaded host: the client retries
  # (5 tries, 3 s apart) while its connection is refused.
  for try in 1 2 3 4 5; do
    sleep 3
    timeout "$bound" "$tool" -d "$TRIB_VM_HCA1" -x "$TRIB_VM_GID1" -F "$@" "$TRIB_VM_IP0" > "$dir/$tool.client" 2>&1
    grep -q "Couldn't connect" "$dir/$tool.client" && kill -0 $server 2> /dev/null || break
    echo "perf: $tool client: no server listening yet (try $try)"
  done
  cat "$dir/$tool.client"
  grep -q "Couldn't connect" "$dir/$tool.client" && kill $server 2> /dev/null
  wait $server || { echo "perf: $tool server (rxe0) failed:"; cat "$dir/$tool.server"; }
}
perftest ib_write_bw -s 1048576 -n "$bw_iters"
perftest ib_write_lat -s 8 -n "$lat_iters"
perftest ib_send_lat -s 8 -n "$lat_iters"
bw_ref=$(awk '$1 == 1048576 {print $4}' "$dir/ib_write_bw.client")  # BW average [MB/sec]
# #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9% (usec, half a round trip)
lat_min=$(awk '$1 == 8 {print $3}' "$dir/ib_write_lat.client")
lat_avg=$(awk '$1 == 8 {print $6}' "$dir/ib_write_lat.client")
send_min=$(awk '$1 == 8 {print $3}' "$dir/ib_send_lat.client")
send_typ=$(awk '$1 == 8 {print $5}' "$dir/ib_send_lat.client")
send_avg=$(awk '$1 == 8 {print $6}' "$dir/ib_send_lat.client")

# trib-perf: two processes, one per device, joined through a file store.
tribperf() {  # name env... -- trib-perf args...
  local name=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local store=$dir/store.$name
  mkdir -p -m 700 "$store"
  env TRIB_RANK=1 TRIB_NRANKS=2 TRIB_STORE_DIR="$store" TRIB_IB_HCA="$TRIB_VM_HCA1" \
    UCX_NET_DEVICES="$TRIB_VM_HCA1:1" "${envs[@]}" timeout "$bound" "$perf" "$@" > "$dir/$name.rank1" 2>&1 &
  local other=$!
  env TRIB_RANK=0 TRIB_NRANKS=2 TRIB_STORE_DIR="$store" TRIB_IB_HCA="$TRIB_VM_HCA0" \
    UCX_NET_DEVICES="$TRIB_VM_HCA0:1" "${envs[@]}" timeout "$bound" "$perf" "$@" 2>&1 | tee "$dir/$name.out"
  wait $other || { echo "perf: $name rank 1 failed:"; cat "$dir/$name.rank1"; }
}
# Broadcast between two ranks is one message from rank 0 to rank 1: point-to-point. At 8 bytes it
# is a stream of eager sends (rank 0 need not wait for rank 1), so its time per call is the
# message interval, not a latency. The 2-rank all-reduce of 8 bytes is one: over verbs (no peer
# windows) the planner picks allgather_reduce, one exchange per call (each rank sends its 8 bytes
# to the other and waits for the peer's), the counterpart of ib_send_lat's half round trip; the
# other algorithms (rhd, direct, ring) take two dependent exchanges. The planner's choice is
# logged (TUNING), and the time per exchange is the call's divided by its exchanges.
tribperf bw TRIB_TRANSPORT=verbs -- -C broadcast -b 1M -e 1M -n "$bw_iters" -w 5
tribperf lat TRIB_TRANSPORT=verbs -- -C broadcast -b 8 -e 8 -n "$trib_lat_iters" -w 200
tribperf lat_ar TRIB_TRANSPORT=verbs TRIB_DEBUG=INFO TRIB_DEBUG_SUBSYS=TUNING -- \
  -C allreduce -b 8 -e 8 -n "$trib_lat_iters" -w 200 -L 1
# The same over the remote windows: one-shot, whose 8 bytes ride in the signal's record (carried
# bytes), so a call is one RDMA WRITE each way, ib_write_lat's half round trip.
tribperf lat_ar_win TRIB_TRANSPORT=verbs TRIB_ALGO=oneshot TRIB_ALGO_STRICT=1 -- \
  -C allreduce -b 8 -e 8 -n "$trib_lat_iters" -w 200 -L 1
# UCX over rxe needs UD's destination-GID check off (tests/vm/ucx-probe.sh, docs/VERBS.md).
ucx_rxe=(TRIB_TRANSPORT=ucx UCX_TLS=rc,self UCX_UD_VERBS_ETH_DGID_CHECK=n)
tribperf lat_ar_ucx_rc "${ucx_rxe[@]}" TRIB_DEBUG=INFO TRIB_DEBUG_SUBSYS=TUNING -- -C allreduce -b 8 -e 8 -n "$trib_lat_iters" -w 200
for t in verbs ucx_rc ucx_tcp; do
  case $t in
    verbs) e=(TRIB_TRANSPORT=verbs) ;;
    ucx_rc) e=("${ucx_rxe[@]}") ;;
    ucx_tcp) e=(TRIB_TRANSPORT=ucx UCX_TLS=tcp,self UCX_NET_DEVICES=all) ;;
  esac
  tribperf "ar_$t" "${e[@]}" -- -C allreduce -b 64K -e 4M -f 4 -n 20 -w 2
done

# size count type redop root time algbw busbw (out-of-place first)
bw=$(awk '$1 == 1048576 {printf "%.2f", $1 / $6}' "$dir/bw.out")  # bytes/us = MB/s
lat=$(awk '$1 == 8 {print $6}' "$dir/lat.out")                   # us per call, out-of-place
lat_ar=$(awk '$1 == 8 {print $6}' "$dir/lat_ar.out")
# -L 1 adds each side's fastest and median call after its #wrong (columns 10 and 11, out-of-place).
lat_ar_min=$(awk '$1 == 8 {print $10}' "$dir/lat_ar.out")
lat_ar_p50=$(awk '$1 == 8 {print $11}' "$dir/lat_ar.out")
lat_ar_ucx=$(awk '$1 == 8 {print $6}' "$dir/lat_ar_ucx_rc.out")
win_min=$(awk '$1 == 8 {print $10}' "$dir/lat_ar_win.out")
win_p50=$(awk '$1 == 8 {print $11}' "$dir/lat_ar_win.out")
lat_typ=$(awk '$1 == 8 {print $5}' "$dir/ib_write_lat.client")
ratio() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN {if (a > 0 && b > 0) printf "%.2f", a / b; else print "?"}'; }
echo
echo "perf: ib_write_bw 1 MiB ${bw_ref:-?} MB/s; trib-perf verbs p2p 1 MiB ${bw:-?} MB/s; ratio $(ratio "$bw" "$bw_ref")"
echo "perf: ib_write_lat 8 B -n $lat_iters: t_min ${lat_min:-?} us, t_avg ${lat_avg:-?} us"
echo "perf: ib_send_lat 8 B -n $lat_iters: t_min ${send_min:-?} us, t_typical ${send_typ:-?} us, t_avg ${send_avg:-?} us"
chosen() {  # run name: the algorithm(s) the planner logged for the 8-byte all-reduce
  grep -ho 'allreduce 8 B on 2 ranks -> [a-z_]*' "$dir/$1.out" "$dir/$1.rank1" 2> /dev/null |
    sed 's/.*-> //' | sort -u | tr '\n' ' '
}
algo=$(chosen lat_ar) algo_ucx=$(chosen lat_ar_ucx_rc)
exchanges() { [ "$1" = "allgather_reduce " ] && echo 1 || echo 2; }  # per call
ex=$(exchanges "$algo") ex_ucx=$(exchanges "$algo_ucx")
per_exchange() { awk -v a="${1:-0}" -v e="${2:-$ex}" 'BEGIN {if (a > 0) printf "%.2f", a / e; else print "?"}'; }
echo "perf: trib-perf verbs 8 B, $trib_lat_iters calls timed together: broadcast ${lat:-?} us/call;" \
  "all-reduce (${algo:-?}) ${lat_ar:-?} us/call, $(per_exchange "$lat_ar") us per exchange;" \
  "over UCX rc (rxe) all-reduce (${algo_ucx:-?}) ${lat_ar_ucx:-?} us/call, $(per_exchange "$lat_ar_ucx" "$ex_ucx") us per exchange"
echo "perf: trib-perf verbs 8 B all-reduce, call by call (the slower rank's): fastest ${lat_ar_min:-?} us," \
  "median ${lat_ar_p50:-?} us; per exchange $(per_exchange "$lat_ar_min") / $(per_exchange "$lat_ar_p50") us"
echo "perf: ratios per exchange: fastest/ib_send_lat t_min $(ratio "$(per_exchange "$lat_ar_min")" "$send_min")," \
  "median/ib_send_lat t_typical $(ratio "$(per_exchange "$lat_ar_p50")" "$send_typ")"
echo "perf: trib-perf verbs 8 B all-reduce over the windows (one-shot, carried), call by call: fastest" \
  "${win_min:-?} us, median ${win_p50:-?} us; ratios to ib_write_lat: fastest/t_min $(ratio "$win_min" "$lat_min")," \
  "median/t_typical $(ratio "$win_p50" "$lat_typ")"
echo "perf: ratios to t_avg: broadcast/ib_write_lat $(ratio "$lat" "$lat_avg")," \
  "broadcast/ib_send_lat $(ratio "$lat" "$send_avg"), all-reduce exchange/ib_send_lat $(ratio "$(per_exchange "$lat_ar")" "$send_avg")"
for t in verbs ucx_rc ucx_tcp; do
  # Two ranks: busbw = 2(n-1)/n * size / time = size / time.
  echo "perf: all-reduce busbw over $t (MB/s, out-of-place):" \
    "$(awk '$1 ~ /^[0-9]+$/ && $6 > 0 {printf "%s=%.2f ", $1, $1 / $6}' "$dir/ar_$t.out" 2> /dev/null)"
done
rm -rf "$dir"
