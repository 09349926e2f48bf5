#!/bin/bash
# In the RDMA test guest (tests/vm/rdma-vm.sh): trib-perf over the verbs transport against
# perftest's ib_write_bw and ib_write_lat on the same two rxe devices, in the same boot, and the
# all-reduce over verbs vs UCX. Prints each tool's output and then the ratios (docs/BENCHMARKS.md).
#   perf.sh TRIB_PERF [BW_ITERS] [LAT_ITERS]
set -u
perf=$1 bw_iters=${2:-200} lat_iters=${3:-2000}
dir=$(mktemp -d)

# perftest: server on rxe0, client on rxe1 (the client prints the same table).
perftest() {  # tool args...
  local tool=$1
  shift
  "$tool" -d "$TRIB_VM_HCA0" -x "$TRIB_VM_GID0" -F "$@" > "$dir/$tool.server" 2>&1 &
  local server=$!
  sleep 2
  "$tool" -d "$TRIB_VM_HCA1" -x "$TRIB_VM_GID1" -F "$@" "$TRIB_VM_IP0" 2>&1 | tee "$dir/$tool.client"
  wait $server
}
perftest ib_write_bw -s 1048576 -n "$bw_iters"
perftest ib_write_lat -s 8 -n "$lat_iters"
bw_ref=$(awk '$1 == 1048576 {print $4}' "$dir/ib_write_bw.client")   # BW average [MB/sec]
lat_ref=$(awk '$1 == 8 {print $5}' "$dir/ib_write_lat.client")        # t_typical [usec]

# trib-perf: two processes, one per device, joined through a file store.
tribperf() {  # name env... -- trib-perf args...
  local name=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local store=$dir/store.$name
  mkdir -p -m 700 "$store"
  env TRIB_RANK=1 TRIB_NRANKS=2 TRIB_STORE_DIR="$store" TRIB_IB_HCA="$TRIB_VM_HCA1" \
    UCX_NET_DEVICES="$TRIB_VM_HCA1:1" "${envs[@]}" "$perf" "$@" > "$dir/$name.rank1" 2>&1 &
  local other=$!
  env TRIB_RANK=0 TRIB_NRANKS=2 TRIB_STORE_DIR="$store" TRIB_IB_HCA="$TRIB_VM_HCA0" \
    UCX_NET_DEVICES="$TRIB_VM_HCA0:1" "${envs[@]}" "$perf" "$@" 2>&1 | tee "$dir/$name.out"
  wait $other || { echo "perf: $name rank 1 failed:"; cat "$dir/$name.rank1"; }
}
# Broadcast between two ranks is one message from rank 0 to rank 1: point-to-point.
tribperf bw TRIB_TRANSPORT=verbs -- -C broadcast -b 1M -e 1M -n "$bw_iters" -w 5
tribperf lat TRIB_TRANSPORT=verbs -- -C broadcast -b 8 -e 8 -n "$lat_iters" -w 50
for t in verbs ucx_rc ucx_tcp; do
  case $t in
    verbs) e=(TRIB_TRANSPORT=verbs) ;;
    ucx_rc) e=(TRIB_TRANSPORT=ucx UCX_TLS=rc,self) ;;
    ucx_tcp) e=(TRIB_TRANSPORT=ucx UCX_TLS=tcp,self UCX_NET_DEVICES=all) ;;
  esac
  tribperf "ar_$t" "${e[@]}" -- -C allreduce -b 64K -e 4M -f 4 -n 20 -w 2
done

# size count type redop root time algbw busbw (out-of-place first)
bw=$(awk '$1 == 1048576 {printf "%.2f", $1 / $6}' "$dir/bw.out")  # bytes/us = MB/s
lat=$(awk '$1 == 8 {print $6}' "$dir/lat.out")              # us
echo
echo "perf: ib_write_bw 1 MiB ${bw_ref:-?} MB/s; trib-perf verbs p2p 1 MiB ${bw:-?} MB/s;" \
  "ratio $(awk -v a="${bw:-0}" -v b="${bw_ref:-0}" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "?"}')"
echo "perf: ib_write_lat 8 B ${lat_ref:-?} us; trib-perf verbs p2p 8 B ${lat:-?} us;" \
  "ratio $(awk -v a="${lat:-0}" -v b="${lat_ref:-0}" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "?"}')"
for t in verbs ucx_rc ucx_tcp; do
  # Two ranks: busbw = 2(n-1)/n * size / time = size / time.
  echo "perf: all-reduce busbw over $t (MB/s, out-of-place):" \
    "$(awk '$1 ~ /^[0-9]+$/ && $6 > 0 {printf "%s=%.2f ", $1, $1 / $6}' "$dir/ar_$t.out" 2> /dev/null)"
done
rm -rf "$dir"
