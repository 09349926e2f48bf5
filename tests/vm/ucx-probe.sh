#!/bin/bash
# In the RDMA test guest (tests/vm/rdma-vm.sh): can UCX 1.13 run over the two rxe devices? UCX's
# own tools only (no Tributary code): `ucx_info -d`, then ucx_perftest between rxe0 (server) and
# rxe1 (client) at the UCT level (one transport, one device each side) and at the UCP level
# (UCX_TLS variants, with and without error handling, as Tributary's UCX transport creates its
# endpoints). Prints one verdict line per case ("ucx-probe: CASE: ok ..." or "... FAILED ...")
# and each failure's last lines; every run is bounded. Exits 0 (it reports, it does not judge).
#   ucx-probe.sh [CASE-FILTER]   (a grep -E pattern on the case names; default all)
set -u
filter=${1:-.}
bound=${TRIB_VM_UCX_PROBE_TIMEOUT:-60}
dir=$(mktemp -d)
port=13400
echo "ucx-probe: $(ucx_info -v | head -1)"
echo "ucx-probe: ucx_info -d (rxe and self only):"
timeout "$bound" ucx_info -d 2>&1 | grep -E "Memory domain|Component|Transport|Device|bandwidth|latency|max short|error handling" |
  grep -B1 -A5 -E "Memory domain: rxe|Transport: (rc_verbs|ud_verbs|self)" | head -80

# One server/client pair. envs for both sides, then "--" and ucx_perftest's arguments; the server
# runs on rxe0 and the client on rxe1 (UCX_NET_DEVICES, or -d for UCT tests via @DEV@).
run_case() {  # name env... -- args...
  local name=$1 envs=()
  shift
  echo "$name" | grep -qE "$filter" || return 0
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  port=$((port + 1))
  local sargs=("${@//@DEV@/$TRIB_VM_HCA0:1}") cargs=("${@//@DEV@/$TRIB_VM_HCA1:1}")
  env UCX_NET_DEVICES="$TRIB_VM_HCA0:1" "${envs[@]}" timeout "$bound" ucx_perftest -p $port "${sargs[@]}" \
    > "$dir/$name.server" 2>&1 &
  local server=$!
  sleep 3  # the server listens
  env UCX_NET_DEVICES="$TRIB_VM_HCA1:1" "${envs[@]}" timeout "$bound" ucx_perftest 127.0.0.1 -p $port \
    "${cargs[@]}" > "$dir/$name.client" 2>&1
  local crc=$?
  [ $crc = 0 ] || { sleep 2; kill $server 2> /dev/null; }
  wait $server
  local src=$?
  # -f: the final line is "iterations latency(typical avg overall) ..." or bandwidth figures.
  local result
  result=$(grep -E '^ +[0-9]+ ' "$dir/$name.client" | tail -1 | tr -s ' ')
  if [ $crc = 0 ] && [ $src = 0 ]; then
    echo "ucx-probe: $name: ok (${envs[*]} ucx_perftest $*):$result"
  else
    echo "ucx-probe: $name: FAILED (client exit $crc, server exit $src; ${envs[*]} ucx_perftest $*)"
    # UCX's own messages (errors, assertions, fatal errors), not its backtraces.
    echo "  client:"; grep -m6 -E 'Assert|Fatal|ERROR|WARN|failed|error' "$dir/$name.client" | cut -c1-300 | sed 's/^/    /'
    echo "  server:"; grep -m6 -E 'Assert|Fatal|ERROR|WARN|failed|error' "$dir/$name.server" | cut -c1-300 | sed 's/^/    /'
  fi
}

lat=(-s 8 -n 2000 -w 200 -f)
# UD's check of the destination GID in received packets (UCX_UD_VERBS_ETH_DGID_CHECK, default y)
# reads the packet type from the completion's sl field, as mlx5 sets it; rxe leaves it 0 (RoCE v1,
# a 16-byte GID), so every RoCE v2 (IPv4) packet is taken for another GID's and dropped.
nodgid=UCX_UD_VERBS_ETH_DGID_CHECK=n
# UCT: each verbs transport alone (no wireup, the addresses go over ucx_perftest's socket).
run_case uct_rc_verbs_am_lat -- -t am_lat -d @DEV@ -x rc_verbs "${lat[@]}"
run_case uct_rc_verbs_put_lat -- -t put_lat -d @DEV@ -x rc_verbs "${lat[@]}"
run_case uct_ud_verbs_am_lat -- -t am_lat -d @DEV@ -x ud_verbs "${lat[@]}"
run_case uct_ud_verbs_am_lat_nodgid $nodgid -- -t am_lat -d @DEV@ -x ud_verbs "${lat[@]}"
# UCP tag matching: what Tributary's UCX transport uses. _err: endpoints with error handling
# (-e, UCP_ERR_HANDLING_MODE_PEER), as Tributary creates them.
run_case ucp_rc_self_tag_lat UCX_TLS=rc,self -- -t tag_lat "${lat[@]}"
run_case ucp_rc_self_tag_lat_err UCX_TLS=rc,self -- -t tag_lat -e "${lat[@]}"
run_case ucp_rc_verbs_self_tag_lat_err UCX_TLS=rc_verbs,self -- -t tag_lat -e "${lat[@]}"
run_case ucp_ud_verbs_self_tag_lat_err UCX_TLS=ud_verbs,self -- -t tag_lat -e "${lat[@]}"
for tls in rc,self rc_v,self rc_verbs,ud_verbs,self ud_verbs,self ud_v,self; do
  run_case "ucp_${tls//,/_}_tag_lat_err_nodgid" UCX_TLS=$tls $nodgid -- -t tag_lat -e "${lat[@]}"
done
# The RoCE v2 GID forced, and rc with a large message (rendezvous, zero copy).
run_case ucp_rc_self_gid_tag_lat_err_nodgid UCX_TLS=rc,self UCX_IB_GID_INDEX="$TRIB_VM_GID0" $nodgid -- \
  -t tag_lat -e "${lat[@]}"
run_case ucp_rc_self_tag_bw_1m_err_nodgid UCX_TLS=rc,self $nodgid -- -t tag_bw -e -s 1048576 -n 50 -w 5 -f
rm -rf "$dir"
exit 0
