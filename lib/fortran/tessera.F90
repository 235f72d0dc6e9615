! Fortran 2008 module `tessera`: the tessera C API (the headers of include/tessera)
! through iso_c_binding, for existing Fortran MPI codes.
!
! Conventions (docs/FORTRAN.md):
!  - Every procedure is a subroutine whose last required argument is
!    `integer, intent(out) :: status` (TSR_SUCCESS = 0 or a TSR_ERR_* code);
!    the module never stops, prints or aborts. tsr_last_error(ctx) returns
!    the message of the last failing call of the calling thread.
!  - Handles are derived types holding the C pointer (tsr_context, tsr_grid,
!    tsr_matrix, tsr_optimizer, tsr_report); destroying one nullifies it.
!  - Communicators: an integer handle (`use mpi`, mpif.h) or, when the module
!    was built with an mpi_f08 module, a type(MPI_Comm).
!  - Arrays are assumed-shape and contiguous (a non-contiguous actual
!    argument is copied in and out by the compiler); counts are their sizes.
!  - Ranks, grid coordinates and axis positions are 0-based as in MPI;
!    indices into lists (optimizer groups, report regions, matrix elements)
!    are 1-based.
!  - Strings are character(*) in and character(:), allocatable out.
module tessera
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: real32, real64, int32, int64
#ifdef TSR_FORTRAN_MPI_F08
  use mpi_f08, only: MPI_Comm
#endif
  implicit none
  private

  ! ------------------------------------------------------------ constants ---
  integer, parameter, public :: TSR_SUCCESS = 0, TSR_ERR_INVALID_ARG = 1, TSR_ERR_SHAPE = 2, &
    TSR_ERR_MPI = 3, TSR_ERR_NO_MEMORY = 4, TSR_ERR_UNSUPPORTED = 5, TSR_ERR_IO = 6, &
    TSR_ERR_NUMERIC = 7, TSR_ERR_STATE = 8, TSR_ERR_INTERNAL = 9
  integer(c_int), parameter, public :: TSR_BYTE = 0, TSR_INT32 = 1, TSR_INT64 = 2, TSR_FLOAT32 = 3, &
    TSR_FLOAT64 = 4, TSR_BFLOAT16 = 5
  integer, parameter, public :: TSR_SUM = 0, TSR_PROD = 1, TSR_MIN = 2, TSR_MAX = 3
  integer, parameter, public :: TSR_GRID_1D = 1, TSR_GRID_2D = 2, TSR_GRID_2P5D = 3, TSR_GRID_3D = 4, &
    TSR_GRID_3D_ANY = 5
  integer, parameter, public :: TSR_AXIS_ROW = 0, TSR_AXIS_COL = 1, TSR_AXIS_DEPTH = 2, &
    TSR_AXIS_LAYER = 3, TSR_AXIS_ALL = 4
  integer, parameter, public :: TSR_PEER_SELF = 0, TSR_PEER_NODE = 1, TSR_PEER_REMOTE = 2
  integer, parameter, public :: TSR_COLL_BARRIER = 0, TSR_COLL_BCAST = 1, TSR_COLL_REDUCE = 2, &
    TSR_COLL_ALLREDUCE = 3, TSR_COLL_ALLGATHER = 4, TSR_COLL_REDUCE_SCATTER = 5, TSR_COLL_ALLTOALL = 6, &
    TSR_COLL_GATHER = 7, TSR_COLL_SCATTER = 8
  integer(c_size_t), parameter, public :: TSR_COUNT_INVALID = huge(0_c_size_t)
  ! gemm.h
  integer(c_int), parameter, public :: TSR_DIM_NONE = -1, TSR_DIM_I = 0, TSR_DIM_J = 1, TSR_DIM_K = 2
  integer, parameter, public :: TSR_NOTRANS = 0, TSR_TRANS = 1
  integer, parameter, public :: TSR_GEMM_AUTO = 0, TSR_GEMM_1D = 1, TSR_GEMM_2D = 2, TSR_GEMM_2P5D = 3, &
    TSR_GEMM_3D = 4
  ! optimizer.h
  integer, parameter, public :: TSR_OPT_LAMB = 1, TSR_OPT_LARS = 2
  integer, parameter, public :: TSR_PRESET_LAMB_PAPER = 1, TSR_PRESET_LAMB_APEX = 2, &
    TSR_PRESET_LAMB_NVLAMB = 3, TSR_PRESET_LAMB_DEEPSPEED = 4, TSR_PRESET_LAMB_TORCH_OPTIMIZER = 5, &
    TSR_PRESET_LAMB_TFA = 6, TSR_PRESET_LAMB_OPTAX = 7, TSR_PRESET_LARS_PAPER = 101, &
    TSR_PRESET_LARS_MLPERF = 102, TSR_PRESET_LARS_SIMCLR = 103, TSR_PRESET_LARS_TIMM = 104, &
    TSR_PRESET_LARS_OPTAX = 105, TSR_PRESET_LARS_SIMCLR_POPULAR = 106
  integer, parameter, public :: TSR_OPT_REPLICATED = 0, TSR_OPT_DATA_PARALLEL = 1, TSR_OPT_SHARDED = 2
  integer, parameter, public :: TSR_OPT_LR = 0, TSR_OPT_WEIGHT_DECAY = 1, TSR_OPT_DECAY = 2, &
    TSR_OPT_ADAPT = 3, TSR_OPT_EPS = 4, TSR_OPT_TRUST_COEFF = 5, TSR_OPT_TRUST_MIN = 6, &
    TSR_OPT_TRUST_MAX = 7, TSR_OPT_NORM_MIN = 8, TSR_OPT_NORM_MAX = 9, TSR_OPT_BETA1 = 10, &
    TSR_OPT_BETA2 = 11, TSR_OPT_BIAS_CORRECTION = 12, TSR_OPT_EPS_MODE = 13, TSR_OPT_DECAY_MODE = 14, &
    TSR_OPT_GRAD_AVERAGING = 15, TSR_OPT_MOMENTUM = 16, TSR_OPT_NESTEROV = 17, TSR_OPT_LARS_DENOM = 18, &
    TSR_OPT_MOMENTUM_MODE = 19, TSR_OPT_MAX_GRAD_NORM = 20, TSR_OPT_LOSS_SCALE = 21, &
    TSR_OPT_BUCKET_BYTES = 22, TSR_OPT_THREADS = 23, TSR_OPT_EPS_ROOT = 24
  integer, parameter, public :: TSR_OPTQ_KIND = 0, TSR_OPTQ_DIST = 1, TSR_OPTQ_PARAMS = 2, &
    TSR_OPTQ_GROUPS = 3, TSR_OPTQ_GROUP_OFFSET = 4, TSR_OPTQ_GROUP_SIZE = 5, TSR_OPTQ_SHARD_OFFSET = 6, &
    TSR_OPTQ_SHARD_SIZE = 7, TSR_OPTQ_STEP = 8, TSR_OPTQ_SKIPPED = 9, TSR_OPTQ_LAST_SKIPPED = 10, &
    TSR_OPTQ_GRAD_NORM = 11, TSR_OPTQ_CLIP_FACTOR = 12, TSR_OPTQ_TRUST_RATIO = 13, TSR_OPTQ_LR = 14, &
    TSR_OPTQ_PASSES = 15, TSR_OPTQ_NORM_ALLREDUCES = 16, TSR_OPTQ_STEP_BYTES = 17, &
    TSR_OPTQ_STATE_BYTES = 18, TSR_OPTQ_PARAM_TYPE = 19

  ! -------------------------------------------------------------- handles ---
  type, public :: tsr_context
    type(c_ptr) :: p = c_null_ptr
  end type
  type, public :: tsr_grid
    type(c_ptr) :: p = c_null_ptr
  end type
  type, public :: tsr_matrix
    type(c_ptr) :: p = c_null_ptr
  end type
  type, public :: tsr_optimizer
    type(c_ptr) :: p = c_null_ptr
  end type
  type, public :: tsr_report
    type(c_ptr) :: p = c_null_ptr
  end type

  ! tsr_layout of gemm.h (interoperable): tsr_layout(row_dim, col_dim, sub_dim)
  ! with TSR_DIM_* values; row_block/col_block > 0: block-cyclic.
  type, bind(C), public :: tsr_layout
    integer(c_int) :: row_dim = TSR_DIM_NONE, col_dim = TSR_DIM_NONE, sub_dim = TSR_DIM_NONE
    integer(c_int) :: row_block = 0, col_block = 0
  end type

  ! tsr_traffic and tsr_counters of tessera.h (interoperable). Peer classes and
  ! collective kinds index the arrays 1-based: p2p_sent(TSR_PEER_NODE + 1).
  type, bind(C), public :: tsr_traffic
    integer(c_int64_t) :: messages = 0, bytes = 0
  end type
  type, bind(C), public :: tsr_counters
    type(tsr_traffic) :: p2p_sent(3), p2p_recv(3)
    integer(c_int64_t) :: coll_calls(16) = 0
    integer(c_int64_t) :: coll_payload_sent = 0, coll_payload_recv = 0
    type(tsr_traffic) :: coll_wire_sent(3), coll_wire_recv(3)
    integer(c_int64_t) :: host_to_device_bytes = 0, device_to_host_bytes = 0, device_to_device_bytes = 0
    integer(c_int64_t) :: disk_read_bytes = 0, disk_write_bytes = 0
    type(tsr_traffic) :: control
  end type

  ! ------------------------------------------------------ public generics ---
  public :: tsr_status_name, tsr_last_error, tsr_get_version
  public :: tsr_context_create, tsr_context_destroy, tsr_context_rank, tsr_context_size, tsr_context_node
  public :: tsr_grid_dims_create, tsr_grid_create, tsr_grid_destroy, tsr_grid_get_dims, tsr_grid_is_member
  public :: tsr_grid_my_rank, tsr_grid_my_coords, tsr_grid_axis_info, tsr_grid_comm
  public :: tsr_bcast, tsr_allreduce, tsr_allreduce_inplace, tsr_allgather, tsr_reduce_scatter, tsr_alltoall
  public :: tsr_shift
  public :: tsr_region_begin, tsr_region_end, tsr_counters_get, tsr_counters_reset
  public :: tsr_report_create, tsr_report_destroy, tsr_report_region_count, tsr_report_region_path
  public :: tsr_report_rank_counters, tsr_report_stats, tsr_report_format, tsr_report_write
  public :: tsr_matrix_create, tsr_matrix_destroy, tsr_matrix_local_size, tsr_matrix_global_index
  public :: tsr_matrix_scatter, tsr_matrix_gather, tsr_matrix_redistribute, tsr_gemm, tsr_gemm_layouts
  public :: tsr_optimizer_create, tsr_optimizer_destroy, tsr_optimizer_set_param, tsr_optimizer_get_param
  public :: tsr_optimizer_step, tsr_optimizer_query, tsr_optimizer_save, tsr_optimizer_load

  interface tsr_context_create
    module procedure context_create_int
