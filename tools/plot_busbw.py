#!/usr/bin/python3
"""Bus bandwidth against size, predicted and measured on the same axes, as a PNG.

  tools/plot_busbw.py [--plan SWEEP.json ...] [--measured PERF.json ...] [--title T] -o OUT.png

--plan:     `trib-plan --sweep --json FILE`: one line per algorithm the model prices, the planner's
            choice at each size drawn over them as a thick line.
--measured: `trib-perf -J FILE` (or a peer benchmark's JSON, bench/peers): out-of-place busbw as
            points, in place as hollow points.
Needs Debian's python3-matplotlib (tools/setup-debian.sh installs it); run it with /usr/bin/python3.
"""
import argparse
import json
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"plot_busbw.py: {path}: {e}")


def size_label(b):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= scale:
            return f"{b // scale}{unit}"
    return f"{b}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", action="append", default=[], help="trib-plan --sweep --json file")
    ap.add_argument("--measured", action="append", default=[], help="trib-perf -J file")
    ap.add_argument("--title", default="")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    if not a.plan and not a.measured:
        ap.error("give at least one --plan or --measured file")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_busbw.py: needs matplotlib (apt-get install python3-matplotlib; /usr/bin/python3)")

    fig, ax = plt.subplots(figsize=(9, 5.5))
    sizes_seen = set()
    for path in a.plan:
        d = load(path)
        rows = d.get("sizes", [])
        algos = sorted({name for r in rows for name in r.get("algorithms", {})})
        tag = f" ({d.get('topology', path)}, {d.get('ranks', '?')} ranks)" if len(a.plan) > 1 else ""
        for name in algos:
            pts = [(r["size"], r["algorithms"][name]["busbw"]) for r in rows if name in r.get("algorithms", {})]
            if pts:
                ax.plot(*zip(*pts), linewidth=1, alpha=0.7, label=f"model: {name}{tag}")
        chosen = [(r["size"], r["algorithms"][r["choice"]]["busbw"]) for r in rows
                  if r.get("choice") in r.get("algorithms", {})]
        if chosen:
            ax.plot(*zip(*chosen), color="black", linewidth=3, alpha=0.35, label=f"planner's choice{tag}")
        sizes_seen.update(r["size"] for r in rows)
    # Files of one library and rank count (e.g. compare.sh's size ranges) join into one series.
    series = {}
    for path in a.measured:
        d = load(path)
        what = f"measured: {d.get('library', 'tributary')}, {d.get('ranks', '?')} ranks"
        for r in d.get("results", []):
            for mode in ("out_of_place", "in_place"):
                if mode in r and r[mode].get("busbw", 0) > 0:
                    series.setdefault((what, mode), []).append((r["size"], r[mode]["busbw"]))
            sizes_seen.add(r["size"])
    markers = "osD^v<>"
    for i, ((what, mode), pts) in enumerate(sorted(series.items())):
        ax.plot(*zip(*sorted(pts)), linestyle="none", marker=markers[(i // 2) % len(markers)], markersize=5,
                markerfacecolor=None if mode == "out_of_place" else "none",
                label=f"{what} ({mode.replace('_', ' ')})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = sorted(s for s in sizes_seen if s > 0 and (s & (s - 1)) == 0 and (s.bit_length() - 1) % 4 == 3)
    if ticks:
        ax.set_xticks(ticks)
        ax.set_xticklabels([size_label(s) for s in ticks])
    ax.set_xlabel("size (bytes, nccl-tests' S)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(a.title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"plot_busbw.py: wrote {a.out}")


if __name__ == "__main__":
    main()
