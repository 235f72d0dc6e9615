! The same from Fortran 2008 (module tessera): status arguments, no stops.
program existing_mpi_code
  use mpi_f08
  use tessera
  implicit none
  integer :: provided, rank, nranks, st, dims(3)
  type(tsr_context) :: ctx
  type(tsr_grid) :: grid
  type(tsr_report) :: report
  double precision :: x(4) = [1, 2, 3, 4], y(4)
  character(:), allocatable :: text

  call MPI_Init_thread(MPI_THREAD_FUNNELED, provided)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)

  call tsr_context_create(MPI_COMM_WORLD, ctx, st)  ! also an integer handle
  call check(st)
  dims = 0  ! 0: let tessera choose (most square pr x pc)
  call tsr_grid_dims_create(TSR_GRID_2D, nranks, dims, st)
  call check(st)
  call tsr_grid_create(ctx, TSR_GRID_2D, dims, grid, st)
  call check(st)

  call tsr_region_begin(ctx, "step", st)
  ! Sum over the dims(2) ranks of this rank's grid row.
  call tsr_allreduce(grid, TSR_AXIS_ROW, x, y, TSR_SUM, st)
  call check(st)
  call tsr_region_end(ctx, "step", st)

  call tsr_report_create(ctx, 0, report, st)  ! collective
  call check(st)
  if (rank == 0) then
    call tsr_report_format(report, text, st)
    write (*, "(a)") text
  end if
  call tsr_report_destroy(report, st)
  call tsr_grid_destroy(grid, st)
  call tsr_context_destroy(ctx, st)
  call check(st)
  call MPI_Finalize()
  if (y(4) /= 4.0d0 * dims(2)) error stop 1

contains
  subroutine check(status)
    integer, intent(in) :: status
    if (status /= TSR_SUCCESS) then
      write (*, "(a)") tsr_status_name(status) // ": " // tsr_last_error(ctx)
      call MPI_Abort(MPI_COMM_WORLD, 1)
    end if
  end subroutine
end program