#ifdef TSR_FORTRAN_MPI_F08
    module procedure context_create_f08
#endif
  end interface

  interface tsr_bcast
    module procedure bcast_r8_1, bcast_r8_2, bcast_r4_1, bcast_r4_2, bcast_i4_1, bcast_i4_2, bcast_i8_1, bcast_i8_2
  end interface
  interface tsr_allreduce
    module procedure allreduce_r8_1, allreduce_r8_2, allreduce_r4_1, allreduce_r4_2, &
      allreduce_i4_1, allreduce_i4_2, allreduce_i8_1, allreduce_i8_2
  end interface
  interface tsr_allreduce_inplace
    module procedure allreduce_ip_r8_1, allreduce_ip_r8_2, allreduce_ip_r4_1, allreduce_ip_r4_2, &
      allreduce_ip_i4_1, allreduce_ip_i4_2, allreduce_ip_i8_1, allreduce_ip_i8_2
  end interface
  interface tsr_allgather
    module procedure allgather_r8_1, allgather_r8_2, allgather_r4_1, allgather_r4_2, &
      allgather_i4_1, allgather_i4_2, allgather_i8_1, allgather_i8_2
  end interface
  interface tsr_reduce_scatter
    module procedure reduce_scatter_r8_1, reduce_scatter_r8_2, reduce_scatter_r4_1, reduce_scatter_r4_2, &
      reduce_scatter_i4_1, reduce_scatter_i4_2, reduce_scatter_i8_1, reduce_scatter_i8_2
  end interface
  interface tsr_alltoall
    module procedure alltoall_r8_1, alltoall_r8_2, alltoall_r4_1, alltoall_r4_2, &
      alltoall_i4_1, alltoall_i4_2, alltoall_i8_1, alltoall_i8_2
  end interface
  interface tsr_shift
    module procedure shift_r8_1, shift_r8_2, shift_r4_1, shift_r4_2, shift_i4_1, shift_i4_2, shift_i8_1, shift_i8_2
  end interface
  interface tsr_matrix_scatter
    module procedure scatter_r8_1, scatter_r8_2, scatter_r4_1, scatter_r4_2
  end interface
  interface tsr_matrix_gather
    module procedure gather_r8_1, gather_r8_2, gather_r4_1, gather_r4_2
  end interface
  interface tsr_matrix_redistribute
    module procedure redist_r8_1, redist_r8_2, redist_r4_1, redist_r4_2
  end interface
  interface tsr_gemm
    module procedure gemm_r8_1, gemm_r8_2, gemm_r4_1, gemm_r4_2
  end interface

  ! ------------------------------------------------------ C declarations ---
  interface
    function c_strlen(s) bind(C, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function
    function c_tsr_status_name(st) bind(C, name="tsr_status_name") result(s)
      import :: c_int, c_ptr
      integer(c_int), value :: st
      type(c_ptr) :: s
    end function
    function c_tsr_last_error(ctx) bind(C, name="tsr_last_error") result(s)
      import :: c_ptr
      type(c_ptr), value :: ctx
      type(c_ptr) :: s
    end function
    function c_tsr_get_version(major, minor, patch, code) bind(C, name="tsr_get_version") result(st)
      import :: c_int
      integer(c_int) :: major, minor, patch, code
      integer(c_int) :: st
    end function
    function c_tsr_f_context_create(comm, rpn, ctx) bind(C, name="tsr_f_context_create") result(st)
      import :: c_int, c_ptr
      integer(c_int), value :: comm, rpn
      type(c_ptr) :: ctx
      integer(c_int) :: st
    end function
    function c_tsr_context_destroy(ctx) bind(C, name="tsr_context_destroy") result(st)
      import :: c_int, c_ptr
      type(c_ptr) :: ctx
      integer(c_int) :: st
    end function
    function c_tsr_context_rank(ctx, v) bind(C, name="tsr_context_rank") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int) :: v, st
    end function
    function c_tsr_context_size(ctx, v) bind(C, name="tsr_context_size") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int) :: v, st
    end function
    function c_tsr_context_node(ctx, node, nnodes) bind(C, name="tsr_context_node") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int) :: node, nnodes, st
    end function
    function c_tsr_grid_dims_create(kind, nranks, allow_idle, dims, nused) bind(C, name="tsr_grid_dims_create") &
        result(st)
      import :: c_int
      integer(c_int), value :: kind, nranks, allow_idle
      integer(c_int) :: dims(3), nused, st
    end function
    function c_tsr_grid_create(ctx, kind, dims, grid) bind(C, name="tsr_grid_create") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int), value :: kind
      integer(c_int) :: dims(3)
      type(c_ptr) :: grid
      integer(c_int) :: st
    end function
    function c_tsr_grid_destroy(grid) bind(C, name="tsr_grid_destroy") result(st)
      import :: c_int, c_ptr
      type(c_ptr) :: grid
      integer(c_int) :: st
    end function
    function c_tsr_grid_get_dims(grid, dims) bind(C, name="tsr_grid_get_dims") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: grid
      integer(c_int) :: dims(3), st
    end function
    function c_tsr_grid_is_member(grid, v) bind(C, name="tsr_grid_is_member") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: grid
      integer(c_int) :: v, st
    end function
    function c_tsr_grid_my_rank(grid, v) bind(C, name="tsr_grid_my_rank") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: grid
      integer(c_int) :: v, st
    end function
    function c_tsr_grid_my_coords(grid, v) bind(C, name="tsr_grid_my_coords") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: grid
      integer(c_int) :: v(3), st
    end function
    function c_tsr_grid_axis_info(grid, axis, rank, size) bind(C, name="tsr_grid_axis_info") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: grid
      integer(c_int), value :: axis
      integer(c_int) :: rank, size, st
    end function
    function c_tsr_f_grid_comm(grid, axis, comm) bind(C, name="tsr_f_grid_comm") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: grid
      integer(c_int), value :: axis
      integer(c_int) :: comm, st
    end function
    function c_tsr_bcast(grid, axis, buf, count, type, root) bind(C, name="tsr_bcast") result(st)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: grid, buf
      integer(c_int), value :: axis, type, root
      integer(c_size_t), value :: count
      integer(c_int) :: st
    end function
    function c_tsr_allreduce(grid, axis, sbuf, rbuf, count, type, op) bind(C, name="tsr_allreduce") result(st)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: grid, sbuf, rbuf
      integer(c_int), value :: axis, type, op
      integer(c_size_t), value :: count
      integer(c_int) :: st
    end function
    function c_tsr_allgather(grid, axis, sbuf, count, rbuf, type) bind(C, name="tsr_allgather") result(st)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: grid, sbuf, rbuf
      integer(c_int), value :: axis, type
      integer(c_size_t), value :: count
      integer(c_int) :: st
    end function
    function c_tsr_reduce_scatter(grid, axis, sbuf, rbuf, count, type, op) bind(C, name="tsr_reduce_scatter") &
        result(st)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: grid, sbuf, rbuf
      integer(c_int), value :: axis, type, op
      integer(c_size_t), value :: count
      integer(c_int) :: st
    end function
    function c_tsr_alltoall(grid, axis, sbuf, rbuf, count, type) bind(C, name="tsr_alltoall") result(st)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: grid, sbuf, rbuf
      integer(c_int), value :: axis, type
      integer(c_size_t), value :: count
      integer(c_int) :: st
    end function
    function c_tsr_shift(grid, axis, sbuf, rbuf, count, type, shift) bind(C, name="tsr_shift") result(st)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: grid, sbuf, rbuf
      integer(c_int), value :: axis, type, shift
      integer(c_size_t), value :: count
      integer(c_int) :: st
    end function
    function c_tsr_region_begin(ctx, name) bind(C, name="tsr_region_begin") result(st)
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: ctx
      character(kind=c_char) :: name(*)
      integer(c_int) :: st
    end function
    function c_tsr_region_end(ctx, name) bind(C, name="tsr_region_end") result(st)
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: ctx
      character(kind=c_char) :: name(*)
      integer(c_int) :: st
    end function
    function c_tsr_counters_get(ctx, path, out) bind(C, name="tsr_counters_get") result(st)
      import :: c_int, c_ptr, c_char, tsr_counters
      type(c_ptr), value :: ctx
      character(kind=c_char) :: path(*)
      type(tsr_counters) :: out
      integer(c_int) :: st
    end function
    function c_tsr_counters_reset(ctx) bind(C, name="tsr_counters_reset") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int) :: st
    end function
    function c_tsr_report_create(ctx, root, report) bind(C, name="tsr_report_create") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int), value :: root
      type(c_ptr) :: report
      integer(c_int) :: st
    end function
    function c_tsr_report_destroy(report) bind(C, name="tsr_report_destroy") result(st)
      import :: c_int, c_ptr
      type(c_ptr) :: report
      integer(c_int) :: st
    end function
    function c_tsr_report_region_count(report, n) bind(C, name="tsr_report_region_count") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: report
      integer(c_int) :: n, st
    end function
    function c_tsr_report_region_path(report, region, path) bind(C, name="tsr_report_region_path") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: report
      integer(c_int), value :: region
      type(c_ptr) :: path
      integer(c_int) :: st
    end function
    function c_tsr_report_rank_counters(report, region, rank, out) bind(C, name="tsr_report_rank_counters") &
        result(st)
      import :: c_int, c_ptr, tsr_counters
      type(c_ptr), value :: report
      integer(c_int), value :: region, rank
      type(tsr_counters) :: out
      integer(c_int) :: st
    end function
    function c_tsr_report_stats(report, region, mn, mx, sm) bind(C, name="tsr_report_stats") result(st)
      import :: c_int, c_ptr, tsr_counters
      type(c_ptr), value :: report
      integer(c_int), value :: region
      type(tsr_counters) :: mn, mx, sm
      integer(c_int) :: st
    end function
    function c_tsr_report_format(report, buf, len, needed) bind(C, name="tsr_report_format") result(st)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: report, buf
      integer(c_size_t), value :: len
      integer(c_size_t) :: needed
      integer(c_int) :: st
    end function
    ! gemm.h
    function c_tsr_matrix_create(grid, m, n, type, layout, ld, mat) bind(C, name="tsr_matrix_create") result(st)
      import :: c_int, c_ptr, c_int64_t, tsr_layout
      type(c_ptr), value :: grid
      integer(c_int64_t), value :: m, n, ld
      integer(c_int), value :: type
      type(tsr_layout) :: layout
      type(c_ptr) :: mat
      integer(c_int) :: st
    end function
    function c_tsr_matrix_destroy(mat) bind(C, name="tsr_matrix_destroy") result(st)
      import :: c_int, c_ptr
      type(c_ptr) :: mat
      integer(c_int) :: st
    end function
    function c_tsr_matrix_local_size(mat, rows, cols, ld) bind(C, name="tsr_matrix_local_size") result(st)
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: mat
      integer(c_int64_t) :: rows, cols, ld
      integer(c_int) :: st
    end function
    function c_tsr_matrix_global_index(mat, lr, lc, gr, gc) bind(C, name="tsr_matrix_global_index") result(st)
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: mat
      integer(c_int64_t), value :: lr, lc
      integer(c_int64_t) :: gr, gc
      integer(c_int) :: st
    end function
    function c_tsr_matrix_info(mat, m, n, type, layout, grid) bind(C, name="tsr_matrix_info") result(st)
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: mat, layout, grid
      integer(c_int64_t) :: m, n
      integer(c_int) :: type
      integer(c_int) :: st
    end function
    function c_tsr_matrix_scatter(mat, root, global, ldg, local) bind(C, name="tsr_matrix_scatter") result(st)
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: mat, global, local
      integer(c_int), value :: root
      integer(c_int64_t), value :: ldg
      integer(c_int) :: st
    end function
    function c_tsr_matrix_gather(mat, root, local, global, ldg) bind(C, name="tsr_matrix_gather") result(st)
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: mat, global, local
      integer(c_int), value :: root
      integer(c_int64_t), value :: ldg
      integer(c_int) :: st
    end function
    function c_tsr_matrix_redistribute(src, sbuf, dst, dbuf) bind(C, name="tsr_matrix_redistribute") result(st)
      import :: c_int, c_ptr
      type(c_ptr), value :: src, sbuf, dst, dbuf
      integer(c_int) :: st
    end function
    function c_tsr_gemm(algo, ta, tb, alpha, A, a_, B, b_, beta, C, c_) bind(C, name="tsr_gemm") result(st)
      import :: c_int, c_ptr, c_double
      integer(c_int), value :: algo, ta, tb
      real(c_double), value :: alpha, beta
      type(c_ptr), value :: A, a_, B, b_, C, c_
      integer(c_int) :: st
    end function
    function c_tsr_gemm_layouts(algo, ta, tb, roles, layouts) bind(C, name="tsr_gemm_layouts") result(st)
      import :: c_int, tsr_layout
      integer(c_int), value :: algo, ta, tb
      integer(c_int) :: roles(3)
      type(tsr_layout) :: layouts(3)
      integer(c_int) :: st
    end function
    ! optimizer.h
    function c_tsr_optimizer_create(ctx, preset, dist, type, ngroups, sizes, opt) bind(C, name="tsr_optimizer_create") &
        result(st)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: ctx
      integer(c_int), value :: preset, dist, type
      integer(c_size_t), value :: ngroups
      integer(c_size_t) :: sizes(*)
      type(c_ptr) :: opt
      integer(c_int) :: st
    end function
    function c_tsr_optimizer_destroy(opt) bind(C, name="tsr_optimizer_destroy") result(st)
      import :: c_int, c_ptr
      type(c_ptr) :: opt
      integer(c_int) :: st
    end function
    function c_tsr_optimizer_set_param(opt, param, value) bind(C, name="tsr_optimizer_set_param") result(st)
      import :: c_int, c_ptr, c_double
      type(c_ptr), value :: opt
      integer(c_int), value :: param
      real(c_double), value :: value
      integer(c_int) :: st
    end function
    function c_tsr_optimizer_set_group_param(opt, group, param, value) bind(C, name="tsr_optimizer_set_group_param") &
        result(st)
      import :: c_int, c_ptr, c_double
      type(c_ptr), value :: opt
      integer(c_int), value :: group, param
      real(c_double), value :: value
      integer(c_int) :: st
    end function
    function c_tsr_optimizer_get_param(opt, group, param, value) bind(C, name="tsr_optimizer_get_param") result(st)
      import :: c_int, c_ptr, c_double
      type(c_ptr), value :: opt
      integer(c_int), value :: group, param
      real(c_double) :: value
      integer(c_int) :: st
    end function
    function c_tsr_optimizer_step(opt, params, grads, count) bind(C, name="tsr_optimizer_step") result(st)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: opt, params, grads
      integer(c_size_t), value :: count
      integer(c_int) :: st
    end function
    function c_tsr_optimizer_query(opt, what, group, value) bind(C, name="tsr_optimizer_query") result(st)
      import :: c_int, c_ptr, c_double
      type(c_ptr), value :: opt
      integer(c_int), value :: what, group
      real(c_double) :: value
      integer(c_int) :: st
    end function
    function c_tsr_optimizer_save(opt, path) bind(C, name="tsr_optimizer_save") result(st)
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: opt
      character(kind=c_char) :: path(*)
      integer(c_int) :: st
    end function
    function c_tsr_optimizer_load(opt, path) bind(C, name="tsr_optimizer_load") result(st)
      import :: c_int, c_ptr, c_char
      type(c_ptr), value :: opt
      character(kind=c_char) :: path(*)
      integer(c_int) :: st
    end function
  end interface

