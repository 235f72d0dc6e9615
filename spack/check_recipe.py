#!/usr/bin/env python3
"""Static checks of tessera's Spack recipe, without Spack (CI cannot install it).

    python3 spack/check_recipe.py                   # the checks below; exit 1 on a failure
    python3 spack/check_recipe.py --args "+benchmarks ~shared"
                                                    # the CMake arguments of that spec
    python3 spack/check_recipe.py --run-tests PREFIX [--mpiexec PATH] [--variants SPEC]
                                                    # the recipe's test_* methods (what
                                                    # `spack test run tessera` runs) against
                                                    # an installed prefix

The recipe is loaded with a small stand-in for the parts of Spack's package
API it uses (directives record what they declare; `self.define` and
`define_from_variant` format arguments as Spack does; a spec knows its
variants and satisfies "+v", "~v" and "v=x"). Checks:
  1. repo.yaml: namespace tessera, api v2.0 (readable by every Spack >= 1.0);
  2. every CMake option of the tree (option() and cache variables TSR_* in
     CMakeLists.txt and cmake/*.cmake) is driven by a variant (its value
     changes across variant combinations) or is in EXCLUDED with its reason;
  3. every depends_on names a package of Spack's builtin repository, or a
     virtual, and only variants that package has (BUILTIN below, checked by
     hand against spack/spack-packages; CI has no copy of that repository);
  4. every variant named in a when= or a dependency's condition exists;
  5. cmake_args() for every valid combination of the boolean variants, with
     and without tests: no empty argument, no argument twice, every -D name a
     CMake option, cache variable or documented input of the build
     (KNOWN_INPUTS), AUTO/ON/OFF options set to ON or OFF;
  6. every test_* method has a docstring (Spack prints it as the test's purpose).
"""
import argparse
import ast
import itertools
import os
import re
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RECIPE = os.path.join(HERE, "spack_repo", "tessera", "packages", "tessera", "package.py")
REPO_YAML = os.path.join(HERE, "spack_repo", "tessera", "repo.yaml")

# CMake options without a variant, and why.
EXCLUDED = {
    "TSR_BUILD_TESTS": "set from Spack's --test (self.run_tests), not a variant",
    "TSR_BUILD_APPS": "always ON: bin/tessera_demo and bin/tessera_check are what "
    "`spack test run` runs",
    "TSR_WERROR": "developer option (warnings as errors), wrong for a packager's compiler flags",
    "TSR_FUZZ": "developer option (clang + libFuzzer instrumentation of everything)",
    "TSR_TEST_TIMEOUT": "a test-suite setting (seconds per multi-rank test), not a feature",
}
# -D names the recipe may pass that are not options of the tree: inputs of
# CMake itself, of FindMPI/FindHDF5/FindPython3, or cache variables the tree
# reads through find_program/find_library.
KNOWN_INPUTS = {
    "CMAKE_CUDA_ARCHITECTURES",
    "MPI_C_COMPILER", "MPI_CXX_COMPILER", "MPI_Fortran_COMPILER", "MPIEXEC_EXECUTABLE",
    "HDF5_ROOT", "TSR_SCALAPACK_LIBRARY", "Python3_EXECUTABLE",
    "TSR_PYTHON3", "TSR_STUDY_PYTHON3", "TSR_BENCH_PYTHON3",
}
# Options another branch adds (issue 18, the Fortran module): the recipe
# passes them already. Remove a name here once the option is in the tree.
PENDING_OPTIONS = {}

# Packages of Spack's builtin repository the recipe uses, with the variants
# the recipe asks of them ("virtual": a virtual package, provided by others).
# Checked by hand against spack/spack-packages (repos/spack_repo/builtin/
# packages/<name>/package.py, commit 1e8cf059e3, 2026): keep in step when the
# recipe's dependencies change.
BUILTIN = {
    "c": "virtual", "cxx": "virtual", "fortran": "virtual",
    "mpi": "virtual", "blas": "virtual", "scalapack": "virtual",
    "pkgconfig": "virtual", "zlib-api": "virtual",
    "cmake": set(), "nlohmann-json": set(), "googletest": {"gmock", "shared"},
    "benchmark": set(), "hdf5": {"mpi", "cxx", "shared", "threadsafe"},
    "simgrid": {"smpi"}, "python": set(), "py-matplotlib": set(),
    "py-numpy": set(), "py-h5py": {"mpi"}, "cuda": set(), "nccl": {"cuda_arch", "cuda"},
    "ucx": set(), "openmpi": set(), "mpich": set(), "netlib-scalapack": {"shared"},
    "openblas": {"threads"},
}
CUDA_ARCHS = ("70", "80", "90")


