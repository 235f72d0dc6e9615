#!/usr/bin/env python3
"""Crash safety of tessera checkpoints: a writer killed with SIGKILL at random
moments must leave, every time, a checkpoint that loads and is consistent
(the previous one or the new one, never a mix or a torn file).

  ckpt_kill.py TOOL DIR [--kills N] [--seed S] [--binary] [--floats N]

TOOL is tests/mpi/ckpt_tool (run as a singleton MPI process). Each round
starts `TOOL loop PATH STEP`, which commits checkpoints STEP, STEP+1, ...
as fast as it can, kills it after a random delay, then runs `TOOL verify
PATH`, which must report a consistent checkpoint whose step did not go back.
Prints one line per round and a summary ("N passed, M failed").
"""
import argparse
import glob
import os
import random
import re
import signal
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("dir")
    ap.add_argument("--kills", type=int, default=25)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--binary", action="store_true")
    ap.add_argument("--floats", type=int, default=1 << 20)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.dir, exist_ok=True)
    path = os.path.join(a.dir, "kill.ckpt" + (".bin" if a.binary else ".h5"))
    for f in glob.glob(path + "*"):
        os.remove(f)
    extra = (["--binary"] if a.binary else []) + ["--floats", str(a.floats)]

    def verify():
        r = subprocess.run([a.tool, "verify", path], capture_output=True, text=True, timeout=120)
        m = re.search(r"step (\d+) (consistent|INCONSISTENT)", r.stdout)
        return r.returncode, (int(m.group(1)) if m else None), (r.stdout + r.stderr).strip()

    subprocess.run([a.tool, "write", path, "0"] + extra, check=True, timeout=120)
    rc, last, out = verify()
    if rc != 0 or last != 0:
        print("the first checkpoint does not verify:", out)
        return 1
    passed = failed = torn = 0
    step = 1
    # Delays spread over MPI start-up and several commits (a commit of the
    # default 9 MB takes tens of milliseconds with its flushes).
    t_lo, t_hi = 0.05, 1.5
    for k in range(a.kills):
        delay = rng.uniform(t_lo, t_hi)
        p = subprocess.Popen([a.tool, "loop", path, str(step)] + extra, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(delay)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        temps = glob.glob(path + ".tsr-tmp-*")
        if temps:
            torn += 1
        rc, got, out = verify()
        ok = rc == 0 and got is not None and got >= last
        print(f"kill {k + 1:3d} after {delay:5.3f} s: {len(temps)} temporary file(s) left, "
              f"checkpoint step {got} (before: {last}): {'ok' if ok else 'FAILED: ' + out}")
        if ok:
            passed += 1
            last = got
            step = got + 1
        else:
            failed += 1
        for f in temps:  # a killed writer's leftovers; the next writer uses a new name anyway
            os.remove(f)
    print(f"{torn} of {a.kills} kills interrupted a commit (a temporary file was left)")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed == a.kills else 1


if __name__ == "__main__":
    sys.exit(main())
