#!/usr/bin/env python3
"""Exact bytes per rank under SimGrid SMPI (simulated ranks on one process).

  smpi_exact_bytes.py SMPIRUN BENCH_GEMM PLATFORM WORKDIR N P [P ...]

Runs bench_gemm (built with smpicc/smpicxx) on P simulated ranks of PLATFORM
for an N x N x N double product with tessera's 1D, 2D (SUMMA) and, where P
is a cube, 3D-on-the-cube algorithms (SMPI's collectives chosen as MPICH's:
its default all-gather costs O(p^2) messages of simulation), and checks the busiest rank's received
bytes per call that tessera's ledger records against docs/GEMM.md:

  1D on p ranks:        8 (p-1)/p N^2            (the gathered or reduced operand)
  2D on pr x pc:        8 (N/pr (N - N/pc) + N/pc (N - N/pr))   (SUMMA, even division)
  3D on the q^3 cube:   8 * 3 N^2 (q-1)/q^3      (= the lower bound)

N must be divisible by every grid extent. Each P runs twice: computing (the
results checked) and as the study runs it, with `--skip-compute --warmup 0
--shared-malloc 65536` (the local GEMMs return at once, nothing warmed up,
every buffer of 64 KiB or more folded by SMPI_SHARED_MALLOC): every
variant's bytes and messages must be equal in the two runs, and its simulated
time as written (microseconds). Exit status 0 when every count is exact and the runs agree, 1
otherwise, 77 (skipped) when SMPIRUN or the program is missing.
"""
import json
import os
import re
import subprocess
import sys
import time


def expected(grid, n, p):
    m = re.match(r"(1D|2D|3D) (\d+)x(\d+)x(\d+)", grid)
    if not m:
        return None
    kind, a, b, c = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
    w = 8
    if kind == "1D":
        return w * (p - 1) * n * n // p
    if kind == "2D":
        pr, pc = a, b
        return w * (n // pr * (n - n // pc) + n // pc * (n - n // pr))
    if kind == "3D" and a == b == c:
        q = a
        return w * 3 * n * n * (q - 1) // q ** 3
    return None


def main():
    smpirun, bench, platform, work, n = sys.argv[1:6]
    n = int(n)
    ranks = [int(x) for x in sys.argv[6:]]
    if not (os.access(smpirun, os.X_OK) and os.access(bench, os.X_OK)):
        print("SKIPPED: no %s or %s" % (smpirun, bench))
        return 77
    os.makedirs(work, exist_ok=True)
    bad = 0
    for p in ranks:
        hosts = os.path.join(work, "hosts-%d.txt" % p)
        with open(hosts, "w") as f:
            f.write("".join("node-%d\n" % i for i in range(p)))
        q = round(p ** (1.0 / 3.0))
        algos = "1d,2d" + (",3d-cube" if q ** 3 == p else "")
        docs = {}
        secs = {}
        for mode, extra in (("computing", []), ("skip-compute", ["--skip-compute", "--warmup", "0", "--shared-malloc", "65536"])):
            out = os.path.join(work, "gemm-%d-%s.json" % (p, mode))
            if os.path.exists(out):
                os.remove(out)
            cmd = [smpirun, "-np", str(p), "-platform", platform, "-hostfile", hosts,
                   "--cfg=smpi/simulate-computation:no", "--cfg=smpi/display-timing:yes",
                   "--cfg=smpi/coll-selector:mpich",
                   # MPICH's bcast/allreduce/reduce selectors build SMP-aware
                   # communicators: an O(p^2) ring all-gather per new communicator.
                   "--cfg=smpi/bcast:binomial_tree", "--cfg=smpi/allreduce:rdb", "--cfg=smpi/reduce:binomial",
                   "--log=root.thres:critical", bench, "--n", str(n), "--reps", "1", "--algos", algos,
                   "--machine", "default", "--json", out] + extra
            t0 = time.time()
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
            secs[mode] = time.time() - t0
            print("$ " + " ".join(cmd))
            print(r.stdout[-3000:])
            print(r.stderr[-3000:])
            if r.returncode != 0 or not os.path.exists(out):
                print("FAILED: smpirun exit status %d at %d ranks (%s)" % (r.returncode, p, mode))
                bad += 1
                continue
            with open(out) as f:
                docs[mode] = json.load(f)
        if len(docs) != 2:
            continue
        doc = docs["computing"]
        seen = 0
        for v in doc["variants"]:
            want = expected(v["grid"], n, p)
            if want is None:
                continue
            seen += 1
            got = v["bytes_per_rank"]
            ok = got == want
            print("%s %d ranks, %s (%s): busiest rank received %d bytes per call, formula %d: %s; "
                  "check error %.2g; simulated time %.6f s" % ("ok  " if ok else "BAD ", p, v["variant"], v["grid"],
                                                               got, want, "exact" if ok else "DIFFERENT",
                                                               v["check"], v["time_median_s"]))
            if not ok or v["check"] is None or v["check"] > 1e-9:
                bad += 1
        if seen < len(algos.split(",")):
            print("FAILED: expected the variants %s at %d ranks, got %s" % (algos,
                p, [v["grid"] for v in doc["variants"]]))
            bad += 1
        skip = {v["variant"]: v for v in docs["skip-compute"]["variants"]}
        for v in doc["variants"]:
            w = skip.get(v["variant"])
            same = (w is not None and w["bytes_per_rank"] == v["bytes_per_rank"] and
                    w["msgs_per_rank"] == v["msgs_per_rank"] and w["check"] is None and
                    w["time_median_s"] == v["time_median_s"])
            print("%s %d ranks, %s: --skip-compute %s bytes %s msgs %s simulated %s s (computing: %d, %d, %.6f s)" % (
                "ok  " if same else "BAD ", p, v["variant"], "ran:" if w else "missing",
                w and w["bytes_per_rank"], w and w["msgs_per_rank"], w and "%.6f" % w["time_median_s"],
                v["bytes_per_rank"], v["msgs_per_rank"], v["time_median_s"]))
            if not same:
                bad += 1
        print("%d ranks: %.1f s of wall time computing, %.1f s with --skip-compute" % (
            p, secs["computing"], secs["skip-compute"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
