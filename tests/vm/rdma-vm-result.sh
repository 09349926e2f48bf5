#!/bin/sh
# One command's result from the RDMA test guest's run (tests/vm/CMakeLists.txt): prints the
# devices it ran on and its output, exits with its status; 77 (skipped) where the guest could not
# run here, with the reason.
out=$1 name=$2
if [ -f "$out/skipped" ]; then
  cat "$out/skipped"
  exit 77
fi
if [ ! -f "$out/$name.rc" ]; then
  echo "rdma-vm: no result for '$name' (the guest did not run it; see $out/console)"
  exit 1
fi
cat "$out/devices" 2> /dev/null
cat "$out/$name.log"
rc=$(cat "$out/$name.rc")
[ "$rc" = 124 ] && echo "rdma-vm: '$name' ran past its bound in the guest"
exit "$rc"
