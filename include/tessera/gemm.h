/*
 * tessera distributed matrix multiplication: C = alpha op(A) op(B) + beta C
 * on 1D, 2D, 2.5D and 3D process grids (C99). Included by tessera.h; the
 * conventions of tessera.h hold here too (status returns, tsr_last_error,
 * collective calls agree on errors before they communicate). The formulas
 * (bytes and messages per rank, the plan's model, the layouts) are in
 * docs/GEMM.md.
 *
 * Data model. A global m x n matrix is split over the positions (i, j, k) of
 * a tsr_grid by a tsr_layout: one grid dimension may split the rows into
 * blocks, one the columns, and a third (sub_dim) may split each local block's
 * columns once more. Grid dimensions the layout does not name hold copies
 * (replication). Blocks are balanced: part p of n over P parts has
 * n/P + (p < n%P) entries and starts at p*(n/P) + min(p, n%P), so m, n and k
 * need not divide the grid and blocks may be empty. Alternatively a
 * dimension may be block-cyclic (row_block/col_block > 0, the ScaLAPACK
 * distribution). Each rank stores its local block column-major with a leading
 * dimension ld >= local rows (row-major data is the transposed column-major
 * matrix: describe it as such and use TSR_TRANS). Idle ranks of a grid hold
 * nothing.
 *
 * Worked example, 3D on 2x2x2 (q = 2), Y = X W with the chaining layouts of
 * tsr_gemm_layouts(TSR_GEMM_3D, ...) (rows by i, columns by k then j, ...):
 * rank (i, j, k) holds rows block i of X and the sub-block j of its column
 * block k; after one all-gather along j it has X(i, k), after another along
 * i it has W(k, j), multiplies, and a reduce-scatter along k leaves it the
 * sub-block k of Y(i, j): the layout the next layer takes as its X with the
 * roles of j and k exchanged (tsr_gemm_layouts with roles {i, k, j}).
 */
#ifndef TESSERA_GEMM_H
#define TESSERA_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------- */
/* Layouts and distributed matrix descriptors                                 */
/* ------------------------------------------------------------------------- */
/* A dimension of a grid position (i, j, k): i = dims[0] (varies along the
 * COL axis), j = dims[1] (ROW axis), k = dims[2] (DEPTH axis). */
typedef enum tsr_grid_dim {
  TSR_DIM_NONE = -1,
  TSR_DIM_I = 0,
  TSR_DIM_J = 1,
  TSR_DIM_K = 2
} tsr_grid_dim;

/* How a matrix is split over a grid. Named dimensions must differ; a
 * dimension of extent 1 splits nothing (the same as TSR_DIM_NONE). */
typedef struct tsr_layout {
  int row_dim;   /* tsr_grid_dim whose coordinate selects the block of rows, or TSR_DIM_NONE */
  int col_dim;   /* tsr_grid_dim whose coordinate selects the block of columns, or TSR_DIM_NONE */
  int sub_dim;   /* tsr_grid_dim that splits each (row, column) block's columns again
                    (3D and 2.5D layouts), or TSR_DIM_NONE */
  int row_block; /* 0: balanced contiguous row blocks; b > 0: block-cyclic, blocks of b rows
                    dealt round-robin from coordinate 0 (ScaLAPACK MB, RSRC = 0) */
  int col_block; /* the same for columns (NB); sub_dim needs row_block = col_block = 0 */
} tsr_layout;

/* Balanced layout: rows by row_dim, columns by col_dim, then by sub_dim. */
#define TSR_LAYOUT(row_dim, col_dim, sub_dim) {(row_dim), (col_dim), (sub_dim), 0, 0}
/* Every rank of the grid holds the whole matrix. */
#define TSR_LAYOUT_REPLICATED {TSR_DIM_NONE, TSR_DIM_NONE, TSR_DIM_NONE, 0, 0}

typedef struct tsr_matrix_s* tsr_matrix;

/* Describe a global m x n matrix of type (TSR_FLOAT32, TSR_FLOAT64, or
 * TSR_BFLOAT16 for the inputs of a device GEMM, see tsr_gemm) laid out
 * over grid. ld: this rank's leading dimension (0: the local row count, or 1
 * if that is 0); it may differ between ranks, everything else must agree.
 * The descriptor holds no data: buffers are passed to each call. Destroy
 * matrices before their grid. Collective over the grid's context (idle ranks
 * too). Errors: INVALID_ARG (NULL, type, layout names a dimension twice or
 * one that is not 0..2, block sizes, arguments differ across ranks), SHAPE
 * (m or n negative, ld too small), UNSUPPORTED (a local block over INT_MAX
 * elements). */
