! An ordinary Fortran MPI program for the PMPI tool's tests, built twice:
! with `use mpi` (the mpif.h-style bindings, mpi_send_) and with -DTSR_F08
! `use mpi_f08` (mpi_send_f08_ or mpi_send_f08ts_). Like pmpi_app.c it keeps
! its own account of what each call hands to MPI and writes it to
! <dir>/expect.<rank>.json; the check asserts that the tool counted every
! Fortran call exactly once (a binding that reached the C wrappers as well
! would show every figure twice).
module expect_m
  implicit none
  integer, parameter :: nfn = 32
  integer(8) :: sent_m(0:2) = 0, sent_b(0:2) = 0, recv_m(0:2) = 0, recv_b(0:2) = 0
  integer(8) :: coll_calls = 0, pay_sent = 0, pay_recv = 0, disk_r = 0, disk_w = 0
  character(len=32) :: fname(nfn)
  integer(8) :: fcalls(nfn) = 0, fbytes(nfn) = 0
  integer :: nf = 0, me = 0, np = 1, rpn = 1
contains
  integer function cls(peer)
    integer, intent(in) :: peer
    if (peer == me) then
      cls = 0
    else if (peer / rpn == me / rpn) then
      cls = 1
    else
      cls = 2
    end if
  end function
  subroutine fn(name, calls, bytes)
    character(len=*), intent(in) :: name
    integer, intent(in) :: calls
    integer(8), intent(in) :: bytes
    integer :: i
    do i = 1, nf
      if (trim(fname(i)) == name) exit
    end do
    if (i > nf) then
      nf = nf + 1
      fname(nf) = name
      i = nf
    end if
    fcalls(i) = fcalls(i) + calls
    fbytes(i) = fbytes(i) + bytes
  end subroutine
  subroutine sent(name, peer, bytes, calls)
    character(len=*), intent(in) :: name
    integer, intent(in) :: peer, calls
    integer(8), intent(in) :: bytes
    call fn(name, calls, bytes)
    sent_m(cls(peer)) = sent_m(cls(peer)) + 1
    sent_b(cls(peer)) = sent_b(cls(peer)) + bytes
  end subroutine
  subroutine got(name, peer, bytes, calls)
    character(len=*), intent(in) :: name
    integer, intent(in) :: peer, calls
    integer(8), intent(in) :: bytes
    call fn(name, calls, bytes)
    recv_m(cls(peer)) = recv_m(cls(peer)) + 1
    recv_b(cls(peer)) = recv_b(cls(peer)) + bytes
  end subroutine
  subroutine coll(name, s, r)
    character(len=*), intent(in) :: name
    integer(8), intent(in) :: s, r
    call fn(name, 1, s + r)
    coll_calls = coll_calls + 1
    pay_sent = pay_sent + s
    pay_recv = pay_recv + r
  end subroutine
  subroutine disk(name, write, bytes)
    character(len=*), intent(in) :: name
    logical, intent(in) :: write
    integer(8), intent(in) :: bytes
    call fn(name, 1, bytes)
    if (write) then
      disk_w = disk_w + bytes
    else
      disk_r = disk_r + bytes
    end if
  end subroutine
  subroutine write_expect(dir)
    character(len=*), intent(in) :: dir
    character(len=1024) :: path
    character(len=6), parameter :: cn(0:2) = ['self  ', 'node  ', 'remote']
    integer :: u, k, i
    write(path, '(a,a,i0,a)') trim(dir), '/expect.', me, '.json'
    open(newunit=u, file=trim(path), status='replace', action='write')
    write(u, '(a,i0,a,i0,a)') '{"rank": ', me, ', "ranks": ', np, ','
    do k = 0, 2
      write(u, '(3a,i0,a,i0,3a,i0,a,i0,a)') ' "p2p_sent_', trim(cn(k)), '": [', sent_m(k), ', ', sent_b(k), &
          '], "p2p_recv_', trim(cn(k)), '": [', recv_m(k), ', ', recv_b(k), '],'
    end do
    write(u, '(a,i0,a,i0,a,i0,a,i0,a,i0,a)') ' "collective_calls": ', coll_calls, ', "collective_payload_sent": ', &
        pay_sent, ', "collective_payload_recv": ', pay_recv, ', "disk_read": ', disk_r, ', "disk_write": ', disk_w, ','
    write(u, '(a)', advance='no') ' "calls": {'
    do i = 1, nf
      if (i > 1) write(u, '(a)', advance='no') ', '
      write(u, '(3a,i0,a,i0,a)', advance='no') '"', trim(fname(i)), '": [', fcalls(i), ', ', fbytes(i), ']'
    end do
    write(u, '(a)') '}}'
    close(u)
  end subroutine
