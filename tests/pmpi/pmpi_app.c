/* An ordinary MPI program (no tessera) for the PMPI tool's tests. It makes a
 * known sequence of calls and, next to each one, adds to its own bookkeeping
 * what the call hands to MPI by the definitions in docs/ENERGY.md: bytes sent
 * per peer class (the peer's node from TSR_PMPI_RANKS_PER_NODE, as the tool
 * is told), bytes received, collective calls and payload, file bytes, calls
 * and bytes per MPI function. At the end every rank writes that bookkeeping to
 * <dir>/expect.<rank>.json with plain C stdio (no MPI traffic), and
 * check_pmpi.py compares it with the tool's report.
 *
 *   mpiexec -n P env LD_PRELOAD=libtessera-pmpi.so TSR_PMPI_RANKS_PER_NODE=2 \
 *       TSR_PMPI_PCONTROL=1 TSR_PMPI_MATRIX=1 TSR_PMPI_PREFIX=<dir>/report pmpi_app <dir>
 *
 * Covers: blocking, buffered, synchronous, ready and nonblocking sends;
 * receives from MPI_ANY_SOURCE completed by Wait, Waitall, Waitany, Waitsome,
 * Test and Testall; Sendrecv and Sendrecv_replace with MPI_PROC_NULL ends;
 * persistent requests (Startall, three rounds); matched probe and receive;
 * every blocking and nonblocking collective on MPI_COMM_WORLD; a split
 * communicator in reverse order (ranks translated to world ranks); a
 * neighbourhood collective on a periodic Cartesian ring; one-sided put and
 * get; MPI-IO; with an MPI-4 library also large-count calls, MPI_Isendrecv
 * and a persistent collective. Regions with MPI_Pcontrol(1/-1, name). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int me, np, rpn;

/* ------------------------------------------------------------ bookkeeping */
#define NFN 64
static struct {
  uint64_t sent_m[3], sent_b[3], recv_m[3], recv_b[3];
  uint64_t coll_calls, pay_sent, pay_recv, disk_r, disk_w;
  const char* fn[NFN];
  uint64_t fn_calls[NFN], fn_bytes[NFN];
  int nfn;
} X;

static int cls(int world_peer) {
  if (world_peer == me) return 0;
  return world_peer / rpn == me / rpn ? 1 : 2;
}
static void fn(const char* name, uint64_t calls, uint64_t bytes) {
  int i = 0;
  while (i < X.nfn && strcmp(X.fn[i], name) != 0) ++i;
  if (i == X.nfn) {
    if (X.nfn == NFN) abort();
    X.fn[X.nfn++] = name;
  }
  X.fn_calls[i] += calls;
  X.fn_bytes[i] += bytes;
}
/* A message to / from a world rank (MPI_PROC_NULL: a call, nothing moved). */
static void sent(const char* name, int wpeer, uint64_t bytes, int call) {
  fn(name, (uint64_t)call, wpeer == MPI_PROC_NULL ? 0 : bytes);
  if (wpeer == MPI_PROC_NULL) return;
  X.sent_m[cls(wpeer)] += 1;
  X.sent_b[cls(wpeer)] += bytes;
}
static void got(const char* name, int wpeer, uint64_t bytes, int call) {
  fn(name, (uint64_t)call, wpeer == MPI_PROC_NULL ? 0 : bytes);
  if (wpeer == MPI_PROC_NULL) return;
  X.recv_m[cls(wpeer)] += 1;
  X.recv_b[cls(wpeer)] += bytes;
}
static void coll(const char* name, uint64_t s, uint64_t r) {
  fn(name, 1, s + r);
  X.coll_calls += 1;
  X.pay_sent += s;
  X.pay_recv += r;
}
static void disk(const char* name, int write, uint64_t bytes) {
  fn(name, 1, bytes);
  if (write) X.disk_w += bytes;
  else X.disk_r += bytes;
}

static void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    fprintf(stderr, "rank %d: %s failed (%d)\n", me, what, rc);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}
#define CK(call) check((call), #call)