contains

  ! ------------------------------------------------------------- helpers ---
  ! A C string (NUL-terminated) as an allocatable Fortran string ("" for NULL).
  function from_c(s) result(f)
    type(c_ptr), intent(in) :: s
    character(:), allocatable :: f
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(s)) then
      f = ""
      return
    end if
    n = int(c_strlen(s))
    call c_f_pointer(s, chars, [n])
    allocate(character(n) :: f)
    do i = 1, n
      f(i:i) = chars(i)
    end do
  end function

  ! A Fortran string (trailing blanks kept) as a NUL-terminated C string.
  pure function to_c(f) result(s)
    character(*), intent(in) :: f
    character(kind=c_char, len=1) :: s(len(f) + 1)
    integer :: i
    do i = 1, len(f)
      s(i) = f(i:i)
    end do
    s(len(f) + 1) = c_null_char
  end function

  ! Size of a grid axis (0 when the grid or axis is bad or the rank idle:
  ! the collective then fails for its own reason).
  function axis_size(grid, axis) result(n)
    type(tsr_grid), intent(in) :: grid
    integer, intent(in) :: axis
    integer(c_size_t) :: n
    integer(c_int) :: r, s
    r = -1
    s = 0
    n = 0
    if (c_tsr_grid_axis_info(grid%p, int(axis, c_int), r, s) == TSR_SUCCESS) n = int(max(s, 0), c_size_t)
  end function

  ! Whether a local array of nelem elements of type dt fits a descriptor's
  ! local block: TSR_SUCCESS, TSR_ERR_SHAPE (too small) or TSR_ERR_INVALID_ARG
  ! (another type). A bad descriptor passes: the C call reports it. m, n: the
  ! global size.
  function local_check(mat, nelem, dt, m, n) result(st)
    type(tsr_matrix), intent(in) :: mat
    integer(c_int64_t), intent(in) :: nelem
    integer(c_int), intent(in) :: dt
    integer(c_int64_t), intent(out) :: m, n
    integer :: st
    integer(c_int64_t) :: rows, cols, ld, need
    integer(c_int) :: t
    st = TSR_SUCCESS
    m = 0
    n = 0
    t = dt
    if (c_tsr_matrix_info(mat%p, m, n, t, c_null_ptr, c_null_ptr) /= TSR_SUCCESS) return
    if (c_tsr_matrix_local_size(mat%p, rows, cols, ld) /= TSR_SUCCESS) return
    if (t /= dt) then
      st = TSR_ERR_INVALID_ARG
      return
    end if
    need = 0
    if (rows > 0 .and. cols > 0) need = ld * (cols - 1) + rows
    if (nelem < need) st = TSR_ERR_SHAPE
  end function

  ! ------------------------------------------------- statuses and errors ---
  ! "TSR_ERR_SHAPE" for TSR_ERR_SHAPE.
  function tsr_status_name(status) result(name)
    integer, intent(in) :: status
    character(:), allocatable :: name
    name = from_c(c_tsr_status_name(int(status, c_int)))
  end function

  ! The last error message of the calling thread on ctx; without ctx (or
  ! for a null one) the thread's last message from any call.
  function tsr_last_error(ctx) result(msg)
    type(tsr_context), intent(in), optional :: ctx
    character(:), allocatable :: msg
    if (present(ctx)) then
      msg = from_c(c_tsr_last_error(ctx%p))
    else
      msg = from_c(c_tsr_last_error(c_null_ptr))
    end if
  end function

  subroutine tsr_get_version(major, minor, patch, status)
    integer, intent(out) :: major, minor, patch
    integer, intent(out) :: status
    integer(c_int) :: a, b, c, code
    status = int(c_tsr_get_version(a, b, c, code))
    major = a
    minor = b
    patch = c
  end subroutine

  ! ------------------------------------------------------------ contexts ---
  ! A context over a communicator (collective over it; tessera duplicates it).
  ! ranks_per_node > 0 simulates nodes of that many ranks (default: detect).
  subroutine context_create_int(comm, ctx, status, ranks_per_node)
    integer, intent(in) :: comm
    type(tsr_context), intent(out) :: ctx
    integer, intent(out) :: status
    integer, intent(in), optional :: ranks_per_node
    integer(c_int) :: rpn
    rpn = 0
    if (present(ranks_per_node)) rpn = int(ranks_per_node, c_int)
    status = int(c_tsr_f_context_create(int(comm, c_int), rpn, ctx%p))
  end subroutine