TSR_API tsr_status tsr_matrix_create(tsr_grid grid, int64_t m, int64_t n, tsr_dtype type,
                                     const tsr_layout* layout, int64_t ld, tsr_matrix* mat);
/* Free a descriptor; sets *mat to NULL (NULL is a no-op). Local. */
TSR_API tsr_status tsr_matrix_destroy(tsr_matrix* mat);
/* This rank's local block: rows, columns and leading dimension (0, 0, 1 on
 * idle ranks); a local buffer holds ld*(cols-1)+rows elements. Local. */
TSR_API tsr_status tsr_matrix_local_size(tsr_matrix mat, int64_t* rows, int64_t* cols, int64_t* ld);
/* Global indices (0-based) of the local element (local_row, local_col). Local. */
TSR_API tsr_status tsr_matrix_global_index(tsr_matrix mat, int64_t local_row, int64_t local_col,
                                           int64_t* global_row, int64_t* global_col);
/* Global size, type and layout of a descriptor; any output may be NULL. Local. */
TSR_API tsr_status tsr_matrix_info(tsr_matrix mat, int64_t* m, int64_t* n, tsr_dtype* type,
                                   tsr_layout* layout, tsr_grid* grid);

/* Copy the global column-major matrix `global` (leading dimension ldg >= m),
 * read on context rank root only, into every rank's local buffer (copies
 * included). Collective over the matrix's context; root and the matrix must
 * agree. Point-to-point messages through the transport, one per rank that
 * holds a non-empty block (docs/GEMM.md). Errors: INVALID_ARG (root, NULL
 * buffers, ldg), and those of tsr_matrix_create. */
TSR_API tsr_status tsr_matrix_scatter(tsr_matrix mat, int root, const void* global, int64_t ldg,
                                      void* local);
/* The inverse: assemble the global matrix on context rank root (one copy of
 * each element is sent, by the replica chosen as for redistribution). */
TSR_API tsr_status tsr_matrix_gather(tsr_matrix mat, int root, const void* local, void* global,
                                     int64_t ldg);
/* Copy a matrix from one layout to another: src and dst describe the same
 * global size and type over grids of the same context (the grids may
 * differ, e.g. a 2D block-cyclic one and a 3D one). Each element travels
 * once to each rank that needs it, from one replica (docs/GEMM.md), in one
 * point-to-point message per pair of ranks that share elements; elements a
 * rank keeps are copied locally. sbuf and dbuf must not overlap. Collective
 * over the context. */
TSR_API tsr_status tsr_matrix_redistribute(tsr_matrix src, const void* sbuf, tsr_matrix dst,
                                           void* dbuf);

/* ------------------------------------------------------------------------- */
/* Matrix multiplication                                                      */
/* ------------------------------------------------------------------------- */
typedef enum tsr_trans { TSR_NOTRANS = 0, TSR_TRANS = 1 } tsr_trans;

/* The algorithms. Each reads the roles of the grid dimensions (which one
 * splits m, n, k) from the layouts of its operands; tsr_gemm_layouts gives
 * the layouts each one takes. See docs/GEMM.md for the exact traffic.
 *  1D    one grid dimension of extent > 1 splits m, n or k (Megatron style):
 *        all-gather of the operand that is split the other way, local GEMM,
 *        reduce-scatter or all-reduce of C when k is split.
 *  2D    SUMMA on a pr x pc grid: per panel of k, a broadcast of A along the
 *        grid rows and of B along the columns, the next panel's broadcasts
 *        posted (nonblocking, double-buffered) before this one's GEMM.
 *  2P5D  Solomonik-Demmel on q x q x c: replicate A and B along the depth,
 *        each layer runs 1/c of the SUMMA panels, reduce C along the depth.
 *  3D    on any grid (q x q x q and the shapes of tsr_gemm_plan): all-gather
 *        A along the n-dimension, B along the m-dimension, local GEMM,
 *        reduce-scatter C along the k-dimension; layouts chain between
 *        layers (see the example at the top of this header). */
