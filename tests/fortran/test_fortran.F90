! The Fortran module `tessera` end to end on 1, 2 and 4 ranks (CTest
! fortran_api_np<N> with `use mpi`, fortran_f08_np<N> with `use mpi_f08`,
! the same source with TSR_F08 defined): contexts from a Fortran
! communicator, statuses and messages of bad arguments, grids, every
! accounted collective against the values it must give, the ledger against
! docs/ACCOUNTING.md formulas, reports to a string and a file, the GEMM
! against matmul, LAMB and LARS steps against hand-computed values. A failed
! check prints FAIL and aborts every rank.
program test_fortran
#ifdef TSR_F08
  use mpi_f08
#else
  use mpi
#endif
  use tessera
  use, intrinsic :: iso_fortran_env, only: real32, real64, int32, int64
  use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_positive_inf
  use, intrinsic :: iso_c_binding, only: c_associated
  implicit none
  integer :: provided, ierr, wrank, wsize, st, p, me, i, j
  type(tsr_context) :: ctx, bad
  type(tsr_grid) :: g2
  integer :: dims(3), coords(3), arank, asize, grank, rowcomm, n
  character(:), allocatable :: msg, text
  real(real64) :: x(12), y(12), expect
  integer(int32) :: ival(1), iall(64), ishift(1)
  real(real64), allocatable :: sbuf(:), rbuf(:)
#ifdef TSR_F08
  type(MPI_Comm) :: rc