#ifdef TSR_FORTRAN_MPI_F08
  subroutine context_create_f08(comm, ctx, status, ranks_per_node)
    type(MPI_Comm), intent(in) :: comm
    type(tsr_context), intent(out) :: ctx
    integer, intent(out) :: status
    integer, intent(in), optional :: ranks_per_node
    call context_create_int(comm%MPI_VAL, ctx, status, ranks_per_node)
  end subroutine
#endif

  subroutine tsr_context_destroy(ctx, status)
    type(tsr_context), intent(inout) :: ctx
    integer, intent(out) :: status
    status = int(c_tsr_context_destroy(ctx%p))
  end subroutine

  subroutine tsr_context_rank(ctx, rank, status)
    type(tsr_context), intent(in) :: ctx
    integer, intent(out) :: rank, status
    integer(c_int) :: v
    v = -1
    status = int(c_tsr_context_rank(ctx%p, v))
    rank = v
  end subroutine

  subroutine tsr_context_size(ctx, size, status)
    type(tsr_context), intent(in) :: ctx
    integer, intent(out) :: size, status
    integer(c_int) :: v
    v = 0
    status = int(c_tsr_context_size(ctx%p, v))
    size = v
  end subroutine

  subroutine tsr_context_node(ctx, node, nnodes, status)
    type(tsr_context), intent(in) :: ctx
    integer, intent(out) :: node, nnodes, status
    integer(c_int) :: a, b
    a = -1
    b = 0
    status = int(c_tsr_context_node(ctx%p, a, b))
    node = a
    nnodes = b
  end subroutine

  ! --------------------------------------------------------------- grids ---
  ! dims: entries > 0 on entry are kept, 0 entries chosen (as MPI_Dims_create).
  ! allow_idle: choose the largest grid that fits and return its rank count
  ! in nused (ranks nused..nranks-1 idle).
  subroutine tsr_grid_dims_create(kind, nranks, dims, status, allow_idle, nused)
    integer, intent(in) :: kind, nranks
    integer, intent(inout) :: dims(3)
    integer, intent(out) :: status
    logical, intent(in), optional :: allow_idle
    integer, intent(out), optional :: nused
    integer(c_int) :: d(3), used, idle
    idle = 0
    if (present(allow_idle)) then
      if (allow_idle) idle = 1
    end if
    d = int(dims, c_int)
    used = nranks
    status = int(c_tsr_grid_dims_create(int(kind, c_int), int(nranks, c_int), idle, d, used))
    dims = d
    if (present(nused)) nused = used
  end subroutine

  subroutine tsr_grid_create(ctx, kind, dims, grid, status)
    type(tsr_context), intent(in) :: ctx
    integer, intent(in) :: kind, dims(3)
    type(tsr_grid), intent(out) :: grid
    integer, intent(out) :: status
    integer(c_int) :: d(3)
    d = int(dims, c_int)
    status = int(c_tsr_grid_create(ctx%p, int(kind, c_int), d, grid%p))
  end subroutine

  subroutine tsr_grid_destroy(grid, status)
    type(tsr_grid), intent(inout) :: grid
    integer, intent(out) :: status
    status = int(c_tsr_grid_destroy(grid%p))
  end subroutine

  subroutine tsr_grid_get_dims(grid, dims, status)
    type(tsr_grid), intent(in) :: grid
    integer, intent(out) :: dims(3), status
    integer(c_int) :: d(3)
    d = 0
    status = int(c_tsr_grid_get_dims(grid%p, d))
    dims = d
  end subroutine

  subroutine tsr_grid_is_member(grid, member, status)
    type(tsr_grid), intent(in) :: grid
    logical, intent(out) :: member
    integer, intent(out) :: status
    integer(c_int) :: v
    v = 0
    status = int(c_tsr_grid_is_member(grid%p, v))
    member = v /= 0
  end subroutine

  subroutine tsr_grid_my_rank(grid, grid_rank, status)
    type(tsr_grid), intent(in) :: grid
    integer, intent(out) :: grid_rank, status
    integer(c_int) :: v
    v = -1
    status = int(c_tsr_grid_my_rank(grid%p, v))
    grid_rank = v
  end subroutine

  ! Coordinates (i, j, k), 0-based.
  subroutine tsr_grid_my_coords(grid, coords, status)
    type(tsr_grid), intent(in) :: grid
    integer, intent(out) :: coords(3), status
    integer(c_int) :: v(3)
    v = -1
    status = int(c_tsr_grid_my_coords(grid%p, v))
    coords = v
  end subroutine

  ! This rank's position (0-based, -1 on idle ranks) and the size of an axis.
  subroutine tsr_grid_axis_info(grid, axis, rank, size, status)
    type(tsr_grid), intent(in) :: grid
    integer, intent(in) :: axis
    integer, intent(out) :: rank, size, status
    integer(c_int) :: r, s
    r = -1
    s = 0
    status = int(c_tsr_grid_axis_info(grid%p, int(axis, c_int), r, s))
    rank = r
    size = s
  end subroutine

  ! The communicator of an axis as an integer Fortran handle, owned by the
  ! grid (do not free it); MPI_COMM_NULL on idle ranks. With mpi_f08:
  ! type(MPI_Comm) :: c; call tsr_grid_comm(grid, axis, c%MPI_VAL, status).
  subroutine tsr_grid_comm(grid, axis, comm, status)
    type(tsr_grid), intent(in) :: grid
    integer, intent(in) :: axis
    integer, intent(out) :: comm, status
    integer(c_int) :: c
    c = 0
    status = int(c_tsr_f_grid_comm(grid%p, int(axis, c_int), c))
    comm = c
  end subroutine

  ! --------------------------------------------------- regions, counters ---
  subroutine tsr_region_begin(ctx, name, status)
    type(tsr_context), intent(in) :: ctx
    character(*), intent(in) :: name
    integer, intent(out) :: status
    status = int(c_tsr_region_begin(ctx%p, to_c(name)))
  end subroutine

  subroutine tsr_region_end(ctx, name, status)
    type(tsr_context), intent(in) :: ctx
    character(*), intent(in) :: name
    integer, intent(out) :: status
    status = int(c_tsr_region_end(ctx%p, to_c(name)))
  end subroutine

  ! This rank's counters for a region path ("total": everything).
  subroutine tsr_counters_get(ctx, path, counters, status)
    type(tsr_context), intent(in) :: ctx
    character(*), intent(in) :: path
    type(tsr_counters), intent(out) :: counters
    integer, intent(out) :: status
    status = int(c_tsr_counters_get(ctx%p, to_c(path), counters))
  end subroutine

  subroutine tsr_counters_reset(ctx, status)
    type(tsr_context), intent(in) :: ctx
    integer, intent(out) :: status
    status = int(c_tsr_counters_reset(ctx%p))
  end subroutine

  ! ------------------------------------------------------------- reports ---
  ! Collective over ctx: every rank gets min/max/sum, root every rank's counters.
  subroutine tsr_report_create(ctx, root, report, status)
    type(tsr_context), intent(in) :: ctx
    integer, intent(in) :: root
    type(tsr_report), intent(out) :: report
    integer, intent(out) :: status
    status = int(c_tsr_report_create(ctx%p, int(root, c_int), report%p))
  end subroutine

  subroutine tsr_report_destroy(report, status)
    type(tsr_report), intent(inout) :: report
    integer, intent(out) :: status
    status = int(c_tsr_report_destroy(report%p))
  end subroutine

  subroutine tsr_report_region_count(report, count, status)
    type(tsr_report), intent(in) :: report
    integer, intent(out) :: count, status
    integer(c_int) :: n
    n = 0
    status = int(c_tsr_report_region_count(report%p, n))
    count = n
  end subroutine

  ! Path of region `region` (1-based; region 1 is "total").
  subroutine tsr_report_region_path(report, region, path, status)
    type(tsr_report), intent(in) :: report
    integer, intent(in) :: region
    character(:), allocatable, intent(out) :: path
    integer, intent(out) :: status
    type(c_ptr) :: p
    p = c_null_ptr
    status = int(c_tsr_report_region_path(report%p, int(region - 1, c_int), p))
    path = from_c(p)
  end subroutine

  ! Counters of context rank `rank` (0-based) in region `region` (1-based).
  subroutine tsr_report_rank_counters(report, region, rank, counters, status)
    type(tsr_report), intent(in) :: report
    integer, intent(in) :: region, rank
    type(tsr_counters), intent(out) :: counters
    integer, intent(out) :: status
    status = int(c_tsr_report_rank_counters(report%p, int(region - 1, c_int), int(rank, c_int), counters))
  end subroutine

  ! Element-wise min, max and sum over ranks of region `region` (1-based).
  subroutine tsr_report_stats(report, region, min, max, sum, status)
    type(tsr_report), intent(in) :: report
    integer, intent(in) :: region
    type(tsr_counters), intent(out) :: min, max, sum
    integer, intent(out) :: status
    status = int(c_tsr_report_stats(report%p, int(region - 1, c_int), min, max, sum))
  end subroutine

  ! The report as a readable table (lines separated by new_line('a')).
  subroutine tsr_report_format(report, text, status)
    type(tsr_report), intent(in) :: report
    character(:), allocatable, intent(out) :: text
    integer, intent(out) :: status
    integer(c_size_t) :: needed
    character(kind=c_char), allocatable, target :: buf(:)
    integer :: i
    needed = 0
    text = ""
    status = int(c_tsr_report_format(report%p, c_null_ptr, 0_c_size_t, needed))
    if (status /= TSR_SUCCESS) return
    allocate(buf(needed + 1))
    status = int(c_tsr_report_format(report%p, c_loc(buf), needed + 1, needed))
    if (status /= TSR_SUCCESS) return
    text = repeat(" ", int(needed))
    do i = 1, int(needed)
      text(i:i) = buf(i)
    end do
  end subroutine

  ! Write the formatted report to a file (replaced if it exists).
  ! TSR_ERR_IO if it cannot be written. Local.
  subroutine tsr_report_write(report, path, status)
    type(tsr_report), intent(in) :: report
    character(*), intent(in) :: path
    integer, intent(out) :: status
    character(:), allocatable :: text
    integer :: unit, ios
    call tsr_report_format(report, text, status)
    if (status /= TSR_SUCCESS) return
    open(newunit=unit, file=path, status="replace", action="write", access="stream", form="unformatted", &
         iostat=ios)
    if (ios /= 0) then
      status = TSR_ERR_IO
      return
    end if
    write(unit, iostat=ios) text
    if (ios /= 0) status = TSR_ERR_IO
    close(unit, iostat=ios)
    if (ios /= 0) status = TSR_ERR_IO
  end subroutine

  ! ------------------------------------------------------------- matrices ---
  ! A global m x n matrix of type TSR_FLOAT64 or TSR_FLOAT32 over grid
  ! (collective over the grid context, idle ranks too). ld: this rank's
  ! leading dimension, default the local row count.
  subroutine tsr_matrix_create(grid, m, n, type, layout, mat, status, ld)
    type(tsr_grid), intent(in) :: grid
    integer(int64), intent(in) :: m, n
    integer(c_int), intent(in) :: type
    type(tsr_layout), intent(in) :: layout
    type(tsr_matrix), intent(out) :: mat
    integer, intent(out) :: status
    integer(int64), intent(in), optional :: ld
    integer(c_int64_t) :: l
    type(tsr_layout) :: lay
    l = 0
    if (present(ld)) l = ld
    lay = layout
    status = int(c_tsr_matrix_create(grid%p, int(m, c_int64_t), int(n, c_int64_t), type, lay, l, mat%p))
  end subroutine

  subroutine tsr_matrix_destroy(mat, status)
    type(tsr_matrix), intent(inout) :: mat
    integer, intent(out) :: status
    status = int(c_tsr_matrix_destroy(mat%p))
  end subroutine

  ! This rank's local block: rows, columns, leading dimension; allocate it
  ! as a(ld, cols).
  subroutine tsr_matrix_local_size(mat, rows, cols, ld, status)
    type(tsr_matrix), intent(in) :: mat
    integer(int64), intent(out) :: rows, cols, ld
    integer, intent(out) :: status
    integer(c_int64_t) :: r, c, l
    r = 0
    c = 0
    l = 1
    status = int(c_tsr_matrix_local_size(mat%p, r, c, l))
    rows = r
    cols = c
    ld = l
  end subroutine

  ! Global indices of local element (local_row, local_col), all 1-based.
  subroutine tsr_matrix_global_index(mat, local_row, local_col, global_row, global_col, status)
    type(tsr_matrix), intent(in) :: mat
    integer(int64), intent(in) :: local_row, local_col
    integer(int64), intent(out) :: global_row, global_col
    integer, intent(out) :: status
    integer(c_int64_t) :: r, c
    r = -1
    c = -1
    status = int(c_tsr_matrix_global_index(mat%p, int(local_row - 1, c_int64_t), int(local_col - 1, c_int64_t), r, c))
    global_row = r + 1
    global_col = c + 1
  end subroutine

  ! The layouts of A, B and C an algorithm takes when grid dimension roles(1)
  ! splits m, roles(2) n and roles(3) k (TSR_DIM_* values).
  subroutine tsr_gemm_layouts(algo, transa, transb, roles, layouts, status)
    integer, intent(in) :: algo, transa, transb, roles(3)
    type(tsr_layout), intent(out) :: layouts(3)
    integer, intent(out) :: status
    integer(c_int) :: r(3)
    r = int(roles, c_int)
    status = int(c_tsr_gemm_layouts(int(algo, c_int), int(transa, c_int), int(transb, c_int), r, layouts))
  end subroutine

  ! ----------------------------------------------------------- optimizers ---
  ! LAMB or LARS over float32 parameters cut into size(group_sizes) groups
  ! (collective over ctx). Groups are numbered from 1 in this module.
  subroutine tsr_optimizer_create(ctx, preset, dist, group_sizes, opt, status)
    type(tsr_context), intent(in) :: ctx
    integer, intent(in) :: preset, dist
    integer(int64), intent(in) :: group_sizes(:)
    type(tsr_optimizer), intent(out) :: opt
    integer, intent(out) :: status
    integer(c_size_t) :: sizes(max(1, size(group_sizes)))
    integer :: g
    sizes = 0
    do g = 1, size(group_sizes)
      ! A negative size becomes SIZE_MAX/2 elements: the C call rejects it.
      if (group_sizes(g) < 0) then
        sizes(g) = TSR_COUNT_INVALID
      else
        sizes(g) = int(group_sizes(g), c_size_t)
      end if
    end do
    status = int(c_tsr_optimizer_create(ctx%p, int(preset, c_int), int(dist, c_int), TSR_FLOAT32, &
                                        size(group_sizes, kind=c_size_t), sizes, opt%p))
  end subroutine

  subroutine tsr_optimizer_destroy(opt, status)
    type(tsr_optimizer), intent(inout) :: opt
    integer, intent(out) :: status
    status = int(c_tsr_optimizer_destroy(opt%p))
  end subroutine

  ! Set a parameter for every group, or (group present, 1-based) for one.
  subroutine tsr_optimizer_set_param(opt, param, value, status, group)
    type(tsr_optimizer), intent(in) :: opt
    integer, intent(in) :: param
    real(real64), intent(in) :: value
    integer, intent(out) :: status
    integer, intent(in), optional :: group
    if (present(group)) then
      status = int(c_tsr_optimizer_set_group_param(opt%p, int(group - 1, c_int), int(param, c_int), &
                                                   real(value, c_double)))
    else
      status = int(c_tsr_optimizer_set_param(opt%p, int(param, c_int), real(value, c_double)))
    end if
  end subroutine

  subroutine tsr_optimizer_get_param(opt, param, value, status, group)
    type(tsr_optimizer), intent(in) :: opt
    integer, intent(in) :: param
    real(real64), intent(out) :: value
    integer, intent(out) :: status
    integer, intent(in), optional :: group
    integer(c_int) :: g
    real(c_double) :: v
    g = 0
    if (present(group)) g = int(group - 1, c_int)
    v = 0
    status = int(c_tsr_optimizer_get_param(opt%p, g, int(param, c_int), v))
    value = v
  end subroutine

  ! One step (collective over the context). params: updated in place.
  ! grads: data parallel overwrites them with their sum over the ranks.
  subroutine tsr_optimizer_step(opt, params, grads, status)
    type(tsr_optimizer), intent(in) :: opt
    real(real32), intent(inout), target, contiguous :: params(:), grads(:)
    integer, intent(out) :: status
    integer(c_size_t) :: n
    n = size(params, kind=c_size_t)
    if (size(grads, kind=c_size_t) /= n) n = TSR_COUNT_INVALID
    status = int(c_tsr_optimizer_step(opt%p, c_loc(params), c_loc(grads), n))
  end subroutine

  ! A TSR_OPTQ_* number; group (1-based) for the per-group queries.
  subroutine tsr_optimizer_query(opt, what, value, status, group)
    type(tsr_optimizer), intent(in) :: opt
    integer, intent(in) :: what
    real(real64), intent(out) :: value
    integer, intent(out) :: status
    integer, intent(in), optional :: group
    integer(c_int) :: g
    real(c_double) :: v
    g = 0
    if (present(group)) g = int(group - 1, c_int)
    v = 0
    status = int(c_tsr_optimizer_query(opt%p, int(what, c_int), g, v))
    value = v
  end subroutine

  subroutine tsr_optimizer_save(opt, path, status)
    type(tsr_optimizer), intent(in) :: opt
    character(*), intent(in) :: path
    integer, intent(out) :: status
    status = int(c_tsr_optimizer_save(opt%p, to_c(path)))
  end subroutine

  subroutine tsr_optimizer_load(opt, path, status)
    type(tsr_optimizer), intent(in) :: opt
    character(*), intent(in) :: path
    integer, intent(out) :: status
    status = int(c_tsr_optimizer_load(opt%p, to_c(path)))
  end subroutine

  ! ------------------------------------------ typed collectives, matrices ---
