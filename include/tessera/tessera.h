/*
 * tessera: communication-avoiding building blocks for MPI codes.
 *
 * This is the public C API (C99). Conventions, valid for every function below:
 *
 *  - Every call returns a tsr_status. On failure the call leaves a message
 *    naming the argument and what was expected; read it with tsr_last_error()
 *    (per context and per thread).
 *  - "Collective over ctx" means: every rank of the context's communicator must
 *    make the call, in the same order, with consistent arguments. Collective
 *    calls validate their arguments collectively before they communicate, so a
 *    bad argument on one rank makes the call fail on every rank with the same
 *    status (the other ranks' message names the rank that failed) instead of
 *    leaving ranks hanging. "Local" calls do not communicate.
 *  - Threads: tessera needs MPI initialised with at least MPI_THREAD_FUNNELED
 *    semantics: calls that communicate must come from the thread that makes MPI
 *    calls. Two contexts may be used from two threads at once only under
 *    MPI_THREAD_MULTIPLE. Local queries may be called from any thread.
 *  - tessera never calls MPI_Init, MPI_Finalize or MPI_Abort, never uses
 *    MPI_COMM_WORLD implicitly, never prints, and never exits.
 *
 * See docs/API.md for the full reference, including the accounting model.
 */
#ifndef TESSERA_H
#define TESSERA_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/tsr_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define TSR_API
#elif defined(__GNUC__)
#define TSR_API __attribute__((visibility("default")))
#else
#define TSR_API
#endif

/* ------------------------------------------------------------------------- */
/* Status codes. Numbers are part of the ABI and never reused.               */
/* ------------------------------------------------------------------------- */
typedef enum tsr_status {
  TSR_SUCCESS = 0,
  TSR_ERR_INVALID_ARG = 1,  /* an argument is null, out of range or inconsistent */
  TSR_ERR_SHAPE = 2,        /* sizes or grid shapes that do not fit together     */
  TSR_ERR_MPI = 3,          /* an MPI call failed; the message has MPI's text    */
  TSR_ERR_NO_MEMORY = 4,    /* an allocation failed                              */
  TSR_ERR_UNSUPPORTED = 5,  /* valid request this build or backend cannot do     */
  TSR_ERR_IO = 6,           /* a file could not be written or read               */
  TSR_ERR_NUMERIC = 7,      /* non-finite or otherwise unusable numbers          */
  TSR_ERR_STATE = 8,        /* call out of order (e.g. region end without begin) */
  TSR_ERR_INTERNAL = 9      /* a bug in tessera: please report it                */
} tsr_status;

/* Name of a status ("TSR_ERR_SHAPE"); never NULL. Local, thread-safe. */
TSR_API const char* tsr_status_name(tsr_status status);
/* One-line description of a status; never NULL. Local, thread-safe. */
TSR_API const char* tsr_status_string(tsr_status status);

/* ------------------------------------------------------------------------- */
/* Element types and reduction operations (numbers are ABI)                   */
/* ------------------------------------------------------------------------- */
typedef enum tsr_dtype {
  TSR_BYTE = 0,
  TSR_INT32 = 1,
  TSR_INT64 = 2,
  TSR_FLOAT32 = 3,
  TSR_FLOAT64 = 4,
  TSR_BFLOAT16 = 5 /* stored as uint16_t; reductions accumulate in float */
} tsr_dtype;

typedef enum tsr_op { TSR_SUM = 0, TSR_PROD = 1, TSR_MIN = 2, TSR_MAX = 3 } tsr_op;

/* What a planner minimises (tsr_gemm_plan_create, tsr_attn_plan_create,
 * tsr_optimizer_plan): modelled time, modelled energy (joules from a machine
 * profile, docs/ENERGY.md), or their product (energy-delay). DEFAULT (the
 * problems' initialisers): the context's default objective
 * (tsr_context_set_objective) where the problem names a context, else time. */
typedef enum tsr_objective {
  TSR_OBJECTIVE_DEFAULT = -1,
  TSR_OBJECTIVE_TIME = 0,
  TSR_OBJECTIVE_ENERGY = 1,
  TSR_OBJECTIVE_EDP = 2
} tsr_objective;

/* Size in bytes of one element (0 for an unknown type). Local. */
TSR_API size_t tsr_dtype_size(tsr_dtype type);

/* ------------------------------------------------------------------------- */
/* Versions                                                                   */
/* ------------------------------------------------------------------------- */
/* Runtime version of the library, as TSR_VERSION_CODE would give it for the
 * headers it was built from. Any argument may be NULL. Local. */
