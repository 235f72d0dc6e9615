#!/usr/bin/env python3
"""Exact bytes per rank under SimGrid SMPI (simulated ranks on one process).

  smpi_exact_bytes.py SMPIRUN BENCH_GEMM PLATFORM WORKDIR N P [P ...]
                      [--attention BENCH_ATTENTION] [--optimizer BENCH_OPTIMIZER]

GEMM: runs bench_gemm (built with smpicc/smpicxx) on P simulated ranks of
PLATFORM for an N x N x N double product with tessera's 1D, 2D (SUMMA), 2.5D
(where bench_gemm finds a q x q x c grid with c >= 2) and, where P is a cube,
3D-on-the-cube algorithms (SMPI's collectives chosen as MPICH's: its default
all-gather costs O(p^2) messages of simulation), and checks the busiest rank's
received bytes per call that tessera's ledger records against docs/GEMM.md:

  1D on p ranks:        8 (p-1)/p N^2            (the gathered or reduced operand)
  2D on pr x pc:        8 (N/pr (N - N/pc) + N/pc (N - N/pr))   (SUMMA, even division)
  2.5D on q x q x c:    8 N^2 (3 (c-1)/(c q^2) + 2/(q c))
                        (replication of A and B along the depth, the layer's
                        panels of A and B from their owners, the reduce-scatter
                        of C; the busiest rank owns none of its layer's panels)
  3D on the q^3 cube:   8 * 3 N^2 (q-1)/q^3      (= the lower bound)

N must be divisible by every grid extent. Each P runs twice: computing (the
results checked) and as the study runs it, with `--skip-compute --warmup 0
--shared-malloc 65536` (the local GEMMs return at once, nothing warmed up,
every buffer of 64 KiB or more folded by SMPI_SHARED_MALLOC): every
variant's bytes and messages must be equal in the two runs, and its simulated
time as written (microseconds).

Ring attention (--attention): bench_attention's sweep at sequence length
ATTN_SEQ (1024) on P ranks, causal zigzag (even split, n = N/p tokens per
rank), batch 1, float32, GQA: the ring and two-pass with H = 4 heads, G = 2
K/V heads, d = 8; the all-to-all (which splits heads) with H = 2p, G = p,
d = 2 (P must divide 512 and 1024 / P be even): the largest bytes sent per
rank (point-to-point payload plus the collectives' modelled wire bytes) of
the ring, two-pass and all-to-all forward and backward calls against
docs/ATTENTION.md ("Even split, no mask"; kv = B n G d e):

  ring        forward 2 (p-1) kv              backward 4 (p-1) kv
  two-pass    forward 2 (p-1) kv              backward 5 (p-1) kv
  all-to-all  forward (p-1)/p B n ((H+2G) d + H (d+1)) e
              backward (p-1)/p B n ((3H+4G) d + 2H) e

LAMB and LARS (--optimizer): bench_optimizer --dist with OPT_N (10007, not
a multiple of p: uneven chunks) parameters in one group, one step: the
largest wire bytes sent per rank of the data-parallel (up to 64 ranks: SMPI's
MPI_Iallreduce is slow beyond) and sharded steps
against docs/OPTIMIZERS.md (ring models, k_m(i) = floor(m/p) + (i mod p <
m mod p), c_r = k_n(r)), maximised over r:

  data parallel   4 [(n - k_n(r+1)) + (n - k_n(r+2))]          (one bucket)
  sharded         4 (n - c_r) + 8 [(3 - k_3(r+1)) + (3 - k_3(r+2))] + 4 (n - c_{r+1})
                  + per further norm all-reduce (clipping) 8 [(1 - k_1(r+1)) + (1 - k_1(r+2))]

Exit status 0 when every count is exact and the runs agree, 1 otherwise, 77
(skipped) when SMPIRUN or a program is missing.
"""
import csv
import json
import os
import re
import subprocess
import sys
import time