int main(int argc, char** argv) {
  CK(MPI_Init(&argc, &argv));
  if (argc < 2) {
    fprintf(stderr, "usage: pmpi_app <dir>\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const char* e = getenv("TSR_PMPI_RANKS_PER_NODE");
  rpn = e ? atoi(e) : 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  if (rpn <= 0) rpn = np;
  const int right = (me + 1) % np, left = (me + np - 1) % np;
  const uint64_t D = sizeof(double);
  enum { N = 256 };
  double* a = calloc(N * (size_t)np * 4, sizeof(double));
  double* b = calloc(N * (size_t)np * 4, sizeof(double));
  MPI_Status st;
  MPI_Request rq[8];

  /* --- ring: Isend right, Recv left (region "ring") ----------------------- */
  MPI_Pcontrol(1, "ring");
  CK(MPI_Isend(a, N, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &rq[0]));
  sent("MPI_Isend", right, N * D, 1);
  CK(MPI_Recv(b, N, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &st));
  got("MPI_Recv", left, N * D, 1);
  CK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
  MPI_Pcontrol(-1, "ring");

  /* --- send modes; receives from MPI_ANY_SOURCE ------------------------- */
  CK(MPI_Irecv(b, 7, MPI_INT, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &rq[0]));
  CK(MPI_Irecv(b + 8, 9, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &rq[1]));
  CK(MPI_Irecv(b + 16, 11, MPI_INT, MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, &rq[2]));
  CK(MPI_Barrier(MPI_COMM_WORLD)); /* receives posted: MPI_Rsend is legal */
  coll("MPI_Barrier", 0, 0);
  CK(MPI_Ssend(a, 7, MPI_INT, right, 2, MPI_COMM_WORLD));
  sent("MPI_Ssend", right, 7 * 4, 1);
  CK(MPI_Rsend(a, 9, MPI_INT, right, 3, MPI_COMM_WORLD));
  sent("MPI_Rsend", right, 9 * 4, 1);
  int bsize = 0;
  MPI_Pack_size(11, MPI_INT, MPI_COMM_WORLD, &bsize);
  bsize += MPI_BSEND_OVERHEAD;
  void* bbuf = malloc((size_t)bsize);
  CK(MPI_Buffer_attach(bbuf, bsize));
  CK(MPI_Bsend(a, 11, MPI_INT, right, 4, MPI_COMM_WORLD));
  sent("MPI_Bsend", right, 11 * 4, 1);
  MPI_Status sts[4];
  CK(MPI_Waitall(3, rq, sts));
  for (int i = 0; i < 3; ++i) got("MPI_Irecv", sts[i].MPI_SOURCE, (uint64_t)(7 + 2 * i) * 4, 1);
  CK(MPI_Buffer_detach(&bbuf, &bsize));
  free(bbuf);

  /* Waitany, Waitsome, Test, Testall on receives of different sizes. */
  for (int i = 0; i < 4; ++i) CK(MPI_Irecv(b + 32 * i, 3 + i, MPI_DOUBLE, left, 10 + i, MPI_COMM_WORLD, &rq[i]));
  for (int i = 0; i < 4; ++i) {
    CK(MPI_Issend(a, 3 + i, MPI_DOUBLE, right, 10 + i, MPI_COMM_WORLD, &rq[4 + i]));
    sent("MPI_Issend", right, (uint64_t)(3 + i) * D, 1);
  }
  int idx = -1, outc = 0, idxs[4], flag = 0;
  CK(MPI_Waitany(4, rq, &idx, &st)); /* one of the receives */
  got("MPI_Irecv", left, (uint64_t)(3 + idx) * D, 1);
  int left_recv = 3;
  while (left_recv > 0) {
    CK(MPI_Waitsome(4, rq, &outc, idxs, MPI_STATUSES_IGNORE));
    for (int k = 0; k < outc; ++k) got("MPI_Irecv", left, (uint64_t)(3 + idxs[k]) * D, 1);
    left_recv -= outc;
  }
  do {
    CK(MPI_Testall(4, rq + 4, &flag, MPI_STATUSES_IGNORE));
  } while (!flag);
  CK(MPI_Irecv(b, 5, MPI_BYTE, left, 20, MPI_COMM_WORLD, &rq[0]));
  CK(MPI_Send(a, 5, MPI_BYTE, right, 20, MPI_COMM_WORLD));
  sent("MPI_Send", right, 5, 1);
  do {
    CK(MPI_Test(&rq[0], &flag, MPI_STATUS_IGNORE));
  } while (!flag);
  got("MPI_Irecv", left, 5, 1);

  /* --- Sendrecv along an open chain (MPI_PROC_NULL at the ends) ---------- */
  const int up = me + 1 < np ? me + 1 : MPI_PROC_NULL, down = me > 0 ? me - 1 : MPI_PROC_NULL;
  CK(MPI_Sendrecv(a, 13, MPI_DOUBLE, up, 30, b, 13, MPI_DOUBLE, down, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  sent("MPI_Sendrecv", up, 13 * D, 1);
  got("MPI_Sendrecv", down, 13 * D, 0);
  CK(MPI_Sendrecv_replace(b, 17, MPI_FLOAT, down, 31, up, 31, MPI_COMM_WORLD, &st));
  sent("MPI_Sendrecv_replace", down, 17 * 4, 1);
  got("MPI_Sendrecv_replace", up, 17 * 4, 0);

  /* --- persistent requests: three rounds ------------------------------- */
  CK(MPI_Recv_init(b, 19, MPI_DOUBLE, left, 40, MPI_COMM_WORLD, &rq[0]));
  CK(MPI_Send_init(a, 19, MPI_DOUBLE, right, 40, MPI_COMM_WORLD, &rq[1]));
  for (int round = 0; round < 3; ++round) {
    CK(MPI_Startall(2, rq));
    sent("MPI_Send_init", right, 19 * D, 1);
    CK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    got("MPI_Recv_init", left, 19 * D, 1);
  }
  CK(MPI_Request_free(&rq[0]));
  CK(MPI_Request_free(&rq[1]));

  /* --- matched probe ----------------------------------------------------- */
  MPI_Message msg;
  CK(MPI_Isend(a, 21, MPI_SHORT, right, 50, MPI_COMM_WORLD, &rq[0]));
  sent("MPI_Isend", right, 21 * 2, 1);
  CK(MPI_Mprobe(MPI_ANY_SOURCE, 50, MPI_COMM_WORLD, &msg, &st));
  CK(MPI_Mrecv(b, 21, MPI_SHORT, &msg, &st));
  got("MPI_Mrecv", left, 21 * 2, 1);
  CK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));

  /* --- collectives on MPI_COMM_WORLD (payload as in docs/ENERGY.md) ----- */
  const uint64_t P = (uint64_t)np, R = (uint64_t)me;
  MPI_Pcontrol(1, "bcast");
  CK(MPI_Bcast(a, 100, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  coll("MPI_Bcast", me == 0 ? 100 * D : 0, me == 0 ? 0 : 100 * D);
  MPI_Pcontrol(-1, "bcast");
  CK(MPI_Reduce(a, b, 33, MPI_DOUBLE, MPI_SUM, np - 1, MPI_COMM_WORLD));
  coll("MPI_Reduce", 33 * D, me == np - 1 ? 33 * D : 0);
  MPI_Pcontrol(1, "allreduce");
  CK(MPI_Allreduce(a, b, 101, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  coll("MPI_Allreduce", 101 * D, 101 * D);
  MPI_Pcontrol(-1, "allreduce");
  /* The same call repeated (the tool reuses the last all-reduce's charge). */
  MPI_Pcontrol(1, "allreduce_again");
  for (int i = 0; i < 3; ++i) {
    CK(MPI_Allreduce(a, b, 101, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    coll("MPI_Allreduce", 101 * D, 101 * D);
  }
  MPI_Pcontrol(-1, "allreduce_again");
  CK(MPI_Allreduce(MPI_IN_PLACE, b, 5, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  coll("MPI_Allreduce", 5 * 4, 5 * 4);
  CK(MPI_Gather(a, 6, MPI_DOUBLE, b, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  coll("MPI_Gather", 6 * D, me == 0 ? P * 6 * D : 0);
  int counts[64], displs[64], total = 0;
  for (int q = 0; q < np; ++q) {
    counts[q] = q + 1;
    displs[q] = total;
    total += q + 1;
  }
  CK(MPI_Gatherv(a, me + 1, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  coll("MPI_Gatherv", (R + 1) * D, me == 0 ? (uint64_t)total * D : 0);
  CK(MPI_Scatter(a, 4, MPI_DOUBLE, b, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  coll("MPI_Scatter", me == 0 ? P * 4 * D : 0, 4 * D);
  CK(MPI_Scatterv(a, counts, displs, MPI_DOUBLE, b, me + 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  coll("MPI_Scatterv", me == 0 ? (uint64_t)total * D : 0, (R + 1) * D);
  MPI_Pcontrol(1, "allgather");
  CK(MPI_Allgather(a, 8, MPI_DOUBLE, b, 8, MPI_DOUBLE, MPI_COMM_WORLD));
  coll("MPI_Allgather", 8 * D, P * 8 * D);
  MPI_Pcontrol(-1, "allgather");
  CK(MPI_Allgatherv(a, me + 1, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD));
  coll("MPI_Allgatherv", (R + 1) * D, (uint64_t)total * D);
  MPI_Pcontrol(1, "alltoall");
  CK(MPI_Alltoall(a, 3, MPI_DOUBLE, b, 3, MPI_DOUBLE, MPI_COMM_WORLD));
  coll("MPI_Alltoall", P * 3 * D, P * 3 * D);
  MPI_Pcontrol(-1, "alltoall");
  int sc[64], sd[64], rc[64], rd[64], stot = 0, rtot = 0;
  for (int q = 0; q < np; ++q) {
    sc[q] = q + 1; /* to q: q+1 elements; from q: me+1 */
    rc[q] = me + 1;
    sd[q] = stot;
    rd[q] = rtot;
    stot += sc[q];
    rtot += rc[q];
  }
  CK(MPI_Alltoallv(a, sc, sd, MPI_DOUBLE, b, rc, rd, MPI_DOUBLE, MPI_COMM_WORLD));
  coll("MPI_Alltoallv", (uint64_t)stot * D, (uint64_t)rtot * D);
  CK(MPI_Reduce_scatter(a, b, counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  coll("MPI_Reduce_scatter", (uint64_t)total * D, (R + 1) * D);
  CK(MPI_Reduce_scatter_block(a, b, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  coll("MPI_Reduce_scatter_block", P * 2 * D, 2 * D);
  CK(MPI_Scan(a, b, 9, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  coll("MPI_Scan", 9 * 4, 9 * 4);
  CK(MPI_Exscan(a, b, 9, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  coll("MPI_Exscan", 9 * 4, 9 * 4);

  /* Nonblocking collectives: charged at the call. */
  CK(MPI_Iallreduce(a, b, 12, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq[0]));
  coll("MPI_Iallreduce", 12 * D, 12 * D);
  CK(MPI_Ibcast(a + N, 14, MPI_DOUBLE, np - 1, MPI_COMM_WORLD, &rq[1]));
  coll("MPI_Ibcast", me == np - 1 ? 14 * D : 0, me == np - 1 ? 0 : 14 * D);
  CK(MPI_Ialltoall(a + 2 * N, 2, MPI_DOUBLE, b + 2 * N, 2, MPI_DOUBLE, MPI_COMM_WORLD, &rq[2]));
  coll("MPI_Ialltoall", P * 2 * D, P * 2 * D);
  CK(MPI_Ibarrier(MPI_COMM_WORLD, &rq[3]));
  coll("MPI_Ibarrier", 0, 0);
  CK(MPI_Waitall(4, rq, MPI_STATUSES_IGNORE));

  /* --- a sub-communicator in reverse rank order -------------------------- */
  MPI_Comm sub;
  CK(MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &sub));
  int sr = 0, sp = 1;
  MPI_Comm_rank(sub, &sr);
  MPI_Comm_size(sub, &sp);
  int sworld[64];
  MPI_Allgather(&me, 1, MPI_INT, sworld, 1, MPI_INT, sub); /* sub rank -> world rank */
  coll("MPI_Allgather", 4, (uint64_t)sp * 4);
  const int snext = (sr + 1) % sp, sprev = (sr + sp - 1) % sp;
  CK(MPI_Sendrecv(a, 23, MPI_DOUBLE, snext, 60, b, 23, MPI_DOUBLE, sprev, 60, sub, MPI_STATUS_IGNORE));
  sent("MPI_Sendrecv", sworld[snext], 23 * D, 1);
  got("MPI_Sendrecv", sworld[sprev], 23 * D, 0);
  for (int i = 0; i < 2; ++i) {
    CK(MPI_Allreduce(a, b, 7, MPI_DOUBLE, MPI_SUM, sub));
    coll("MPI_Allreduce", 7 * D, 7 * D);
  }
  /* A blocking receive right before the free (its charge is made then). */
  CK(MPI_Isend(a, 13, MPI_DOUBLE, snext, 61, sub, &rq[0]));
  sent("MPI_Isend", sworld[snext], 13 * D, 1);
  CK(MPI_Recv(b, 13, MPI_DOUBLE, sprev, 61, sub, &st));
  got("MPI_Recv", sworld[sprev], 13 * D, 1);
  CK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
  MPI_Comm_free(&sub);
  /* A new communicator after the free (its tool record may reuse the freed
   * one's memory): the same all-reduce again, now over all ranks in order. */
  CK(MPI_Comm_split(MPI_COMM_WORLD, 0, me, &sub));
  CK(MPI_Allreduce(a, b, 7, MPI_DOUBLE, MPI_SUM, sub));
  coll("MPI_Allreduce", 7 * D, 7 * D);
  MPI_Comm_free(&sub);

  /* --- neighbourhood collective on a periodic ring ----------------------- */
  MPI_Comm ring;
  int dims[1] = {np}, periods[1] = {1};
  CK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
  CK(MPI_Neighbor_allgather(a, 3, MPI_DOUBLE, b, 3, MPI_DOUBLE, ring));
  /* Two neighbours (left, right), also when they coincide or are this rank. */
  coll("MPI_Neighbor_allgather", 2 * 3 * D, 2 * 3 * D);
  MPI_Comm_free(&ring);

  /* --- one-sided (Open MPI 4.1 has no window component for a single
   * process without UCX: MPI_ERR_WIN, with or without the tool) ----------- */
  if (np > 1) {
    MPI_Win win;
    CK(MPI_Win_create(b, (MPI_Aint)(N * D), (int)D, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CK(MPI_Win_fence(0, win));
    CK(MPI_Put(a, 10, MPI_DOUBLE, right, 0, 10, MPI_DOUBLE, win));
    sent("MPI_Put", right, 10 * D, 1);
    CK(MPI_Get(a + 16, 6, MPI_DOUBLE, left, 20, 6, MPI_DOUBLE, win));
    got("MPI_Get", left, 6 * D, 1);
    CK(MPI_Win_fence(0, win));
    CK(MPI_Win_free(&win));
  }

  /* --- MPI-IO ------------------------------------------------------------ */
  char path[512];
  snprintf(path, sizeof path, "%s/pmpi_app.dat", argv[1]);
  MPI_File fh;
  CK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
  CK(MPI_File_write_at_all(fh, (MPI_Offset)(R * 40 * D), a, 40, MPI_DOUBLE, MPI_STATUS_IGNORE));
  disk("MPI_File_write_at_all", 1, 40 * D);
  CK(MPI_File_read_at_all(fh, (MPI_Offset)(R * 40 * D), b, 40, MPI_DOUBLE, &st));
  disk("MPI_File_read_at_all", 0, 40 * D);
  CK(MPI_File_iwrite_at(fh, (MPI_Offset)((P + R) * 40 * D), a, 24, MPI_DOUBLE, &rq[0]));
  CK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
  disk("MPI_File_iwrite_at", 1, 24 * D);
  CK(MPI_File_close(&fh));
  if (me == 0) MPI_File_delete(path, MPI_INFO_NULL);

#if MPI_VERSION >= 4
  /* --- MPI-4: large counts, Isendrecv, a persistent collective ----------- */
  CK(MPI_Irecv_c(b, 27, MPI_DOUBLE, left, 70, MPI_COMM_WORLD, &rq[0]));
  CK(MPI_Send_c(a, 27, MPI_DOUBLE, right, 70, MPI_COMM_WORLD));
  sent("MPI_Send", right, 27 * D, 1);
  CK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
  got("MPI_Irecv", left, 27 * D, 1);
  CK(MPI_Allreduce_c(a, b, 15, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  coll("MPI_Allreduce", 15 * D, 15 * D);
  CK(MPI_Isendrecv(a, 29, MPI_DOUBLE, right, 71, b, 29, MPI_DOUBLE, left, 71, MPI_COMM_WORLD, &rq[0]));
  sent("MPI_Isendrecv", right, 29 * D, 1);
  CK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
  got("MPI_Isendrecv", left, 29 * D, 0);
  CK(MPI_Allreduce_init(a, b, 31, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]));
  for (int round = 0; round < 2; ++round) {
    CK(MPI_Start(&rq[0]));
    coll("MPI_Allreduce_init", 31 * D, 31 * D);
    CK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
  }
  CK(MPI_Request_free(&rq[0]));
#endif

  /* --- the bookkeeping, with plain stdio ---------------------------------- */
  char out[512];
  snprintf(out, sizeof out, "%s/expect.%d.json", argv[1], me);
  FILE* f = fopen(out, "w");
  if (f == NULL) {
    perror(out);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  static const char* cn[3] = {"self", "node", "remote"};
  fprintf(f, "{\"rank\": %d, \"ranks\": %d, \"right\": %d,\n", me, np, right);
  for (int k = 0; k < 3; ++k)
    fprintf(f, " \"p2p_sent_%s\": [%llu, %llu], \"p2p_recv_%s\": [%llu, %llu],\n", cn[k],
            (unsigned long long)X.sent_m[k], (unsigned long long)X.sent_b[k], cn[k], (unsigned long long)X.recv_m[k],
            (unsigned long long)X.recv_b[k]);
  fprintf(f, " \"collective_calls\": %llu, \"collective_payload_sent\": %llu, \"collective_payload_recv\": %llu,\n",
          (unsigned long long)X.coll_calls, (unsigned long long)X.pay_sent, (unsigned long long)X.pay_recv);
  fprintf(f, " \"disk_read\": %llu, \"disk_write\": %llu,\n \"calls\": {", (unsigned long long)X.disk_r,
          (unsigned long long)X.disk_w);
  for (int i = 0; i < X.nfn; ++i)
    fprintf(f, "%s\"%s\": [%llu, %llu]", i ? ", " : "", X.fn[i], (unsigned long long)X.fn_calls[i],
            (unsigned long long)X.fn_bytes[i]);
  fprintf(f, "},\n \"ring_bytes\": %llu, \"bcast_bytes\": %llu, \"allreduce_bytes\": %llu, \"allgather_bytes\": %llu, "
          "\"alltoall_bytes\": %llu}\n",
          (unsigned long long)(N * D), (unsigned long long)(100 * D), (unsigned long long)(101 * D),
          (unsigned long long)(8 * D), (unsigned long long)(3 * D));
  fclose(f);
  free(a);
  free(b);
  MPI_Finalize();
  return 0;
}