TSR_API tsr_status tsr_get_version(int* major, int* minor, int* patch, int* code);

/* ------------------------------------------------------------------------- */
/* Context                                                                    */
/* ------------------------------------------------------------------------- */
typedef struct tsr_context_s* tsr_context;

/* Optional settings for tsr_context_create_ex. Initialise with
 * TSR_CONTEXT_CONFIG_INIT, then change fields; unknown future fields keep
 * their defaults because the struct carries its own size. */
typedef struct tsr_context_config {
  size_t size;              /* sizeof(tsr_context_config), set by the initialiser */
  unsigned int magic;       /* TSR_CONFIG_MAGIC, set by the initialiser           */
  int ranks_per_node;       /* 0: detect nodes with MPI_Comm_split_type (default).
                               n > 0: treat ranks [k*n, (k+1)*n) of the communicator
                               as node k (for simulations and tests). */
  size_t max_chunk;         /* 0: INT_MAX (default). The most elements tessera hands
                               to one MPI call; a larger transfer (counts are size_t
                               everywhere) is split into chunks of at most this many
                               elements, counted once as the one logical transfer
                               (docs/ACCOUNTING.md). 1 .. INT_MAX; small values
                               exercise the split path in tests. Same on every rank. */
} tsr_context_config;

#define TSR_CONFIG_MAGIC 0x7e55e7a1u
#define TSR_CONTEXT_CONFIG_INIT {sizeof(tsr_context_config), TSR_CONFIG_MAGIC, 0, 0}

/* Create a context over comm. The communicator is borrowed: tessera duplicates
 * it (MPI_Comm_dup), sets MPI_ERRORS_RETURN on the duplicate only, and leaves
 * comm itself untouched; the caller may free comm after this call.
 * Needs MPI initialised and not finalised. Collective over comm. */
TSR_API tsr_status tsr_context_create(MPI_Comm comm, tsr_context* ctx);
/* As tsr_context_create, with settings (config may be NULL: defaults). */
TSR_API tsr_status tsr_context_create_ex(MPI_Comm comm, const tsr_context_config* config,
                                         tsr_context* ctx);
/* Free a context and everything it owns; sets *ctx to NULL. Destroying NULL
 * (*ctx == NULL) is a no-op. Grids, rings, reports (also energy reports) and
 * optimizers of the context must be freed first: TSR_ERR_STATE on every rank
 * otherwise, nothing freed. Collective over the context. */
TSR_API tsr_status tsr_context_destroy(tsr_context* ctx);
/* Rank and size in the context's communicator. Local. */
TSR_API tsr_status tsr_context_rank(tsr_context ctx, int* rank);
TSR_API tsr_status tsr_context_size(tsr_context ctx, int* size);
/* Node of this rank (0-based, dense) and how many nodes the context spans. Local. */
TSR_API tsr_status tsr_context_node(tsr_context ctx, int* node, int* nnodes);
/* The context's default objective: what every planner given this context
 * minimises when its problem says TSR_OBJECTIVE_DEFAULT (the initialisers'
 * value): tsr_gemm_plan_create (problem.context), tsr_attn_plan_create,
 * tsr_optimizer_plan, and tsr_pdgemm's own planning on its context
 * (tsr_scalapack_context). TSR_OBJECTIVE_TIME until set. set: collective
 * over ctx, objective must be TIME, ENERGY or EDP and the same on every rank
 * (INVALID_ARG on every rank otherwise, naming 'objective'). get: local. */
TSR_API tsr_status tsr_context_set_objective(tsr_context ctx, tsr_objective objective);
TSR_API tsr_status tsr_context_get_objective(tsr_context ctx, tsr_objective* objective);

/* The last error message of the calling thread on ctx ("" if none). With
 * ctx == NULL: the calling thread's last message from any tessera call (used
 * for calls that have no context, or failed to create one). The pointer stays
 * valid until the thread's next failing tessera call. Local, thread-safe. */
TSR_API const char* tsr_last_error(tsr_context ctx);

/* ------------------------------------------------------------------------- */
/* Process grids                                                              */
/* ------------------------------------------------------------------------- */
typedef struct tsr_grid_s* tsr_grid;

typedef enum tsr_grid_kind {
  TSR_GRID_1D = 1,   /* dims {p, 1, 1}                                        */
  TSR_GRID_2D = 2,   /* dims {pr, pc, 1}, any pr*pc                           */
  TSR_GRID_2P5D = 3, /* dims {q, q, c}: p = q*q*c, 1 <= c <= q (c <= p^(1/3))   */
  TSR_GRID_3D = 4,   /* dims {q, q, q}                                        */
  TSR_GRID_3D_ANY = 5 /* dims {a, b, c}: any shape, for shape-driven 3D grids
                         (a GEMM plan's m x n x k split); dims_create: the most
                         cubic                                                */
} tsr_grid_kind;