typedef enum tsr_gemm_algo {
  TSR_GEMM_AUTO = 0, /* tsr_gemm: the algorithm the layouts fit (3D, else 2D/2P5D) */
  TSR_GEMM_1D = 1,
  TSR_GEMM_2D = 2,
  TSR_GEMM_2P5D = 3,
  TSR_GEMM_3D = 4
} tsr_gemm_algo;

/* Name of an algorithm ("2.5D"); never NULL. Local. */
TSR_API const char* tsr_gemm_algo_name(tsr_gemm_algo algo);

/* Options of tsr_gemm_ex. Initialise with TSR_GEMM_OPTIONS_INIT. */
typedef struct tsr_gemm_options {
  size_t size;          /* sizeof(tsr_gemm_options), set by the initialiser */
  unsigned int magic;   /* TSR_GEMM_MAGIC */
  tsr_gemm_algo algo;   /* TSR_GEMM_AUTO by default */
  int64_t panel;        /* 2D/2.5D: widest k-panel per broadcast step; 0: whole blocks */
  int overlap;          /* 2D/2.5D: 1 (default) posts the next panel's broadcasts before the
                           current GEMM; 0 waits for each panel first (for measurements) */
} tsr_gemm_options;

#define TSR_GEMM_MAGIC 0x6e33c0deu
#define TSR_GEMM_OPTIONS_INIT {sizeof(tsr_gemm_options), TSR_GEMM_MAGIC, TSR_GEMM_AUTO, 0, 1}

/* C = alpha op(A) op(B) + beta C, with op(X) = X or X^T. A is m x k after
 * op, B k x n, C m x n; a, b, c are this rank's local buffers of the three
 * descriptors, which must be over the same grid, of the same type and of
 * layouts the algorithm takes. Local GEMMs through CBLAS. With beta = 0, C
 * is never read (NaN in C does not propagate). alpha and beta are converted
 * to the element type. Collective over the grid's context (idle ranks call
 * too and return after the agreement); every data byte goes through the
 * transport.
 * Device buffers (tessera/device.h, docs/GPU.md): where a, b and c are CUDA
 * device memory of the device the context is bound to, every algorithm runs
 * on the device: packing on the context's stream, the same transport calls
 * (NCCL or CUDA-aware MPI), local products through cuBLAS with float32
 * accumulation, C float32; A and B TSR_FLOAT32, or both TSR_BFLOAT16 with C
 * TSR_FLOAT32. The call returns once its work is queued on the context's
 * stream. Grids must be created after tsr_context_set_device. A rank
 * without local blocks (NULL buffers) counts as device memory when its
 * context is bound.
 * Errors, on every rank before any data moves: INVALID_ARG (NULL
 * descriptor or buffer of a non-empty local block, trans not a tsr_trans,
 * algo, descriptors from different grids, C overlapping A or B, arguments
 * differ across ranks, types other than one type or bfloat16 A, B with
 * float32 C, a, b, c not all in one memory space, device memory of another
 * device than the context's), SHAPE (op(A), op(B), C sizes do not match,
 * layouts the algorithm cannot take; the message names the layout it
 * expects), STATE (device memory on a context not bound to a device),
 * UNSUPPORTED (block-cyclic operands: redistribute first; TSR_BFLOAT16 on
 * host buffers; a device C other than TSR_FLOAT32; device buffers on a grid
 * whose communicators cannot move device memory, or in a build without
 * CUDA). */
TSR_API tsr_status tsr_gemm(tsr_gemm_algo algo, tsr_trans transa, tsr_trans transb, double alpha,
                            tsr_matrix A, const void* a, tsr_matrix B, const void* b, double beta,
                            tsr_matrix C, void* c);
/* Workspace. Each context keeps one workspace block for its multiplications
 * and redistributions (gathered blocks, panels, partial products, packed
 * messages): it grows to the largest call and is reused, so that large
 * buffers are not allocated and first touched on every call (on the project
 * machine that costs more than the communication). It is freed with the
 * context, or now by this call. Its size per call is part of the plan's
 * memory_bytes; a rank that cannot get it fails the call on every rank with
 * TSR_ERR_NO_MEMORY before any data moves. Local. */
TSR_API tsr_status tsr_gemm_workspace_release(tsr_context ctx);

