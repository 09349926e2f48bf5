#!/bin/sh
# In the RDMA test guest: rdma-core's ibv_rc_pingpong between rxe0 (server) and rxe1 (client),
# SIZE bytes, ITERS round trips. Both must succeed.
size=${1:-4096} iters=${2:-50}
ibv_rc_pingpong -d "$TRIB_VM_HCA0" -g "$TRIB_VM_GID0" -s "$size" -n "$iters" &
server=$!
sleep 2
ibv_rc_pingpong -d "$TRIB_VM_HCA1" -g "$TRIB_VM_GID1" -s "$size" -n "$iters" "$TRIB_VM_IP0"
client=$?
wait $server
[ $client = 0 ] && [ $? = 0 ]
