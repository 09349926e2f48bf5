#!/bin/sh
# trib-perf --mem device on a machine without a CUDA driver/device (or a build without CUDA) must
# fail fast with the library's clear message and a plain error exit (no crash, no hang).
#   trib-perf-no-device.sh TRIB_PERF EXPECTED_MESSAGE
# Skips (77) where a GPU is present: tests/gpu/run-on-device.sh runs trib-perf on it there.
perf=$1
want=$2
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "a GPU is present: the device run is tests/gpu/run-on-device.sh's"
  exit 77
fi
status=0
for args in "--mem device" "--mem device -t 3" "--mem device -g 2" "--mem device --ranks 2"; do
  out=$(timeout 60 "$perf" $args -b 8 -e 1K 2>&1)
  rc=$?
  echo "trib-perf $args -> exit $rc: $out"
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then
    echo "FAILED: expected a plain error exit (1), got $rc"
    status=1
  elif ! printf '%s\n' "$out" | grep -q -- "$want"; then
    echo "FAILED: the message does not say '$want'"
    status=1
  fi
done
# Bad memory-option input: usage errors (2), before anything runs.
for args in "--mem gpu" "--ranks 2 -g 2" "--mem device -g 0" "--mem device -R 1" "--mem device -L 1"; do
  out=$(timeout 60 "$perf" $args 2>&1)
  rc=$?
  echo "trib-perf $args -> exit $rc: $out"
  [ "$rc" -eq 2 ] || {
    echo "FAILED: expected exit 2"
    status=1
  }
done
exit $status
