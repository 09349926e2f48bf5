#!/usr/bin/env bash
# trib-plan --sweep --json writes every size's priced algorithms and choice; tools/plot_busbw.py
# draws it as a PNG (skipped, exit 77, where matplotlib is missing).
#   plot_sweep_test.sh TRIB_PLAN SOURCE_DIR WORK_DIR
set -euo pipefail
plan=$1 src=$2 work=$3
mkdir -p "$work"
"$plan" --gen dgx-h100:2 --sweep --json "$work/sweep.json" >/dev/null
/usr/bin/python3 - "$work/sweep.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
sizes = d["sizes"]
assert d["ranks"] == 16 and d["coll"] == "allreduce", d
assert [s["size"] for s in sizes] == [8 << k for k in range(32)], [s["size"] for s in sizes]
for s in sizes:
    algos = s["algorithms"]
    assert s["choice"] in algos, s
    assert all(a["busbw"] > 0 and a["time_us"] > 0 for a in algos.values()), s
    best = min(a["time_us"] for a in algos.values() if a["eligible"])
    assert algos[s["choice"]]["time_us"] <= best * 1.0001, s
print("sweep.json: %d sizes, %d algorithms priced" % (len(sizes), len(sizes[-1]["algorithms"])))
PY
if ! /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  echo "SKIP: no matplotlib for /usr/bin/python3 (python3-matplotlib)"
  exit 77
fi
/usr/bin/python3 "$src/tools/plot_busbw.py" --plan "$work/sweep.json" -o "$work/sweep.png" --title test
[ "$(head -c 8 "$work/sweep.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] || { echo "not a PNG"; exit 1; }
echo "sweep.png: $(stat -c %s "$work/sweep.png") bytes"
