#!/usr/bin/env python3
"""Plot tessera-gpt loss curves (--csv files) as a PNG, with no plotting
library: python3's zlib and struct only (a PNG writer, lines, a 3x5 digit
font for the axis values).

  python3 apps/gpt/plot_loss.py out.png lamb.csv adamw.csv ...

Each CSV is one colour (in the order: blue, red, green, orange, purple);
training loss as a line, validation loss as squares. The y axis is the loss
in nats per byte, the x axis the step; the axis ends are printed in digits.
"""
import csv
import struct
import sys
import zlib

W, H, M = 800, 500, 50
COLOURS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (255, 127, 14), (148, 103, 189)]
FONT = {  # 3x5 digits, rows top to bottom, 3 bits each
    "0": [7, 5, 5, 5, 7], "1": [2, 6, 2, 2, 7], "2": [7, 1, 7, 4, 7], "3": [7, 1, 7, 1, 7],
    "4": [5, 5, 7, 1, 1], "5": [7, 4, 7, 1, 7], "6": [7, 4, 7, 5, 7], "7": [7, 1, 1, 1, 1],
    "8": [7, 5, 7, 5, 7], "9": [7, 5, 7, 1, 7], ".": [0, 0, 0, 0, 2], "-": [0, 0, 7, 0, 0]}


def read(path):
    train, val = [], []
    with open(path) as f:
        for row in csv.DictReader(f):
            s = int(row["step"])
            if row.get("loss"):
                train.append((s, float(row["loss"])))
            if row.get("val_loss"):
                val.append((s, float(row["val_loss"])))
    return train, val


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    curves = [read(p) for p in sys.argv[2:]]
    pts = [p for t, v in curves for p in t + v]
    if not pts:
        print("plot_loss.py: no data", file=sys.stderr)
        return 1
    x0, x1 = 0, max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    y0, y1 = y0 - 0.05 * (y1 - y0 + 1e-9), y1 + 0.05 * (y1 - y0 + 1e-9)
    img = [[(255, 255, 255)] * W for _ in range(H)]

    def px(x, y, c):
        if 0 <= x < W and 0 <= y < H:
            img[y][x] = c

    def to(x, y):
        return (int(M + (x - x0) / max(x1 - x0, 1) * (W - 2 * M)),
                int(H - M - (y - y0) / (y1 - y0) * (H - 2 * M)))

    def line(a, b, c):
        (xa, ya), (xb, yb) = a, b
        n = max(abs(xb - xa), abs(yb - ya), 1)
        for i in range(n + 1):
            px(round(xa + (xb - xa) * i / n), round(ya + (yb - ya) * i / n), c)

    def text(x, y, s, c=(0, 0, 0), k=2):
        for ch in s:
            for r, bits in enumerate(FONT.get(ch, [0] * 5)):
                for b in range(3):
                    if bits >> (2 - b) & 1:
                        for dx in range(k):
                            for dy in range(k):
                                px(x + b * k + dx, y + r * k + dy, c)
            x += 4 * k

    black = (0, 0, 0)
    line((M, H - M), (W - M, H - M), black)
    line((M, M), (M, H - M), black)
    text(M - 4, H - M + 8, "0")
    text(W - M - 20, H - M + 8, str(x1))
    text(4, H - M - 6, f"{y0:.2f}")
    text(4, M - 4, f"{y1:.2f}")
    for i, (train, val) in enumerate(curves):
        c = COLOURS[i % len(COLOURS)]
        for a, b in zip(train, train[1:]):
            line(to(*a), to(*b), c)
        for p in val:
            x, y = to(*p)
            for dx in range(-3, 4):
                for dy in range(-3, 4):
                    px(x + dx, y + dy, c)
    raw = b"".join(b"\0" + bytes(v for p in row for v in p) for row in img)
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    with open(sys.argv[1], "wb") as f:
        f.write(png)
    print(f"{sys.argv[1]}: {len(curves)} curve(s), steps 0..{x1}, loss {y0:.3f}..{y1:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
