#!/usr/bin/env python3
"""Tests of tessera-study (benchmarks/study/tessera-study).

  test_study.py parser DRIVER
      the study-file parser: every shipped study is valid; unknown keys, bad
      values and broken JSON give exit status 2 and a message with the file,
      the line and the key path; weak-scaling sizes; --dry-run commands.
  test_study.py e2e DRIVER BENCH_DIR MPIEXEC VENDOR WORKDIR STUDY
      runs STUDY (tiny.json: every bench at 1 and 2 ranks) with the build's
      programs, checks every output file exists and holds every measured point,
      then interrupts-and-resumes: a launch removed from the state file is the
      only one run again.
  test_study.py apps DRIVER BENCH_DIR MPIEXEC VENDOR WORKDIR STUDY
      the sample applications' training step as study benches (apps.json:
      tessera-gpt and tessera_resnet, tiny, 3 steps at 1 and 2 ranks); exit
      status 77 (skipped) without their data.
  test_study.py report DRIVER STORED_DIR WORKDIR
      the plotting step on a stored result (tests/study/stored): PNG files and
      pages; exit status 77 (skipped) without matplotlib.
"""
import csv
import importlib.machinery
import importlib.util
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

DRIVER = None


def load_driver(path):
    loader = importlib.machinery.SourceFileLoader("tessera_study", path)
    spec = importlib.util.spec_from_loader("tessera_study", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def run(args, **kw):
    return subprocess.run([sys.executable, DRIVER] + args, capture_output=True, text=True, **kw)


# ------------------------------------------------------------------ parser
class Parser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = load_driver(DRIVER)

    def err(self, text):
        with self.assertRaises(self.m.StudyError) as cm:
            self.m.parse_study(text, "s.json")
        return str(cm.exception)

    def test_shipped_studies_valid(self):
        d = os.path.join(os.path.dirname(os.path.realpath(DRIVER)), "studies")
        names = sorted(f[:-5] for f in os.listdir(d) if f.endswith(".json"))
        for required in ("quick", "gemm", "attention", "optimizer"):
            self.assertIn(required, names)
        for n in names:
            with open(os.path.join(d, n + ".json")) as f:
                st = self.m.parse_study(f.read(), n)
            self.assertEqual(st["name"], n)
            self.assertTrue(self.m.plan_runs(st))

    def test_defaults_and_normalisation(self):
        st = self.m.parse_study('{"name": "a", "ranks": [1, 2], "entries": [\n'
                                '{"name": "g", "bench": "gemm", "sizes": [64, {"m": 8, "n": 16, "k": 32}]}]}')
        e = st["entries"][0]
        self.assertEqual(st["repeat"], 3)
        self.assertEqual(e["scaling"], "strong")
        self.assertEqual(e["ranks"], [1, 2])
        self.assertEqual(e["sizes"], [{"m": 64, "n": 64, "k": 64}, {"m": 8, "n": 16, "k": 32}])
        self.assertEqual(e["algos"], self.m.BENCHES["gemm"]["default_algos"])
        # 2 sizes x 3 repeats x 2 rank counts, repetitions alternating over ranks
        runs = self.m.plan_runs(st)
        self.assertEqual(len(runs), 12)
        self.assertEqual([(r["ranks"], r["rep"]) for r in runs[:4]], [(1, 0), (2, 0), (1, 1), (2, 1)])

    def test_unknown_top_key_with_line(self):
        msg = self.err('{"name": "a",\n "ranks": [1],\n "entires": [],\n "entries": []}')
        self.assertIn("s.json:3: entires: unknown key 'entires'", msg)

    def test_unknown_entry_key(self):
        msg = self.err('{"name": "a", "ranks": [1], "entries": [\n {"name": "g", "bench": "gemm",\n'
                       '  "sizes": [64], "size": 3}]}')
        self.assertIn("s.json:3: entries[0].size: unknown key 'size'", msg)

    def test_unknown_option(self):
        msg = self.err('{"name": "a", "ranks": [1], "entries": [{"name": "g", "bench": "gemm",\n'
                       '  "sizes": [64],\n  "options": {"causal": true}}]}')
        self.assertIn("s.json:3: entries[0].options.causal: unknown option 'causal' for bench gemm", msg)

    def test_bad_values(self):
        cases = [
            ('{"name": "a", "ranks": [1, 0], "entries": [{"name": "g", "bench": "gemm", "sizes": [8]}]}',
             "s.json:1: ranks[1]: 0 is out of range"),
            ('{"name": "a", "ranks": [1],\n"entries": [{"name": "g", "bench": "gem", "sizes": [8]}]}',
             's.json:2: entries[0].bench: "gem" is not one of: attention, energy-gemm, gemm, gpt, optimizer'),
            ('{"name": "a", "ranks": [1], "entries": [{"name": "g", "bench": "gemm",\n "sizes": [8],\n'
             ' "algos": ["plan", "2e"]}]}', 's.json:3: entries[0].algos[1]: "2e" is not one of'),
            ('{"name": "a", "ranks": [1], "entries": [{"name": "g", "bench": "gemm",\n "sizes": ["big"]}]}',
             "s.json:2: entries[0].sizes[0]: expected N (square)"),
            ('{"name": "a", "ranks": [1], "entries": [{"name": "g", "bench": "gemm",\n'
             ' "sizes": [{"m": 8, "n": 8}]}]}', "s.json:2: entries[0].sizes[0]: missing required key 'k'"),
            ('{"name": "a", "ranks": [1], "entries": [{"name": "g", "bench": "attention", "sizes": [8],\n'
             ' "options": {"causal": 1}}]}', "s.json:2: entries[0].options.causal: expected true or false"),
            ('{"name": "a", "ranks": [1], "repeat": 0, "entries": [{"name": "g", "bench": "gemm", "sizes": [8]}]}',
             "s.json:1: repeat: 0 is out of range [1, 1000]"),
            ('{"name": "a", "ranks": [1], "repeat": 2.5, "entries": []}', "repeat: expected an integer"),
            ('{"name": "a b", "ranks": [1], "entries": [{"name": "g", "bench": "gemm", "sizes": [8]}]}',
             "s.json:1: name: 'a b' is not a valid name"),
            ('{"name": "a", "ranks": [1], "entries": [{"name": "g", "bench": "gemm", "sizes": [8]},\n'
             '{"name": "g", "bench": "gemm", "sizes": [8]}]}', "s.json:2: entries[1].name: entry name 'g' is used twice"),
            ('{"name": "a", "entries": [{"name": "g", "bench": "gemm", "sizes": [8]}]}',
             "entries[0]: no 'ranks' here and none at the top level"),
            ('{"name": "a", "ranks": [1]}', "missing required key 'entries'"),
            ('{"name": "a", "ranks": [1], "entries": [{"name": "g", "bench": "optimizer", "sizes": [8],\n'
             ' "scaling": "weakish"}]}', 's.json:2: entries[0].scaling: "weakish" is not one of: strong, weak'),
            ('{"name": "a", "ranks": [1], "entries": [{"name": "g", "bench": "optimizer", "sizes": [8],\n'
             ' "algos": ["sharded LAMB", "sharded ADAM"]}]}', 's.json:2: entries[0].algos[1]: "sharded ADAM"'),
        ]
        for text, want in cases:
            with self.subTest(want=want):
                self.assertIn(want, self.err(text))

    def test_broken_json(self):
        msg = self.err('{"name": "a",\n "ranks": [1,],\n "entries": []}')
        self.assertIn("s.json:2:", msg)
        self.assertIn("not valid JSON", msg)

    def test_weak_sizes(self):
        st = self.m.parse_study('{"name": "a", "ranks": [1, 8], "entries": [\n'
                                '{"name": "g", "bench": "gemm", "scaling": "weak", "sizes": [512]},\n'
                                '{"name": "t", "bench": "attention", "scaling": "weak", "sizes": [1000]},\n'
                                '{"name": "o", "bench": "optimizer", "scaling": "weak", "sizes": [1000]}]}')
        g, t, o = st["entries"]
        self.assertEqual(self.m.size_at(g, g["sizes"][0], 8), {"m": 1024, "n": 1024, "k": 1024})
        self.assertEqual(self.m.size_at(t, 1000, 4), 2000)
        self.assertEqual(self.m.size_at(t, 1000, 8) % 16, 0)
        self.assertEqual(self.m.size_at(o, 1000, 8), 8000)
        self.assertEqual(self.m.size_at(g, g["sizes"][0], 1), {"m": 512, "n": 512, "k": 512})

    def test_cli_errors_exit_2(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "bad.json")
            with open(p, "w") as f:
                f.write('{"name": "a",\n "ranks": [1],\n "entries": [{"name": "g", "bench": "gemm", "sizes": [8],\n'
                        ' "reps": -1}]}')
            r = run(["check", p])
            self.assertEqual(r.returncode, 2)
            self.assertIn("bad.json:4: entries[0].reps: -1 is out of range", r.stderr)
            r = run(["run", p, "--dry-run"])
            self.assertEqual(r.returncode, 2)
            r = run(["run", "no-such-study"])
            self.assertEqual(r.returncode, 2)
            self.assertIn("no study file or named study 'no-such-study'", r.stderr)
            r = run(["run", "quick", "--ranks", "1,x"])
            self.assertEqual(r.returncode, 2)

    def test_dry_run_prints_every_command(self):
        r = run(["run", "quick", "--dry-run", "--mpiexec", "/usr/bin/mpiexec.openmpi", "--mpi", "openmpi",
                 "--launcher", "mpiexec", "--bench-dir", "/opt/x"])
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [ln for ln in r.stdout.splitlines() if not ln.startswith("#")]
        m = self.m
        with open(os.path.join(os.path.dirname(os.path.realpath(DRIVER)), "studies", "quick.json")) as f:
            n = len(m.plan_runs(m.parse_study(f.read())))
        self.assertEqual(len(lines), n)
        self.assertTrue(all(ln.startswith("/usr/bin/mpiexec.openmpi -n ") for ln in lines))
        self.assertTrue(any("/opt/x/bench_gemm" in ln and "--json" in ln for ln in lines))
        self.assertTrue(any("/opt/x/bench_optimizer --dist" in ln for ln in lines))
        # srun inside Slurm: the same programs under srun -n P
        r = run(["run", "quick", "--dry-run", "--launcher", "srun", "--bench-dir", "/opt/x"])
        lines = [ln for ln in r.stdout.splitlines() if not ln.startswith("#")]
        self.assertTrue(lines and all(ln.startswith("srun -n ") for ln in lines))


# ------------------------------------------- simulated time against the model
PLAN_ONLY = """[planned] tessera GEMM plan: 1024 x 1024 x 1024, 8-byte elements, op NN
  algorithm 3D on a 3D-any grid 12x12x7 (1008 ranks, 16 idle); m by I, n by J, k by K; panel 0
  per rank (busiest): 2.174e+06 flops, 2.348e+05 bytes received, 28 messages, 2.977e+05 bytes of memory
  lower bound 2.231e+05 bytes received: plan / bound = 1.052
  modelled time 0.0001289 s (alpha 2e-06 s, beta 1e-10 s/B, gamma 2e-11 s/flop)
  modelled energy 0.6566 J [0.147, 12] (all ranks; 2.349e+08 B within nodes, 0 B across); chosen by time
  bytes per rank 0.2 MiB, bound 0.2 MiB
2.5D: no 2.5D grid
[only] tessera GEMM plan: 1024 x 1024 x 1024, 8-byte elements, op NN
  algorithm 2D on a 2D grid 32x32x1 (1024 ranks, 0 idle); m by I, n by J, depth by NONE; panel 0
  per rank (busiest): 2.097e+06 flops, 5.079e+05 bytes received, 320 messages, 5.734e+04 bytes of memory
  lower bound 2.231e+05 bytes received: plan / bound = 2.276
  modelled time 0.0007327 s (alpha 2e-06 s, beta 1e-10 s/B, gamma 2e-11 s/flop)
  modelled energy 3.211 J [0.773, 68] (all ranks; 5.201e+08 B within nodes, 0 B across); chosen by time
  bytes per rank 0.5 MiB, bound 0.2 MiB
"""


class SimModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = load_driver(DRIVER)
        cls.platforms = os.path.join(os.path.dirname(os.path.realpath(DRIVER)), "platforms")

    def test_parse_plan_only(self):
        plans = self.m.parse_plan_only(PLAN_ONLY)
        self.assertEqual(len(plans), 2)
        a, b = plans
        self.assertTrue(a["planned"])
        self.assertEqual(a["grid"], "3D 12x12x7 idle 16")  # as bench_gemm names the variant's grid
        self.assertEqual((a["bytes"], a["messages"], a["time_s"]), (2.348e5, 28.0, 1.289e-4))
        self.assertEqual((a["alpha"], a["beta"], a["gamma"]), (2e-6, 1e-10, 2e-11))
        self.assertFalse(b["planned"])
        self.assertEqual(b["grid"], "2D 32x32x1")
        self.assertEqual(self.m.parse_plan_only("2D: error\n"), [])

    def test_platform_links(self):
        ft = os.path.join(self.platforms, "fattree-4096.xml")
        one = self.m.platform_links(ft, 64)  # one leaf switch of 64: up and down
        self.assertAlmostEqual(one["alpha"], 2e-6, places=15)
        self.assertAlmostEqual(one["beta"], 1 / 25e9, places=20)
        two = self.m.platform_links(ft, 1024)  # across leaves: 4 links
        self.assertAlmostEqual(two["alpha"], 4e-6, places=15)
        self.assertIn("4 links of 25GBps", two["what"])
        nodes = self.m.platform_links(os.path.join(self.platforms, "nodes-4x1024.xml"), 64)
        self.assertIsNotNone(nodes)
        self.assertIsNone(self.m.platform_links(os.path.join(self.platforms, "missing.xml"), 64))
        with tempfile.TemporaryDirectory() as d:  # bits per second, a flat cluster: up and down
            x = os.path.join(d, "c.xml")
            with open(x, "w") as f:
                f.write('<platform version="4.1"><cluster id="c" prefix="n" suffix="" radical="0-7" speed="1Gf" '
                        'bw="200Gbps" lat="1.5us"/></platform>')
            c = self.m.platform_links(x, 8)
            self.assertAlmostEqual(c["alpha"], 3e-6, places=15)
            self.assertAlmostEqual(c["beta"], 1 / 25e9, places=20)

    def test_attach_model(self):
        plans = self.m.parse_plan_only(PLAN_ONLY)
        links = {"alpha": 4e-6, "beta": 4e-11, "what": "x"}
        ss = [{"variant": "tessera plan", "grid": "3D 12x12x7 idle 16", "time_s": 1e-3},
              {"variant": "tessera 2D (SUMMA)", "grid": "2D 32x32x1", "time_s": 2e-3},
              {"variant": "tessera 2.5D", "grid": "2.5D 16x16x4", "time_s": 1e-3}]
        self.m.attach_model(ss, plans, links)
        comm = 4e-6 * 28 + 4e-11 * 2.348e5
        self.assertAlmostEqual(ss[0]["model_comm_s"], comm, places=15)
        self.assertAlmostEqual(ss[0]["sim_over_model"], 1e-3 / comm, places=9)
        self.assertEqual(ss[0]["model_time_s"], 1.289e-4)
        # mean message 5.079e5 / 320 = 1587 B: SMPI's factors 1.61075 (latency), 0.608902 (bandwidth)
        self.assertAlmostEqual(ss[1]["model_smpi_s"], 4e-6 * 320 * 1.61075 + 4e-11 * 5.079e5 / 0.608902, places=15)
        self.assertNotIn("model_comm_s", ss[2])  # no plan of that grid

    def test_platform_machine(self):
        ft = os.path.join(self.platforms, "fattree-4096.xml")
        pm = self.m.platform_machine(ft, 4096)  # 2 levels: 4 links of 1 us; hosts of 20 Gf
        self.assertAlmostEqual(pm["alpha"], 4e-6, places=15)
        self.assertAlmostEqual(pm["beta"], 4e-11, places=20)
        self.assertAlmostEqual(pm["gamma"], 5e-11, places=25)
        self.assertEqual(pm["arg"], "alpha=4e-06,beta=4e-11,gamma=5e-11")
        self.assertAlmostEqual(self.m.platform_machine(ft, 64)["alpha"], 2e-6, places=15)
        self.assertIn("hosts of 20Gf", pm["what"])
        self.assertIsNone(self.m.platform_machine(os.path.join(self.platforms, "missing.xml"), 64))

    def test_plans_of_log(self):
        # the launch's plans (platform machine), then the default machine's block: its choice only
        platform = PLAN_ONLY.replace("12x12x7 (1008 ranks, 16 idle)", "8x16x8 (1024 ranks, 0 idle)")
        log = ("$ smpirun -np 1024 bench_gemm --n 1024\nvariant table\n"
               "$ smpirun -np 1 bench_gemm --plan-only 1024 --machine alpha=4e-06,beta=4e-11,gamma=1e-30\n" +
               platform + "$ smpirun -np 1 bench_gemm --plan-only 1024 --machine default\n" + PLAN_ONLY)
        plans = self.m.plans_of_log(log)
        self.assertEqual([p["grid"] for p in plans], ["3D 8x16x8", "2D 32x32x1"])
        self.assertEqual(plans[0]["default_choice"], "3D 12x12x7 idle 16")
        self.assertEqual(plans[0]["default_time_s"], 1.289e-4)
        self.assertNotIn("default_choice", plans[1])
        ss = [{"variant": "tessera plan", "grid": "3D 8x16x8", "time_s": 1e-3}]
        self.m.attach_model(ss, plans, {"alpha": 4e-6, "beta": 4e-11, "what": "x"})
        self.assertEqual(ss[0]["default_plan"], "3D 12x12x7 idle 16")
        self.assertEqual(ss[0]["plan_machine"], "alpha 2e-06 s, beta 1e-10 s/B, gamma 2e-11 s/flop")
        self.assertEqual(self.m.plans_of_log(PLAN_ONLY)[0]["grid"], "3D 12x12x7 idle 16")  # an older log

    def test_dry_run_smpirun_plans_with_the_platform(self):
        r = run(["run", "simgrid-4096", "--dry-run", "--launcher", "smpirun", "--bench-dir", "/opt/x"])
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [ln for ln in r.stdout.splitlines() if not ln.startswith("#")]
        self.assertEqual(len(lines), 6)  # one launch per algorithm and size
        for ln, algo in zip(lines, ("3d", "2.5d", "3d", "plan", "2.5d", "2d")):
            self.assertIn(" -np 4096 ", ln)
            self.assertIn("--algos %s " % algo, ln)
            self.assertIn("--machine alpha=4e-06,beta=4e-11,gamma=5e-11", ln)
            # compute skipped: bench_gemm's GEMMs not run, large buffers folded
            self.assertIn("--cfg=smpi/simulate-computation:no", ln)
            self.assertIn("--cfg=smpi/shared-malloc-blocksize:16777216", ln)
            self.assertTrue(ln.endswith("--skip-compute --warmup 0 --shared-malloc 65536"), ln)
        # "machine": "platform" needs smpirun
        with tempfile.TemporaryDirectory() as d:
            x = os.path.join(d, "s.json")
            with open(x, "w") as f:
                f.write('{"name": "s", "ranks": [2], "entries": [{"name": "g", "bench": "gemm", "sizes": [64], '
                        '"options": {"machine": "platform"}}]}')
            r = run(["run", x, "--dry-run", "--launcher", "mpiexec", "--bench-dir", "/opt/x"])
            self.assertEqual(r.returncode, 2)
            self.assertIn("needs --launcher smpirun", r.stderr)

    def test_simulated_tables_crossover(self):
        def pt(p, algo, grid, t, b):
            return {"entry": "g", "size": "1024", "ranks": p, "variant": algo, "grid": grid, "time_median_s": t,
                    "bytes_per_rank": b, "bytes_over_lower_bound": 1.0, "model_comm_s": t / 2, "model_time_s": t,
                    "sim_over_model": 2.0, "model_smpi_s": None, "model_messages": 3, "model_links": "x"}
        pts = [pt(64, "tessera 2D (SUMMA)", "2D 8x8x1", 1e-3, 100), pt(64, "tessera 3D", "3D 4x4x4", 2e-3, 90),
               pt(64, "tessera plan", "2D 8x8x1", 1e-3, 100),
               pt(256, "tessera 2D (SUMMA)", "2D 16x16x1", 3e-3, 80), pt(256, "tessera 3D", "3D 8x8x4", 1e-3, 50),
               pt(256, "tessera plan", "3D 8x8x4", 1e-3, 50)]
        md = "".join(self.m.simulated_tables(pts))
        self.assertIn("| 1024 | 64 | 2D | 2D 8x8x1 | 100 | 3 | 0.001 | 0.001 | 0.0005 | 2.00 |", md)
        self.assertIn("| 2D (2D 8x8x1) | 3D (3D 4x4x4) | 2D 8x8x1 | 0.001 |", md)
        self.assertIn("n = 1024, time: 2D and 3D cross between 64 and 256 ranks", md)
        self.assertNotIn("bytes: 2D and 3D cross", md)
        self.assertEqual(self.m.simulated_tables([dict(p, model_comm_s=None) for p in pts]), [])


# --------------------------------------------------------------------- e2e
def check(cond, msg):
    if not cond:
        print("FAILED: " + msg)
        sys.exit(1)


def e2e(bench_dir, mpiexec, vendor, work, study):
    m = load_driver(DRIVER)
    with open(study) as f:
        st = m.parse_study(f.read(), study)
    runs = m.plan_runs(st)
    shutil.rmtree(work, ignore_errors=True)
    out = os.path.join(work, "out")
    base = ["run", study, "--out", out, "--bench-dir", bench_dir, "--mpiexec", mpiexec, "--mpi", vendor,
            "--launcher", "mpiexec", "--oversubscribe"]
    r = run(base)
    print(r.stdout)
    print(r.stderr[-4000:])
    check(r.returncode == 0, "the tiny study failed (exit status %d)" % r.returncode)
    for fn in ("results.csv", "results.json", "launches.jsonl", "study.json", "index.md", "index.html"):
        check(os.path.isfile(os.path.join(out, fn)), "missing output file " + fn)
    check("headline" in r.stdout and "results:" in r.stdout, "no headline table printed")
    # every launch: its log and the program's machine-readable output
    for run_ in runs:
        ext = "json" if run_["bench"] == "gemm" else "csv"
        for suffix in (ext, "log"):
            p = os.path.join(out, "raw", run_["id"] + "." + suffix)
            check(os.path.isfile(p) and os.path.getsize(p) > 0, "missing or empty " + p)
    with open(os.path.join(out, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(out, "results.json")) as f:
        doc = json.load(f)
    check(len(doc["launches"]) == len(runs), "results.json holds %d launches, expected %d" %
          (len(doc["launches"]), len(runs)))
    check(all(ln["status"] == "ok" for ln in doc["launches"]), "a launch failed")
    for k in ("machine", "mpi", "tessera", "study", "driver_command", "headline"):
        check(k in doc, "results.json lacks " + k)
    check(doc["mpi"]["vendor"] == vendor, "MPI vendor %s, expected %s" % (doc["mpi"]["vendor"], vendor))
    check(doc["mpi"]["version"] and doc["mpi"]["version"] != "unknown", "no MPI version")
    check(doc["tessera"]["version"], "no tessera version")
    check(len(rows) == len(doc["points"]), "CSV and JSON disagree on the points")
    # the expected points: every entry x size x variant x rank count
    want = set()
    for e in st["entries"]:
        variants = {"gemm": lambda e: {"plan": "tessera plan", "2d": "tessera 2D (SUMMA)", "1d": "tessera 1D",
                                       "pdgemm": "ScaLAPACK pdgemm"},
                    }
        for p in e["ranks"]:
            if e["bench"] == "gemm":
                names = [variants["gemm"](e)[a] for a in e["algos"]]
            elif e["bench"] == "attention":
                names = ["%s/%s" % (a, d) for a in e["algos"] for d in ("fwd", "bwd")]
            elif e["bench"] == "energy-gemm":
                names = ["1D", "2D", "3D"]  # 2.5D and the cube need more ranks
            elif e["bench"] == "plan-energy":
                names = []  # one point per plan candidate: checked below
            else:
                names = e["algos"]
            for n in names:
                want.add((e["name"], n, str(p)))
    have = {(r["entry"], r["variant"], r["ranks"]) for r in rows}
    missing = want - have
    if "ScaLAPACK pdgemm" not in {r["variant"] for r in rows}:
        missing = {w for w in missing if w[1] != "ScaLAPACK pdgemm"}  # built without ScaLAPACK
    check(not missing, "points missing from results.csv: %s" % sorted(missing))
    by = {(r["entry"], r["variant"], r["ranks"]): r for r in rows}
    for r in rows:
        check(float(r["time_median_s"]) > 0, "time of %s" % r)
        check(float(r["time_min_s"]) <= float(r["time_median_s"]) <= float(r["time_max_s"]), "spread of %s" % r)
        check(r["command"].startswith(mpiexec), "command of %s" % r)
    g = [r for r in rows if r["entry"] == "gemm"]
    check(all(r["repeats"] == "2" for r in g), "gemm points are not over 2 launches")
    check(all(float(r["gflops"]) > 0 for r in g), "gemm GFLOP/s")
    # exact bytes: SUMMA on 1x2 for 96^3 doubles: the busiest rank receives
    # half of A's columns... the ledger's count against the formula of
    # docs/GEMM.md: received = 8 (m k (pc-1)/(pr pc) + k n (pr-1)/(pr pc)).
    s2 = by.get(("gemm", "tessera 2D (SUMMA)", "2"))
    check(s2 is not None, "no 2D point at 2 ranks")
    grid = s2["grid"]
    dims = [int(x) for x in grid.split()[1].split("x")]  # "2D 1x2x1"
    pr, pc, n = dims[0], dims[1], 96
    want_b = 8 * (n // pr * (n - n // pc) + n // pc * (n - n // pr))  # docs/GEMM.md, SUMMA
    check(s2["bytes_per_rank"] == str(want_b), "2D bytes at 2 ranks: %s, formula %d" % (s2["bytes_per_rank"], want_b))
    want_1d = 8 * (80 * 80) // 2  # 1D, weak 80^3 on 2 ranks: half the gathered operand
    got_1d = by[("gemm-weak", "tessera 1D", "2")]["bytes_per_rank"]
    check(got_1d == str(want_1d), "1D bytes at 2 ranks: %s, formula %d" % (got_1d, want_1d))
    o2 = [r for r in rows if r["entry"] == "optimizer" and r["ranks"] == "2"]
    for r in o2:  # data parallel: 2 (p-1)/p x 4 B/param all-reduced; sharded: the same plus the norm all-reduce
        check(float(r["bytes_per_rank"]) >= 4 * 20000 * 2 * 1 / 2, "optimizer bytes %s" % r)
    check(by[("gemm", "tessera plan", "1")]["bytes_per_rank"] in ("0", ""), "1 rank moved bytes")
    check(float(by[("gemm", "tessera 2D (SUMMA)", "2")]["efficiency"]) > 0, "efficiency")
    check(float(by[("gemm", "tessera 2D (SUMMA)", "1")]["efficiency"]) == 1.0, "efficiency at the base")
    # weak scaling grew the problem: 64 at 1 rank, 80 (64 * 2^(1/3) = 80.6 -> 80) at 2
    check(by[("gemm-weak", "tessera 1D", "1")]["size"] == "64" and by[("gemm-weak", "tessera 1D", "2")]["size"] == "80",
          "weak-scaling sizes %s" % [r["size"] for r in rows if r["entry"] == "gemm-weak"])
    en = [r for r in rows if r["entry"] == "energy"]
    check(en and all(r["comm_joules"] != "" and r["inter_bytes_per_rank"] != "" for r in en), "energy points")
    check(all(float(r["inter_bytes_per_rank"]) > 0 for r in en), "2 ranks on 2 simulated nodes: inter-node bytes")
    opt = [r for r in rows if r["entry"] == "optimizer" and r["ranks"] == "2"]
    check(len(opt) == 2 and all(float(r["bytes_per_rank"]) > 0 for r in opt), "optimizer bytes at 2 ranks")
    # Plan candidates (one process planning for 4 ranks on 2 simulated nodes):
    # modelled time and joules of each, one choice per objective, the time
    # plan the fastest, the energy plan the cheapest; the Pareto plot.
    pc = [r for r in rows if r["entry"] == "pareto"]
    check(len(pc) >= 5 and all(r["ranks"] == "4" and float(r["plan_joules"]) > 0 and
                               float(r["plan_joules_low"]) <= float(r["plan_joules"]) <= float(r["plan_joules_high"])
                               for r in pc), "plan candidates: %s" % pc[:2])
    for obj in ("time", "energy", "edp"):
        check(sum(obj in r["chosen_by"].split() for r in pc) == 1, "one candidate chosen by " + obj)
    t_best = min(float(r["time_median_s"]) for r in pc)
    j_best = min(float(r["plan_joules"]) for r in pc)
    check(any("time" in r["chosen_by"].split() and float(r["time_median_s"]) == t_best for r in pc), "time plan")
    check(any("energy" in r["chosen_by"].split() and float(r["plan_joules"]) == j_best for r in pc), "energy plan")
    check(" -n 1 " in pc[0]["command"] and "--ranks 4" in pc[0]["command"], "plans from one process: " + pc[0]["command"])
    try:
        import matplotlib  # noqa: F401
        md = open(os.path.join(out, "index.md")).read()
        check("plots/pareto-pareto-256-p4.png" in md and
              os.path.isfile(os.path.join(out, "plots", "pareto-pareto-256-p4.png")), "no Pareto plot in the report")
    except ImportError:
        pass
    print("e2e: %d launches, %d points, grid of 2D at 2 ranks %s" % (len(runs), len(rows), grid))

    # Resume: everything done -> nothing runs again.
    r = run(base + ["--no-report"])
    check(r.returncode == 0, "second run failed")
    check("%d of %d launches already done" % (len(runs), len(runs)) in r.stderr, "resume message: " + r.stderr)
    # Interrupted: drop the last two launches (the second cut in half).
    state = os.path.join(out, "launches.jsonl")
    with open(state) as f:
        lines = f.readlines()
    with open(state, "w") as f:
        f.writelines(lines[:-2])
        f.write(lines[-2][: len(lines[-2]) // 2])
    r = run(base + ["--no-report"])
    check(r.returncode == 0, "resumed run failed: " + r.stderr[-2000:])
    check("%d of %d launches already done" % (len(runs) - 2, len(runs)) in r.stderr, "resume count: " + r.stderr)
    recs = []
    with open(state) as f:
        for ln in f:
            try:
                recs.append(json.loads(ln))
            except ValueError:
                pass  # the record cut in half
    ids = [x["id"] for x in recs if x.get("status") == "ok"]
    check(sorted(set(ids)) == sorted(x["id"] for x in runs), "after resume not every launch is done once")
    with open(os.path.join(out, "results.csv")) as f:
        check(len(list(csv.DictReader(f))) == len(rows), "the resumed study has a different number of points")
    # A different study in the same directory is refused.
    other = os.path.join(work, "other.json")
    with open(other, "w") as f:
        f.write('{"name": "tiny", "ranks": [1], "entries": [{"name": "x", "bench": "optimizer", "sizes": [100]}]}')
    r = run(["run", other, "--out", out, "--bench-dir", bench_dir, "--dry-run"])
    check(r.returncode == 0, "dry run")
    r = run(["run", other, "--out", out, "--bench-dir", bench_dir, "--mpiexec", mpiexec, "--mpi", vendor])
    check(r.returncode == 2 and "different study" in r.stderr, "a different study in the same --out: " + r.stderr)
    print("e2e: resume and refusal ok")
    return 0


# -------------------------------------------------------------------- apps
GPT_DATA = "/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb"
RESNET_DATA = "/usr/share/datasets/fashion-mnist"


def apps(bench_dir, mpiexec, vendor, work, study):
    """The apps' training step as study benches (apps.json: tessera-gpt and
    tessera_resnet for 3 steps at 1 and 2 ranks): every launch ok, every
    point with its time per step, tokens or images per second and bytes per
    step; data-parallel bytes per step against the ring all-reduce of the
    gradients, 8 N (p - 1) bytes summed over ranks for N float parameters
    (docs/ACCOUNTING.md), plus the few bytes of the loss/norm reductions."""
    if not os.path.isfile(GPT_DATA) or not os.path.isdir(RESNET_DATA):
        print("SKIPPED: the apps' data is not installed (r-cran-janeaustenr, %s)" % RESNET_DATA)
        return 77
    m = load_driver(DRIVER)
    with open(study) as f:
        st = m.parse_study(f.read(), study)
    runs = m.plan_runs(st)
    check(len(runs) == 6, "apps.json: %d launches, expected 6 (gpt dp/tp and resnet dp at 1 and 2 ranks)" % len(runs))
    shutil.rmtree(work, ignore_errors=True)
    out = os.path.join(work, "out")
    r = run(["run", study, "--out", out, "--bench-dir", bench_dir, "--mpiexec", mpiexec, "--mpi", vendor,
             "--launcher", "mpiexec", "--oversubscribe", "--no-report"])
    print(r.stdout)
    print(r.stderr[-4000:])
    check(r.returncode == 0, "the apps study failed (exit status %d)" % r.returncode)
    with open(os.path.join(out, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    have = {(x["entry"], x["variant"], x["ranks"]) for x in rows}
    want = {("gpt", a, p) for a in ("dp", "tp") for p in ("1", "2")} | {("resnet", "dp", "1"), ("resnet", "dp", "2")}
    check(have == want, "points %s, expected %s" % (sorted(have), sorted(want)))
    params = {}
    for x in runs:
        with open(os.path.join(out, "raw", x["id"] + ".log")) as f:
            text = f.read()
        mp = re.search(r"(\d+) parameters", text)
        check(mp is not None, "no parameter count in %s" % x["id"])
        params[x["entry"]] = int(mp.group(1))
    for x in rows:
        p = int(x["ranks"])
        check(float(x["time_median_s"]) > 0 and float(x["items_per_s"]) > 0, "time and rate of %s" % x)
        check(x["items"] == ("tokens" if x["entry"] == "gpt" else "images"), "items of %s" % x)
        b = float(x["bytes_per_step"])
        check(abs(float(x["bytes_per_rank"]) - b / p) < 1e-6 * max(b, 1), "bytes per rank of %s" % x)
        if p == 1:
            check(b == 0, "1 rank sent %g bytes per step" % b)
        elif x["variant"] == "dp":
            ring = 8.0 * params[x["entry"]] * (p - 1)
            check(ring <= b <= ring + 1024, "%s dp at %d ranks: %g bytes per step, ring all-reduce of %d "
                  "parameters %g" % (x["entry"], p, b, params[x["entry"]], ring))
        else:
            check(b > 0, "tp at 2 ranks moved no bytes")
    print("apps: %d launches, %d points" % (len(runs), len(rows)))
    return 0


# ------------------------------------------------------------------ report
def report(stored, work):
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("SKIPPED: matplotlib is not installed (Debian: apt-get install python3-matplotlib)")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(stored, work)
    r = subprocess.run([sys.executable, DRIVER, "report", work], capture_output=True, text=True,
                       env=dict(os.environ, TSR_STUDY_NO_REEXEC="1"))
    print(r.stdout, r.stderr)
    check(r.returncode == 0, "report failed")
    with open(os.path.join(work, "results.json")) as f:
        doc = json.load(f)
    entries = {p["entry"] for p in doc["points"]}
    pngs = sorted(os.listdir(os.path.join(work, "plots")))
    for e in entries:
        check("%s-time.png" % e in pngs, "no time plot of " + e)
    for kind in ("gflops", "efficiency"):
        check(any(p.endswith("-%s.png" % kind) for p in pngs), "no %s plot" % kind)
    check(any("-bytes-p" in p for p in pngs), "no bytes-by-level plot")
    check(any(p.endswith("-joules.png") for p in pngs), "no joules plot")
    for p in pngs:
        with open(os.path.join(work, "plots", p), "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", p + " is not a PNG")
    html = open(os.path.join(work, "index.html")).read()
    md = open(os.path.join(work, "index.md")).read()
    for p in pngs:
        check("plots/" + p in html and "plots/" + p in md, p + " not embedded")
    for pt in doc["headline"]:
        check(pt["variant"] in md, "headline row %s missing from index.md" % pt["variant"])
    print("report: %d plots" % len(pngs))
    return 0


def merge(stored, work, stored_smpi=None):
    """`tessera-study merge`: two result directories into one (points and
    launches concatenated, the study named after both), its refusals (exit
    status 2: an input without results.json, --out one of the inputs, another
    results format), then the report on the merged directory."""
    shutil.rmtree(work, ignore_errors=True)
    a, b, out = (os.path.join(work, x) for x in ("a", "b", "merged"))
    shutil.copytree(stored, a)
    shutil.copytree(stored, b)
    with open(os.path.join(b, "results.json")) as f:
        doc_b = json.load(f)
    doc_b["study"]["name"] = "second"
    with open(os.path.join(b, "results.json"), "w") as f:
        json.dump(doc_b, f)
    with open(os.path.join(a, "results.json")) as f:
        doc_a = json.load(f)

    def drive(*args):
        r = subprocess.run([sys.executable, DRIVER] + list(args), capture_output=True, text=True,
                           env=dict(os.environ, TSR_STUDY_NO_REEXEC="1"))
        print("$ tessera-study %s -> %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    r = drive("merge", out, a, b)
    check(r.returncode == 0, "merge failed")
    with open(os.path.join(out, "results.json")) as f:
        m = json.load(f)
    check(len(m["points"]) == len(doc_a["points"]) + len(doc_b["points"]), "merged points: %d" % len(m["points"]))
    check(m["points"][:len(doc_a["points"])] == doc_a["points"], "the first input's points come first, unchanged")
    second = m["points"][len(doc_a["points"]):]
    check(all(pt["entry"] == "second:" + q["entry"] for pt, q in zip(second, doc_b["points"])),
          "the second input's entries, already used by the first, renamed second:ENTRY")
    check(len(m["launches"]) == len(doc_a.get("launches", [])) + len(doc_b.get("launches", [])), "merged launches")
    check(m["study"]["name"] == "%s + second" % doc_a["study"]["name"], "merged name " + m["study"]["name"])
    check([x["dir"] for x in m["merged_from"]] == [os.path.abspath(a), os.path.abspath(b)], "merged_from")
    check(m["machine"] == doc_a["machine"], "the first input's machine")
    with open(os.path.join(out, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    check(len(rows) == len(m["points"]), "results.csv rows %d" % len(rows))
    check(drive("merge", os.path.join(work, "m2"), a, os.path.join(work, "none")).returncode == 2,
          "an input without results.json: exit status 2")
    check(drive("merge", a, a, b).returncode == 2, "--out one of the inputs: exit status 2")
    bad = os.path.join(work, "bad")
    os.makedirs(bad)
    with open(os.path.join(bad, "results.json"), "w") as f:
        json.dump(dict(doc_a, format=99), f)
    r = drive("merge", os.path.join(work, "m3"), a, bad)
    check(r.returncode == 2 and "format" in r.stderr, "another results format: exit status 2 naming the format")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("merge: report not run (no matplotlib)")
        return 0
    check(drive("report", out).returncode == 0, "report on the merged directory")
    check(os.path.exists(os.path.join(out, "index.html")), "no index.html")
    print("merge: %d points" % len(m["points"]))
    if stored_smpi:
        # The simulated study's 64-1024 ranks and simgrid-4096's 4096 (stored
        # results of 2026-12-04, docs/BENCHMARKS.md section 8): one
        # 2D/2.5D/3D table and one plot per size from 64 to 4096 ranks.
        sm = os.path.join(work, "smpi")
        check(drive("merge", sm, os.path.join(stored_smpi, "simgrid"),
                    os.path.join(stored_smpi, "simgrid-4096")).returncode == 0, "merge of the simulated studies")
        check(drive("report", sm).returncode == 0, "report on the merged simulated studies")
        md = open(os.path.join(sm, "index.md")).read()
        for row in ("| 4096 | 64 | 29360128 (1.56) | 29360128 (1.56) | 18874368 (1.00) |",
                    "| 4096 | 4096 | 4128768 (2.80) | 2523136 (1.71) | 1474560 (1.00) |",
                    "n = 1024, bytes: 2D and 2.5D cross between 64 and 256 ranks"):
            check(row in md, "simulated table: no " + row)
        for n in ("1024", "4096"):
            check("plots/sim-gemm-n%s.png" % n in md, "no simulated plot for n = " + n)
            with open(os.path.join(sm, "plots", "sim-gemm-n%s.png" % n), "rb") as f:
                check(f.read(8) == b"\x89PNG\r\n\x1a\n", "sim-gemm-n%s.png is not a PNG" % n)
        print("merge: simulated 64-4096 tables and plots")
    return 0


if __name__ == "__main__":
    mode, DRIVER = sys.argv[1], sys.argv[2]
    if mode == "parser":
        sys.argv = [sys.argv[0]] + sys.argv[3:]
        unittest.main(verbosity=2)
    elif mode == "e2e":
        sys.exit(e2e(*sys.argv[3:8]))
    elif mode == "apps":
        sys.exit(apps(*sys.argv[3:8]))
    elif mode == "report":
        sys.exit(report(*sys.argv[3:5]))
    elif mode == "merge":
        sys.exit(merge(*sys.argv[3:6]))
    else:
        sys.exit("unknown mode " + mode)
