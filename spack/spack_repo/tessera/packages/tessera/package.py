# Spack recipe for tessera (Spack 1.x, package API v2).
#
#   spack repo add <tessera>/spack/spack_repo/tessera
#   spack install tessera            # or: spack install --test=root tessera
#   spack test run tessera
#
# CI checks this file with `python3 -m py_compile` only (Spack is not
# installable on the CI machine); see README.md, "Spack".
import os

from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *


class Tessera(CMakePackage, CudaPackage):
    """Communication-avoiding building blocks for MPI codes: process grids for
    2D, 2.5D and 3D partitioning, accounted collectives on their axes, a
    per-region ledger of the bytes moved within and between nodes, and fused,
    sharded LAMB and LARS optimizers."""

    # tessera has no public home yet: the recipe builds the git repository it
    # lives in (<repo>/spack/spack_repo/tessera/packages/tessera/package.py),
    # or the one named by $TESSERA_GIT.
    _repo = os.path.abspath(os.path.join(os.path.dirname(__file__), *([os.pardir] * 5)))
    homepage = "file://" + _repo
    git = os.environ.get("TESSERA_GIT", "file://" + _repo)

    version("main", branch="main")

    variant("shared", default=True, description="Build libtessera as a shared library")
    variant("hdf5", default=True, description="Parallel HDF5 for files (else the MPI-IO binary format)")
    variant("openmp", default=True, description="OpenMP threads in the optimizer kernels")
    variant("benchmarks", default=False, description="Build the benchmarks (Google Benchmark)")
    variant(
        "scalapack",
        default=False,
        description="ScaLAPACK as the reference pdgemm of the GEMM tests and bench_gemm (libtessera does not link it)",
    )
    variant("nccl", default=False, when="+cuda", description="NCCL transport backend")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.20:", type="build")
    depends_on("pkgconfig", type="build")

    depends_on("mpi@3:")
    depends_on("blas")
    # Energy profiles and JSON reports (header-only, compiled in).
    depends_on("nlohmann-json@3.2:", type="build")
    depends_on("hdf5+mpi", when="+hdf5")
    depends_on("googletest", type="test")
    depends_on("benchmark", when="+benchmarks")
    depends_on("scalapack", when="+scalapack")

    depends_on("nccl", when="+nccl")
    # nccl needs the CUDA architectures: forward ours.
    for _arch in CudaPackage.cuda_arch_values:
        depends_on(f"nccl cuda_arch={_arch}", when=f"+nccl cuda_arch={_arch}")
    conflicts("cuda_arch=none", when="+cuda", msg="set cuda_arch=<compute capability> with +cuda")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("BUILD_SHARED_LIBS", "shared"),
            self.define_from_variant("TSR_WITH_HDF5", "hdf5"),  # ON/OFF, never AUTO here
            self.define_from_variant("TSR_WITH_OPENMP", "openmp"),
            self.define_from_variant("TSR_WITH_CUDA", "cuda"),
            self.define_from_variant("TSR_WITH_NCCL", "nccl"),  # "" without +cuda
            self.define_from_variant("TSR_BUILD_BENCHMARKS", "benchmarks"),
            self.define_from_variant("TSR_WITH_SCALAPACK", "scalapack"),
            self.define("TSR_BUILD_TESTS", self.run_tests),
            self.define("TSR_BUILD_APPS", True),
            # The same MPI for C, C++ and the launcher (FindMPI mixes otherwise).
            self.define("MPI_C_COMPILER", spec["mpi"].mpicc),
            self.define("MPI_CXX_COMPILER", spec["mpi"].mpicxx),
            self.define("MPIEXEC_EXECUTABLE", join_path(spec["mpi"].prefix.bin, "mpiexec")),
        ]
        if spec.satisfies("+hdf5"):
            args.append(self.define("HDF5_ROOT", spec["hdf5"].prefix))
        if spec.satisfies("+scalapack"):
            args.append(self.define("TSR_SCALAPACK_LIBRARY", spec["scalapack"].libs[0]))
        if spec.satisfies("+cuda"):
            archs = spec.variants["cuda_arch"].value
            if "none" not in archs:
                args.append(self.define("CMAKE_CUDA_ARCHITECTURES", ";".join(archs)))
        if spec.satisfies("+nccl"):
            args.append(self.define("NCCL_HOME", spec["nccl"].prefix))
        return args

    def setup_build_environment(self, env):
        # Spack's clean environment drops *_ROOT variables, which removes
        # OMPI_ALLOW_RUN_AS_ROOT but keeps the _CONFIRM one: set both.
        if os.geteuid() == 0:
            env.set("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.set("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        env.set("OMPI_MCA_rmaps_base_oversubscribe", "1")
        env.set("OPENBLAS_NUM_THREADS", "1")

    def test_demo(self):
        """run the installed tessera_demo on 2 MPI ranks"""
        if os.geteuid() == 0:
            os.environ["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
            os.environ["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        os.environ["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
        mpiexec = which(self.spec["mpi"].prefix.bin.mpiexec, required=True)
        demo = join_path(self.prefix.bin, "tessera_demo")
        out = mpiexec("-n", "2", demo, output=str, error=str)
        assert "PASSED: 0 wrong value(s)" in out
