/*
 * tessera: ring exchange and ring attention for sequence parallelism (C99).
 *
 * Included by tessera.h; may also be included on its own. The conventions of
 * tessera.h hold for every call here (tsr_status returns, tsr_last_error,
 * collective calls agree on errors before they communicate). The layouts,
 * the exact bytes and messages of every call and the numerics are in
 * docs/ATTENTION.md.
 *
 * A ring is a communicator seen as a ring: ring rank r sends to r+1 and
 * receives from r-1 (mod p). Every byte moves through tessera's accounted
 * transport, on a duplicate of the communicator owned by the ring.
 */
#ifndef TESSERA_ATTENTION_H
#define TESSERA_ATTENTION_H

#include "tessera/tessera.h"
#include "tessera/gemm.h" /* tsr_gemm_machine, for the attention planner */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------- */
/* Rings                                                                      */
/* ------------------------------------------------------------------------- */
typedef struct tsr_ring_s* tsr_ring;

/* A ring over one axis of a grid, in the axis order (ring rank = position on
 * the axis). Duplicates the axis communicator. Collective over the axis
 * (every member of that axis; idle ranks must not call: TSR_ERR_STATE).
 * Errors: INVALID_ARG (grid, axis, NULL ring), STATE (idle rank), MPI. */
TSR_API tsr_status tsr_ring_create(tsr_grid grid, tsr_grid_axis axis, tsr_ring* ring);
/* A ring over a communicator of the caller (ring rank = rank in comm), whose
 * ranks must all belong to ctx's communicator; tessera duplicates comm and
 * charges its traffic to ctx's ledger. Collective over comm.
 * Errors: INVALID_ARG (ctx, MPI_COMM_NULL, a rank of comm not in ctx, NULL
 * ring), UNSUPPORTED (intercommunicator), MPI. */
TSR_API tsr_status tsr_ring_create_comm(tsr_context ctx, MPI_Comm comm, tsr_ring* ring);
/* Free a ring; sets *ring to NULL (NULL is a no-op). A context cannot be
 * destroyed while it has live rings. Collective over the ring.
 * Errors: INVALID_ARG (NULL or not a live ring). */
TSR_API tsr_status tsr_ring_destroy(tsr_ring* ring);
/* The calling rank's ring rank and the ring size p. Local.
 * Errors: INVALID_ARG (ring, NULL outputs). */
TSR_API tsr_status tsr_ring_info(tsr_ring ring, int* rank, int* size);
/* The largest number of workspace bytes that calls on this ring have held at
 * once since the ring was created or this was last called with reset != 0
 * (reset: start a new high-water mark after reading). Exact: every buffer
 * tessera allocates for a ring exchange or an attention call is counted;
 * user buffers are not. Local. Errors: INVALID_ARG (ring, NULL bytes). */
TSR_API tsr_status tsr_ring_workspace_peak(tsr_ring ring, size_t* bytes, int reset);
/* Between calls a ring keeps its workspace (one block, as large as the
 * largest call so far needed, rounded up to 64 bytes per buffer), so that
 * repeated calls neither allocate nor touch fresh pages. held: its size now.
 * release: free it (the next call allocates again). Local.
 * Errors: INVALID_ARG (ring, NULL bytes), STATE (release inside a step). */
TSR_API tsr_status tsr_ring_workspace_held(tsr_ring ring, size_t* bytes);
TSR_API tsr_status tsr_ring_workspace_release(tsr_ring ring);

/* ------------------------------------------------------------------------- */
/* Ring exchange: the generic primitive                                       */
/* ------------------------------------------------------------------------- */
typedef enum tsr_ring_mode {
  /* The block visits every rank of the ring, read-only: p-1 hops, double
   * buffered (the transfer for step s+1 runs during the callback of step s). */
  TSR_RING_CIRCULATE = 0,
  /* A travelling sum: at every step the callback writes its contribution to
   * the block of the step's source rank; the sum of all ranks' contributions
   * arrives at the block's owner in `data` (p-1 hops, overlapped with the
   * next step). Element type TSR_FLOAT32 or TSR_FLOAT64. */
  TSR_RING_ACCUMULATE = 1
} tsr_ring_mode;