end module

program pmpi_app_f
#ifdef TSR_F08
  use mpi_f08
#else
  use mpi
#endif
  use expect_m
  implicit none
#ifdef TSR_F08
  type(MPI_Request) :: rq(4)
  type(MPI_Status) :: st
  type(MPI_Win) :: win
  type(MPI_File) :: fh
  type(MPI_Comm) :: ring
  type(MPI_Datatype) :: types(64)
#else
  integer :: rq(4), st(MPI_STATUS_SIZE), win, fh, ring, types(64)
#endif
  integer(kind=MPI_ADDRESS_KIND) :: wsize, tdisp
  integer(kind=MPI_OFFSET_KIND) :: off
  integer :: counts(64), displs(64), dims(1)
  logical :: periods(1)
  integer :: ierr, right, left, idx, round, i, n, idxs(4)
  integer(8), parameter :: d = 8
  double precision :: a(512), b(512)
  character(len=512) :: dir, env

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  call get_command_argument(1, dir)
  call get_environment_variable('TSR_PMPI_RANKS_PER_NODE', env)
  read(env, *, iostat=i) rpn
  if (i /= 0 .or. rpn <= 0) rpn = np
  right = mod(me + 1, np)
  left = mod(me + np - 1, np)
  a = 1.0d0
  b = 0.0d0

  ! Nonblocking receive completed by MPI_Wait with a status.
  call MPI_Irecv(b, 100, MPI_DOUBLE_PRECISION, left, 1, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Send(a, 100, MPI_DOUBLE_PRECISION, right, 1, MPI_COMM_WORLD, ierr)
  call sent('MPI_Send', right, 100 * d, 1)
  call MPI_Wait(rq(1), st, ierr)
  call got('MPI_Irecv', left, 100 * d, 1)

  ! Blocking receive with MPI_STATUS_IGNORE.
  call MPI_Isend(a, 37, MPI_DOUBLE_PRECISION, right, 2, MPI_COMM_WORLD, rq(1), ierr)
  call sent('MPI_Isend', right, 37 * d, 1)
  call MPI_Recv(b, 37, MPI_DOUBLE_PRECISION, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call got('MPI_Recv', left, 37 * d, 1)
  call MPI_Wait(rq(1), MPI_STATUS_IGNORE, ierr)

  call MPI_Sendrecv(a, 11, MPI_DOUBLE_PRECISION, right, 3, b, 11, MPI_DOUBLE_PRECISION, left, 3, &
                    MPI_COMM_WORLD, st, ierr)
  call sent('MPI_Sendrecv', right, 11 * d, 1)
  call got('MPI_Sendrecv', left, 11 * d, 0)

  ! Persistent requests, two rounds, completed with Waitall (statuses ignored).
  call MPI_Recv_init(b, 19, MPI_DOUBLE_PRECISION, left, 4, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Send_init(a, 19, MPI_DOUBLE_PRECISION, right, 4, MPI_COMM_WORLD, rq(2), ierr)
  do round = 1, 2
    call MPI_Startall(2, rq, ierr)
    call sent('MPI_Send_init', right, 19 * d, 1)
    call MPI_Waitall(2, rq, MPI_STATUSES_IGNORE, ierr)
    call got('MPI_Recv_init', left, 19 * d, 1)
  end do
  call MPI_Request_free(rq(1), ierr)
  call MPI_Request_free(rq(2), ierr)

  ! Waitany, then Waitsome for the other receive. The two have the same size:
  ! MPICH 4.0's mpi_f08 Waitany returns a 0-based index (a library bug), so
  ! the bookkeeping here does not depend on which one completed first.
  call MPI_Irecv(b, 6, MPI_DOUBLE_PRECISION, left, 5, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Irecv(b(64), 6, MPI_DOUBLE_PRECISION, left, 6, MPI_COMM_WORLD, rq(2), ierr)
  call MPI_Isend(a, 6, MPI_DOUBLE_PRECISION, right, 5, MPI_COMM_WORLD, rq(3), ierr)
  call MPI_Isend(a, 6, MPI_DOUBLE_PRECISION, right, 6, MPI_COMM_WORLD, rq(4), ierr)
  call sent('MPI_Isend', right, 6 * d, 1)
  call sent('MPI_Isend', right, 6 * d, 1)
  call MPI_Waitany(2, rq, idx, st, ierr)
  call got('MPI_Irecv', left, 6 * d, 1)
  n = 0
  do while (n == 0)
    call MPI_Waitsome(2, rq, n, idxs, MPI_STATUSES_IGNORE, ierr)
  end do
  call got('MPI_Irecv', left, 6 * d, 1)
  call MPI_Waitall(2, rq(3:4), MPI_STATUSES_IGNORE, ierr)

  ! Collectives (payload as in docs/ENERGY.md).
  call MPI_Allreduce(MPI_IN_PLACE, b, 64, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call coll('MPI_Allreduce', 64 * d, 64 * d)
  call MPI_Bcast(a, 50, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  if (me == 0) then
    call coll('MPI_Bcast', 50 * d, 0_8)
  else
    call coll('MPI_Bcast', 0_8, 50 * d)
  end if
  call MPI_Reduce(a, b, 21, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (me == 0) then
    call coll('MPI_Reduce', 21 * d, 21 * d)
  else
    call coll('MPI_Reduce', 21 * d, 0_8)
  end if
  call MPI_Allgather(a, 3, MPI_DOUBLE_PRECISION, b, 3, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  call coll('MPI_Allgather', 3 * d, int(np, 8) * 3 * d)
  call MPI_Alltoall(a, 2, MPI_DOUBLE_PRECISION, b, 2, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  call coll('MPI_Alltoall', int(np, 8) * 2 * d, int(np, 8) * 2 * d)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call coll('MPI_Barrier', 0_8, 0_8)
  call MPI_Iallreduce(a, b, 9, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, rq(1), ierr)
  call coll('MPI_Iallreduce', 9 * d, 9 * d)
  call MPI_Wait(rq(1), MPI_STATUS_IGNORE, ierr)
  call MPI_Scan(a, b, 7, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call coll('MPI_Scan', 7 * d, 7 * d)

  ! alltoallw: one double to and from every rank.
  do i = 1, np
    counts(i) = 1
    displs(i) = (i - 1) * 8
    types(i) = MPI_DOUBLE_PRECISION
  end do
  call MPI_Alltoallw(a, counts, displs, types, b, counts, displs, types, MPI_COMM_WORLD, ierr)
  call coll('MPI_Alltoallw', int(np, 8) * d, int(np, 8) * d)

  ! A neighbourhood collective on a periodic ring: two neighbours.
  dims(1) = np
  periods(1) = .true.
  call MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, .false., ring, ierr)
  call MPI_Neighbor_allgather(a, 4, MPI_DOUBLE_PRECISION, b, 4, MPI_DOUBLE_PRECISION, ring, ierr)
  call coll('MPI_Neighbor_allgather', 2 * 4 * d, 2 * 4 * d)
  call MPI_Comm_free(ring, ierr)

  ! One-sided (Open MPI 4.1 has no window component for one process).
  if (np > 1) then
    wsize = 512 * d
    call MPI_Win_create(b, wsize, 8, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
    call MPI_Win_fence(0, win, ierr)
    tdisp = 0
    call MPI_Put(a, 10, MPI_DOUBLE_PRECISION, right, tdisp, 10, MPI_DOUBLE_PRECISION, win, ierr)
    call sent('MPI_Put', right, 10 * d, 1)
    tdisp = 20
    call MPI_Get(a(32), 6, MPI_DOUBLE_PRECISION, left, tdisp, 6, MPI_DOUBLE_PRECISION, win, ierr)
    call got('MPI_Get', left, 6 * d, 1)
    call MPI_Win_fence(0, win, ierr)
    call MPI_Win_free(win, ierr)
  end if

  ! MPI-IO: every rank its own block.
  call MPI_File_open(MPI_COMM_WORLD, trim(dir) // '/fortran.dat', MPI_MODE_CREATE + MPI_MODE_RDWR, &
                     MPI_INFO_NULL, fh, ierr)
  off = int(me, MPI_OFFSET_KIND) * 40 * d
  call MPI_File_write_at_all(fh, off, a, 40, MPI_DOUBLE_PRECISION, MPI_STATUS_IGNORE, ierr)
  call disk('MPI_File_write_at_all', .true., 40 * d)
  call MPI_File_read_at_all(fh, off, b, 40, MPI_DOUBLE_PRECISION, st, ierr)
  call disk('MPI_File_read_at_all', .false., 40 * d)
  call MPI_File_close(fh, ierr)

  call write_expect(dir)
  call MPI_Finalize(ierr)
end program
