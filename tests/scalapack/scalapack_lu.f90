! An ordinary ScaLAPACK program: solve A x = b with PDGESV (n = 300, 16 x 16
! blocks, 2 x P/2 grid), then r = A x - b with PDGEMM. Under
! libtessera-scalapack the PDGEMM calls ScaLAPACK's LU makes internally (its
! trailing updates) go through tessera as well. Exit status 1 if
! max |r| > 1e-11 (A is diagonally dominant, entries O(1); ScaLAPACK alone
! gives about 1e-14).
!   mpiexec -n P scalapack_lu        (P even)
program scalapack_lu
  implicit none
  integer :: iam, np, ictxt, nprow, npcol, myrow, mycol, n, nb, lr, lc, info, desca(9), descb(9), li, lj, gi, gj
  integer :: numroc, indxl2g
  external :: numroc, indxl2g, pdgesv, pdgemm
  double precision, allocatable :: a(:, :), b(:, :), a0(:, :), b0(:, :)
  integer, allocatable :: ipiv(:)
  double precision :: r(1)
  logical :: bad
  n = 300; nb = 16
  call blacs_pinfo(iam, np)
  call blacs_get(-1, 0, ictxt)
  call blacs_gridinit(ictxt, 'Row', min(2, np), max(1, np / 2))
  call blacs_gridinfo(ictxt, nprow, npcol, myrow, mycol)
  lr = numroc(n, nb, myrow, 0, nprow)
  lc = numroc(n, nb, mycol, 0, npcol)
  call descinit(desca, n, n, nb, nb, 0, 0, ictxt, max(1, lr), info)
  call descinit(descb, n, 1, nb, nb, 0, 0, ictxt, max(1, lr), info)
  allocate (a(max(1, lr), max(1, lc)), a0(max(1, lr), max(1, lc)), b(max(1, lr), 1), b0(max(1, lr), 1))
  allocate (ipiv(lr + nb))
  do lj = 1, lc
    do li = 1, lr
      gi = indxl2g(li, nb, myrow, 0, nprow)
      gj = indxl2g(lj, nb, mycol, 0, npcol)
      a(li, lj) = sin(0.3d0 * gi + 0.7d0 * gj)
      if (gi == gj) a(li, lj) = a(li, lj) + 3d0
    end do
  end do
  do li = 1, lr
    b(li, 1) = cos(0.1d0 * indxl2g(li, nb, myrow, 0, nprow))
  end do
  a0 = a
  b0 = b
  call pdgesv(n, 1, a, 1, 1, desca, ipiv, b, 1, 1, descb, info)
  call pdgemm('N', 'N', n, 1, n, 1d0, a0, 1, 1, desca, b, 1, 1, descb, -1d0, b0, 1, 1, descb)
  r(1) = 0d0
  if (mycol == 0) r(1) = maxval(abs(b0(1:lr, 1)))
  call dgamx2d(ictxt, 'All', ' ', 1, 1, r, 1, -1, -1, -1, -1, -1)
  bad = info /= 0 .or. .not. (r(1) <= 1d-11)
  if (iam == 0) write (*, '(A,I0,A,ES10.2,A,L1)') 'scalapack_lu: info ', info, ' max |A x - b| ', r(1), ' fail ', bad
  call blacs_gridexit(ictxt)
  call blacs_exit(0)
  if (bad) stop 1
end program scalapack_lu
