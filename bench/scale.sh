#!/usr/bin/env bash
# Planning, simulation and verification at cluster scale (docs/PLANNER.md, "Scale"): for GB300
# NVL72 clusters of 64, 256, 1,024 and 1,820 racks (4,608 .. 131,040 GPUs), the planner's choice
# for a 1 GiB all-reduce and its planning time, the simulation of that plan (wall and CPU
# seconds, peak memory), and the verifier on the hierarchical switch schedule (hier_switch, one
# domain per rack) with two elements per rank. Wall time on a shared machine is noisy: the CPU
# seconds say what the work costs. --no-symmetry simulates every NVLink domain (not one per class
# of identical domains: docs/PLANNER.md, "Simulator").
#
#   bench/scale.sh [--build DIR] [--racks "64 256 1024 1820"] [--no-simulate] [--no-verify] [--no-symmetry]
set -u
BUILD=build RACKS="64 256 1024 1820" SIM=1 VER=1 SIMOPT=
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --racks) RACKS=$2; shift 2 ;;
    --no-simulate) SIM=0; shift ;;
    --no-verify) VER=0; shift ;;
    --no-symmetry) SIMOPT=--no-symmetry; shift ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scale.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
PLAN=$BUILD/tools/trib-plan VERIFY=$BUILD/tools/trib-verify
for t in "$PLAN" "$VERIFY"; do
  [ -x "$t" ] || { echo "scale.sh: $t not found (ninja -C $BUILD trib-plan trib-verify)" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "scale.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Runs a command under /usr/bin/time; prints "wall_s cpu_s peak_MiB".
measured() {
  /usr/bin/time -f "%e %U %S %M" -o "$log.t" "$@" > "$log" 2>&1 || { echo "failed: $*" >&2; tail -3 "$log" >&2; }
  awk '{printf "%.1f %.1f %.0f", $1, $2 + $3, $4 / 1024}' "$log.t"
}
printf "%-8s %-8s %-12s %-10s | %-24s | %-24s\n" racks ranks choice plan_ms "simulate wall/cpu s, MiB" \
  "verify wall/cpu s, MiB"
for r in $RACKS; do
  n=$((r * 72))
  read -r wall cpu mib < <(measured "$PLAN" --gen "nvl72-cluster:$r" --bytes 1G)
  choice=$(grep -o '^choice: [a-z_]*' "$log" | cut -d' ' -f2)
  planms=$(grep -o 'planning time: [0-9.]* ms' "$log" | awk '{print $3}')
  sim="-" ver="-"
  if [ "$SIM" = 1 ]; then
    read -r wall cpu mib < <(measured "$PLAN" --gen "nvl72-cluster:$r" --bytes 1G --simulate $SIMOPT)
    ratio=$(grep -o 'simulated / model = [0-9.]*' "$log" | awk '{print $5}')
    us=$(grep -o '^simulated [a-z_]*: time [0-9.]*' "$log" | awk '{print $4}')
    doms=$(grep -o 'domains simulated: [0-9]*' "$log" | awk '{print $3}')
    sim="$wall/$cpu, $mib ($us us, sim/model $ratio${doms:+, $doms domains run})"
  fi
  if [ "$VER" = 1 ]; then
    read -r wall cpu mib < <(measured "$VERIFY" --ranks "$n" --ranks-per-domain 72 --coll allreduce \
      --algo hier_switch --count $((2 * n)))
    ok=$(grep -c 'FAILED' "$log")
    ver="$wall/$cpu, $mib$([ "$ok" = 0 ] || echo ' FAILED')"
  fi
  printf "%-8s %-8s %-12s %-10s | %-24s | %-24s\n" "$r" "$n" "$choice" "$planms" "$sim" "$ver"
done
rm -f "$log.t"
