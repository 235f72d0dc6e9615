#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses (tests/fuzz/corpus/<reader>/).

    python3 tests/fuzz/make_corpus.py          # (re)writes the seed-* files

Small valid inputs built from the formats' descriptions (docs/ENERGY.md,
docs/FILES.md, apps/gpt/data.hpp, apps/resnet/data.hpp), plus interesting
variants: truncations, a wrong magic, sizes that disagree. Only files named
seed-* are written; the regression inputs (crash-*: inputs that crashed a
reader once, kept with a note in corpus/README.md) are never touched.
Deterministic: the same bytes at every run (gzip without a timestamp).
"""
import gzip
import io
import json
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def put(reader, name, data):
    d = os.path.join(HERE, "corpus", reader)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# --------------------------------------------------------------- profile ---
def profiles():
    with open(os.path.join(REPO, "lib/energy/profiles/default-2025.json")) as f:
        default = json.load(f)
    small = {
        "format": "tessera-energy-profile/1",
        "name": "fuzz-small",
        "pue": {"value": 1.2, "source": "site"},
        "levels": {"self": {"pj_per_byte": 30, "low": 10, "high": 60, "source": "s"},
                   "inter_node": {"pj_per_byte": 3000}},
        "flop": {"pj_per_flop": 1.5, "low": 1, "high": 2},
        "static": {"watts_per_rank": 50},
    }
    put("profile", "small.json", json.dumps(small, indent=1))
    # Every level and key of the default, numbers only (the default's long
    # texts would only slow the fuzzer down).
    lean = {"format": default["format"], "name": "lean", "units": "pJ",
            "levels": {k: {"pj_per_byte": v["pj_per_byte"], "low": v["low"], "high": v["high"]}
                       for k, v in default["levels"].items()},
            "flop": None, "pue": 1.0}
    put("profile", "lean.json", json.dumps(lean))
    put("profile", "comments.json", '// a comment\n{"name": "c", /* block */ "pue": 1.5}\n')
    put("profile", "empty-object.json", "{}")
    put("profile", "overflow.json", '{"levels": {"self": {"pj_per_byte": 1e999}}}')
    put("profile", "duplicate.json", '{"name": "a", "name": "b"}')
    put("profile", "range.json", '{"levels": {"disk_read": {"pj_per_byte": 5, "low": 6}}}')
    put("profile", "unicode.json", '{"name": "\\u00e9\\ud83d\\ude00", "description": "caf\xc3\xa9"}')
    text = json.dumps(small)
    put("profile", "truncated.json", text[: len(text) // 2])
    put("profile", "deep.json", "[" * 64 + "]" * 64)


# ---------------------------------------------------------------- tsrbin ---
DTYPE_SIZE = {0: 1, 1: 4, 2: 8, 3: 4, 4: 8, 5: 2}  # tsr_dtype -> bytes


def tsrbin(sets, attrs, version=2):
    """sets: [(name, dtype, [g0, g1, g2], data)], attrs: {key: str | int | float}."""
    table = b""
    for name, t, g, _ in sets:
        nd = 3 if g[2] != 1 else 2 if g[1] != 1 else 1
        table += struct.pack("<I", len(name)) + name.encode() + struct.pack("<II3QQQ", t, nd, *g, 0, 0)
    for key in sorted(attrs):
        v = attrs[key]
        table += struct.pack("<I", len(key)) + key.encode()
        if version == 1 or isinstance(v, str):
            raw, kind = str(v).encode(), 0
        elif isinstance(v, int):
            raw, kind = struct.pack("<q", v), 1
        else:
            raw, kind = struct.pack("<d", v), 2
        if version == 2:
            table += struct.pack("<I", kind)
        table += struct.pack("<I", len(raw)) + raw
    # Second pass with the offsets (fixed width: the table size is known).
    at = 40 + len(table)
    out, data = b"", b""
    for name, t, g, payload in sets:
        nd = 3 if g[2] != 1 else 2 if g[1] != 1 else 1
        nbytes = g[0] * g[1] * g[2] * DTYPE_SIZE[t]
        assert len(payload) == nbytes
        out += struct.pack("<I", len(name)) + name.encode() + struct.pack("<II3QQQ", t, nd, *g, at, nbytes)
        at += nbytes
        data += payload
    table = out + table[len(out):]
    magic = b"TSRBIN02" if version == 2 else b"TSRBIN01"
    head = magic + struct.pack("<IIIIQQ", 0x01020304, len(sets), len(attrs), 0, len(table), 40 + len(table) + len(data))
    return head + table + data


def tsrbins():
    two = tsrbin([("w", 3, [2, 3, 1], struct.pack("<6f", *range(6))),
                  ("step", 2, [1, 1, 1], struct.pack("<q", 7))],
                 {"epoch": 3, "lr": 0.5, "note": "checkpoint"})
    put("tsrbin", "two-sets.bin", two)
    put("tsrbin", "v01.bin", tsrbin([("x", 0, [4, 1, 1], b"abcd")], {"a": "1", "b": "two"}, version=1))
    put("tsrbin", "empty.bin", tsrbin([], {}))
    put("tsrbin", "cube.bin", tsrbin([("c", 5, [2, 2, 2], bytes(16)), ("i", 1, [0, 1, 1], b"")], {}))
    # An optimizer state file as tsr_optimizer_save writes it (docs/OPTIMIZERS.md).
    cols = "lr,beta1,beta2,eps,weight_decay"
    opt = tsrbin([("group_sizes", 2, [1, 1, 1], struct.pack("<q", 3)),
                  ("hyper", 4, [1, 5, 1], struct.pack("<5d", 1e-3, 0.9, 0.999, 1e-6, 0.01)),
                  ("m", 3, [3, 1, 1], bytes(12)), ("v", 3, [3, 1, 1], bytes(12))],
                 {"optimizer": "lamb", "optimizer_format": "1", "param_type": "float32", "preset": "none",
                  "step": "10", "skipped": "0", "master": "0", "last_clipped": "0", "hyper_columns": cols,
                  "written_dist": "replicated", "written_ranks": "2"})
    put("tsrbin", "optimizer-state.bin", opt)
    put("tsrbin", "truncated-table.bin", two[:60])
    put("tsrbin", "truncated-header.bin", two[:20])
    put("tsrbin", "trailing.bin", two + b"\0")
    put("tsrbin", "version99.bin", b"TSRBIN99" + two[8:])
    put("tsrbin", "hdf5-signature.bin", b"\x89HDF\r\n\x1a\n" + bytes(8))
    put("tsrbin", "other-order.bin", two[:8] + struct.pack(">I", 0x01020304) + two[12:])


# ------------------------------------------------------------------- rdb ---
def xdr_strsxp(strings, version=3):
    b = b"X\n" + struct.pack(">iii", version, 0x40202, 0x30500 if version == 3 else 0x20300)
    if version == 3:
        b += struct.pack(">i", 5) + b"UTF-8"
    b += struct.pack(">ii", 16, len(strings))
    for s in strings:
        if s is None:
            b += struct.pack(">ii", 9, -1)
        else:
            raw = s.encode()
            b += struct.pack(">ii", 0x40009, len(raw)) + raw
    return b


def rdb_record(raw):
    return struct.pack(">I", len(raw)) + zlib.compress(raw, 9)


def rdbs():
    one = rdb_record(xdr_strsxp(["It is a truth universally acknowledged,", None, "that a single man"]))
    put("rdb", "one-record.rdb", one)
    put("rdb", "two-records.rdb", one + rdb_record(xdr_strsxp(["EMMA", "Emma Woodhouse"], version=2)))
    put("rdb", "truncated.rdb", one[: len(one) - 6])
    put("rdb", "not-xdr.rdb", rdb_record(b"A\n" + xdr_strsxp(["x"])[2:]))
    put("rdb", "intsxp.rdb", rdb_record(xdr_strsxp(["x"])[:23] + struct.pack(">ii", 13, 1) + struct.pack(">i", 5)))
    put("rdb", "length-mismatch.rdb", struct.pack(">I", 9999) + one[4:])


# ------------------------------------------------------------------- idx ---
def gz(b):
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=9) as f:
        f.write(b)
    return out.getvalue()


def idxs():
    images = struct.pack(">IIII", 0x803, 2, 3, 4) + bytes(range(24))
    labels = struct.pack(">II", 0x801, 3) + bytes([0, 9, 4])
    put("idx", "images.gz", gz(images))
    put("idx", "labels.gz", gz(labels))
    put("idx", "images-plain", images)
    put("idx", "labels-plain", labels)
    put("idx", "images-truncated.gz", gz(images)[:-10])
    put("idx", "images-short", images[:-3])
    put("idx", "labels-extra", labels + b"\1")
    put("idx", "labels-out-of-range", struct.pack(">II", 0x801, 2) + bytes([3, 10]))
    put("idx", "images-huge-header", struct.pack(">IIII", 0x803, 1 << 24, 4096, 4096) + bytes(16))


def main():
    profiles()
    tsrbins()
    rdbs()
    idxs()
    total = 0
    for root, _, files in os.walk(os.path.join(HERE, "corpus")):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print("corpus: %d bytes in %s" % (total, os.path.join(HERE, "corpus")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
