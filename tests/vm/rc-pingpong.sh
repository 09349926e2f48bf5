#!/bin/sh
# In the RDMA test guest: rdma-core's ibv_rc_pingpong between rxe0 (server) and rxe1 (client),
# SIZE bytes, ITERS round trips. Exits 0 only when both succeed; each run is bounded, and a
# server left waiting for a client that failed is ended.
size=${1:-4096} iters=${2:-50}
bound=${TRIB_VM_PINGPONG_TIMEOUT:-60}
timeout "$bound" ibv_rc_pingpong -d "$TRIB_VM_HCA0" -g "$TRIB_VM_GID0" -s "$size" -n "$iters" &
server=$!
sleep "${TRIB_VM_PINGPONG_DELAY:-2}"  # the server listens
timeout "$bound" ibv_rc_pingpong -d "$TRIB_VM_HCA1" -g "$TRIB_VM_GID1" -s "$size" -n "$iters" "$TRIB_VM_IP0"
client=$?
# A client that failed before connecting leaves the server waiting for one.
[ $client = 0 ] || kill $server 2> /dev/null
wait $server
server_rc=$?
[ $client = 0 ] || echo "rc-pingpong: the client (rxe1) failed: exit $client"
[ $server_rc = 0 ] || echo "rc-pingpong: the server (rxe0) failed: exit $server_rc"
[ $client = 0 ] && [ $server_rc = 0 ]
