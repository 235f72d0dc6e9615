#!/usr/bin/env python3
"""Validation loss against batch size, LAMB and AdamW (gpt_lamb_study.sh's table).

    plot_lamb_study.py lamb_study.csv out.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    rows = list(csv.DictReader(open(sys.argv[1])))
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for opt, style, dy in (("lamb", "o-", 6), ("adamw", "s--", -12)):
        pts = sorted((int(r["batch"]), float(r["val_loss"])) for r in rows if r["optimizer"] == opt)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=opt.upper() if opt == "lamb" else "AdamW")
            for b, v in pts:
                ax.annotate("%.3f" % v, (b, v), textcoords="offset points", xytext=(4, dy), fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size (sequences of 128 bytes), same token budget")
    ax.set_ylabel("validation loss (nats/byte)")
    ax.set_title("tessera-gpt: LAMB against AdamW at a fixed token budget")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)
    print("wrote", sys.argv[2])


if __name__ == "__main__":
    main()