def expected(grid, n, p):
    m = re.match(r"(1D|2D|2\.5D|3D) (\d+)x(\d+)x(\d+)", grid)
    if not m:
        return None
    kind, a, b, c = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
    w = 8
    if kind == "1D":
        return w * (p - 1) * n * n // p
    if kind == "2D":
        pr, pc = a, b
        return w * (n // pr * (n - n // pc) + n // pc * (n - n // pr))
    if kind == "2.5D" and a == b and c >= 2:
        q = a
        # 8 N^2 (3 (c-1)/(c q^2) + 2/(q c)), in integers (N divisible by q and c)
        return w * (3 * (c - 1) * (n // q) * (n // q) // c + 2 * (n // q) * (n // c))
    if kind == "3D" and a == b == c:
        q = a
        return w * 3 * n * n * (q - 1) // q ** 3
    return None


ATTN_SEQ = 1024
OPT_N = 10007


def smpi_prefix(smpirun, platform, hosts, p):
    return [smpirun, "-np", str(p), "-platform", platform, "-hostfile", hosts,
            "--cfg=smpi/simulate-computation:no", "--cfg=smpi/display-timing:yes",
            "--cfg=smpi/coll-selector:mpich",
            # MPICH's bcast/allreduce/reduce selectors build SMP-aware
            # communicators: an O(p^2) ring all-gather per new communicator.
            "--cfg=smpi/bcast:binomial_tree", "--cfg=smpi/allreduce:rdb", "--cfg=smpi/reduce:binomial",
            "--log=root.thres:critical"]


def run(cmd, work, what):
    """Runs cmd in work, prints it and its output's tail; returns (ok, seconds)."""
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    secs = time.time() - t0
    print("$ " + " ".join(cmd))
    print(r.stdout[-3000:])
    print(r.stderr[-3000:])
    if r.returncode != 0:
        print("FAILED: smpirun exit status %d (%s)" % (r.returncode, what))
    return r.returncode == 0, secs


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def attention_expected(variant, direction, p, n_tok, b, h, g, d, e):
    """docs/ATTENTION.md, even split, no mask: bytes sent per rank."""
    kv = b * n_tok * g * d * e
    if variant == "ring":
        return (2 if direction == "fwd" else 4) * (p - 1) * kv
    if variant == "two-pass":
        return (2 if direction == "fwd" else 5) * (p - 1) * kv
    if variant == "all-to-all":
        per = ((h + 2 * g) * d + h * (d + 1)) if direction == "fwd" else ((3 * h + 4 * g) * d + 2 * h)
        total = (p - 1) * b * n_tok * per * e
        assert total % p == 0
        return total // p
    return None


def check_attention(smpirun, bench, platform, hosts, work, p):
    # The ring variants with few heads (their cost grows with heads x steps);
    # the all-to-all needs p to divide the heads: H = 2p, G = p, d = 2.
    bad, seen, secs = 0, set(), 0.0
    # One launch per variant: in one process the two-pass after the ring ran
    # 8x slower under SMPI (256 ranks: 89 s against 11 s for its forward).
    for variants, b, h, g, d in (("ring", 1, 4, 2, 8), ("two-pass", 1, 4, 2, 8), ("all-to-all", 1, 2 * p, p, 2)):
        e = 4
        out = os.path.join(work, "attention-%d-%s.csv" % (p, variants.replace(",", "-")))
        if os.path.exists(out):
            os.remove(out)
        cmd = smpi_prefix(smpirun, platform, hosts, p) + [
            bench, "--mode", "sweep", "--seq", str(ATTN_SEQ), "--variants", variants, "--batch", str(b),
            "--heads", str(h), "--kv-heads", str(g), "--dim", str(d), "--causal", "1", "--layout", "zigzag",
            "--backward", "1", "--reps", "1", "--csv", out]
        ok, t = run(cmd, work, "bench_attention at %d ranks" % p)
        secs += t
        if not ok or not os.path.exists(out):
            bad += 1
            continue
        for row in read_csv(out):
            want = attention_expected(row["variant"], row["dir"], p, ATTN_SEQ // p, b, h, g, d, e)
            got = int(row["bytes_sent"])
            good = got == want
            seen.add((row["variant"], row["dir"]))
            print("%s %d ranks, attention %s %s (N %d, H %d, G %d, d %d): busiest rank sent %d bytes, formula %s: %s"
                  % ("ok  " if good else "BAD ", p, row["variant"], row["dir"], ATTN_SEQ, h, g, d, got, want,
                     "exact" if good else "DIFFERENT"))
            bad += not good
    want_rows = {(v, dr) for v in ("ring", "two-pass", "all-to-all") for dr in ("fwd", "bwd")}
    if seen != want_rows:
        print("FAILED: expected the rows %s at %d ranks, got %s" % (sorted(want_rows), p, sorted(seen)))
        bad += 1
    print("%d ranks: attention %.1f s of wall time" % (p, secs))
    return bad


def chunk(m, p, i):
    return m // p + (1 if i % p < m % p else 0)


def allreduce_sent(m, s, p, r):
    """Bytes rank r sends in a ring all-reduce of m elements of s bytes."""
    return 0 if p == 1 else s * ((m - chunk(m, p, r + 1)) + (m - chunk(m, p, r + 2)))


def optimizer_expected(mode, n, p, norm_allreduces):
    e = 4
    best = 0
    for r in range(p):
        if mode.startswith("data parallel"):
            v = allreduce_sent(n, e, p, r)
        else:
            v = (e * (n - chunk(n, p, r)) + allreduce_sent(3, 8, p, r) + e * (n - chunk(n, p, r + 1)) +
                 (norm_allreduces - 1) * allreduce_sent(1, 8, p, r))
        best = max(best, v)
    return best


def check_optimizer(smpirun, bench, platform, hosts, work, p):
    out = os.path.join(work, "optimizer-%d.csv" % p)
    if os.path.exists(out):
        os.remove(out)
    # Data parallel only up to 64 ranks: its bucket all-reduces are
    # nonblocking, and SMPI's MPI_Iallreduce took 34 s of wall time per step
    # at 128 simulated ranks (0.15 s at 64); the sharded steps' blocking
    # collectives stay fast.
    modes = ["dp-lamb", "sharded-lamb", "sharded-lamb-clip", "dp-lars", "sharded-lars"]
    if p > 64:
        modes = [m for m in modes if not m.startswith("dp-")]
    cmd = smpi_prefix(smpirun, platform, hosts, p) + [bench, "--dist", "--sizes", str(OPT_N), "--reps", "1",
                                                      "--modes", ",".join(modes), "--csv", out]
    ok, secs = run(cmd, work, "bench_optimizer at %d ranks" % p)
    if not ok or not os.path.exists(out):
        return 1
    bad, seen = 0, set()
    for row in read_csv(out):
        if int(row["groups"]) != 1 or int(row["n"]) != OPT_N:
            print("FAILED: expected one group of %d parameters, got %s" % (OPT_N, row))
            bad += 1
            continue
        nar = int(row["norm_allreduces"])
        want = optimizer_expected(row["mode"], OPT_N, p, nar)
        got = int(float(row["wire_sent_bytes"]))
        good = got == want and (row["mode"].startswith("data parallel") or nar >= 1)
        seen.add(row["mode"])
        print("%s %d ranks, optimizer %s (n %d, %d norm all-reduces): busiest rank sent %d wire bytes per step, "
              "formula %d: %s" % ("ok  " if good else "BAD ", p, row["mode"], OPT_N, nar, got, want,
                                 "exact" if good else "DIFFERENT"))
        bad += not good
    if len(seen) != len(modes):
        print("FAILED: expected bench_optimizer's modes %s at %d ranks, got %s" % (modes, p, sorted(seen)))
        bad += 1
    print("%d ranks: optimizer %.1f s of wall time" % (p, secs))
    return bad


def main():
    args = sys.argv[1:]
    extra = {}
    for opt in ("--attention", "--optimizer"):
        if opt in args:
            i = args.index(opt)
            if i + 1 >= len(args):
                print("usage: %s needs a program" % opt)
                return 2
            extra[opt] = args[i + 1]
            del args[i:i + 2]
    if len(args) < 6:
        print(__doc__)
        return 2
    smpirun, bench, platform, work, n = args[:5]
    n = int(n)
    ranks = [int(x) for x in args[5:]]
    for prog in [smpirun, bench] + list(extra.values()):
        if not os.access(prog, os.X_OK):
            print("SKIPPED: no %s" % prog)
            return 77
    os.makedirs(work, exist_ok=True)
    bad = 0
    for p in ranks:
        hosts = os.path.join(work, "hosts-%d.txt" % p)
        with open(hosts, "w") as f:
            f.write("".join("node-%d\n" % i for i in range(p)))
        if "--attention" in extra:
            bad += check_attention(smpirun, extra["--attention"], platform, hosts, work, p)
        if "--optimizer" in extra:
            bad += check_optimizer(smpirun, extra["--optimizer"], platform, hosts, work, p)
        q = round(p ** (1.0 / 3.0))
        algos = "1d,2d,2.5d" + (",3d-cube" if q ** 3 == p else "")
        docs = {}
        secs = {}
        for mode, extra_args in (("computing", []),
                                 ("skip-compute", ["--skip-compute", "--warmup", "0", "--shared-malloc", "65536"])):
            out = os.path.join(work, "gemm-%d-%s.json" % (p, mode))
            if os.path.exists(out):
                os.remove(out)
            cmd = smpi_prefix(smpirun, platform, hosts, p) + [
                bench, "--n", str(n), "--reps", "1", "--algos", algos, "--machine", "default", "--json", out] + extra_args
            ok, secs[mode] = run(cmd, work, "bench_gemm at %d ranks, %s" % (p, mode))
            if not ok or not os.path.exists(out):
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
