/* The ring attention C API from C99 (no GoogleTest): a ring over
 * MPI_COMM_WORLD, a ring exchange with a C callback, and a causal zigzag
 * forward and backward whose output is compared with a naive double loop
 * over the whole sequence. Prints "N passed, M failed"; exit status 1 on
 * any failure on any rank. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessera/tessera.h>

static int failures = 0, passes = 0;
#define CHECK(cond)                                                        \
  do {                                                                     \
    if (cond) {                                                            \
      ++passes;                                                            \
    } else {                                                               \
      ++failures;                                                          \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                      \
  } while (0)

struct sums {
  int calls;
};

static tsr_status step(const tsr_ring_step* s, void* user) {
  struct sums* u = (struct sums*)user;
  const double* mine = (const double*)s->blocks[0];
  double* acc = (double*)s->blocks[1];
  u->calls += 1;
  if (s->counts[0] != 1 || mine[0] != (double)s->source) return TSR_ERR_NUMERIC;
  acc[0] = (double)s->rank; /* the owner gets the sum of all ranks */
  return TSR_SUCCESS;
}

#define NTOK 11
#define DIM 3

static double val(int which, int t, int e) { return sin(1.0 + which * 7.0 + t * 1.3 + e * 0.7); }

int main(int argc, char** argv) {
  int provided = 0, rank = 0, size = 1, any = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  {
    tsr_context ctx = NULL;
    tsr_ring ring = NULL;
    int rr = -1, rs = 0;
    CHECK(tsr_context_create(MPI_COMM_WORLD, &ctx) == TSR_SUCCESS);
    CHECK(tsr_ring_create_comm(ctx, MPI_COMM_WORLD, &ring) == TSR_SUCCESS);
    CHECK(tsr_ring_info(ring, &rr, &rs) == TSR_SUCCESS && rr == rank && rs == size);

    /* Exchange: circulate the rank number, accumulate rank numbers. */
    {
      double mine = (double)rank, total = -1;
      struct sums u = {0};
      tsr_ring_buffer b[2];
      b[0].data = &mine, b[0].count = 1, b[0].type = TSR_FLOAT64, b[0].mode = TSR_RING_CIRCULATE;
      b[1].data = &total, b[1].count = 1, b[1].type = TSR_FLOAT64, b[1].mode = TSR_RING_ACCUMULATE;
      CHECK(tsr_ring_exchange(ring, b, 2, step, &u) == TSR_SUCCESS);
      CHECK(u.calls == size);
      CHECK(total == (double)size * (size - 1) / 2);
    }

    /* Causal zigzag forward and backward, B = 1, H = 2, G = 1. */
    {
      tsr_attn_config cfg = TSR_ATTN_CONFIG_INIT;
      size_t n = 0, i;
      int64_t pos[NTOK];
      double q[2 * NTOK * DIM], k[NTOK * DIM], v[NTOK * DIM], o[2 * NTOK * DIM], lse[2 * NTOK];
      double dout[2 * NTOK * DIM], dq[2 * NTOK * DIM], dk[NTOK * DIM], dv[NTOK * DIM];
      tsr_attn_tensor tq, tk, tv, to, tl, tdo, tdq, tdk, tdv;
      int h, e;
      cfg.layout = TSR_ATTN_LAYOUT_ZIGZAG;
      cfg.causal = 1;
      cfg.seq_len = NTOK;
      cfg.type = TSR_FLOAT64;
      CHECK(tsr_attn_shard_len(cfg.layout, NTOK, size, rank, &n) == TSR_SUCCESS);
      CHECK(tsr_attn_positions(cfg.layout, NTOK, size, rank, pos) == TSR_SUCCESS);
      for (h = 0; h < 2; ++h)
        for (i = 0; i < n; ++i)
          for (e = 0; e < DIM; ++e) {
            q[(h * n + i) * DIM + e] = val(h, (int)pos[i], e);
            dout[(h * n + i) * DIM + e] = val(5 + h, (int)pos[i], e);
          }
      for (i = 0; i < n; ++i)
        for (e = 0; e < DIM; ++e) k[i * DIM + e] = val(2, (int)pos[i], e), v[i * DIM + e] = val(3, (int)pos[i], e);
      tq.data = q, tq.batch = 1, tq.heads = 2, tq.seq = n, tq.dim = DIM;
      tk = tq, tk.data = k, tk.heads = 1;
      tv = tk, tv.data = v;
      to = tq, to.data = o;
      tl = tq, tl.data = lse, tl.dim = 1;
      tdo = tq, tdo.data = dout;
      tdq = tq, tdq.data = dq;
      tdk = tk, tdk.data = dk;
      tdv = tk, tdv.data = dv;
      CHECK(tsr_attn_forward(ring, &cfg, &tq, &tk, &tv, NULL, &to, &tl) == TSR_SUCCESS);
      /* Naive reference for this rank's queries. */
      for (h = 0; h < 2; ++h)
        for (i = 0; i < n; ++i) {
          const int t = (int)pos[i];
          double s[NTOK], mx = -1e300, sum = 0, ref[DIM] = {0, 0, 0}, err = 0;
          int j;
          for (j = 0; j <= t; ++j) {
            double dot = 0;
            for (e = 0; e < DIM; ++e) dot += val(h, t, e) * val(2, j, e);
            s[j] = dot / sqrt((double)DIM);
            if (s[j] > mx) mx = s[j];
          }
          for (j = 0; j <= t; ++j) sum += exp(s[j] - mx);
          for (j = 0; j <= t; ++j)
            for (e = 0; e < DIM; ++e) ref[e] += exp(s[j] - mx) / sum * val(3, j, e);
          for (e = 0; e < DIM; ++e) err = fmax(err, fabs(ref[e] - o[(h * n + i) * DIM + e]));
          CHECK(err < 1e-12);
          CHECK(fabs(lse[h * n + i] - (mx + log(sum))) < 1e-12);
        }
      CHECK(tsr_attn_backward(ring, &cfg, &tq, &tk, &tv, NULL, &to, &tl, &tdo, &tdq, &tdk, &tdv) == TSR_SUCCESS);
      for (i = 0; i < n * DIM; ++i) CHECK(dk[i] == dk[i] && dv[i] == dv[i]); /* no NaN */
      /* A bad argument on one rank fails everywhere. */
      tk.dim = rank == size - 1 ? DIM + 1 : DIM;
      CHECK(tsr_attn_forward(ring, &cfg, &tq, &tk, &tv, NULL, &to, &tl) == TSR_ERR_SHAPE);
    }
    CHECK(tsr_context_destroy(&ctx) == TSR_ERR_STATE); /* the ring is alive */
    CHECK(tsr_ring_destroy(&ring) == TSR_SUCCESS);
    CHECK(tsr_context_destroy(&ctx) == TSR_SUCCESS);
  }
  MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) printf("%d passed, %d failed (rank 0; worst rank %d failed)\n", passes, failures, any);
  MPI_Finalize();
  return any ? 1 : 0;
}