/* Sub-communicators of a grid. A grid position is (i, j, k) with
 * 0 <= i < dims[0], 0 <= j < dims[1], 0 <= k < dims[2]. */
typedef enum tsr_grid_axis {
  TSR_AXIS_ROW = 0,   /* same i and k, j varies: size dims[1]               */
  TSR_AXIS_COL = 1,   /* same j and k, i varies: size dims[0]               */
  TSR_AXIS_DEPTH = 2, /* same i and j, k varies (fiber): size dims[2]       */
  TSR_AXIS_LAYER = 3, /* same k, i and j vary: size dims[0]*dims[1]         */
  TSR_AXIS_ALL = 4    /* every member of the grid: size dims[0]*dims[1]*dims[2] */
} tsr_grid_axis;

/* Choose grid dimensions for a scheme and a rank count, like MPI_Dims_create:
 * entries of dims that are > 0 on entry are kept as constraints, 0 entries are
 * chosen (2D: the most square pr <= pc; 2.5D: the largest c allowed; 3D: q;
 * 3D_ANY: the most cubic a <= b <= c).
 * If nranks does not fit the scheme and allow_idle is 0, returns TSR_ERR_SHAPE
 * with a message listing the nearest rank counts that fit; if allow_idle is
 * non-zero, chooses the largest grid that fits in nranks and sets *nused:
 * ranks nused..nranks-1 would stay idle. nused may be NULL when allow_idle is 0.
 * Local (no context needed; read the message with tsr_last_error(NULL)). */
TSR_API tsr_status tsr_grid_dims_create(tsr_grid_kind kind, int nranks, int allow_idle,
                                        int dims[3], int* nused);

/* Create a grid of the given kind and dims over the context. dims must be
 * valid for kind (TSR_ERR_SHAPE otherwise, naming the nearest valid shapes)
 * and dims[0]*dims[1]*dims[2] <= context size; context ranks beyond the grid
 * are idle members (tsr_grid_is_member gives 0, their sub-communicators are
 * MPI_COMM_NULL). Ranks are placed node by node so that the row axis (j, the
 * fastest varying) stays inside a shared-memory node where the node sizes
 * allow it. Collective over ctx; dims and kind must agree on all ranks. */
TSR_API tsr_status tsr_grid_create(tsr_context ctx, tsr_grid_kind kind, const int dims[3],
                                   tsr_grid* grid);
/* Free a grid; sets *grid to NULL (NULL is a no-op). Its matrix descriptors
 * must be freed first (TSR_ERR_STATE on every rank otherwise). Collective over
 * the context. */
TSR_API tsr_status tsr_grid_destroy(tsr_grid* grid);

TSR_API tsr_status tsr_grid_get_kind(tsr_grid grid, tsr_grid_kind* kind);   /* local */
TSR_API tsr_status tsr_grid_get_dims(tsr_grid grid, int dims[3]);           /* local */
/* 1 if the calling rank has a grid position, 0 if it is idle. Local. */
TSR_API tsr_status tsr_grid_is_member(tsr_grid grid, int* member);
/* The calling rank's grid rank (-1 if idle) and coordinates. Local. */
TSR_API tsr_status tsr_grid_my_rank(tsr_grid grid, int* grid_rank);
TSR_API tsr_status tsr_grid_my_coords(tsr_grid grid, int coords[3]);
/* Grid rank <-> coordinates: grid_rank = (k*dims[0] + i)*dims[1] + j. Local. */
TSR_API tsr_status tsr_grid_coords(tsr_grid grid, int grid_rank, int coords[3]);
TSR_API tsr_status tsr_grid_rank(tsr_grid grid, const int coords[3], int* grid_rank);
/* Grid rank <-> rank in the context's communicator (placement may reorder). Local. */
TSR_API tsr_status tsr_grid_context_rank(tsr_grid grid, int grid_rank, int* context_rank);
TSR_API tsr_status tsr_grid_rank_of_context_rank(tsr_grid grid, int context_rank,
                                                 int* grid_rank);
/* The MPI communicator of an axis, owned by the grid (do not free it), with
 * ranks ordered by the varying coordinate(s). MPI_COMM_NULL on idle ranks.
 * Traffic the caller sends on it is not accounted. Local. */