# --------------------------------------------------- a stand-in for Spack ---
class Recorder:
    def __init__(self):
        self.variants = []  # (name, default, when, values)
        self.depends = []  # (spec, when, type)
        self.conflicts = []  # (spec, when)
        self.versions = []


REC = Recorder()


def _variant(name, default=None, description="", values=None, when=None, multi=False, **kw):
    REC.variants.append((name, default, when, values))


def _depends_on(spec, when=None, type=("build", "link"), **kw):
    REC.depends.append((spec, when, type))


def _conflicts(spec, when=None, msg=None):
    REC.conflicts.append((spec, when))


def _version(name, *a, **kw):
    REC.versions.append(name)


class SkipTest(Exception):
    pass


class Prefix(str):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Prefix(os.path.join(self, name))

    def join(self, name):
        return Prefix(os.path.join(self, name))


class Executable:
    def __init__(self, path):
        self.path = path

    def __call__(self, *args, output=None, error=None, **kw):
        cmd = [self.path] + [str(a) for a in args]
        print("  $ " + " ".join(cmd), flush=True)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            raise RuntimeError("%s exited with %d:\n%s" % (cmd[0], p.returncode, p.stdout))
        return p.stdout if output is str else None


def _which(path, required=False):
    path = str(path)
    if os.path.isabs(path):
        found = path if os.access(path, os.X_OK) else None
    else:
        found = next((os.path.join(d, path) for d in os.environ.get("PATH", "").split(os.pathsep)
                      if os.access(os.path.join(d, path), os.X_OK)), None)
    if not found:
        if required:
            raise RuntimeError("which: %s not found" % path)
        return None
    return Executable(found)


def _install_modules():
    pkg = types.ModuleType("spack.package")
    for name, obj in {
        "variant": _variant, "depends_on": _depends_on, "conflicts": _conflicts, "version": _version,
        "which": _which, "join_path": os.path.join, "SkipTest": SkipTest, "Prefix": Prefix,
    }.items():
        setattr(pkg, name, obj)
    pkg.__all__ = [n for n in dir(pkg) if not n.startswith("_")]

    class CMakePackage:
        run_tests = False

        def define(self, name, value):
            if isinstance(value, bool):
                return "-D%s:BOOL=%s" % (name, "ON" if value else "OFF")
            if isinstance(value, (list, tuple)):
                value = ";".join(str(v) for v in value)
            return "-D%s:STRING=%s" % (name, value)

        def define_from_variant(self, name, variant):
            # Spack: "" when the variant does not exist on this spec (its
            # condition does not hold).
            if variant not in self.spec.variants:
                return ""
            return self.define(name, self.spec.variants[variant].value)

    class CudaPackage:
        cuda_arch_values = CUDA_ARCHS

    _variant("cuda", default=False)
    _variant("cuda_arch", default="none", values=("none",) + CUDA_ARCHS, multi=True)
    _depends_on("cuda", when="+cuda")

    modules = {"spack": types.ModuleType("spack"), "spack.package": pkg}
    for m in ("spack_repo", "spack_repo.builtin", "spack_repo.builtin.build_systems"):
        modules[m] = types.ModuleType(m)
    cm = types.ModuleType("spack_repo.builtin.build_systems.cmake")
    cm.CMakePackage = CMakePackage
    cu = types.ModuleType("spack_repo.builtin.build_systems.cuda")
    cu.CudaPackage = CudaPackage
    modules[cm.__name__] = cm
    modules[cu.__name__] = cu
    sys.modules.update(modules)


