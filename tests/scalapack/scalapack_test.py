#!/usr/bin/env python3
"""libtessera-scalapack on an unmodified ScaLAPACK program (scalapack_gemm.f90).

usage: scalapack_test.py --mpiexec MPIEXEC --np N [--preflag F ...] --shim LIB
                         --plain EXE --linked EXE --workdir DIR

Runs the program three times at N ranks: plain (ScaLAPACK's pdgemm_), with
LD_PRELOAD=LIB, and the same source linked with LIB ahead of ScaLAPACK
(EXE --linked). Each run checks its own results against a local reference
(exit status). Then, per rank and per call, C through the shim must equal
plain ScaLAPACK's C within 1e-12 (double) / 1e-5 (single) of
sum |alpha a b| + |beta c| per element (exactly outside the submatrix, and
exactly for pzgemm, which the shim hands to ScaLAPACK), and the shim's report
(TSR_SCALAPACK_REPORT) must show 4 pdgemm and 4 psgemm calls through tessera,
2 fallbacks (pzgemm; pdgemm with type-2 descriptors), and data traffic in tessera's ledger (non-zero on more
than one rank, zero on one). The LD_PRELOAD run also asks for
TSR_SCALAPACK_VERBOSE=1: one line per rank for each fallback, no other.
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys

CASES = ["pdgemm NN", "pdgemm NT", "pdgemm TN", "pdgemm TT",
         "psgemm NN", "psgemm NT", "psgemm TN", "psgemm TT", "pzgemm NT", "pdgemm NN type 2"]
FALLBACKS = ("pzgemm NT", "pdgemm NN type 2")  # ScaLAPACK's own both times: identical


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def read_results(path):
    with open(path, "rb") as f:
        data = f.read()
    out, pos = [], 0
    for case in CASES:
        (n,) = struct.unpack_from("<i", data, pos)
        pos += 4
        parts = 3 if case.startswith("pz") else 2
        vals = struct.unpack_from("<%dd" % (parts * n), data, pos) if n else ()
        pos += 8 * parts * n
        if parts == 3:
            c = list(zip(vals[:n], vals[n:2 * n]))
            bound = vals[2 * n:]
        else:
            c, bound = vals[:n], vals[n:]
        out.append((c, bound))
    if pos != len(data):
        fail("%s: %d bytes left after the %d calls" % (path, len(data) - pos, len(CASES)))
    return out


def run(args, variant, exe, env):
    work = os.path.join(args.workdir, variant)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    report = os.path.join(work, "report")
    cmd = ([args.mpiexec, "-n", str(args.np)] + args.preflag +
           ["env", "TSR_SCALAPACK_REPORT=" + report] + env + [exe, work])
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    sys.stdout.write(p.stdout)
    sys.stdout.write(p.stderr)
    if p.returncode != 0 or "fail F" not in p.stdout:
        fail("%s run: exit status %d (the program's own check against its reference)" % (variant, p.returncode))
    return work, report, p.stderr


def check_report(variant, report, np):
    if not os.path.exists(report):
        fail("%s: no report at %s" % (variant, report))
    text = open(report).read()
    blocks = text.count("== tessera-scalapack: BLACS context")
    if blocks != 1:
        fail("%s: %d grid blocks in the report, expected 1" % (variant, blocks))
    m = re.search(r"calls through tessera: pdgemm (\d+) psgemm (\d+)", text)
    if not m or (int(m.group(1)), int(m.group(2))) != (4, 4):
        fail("%s: expected 4 pdgemm and 4 psgemm calls through tessera: %s" % (variant, m and m.group(0)))
    m = re.search(r"pdgemm (\d+) psgemm (\d+) pzgemm (\d+) pcgemm (\d+)\n", text)
    if not m or tuple(int(x) for x in m.groups()) != (1, 0, 1, 0):
        fail("%s: expected two fallbacks (pdgemm with type-2 descriptors, pzgemm): %s" % (variant, m and m.group(0)))
    for region in ("pdgemm", "psgemm"):
        m = re.search(r"region %s: received \(sum over ranks\) p2p_bytes (\d+) p2p_messages (\d+) "
                      r"coll_payload_bytes (\d+)" % region, text)
        if not m:
            fail("%s: no traffic line for region %s" % (variant, region))
        p2p, msgs, coll = (int(x) for x in m.groups())
        if np > 1 and (p2p == 0 or msgs == 0):
            fail("%s: region %s moved nothing point-to-point on %d ranks" % (variant, region, np))
        if np == 1 and (p2p or msgs or coll):
            fail("%s: region %s charged traffic on one rank" % (variant, region))
        print("%s: region %s: %d bytes in %d messages (redistribution), %d collective payload bytes"
              % (variant, region, p2p, msgs, coll))


def compare(variant, plain_dir, work, np):
    worst = {"d": 0.0, "s": 0.0}
    for r in range(np):
        ref = read_results(os.path.join(plain_dir, "c.%d.bin" % r))
        got = read_results(os.path.join(work, "c.%d.bin" % r))
        for case, (cp, bp), (cv, _) in zip(CASES, ref, got):
            if len(cp) != len(cv):
                fail("%s rank %d %s: %d local elements, plain %d" % (variant, r, case, len(cv), len(cp)))
            if case in FALLBACKS:
                if cp != cv:
                    fail("%s rank %d %s: differs from plain ScaLAPACK (it must be ScaLAPACK's own)" % (variant, r, case))
                continue
            kind = "d" if case.startswith("pd") else "s"
            tol = 1e-12 if kind == "d" else 1e-5
            for x, y, b in zip(cp, cv, bp):
                if b == 0.0:
                    if x != y:
                        fail("%s rank %d %s: C outside the submatrix differs (%r vs %r)" % (variant, r, case, y, x))
                    continue
                e = abs(x - y) / b
                worst[kind] = max(worst[kind], e)
                if e > tol:
                    fail("%s rank %d %s: |C - C_scalapack| / bound = %.3g > %g" % (variant, r, case, e, tol))
    print("%s vs plain ScaLAPACK: worst |C - C_scalapack| / sum|alpha a b| + |beta c|: double %.3g (tolerance 1e-12), "
          "single %.3g (1e-5); the fallbacks (pzgemm, pdgemm type 2) identical" % (variant, worst["d"], worst["s"]))


def lu(args):
    """scalapack_lu under LD_PRELOAD: the solve is right (its own exit status)
    and ScaLAPACK's internal pdgemm_ calls went through tessera too (more than
    the program's own one, no fallback)."""
    work, report, _ = run(args, "lu", args.plain, ["LD_PRELOAD=" + args.shim])
    text = open(report).read() if os.path.exists(report) else ""
    m = re.search(r"calls through tessera: pdgemm (\d+) psgemm (\d+)", text)
    if not m or int(m.group(1)) < 2:
        fail("lu: expected PDGESV's internal pdgemm_ calls through tessera besides the program's own: %s"
             % (m and m.group(0)))
    if not re.search(r"pdgemm 0 psgemm 0 pzgemm 0 pcgemm 0\n", text):
        fail("lu: unexpected fallbacks")
    print("lu: %s pdgemm_ calls through tessera (1 from the program, the rest from PDGESV)" % m.group(1))
    print("PASS")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--preflag", action="append", default=[])
    ap.add_argument("--shim", required=True)
    ap.add_argument("--plain", required=True)
    ap.add_argument("--linked")
    ap.add_argument("--lu", action="store_true", help="PROGRAM is scalapack_lu: check its solve and the internal calls")
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    if args.lu:
        return lu(args)

    plain_dir, report, _ = run(args, "plain", args.plain, [])
    if os.path.exists(report):
        fail("plain run wrote a shim report: libtessera-scalapack was loaded without being asked")

    work, report, err = run(args, "preload", args.plain, ["LD_PRELOAD=" + args.shim, "TSR_SCALAPACK_VERBOSE=1"])
    check_report("preload", report, args.np)
    lines = [l for l in err.splitlines() if "falls back" in l]
    if (len(lines) != 2 * args.np or sum("pzgemm_: falls back" in l for l in lines) != args.np or
            sum("pdgemm_: falls back" in l and "type (DESC(1)) is not 1" in l for l in lines) != args.np):
        fail("preload: expected one pzgemm_ and one pdgemm_ (descriptor type) fallback line per rank with "
             "TSR_SCALAPACK_VERBOSE=1, got %r" % lines)
    compare("preload", plain_dir, work, args.np)

    if args.linked is None:
        fail("--linked is required (except with --lu)")
    work, report, err = run(args, "linked", args.linked, [])
    if "falls back" in err:
        fail("linked: fallback messages without TSR_SCALAPACK_VERBOSE")
    check_report("linked", report, args.np)
    compare("linked", plain_dir, work, args.np)
    print("PASS")


if __name__ == "__main__":
    main()
