#!/bin/sh
# trib-perf -L 1: every row gains each side's fastest and median call (the slowest rank's), and
# they must be consistent with the average: 0 < min <= p50 and min <= time, for every size, both
# sides; every result is checked (#wrong 0).
#   trib-perf-latency.sh TRIB_PERF ARGS...
perf=$1
shift
out=$(timeout 240 "$perf" -L 1 "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || { echo "FAILED: trib-perf exited $rc"; exit 1; }
# Rows: size count type redop root | time algbw busbw #wrong min p50 | the same in place.
printf '%s\n' "$out" | awk '
  /^ *[0-9]/ {
    rows++
    if (NF != 17) { print "FAILED: " NF " columns, want 17: " $0; bad = 1; next }
    for (s = 6; s <= 12; s += 6) {
      t = $s; w = $(s + 3); mn = $(s + 4); p50 = $(s + 5)
      if (w != 0 || !(mn > 0) || mn > p50 || mn > t) { print "FAILED: inconsistent: " $0; bad = 1 }
    }
  }
  END {
    if (rows == 0) { print "FAILED: no result rows"; bad = 1 }
    exit bad
  }' || exit 1
echo "per-call columns consistent"
