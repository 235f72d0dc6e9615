#!/usr/bin/env python3
"""Time against joules for every candidate of a GEMM plan, the Pareto front
marked, and the plans chosen by time, energy and energy x time.

  python3 plot_pareto.py CANDIDATES.csv [OUT.png]

CANDIDATES.csv is what `bench_plan_energy --csv` writes. Needs matplotlib
(Debian: python3-matplotlib); prints the Pareto front as a table either way.
"""
import csv
import sys


def pareto(points):
    """Indices of the candidates no other beats in both time and joules."""
    front, best = [], float("inf")
    for i in sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1])):
        if points[i][1] < best:
            front.append(i)
            best = points[i][1]
    return front


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["fits"] == "1"]
    if not rows:
        print(f"{sys.argv[1]}: no candidate within the memory budget", file=sys.stderr)
        return 1
    pts = [(float(r["time_s"]), float(r["joules"])) for r in rows]
    front = pareto(pts)
    label = lambda r: f"{r['algo']} {r['d0']}x{r['d1']}x{r['d2']} ({r['roles']})"
    print(f"{'candidate':28s} {'time_s':>12s} {'joules':>12s}  chosen by")
    for i in front:
        r = rows[i]
        by = [n for n, k in (("time", "chosen_time"), ("energy", "chosen_energy"), ("energy x time", "chosen_edp"))
              if r[k] == "1"]
        print(f"{label(r):28s} {pts[i][0]:12.5g} {pts[i][1]:12.5g}  {', '.join(by)}")
    out = sys.argv[2] if len(sys.argv) == 3 else sys.argv[1].rsplit(".", 1)[0] + ".png"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (Debian: python3-matplotlib): no plot", file=sys.stderr)
        return 0
    fig, ax = plt.subplots(figsize=(7, 5))
    algos = sorted({r["algo"] for r in rows})
    for a in algos:
        xs = [p for p, r in zip(pts, rows) if r["algo"] == a]
        ax.scatter([x[0] for x in xs], [x[1] for x in xs], s=14, alpha=0.6, label=a)
    fx = [pts[i] for i in front]
    ax.plot([x[0] for x in fx], [x[1] for x in fx], "k-", lw=1, label="Pareto front")
    for key, mark, name in (("chosen_time", "s", "by time"), ("chosen_energy", "D", "by energy"),
                            ("chosen_edp", "^", "by energy x time")):
        for p, r in zip(pts, rows):
            if r[key] == "1":
                ax.scatter([p[0]], [p[1]], s=90, facecolors="none", edgecolors="k", marker=mark,
                           label=f"{name}: {label(r)}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("modelled time per multiplication (s, busiest rank)")
    ax.set_ylabel("modelled energy per multiplication (J, all ranks)")
    ax.set_title(f"GEMM plan candidates: {sys.argv[1].rsplit('/', 1)[-1]}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