TSR_API tsr_status tsr_grid_comm(tsr_grid grid, tsr_grid_axis axis, MPI_Comm* comm);
/* Placement quality: how many runs of the fastest-varying axis of extent > 1
 * (the rows for 2D, 2.5D and 3D; the whole column of a 1D grid) lie inside one
 * node, out of how many runs. Local. */
TSR_API tsr_status tsr_grid_rows_within_node(tsr_grid grid, int* within, int* total);

/* ------------------------------------------------------------------------- */
/* Accounted collectives on a grid axis                                       */
/* ------------------------------------------------------------------------- */
/* Thin calls that move the caller's data through tessera's transport on one
 * axis communicator of a grid, so that it is counted like the library's own
 * traffic. Collective over the axis communicator (every member of that axis
 * of the grid; idle ranks must not call). Arguments are checked on every rank
 * and agreed on before any data moves (one 24-byte control all-reduce on the
 * axis, which also checks that count, type, op and root agree), so a bad
 * argument fails on all of the axis's ranks. counts are
 * elements of type; where noted, sbuf == rbuf means in place.
 * A count of TSR_COUNT_INVALID fails the call with TSR_ERR_SHAPE on every
 * rank of the axis before any data moves: for wrappers (the C++ spans, other
 * language bindings) that find a size error on one rank only. */
#define TSR_COUNT_INVALID (SIZE_MAX >> 1)
TSR_API tsr_status tsr_bcast(tsr_grid grid, tsr_grid_axis axis, void* buf, size_t count,
                             tsr_dtype type, int root);
/* sbuf == rbuf: in place. */
TSR_API tsr_status tsr_allreduce(tsr_grid grid, tsr_grid_axis axis, const void* sbuf, void* rbuf,
                                 size_t count, tsr_dtype type, tsr_op op);
/* Each member contributes count elements; rbuf holds axis_size*count. */
TSR_API tsr_status tsr_allgather(tsr_grid grid, tsr_grid_axis axis, const void* sbuf, size_t count,
                                 void* rbuf, tsr_dtype type);
/* sbuf holds axis_size*count; member r gets the reduction of block r. */
TSR_API tsr_status tsr_reduce_scatter(tsr_grid grid, tsr_grid_axis axis, const void* sbuf,
                                      void* rbuf, size_t count, tsr_dtype type, tsr_op op);
/* count elements to and from every member (buffers hold axis_size*count). */
TSR_API tsr_status tsr_alltoall(tsr_grid grid, tsr_grid_axis axis, const void* sbuf, void* rbuf,
                                size_t count, tsr_dtype type);
/* Cyclic shift along the axis: send count elements to the member `shift`
 * positions ahead (modulo the axis size) and receive as many from the member
 * `shift` positions behind. shift may be negative. */
TSR_API tsr_status tsr_shift(tsr_grid grid, tsr_grid_axis axis, const void* sbuf, void* rbuf,
                             size_t count, tsr_dtype type, int shift);
/* Size of an axis communicator and the calling rank's position in it (-1 and
 * 0 on idle ranks). Local. */
TSR_API tsr_status tsr_grid_axis_info(tsr_grid grid, tsr_grid_axis axis, int* rank, int* size);

/* ------------------------------------------------------------------------- */
/* Accounting                                                                 */
/* ------------------------------------------------------------------------- */
typedef enum tsr_peer_class {
  TSR_PEER_SELF = 0,   /* the calling rank itself                           */
  TSR_PEER_NODE = 1,   /* another rank on the same node                     */
  TSR_PEER_REMOTE = 2, /* a rank on another node                            */
  TSR_PEER_CLASSES = 3
} tsr_peer_class;

typedef struct tsr_traffic {
  uint64_t messages;
  uint64_t bytes;
} tsr_traffic;

/* Collective kinds, for tsr_counters.coll_calls (numbers are ABI). */
typedef enum tsr_coll_kind {
  TSR_COLL_BARRIER = 0,
  TSR_COLL_BCAST = 1,
  TSR_COLL_REDUCE = 2,
  TSR_COLL_ALLREDUCE = 3,
  TSR_COLL_ALLGATHER = 4,
  TSR_COLL_REDUCE_SCATTER = 5,
  TSR_COLL_ALLTOALL = 6,
  TSR_COLL_GATHER = 7,
  TSR_COLL_SCATTER = 8,
  TSR_COLL_KINDS = 16 /* slots reserved; unused ones stay 0 */
} tsr_coll_kind;

/* Counters of one rank in one region (see docs/ACCOUNTING.md for the model).
 * All counts are cumulative since the context was created (or reset). */
