#!/usr/bin/env bash
# Tributary vs Open MPI vs Gloo: float32 sum all-reduce, 2 and 4 processes, 8 B .. 256 MiB, on this
# machine, in one go. Prints busbw side by side with the ratios Tributary/peer, and 8-byte latency.
# Every library is measured the same way (trib-perf / nccl-tests conventions: warm-up, timed
# iterations, time = max over ranks, busbw = S/t * 2(n-1)/n, every result checked). The libraries
# take turns for --rounds rounds; each size's time is the median over rounds, and the ratio column
# also gives the range of the per-round ratios (this machine's speed drifts by 3x over minutes).
# Tributary runs twice: with heap buffers, and with -R 1 (buffers from tribMemAlloc, which the
# processes could map: the trib-R1 column, against Open MPI's shared memory).
#
#   bench/compare.sh [--build DIR] [--out DIR] [--ranks "2 4"] [--maxbytes 256M] [--rounds 3] [--quick]
#   bench/compare.sh --report DIR [--ranks "2 4"] [--rounds 3]   (the table again from DIR's files)
#
# Needs: DIR/bench/trib-perf, and (when built) DIR/bench/peers/{mpi,gloo}_allreduce_bench, mpirun.
# A peer that is missing or fails shows as "-" / "FAIL" in the table; the script goes on.
set -u

BUILD=build
OUT=""
RANKS="2 4"
MAXBYTES=256M
# Three size ranges, each with its own iteration count: sub-microsecond calls need thousands of
# iterations to rise above timer and scheduler noise; 256 MiB ones need few (keeps a round ~4 min).
TINY_END=64K                # 8 B .. TINY_END
SPLIT=8M                    # .. SPLIT/2: SMALL_ITERS; SPLIT .. max: LARGE_ITERS
TINY_ITERS="-n 2000 -w 100"
GLOO_TINY_ITERS="-n 100 -w 10"  # Gloo's small all-reduce takes ~1 ms over TCP (4 ranks: several)
# Ten warm-up calls from 128 KiB: Tributary's two-shot settles its cell mode over its first ten
# operations of a size (docs/BOOTSTRAP.md); every library gets the same.
SMALL_ITERS="-n 50 -w 10"
LARGE_ITERS="-n 5 -w 10"
RUN_TIMEOUT=240             # seconds, per benchmark invocation
ROUNDS=3
REPORT_ONLY=0

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit "$1"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --maxbytes) MAXBYTES=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --report) OUT=$2; REPORT_ONLY=1; shift 2 ;;
    --quick) MAXBYTES=16M; SPLIT=4M; TINY_ITERS="-n 500 -w 50"; GLOO_TINY_ITERS="-n 20 -w 2"
             SMALL_ITERS="-n 10 -w 2"; LARGE_ITERS="-n 3 -w 1"; shift ;;
    -h|--help) usage 0 ;;
    *) echo "compare.sh: unknown argument '$1'" >&2; usage 2 ;;
  esac
done

TRIB=$BUILD/bench/trib-perf
MPIB=$BUILD/bench/peers/mpi_allreduce_bench
GLOOB=$BUILD/bench/peers/gloo_allreduce_bench
if [ ! -x "$TRIB" ]; then
  echo "compare.sh: $TRIB not found; build it: ninja -C $BUILD -j1 trib-perf" >&2
  exit 2
fi
command -v python3 >/dev/null || { echo "compare.sh: python3 is needed to print the table" >&2; exit 2; }
[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/trib-compare-XXXXXX)
mkdir -p "$OUT" || exit 2
LOG=$OUT/log.txt
[ $REPORT_ONLY = 1 ] || : >"$LOG"

# Tributary: real processes over shm when trib-perf can launch them, else ranks as threads.
if "$TRIB" --help 2>&1 | grep -q -- '--ranks' && "$TRIB" --help 2>&1 | grep -q -- '--transport'; then
  TRIB_MODE=procs
  TRIB_LABEL="trib(shm,procs)"
  # And with buffers from tribMemAlloc (-R 1), shareable across the processes.
  "$TRIB" --help 2>&1 | grep -q -- '--registered' && HAVE_REG=1
else
  TRIB_MODE=threads
  TRIB_LABEL="trib(threads)"
fi