typedef struct tsr_ring_buffer {
  void* data;         /* this rank's block: CIRCULATE: read (never written);
                         ACCUMULATE: written with the sum on return */
  size_t count;       /* elements on this rank; may differ across ranks */
  tsr_dtype type;     /* the same on every rank */
  tsr_ring_mode mode; /* the same on every rank */
} tsr_ring_buffer;

/* What the step callback sees. At step s (0 <= s < size) the blocks are those
 * of ring rank source = (rank - s) mod size; step 0 is the rank's own. */
typedef struct tsr_ring_step {
  int step;
  int source;
  int rank;
  int size;
  int nbuffers;
  /* blocks[i]: CIRCULATE: source's block of buffer i (read-only; valid during
   * the callback only); ACCUMULATE: a zeroed buffer of counts[i] elements for
   * this rank's contribution to source's block. */
  void* const* blocks;
  const size_t* counts; /* elements of blocks[i] (source's count) */
} tsr_ring_step;

/* Returns TSR_SUCCESS, or a status to stop: the exchange then calls no more
 * callbacks on this rank, keeps moving the blocks so that no rank waits
 * forever, and fails on every rank with that status. */
typedef tsr_status (*tsr_ring_step_fn)(const tsr_ring_step* step, void* user);

/* Circulate and accumulate `nbuffers` buffers around the ring in p steps
 * (p-1 hops each), calling fn once per step. Collective over the ring:
 * nbuffers, every buffer's type and mode must agree (counts may differ).
 * Traffic: per step s < p-1, one message per CIRCULATE buffer to rank+1 of
 * source's count; per step s >= 1 one message per ACCUMULATE buffer; plus
 * control: agreement before (two 24-byte all-reduces and an all-gather of
 * the counts) and after (one 24-byte all-reduce: the callbacks' verdict).
 * Errors: INVALID_ARG (ring, buffers, fn, types, modes, arguments differing
 * across ranks), UNSUPPORTED (count beyond PTRDIFF_MAX bytes; larger counts
 * than INT_MAX are moved in chunks, see tsr_context_config.max_chunk),
 * NO_MEMORY, MPI, or the
 * status a callback returned.
 * Device buffers (docs/GPU.md, "Ring attention"): with a context bound to a
 * device (before the ring was created), the non-empty buffers may all be
 * device memory of that device (on every rank; host and device buffers in
 * one exchange: INVALID_ARG; a context bound to no device: STATE); the
 * blocks a callback sees are then device memory, valid in the order of the
 * context's stream: the callback queues its work on that stream (the next
 * blocks travel meanwhile) and need not synchronise. */
TSR_API tsr_status tsr_ring_exchange(tsr_ring ring, const tsr_ring_buffer* buffers, int nbuffers,
                                     tsr_ring_step_fn fn, void* user);
/* Lets the transfers of a running exchange advance (MPI implementations
 * often progress nonblocking transfers only inside MPI calls). Call it from
 * inside a long step callback now and then; a no-op outside an exchange.
 * Local. Errors: INVALID_ARG (ring). */
TSR_API tsr_status tsr_ring_progress(tsr_ring ring);

/* ------------------------------------------------------------------------- */
/* Sequence layouts                                                           */
/* ------------------------------------------------------------------------- */
/* How a sequence of N tokens is split over p ranks. Uneven N is allowed for
 * all three (ranks may even hold no token).
 *  CONTIGUOUS: rank r holds the r-th of p balanced chunks (sizes differ by at
 *              most one; the first N mod p chunks are one longer).
 *  ZIGZAG:     2p balanced chunks; rank r holds chunks r and 2p-1-r, in that
 *              order (p = 4: 0,7 | 1,6 | 2,5 | 3,4). Balances causal work.
 *  STRIPED:    token t goes to rank t mod p; local token i of rank r is
 *              global token i*p + r. Balances causal work. */
typedef enum tsr_attn_layout {
  TSR_ATTN_LAYOUT_CONTIGUOUS = 0,
  TSR_ATTN_LAYOUT_ZIGZAG = 1,
  TSR_ATTN_LAYOUT_STRIPED = 2
} tsr_attn_layout;

/* Number of tokens of rank `rank` (0 <= rank < nranks). Local.
 * Errors (all layout helpers): INVALID_ARG (layout, nranks < 1, rank out of
 * range, NULL buffers, seq_len too large; permute: in and out overlap). */
TSR_API tsr_status tsr_attn_shard_len(tsr_attn_layout layout, size_t seq_len, int nranks, int rank,
                                      size_t* local_len);
