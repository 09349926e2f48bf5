#!/bin/bash
# Runs inside the RDMA test guest, chrooted into the host's root (tests/vm/guest-init.sh): makes
# two soft-RoCE devices that play two hosts, then runs OUT/commands one by one.
#
# Both veth ends live in one kernel, so by default traffic between their addresses would go over
# `lo`, which rxe drops. Hence: the `local` routing rule moves behind rules that send what leaves
# through a veth out of that veth; received packets from a local source are accepted
# (accept_local, no reverse-path filter); neighbours are permanent. rxe on 6.1 works only in the
# initial network namespace, so both devices live there.
set -u
out=$1
cmd_timeout=${TRIB_VM_CMD_TIMEOUT:-240}
export HOME=/tmp TMPDIR=/tmp PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
cd /tmp
hostname tribvm 2> /dev/null
log() { echo "vm: $*"; }

ip link set lo up
ip link add veth0 type veth peer name veth1
ip0=10.77.0.1 ip1=10.77.0.2
for i in 0 1; do
  ip link set veth$i mtu 9000 up
  eval "ip addr add \$ip$i/24 dev veth$i"
  sysctl -qw net.ipv4.conf.veth$i.accept_local=1 net.ipv4.conf.veth$i.rp_filter=0
done
sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.all.accept_local=1
ip rule add pref 200 lookup local
ip rule del pref 0
# Only the other end's address: a device's own address stays local (rxe's loopback, for two
# ranks on one device).
ip route add $ip1 dev veth0 src $ip0 table 100
ip route add $ip0 dev veth1 src $ip1 table 101
ip rule add pref 100 iif lo oif veth0 lookup 100
ip rule add pref 101 iif lo oif veth1 lookup 101
mac0=$(cat /sys/class/net/veth0/address) mac1=$(cat /sys/class/net/veth1/address)
ip neigh replace $ip1 lladdr "$mac1" dev veth0 nud permanent
ip neigh replace $ip0 lladdr "$mac0" dev veth1 nud permanent
rdma link add rxe0 type rxe netdev veth0
rdma link add rxe1 type rxe netdev veth1

# Ports turn ACTIVE some seconds after the link is up (about 28 s under TCG); bounded.
for _ in $(seq 1 120); do
  s0=$(cat /sys/class/infiniband/rxe0/ports/1/state 2> /dev/null)
  s1=$(cat /sys/class/infiniband/rxe1/ports/1/state 2> /dev/null)
  case "$s0$s1" in *ACTIVE*ACTIVE*) break ;; esac
  sleep 1
done
log "rxe0 port: ${s0:-none}, rxe1 port: ${s1:-none}"

# The RoCEv2 GID of each device's IPv4 address (what TRIB_IB_GID_INDEX would force).
roce_v2_gid() {
  local p=/sys/class/infiniband/$1/ports/1 f i
  for f in "$p"/gid_attrs/types/*; do
    i=${f##*/}
    [ "$(cat "$f" 2> /dev/null)" = "RoCE v2" ] || continue
    case $(cat "$p/gids/$i") in 0000:0000:0000:0000:0000:ffff:*) echo "$i"; return ;; esac
  done
}
export TRIB_VM_HCA0=rxe0 TRIB_VM_HCA1=rxe1 TRIB_VM_IP0=$ip0 TRIB_VM_IP1=$ip1
TRIB_VM_GID0=$(roce_v2_gid rxe0) TRIB_VM_GID1=$(roce_v2_gid rxe1)
export TRIB_VM_GID0 TRIB_VM_GID1
log "RoCEv2 GID index: rxe0 ${TRIB_VM_GID0:-none}, rxe1 ${TRIB_VM_GID1:-none}"
cs=/sys/devices/system/clocksource/clocksource0
log "clocksource: $(cat $cs/current_clocksource 2> /dev/null) (available: $(cat $cs/available_clocksource 2> /dev/null))"
echo "rdma-vm: ran on rxe0 (veth0 $ip0, port ${s0:-none}, RoCE v2 GID ${TRIB_VM_GID0:-none}) and rxe1 (veth1 $ip1, port ${s1:-none}, RoCE v2 GID ${TRIB_VM_GID1:-none}) in kernel $(uname -r)" > "$out/devices"

# The devices' protocol counters (retries, RNR NAKs, sequence errors, drops): what changed during a
# command ends its log, so a slow or failed run says what the soft NICs did meanwhile.
counters() {
  local d f
  for d in rxe0 rxe1; do
    for f in /sys/class/infiniband/$d/ports/1/hw_counters/*; do
      [ -r "$f" ] && echo "$d ${f##*/} $(cat "$f" 2> /dev/null)"
    done
  done
}
counter_changes() {
  awk 'NR == FNR { before[$1 " " $2] = $3; next }
       { d = $3 - before[$1 " " $2]; if (d != 0 && $2 !~ /^(sent_pkts|rcvd_pkts)$/) line = line " " $1 ":" $2 "+" d }
       END { print "vm: rxe counters during this command:" (line == "" ? " no retries, NAKs or drops" : line) }' "$1" -
}

summary=$out/summary.tmp
: > "$summary"
while read -r name cmd; do
  case $name in '' | '#'*) continue ;; esac
  t0=$(date +%s)
  counters > /tmp/counters.before
  timeout --kill-after=5 "$cmd_timeout" bash -c "$cmd" > "$out/$name.log" 2>&1 < /dev/null
  rc=$?
  counters | counter_changes /tmp/counters.before >> "$out/$name.log"
  echo $rc > "$out/$name.rc"
  verdict=PASS
  [ $rc -eq 0 ] || verdict="FAIL (exit $rc)"
  echo "$name $(($(date +%s) - t0))s $verdict" | tee -a "$summary"
done < "$out/commands"
mv "$summary" "$out/summary"
sync