/* tsr_gemm with options (NULL: defaults). */
TSR_API tsr_status tsr_gemm_ex(const tsr_gemm_options* options, tsr_trans transa, tsr_trans transb,
                               double alpha, tsr_matrix A, const void* a, tsr_matrix B,
                               const void* b, double beta, tsr_matrix C, void* c);

/* The layouts of stored A, B and C (layouts[0..2]) that an algorithm takes
 * when grid dimension roles[0] splits m, roles[1] splits n and roles[2]
 * splits k (TSR_DIM_NONE for none); 2D and 2.5D: roles[2] is the depth.
 * Every operand is split over all the grid (1/p of it per rank), so the
 * output C of one multiplication is a valid A of the next with roles
 * {roles[0], roles[2], roles[1]}. Local. */
TSR_API tsr_status tsr_gemm_layouts(tsr_gemm_algo algo, tsr_trans transa, tsr_trans transb,
                                    const int roles[3], tsr_layout layouts[3]);

/* ------------------------------------------------------------------------- */
/* Planning                                                                   */
/* ------------------------------------------------------------------------- */
/* Machine parameters of the model T = gamma*F + beta*W + alpha*S (F flops,
 * W bytes received and S messages on the critical path, of the busiest
 * rank). Zero fields take defaults: alpha 2e-6 s, beta 1e-10 s/byte (10 GB/s),
 * gamma 2e-11 s/flop (50 GFLOP/s). */
typedef struct tsr_gemm_machine {
  double alpha; /* seconds per message */
  double beta;  /* seconds per byte */
  double gamma; /* seconds per flop of the local GEMM, per rank */
} tsr_gemm_machine;

/* Measure alpha and beta with a ping-pong between context ranks 0 and 1
 * (through the transport, charged as control traffic) and gamma with a
 * local GEMM run on every rank at once (so oversubscribed ranks see their
 * share of a core); results agree on every rank (maxima). 1 rank: beta and
 * alpha take the defaults. Collective over ctx. */
TSR_API tsr_status tsr_gemm_machine_measure(tsr_context ctx, tsr_gemm_machine* machine);

/* What to plan for. Initialise with TSR_GEMM_PROBLEM_INIT. */
typedef struct tsr_gemm_problem {
  size_t size;                 /* sizeof(tsr_gemm_problem) */
  unsigned int magic;          /* TSR_GEMM_MAGIC */
  int64_t m, n, k;             /* C is m x n, the inner dimension k */
  size_t elem_size;            /* bytes per element (2, 4, 8, ...) */
  int nranks;                  /* ranks available */
  double memory_per_rank;      /* bytes one rank may use for operands and workspace; 0: no limit */
  tsr_trans transa, transb;    /* for the layouts of the plan */
  tsr_gemm_algo algo;          /* TSR_GEMM_AUTO: every algorithm; else only this one */
  int allow_idle;              /* 1 (default): plans may use fewer than nranks ranks */
  tsr_gemm_machine machine;    /* zeros: defaults */
  /* Since 0.2 (a problem initialised by an older header, with a smaller
   * size, plans by time on one node): */
  tsr_objective objective;     /* what to minimise: time, energy or energy x time; DEFAULT (the
                                  initialiser's): the context's default objective, time
                                  without a context */
  int ranks_per_node;          /* ranks per node, for the energy of intra- vs inter-node
                                  bytes (grid ranks fill nodes in order); 0: one node */
  struct tsr_energy_profile_s* profile; /* machine profile (energy.h) for the joules;
                                  NULL: the built-in default-2025 */
  /* After 'profile' (a problem initialised by an older header, with a
   * smaller size, has no context): */
  tsr_context context;         /* NULL, or the context whose default objective
                                  (tsr_context_set_objective) TSR_OBJECTIVE_DEFAULT means */
} tsr_gemm_problem;

#define TSR_GEMM_PROBLEM_INIT                                                                     \
  {sizeof(tsr_gemm_problem), TSR_GEMM_MAGIC, 0, 0, 0, 8, 1, 0.0, TSR_NOTRANS, TSR_NOTRANS,       \
   TSR_GEMM_AUTO, 1, {0, 0, 0}, TSR_OBJECTIVE_DEFAULT, 0, NULL, NULL}

/* A plan: the algorithm, grid and layouts of least modelled time, and its
 * modelled figures for the busiest rank next to the lower bound. */
