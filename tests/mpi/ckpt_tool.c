/* ckpt_tool: writes and checks tessera checkpoints whose every value is a
 * function of the step they hold, for the tests that need a process of their
 * own (C99, public API only):
 *
 *   ckpt_tool write  PATH STEP [--binary] [--floats N]   one checkpoint
 *   ckpt_tool loop   PATH FIRST [--binary] [--floats N]  checkpoints FIRST, FIRST+1, ... until killed
 *   ckpt_tool verify PATH                                 loads it and checks every value against its step
 *   ckpt_tool fsize  PATH LIMIT                           a commit under RLIMIT_FSIZE = LIMIT bytes must
 *                                                         fail with TSR_ERR_IO and leave PATH as it was
 *
 * Contents at step s (s < 1000), checked by verify and by ckpt_h5py.py:
 *   W      float64 matrix 300 x 200 on a 2D grid: W[i][j] = i*1000 + j + s/1024
 *   flat   float32 [N] shards (N = 1 Mi by default): flat[k] = k % 1000 + s/1024
 *   tokens int64 [3, 4] replicated: tokens[a][b] = (a*4 + b) * s
 *   half   bfloat16 [8] replicated: bit patterns 0x3f80 + k + s
 *   attrs  step (int) = s, lr (double) = s/1024, config (string) = "ckpt_tool step <s>"
 * Exit codes: 0 success, 1 a check failed, 2 bad command line, 3 a tessera
 * call failed (message on stderr). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <mpi.h>

#include "tessera/tessera.h"

#define M 300
#define N 200

static tsr_context g_ctx;
static int g_rank, g_size;
static uint64_t g_floats = 1u << 20;

#define TRY(call)                                                                          \
  do {                                                                                     \
    tsr_status st_ = (call);                                                               \
    if (st_ != TSR_SUCCESS) {                                                              \
      fprintf(stderr, "rank %d: %s: %s\n", g_rank, #call, tsr_last_error(g_ctx));          \
      return 3;                                                                            \
    }                                                                                      \
  } while (0)

static double w_value(int64_t i, int64_t j, int s) { return (double)i * 1000.0 + (double)j + s / 1024.0; }
static float flat_value(uint64_t k, int s) { return (float)((double)(k % 1000) + s / 1024.0); }

/* The grid and matrix descriptor of W (2D, rows by i, columns by j). */
static int make_matrix(tsr_grid* grid, tsr_matrix* W) {
  int dims[3] = {0, 0, 1};
  tsr_layout lay = TSR_LAYOUT(TSR_DIM_I, TSR_DIM_J, TSR_DIM_NONE);
  TRY(tsr_grid_dims_create(TSR_GRID_2D, g_size, 0, dims, NULL));
  TRY(tsr_grid_create(g_ctx, TSR_GRID_2D, dims, grid));
  TRY(tsr_matrix_create(*grid, M, N, TSR_FLOAT64, &lay, 0, W));
  return 0;
}

static void shard(uint64_t n, uint64_t* off, uint64_t* cnt) {
  uint64_t p = (uint64_t)g_size, r = (uint64_t)g_rank;
  *cnt = n / p + (r < n % p);
  *off = r * (n / p) + (r < n % p ? r : n % p);
}