/* Global positions (position ids, 0-based) of the rank's tokens, in local
 * order: positions[i] for i < local_len. Use them for rotary embeddings. Local. */
TSR_API tsr_status tsr_attn_positions(tsr_attn_layout layout, size_t seq_len, int nranks, int rank,
                                      int64_t* positions);
/* Copy the rank's shard out of a full tensor of shape (outer, seq_len, row)
 * (row: row_bytes bytes per token) into a local tensor (outer, local_len,
 * row). insert does the reverse (writes only the rank's tokens). Local. */
TSR_API tsr_status tsr_attn_shard_extract(tsr_attn_layout layout, size_t seq_len, int nranks, int rank,
                                          const void* full, void* local, size_t outer, size_t row_bytes);
TSR_API tsr_status tsr_attn_shard_insert(tsr_attn_layout layout, size_t seq_len, int nranks, int rank,
                                         const void* local, void* full, size_t outer, size_t row_bytes);
/* Permute a full tensor (outer, seq_len, row) from natural token order into
 * layout order (rank 0's shard, then rank 1's, ...), or back with inverse
 * != 0. in and out must not overlap. Local. */
TSR_API tsr_status tsr_attn_permute(tsr_attn_layout layout, size_t seq_len, int nranks, int inverse,
                                    const void* in, void* out, size_t outer, size_t row_bytes);

/* ------------------------------------------------------------------------- */
/* Attention                                                                  */
/* ------------------------------------------------------------------------- */
typedef enum tsr_attn_variant {
  /* Ring attention: K and V circulate; online softmax merged in the working
   * precision; causal blocks and tiles that are fully masked are skipped.
   * Backward: K, V circulate again while dK, dV travel with their blocks. */
  TSR_ATTN_RING = 0,
  /* Ring self-attention (Li et al., 2021), the baseline: a ring pass of K
   * fills full score rows (batch*heads*local_len*seq_len per rank), plain
   * softmax, then a ring pass of V. Backward: K, V, K passes and a
   * reduce-scatter of full-length dK and dV. */
  TSR_ATTN_RING_TWO_PASS = 1,
  /* All-to-all (DeepSpeed-Ulysses): heads scattered over the ranks, local
   * attention over the whole sequence, all-to-all back. Needs p to divide
   * both heads and kv_heads (TSR_ERR_SHAPE otherwise). */
  TSR_ATTN_ALLTOALL = 2
} tsr_attn_variant;

/* A dense row-major tensor of shape (batch, heads, seq, dim): element
 * (b, h, t, e) at data[((b*heads + h)*seq + t)*dim + e]. */
typedef struct tsr_attn_tensor {
  void* data;
  size_t batch, heads, seq, dim;
} tsr_attn_tensor;

typedef struct tsr_attn_config {
  size_t size;              /* sizeof(tsr_attn_config), set by the initialiser */
  unsigned int magic;       /* TSR_ATTN_CONFIG_MAGIC, set by the initialiser */
  tsr_attn_variant variant; /* default TSR_ATTN_RING */
  tsr_attn_layout layout;   /* default TSR_ATTN_LAYOUT_CONTIGUOUS */
  int causal;               /* non-zero: key position <= query position */
  size_t seq_len;           /* N, the global sequence length */
  double scale;             /* softmax scale; 0: 1/sqrt(dim) */
  tsr_dtype type;           /* TSR_FLOAT32 (default) or TSR_FLOAT64 */
} tsr_attn_config;

#define TSR_ATTN_CONFIG_MAGIC 0x5a77e9c1u
#define TSR_ATTN_CONFIG_INIT                                                                    \
  {sizeof(tsr_attn_config), TSR_ATTN_CONFIG_MAGIC, TSR_ATTN_RING, TSR_ATTN_LAYOUT_CONTIGUOUS, 0, \
   0, 0.0, TSR_FLOAT32}

