# Spack recipe for tessera (Spack 1.x, package API v2).
#
#   spack repo add <tessera>/spack/spack_repo/tessera
#   spack install tessera            # or: spack install --test=root tessera
#   spack test run tessera
#
# Spack cannot be installed on the CI machine: CI checks this file
# statically with spack/check_recipe.py (syntax, every CMake option has its
# variant or a documented exclusion, every dependency is a package of
# Spack's builtin repository, cmake_args() for every variant combination
# with no empty or unknown CMake argument, the stand-alone tests' commands).
# See README.md, "Spack".
import os

from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *


class Tessera(CMakePackage, CudaPackage):
    """Communication-avoiding building blocks for MPI codes: process grids for
    2D, 2.5D and 3D partitioning, accounted collectives on their axes, a
    per-region ledger of the bytes moved within and between nodes, distributed
    GEMM, ring attention, and fused, sharded LAMB and LARS optimizers."""

    # tessera has no public home yet: the recipe builds the git repository it
    # lives in (<repo>/spack/spack_repo/tessera/packages/tessera/package.py),
    # or the one named by $TESSERA_GIT.
    _repo = os.path.abspath(os.path.join(os.path.dirname(__file__), *([os.pardir] * 5)))
    homepage = "file://" + _repo
    git = os.environ.get("TESSERA_GIT", "file://" + _repo)

    version("main", branch="main")

    # One variant per CMake option (spack/check_recipe.py checks the mapping;
    # the options without a variant are listed there with the reason).
    variant("shared", default=True, description="Build libtessera as a shared library")
    variant("hdf5", default=True, description="Parallel HDF5 for files (else the MPI-IO binary format)")
    variant("openmp", default=True, description="OpenMP threads in the optimizer kernels")
    variant(
        "scalapack",
        default=False,
        description="ScaLAPACK as the reference pdgemm of the GEMM tests and bench_gemm "
        "(libtessera does not link it)",
    )
    variant(
        "benchmarks",
        default=False,
        description="Build and install the benchmarks and the tessera-study driver "
        "(bin/tessera-study, programs in libexec/tessera)",
    )
    variant(
        "fortran",
        default=True,
        description="Fortran compiler: the Fortran module and the PMPI tool's Fortran tests",
    )
    variant("nccl", default=False, when="+cuda", description="NCCL transport backend")

    # Languages (Spack 1.x injects no compiler without them).
    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("fortran", type="build", when="+fortran")

    depends_on("cmake@3.20:", type="build")
    depends_on("pkgconfig", type="build")

    depends_on("mpi@3:")
    # No smpi variant (SimGrid's SMPI, `depends_on("simgrid+smpi")`) yet: with
    # smpicc/smpicxx the PMPI tool (lib/pmpi) and bench_attention do not
    # compile against SimGrid 3.32's mpi.h, and CI's SMPI build makes only
    # bench_gemm. Add the variant once the whole tree builds under SMPI.
    depends_on("blas")
    # Energy profiles and JSON reports (header-only, used privately).
    depends_on("nlohmann-json@3.2:", type="build")
    # The sample GPT's data loader (apps/gpt; skipped without zlib).
    depends_on("zlib-api")
    depends_on("hdf5+mpi", when="+hdf5")
    depends_on("scalapack", when="+scalapack")
    depends_on("benchmark", when="+benchmarks")
    # tessera-study: Python 3 standard library; `tessera-study report` plots
    # with matplotlib.
    depends_on("python@3.8:", type="run", when="+benchmarks")
    depends_on("py-matplotlib", type="run", when="+benchmarks")

    # ctest (spack install --test=root): GoogleTest, Python 3 for the PMPI,
    # study and checkpoint tests, h5py and numpy for the HDF5 interoperability
    # test (the Fortran compiler: the fortran variant above).
    depends_on("googletest", type="test")
    depends_on("python@3.8:", type="test")
    depends_on("py-numpy", type="test", when="+hdf5")
    depends_on("py-h5py", type="test", when="+hdf5")

    # CUDA (CudaPackage: +cuda, cuda_arch, depends_on("cuda", when="+cuda")).
    conflicts("cuda_arch=none", when="+cuda", msg="set cuda_arch=<compute capability> with +cuda")
    depends_on("nccl", when="+nccl")
    # nccl needs the CUDA architectures: forward ours.
    for _arch in CudaPackage.cuda_arch_values:
        depends_on(f"nccl cuda_arch={_arch}", when=f"+nccl cuda_arch={_arch}")

    def cmake_args(self):
        spec = self.spec

        def on_off(name, variant):
            # Explicit ON/OFF: define_from_variant gives "" for a variant
            # whose condition does not hold (nccl without +cuda).
            return self.define(name, spec.satisfies(f"+{variant}"))

        args = [
            self.define_from_variant("BUILD_SHARED_LIBS", "shared"),
            on_off("TSR_WITH_HDF5", "hdf5"),  # ON/OFF, never AUTO here
            on_off("TSR_WITH_OPENMP", "openmp"),
            on_off("TSR_WITH_SCALAPACK", "scalapack"),
            on_off("TSR_WITH_CUDA", "cuda"),
            on_off("TSR_WITH_NCCL", "nccl"),
            on_off("TSR_WITH_FORTRAN", "fortran"),
            on_off("TSR_BUILD_BENCHMARKS", "benchmarks"),
            self.define("TSR_BUILD_TESTS", bool(self.run_tests)),
            self.define("TSR_BUILD_APPS", True),
        ]
        # The same MPI for C, C++, Fortran and the launcher (FindMPI mixes
        # MPIs otherwise).
        mpi = spec["mpi"]
        args += [
            self.define("MPI_C_COMPILER", mpi.mpicc),
            self.define("MPI_CXX_COMPILER", mpi.mpicxx),
            self.define("MPIEXEC_EXECUTABLE", join_path(mpi.prefix.bin, "mpiexec")),
        ]
        if spec.satisfies("+fortran"):
            args.append(self.define("MPI_Fortran_COMPILER", mpi.mpifc))
        if spec.satisfies("+hdf5"):
            args.append(self.define("HDF5_ROOT", spec["hdf5"].prefix))
        if spec.satisfies("+scalapack"):
            args.append(self.define("TSR_SCALAPACK_LIBRARY", spec["scalapack"].libs[0]))
        if spec.satisfies("+cuda"):
            archs = spec.variants["cuda_arch"].value
            if "none" not in archs:
                args.append(self.define("CMAKE_CUDA_ARCHITECTURES", ";".join(archs)))
        if self.run_tests:
            # Spack's python for the Python tests (the CMake code prefers
            # /usr/bin/python3 otherwise, which may lack h5py).
            python = spec["python"].command.path
            for var in ("Python3_EXECUTABLE", "TSR_PYTHON3", "TSR_STUDY_PYTHON3"):
                args.append(self.define(var, python))
            if spec.satisfies("+benchmarks"):  # read in benchmarks/ only
                args.append(self.define("TSR_BENCH_PYTHON3", python))
        return args

    def setup_build_environment(self, env):
        # Spack's clean environment drops *_ROOT variables, which removes
        # OMPI_ALLOW_RUN_AS_ROOT but keeps the _CONFIRM one: set both.
        if os.geteuid() == 0:
            env.set("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.set("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        env.set("OMPI_MCA_rmaps_base_oversubscribe", "1")
        env.set("OMPI_MCA_mpi_yield_when_idle", "1")
        env.set("OPENBLAS_NUM_THREADS", "1")
        env.set("OMP_NUM_THREADS", "1")
        if self.spec.satisfies("+nccl"):
            # cmake/TesseraDependencies.cmake looks for NCCL in $NCCL_HOME.
            env.set("NCCL_HOME", self.spec["nccl"].prefix)

    # ---------------------------------------------------------- spack test run
    def _mpiexec(self):
        """The MPI's launcher, allowed to start as root and to oversubscribe."""
        if os.geteuid() == 0:
            os.environ["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
            os.environ["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        os.environ["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
        os.environ["OMPI_MCA_mpi_yield_when_idle"] = "1"
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        os.environ["OMP_NUM_THREADS"] = "1"
        return which(self.spec["mpi"].prefix.bin.mpiexec, required=True)

    def test_demo(self):
        """run the installed tessera_demo on 2 MPI ranks (every value checked)"""
        mpiexec = self._mpiexec()
        out = mpiexec("-n", "2", self.prefix.bin.tessera_demo, output=str, error=str)
        assert "PASSED: 0 wrong value(s)" in out, out

    def test_gemm_and_lamb(self):
        """run the installed tessera_check on 2 MPI ranks: a 2D GEMM and a LAMB step against closed forms"""
        mpiexec = self._mpiexec()
        out = mpiexec("-n", "2", self.prefix.bin.tessera_check, output=str, error=str)
        # On 1 x 2, SUMMA moves only A's panels: rank 0 receives rank 1's
        # 37 x 11 block of A (k = 23 split 12 + 11), 37 * 11 * 8 bytes.
        assert (
            "gemm: 37 x 29 x 23 on a 1 x 2 grid (2D SUMMA): 0 wrong value(s), "
            "rank 0 received 3256 bytes" in out
        ), out
        assert "lamb: one data-parallel step on 2 rank(s)" in out, out
        assert "tessera_check: PASSED" in out, out

    def test_study(self):
        """+benchmarks: the bench programs are installed; tessera-study lists its studies and plans the quick one"""
        if not self.spec.satisfies("+benchmarks"):
            raise SkipTest("tessera-study is installed with +benchmarks")
        libexec = join_path(self.prefix, "libexec", "tessera")
        for prog in ("bench_gemm", "bench_attention", "bench_optimizer", "bench_energy_gemm",
                     "bench_plan_energy", "bench_plan_objectives", "bench_transport", "bench_ledger",
                     "bench_sgemm", "bench_pmpi", "bench_checkpoint"):
            assert os.access(join_path(libexec, prog), os.X_OK), f"{prog} is not installed in {libexec}"
        study = which(self.prefix.bin.join("tessera-study"), required=True)
        out = study("list", output=str, error=str)
        assert "quick" in out, out
        out = study("run", "quick", "--dry-run", "--out", "study-dry-run", output=str, error=str)
        assert "bench_gemm" in out, out