class Variant:
    def __init__(self, value):
        self.value = value


class Dep:
    def __init__(self, name, prefix):
        self.name = name
        self.prefix = Prefix(prefix)
        self.mpicc = os.path.join(prefix, "bin", "mpicc")
        self.mpicxx = os.path.join(prefix, "bin", "mpicxx")
        self.mpifc = os.path.join(prefix, "bin", "mpif90")
        self.libs = [os.path.join(prefix, "lib", "lib%s.so" % name)]
        self.command = types.SimpleNamespace(path=os.path.join(prefix, "bin", "python3"))


class Spec:
    def __init__(self, variants, deps=None):
        self.variants = {k: Variant(v) for k, v in variants.items()}
        self.deps = deps or {}

    def satisfies(self, text):
        for tok in re.findall(r"[+~][\w-]+|[\w-]+=[\w,]+", text):
            if tok[0] in "+~":
                v = self.variants.get(tok[1:])
                have = v is not None and v.value is True
                if have != (tok[0] == "+"):
                    return False
            else:
                k, val = tok.split("=")
                v = self.variants.get(k)
                vals = v.value if v is not None and isinstance(v.value, tuple) else (v.value if v else None,)
                if v is None or not set(val.split(",")) <= set(str(x) for x in vals):
                    return False
        return True

    def __getitem__(self, name):
        return self.deps.get(name) or Dep(name, "/opt/spack/" + name)


def load_recipe():
    _install_modules()
    src = open(RECIPE).read()
    code = compile(src, RECIPE, "exec")
    ns = {"__file__": RECIPE, "__name__": "spack_repo.tessera.packages.tessera.package"}
    exec(code, ns)
    return ns["Tessera"], ast.parse(src)


# ------------------------------------------------------------------ checks ---
def bool_variants():
    return [(n, d, w) for (n, d, w, vals) in REC.variants if isinstance(d, bool)]


def make_spec(choice, explicit=None):
    """A spec from {variant: bool}, dropping variants whose when= fails;
    None if a conflict, or a variant set True (of those in explicit, if
    given) whose condition fails, rules it out."""
    vs = dict(choice)
    vs["cuda_arch"] = ("90",) if vs.get("cuda") else ("none",)
    for (name, default, when, values) in REC.variants:
        if when and name in vs and not Spec(vs).satisfies(when):
            if vs[name] is True and name != "cuda_arch" and (explicit is None or name in explicit):
                return None
            del vs[name]
    spec = Spec(vs)
    for (c, when) in REC.conflicts:
        if spec.satisfies(c) and (when is None or spec.satisfies(when)):
            return None
    return spec


def cmake_options():
    """{name: 'bool' | 'auto'} for option() and TSR_* cache variables of the tree."""
    opts = {}
    files = [os.path.join(REPO, "CMakeLists.txt")]
    for root, dirs, names in os.walk(REPO):
        rel = os.path.relpath(root, REPO)
        if (rel.startswith(("build", ".git", "spack")) or "CMakeCache.txt" in names or "CMakeFiles" in rel
                or "/consumer" in rel or rel.endswith("consumer")):
            dirs[:] = []
            continue
        files += [os.path.join(root, n) for n in names
                  if (n == "CMakeLists.txt" or n.endswith(".cmake")) and root != REPO]
    for f in files:
        text = open(f).read()
        for m in re.finditer(r"^\s*option\(\s*(\w+)", text, re.M):
            opts[m.group(1)] = "bool"
        for m in re.finditer(r"^\s*set\(\s*(TSR_\w+)\s+([^\s)]*)[^)]*\bCACHE\s+(\w+)", text, re.M):
            if m.group(3) in ("STRING", "BOOL"):
                opts[m.group(1)] = "auto" if m.group(2) == "AUTO" else m.group(3).lower()
    return opts


def parse_args(arglist):
    out = {}
    for a in arglist:
        m = re.match(r"-D(\w+):(\w+)=(.*)$", a)
        if m:
            out[m.group(1)] = m.group(3)
    return out