/* out = softmax(scale * q k^T + mask) v for this rank's queries against all
 * keys of the sequence, and lse = the natural log of the softmax denominator
 * (log sum_j exp(scale * q.k_j) over visible keys), which the backward needs.
 *
 * Shapes on rank r, with n = tsr_attn_shard_len(layout, seq_len, p, r):
 *   q, out    (batch, heads, n, dim)      heads = H
 *   k, v      (batch, kv_heads, n, dim)   kv_heads = G divides H; query head
 *                                         h uses kv head h / (H/G)
 *   lse       (batch, heads, n, 1)
 *   key_mask  (batch, 1, n, 1) bytes (uint8), non-zero = attend, 0 = padding;
 *             NULL: every key is valid.
 * Elements are cfg->type (key_mask: bytes). A query with no visible key
 * (all masked) gets out = 0 and lse = -INFINITY, never NaN.
 * Collective over the ring; cfg, batch, heads, kv_heads, dim and whether a
 * key mask is given must agree on every rank.
 * Errors: INVALID_ARG (NULL, config, enums, arguments differ across ranks),
 * SHAPE (shapes that do not fit each other or the layout's shard of this
 * rank, heads not a multiple of kv_heads, ALLTOALL with p not dividing
 * heads and kv_heads), UNSUPPORTED (TSR_BFLOAT16; a message over INT_MAX
 * elements), NO_MEMORY, MPI. */
TSR_API tsr_status tsr_attn_forward(tsr_ring ring, const tsr_attn_config* cfg, const tsr_attn_tensor* q,
                                    const tsr_attn_tensor* k, const tsr_attn_tensor* v,
                                    const tsr_attn_tensor* key_mask, const tsr_attn_tensor* out,
                                    const tsr_attn_tensor* lse);

/* Gradients of the forward: given dout (the gradient of out, shaped like
 * out) and the forward's out and lse, writes dq (like q), dk and dv (like k
 * and v). Uses the global out and lse (D = rowsum(dout * out) and
 * P = exp(scale * q k^T - lse)). Collective over the ring, same arguments as
 * the forward. Errors as for the forward. */
TSR_API tsr_status tsr_attn_backward(tsr_ring ring, const tsr_attn_config* cfg, const tsr_attn_tensor* q,
                                     const tsr_attn_tensor* k, const tsr_attn_tensor* v,
                                     const tsr_attn_tensor* key_mask, const tsr_attn_tensor* out,
                                     const tsr_attn_tensor* lse, const tsr_attn_tensor* dout,
                                     const tsr_attn_tensor* dq, const tsr_attn_tensor* dk,
                                     const tsr_attn_tensor* dv);

/* Workspace bytes a forward (backward = 0) or backward (backward != 0) call
 * allocates on ring rank `rank` of `nranks` for these shapes: exactly what
 * tsr_ring_workspace_peak reports for that call (see docs/ATTENTION.md for
 * the formula of every variant). Local. Errors: as tsr_attn_forward's local
 * checks (INVALID_ARG, SHAPE, UNSUPPORTED), INVALID_ARG (nranks, rank). */
TSR_API tsr_status tsr_attn_workspace(const tsr_attn_config* cfg, int nranks, int rank, size_t batch,
                                      size_t heads, size_t kv_heads, size_t dim, int has_key_mask,
                                      int backward, size_t* bytes);

/* Merge two partial attention results over disjoint key sets, row by row:
 * (o_a, lse_a) <- merge((o_a, lse_a), (o_b, lse_b)) with
 *   lse = max + log1p(exp(-|lse_a - lse_b|)),
 *   o   = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b,
 * o_*: rows x dim, lse_*: rows, of type (TSR_FLOAT32 or TSR_FLOAT64). A row
 * with lse = -INFINITY (no visible key) is the identity; two such rows give
 * (0, -INFINITY); lse = +INFINITY (FlashAttention's empty row) is read as
 * -INFINITY. Local. Errors: INVALID_ARG (type, NULL with rows > 0),
 * UNSUPPORTED (TSR_BFLOAT16). */
TSR_API tsr_status tsr_attn_merge(tsr_dtype type, size_t rows, size_t dim, void* o_a, void* lse_a,
                                  const void* o_b, const void* lse_b);

/* ------------------------------------------------------------------------- */
/* Planning: variant and layout by time, energy or energy x time              */
/* ------------------------------------------------------------------------- */
/* What to plan for (docs/ATTENTION.md, "Planning"). Initialise with
 * TSR_ATTN_PROBLEM_INIT, then set the sizes. */