typedef struct tsr_counters {
  /* Exact: point-to-point payload handed to the transport, by peer class. */
  tsr_traffic p2p_sent[TSR_PEER_CLASSES];
  tsr_traffic p2p_recv[TSR_PEER_CLASSES];
  /* Collectives: calls by kind, and the exact payload this rank contributed
   * (send side) and obtained (receive side), as defined per collective. */
  uint64_t coll_calls[TSR_COLL_KINDS];
  uint64_t coll_payload_sent;
  uint64_t coll_payload_recv;
  /* Modelled: the messages and bytes the assumed collective algorithm puts on
   * the wire from and to this rank, by peer class. */
  tsr_traffic coll_wire_sent[TSR_PEER_CLASSES];
  tsr_traffic coll_wire_recv[TSR_PEER_CLASSES];
  /* Memory levels, filled by device backends and the I/O layer. */
  uint64_t host_to_device_bytes;
  uint64_t device_to_host_bytes;
  uint64_t device_to_device_bytes;
  uint64_t disk_read_bytes;
  uint64_t disk_write_bytes;
  /* Library-internal agreement traffic (argument checks, reports). */
  tsr_traffic control;
} tsr_counters;

/* Begin and end a named region on the calling rank. Regions nest; traffic is
 * charged to every open region (inclusive counts) and to the root region
 * "total". A region is identified by its path ("outer/inner"); entering the
 * same path again accumulates. name: 1..63 characters, no '/'. end's name
 * must match the innermost open region (TSR_ERR_STATE otherwise). Local. */
TSR_API tsr_status tsr_region_begin(tsr_context ctx, const char* name);
TSR_API tsr_status tsr_region_end(tsr_context ctx, const char* name);
/* This rank's counters for a region path ("total" for everything). Local. */
TSR_API tsr_status tsr_counters_get(tsr_context ctx, const char* path, tsr_counters* out);
/* Zero all counters and forget closed regions (open regions must be ended
 * first: TSR_ERR_STATE otherwise). Local. */
TSR_API tsr_status tsr_counters_reset(tsr_context ctx);

/* A report: a snapshot of every rank's counters, taken collectively. */
typedef struct tsr_report_s* tsr_report;

/* Take a snapshot of all regions on all ranks. Every rank gets min/max/sum
 * over ranks for every region present on any rank; rank `root` also gets every
 * rank's own counters. Collective over ctx; root must agree. */
TSR_API tsr_status tsr_report_create(tsr_context ctx, int root, tsr_report* report);
/* Free a report; sets *report to NULL (NULL is a no-op). Local. */
TSR_API tsr_status tsr_report_destroy(tsr_report* report);
/* Number of regions (the union over ranks), and the path of region i, sorted
 * by path; region 0 is "total". The string lives as long as the report. Local. */
TSR_API tsr_status tsr_report_region_count(tsr_report report, int* count);
TSR_API tsr_status tsr_report_region_path(tsr_report report, int region, const char** path);
/* Counters of one rank for a region; on the root any rank, elsewhere only the
 * calling rank (TSR_ERR_INVALID_ARG otherwise). Ranks that never entered the
 * region have zeros. Local. */
TSR_API tsr_status tsr_report_rank_counters(tsr_report report, int region, int rank,
                                            tsr_counters* out);
/* Element-wise min, max and sum over ranks for a region; any pointer may be NULL. Local. */
TSR_API tsr_status tsr_report_stats(tsr_report report, int region, tsr_counters* min,
                                    tsr_counters* max, tsr_counters* sum);
/* Format the report as a readable table into buf (like snprintf: at most len
 * bytes including the terminating 0; *needed gets the full length without the
 * 0, so a call with len = 0 asks for the size). The table has one block per
 * region with min/max/sum over ranks; buf may be NULL when len is 0. Local. */
TSR_API tsr_status tsr_report_format(tsr_report report, char* buf, size_t len, size_t* needed);

#ifdef __cplusplus
}
#endif

#include "tessera/optimizer.h" /* LAMB and LARS optimizers (docs/OPTIMIZERS.md) */
#include "tessera/attention.h" /* ring exchange and ring attention */
#include "tessera/gemm.h" /* distributed matrix multiplication */
#include "tessera/energy.h" /* energy accounting: profiles, meters, energy reports */
#include "tessera/io.h" /* checkpoints: distributed arrays in HDF5 or binary files */
#include "tessera/device.h" /* CUDA devices and streams, device buffers (docs/GPU.md) */

#endif /* TESSERA_H */