def run_checks():
    errors = []
    cls, tree = load_recipe()

    # 1. repo.yaml
    text = open(REPO_YAML).read()
    if not (re.search(r"^repo:\s*$", text, re.M) and re.search(r"^\s+namespace:\s*tessera\s*$", text, re.M)
            and re.search(r"^\s+api:\s*v2\.0\s*$", text, re.M)):
        errors.append("repo.yaml: expected repo: {namespace: tessera, api: v2.0}")

    # 3. dependencies against the builtin repository
    variant_names = {v[0] for v in REC.variants}
    for (spec, when, _type) in REC.depends:
        m = re.match(r"([a-z0-9][\w-]*)(.*)$", spec)
        name, rest = m.group(1), m.group(2)
        if name not in BUILTIN:
            errors.append("depends_on(%r): %s is not in the list of Spack builtin packages (BUILTIN)" % (spec, name))
            continue
        for v in re.findall(r"[+~]([\w-]+)|\b([\w-]+)=", rest):
            v = v[0] or v[1]
            if BUILTIN[name] == "virtual" or v not in BUILTIN[name]:
                errors.append("depends_on(%r): %s has no variant %s (BUILTIN)" % (spec, name, v))
    # 4. conditions name existing variants
    conds = [w for (_, _, w, _) in REC.variants if w] + [w for (_, w, _) in REC.depends if w] + \
            [c for pair in REC.conflicts for c in pair if c]
    for cond in conds:
        for v in re.findall(r"[+~]([\w-]+)|\b([\w-]+)=", cond):
            v = v[0] or v[1]
            if v not in variant_names:
                errors.append("condition %r names %s, which is not a variant" % (cond, v))

    # 5. cmake_args over the variant combinations
    opts = cmake_options()
    names = [n for (n, d, w) in bool_variants()]
    values = {}  # option -> set of values seen
    combos = 0
    for bits in itertools.product([False, True], repeat=len(names)):
        spec = make_spec(dict(zip(names, bits)))
        if spec is None:
            continue
        for run_tests in (False, True):
            combos += 1
            pkg = cls.__new__(cls)
            pkg.spec = spec
            pkg.run_tests = run_tests
            args = pkg.cmake_args()
            label = " ".join(("+" if v.value else "~") + k for k, v in sorted(spec.variants.items())
                             if isinstance(v.value, bool)) + (" (tests)" if run_tests else "")
            if any(a == "" or a is None for a in args):
                errors.append("cmake_args(%s): an empty argument" % label)
            parsed = parse_args(a for a in args if a)
            if len(parsed) != len([a for a in args if a]):
                errors.append("cmake_args(%s): an argument twice or not -DNAME:TYPE=value: %s" % (label, args))
            for k, v in parsed.items():
                if k not in opts and k not in KNOWN_INPUTS and k not in PENDING_OPTIONS:
                    errors.append("cmake_args(%s): -D%s is no option of the tree nor a known input" % (label, k))
                if v == "":
                    errors.append("cmake_args(%s): -D%s is empty" % (label, k))
                kind = opts.get(k) or ("bool" if k in PENDING_OPTIONS else None)
                if kind in ("bool", "auto") and v not in ("ON", "OFF"):
                    errors.append("cmake_args(%s): -D%s=%s, expected ON or OFF" % (label, k, v))
                values.setdefault(k, set()).add(v)
    if combos == 0:
        errors.append("no valid combination of variants")

    # 2. every option has its variant (its value changes with the variants)
    for opt in sorted(opts):
        if opt in EXCLUDED:
            continue
        if len(values.get(opt, ())) < 2:
            errors.append("CMake option %s has no variant (add one, or list it in EXCLUDED with the reason)" % opt)
    for opt in EXCLUDED:
        if opt not in opts:
            errors.append("EXCLUDED names %s, which is no longer an option of the tree" % opt)
    for opt in PENDING_OPTIONS:
        if opt in opts:
            print("note: %s is now an option of the tree: remove it from PENDING_OPTIONS" % opt)

    # 6. test methods
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and not ast.get_docstring(node):
            errors.append("%s has no docstring" % node.name)
    tests = [n for n in dir(cls) if n.startswith("test_")]
    if not tests:
        errors.append("the recipe has no test_* method (spack test run would run nothing)")

    for e in errors[:40]:
        print("error: " + e)
    if len(errors) > 40:
        print("error: ... and %d more" % (len(errors) - 40))
    print("spack recipe: %d variants, %d dependencies, %d CMake options (%d excluded), %d cmake_args "
          "combinations, tests %s: %s" % (len(REC.variants), len(REC.depends), len(opts), len(EXCLUDED),
                                          combos, ", ".join(tests), "FAILED" if errors else "ok"))
    return 1 if errors else 0