# Open MPI, kept on this host: loopback for its TCP out-of-band and BTL, root allowed.
MPIRUN=""
if [ -x "$MPIB" ] && command -v mpirun >/dev/null; then
  MPIRUN="mpirun --oversubscribe --bind-to none"
  [ "$(id -u)" = 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
  export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
  export OMPI_MCA_plm_rsh_agent=false   # never try ssh
fi
HAVE_UCX=0
if [ -n "$MPIRUN" ] && command -v ompi_info >/dev/null && ompi_info 2>/dev/null | grep -q 'MCA pml: ucx'; then
  HAVE_UCX=1
fi

to_bytes() {
  python3 -c "
import sys
s = sys.argv[1]; m = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}
try:
    v = int(float(s[:-1]) * m[s[-1].upper()]) if s[-1:].upper() in m else int(s)
    assert v >= 8
except (ValueError, AssertionError):
    sys.exit('compare.sh: bad size %r: give bytes >= 8 with an optional K/M/G suffix' % s)
print(v)" "$1"
}
MAX_B=$(to_bytes "$MAXBYTES") || exit 2
SPLIT_B=$(to_bytes "$SPLIT") || exit 2
TINY_B=$(to_bytes "$TINY_END") || exit 2
TINY_MAX=$(( TINY_B < MAX_B ? TINY_B : MAX_B ))
SMALL_MAX=$(( SPLIT_B / 2 < MAX_B ? SPLIT_B / 2 : MAX_B ))

case "$ROUNDS" in ''|*[!0-9]*|0) echo "compare.sh: --rounds needs a positive integer" >&2; exit 2 ;; esac

# run NAME N CMD...: runs both size ranges, writing $OUT/NAME-nN-{small,large}-rROUND.json.
run() {
  local name=$1 n=$2; shift 2
  local part range iters rc=0
  local parts=tiny
  [ "$MAX_B" -ge $((TINY_B * 2)) ] && parts="$parts small"
  [ "$MAX_B" -ge "$SPLIT_B" ] && parts="$parts large"
  for part in $parts; do
    if [ $part = tiny ]; then
      range="-b 8 -e $TINY_MAX"
      iters=$TINY_ITERS
      [ "$name" = gloo ] && iters=$GLOO_TINY_ITERS
    elif [ $part = small ]; then
      range="-b $((TINY_B * 2)) -e $SMALL_MAX"
      iters=$SMALL_ITERS
    else
      range="-b $SPLIT -e $MAXBYTES"
      iters=$LARGE_ITERS
    fi
    local json=$OUT/$name-n$n-$part-r$ROUND.json
    rm -f "$json"
    echo "== $name n=$n $part: $* $range $iters -J $json" >>"$LOG"
    local t0=$SECONDS
    # shellcheck disable=SC2086
    timeout -k 5 $RUN_TIMEOUT "$@" $range $iters -J "$json" >>"$LOG" 2>&1 || rc=$?
    echo "== took $((SECONDS - t0)) s, exit $rc, load average now: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$LOG"
    if [ $rc -ne 0 ]; then
      echo "   $name n=$n $part FAILED (exit $rc; see $LOG)" >&2
      echo "{\"failed\":$rc}" >"$json"
      return
    fi
  done
}

START=$(date +%s)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
[ $REPORT_ONLY = 1 ] && RANKS_TO_RUN="" || RANKS_TO_RUN=$RANKS
for n in $RANKS_TO_RUN; do
for ROUND in $(seq 1 "$ROUNDS"); do
  echo "-- $n processes, round $ROUND of $ROUNDS" >&2
  if [ $TRIB_MODE = procs ]; then
    run trib "$n" "$TRIB" --ranks "$n" --transport shm
    [ "${HAVE_REG:-0}" = 1 ] && run trib_reg "$n" "$TRIB" --ranks "$n" --transport shm -R 1
  else
    run trib "$n" "$TRIB" --threads "$n"
  fi
  if [ -n "$MPIRUN" ]; then
    run ompi_sm "$n" $MPIRUN -np "$n" --mca pml ob1 --mca btl self,vader "$MPIB"
    [ $HAVE_UCX = 1 ] && run ompi_ucx "$n" $MPIRUN -np "$n" --mca pml ucx \
      --mca pml_ucx_tls any --mca pml_ucx_devices any "$MPIB"
  fi
  [ -x "$GLOOB" ] && run gloo "$n" "$GLOOB" --ranks "$n" -T $((RUN_TIMEOUT - 20))
done
done
END=$(date +%s)

python3 - "$OUT" "$RANKS" "$TRIB_LABEL" "$HAVE_UCX" "$([ -n "$MPIRUN" ] && echo 1 || echo 0)" \
  "$([ -x "$GLOOB" ] && echo 1 || echo 0)" "$((END - START))" \
  "$LOAD_BEFORE -> $(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)" "$ROUNDS" <<'PY'
import json, os, statistics, sys
out, ranks, trib_label, have_ucx, have_mpi, have_gloo, secs, loadavg, cores, rounds = sys.argv[1:11]
rounds = int(rounds)
# trib_reg: the same trib-perf with -R 1 (tribMemAlloc buffers); its files exist only when it ran.
peers = [("trib", trib_label), ("trib_reg", "trib(shm,-R 1)")]
if have_mpi == "1":
    peers.append(("ompi_sm", "ompi(sm)"))
    if have_ucx == "1":
        peers.append(("ompi_ucx", "ompi(ucx)"))
if have_gloo == "1":
    peers.append(("gloo", "gloo(tcp)"))