#define TSRF_TYPE real(real64)
#define TSRF_DT TSR_FLOAT64
#define TSRF_DIMS (:)
#define TSRF_BCAST bcast_r8_1
#define TSRF_ALLREDUCE allreduce_r8_1
#define TSRF_ALLREDUCE_IP allreduce_ip_r8_1
#define TSRF_ALLGATHER allgather_r8_1
#define TSRF_REDUCE_SCATTER reduce_scatter_r8_1
#define TSRF_ALLTOALL alltoall_r8_1
#define TSRF_SHIFT shift_r8_1
#define TSRF_SCATTER scatter_r8_1
#define TSRF_GATHER gather_r8_1
#define TSRF_REDIST redist_r8_1
#define TSRF_GEMM gemm_r8_1
#include "tessera_coll.inc"
#include "tessera_mat.inc"
#include "tessera_undef.inc"
#define TSRF_TYPE real(real64)
#define TSRF_DT TSR_FLOAT64
#define TSRF_DIMS (:,:)
#define TSRF_BCAST bcast_r8_2
#define TSRF_ALLREDUCE allreduce_r8_2
#define TSRF_ALLREDUCE_IP allreduce_ip_r8_2
#define TSRF_ALLGATHER allgather_r8_2
#define TSRF_REDUCE_SCATTER reduce_scatter_r8_2
#define TSRF_ALLTOALL alltoall_r8_2
#define TSRF_SHIFT shift_r8_2
#define TSRF_SCATTER scatter_r8_2
#define TSRF_GATHER gather_r8_2
#define TSRF_REDIST redist_r8_2
#define TSRF_GEMM gemm_r8_2
#include "tessera_coll.inc"
#include "tessera_mat.inc"
#include "tessera_undef.inc"
#define TSRF_TYPE real(real32)
#define TSRF_DT TSR_FLOAT32
#define TSRF_DIMS (:)
#define TSRF_BCAST bcast_r4_1
#define TSRF_ALLREDUCE allreduce_r4_1
#define TSRF_ALLREDUCE_IP allreduce_ip_r4_1
#define TSRF_ALLGATHER allgather_r4_1
#define TSRF_REDUCE_SCATTER reduce_scatter_r4_1
#define TSRF_ALLTOALL alltoall_r4_1
#define TSRF_SHIFT shift_r4_1
#define TSRF_SCATTER scatter_r4_1
#define TSRF_GATHER gather_r4_1
#define TSRF_REDIST redist_r4_1
#define TSRF_GEMM gemm_r4_1
#include "tessera_coll.inc"
#include "tessera_mat.inc"
#include "tessera_undef.inc"
#define TSRF_TYPE real(real32)
#define TSRF_DT TSR_FLOAT32
#define TSRF_DIMS (:,:)
#define TSRF_BCAST bcast_r4_2
#define TSRF_ALLREDUCE allreduce_r4_2
#define TSRF_ALLREDUCE_IP allreduce_ip_r4_2
#define TSRF_ALLGATHER allgather_r4_2
#define TSRF_REDUCE_SCATTER reduce_scatter_r4_2
#define TSRF_ALLTOALL alltoall_r4_2
#define TSRF_SHIFT shift_r4_2
#define TSRF_SCATTER scatter_r4_2
#define TSRF_GATHER gather_r4_2
#define TSRF_REDIST redist_r4_2
#define TSRF_GEMM gemm_r4_2
#include "tessera_coll.inc"
#include "tessera_mat.inc"
#include "tessera_undef.inc"
#define TSRF_TYPE integer(int32)
#define TSRF_DT TSR_INT32
#define TSRF_DIMS (:)
#define TSRF_BCAST bcast_i4_1
#define TSRF_ALLREDUCE allreduce_i4_1
#define TSRF_ALLREDUCE_IP allreduce_ip_i4_1
#define TSRF_ALLGATHER allgather_i4_1
#define TSRF_REDUCE_SCATTER reduce_scatter_i4_1
#define TSRF_ALLTOALL alltoall_i4_1
#define TSRF_SHIFT shift_i4_1
#include "tessera_coll.inc"
#include "tessera_undef.inc"
#define TSRF_TYPE integer(int32)
#define TSRF_DT TSR_INT32
#define TSRF_DIMS (:,:)
#define TSRF_BCAST bcast_i4_2
#define TSRF_ALLREDUCE allreduce_i4_2
#define TSRF_ALLREDUCE_IP allreduce_ip_i4_2
#define TSRF_ALLGATHER allgather_i4_2
#define TSRF_REDUCE_SCATTER reduce_scatter_i4_2
#define TSRF_ALLTOALL alltoall_i4_2
#define TSRF_SHIFT shift_i4_2
#include "tessera_coll.inc"
#include "tessera_undef.inc"
#define TSRF_TYPE integer(int64)
#define TSRF_DT TSR_INT64
#define TSRF_DIMS (:)
#define TSRF_BCAST bcast_i8_1
#define TSRF_ALLREDUCE allreduce_i8_1
#define TSRF_ALLREDUCE_IP allreduce_ip_i8_1
#define TSRF_ALLGATHER allgather_i8_1
#define TSRF_REDUCE_SCATTER reduce_scatter_i8_1
#define TSRF_ALLTOALL alltoall_i8_1
#define TSRF_SHIFT shift_i8_1
#include "tessera_coll.inc"
#include "tessera_undef.inc"
#define TSRF_TYPE integer(int64)
#define TSRF_DT TSR_INT64
#define TSRF_DIMS (:,:)
#define TSRF_BCAST bcast_i8_2
#define TSRF_ALLREDUCE allreduce_i8_2
#define TSRF_ALLREDUCE_IP allreduce_ip_i8_2
#define TSRF_ALLGATHER allgather_i8_2
#define TSRF_REDUCE_SCATTER reduce_scatter_i8_2
#define TSRF_ALLTOALL alltoall_i8_2
#define TSRF_SHIFT shift_i8_2
#include "tessera_coll.inc"
#include "tessera_undef.inc"

end module tessera