#endif

  call MPI_Init_thread(MPI_THREAD_FUNNELED, provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, wrank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, wsize, ierr)

  ! ---- contexts, statuses, messages
  call tsr_context_create(MPI_COMM_NULL, bad, st)
  call check(st == TSR_ERR_INVALID_ARG, "context over MPI_COMM_NULL: INVALID_ARG")
  msg = tsr_last_error()
  call check(index(msg, "'comm'") > 0, "the message names 'comm': " // msg)
  call check(tsr_status_name(st) == "TSR_ERR_INVALID_ARG", "tsr_status_name")
  call tsr_context_create(MPI_COMM_WORLD, ctx, st)
  call ok(st, "tsr_context_create")
  call tsr_context_rank(ctx, me, st)
  call ok(st, "tsr_context_rank")
  call tsr_context_size(ctx, p, st)
  call ok(st, "tsr_context_size")
  call check(me == wrank .and. p == wsize, "context rank and size are the communicator's")
  ! simulated nodes of 2 ranks
  block
    type(tsr_context) :: c2
    integer :: node, nnodes
    call tsr_context_create(MPI_COMM_WORLD, c2, st, ranks_per_node=2)
    call ok(st, "tsr_context_create (ranks_per_node=2)")
    call tsr_context_node(c2, node, nnodes, st)
    call ok(st, "tsr_context_node")
    call check(node == me / 2 .and. nnodes == (p + 1) / 2, "ranks_per_node=2: node rank/2 of (p+1)/2")
    call tsr_context_destroy(c2, st)
    call ok(st, "tsr_context_destroy (c2)")
    call check(.not. c_associated(c2%p), "destroy nullifies the handle")
  end block
  call tsr_region_begin(ctx, "a/b", st)
  call check(st == TSR_ERR_INVALID_ARG, "region name with '/': INVALID_ARG")
  msg = tsr_last_error(ctx)
  call check(index(msg, "name") > 0, "the message names 'name': " // msg)

  ! ---- grids
  dims = 0
  call tsr_grid_dims_create(TSR_GRID_2D, p, dims, st)
  call ok(st, "tsr_grid_dims_create")
  call check(dims(1) * dims(2) == p .and. dims(1) <= dims(2) .and. dims(3) == 1, "2D dims")
  call tsr_grid_create(ctx, TSR_GRID_2D, dims, g2, st)
  call ok(st, "tsr_grid_create")
  call tsr_grid_my_rank(g2, grank, st)
  call ok(st, "tsr_grid_my_rank")
  call tsr_grid_my_coords(g2, coords, st)
  call ok(st, "tsr_grid_my_coords")
  call check(grank == coords(1) * dims(2) + coords(2), "grid rank = i*dims(2) + j")
  call tsr_grid_axis_info(g2, TSR_AXIS_ROW, arank, asize, st)
  call ok(st, "tsr_grid_axis_info")
  call check(arank == coords(2) .and. asize == dims(2), "row axis: position j of dims(2)")
  call tsr_grid_comm(g2, TSR_AXIS_ROW, rowcomm, st)
  call ok(st, "tsr_grid_comm")
#ifdef TSR_F08
  rc%MPI_VAL = rowcomm
  call MPI_Comm_size(rc, n, ierr)
#else
  call MPI_Comm_size(rowcomm, n, ierr)
#endif
  call check(n == dims(2), "the row communicator from tsr_grid_comm has dims(2) ranks")

  ! ---- accounted collectives, each against the value it must give
  x = [(real(grank + 1, real64) * i, i = 1, 12)]
  call tsr_allreduce(g2, TSR_AXIS_ALL, x, y, TSR_SUM, st)
  call ok(st, "tsr_allreduce")
  expect = p * (p + 1) / 2.0_real64
  call check(all(y == [(expect * i, i = 1, 12)]), "allreduce sum over all ranks")
  ival(1) = grank
  call tsr_allreduce_inplace(g2, TSR_AXIS_ROW, ival, TSR_MAX, st)
  call ok(st, "tsr_allreduce_inplace")
  call check(ival(1) == coords(1) * dims(2) + dims(2) - 1, "in-place max along the row")
  ival(1) = grank
  call tsr_allgather(g2, TSR_AXIS_ALL, ival, iall(1:p), st)
  call ok(st, "tsr_allgather")
  call check(all(iall(1:p) == [(i, i = 0, p - 1)]), "allgather of grid ranks along ALL")
  ! 2D rank-2 arrays: bcast of a 3x2 block from column position 0.
  block
    real(real64) :: b(3, 2)
    b = -1
    if (coords(1) == 0) b = reshape([(real(i + 10 * coords(2), real64), i = 1, 6)], [3, 2])
    call tsr_bcast(g2, TSR_AXIS_COL, b, 0, st)
    call ok(st, "tsr_bcast")
    call check(all(b == reshape([(real(i + 10 * coords(2), real64), i = 1, 6)], [3, 2])), "bcast along COL")
  end block
  allocate(sbuf(2 * p), rbuf(2))
  sbuf = [(real(i, real64), i = 1, 2 * p)]
  call tsr_reduce_scatter(g2, TSR_AXIS_ALL, sbuf, rbuf, TSR_SUM, st)
  call ok(st, "tsr_reduce_scatter")
  call check(all(rbuf == p * [real(2 * grank + 1, real64), real(2 * grank + 2, real64)]), "reduce_scatter block")
  deallocate(rbuf)
  allocate(rbuf(2 * p))
  sbuf = [(real(100 * grank + i, real64), i = 1, 2 * p)]
  call tsr_alltoall(g2, TSR_AXIS_ALL, sbuf, rbuf, st)
  call ok(st, "tsr_alltoall")
  do i = 0, p - 1
    call check(rbuf(2 * i + 1) == 100 * i + 2 * grank + 1 .and. rbuf(2 * i + 2) == 100 * i + 2 * grank + 2, &
               "alltoall block from each member")
  end do
  ival(1) = grank
  call tsr_shift(g2, TSR_AXIS_ALL, ival, ishift, 1, st)
  call ok(st, "tsr_shift")
  call check(ishift(1) == modulo(grank - 1, p), "shift by one: the value of the member behind")

  ! ---- bad arguments in collectives: every rank fails, none hangs
  call tsr_allreduce(g2, TSR_AXIS_ALL, x, y, merge(42, TSR_SUM, me == p - 1), st)
  call check(st == TSR_ERR_INVALID_ARG, "op 42 on the last rank: INVALID_ARG on every rank")
  msg = tsr_last_error(ctx)
  if (me == p - 1) then
    call check(index(msg, "'op'") > 0, "the message names 'op': " // msg)
  else
    call check(index(msg, "rank") > 0, "the others' message names the failing rank: " // msg)
  end if
  call tsr_allgather(g2, TSR_AXIS_ALL, ival, iall(1:merge(p - 1, p, me == 0)), st)
  call check(st == TSR_ERR_SHAPE, "receive array too small on rank 0: SHAPE on every rank")

  call test_accounting()
  call test_gemm()
  call test_optimizers()

  call tsr_grid_destroy(g2, st)
  call ok(st, "tsr_grid_destroy")
  call tsr_context_destroy(ctx, st)
  call ok(st, "tsr_context_destroy")
  if (wrank == 0) print "(a)", "OK"
  call MPI_Finalize(ierr)

contains

  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    integer :: e
    if (.not. cond) then
      print "(a,i0,a,a)", "FAIL on rank ", wrank, ": ", what
      call MPI_Abort(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine

  subroutine ok(status, what)
    integer, intent(in) :: status
    character(*), intent(in) :: what
    call check(status == TSR_SUCCESS, what // " returned " // tsr_status_name(status) // ": " // tsr_last_error(ctx))
  end subroutine

  ! One all-reduce of 12 float64 and one all-gather of 3 int32 over all p
  ! ranks in region "acct": payload and ring wire model of docs/ACCOUNTING.md.
  subroutine test_accounting()
    type(tsr_counters) :: c, mn, mx, sm
    type(tsr_report) :: rep
    integer(int32) :: three(3), all3(3 * 64)
    integer(int64) :: wire, msgs, e_ar, e_ag
    integer :: nreg, r, region, unit, ios
    character(:), allocatable :: path
    character(200) :: line
    character(64) :: fname
    logical :: found
    call tsr_region_begin(ctx, "acct", st)
    call ok(st, "tsr_region_begin")
    call tsr_allreduce(g2, TSR_AXIS_ALL, x, y, TSR_SUM, st)
    call ok(st, "tsr_allreduce (acct)")
    three = grank
    call tsr_allgather(g2, TSR_AXIS_ALL, three, all3(1:3 * p), st)
    call ok(st, "tsr_allgather (acct)")
    call tsr_region_end(ctx, "acct", st)
    call ok(st, "tsr_region_end")
    call tsr_counters_get(ctx, "acct", c, st)
    call ok(st, "tsr_counters_get")
    e_ar = 12 * 8
    e_ag = 3 * 4
    call check(c%coll_calls(TSR_COLL_ALLREDUCE + 1) == 1 .and. c%coll_calls(TSR_COLL_ALLGATHER + 1) == 1, &
               "one all-reduce and one all-gather counted")
    call check(c%coll_payload_sent == e_ar + e_ag, "payload sent: n + n")
    call check(c%coll_payload_recv == e_ar + p * e_ag, "payload received: n + p*n")
    wire = sum(c%coll_wire_sent(:)%bytes)
    msgs = sum(c%coll_wire_sent(:)%messages)
    ! ring all-reduce of 12 = p*(12/p) elements: 2*(p-1) messages, 2*(p-1)/p*n bytes;
    ! ring all-gather: p-1 messages of n.
    call check(wire == 2 * (p - 1) * e_ar / p + (p - 1) * e_ag, "wire bytes sent (ring model)")
    call check(msgs == 2 * (p - 1) + (p - 1), "wire messages sent (ring model)")

    call tsr_report_create(ctx, 0, rep, st)
    call ok(st, "tsr_report_create")
    call tsr_report_region_count(rep, nreg, st)
    call ok(st, "tsr_report_region_count")
    call tsr_report_region_path(rep, 1, path, st)
    call check(st == TSR_SUCCESS .and. path == "total", "region 1 is total")
    region = 0
    do r = 1, nreg
      call tsr_report_region_path(rep, r, path, st)
      if (path == "acct") region = r
    end do
    call check(region > 0, "the report has region acct")
    call tsr_report_stats(rep, region, mn, mx, sm, st)
    call ok(st, "tsr_report_stats")
    call check(sm%coll_payload_sent == p * (e_ar + e_ag) .and. mx%coll_payload_recv == e_ar + p * e_ag, &
               "report: sum and max over ranks")
    if (me == 0) then
      call tsr_report_rank_counters(rep, region, p - 1, c, st)
      call ok(st, "tsr_report_rank_counters")
      call check(c%coll_payload_sent == e_ar + e_ag, "report: the last rank's counters on the root")
      call tsr_report_format(rep, text, st)
      call ok(st, "tsr_report_format")
      call check(index(text, "acct") > 0 .and. len(text) > 100, "formatted report shows region acct")
#ifdef TSR_F08
      write(fname, "(a,i0,a)") "report_f08_np", p, ".txt"
#else
      write(fname, "(a,i0,a)") "report_mpi_np", p, ".txt"
#endif
      call tsr_report_write(rep, trim(fname), st)
      call ok(st, "tsr_report_write")
      found = .false.
      open(newunit=unit, file=trim(fname), action="read", iostat=ios)
      call check(ios == 0, "the report file exists")
      do
        read(unit, "(a)", iostat=ios) line
        if (ios /= 0) exit
        if (index(line, "acct") > 0) found = .true.
      end do
      close(unit, status="delete")
      call check(found, "the report file shows region acct")
      call tsr_report_write(rep, "no-such-dir/report.txt", st)
      call check(st == TSR_ERR_IO, "report to an unwritable path: TSR_ERR_IO")
    end if
    call tsr_report_destroy(rep, st)
    call ok(st, "tsr_report_destroy")
  end subroutine

  ! C = 1.5 A B (2D SUMMA layouts), then C = 0.5 C + A2^T B, gathered on
  ! rank 0 and compared with matmul; m, n, k that do not divide the grid.
  subroutine test_gemm()
    integer(int64), parameter :: m = 7, n = 5, k = 6
    type(tsr_layout) :: lay(3), layt(3)
    type(tsr_matrix) :: ad, bd, cd, a2d
    real(real64) :: ga(m, k), gb(k, n), ga2(k, m), gc(m, n), ref(m, n)
    real(real64), allocatable :: a(:, :), b(:, :), c(:, :), a2(:, :), cshort(:, :)
    integer(int64) :: rows, cols, ld, gr, gcol
    do j = 1, int(k)
      do i = 1, int(m)
        ga(i, j) = 1.0_real64 / (i + 2 * j) - 0.1_real64 * j
        ga2(j, i) = sin(real(i * j, real64))
      end do
    end do
    do j = 1, int(n)
      do i = 1, int(k)
        gb(i, j) = cos(real(i + 3 * j, real64))
      end do
    end do
    call tsr_gemm_layouts(TSR_GEMM_2D, TSR_NOTRANS, TSR_NOTRANS, [TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE], lay, st)
    call ok(st, "tsr_gemm_layouts")
    call tsr_gemm_layouts(TSR_GEMM_2D, TSR_TRANS, TSR_NOTRANS, [TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE], layt, st)
    call ok(st, "tsr_gemm_layouts (T)")
    call tsr_matrix_create(g2, m, k, TSR_FLOAT64, lay(1), ad, st)
    call ok(st, "tsr_matrix_create A")
    call tsr_matrix_create(g2, k, n, TSR_FLOAT64, lay(2), bd, st)
    call ok(st, "tsr_matrix_create B")
    call tsr_matrix_create(g2, m, n, TSR_FLOAT64, lay(3), cd, st)
    call ok(st, "tsr_matrix_create C")
    call tsr_matrix_create(g2, k, m, TSR_FLOAT64, layt(1), a2d, st)
    call ok(st, "tsr_matrix_create A2")
    call alloc_local(ad, a)
    call alloc_local(bd, b)
    call alloc_local(cd, c)
    call alloc_local(a2d, a2)
    call tsr_matrix_scatter(ad, 0, ga, a, st)
    call ok(st, "tsr_matrix_scatter A")
    call tsr_matrix_scatter(bd, 0, gb, b, st)
    call ok(st, "tsr_matrix_scatter B")
    call tsr_matrix_scatter(a2d, 0, ga2, a2, st)
    call ok(st, "tsr_matrix_scatter A2")
    ! local element (1, 1) of A holds its global element
    call tsr_matrix_local_size(ad, rows, cols, ld, st)
    if (rows > 0 .and. cols > 0) then
      call tsr_matrix_global_index(ad, 1_int64, 1_int64, gr, gcol, st)
      call ok(st, "tsr_matrix_global_index")
      call check(a(1, 1) == ga(gr, gcol), "scatter: local (1,1) is global (global_index)")
    end if
    c = huge(1.0_real64)  ! beta = 0: never read
    call tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.5_real64, ad, a, bd, b, 0.0_real64, cd, c, st)
    call ok(st, "tsr_gemm NN")
    call tsr_gemm(TSR_TRANS, TSR_NOTRANS, 1.0_real64, a2d, a2, bd, b, 0.5_real64, cd, c, st, algo=TSR_GEMM_2D)
    call ok(st, "tsr_gemm TN")
    gc = 0
    call tsr_matrix_gather(cd, 0, c, gc, st)
    call ok(st, "tsr_matrix_gather")
    if (me == 0) then
      ref = 0.5_real64 * (1.5_real64 * matmul(ga, gb)) + matmul(transpose(ga2), gb)
      call check(maxval(abs(gc - ref)) <= 1e-13_real64 * maxval(abs(ref)), "GEMM equals matmul")
    end if
    ! a local C smaller than its block on rank 0 (every rank holds a
    ! non-empty block of this 7 x 5 C on 1, 2 and 4 ranks): SHAPE there,
    ! INVALID_ARG elsewhere
    call check(size(c) > 0, "every local block of C is non-empty")
    if (me == 0) then
      allocate(cshort(0, 0))
    else
      allocate(cshort, source=c)
    end if
    call tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0_real64, ad, a, bd, b, 0.0_real64, cd, cshort, st)
    call check(st == merge(TSR_ERR_SHAPE, TSR_ERR_INVALID_ARG, me == 0), "short local C fails every rank")
    call tsr_matrix_destroy(a2d, st)
    call tsr_matrix_destroy(cd, st)
    call tsr_matrix_destroy(bd, st)
    call tsr_matrix_destroy(ad, st)
    call ok(st, "tsr_matrix_destroy")
  end subroutine

  subroutine alloc_local(mat, a)
    type(tsr_matrix), intent(in) :: mat
    real(real64), allocatable, intent(out) :: a(:, :)
    integer(int64) :: rows, cols, ld
    call tsr_matrix_local_size(mat, rows, cols, ld, st)
    call ok(st, "tsr_matrix_local_size")
    allocate(a(ld, cols))
  end subroutine

  ! LAMB (data parallel: every rank passes g, the step averages the sum) and
  ! LARS (replicated, two groups, group 2 without adaptation), one step each,
  ! against the rules of docs/OPTIMIZERS.md section 2 in double precision.
  subroutine test_optimizers()
    type(tsr_optimizer) :: lamb, lars
    real(real32) :: w(4), gr(4), w0(4), g0(4)
    real(real64) :: u(4), ref(4), r, lr, wd, inf, v, d(4)
    integer :: q
    inf = ieee_value(1.0_real64, ieee_positive_inf)
    w0 = [0.5, -1.0, 1.5, 2.0]
    g0 = [0.1, -0.2, 0.3, 0.05]
    lr = 0.01_real64
    wd = 0.01_real64
    call tsr_optimizer_create(ctx, TSR_PRESET_LAMB_PAPER, TSR_OPT_DATA_PARALLEL, [4_int64], lamb, st)
    call ok(st, "tsr_optimizer_create LAMB")
    call set(lamb, TSR_OPT_LR, lr)
    call set(lamb, TSR_OPT_WEIGHT_DECAY, wd)
    call set(lamb, TSR_OPT_DECAY, 1.0_real64)
    call set(lamb, TSR_OPT_ADAPT, 1.0_real64)
    call set(lamb, TSR_OPT_BETA1, 0.9_real64)
    call set(lamb, TSR_OPT_BETA2, 0.999_real64)
    call set(lamb, TSR_OPT_EPS, 1e-6_real64)
    call set(lamb, TSR_OPT_EPS_ROOT, 0.0_real64)
    call set(lamb, TSR_OPT_EPS_MODE, 0.0_real64)
    call set(lamb, TSR_OPT_DECAY_MODE, 0.0_real64)
    call set(lamb, TSR_OPT_GRAD_AVERAGING, 1.0_real64)
    call set(lamb, TSR_OPT_BIAS_CORRECTION, 1.0_real64)
    call set(lamb, TSR_OPT_TRUST_COEFF, 1.0_real64)
    call set(lamb, TSR_OPT_TRUST_MIN, 0.0_real64)
    call set(lamb, TSR_OPT_TRUST_MAX, inf)
    call set(lamb, TSR_OPT_NORM_MIN, 0.0_real64)
    call set(lamb, TSR_OPT_NORM_MAX, inf)
    call set(lamb, TSR_OPT_MAX_GRAD_NORM, 0.0_real64)
    call set(lamb, TSR_OPT_LOSS_SCALE, 1.0_real64)
    call tsr_optimizer_set_param(lamb, TSR_OPT_BETA1, 1.5_real64, st)
    call check(st == TSR_ERR_INVALID_ARG, "BETA1 = 1.5 is out of bounds: INVALID_ARG")
    call check(index(tsr_last_error(ctx), "BETA1") > 0, "the message names BETA1: " // tsr_last_error(ctx))
    w = w0
    gr = g0
    call tsr_optimizer_step(lamb, w, gr(1:3), st)
    call check(st == TSR_ERR_SHAPE, "step with 3 gradients for 4 parameters: SHAPE")
    call tsr_optimizer_step(lamb, w, gr, st)
    call ok(st, "tsr_optimizer_step LAMB")
    ! t = 1 with bias correction: m^ = g, v^ = g^2
    u = g0 / (abs(real(g0, real64)) + 1e-6_real64) + wd * w0
    r = norm2(real(w0, real64)) / norm2(u)
    ref = w0 - lr * r * u
    call check(maxval(abs(w - ref)) <= 1e-6_real64, "LAMB step equals the hand-computed update")
    call check(all(gr == p * g0), "data parallel: the gradients hold their sum over ranks")
    call tsr_optimizer_query(lamb, TSR_OPTQ_TRUST_RATIO, v, st, group=1)
    call ok(st, "tsr_optimizer_query")
    call check(abs(v - r) <= 1e-5_real64 * r, "LAMB trust ratio of group 1")
    call tsr_optimizer_query(lamb, TSR_OPTQ_STEP, v, st)
    call check(v == 1, "one step taken")
    call tsr_optimizer_destroy(lamb, st)
    call ok(st, "tsr_optimizer_destroy LAMB")

    ! LARS: groups of 3 and 1 elements
    call tsr_optimizer_create(ctx, TSR_PRESET_LARS_PAPER, TSR_OPT_REPLICATED, [3_int64, 1_int64], lars, st)
    call ok(st, "tsr_optimizer_create LARS")
    lr = 0.1_real64
    wd = 5e-4_real64
    call set(lars, TSR_OPT_LR, lr)
    call set(lars, TSR_OPT_WEIGHT_DECAY, wd)
    call set(lars, TSR_OPT_DECAY, 1.0_real64)
    call set(lars, TSR_OPT_ADAPT, 1.0_real64)
    call set(lars, TSR_OPT_TRUST_COEFF, 0.001_real64)
    call set(lars, TSR_OPT_EPS, 0.0_real64)
    call set(lars, TSR_OPT_TRUST_MIN, 0.0_real64)
    call set(lars, TSR_OPT_TRUST_MAX, inf)
    call set(lars, TSR_OPT_MOMENTUM, 0.9_real64)
    call set(lars, TSR_OPT_NESTEROV, 0.0_real64)
    call set(lars, TSR_OPT_LARS_DENOM, 0.0_real64)
    call set(lars, TSR_OPT_MOMENTUM_MODE, 0.0_real64)
    call set(lars, TSR_OPT_MAX_GRAD_NORM, 0.0_real64)
    call set(lars, TSR_OPT_LOSS_SCALE, 1.0_real64)
    call tsr_optimizer_set_param(lars, TSR_OPT_ADAPT, 0.0_real64, st, group=2)
    call ok(st, "tsr_optimizer_set_param group 2")
    call tsr_optimizer_get_param(lars, TSR_OPT_ADAPT, v, st, group=2)
    call check(st == TSR_SUCCESS .and. v == 0, "group 2 ADAPT reads back 0")
    call tsr_optimizer_get_param(lars, TSR_OPT_ADAPT, v, st, group=1)
    call check(st == TSR_SUCCESS .and. v == 1, "group 1 ADAPT still 1")
    w = w0
    gr = g0
    call tsr_optimizer_step(lars, w, gr, st)
    call ok(st, "tsr_optimizer_step LARS")
    ! t = 1, v = 0: w <- w - lr*r*d with d = g + wd*w; group 2: r = 1
    d = g0 + wd * w0
    r = 0.001_real64 * norm2(real(w0(1:3), real64)) / (norm2(real(g0(1:3), real64)) + wd * norm2(real(w0(1:3), real64)))
    ref(1:3) = w0(1:3) - lr * r * d(1:3)
    ref(4) = w0(4) - lr * d(4)
    call check(maxval(abs(w - ref)) <= 1e-6_real64, "LARS step equals the hand-computed update")
    call tsr_optimizer_destroy(lars, st)
    call ok(st, "tsr_optimizer_destroy LARS")
    q = 0
  end subroutine

  subroutine set(opt, param, value)
    type(tsr_optimizer), intent(in) :: opt
    integer, intent(in) :: param
    real(real64), intent(in) :: value
    call tsr_optimizer_set_param(opt, param, value, st)
    call ok(st, "tsr_optimizer_set_param")
  end subroutine
end program