def load(name, n):
    """size -> [time_us per round], or the string 'FAIL'; None when not run."""
    times, seen = {}, False
    for r in range(1, rounds + 1):
        for part in ("tiny", "small", "large"):
            p = os.path.join(out, f"{name}-n{n}-{part}-r{r}.json")
            if not os.path.exists(p):
                continue
            seen = True
            try:
                d = json.load(open(p))
            except ValueError:
                return "FAIL"
            if "failed" in d or d.get("wrong", 0):
                return "FAIL"
            for row in d["results"]:
                times.setdefault(row["size"], {})[r] = row["out_of_place"]["time_us"]
    return times if seen else None

def human(b):
    for unit, k in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= k and b % k == 0:
            return f"{b // k}{unit}"
    return str(b)

print(f"# all-reduce float32 sum, out-of-place busbw in GB/s (time = max over ranks, median of {rounds} "
      f"rounds); Tributary as {trib_label}; run took {secs} s; files in {out}")
print(f"# {cores} cores; load average (1/5/15 min) before -> after: {loadavg}. Busy machines give noisy "
      f"numbers: compare ratios within one run, and repeat before trusting a single row.")
ok = True
for n in ranks.split():
    data = {name: load(name, n) for name, _ in peers}
    for name, label in peers:
        if data[name] == "FAIL":
            ok = False
            print(f"# {label} n={n}: FAILED (wrong results or error; see {out}/log.txt)")
    have = [(k, l) for k, l in peers if isinstance(data[k], dict)]
    if not have:
        continue
    sizes = sorted(set().union(*[data[k].keys() for k, _ in have]))
    others = [(k, l) for k, l in have if not k.startswith("trib")]
    # Ratio columns: trib against every peer; trib -R 1 against Open MPI's shared-memory path.
    pairs = [("trib", k) for k, _ in others] if "trib" in dict(have) else []
    if "trib_reg" in dict(have) and "ompi_sm" in dict(have):
        pairs.append(("trib_reg", "ompi_sm"))
    hdr = f"{'size':>6}" + "".join(f"{l:>17}" for _, l in have)
    hdr += "".join(f"{('trib-R1' if b == 'trib_reg' else b) + '/' + k + ' (range)':>26}" for b, k in pairs)
    print(f"\n## {n} processes")
    rtts = []
    for r in range(1, rounds + 1):
        for part in ("tiny", "small", "large"):
            try:
                v = json.load(open(os.path.join(out, f"trib-n{n}-{part}-r{r}.json"))).get("core_rtt_ns")
            except (OSError, ValueError):
                v = None
            if v:
                rtts.append(f"{v:.0f}")
    if rtts:
        print(f"# core-to-core round trip when each trib-perf started (ns): {', '.join(rtts)} "
              f"(~100: the two CPUs share a cache; ~340: they do not, and every cross-core copy is slower)")
    print(hdr)
    def median_us(k, s):
        t = data[k].get(s)
        return statistics.median(t.values()) if t else None
    def ratio_range(base, k, s, invert):
        """min-max over rounds of the per-round ratio (rounds where both ran)."""
        a, b = data[base].get(s, {}), data[k].get(s, {})
        rs = [(a[r] / b[r] if invert else b[r] / a[r]) for r in a if r in b and a[r] and b[r]]
        return f"({num(min(rs))}-{num(max(rs))})" if len(rs) > 1 else ""
    def num(v):
        return f"{v:.2f}" if v >= 0.1 else f"{v:.2g}"
    def fmt(v, width, prec=3):
        return f"{v:{width}.{prec}f}" if v is not None else f"{'-':>{width}}"
    def ratio_cell(base, k, s, invert):
        mt, mk = median_us(base, s), median_us(k, s)
        if not mt or not mk:
            return f"{'-':>26}"
        v = mt / mk if invert else mk / mt
        return f"{num(v):>12} {ratio_range(base, k, s, invert):>13}"
    for s in sizes:
        t = {k: median_us(k, s) for k, _ in have}
        bus = {k: (s / (t[k] * 1e-6) / 1e9 * 2 * (int(n) - 1) / int(n)) if t[k] else None for k, _ in have}
        line = f"{human(s):>6}" + "".join(fmt(bus[k], 17) for k, _ in have)
        # busbw ratio trib/peer at the same size = peer time / trib time (exact, no rounding).
        line += "".join(ratio_cell(b, k, s, False) for b, k in pairs)
        print(line)
    lat = {k: median_us(k, 8) for k, _ in have}
    line = f"{'8B us':>6}" + "".join(fmt(lat[k], 17, 2) for k, _ in have)
    line += "".join(ratio_cell(b, k, 8, True) for b, k in pairs)
    print(line)
    print("(busbw rows: ratio = trib busbw / peer busbw, > 1 means Tributary is faster; "
          "8B us row: 8-byte latency in us, ratio = trib time / peer time, < 1 means Tributary is faster; "
          "(lo-hi): the per-round ratios)")
sys.exit(0 if ok else 1)
PY