static int write_one(const char* path, int s, tsr_ckpt_format fmt, tsr_grid grid, tsr_matrix W, double* w,
                     float* flat) {
  int64_t rows = 0, cols = 0, ld = 0, i, j, gi, gj;
  uint64_t off, cnt, k;
  int64_t tokens[12];
  uint16_t half[8];
  uint64_t tshape[2] = {3, 4}, hshape[1] = {8};
  char config[64];
  tsr_checkpoint ck = NULL;
  (void)grid;
  TRY(tsr_matrix_local_size(W, &rows, &cols, &ld));
  for (j = 0; j < cols; ++j)
    for (i = 0; i < rows; ++i) {
      TRY(tsr_matrix_global_index(W, i, j, &gi, &gj));
      w[j * ld + i] = w_value(gi, gj, s);
    }
  shard(g_floats, &off, &cnt);
  for (k = 0; k < cnt; ++k) flat[k] = flat_value(off + k, s);
  for (k = 0; k < 12; ++k) tokens[k] = (int64_t)k * s;
  for (k = 0; k < 8; ++k) half[k] = (uint16_t)(0x3f80 + k + (uint64_t)s);
  snprintf(config, sizeof config, "ckpt_tool step %d", s);
  TRY(tsr_checkpoint_create(g_ctx, path, fmt, 0, &ck));
  TRY(tsr_checkpoint_put_matrix(ck, "W", W, w));
  TRY(tsr_checkpoint_put_shard(ck, "flat", TSR_FLOAT32, g_floats, off, cnt, flat));
  TRY(tsr_checkpoint_put_replicated(ck, "tokens", TSR_INT64, 2, tshape, tokens));
  TRY(tsr_checkpoint_put_replicated(ck, "half", TSR_BFLOAT16, 1, hshape, half));
  TRY(tsr_checkpoint_set_int(ck, "step", s));
  TRY(tsr_checkpoint_set_double(ck, "lr", s / 1024.0));
  TRY(tsr_checkpoint_set_string(ck, "config", config));
  TRY(tsr_checkpoint_commit(ck));
  TRY(tsr_checkpoint_close(&ck));
  return 0;
}

static int verify(const char* path) {
  tsr_grid grid = NULL;
  tsr_matrix W = NULL;
  tsr_checkpoint ck = NULL;
  int64_t step = -1, rows = 0, cols = 0, ld = 0, i, j, gi, gj, tokens[12];
  double lr = 0, *w;
  float* flat;
  uint16_t half[8];
  uint64_t tshape[2] = {3, 4}, hshape[1] = {8}, k, off, cnt, shape[3];
  char config[64], want[64];
  size_t need = 0;
  int bad = 0, rc, idx = -1;
  tsr_dtype type;
  if ((rc = make_matrix(&grid, &W)) != 0) return rc;
  TRY(tsr_checkpoint_open(g_ctx, path, &ck));
  TRY(tsr_checkpoint_get_int(ck, "step", &step));
  TRY(tsr_checkpoint_get_double(ck, "lr", &lr));
  TRY(tsr_checkpoint_get_string(ck, "config", config, sizeof config, &need));
  snprintf(want, sizeof want, "ckpt_tool step %d", (int)step);
  if (lr != step / 1024.0 || strcmp(config, want) != 0) bad = 1;
  TRY(tsr_checkpoint_find_array(ck, "flat", &idx));
  TRY(tsr_checkpoint_array_info(ck, idx, NULL, &type, NULL, shape));
  TRY(tsr_matrix_local_size(W, &rows, &cols, &ld));
  shard(shape[0], &off, &cnt);
  w = malloc(sizeof(double) * (size_t)(rows * cols + 1));
  flat = malloc(sizeof(float) * (size_t)(cnt + 1));
  if (!w || !flat) return 3;
  TRY(tsr_checkpoint_get_matrix(ck, "W", W, w));
  TRY(tsr_checkpoint_get_shard(ck, "flat", TSR_FLOAT32, shape[0], off, cnt, flat));
  TRY(tsr_checkpoint_get_replicated(ck, "tokens", TSR_INT64, 2, tshape, tokens));
  TRY(tsr_checkpoint_get_replicated(ck, "half", TSR_BFLOAT16, 1, hshape, half));
  for (j = 0; j < cols; ++j)
    for (i = 0; i < rows; ++i) {
      TRY(tsr_matrix_global_index(W, i, j, &gi, &gj));
      if (w[j * ld + i] != w_value(gi, gj, (int)step)) bad = 1;
    }
  for (k = 0; k < cnt; ++k)
    if (flat[k] != flat_value(off + k, (int)step)) bad = 1;
  for (k = 0; k < 12; ++k)
    if (tokens[k] != (int64_t)k * step) bad = 1;
  for (k = 0; k < 8; ++k)
    if (half[k] != (uint16_t)(0x3f80 + k + (uint64_t)step)) bad = 1;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (g_rank == 0) printf("%s: step %lld %s\n", path, (long long)step, bad ? "INCONSISTENT" : "consistent");
  free(w);
  free(flat);
  TRY(tsr_checkpoint_close(&ck));
  TRY(tsr_matrix_destroy(&W));
  TRY(tsr_grid_destroy(&grid));
  return bad;
}