def spec_from_text(text):
    cls, _ = load_recipe()
    choice = {n: d for (n, d, w) in bool_variants()}
    explicit = set()
    for tok in re.findall(r"[+~][\w-]+", text or ""):
        if tok[1:] not in choice:
            sys.exit("unknown variant %s" % tok[1:])
        choice[tok[1:]] = tok[0] == "+"
        explicit.add(tok[1:])
    spec = make_spec(choice, explicit)
    if spec is None:
        sys.exit("%r: a conflict or a variant whose condition fails" % text)
    return cls, spec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--args", metavar="SPEC", help="print cmake_args() of this spec (e.g. '+benchmarks ~shared')")
    ap.add_argument("--run-tests", metavar="PREFIX", help="run the recipe's test_* methods on an installed prefix")
    ap.add_argument("--mpiexec", help="the MPI launcher for --run-tests (default: mpiexec on PATH)")
    ap.add_argument("--variants", default="", help="the spec's variants for --args / --run-tests")
    a = ap.parse_args()
    if a.args is not None:
        cls, spec = spec_from_text(a.args)
        pkg = cls.__new__(cls)
        pkg.spec, pkg.run_tests = spec, False
        print("\n".join(x for x in pkg.cmake_args()))
        return 0
    if a.run_tests:
        cls, spec = spec_from_text(a.variants)
        mpiexec = a.mpiexec or (_which("mpiexec") and _which("mpiexec").path)
        if not mpiexec:
            sys.exit("--run-tests: no mpiexec (give --mpiexec)")
        # The MPI "prefix" is a directory whose bin/mpiexec is the launcher.
        import tempfile
        mpi_prefix = tempfile.mkdtemp(prefix="tsr-spack-mpi-")
        os.makedirs(os.path.join(mpi_prefix, "bin"))
        os.symlink(os.path.abspath(mpiexec), os.path.join(mpi_prefix, "bin", "mpiexec"))
        # MPICH's Hydra starts hydra_pmi_proxy from its own directory.
        for d in (os.path.dirname(os.path.abspath(mpiexec)), os.path.dirname(os.path.realpath(mpiexec))):
            proxy = os.path.join(d, "hydra_pmi_proxy")
            link = os.path.join(mpi_prefix, "bin", "hydra_pmi_proxy")
            if os.path.exists(proxy) and not os.path.exists(link):
                os.symlink(proxy, link)
        spec.deps["mpi"] = Dep("mpi", mpi_prefix)
        pkg = cls.__new__(cls)
        pkg.spec, pkg.run_tests = spec, False
        pkg.prefix = Prefix(os.path.abspath(a.run_tests))
        failed = 0
        import atexit
        import shutil
        work = tempfile.mkdtemp(prefix="tsr-spack-test-")
        atexit.register(shutil.rmtree, mpi_prefix, True)
        atexit.register(shutil.rmtree, work, True)
        os.chdir(work)
        for name in sorted(n for n in dir(cls) if n.startswith("test_")):
            doc = (getattr(cls, name).__doc__ or "").strip()
            try:
                getattr(pkg, name)()
                print("PASSED %s: %s" % (name, doc), flush=True)
            except SkipTest as e:
                print("SKIPPED %s: %s" % (name, e), flush=True)
            except Exception as e:  # an assertion or a failed program
                print("FAILED %s: %s\n%s" % (name, doc, e), flush=True)
                failed += 1
        return 1 if failed else 0
    return run_checks()


if __name__ == "__main__":
    sys.exit(main())