typedef struct tsr_gemm_plan {
  tsr_gemm_options options;    /* algorithm and panel width, for tsr_gemm_execute */
  tsr_grid_kind grid_kind;     /* create the grid with tsr_grid_create(ctx, grid_kind, dims) */
  int dims[3];
  int nranks;                  /* dims[0]*dims[1]*dims[2] */
  int idle_ranks;              /* problem.nranks - nranks ranks stay idle */
  int roles[3];                /* grid dimension splitting m, n, k (2D/2.5D: k = depth) */
  tsr_layout layouts[3];       /* of stored A, B, C */
  int64_t m, n, k;
  size_t elem_size;
  tsr_trans transa, transb;
  double flops;                /* local GEMM flops of the busiest rank */
  double bytes;                /* bytes the busiest rank receives (wire model, docs/GEMM.md) */
  double messages;             /* messages on its critical path */
  double time;                 /* modelled seconds */
  double lower_bound_bytes;    /* the memory-independent lower bound on bytes received by the
                                  busiest rank for this problem on nranks (docs/GEMM.md) */
  double memory_bytes;         /* per rank: operands + workspace */
  double missing_bytes;        /* > 0: even this plan, the one needing least memory, exceeds
                                  problem.memory_per_rank by this much */
  tsr_gemm_machine machine;    /* the parameters used */
  /* Energy, summed over the plan's ranks (docs/ENERGY.md, "Planning by
   * energy"), with the profile's PUE: */
  tsr_objective objective;     /* what the plan minimised */
  double joules;               /* modelled joules per multiplication (typical figures) */
  double joules_low, joules_high; /* the same with the profile's low and high figures */
  double intra_node_bytes;     /* bytes received within nodes, all ranks */
  double inter_node_bytes;     /* bytes received across nodes, all ranks */
} tsr_gemm_plan;

/* One candidate a plan considered: what tsr_gemm_plan_candidates lists. */
typedef struct tsr_gemm_candidate {
  tsr_gemm_algo algo;
  tsr_grid_kind grid_kind;
  int dims[3];
  int roles[3];
  long long panel;
  double time;                 /* modelled seconds (busiest rank) */
  double joules, joules_low, joules_high; /* modelled joules, all ranks */
  double bytes;                /* bytes the busiest rank receives */
  double intra_node_bytes, inter_node_bytes; /* all ranks */
  double memory_bytes;         /* per rank */
  int fits;                    /* within problem.memory_per_rank */
  int chosen;                  /* 1 for the candidate tsr_gemm_plan_create returns */
} tsr_gemm_candidate;

/* Choose the algorithm, grid and layouts of least modelled time (or
 * energy, or energy x time: problem.objective) among the
 * 1D, 2D, 2.5D and 3D algorithms on every grid shape of nranks (and of fewer
 * ranks, if allow_idle), within the memory budget. If nothing fits, returns
 * TSR_ERR_NO_MEMORY with the plan of least memory in *plan and the bytes
 * missing per rank in plan->missing_bytes (and the message). Local: no
 * communication, the same answer on every rank. Errors: INVALID_ARG (NULL,
 * problem not initialised, sizes, elem_size, nranks < 1, algo), SHAPE (the
 * algorithm asked for has no grid on nranks, e.g. 2.5D on 2 ranks without
 * idle ranks), NO_MEMORY. */
TSR_API tsr_status tsr_gemm_plan_create(const tsr_gemm_problem* problem, tsr_gemm_plan* plan);
/* Every candidate tsr_gemm_plan_create considers for problem, with its time
 * and joules, so that the trade between the objectives can be seen (and
 * plotted: bench_energy_gemm --candidates). Writes at most cap entries to
 * out (may be NULL when cap is 0) in the order considered; *count gets the
 * number of candidates. Local. Errors: as tsr_gemm_plan_create (NO_MEMORY
 * is not an error here: fits tells). */
TSR_API tsr_status tsr_gemm_plan_candidates(const tsr_gemm_problem* problem, tsr_gemm_candidate* out,
                                            size_t cap, size_t* count);
/* The plan as a few lines of text (like snprintf: *needed gets the full
 * length; buf may be NULL when len is 0). Local. */
TSR_API tsr_status tsr_gemm_plan_format(const tsr_gemm_plan* plan, char* buf, size_t len,
                                        size_t* needed);