static int usage(void) {
  if (g_rank == 0)
    fprintf(stderr, "usage: ckpt_tool write|loop PATH STEP [--binary] [--floats N]\n"
                    "       ckpt_tool verify PATH\n       ckpt_tool fsize PATH LIMIT\n");
  return 2;
}

static int run(int argc, char** argv) {
  const char* mode;
  const char* path;
  tsr_ckpt_format fmt = TSR_CKPT_AUTO;
  long arg = 0;
  int a, rc;
  tsr_grid grid = NULL;
  tsr_matrix W = NULL;
  double* w;
  float* flat;
  int64_t rows = 0, cols = 0, ld = 0;
  if (argc < 3) return usage();
  mode = argv[1];
  path = argv[2];
  if (strcmp(mode, "verify") == 0) return argc == 3 ? verify(path) : usage();
  if (argc < 4) return usage();
  arg = strtol(argv[3], NULL, 10);
  for (a = 4; a < argc; ++a) {
    if (strcmp(argv[a], "--binary") == 0)
      fmt = TSR_CKPT_BINARY;
    else if (strcmp(argv[a], "--floats") == 0 && a + 1 < argc)
      g_floats = strtoull(argv[++a], NULL, 10);
    else
      return usage();
  }
  if ((rc = make_matrix(&grid, &W)) != 0) return rc;
  TRY(tsr_matrix_local_size(W, &rows, &cols, &ld));
  w = malloc(sizeof(double) * (size_t)(ld * cols + 1));
  flat = malloc(sizeof(float) * (size_t)(g_floats / (uint64_t)g_size + 2));
  if (!w || !flat) return 3;
  if (strcmp(mode, "write") == 0) {
    rc = write_one(path, (int)arg, fmt, grid, W, w, flat);
  } else if (strcmp(mode, "loop") == 0) {
    for (a = (int)arg;; a = (a + 1) % 1000)
      if ((rc = write_one(path, a, fmt, grid, W, w, flat)) != 0) break;
  } else if (strcmp(mode, "fsize") == 0) {
    /* A commit that hits the file size limit (as a full disk would) must fail
     * cleanly and leave the file at PATH as it was. */
    struct rlimit lim;
    tsr_checkpoint ck = NULL;
    tsr_status st;
    uint64_t off, cnt, k;
    signal(SIGXFSZ, SIG_IGN);
    lim.rlim_cur = lim.rlim_max = (rlim_t)arg;
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return 3;
    shard(g_floats, &off, &cnt);
    for (k = 0; k < cnt; ++k) flat[k] = 0.0f;
    TRY(tsr_checkpoint_create(g_ctx, path, fmt, 0, &ck));
    TRY(tsr_checkpoint_put_shard(ck, "flat", TSR_FLOAT32, g_floats, off, cnt, flat));
    st = tsr_checkpoint_commit(ck);
    if (g_rank == 0) printf("commit under RLIMIT_FSIZE %ld: %s: %s\n", arg, tsr_status_name(st), tsr_last_error(g_ctx));
    rc = st == TSR_ERR_IO && strstr(tsr_last_error(g_ctx), path) != NULL ? 0 : 1;
    TRY(tsr_checkpoint_close(&ck));
  } else {
    rc = usage();
  }
  free(w);
  free(flat);
  tsr_matrix_destroy(&W);
  tsr_grid_destroy(&grid);
  return rc;
}

int main(int argc, char** argv) {
  int rc;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (tsr_context_create(MPI_COMM_WORLD, &g_ctx) != TSR_SUCCESS) {
    fprintf(stderr, "tsr_context_create: %s\n", tsr_last_error(NULL));
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  rc = run(argc, argv);
  tsr_context_destroy(&g_ctx);
  MPI_Finalize();
  return rc;
}
