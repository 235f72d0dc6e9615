#!/usr/bin/env python3
"""A tessera checkpoint is a plain HDF5 file: h5py reads it with no tessera
code. Writes one with `mpiexec -n NP ckpt_tool write PATH STEP` and checks
every dataset and attribute against the formulas in ckpt_tool.c.

  ckpt_h5py.py MPIEXEC NP TOOL DIR [MPIEXEC-FLAGS...]
"""
import os
import subprocess
import sys

import h5py
import numpy as np


def main():
    mpiexec, np_, tool, d = sys.argv[1:5]
    flags = sys.argv[5:]
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"h5py_np{np_}.h5")
    s = 37
    subprocess.run([mpiexec, "-n", np_] + flags + [tool, "write", path, str(s), "--floats", "100003"],
                   check=True, timeout=120)
    f = h5py.File(path, "r")
    text = lambda x: x.decode() if isinstance(x, bytes) else str(x)
    assert text(f.attrs["tessera_format"]) == "tessera-hdf5"
    assert int(f.attrs["tessera_format_version"]) == 2
    step, lr = f.attrs["step"], f.attrs["lr"]
    assert isinstance(step, np.integer) and step == s, repr(step)
    assert isinstance(lr, np.floating) and lr == s / 1024.0, repr(lr)
    assert text(f.attrs["config"]) == f"ckpt_tool step {s}"
    assert list(f.keys()) == sorted(["W", "flat", "tokens", "half"]) or set(f.keys()) == {"W", "flat", "tokens", "half"}
    W = f["W"][...]
    i, j = np.meshgrid(np.arange(300), np.arange(200), indexing="ij")
    assert W.shape == (300, 200) and W.dtype == np.float64
    assert np.array_equal(W, i * 1000.0 + j + s / 1024.0), "W differs"
    flat = f["flat"][...]
    assert flat.shape == (100003,) and flat.dtype == np.float32
    assert np.array_equal(flat, ((np.arange(100003) % 1000) + s / 1024.0).astype(np.float32)), "flat differs"
    t = f["tokens"][...]
    assert t.shape == (3, 4) and t.dtype == np.int64 and np.array_equal(t.ravel(), np.arange(12) * s)
    h = f["half"]
    assert h.dtype == np.uint16 and text(h.attrs["tessera_dtype"]) == "bfloat16"
    assert np.array_equal(h[...], (0x3F80 + np.arange(8) + s).astype(np.uint16))
    # bfloat16 -> float32 is a 16-bit shift: the first value is 1.0 + ...
    as_f32 = (h[...].astype(np.uint32) << 16).view(np.float32)
    assert as_f32[0] > 1.0
    print(f"h5py read {path} written on {np_} ranks: 4 datasets and 3 attributes as written")
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
