#!/usr/bin/env python3
"""Runs a program under libtessera-pmpi and checks the tool's report.

  pmpi_test.py --mpiexec MPIEXEC --np N [--preflag F ...] --tool LIB --workdir DIR
               --check {app,fortran,scalapack,tessera} [--rpn R] [--env K=V ...] -- PROGRAM [ARGS]

The program runs as `MPIEXEC -n N [preflags] env LD_PRELOAD=LIB TSR_PMPI_... PROGRAM ARGS`
(the launcher itself is not preloaded). The tool writes DIR/report.{txt,json,csv,
matrix.csv}; the program writes what it expects (DIR/expect.<rank>.json) where
the check needs it. Every figure is compared exactly; a mismatch prints the
field, the rank, the expected and the reported value, and exits 1.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

PJ = {"self": 320, "intra_node": 320, "inter_node": 3000, "host_device": 250,
      "device_device": 100, "disk_read": 2000, "disk_write": 2000}
LINK = ["self", "intra_node", "inter_node"]
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


def equal(got, want, what):
    expect(got == want, f"{what}: expected {want}, reported {got}")


def run(args):
    if os.path.isdir(args.workdir):
        shutil.rmtree(args.workdir)
    os.makedirs(args.workdir)
    env = [f"LD_PRELOAD={args.tool}", f"TSR_PMPI_PREFIX={args.workdir}/report", "TSR_PMPI_TABLE=stderr",
           "TSR_PMPI_PCONTROL=1", "TSR_PMPI_MATRIX=1", f"TSR_PMPI_RANKS_PER_NODE={args.rpn}"] + args.env
    cmd = [args.mpiexec, "-n", str(args.np)] + args.preflag + ["env"] + env + args.program
    print("running:", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    print(p.stdout[-20000:])
    if p.returncode != 0:
        sys.exit(f"the program failed with exit status {p.returncode}")
    with open(os.path.join(args.workdir, "report.json")) as f:
        return json.load(f)


def region(rep, path):
    for g in rep["regions"]:
        if g["path"] == path:
            return g
    failures.append(f"region {path!r} missing from the report")
    return None


def moved_sum(g, levels=LINK):
    return sum(g["statistics"]["sum"]["moved_bytes"][l] for l in levels)


def check_common(rep, np_):
    """What every report must satisfy: layout, model only here, joules = bytes x figures."""
    equal(rep["format"], "tessera-energy-report/1", "format")
    equal(rep["ranks"], np_, "ranks")
    # No counter is readable on the project's machines: never a zero presented as measured.
    if rep["energy_source"] == "model only":
        for g in rep["regions"]:
            expect(g["statistics"]["sum"]["measured_joules"] is None, f"{g['path']}: measured joules on a model-only run")
    for g in rep["regions"]:
        s = g["statistics"]["sum"]
        j = sum(s["moved_bytes"][l] * PJ[l] * 1e-12 for l in PJ)
        got = s["modelled_joules"]["total"][1]
        expect(abs(got - j) <= 1e-9 * max(1.0, j), f"{g['path']}: modelled joules {got} != bytes x figures {j}")
    # Modelled collective wire traffic: every byte sent is received.
    app = region(rep, "total")["application"]["sum"]
    sent = sum(app["collective_wire_sent_model"][c]["bytes"] for c in ("self", "node", "remote"))
    recv = sum(app["collective_wire_recv_model"][c]["bytes"] for c in ("self", "node", "remote"))
    equal(sent, recv, "total: modelled collective wire bytes sent vs received (all ranks)")


def check_expectations(rep, workdir, np_, strict_calls=True):
    total = region(rep, "total")
    for r in range(np_):
        with open(os.path.join(workdir, f"expect.{r}.json")) as f:
            x = json.load(f)
        got = total["ranks"][r]
        app = got["application"]
        for c in ("self", "node", "remote"):
            equal([app["p2p_sent"][c]["messages"], app["p2p_sent"][c]["bytes"]], x[f"p2p_sent_{c}"],
                  f"rank {r} p2p sent {c} [messages, bytes]")
            equal([app["p2p_recv"][c]["messages"], app["p2p_recv"][c]["bytes"]], x[f"p2p_recv_{c}"],
                  f"rank {r} p2p received {c} [messages, bytes]")
        for k in ("collective_calls", "collective_payload_sent", "collective_payload_recv", "disk_read", "disk_write"):
            key = k if k.startswith("collective") else k
            equal(app[key], x[k], f"rank {r} {k}")
        calls = {name: [v["calls"], v["bytes"]] for name, v in got["calls"].items()}
        for name, want in x["calls"].items():
            equal(calls.get(name), want, f"rank {r} {name} [calls, bytes]")
        if strict_calls:
            extra = sorted(set(calls) - set(x["calls"]))
            expect(not extra, f"rank {r}: unexpected calls counted: {', '.join(f'{n} {calls[n]}' for n in extra)}")
    return total


def check_app(rep, args):
    np_ = args.np
    check_expectations(rep, args.workdir, np_)
    with open(os.path.join(args.workdir, "expect.0.json")) as f:
        x0 = json.load(f)
    # Textbook totals of the modelled collectives (summed over ranks).
    equal(moved_sum(region(rep, "bcast")), (np_ - 1) * x0["bcast_bytes"], "bcast: moved bytes, all ranks")
    equal(moved_sum(region(rep, "allreduce")), 2 * (np_ - 1) * x0["allreduce_bytes"],
          "allreduce: moved bytes, all ranks")
    equal(moved_sum(region(rep, "allreduce_again")), 3 * 2 * (np_ - 1) * x0["allreduce_bytes"],
          "allreduce_again (3 calls): moved bytes, all ranks")
    for r in range(np_):
        equal(region(rep, "allreduce_again")["ranks"][r]["moved_bytes"],
              {k: 3 * v for k, v in region(rep, "allreduce")["ranks"][r]["moved_bytes"].items()},
              f"allreduce_again: rank {r} moved bytes per level = 3 x allreduce's")
    matrix = "TSR_PMPI_MATRIX=0" not in args.env
    equal(moved_sum(region(rep, "allgather")), np_ * (np_ - 1) * x0["allgather_bytes"],
          "allgather: moved bytes, all ranks")
    equal(moved_sum(region(rep, "alltoall")), np_ * (np_ - 1) * x0["alltoall_bytes"],
          "alltoall: moved bytes, all ranks")
    # The ring: each rank sent ring_bytes to its right neighbour, at the right level.
    ring = region(rep, "ring")
    for r in range(np_):
        right = (r + 1) % np_
        lvl = "self" if right == r else ("intra_node" if right // args.rpn == r // args.rpn else "inter_node")
        mb = ring["ranks"][r]["moved_bytes"]
        equal(mb[lvl], x0["ring_bytes"], f"ring: rank {r} moved {lvl}")
        equal(sum(mb[l] for l in LINK), x0["ring_bytes"], f"ring: rank {r} moved, all link levels")
        # The blocking receive just before the region ends is charged inside it.
        left = (r - 1) % np_
        cls = "self" if left == r else ("node" if left // args.rpn == r // args.rpn else "remote")
        recv = ring["ranks"][r]["application"]["p2p_recv"]
        equal({c: [recv[c]["messages"], recv[c]["bytes"]] for c in ("self", "node", "remote")},
              {c: [1, x0["ring_bytes"]] if c == cls else [0, 0] for c in ("self", "node", "remote")},
              f"ring: rank {r} received [messages, bytes] per class")
        if matrix:
            row = ring["matrix"]["bytes"][r]
            equal(row[right], x0["ring_bytes"], f"ring: matrix[{r}][{right}]")
            equal(sum(row), x0["ring_bytes"], f"ring: matrix row {r}")
    # The CSV and the matrix file exist with one row per region and rank (+ 4 statistics).
    with open(os.path.join(args.workdir, "report.csv")) as f:
        rows = f.read().strip().split("\n")
    equal(len(rows), 1 + len(rep["regions"]) * (np_ + 4), "report.csv rows")
    if matrix:
        with open(os.path.join(args.workdir, "report.matrix.csv")) as f:
            mrows = f.read().strip().split("\n")
        equal(len(mrows), 1 + len(rep["regions"]) * 2 * np_, "report.matrix.csv rows")
    else:
        expect(not os.path.exists(os.path.join(args.workdir, "report.matrix.csv")),
               "report.matrix.csv written without TSR_PMPI_MATRIX")
    with open(os.path.join(args.workdir, "report.txt")) as f:
        expect("energy source:" in f.read(), "report.txt lacks the energy source line")


def check_fortran(rep, args):
    # Every Fortran call counted exactly once (a binding that reached a C
    # wrapper too would show twice the calls and bytes).
    check_expectations(rep, args.workdir, args.np)


def check_scalapack(rep, args):
    with open(os.path.join(args.workdir, "expect.0.json")) as f:
        x = json.load(f)
    g = region(rep, "pdgemm")
    s = g["application"]["sum"]
    recv = sum(s["p2p_recv"][c]["bytes"] for c in ("self", "node", "remote")) + s["collective_payload_recv"]
    sent = sum(s["p2p_sent"][c]["bytes"] for c in ("self", "node", "remote"))
    # pdgemm (the AB variant for M = N = K) replicates A's panels across the
    # process columns and B's across the process rows: each of the Pc-1 other
    # columns receives all of A once, each of the Pr-1 other rows all of B.
    want = 8 * (x["m"] * x["k"] * (x["pc"] - 1) + x["k"] * x["n"] * (x["pr"] - 1))
    equal(recv, want, f"pdgemm: payload received, all ranks ({x['pr']}x{x['pc']} grid, m=n=k={x['m']})")
    equal(sum(s["p2p_recv"][c]["messages"] for c in ("self", "node", "remote")),
          sum(s["p2p_sent"][c]["messages"] for c in ("self", "node", "remote")), "pdgemm: messages sent vs received")
    equal(sum(s["p2p_recv"][c]["bytes"] for c in ("self", "node", "remote")), sent, "pdgemm: bytes sent vs received")
    expect(x["max_error"] < 1e-9, f"pdgemm result wrong: max error {x['max_error']}")


def check_tessera(rep, args):
    """libtessera's own ledger vs the tool on the same run."""
    for r in range(args.np):
        with open(os.path.join(args.workdir, f"expect.{r}.json")) as f:
            x = json.load(f)
        for name, want in x["regions"].items():
            g = region(rep, name)
            if g is None:
                continue
            app = g["ranks"][r]["application"]
            for c in ("self", "node", "remote"):
                for d in ("p2p_sent", "p2p_recv", "collective_wire_sent_model", "collective_wire_recv_model"):
                    if d in want:
                        equal([app[d][c]["messages"], app[d][c]["bytes"]], want[d][c], f"{name}: rank {r} {d} {c}")
            for k in ("collective_calls", "collective_payload_sent", "collective_payload_recv"):
                equal(app[k], want[k], f"{name}: rank {r} {k}")
            moved = g["ranks"][r]["moved_bytes"]
            for l in want.get("moved_bytes", {}):
                equal(moved[l], want["moved_bytes"][l], f"{name}: rank {r} moved {l}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--preflag", action="append", default=[])
    ap.add_argument("--tool", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--check", required=True, choices=["app", "fortran", "scalapack", "tessera"])
    ap.add_argument("--rpn", type=int, default=2)
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("program", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if args.program and args.program[0] == "--":
        args.program = args.program[1:]
    rep = run(args)
    check_common(rep, args.np)
    {"app": check_app, "fortran": check_fortran, "scalapack": check_scalapack, "tessera": check_tessera}[args.check](
        rep, args)
    if failures:
        print(f"{len(failures)} mismatch(es):")
        for f in failures[:80]:
            print("  " + f)
        sys.exit(1)
    print(f"OK: {args.check} under libtessera-pmpi on {args.np} rank(s): every figure as expected")


if __name__ == "__main__":
    main()