typedef struct tsr_attn_problem {
  size_t size;                 /* sizeof(tsr_attn_problem) */
  unsigned int magic;          /* TSR_ATTN_PROBLEM_MAGIC */
  size_t seq_len, batch, heads, kv_heads, dim; /* N, B, H, G, d (G divides H) */
  int causal;                  /* non-zero: causal attention */
  int has_key_mask;            /* non-zero: a key mask travels with K */
  int backward;                /* 0: one forward call; 1 (default): forward and backward */
  tsr_dtype type;              /* TSR_FLOAT32 (default) or TSR_FLOAT64 */
  int nranks;                  /* ring size p */
  int ranks_per_node;          /* ring ranks per node, filled in ring order; 0: one node */
  int variant;                 /* -1 (default): every variant; else only this tsr_attn_variant */
  int layout;                  /* -1 (default): every layout; else only this tsr_attn_layout */
  double memory_per_rank;      /* workspace bytes one rank may use; 0: no limit */
  tsr_gemm_machine machine;    /* alpha, beta, gamma; zeros: tsr_gemm_machine's defaults */
  tsr_objective objective;     /* DEFAULT: the context's default objective, time without one */
  struct tsr_energy_profile_s* profile; /* machine profile (energy.h); NULL: default-2025 */
  tsr_context context;         /* NULL, or the context whose default objective applies */
} tsr_attn_problem;

#define TSR_ATTN_PROBLEM_MAGIC 0x5a77e9c2u
#define TSR_ATTN_PROBLEM_INIT                                                                      \
  {sizeof(tsr_attn_problem), TSR_ATTN_PROBLEM_MAGIC, 0, 1, 1, 1, 1, 0, 0, 1, TSR_FLOAT32, 1, 0, -1, -1, \
   0.0, {0, 0, 0}, TSR_OBJECTIVE_DEFAULT, NULL, NULL}

/* One (variant, layout) the planner considered, with its modelled figures
 * (docs/ATTENTION.md, "Planning"). */
typedef struct tsr_attn_candidate {
  tsr_attn_variant variant;
  tsr_attn_layout layout;
  double time;                 /* modelled seconds (busiest rank) */
  double joules, joules_low, joules_high; /* modelled joules, all ranks, with the profile's range */
  double flops;                /* all ranks */
  double bytes;                /* bytes the busiest rank receives (control excluded) */
  double intra_node_bytes, inter_node_bytes; /* bytes received within / across nodes, all ranks */
  double self_bytes;           /* memory traffic of the two-pass score rows, all ranks */
  double memory_bytes;         /* workspace of the busiest rank (tsr_attn_workspace) */
  int fits;                    /* within problem.memory_per_rank */
  int chosen;                  /* 1 for the candidate tsr_attn_plan_create returns */
} tsr_attn_candidate;

typedef struct tsr_attn_plan {
  tsr_attn_config config;      /* variant, layout, causal, seq_len, type: for tsr_attn_forward */
  tsr_objective objective;     /* what the plan minimised (DEFAULT resolved) */
  tsr_attn_candidate choice;   /* its figures */
  double missing_bytes;        /* > 0: nothing fits; the plan needing least memory, this much over */
} tsr_attn_plan;

/* Choose the variant and layout of least modelled time, energy or energy x
 * time (problem.objective) among those that fit the memory budget; ties:
 * the objective, then time, then fewer bytes, then the first considered
 * (variants in enum order, layouts in enum order), the same on every rank.
 * ALLTOALL is considered only where p divides heads and kv_heads. If nothing
 * fits, returns TSR_ERR_NO_MEMORY with the plan of least memory. Local.
 * Errors: INVALID_ARG (NULL, not initialised, sizes, type, nranks < 1,
 * ranks_per_node < 0, variant, layout, objective, profile, context, machine),
 * SHAPE (heads not a multiple of kv_heads; the variant asked for cannot run,
 * e.g. ALLTOALL with p not dividing the heads), NO_MEMORY. */
TSR_API tsr_status tsr_attn_plan_create(const tsr_attn_problem* problem, tsr_attn_plan* plan);
/* Every candidate tsr_attn_plan_create considers, in the order considered;
 * at most cap written to out (NULL when cap is 0), *count gets how many.
 * Local. Errors: as tsr_attn_plan_create (NO_MEMORY is not one: fits tells). */
TSR_API tsr_status tsr_attn_plan_candidates(const tsr_attn_problem* problem, tsr_attn_candidate* out,
                                            size_t cap, size_t* count);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_ATTENTION_H */