/* tsr_gemm_ex with the plan's options, after checking that A, B and C have
 * the plan's sizes, grid shape and layouts (SHAPE otherwise). Collective. */
TSR_API tsr_status tsr_gemm_execute(const tsr_gemm_plan* plan, double alpha, tsr_matrix A,
                                    const void* a, tsr_matrix B, const void* b, double beta,
                                    tsr_matrix C, void* c);
/* Measured against the bound: from a report (tsr_report_create) that holds
 * region `region` in which `calls` multiplications of the plan's problem
 * ran, the busiest rank's received bytes and messages per call (the wire
 * model's collective traffic plus point-to-point payload, control excluded),
 * next to the plan's model and the lower bound, as one line of text (like
 * snprintf). Needs every rank's counters: call it on the report's root
 * (INVALID_ARG elsewhere). *bytes (may be NULL) gets the measured bytes per
 * call. Local. */
TSR_API tsr_status tsr_gemm_report_format(tsr_report report, const char* region, const tsr_gemm_plan* plan,
                                          int calls, char* buf, size_t len, size_t* needed, double* bytes);
/* The memory-independent lower bound (Al Daas, Ballard, Grigori, Kumar,
 * Rouse 2022) on the elements the busiest of p ranks must receive to
 * multiply m x k by k x n, times elem_size (docs/GEMM.md). Local. */
TSR_API tsr_status tsr_gemm_lower_bound(int64_t m, int64_t n, int64_t k, size_t elem_size, int p,
                                        double* bytes);

/* ------------------------------------------------------------------------- */
/* ScaLAPACK                                                                  */
/* ------------------------------------------------------------------------- */
/* Describe a ScaLAPACK matrix (descriptor type 1: block-cyclic over a BLACS
 * grid) for tsr_matrix_redistribute. The BLACS grid's processes must be
 * ranks of ctx (each rank learns the others' grid coordinates with one
 * all-gather over ctx, charged as control traffic); ranks outside the BLACS
 * grid (BLACS context -1 in desc[1] there) hold nothing. Needs ScaLAPACK's
 * BLACS linked into the program (UNSUPPORTED otherwise). Collective over
 * ctx. */
TSR_API tsr_status tsr_matrix_create_scalapack(tsr_context ctx, const int desc[9], tsr_dtype type,
                                               tsr_matrix* mat);

/* Drop-in for ScaLAPACK's pdgemm_/psgemm_: the same arguments (Fortran
 * style, by pointer, 1-based ia/ja offsets into distributed matrices with
 * 9-integer descriptors). Computes the same result with tessera's planned
 * algorithm: the operands are redistributed from the block-cyclic layout
 * into the plan's layouts, multiplied, and C's submatrix is redistributed
 * back; C outside the submatrix is untouched. On first use over a BLACS grid
 * tessera creates a context over the grid's communicator (collective, kept
 * as an attribute of that communicator until BLACS frees it) and caches the
 * grids it plans; tsr_scalapack_context gives that context (for counters and
 * reports). Collective over the BLACS grid. Needs ScaLAPACK's BLACS linked
 * into the program. Errors: INVALID_ARG (NULL, trans not 'N'/'T'/'C',
 * offsets, descriptor type), SHAPE (sizes out of the descriptors), UNSUPPORTED
 * (no BLACS), and those of tsr_gemm. */
TSR_API tsr_status tsr_pdgemm(const char* transa, const char* transb, const int* m, const int* n,
                              const int* k, const double* alpha, const double* a, const int* ia,
                              const int* ja, const int* desca, const double* b, const int* ib,
                              const int* jb, const int* descb, const double* beta, double* c,
                              const int* ic, const int* jc, const int* descc);
TSR_API tsr_status tsr_psgemm(const char* transa, const char* transb, const int* m, const int* n,
                              const int* k, const float* alpha, const float* a, const int* ia,
                              const int* ja, const int* desca, const float* b, const int* ib,
                              const int* jb, const int* descb, const float* beta, float* c,
                              const int* ic, const int* jc, const int* descc);
/* The context tsr_pdgemm uses for a BLACS grid (created on first use, then
 * owned by the grid's communicator: do not destroy it). Collective over the
 * BLACS grid on first use, local afterwards. */
TSR_API tsr_status tsr_scalapack_context(int blacs_context, tsr_context* ctx);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_GEMM_H */
