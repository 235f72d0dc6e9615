! An ordinary ScaLAPACK program (no tessera in its source): PDGEMM and PSGEMM
! on submatrices (IA/JA/IB/JB/IC/JC /= 1) of block-cyclic matrices with
! non-square blocks, different for A, B and C, all four transpose
! combinations, alpha and beta /= 1; then one PZGEMM (complex: libtessera-
! scalapack hands it to ScaLAPACK). Each result is checked on every rank
! against a reference computed here from the same formulas (relative to
! sum |alpha a b| + |beta c| per element: 1e-12 in double and complex, 1e-5
! in single; C outside the submatrix must be unchanged), and written to
! DIR/c.<rank>.bin (local C and that bound per element, per call) so that
! scalapack_test.py can compare a run through libtessera-scalapack with a
! plain one. Exit status 1 if any check fails.
!   mpiexec -n P scalapack_gemm DIR
program scalapack_gemm
  implicit none
  integer :: iam, nprocs, ictxt, nprow, npcol, myrow, mycol, pr, d, t, u
  character(len=1), parameter :: tr(2) = (/ 'N', 'T' /)
  character(len=512) :: dir
  character(len=16) :: rs
  double precision :: worst(3)
  logical :: bad

  call blacs_pinfo(iam, nprocs)
  pr = 1
  do d = 1, nprocs
    if (d * d <= nprocs .and. mod(nprocs, d) == 0) pr = d
  end do
  call blacs_get(-1, 0, ictxt)
  call blacs_gridinit(ictxt, 'Row', pr, nprocs / pr)
  call blacs_gridinfo(ictxt, nprow, npcol, myrow, mycol)
  call get_command_argument(1, dir)
  write (rs, '(I0)') iam
  open (unit=10, file=trim(dir)//'/c.'//trim(rs)//'.bin', access='stream', form='unformatted', status='replace')

  worst = 0d0
  do t = 1, 2
    do u = 1, 2
      call run_d(tr(t), tr(u), 1, worst(1))
    end do
  end do
  do t = 1, 2
    do u = 1, 2
      call run_s(tr(t), tr(u), worst(2))
    end do
  end do
  call run_z(worst(3))
  ! Descriptor type 2 (PBLAS's BLOCK_CYCLIC_2D_INB, 11 entries): ScaLAPACK
  ! takes it, libtessera-scalapack hands it to ScaLAPACK.
  call run_d('N', 'N', 2, worst(1))
  close (10)

  call dgamx2d(ictxt, 'All', ' ', 3, 1, worst, 3, -1, -1, -1, -1, -1)
  bad = worst(1) > 1d-12 .or. worst(2) > 1d-5 .or. worst(3) > 1d-12
  if (iam == 0) then
    write (*, '(A,3ES10.2,A,L1)') 'scalapack_gemm: worst error / bound (pdgemm, psgemm, pzgemm):', worst, ' fail ', bad
  end if
  call blacs_gridexit(ictxt)
  call blacs_exit(0)
  if (bad) stop 1

contains

  ! Entry (i, j) (1-based, global) of matrix id.
  double precision function gval(id, i, j)
    integer, intent(in) :: id, i, j
    gval = sin(0.37d0 * i + 0.71d0 * j + 1.3d0 * id) + 0.25d0 * cos(0.13d0 * i * j + id)
  end function gval

  ! The sizes and offsets of one call: op(A) m x k at (ia, ja), op(B) k x n
  ! at (ib, jb), C m x n at (ic, jc), each stored matrix a little larger.
  subroutine shapes(ta, tb, m, n, k, ia, ja, ib, jb, ic, jc, ma, na, mb, nb, mc, nc)
    character(len=1), intent(in) :: ta, tb
    integer, intent(out) :: m, n, k, ia, ja, ib, jb, ic, jc, ma, na, mb, nb, mc, nc
    m = 37; n = 29; k = 23
    ia = 3; ja = 2; ib = 4; jb = 5; ic = 2; jc = 3
    if (ta == 'N') then
      ma = ia - 1 + m + 2; na = ja - 1 + k + 1
    else
      ma = ia - 1 + k + 2; na = ja - 1 + m + 1
    end if
    if (tb == 'N') then
      mb = ib - 1 + k + 1; nb = jb - 1 + n + 3
    else
      mb = ib - 1 + n + 1; nb = jb - 1 + k + 3
    end if
    mc = ic - 1 + m + 4; nc = jc - 1 + n + 2
  end subroutine shapes

  ! Descriptor and local size of a gm x gn matrix in mbk x nbk blocks.
  subroutine describe(desc, gm, gn, mbk, nbk, lr, lc)
    integer, intent(out) :: desc(9), lr, lc
    integer, intent(in) :: gm, gn, mbk, nbk
    integer :: numroc, info
    external :: numroc
    lr = numroc(gm, mbk, myrow, 0, nprow)
    lc = numroc(gn, nbk, mycol, 0, npcol)
    call descinit(desc, gm, gn, mbk, nbk, 0, 0, ictxt, max(1, lr), info)
  end subroutine describe

  ! The type-2 descriptor of the same matrix (first blocks as the others).
  subroutine inb(d1, d2)
    integer, intent(in) :: d1(9)
    integer, intent(out) :: d2(11)
    d2 = (/ 2, d1(2), d1(3), d1(4), d1(5), d1(6), d1(5), d1(6), d1(7), d1(8), d1(9) /)
  end subroutine inb

  ! op(X)(i, l) for a stored matrix id with offset (i0, j0).
  double precision function opx(id, trans, i0, j0, i, l)
    integer, intent(in) :: id, i0, j0, i, l
    character(len=1), intent(in) :: trans
    if (trans == 'N') then
      opx = gval(id, i0 - 1 + i, j0 - 1 + l)
    else
      opx = gval(id, i0 - 1 + l, j0 - 1 + i)
    end if
  end function opx

  double precision function opxs(id, trans, i0, j0, i, l)  ! the same, rounded to single
    integer, intent(in) :: id, i0, j0, i, l
    character(len=1), intent(in) :: trans
    opxs = dble(real(opx(id, trans, i0, j0, i, l)))
  end function opxs

  subroutine run_d(ta, tb, dtype, worst)
    character(len=1), intent(in) :: ta, tb
    integer, intent(in) :: dtype
    double precision, intent(inout) :: worst
    integer :: da(11), db(11), dc(11)
    integer :: m, n, k, ia, ja, ib, jb, ic, jc, ma, na, mb, nb, mc, nc
    integer :: desca(9), descb(9), descc(9), lra, lca, lrb, lcb, lrc, lcc, li, lj, gi, gj, l, indxl2g
    double precision, allocatable :: a(:, :), b(:, :), c(:, :), bound(:, :)
    double precision :: alpha, beta, ref, s, x
    external :: indxl2g, pdgemm
    call shapes(ta, tb, m, n, k, ia, ja, ib, jb, ic, jc, ma, na, mb, nb, mc, nc)
    alpha = 0.75d0; beta = -1.25d0
    call describe(desca, ma, na, 4, 3, lra, lca)
    call describe(descb, mb, nb, 5, 2, lrb, lcb)
    call describe(descc, mc, nc, 3, 6, lrc, lcc)
    allocate (a(max(1, lra), max(1, lca)), b(max(1, lrb), max(1, lcb)), c(max(1, lrc), max(1, lcc)))
    allocate (bound(max(1, lrc), max(1, lcc)))
    do lj = 1, lca
      do li = 1, lra
        a(li, lj) = gval(1, indxl2g(li, 4, myrow, 0, nprow), indxl2g(lj, 3, mycol, 0, npcol))
      end do
    end do
    do lj = 1, lcb
      do li = 1, lrb
        b(li, lj) = gval(2, indxl2g(li, 5, myrow, 0, nprow), indxl2g(lj, 2, mycol, 0, npcol))
      end do
    end do
    do lj = 1, lcc
      do li = 1, lrc
        c(li, lj) = gval(3, indxl2g(li, 3, myrow, 0, nprow), indxl2g(lj, 6, mycol, 0, npcol))
      end do
    end do
    if (dtype == 2) then
      call inb(desca, da)
      call inb(descb, db)
      call inb(descc, dc)
      call pdgemm(ta, tb, m, n, k, alpha, a, ia, ja, da, b, ib, jb, db, beta, c, ic, jc, dc)
    else
      call pdgemm(ta, tb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c, ic, jc, descc)
    end if
    do lj = 1, lcc
      do li = 1, lrc
        gi = indxl2g(li, 3, myrow, 0, nprow) - (ic - 1)
        gj = indxl2g(lj, 6, mycol, 0, npcol) - (jc - 1)
        x = gval(3, gi + ic - 1, gj + jc - 1)
        if (gi >= 1 .and. gi <= m .and. gj >= 1 .and. gj <= n) then
          ref = beta * x
          s = abs(beta * x)
          do l = 1, k
            ref = ref + alpha * opx(1, ta, ia, ja, gi, l) * opx(2, tb, ib, jb, l, gj)
            s = s + abs(alpha * opx(1, ta, ia, ja, gi, l) * opx(2, tb, ib, jb, l, gj))
          end do
          worst = max(worst, abs(c(li, lj) - ref) / s)
          bound(li, lj) = s
        else
          if (c(li, lj) /= x) worst = huge(1d0)  ! outside the submatrix: untouched
          bound(li, lj) = 0d0
        end if
      end do
    end do
    write (10) lrc * lcc
    if (lrc * lcc > 0) write (10) c(1:lrc, 1:lcc), bound(1:lrc, 1:lcc)
  end subroutine run_d

  subroutine run_s(ta, tb, worst)
    character(len=1), intent(in) :: ta, tb
    double precision, intent(inout) :: worst
    integer :: m, n, k, ia, ja, ib, jb, ic, jc, ma, na, mb, nb, mc, nc
    integer :: desca(9), descb(9), descc(9), lra, lca, lrb, lcb, lrc, lcc, li, lj, gi, gj, l, indxl2g
    real, allocatable :: a(:, :), b(:, :), c(:, :)
    double precision, allocatable :: bound(:, :)
    real :: alpha, beta
    double precision :: ref, s, x
    external :: indxl2g, psgemm
    call shapes(ta, tb, m, n, k, ia, ja, ib, jb, ic, jc, ma, na, mb, nb, mc, nc)
    alpha = 0.75; beta = -1.25
    call describe(desca, ma, na, 2, 5, lra, lca)
    call describe(descb, mb, nb, 3, 4, lrb, lcb)
    call describe(descc, mc, nc, 6, 3, lrc, lcc)
    allocate (a(max(1, lra), max(1, lca)), b(max(1, lrb), max(1, lcb)), c(max(1, lrc), max(1, lcc)))
    allocate (bound(max(1, lrc), max(1, lcc)))
    do lj = 1, lca
      do li = 1, lra
        a(li, lj) = real(gval(1, indxl2g(li, 2, myrow, 0, nprow), indxl2g(lj, 5, mycol, 0, npcol)))
      end do
    end do
    do lj = 1, lcb
      do li = 1, lrb
        b(li, lj) = real(gval(2, indxl2g(li, 3, myrow, 0, nprow), indxl2g(lj, 4, mycol, 0, npcol)))
      end do
    end do
    do lj = 1, lcc
      do li = 1, lrc
        c(li, lj) = real(gval(3, indxl2g(li, 6, myrow, 0, nprow), indxl2g(lj, 3, mycol, 0, npcol)))
      end do
    end do
    call psgemm(ta, tb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c, ic, jc, descc)
    do lj = 1, lcc
      do li = 1, lrc
        gi = indxl2g(li, 6, myrow, 0, nprow) - (ic - 1)
        gj = indxl2g(lj, 3, mycol, 0, npcol) - (jc - 1)
        x = dble(real(gval(3, gi + ic - 1, gj + jc - 1)))
        if (gi >= 1 .and. gi <= m .and. gj >= 1 .and. gj <= n) then
          ref = beta * x
          s = abs(beta * x)
          do l = 1, k
            ref = ref + alpha * opxs(1, ta, ia, ja, gi, l) * opxs(2, tb, ib, jb, l, gj)
            s = s + abs(alpha * opxs(1, ta, ia, ja, gi, l) * opxs(2, tb, ib, jb, l, gj))
          end do
          worst = max(worst, abs(dble(c(li, lj)) - ref) / s)
          bound(li, lj) = s
        else
          if (dble(c(li, lj)) /= x) worst = huge(1d0)
          bound(li, lj) = 0d0
        end if
      end do
    end do
    write (10) lrc * lcc
    if (lrc * lcc > 0) write (10) dble(c(1:lrc, 1:lcc)), bound(1:lrc, 1:lcc)
  end subroutine run_s

  ! C = alpha A B^T + beta C in complex (A m x k at (2, 3), B n x k at (3, 2)).
  subroutine run_z(worst)
    double precision, intent(inout) :: worst
    integer, parameter :: m = 21, n = 17, k = 13
    integer :: desca(9), descb(9), descc(9), lra, lca, lrb, lcb, lrc, lcc, li, lj, gi, gj, l, indxl2g
    complex(kind=8), allocatable :: a(:, :), b(:, :), c(:, :)
    double precision, allocatable :: bound(:, :)
    complex(kind=8) :: alpha, beta, ref, x
    double precision :: s
    external :: indxl2g, pzgemm
    alpha = (0.5d0, -0.25d0); beta = (-1.25d0, 0.5d0)
    call describe(desca, m + 1, k + 2, 3, 2, lra, lca)
    call describe(descb, n + 2, k + 1, 2, 4, lrb, lcb)
    call describe(descc, m, n, 4, 3, lrc, lcc)
    allocate (a(max(1, lra), max(1, lca)), b(max(1, lrb), max(1, lcb)), c(max(1, lrc), max(1, lcc)))
    allocate (bound(max(1, lrc), max(1, lcc)))
    do lj = 1, lca
      do li = 1, lra
        gi = indxl2g(li, 3, myrow, 0, nprow); gj = indxl2g(lj, 2, mycol, 0, npcol)
        a(li, lj) = cmplx(gval(4, gi, gj), gval(5, gi, gj), kind=8)
      end do
    end do
    do lj = 1, lcb
      do li = 1, lrb
        gi = indxl2g(li, 2, myrow, 0, nprow); gj = indxl2g(lj, 4, mycol, 0, npcol)
        b(li, lj) = cmplx(gval(6, gi, gj), gval(7, gi, gj), kind=8)
      end do
    end do
    do lj = 1, lcc
      do li = 1, lrc
        gi = indxl2g(li, 4, myrow, 0, nprow); gj = indxl2g(lj, 3, mycol, 0, npcol)
        c(li, lj) = cmplx(gval(8, gi, gj), gval(9, gi, gj), kind=8)
      end do
    end do
    call pzgemm('N', 'T', m, n, k, alpha, a, 2, 3, desca, b, 3, 2, descb, beta, c, 1, 1, descc)
    do lj = 1, lcc
      do li = 1, lrc
        gi = indxl2g(li, 4, myrow, 0, nprow); gj = indxl2g(lj, 3, mycol, 0, npcol)
        x = cmplx(gval(8, gi, gj), gval(9, gi, gj), kind=8)
        ref = beta * x
        s = abs(beta * x)
        do l = 1, k
          ref = ref + alpha * cmplx(gval(4, gi + 1, l + 2), gval(5, gi + 1, l + 2), kind=8) * &
                cmplx(gval(6, gj + 2, l + 1), gval(7, gj + 2, l + 1), kind=8)
          s = s + abs(alpha * cmplx(gval(4, gi + 1, l + 2), gval(5, gi + 1, l + 2), kind=8) * &
                cmplx(gval(6, gj + 2, l + 1), gval(7, gj + 2, l + 1), kind=8))
        end do
        worst = max(worst, abs(c(li, lj) - ref) / s)
        bound(li, lj) = -1d0  ! ScaLAPACK's own result both times: must be identical
      end do
    end do
    write (10) lrc * lcc
    if (lrc * lcc > 0) write (10) dble(c(1:lrc, 1:lcc)), aimag(c(1:lrc, 1:lcc)), bound(1:lrc, 1:lcc)
  end subroutine run_z

end program scalapack_gemm
