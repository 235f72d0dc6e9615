/*
 * tessera optimizers: LAMB (You et al. 2019, Algorithm 2) and LARS (You et
 * al. 2017), fused, with optimizer-owned state, data-parallel and sharded
 * (ZeRO-1/2 style) variants, and state files. Public C API (C99); the rules,
 * the presets and their sources, the bytes a step moves and the exact
 * messages of a distributed step are in docs/OPTIMIZERS.md.
 *
 * The model:
 *  - The parameters are one flat array of n elements (float32, or bfloat16
 *    with float32 master weights kept by the optimizer), cut into groups:
 *    group g is elements [offset_g, offset_g + size_g), the groups in order,
 *    back to back. A group is one tensor or one layer: the unit of the trust
 *    ratio, and the unit of flags and hyperparameters (e.g. no weight decay
 *    and no layer adaptation for biases and norm parameters).
 *  - The gradients are a flat array of the same layout and element type.
 *  - Every rank of the context holds the full parameter array. The
 *    distribution mode says where the state lives and how gradients combine:
 *      TSR_OPT_REPLICATED    every rank holds all state; the gradients are
 *                            used as given (already combined, or one rank)
 *      TSR_OPT_DATA_PARALLEL every rank holds all state; the gradients are
 *                            averaged over the ranks with bucketed,
 *                            nonblocking all-reduces
 *      TSR_OPT_SHARDED       each rank holds the state of one contiguous
 *                            slice of the flat array (slices ignore group
 *                            boundaries); the gradients are averaged with one
 *                            reduce-scatter, each rank updates its slice, the
 *                            parameters are all-gathered. The per-group norms
 *                            are assembled from partial sums with one fused
 *                            all-reduce for all groups (two on LAMB steps
 *                            where gradient clipping needs a third pass).
 *    The three give the same result (sharded equals unsharded to float
 *    rounding of the norms).
 *  - Hyperparameters are set by key (tsr_opt_param) for all groups or for
 *    one group, and checked against documented bounds
 *    (tsr_optimizer_param_bounds). A preset sets all of them at creation.
 *  - A step whose gradients (or norms) are not finite is skipped on every
 *    rank: weights, state and the step count are left as they were, the call
 *    returns TSR_ERR_NUMERIC and the skipped-step counter goes up.
 *
 * Collective calls: tsr_optimizer_create, _step, _save, _load (every rank of
 * the context, same order, consistent arguments; a bad argument on one rank
 * fails the call on every rank). Everything else is local. An optimizer is
 * used by one thread at a time and must be destroyed before its context.
 */
#ifndef TESSERA_OPTIMIZER_H
#define TESSERA_OPTIMIZER_H

#include "tessera/tessera.h"
#include "tessera/gemm.h" /* tsr_gemm_machine, for the optimizer planner */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsr_optimizer_s* tsr_optimizer;

typedef enum tsr_opt_kind { TSR_OPT_LAMB = 1, TSR_OPT_LARS = 2 } tsr_opt_kind;

/* Presets: the defaults of the paper or of a common implementation
 * (docs/OPTIMIZERS.md lists every value and its source). */
typedef enum tsr_opt_preset {
  TSR_PRESET_LAMB_PAPER = 1,           /* You et al. 2019, Algorithm 2                     */
  TSR_PRESET_LAMB_APEX = 2,            /* NVIDIA apex FusedLAMB (use_nvlamb=False)         */
  TSR_PRESET_LAMB_NVLAMB = 3,          /* apex FusedLAMB with use_nvlamb=True              */
  TSR_PRESET_LAMB_DEEPSPEED = 4,       /* DeepSpeed FusedLamb                              */
  TSR_PRESET_LAMB_TORCH_OPTIMIZER = 5, /* torch-optimizer Lamb                             */
  TSR_PRESET_LAMB_TFA = 6,             /* TensorFlow Addons LAMB                           */
  TSR_PRESET_LAMB_OPTAX = 7,           /* optax.lamb                                       */
  TSR_PRESET_LARS_PAPER = 101,         /* You et al. 2017, Algorithm 1                     */
  TSR_PRESET_LARS_MLPERF = 102,        /* MLPerf ResNet-50 (TF2 / tf.contrib LARS)         */
  TSR_PRESET_LARS_SIMCLR = 103,        /* SimCLR lars_optimizer.py                         */
  TSR_PRESET_LARS_TIMM = 104,          /* timm Lars                                        */
  TSR_PRESET_LARS_OPTAX = 105,         /* optax.lars                                       */
  TSR_PRESET_LARS_SIMCLR_POPULAR = 106 /* SimCLR lars_optimizer.py, classic_momentum=False */
} tsr_opt_preset;

typedef enum tsr_opt_dist {
  TSR_OPT_REPLICATED = 0,
  TSR_OPT_DATA_PARALLEL = 1,
  TSR_OPT_SHARDED = 2
} tsr_opt_dist;

/* Hyperparameters and flags, all doubles (flags and modes: integer values).
 * "group": may differ per group; "global": one value for the optimizer.
 * Bounds in brackets; tsr_optimizer_param_bounds returns them. */
typedef enum tsr_opt_param {
  /* both kinds */
  TSR_OPT_LR = 0,             /* group  [0, inf)   learning rate (before the schedule callback)  */
  TSR_OPT_WEIGHT_DECAY = 1,   /* group  [0, inf)   LAMB lambda, LARS beta                        */
  TSR_OPT_DECAY = 2,          /* group  {0, 1}     apply weight decay to this group              */
  TSR_OPT_ADAPT = 3,          /* group  {0, 1, 2}  layer adaptation (trust ratio): 0 off (ratio 1),
                                                   1 on, 2 on only where weight decay applies
                                                   (DECAY = 1 and WEIGHT_DECAY > 0; apex, timm)  */
  TSR_OPT_EPS = 4,            /* group  [0, inf)   LAMB: epsilon of the Adam denominator;
                                                   LARS: epsilon of the trust-ratio denominator  */
  TSR_OPT_TRUST_COEFF = 5,    /* group  (0, inf)   LAMB: factor on the ratio (1); LARS: eta      */
  TSR_OPT_TRUST_MIN = 6,      /* group  [0, inf)   the ratio is clamped to [TRUST_MIN, TRUST_MAX] */
  TSR_OPT_TRUST_MAX = 7,      /* group  (0, inf]   (a ratio of 1 from a zero norm is not clamped) */
  TSR_OPT_NORM_MIN = 8,       /* group  [0, inf)   LAMB: phi(z) = min(max(z, NORM_MIN), NORM_MAX) */
  TSR_OPT_NORM_MAX = 9,       /* group  (0, inf]   on the weight norm (paper gamma_l, gamma_u)   */
  /* LAMB */
  TSR_OPT_BETA1 = 10,         /* group  [0, 1)                                                  */
  TSR_OPT_BETA2 = 11,         /* group  [0, 1)                                                  */
  TSR_OPT_BIAS_CORRECTION = 12, /* group {0, 1, 2}  0 none; 1 on m and v (paper); 2 raw m, v in
                                                   the update and the ratio, the step times
                                                   sqrt(1-beta2^t)/(1-beta1^t) (DeepSpeed)     */
  TSR_OPT_EPS_MODE = 13,      /* group  {0, 1}     0 sqrt(v) + eps (paper); 1 sqrt(v + eps)      */
  TSR_OPT_DECAY_MODE = 14,    /* group  {0, 1}     0 decoupled, inside the ratio (paper); 1 L2:
                                                   lambda*w added to the gradient before m, v    */
  TSR_OPT_GRAD_AVERAGING = 15, /* group {0, 1}     1 m = b1*m + (1-b1)*g (paper); 0 m = b1*m + g  */
  /* LARS */
  TSR_OPT_MOMENTUM = 16,      /* group  [0, 1)                                                  */
  TSR_OPT_NESTEROV = 17,      /* group  {0, 1}                                                  */
  TSR_OPT_LARS_DENOM = 18,    /* group  {0, 1}     trust-ratio denominator: 0 |g| + beta*|w| + eps
                                                   (paper, MLPerf, apex); 1 |g + beta*w| + eps
                                                   (optax, SimCLR)                               */
  TSR_OPT_MOMENTUM_MODE = 19, /* group  {0, 1, 2}  0 v = m*v + lr*ratio*d, w -= v (paper);
                                                   1 v = m*v + ratio*d, w -= lr*v (torch SGD);
                                                   2 v = m*v + d, upd = v (Nesterov: m*v + d),
                                                     ratio = eta*|w| / (|upd| + eps),
                                                     w -= lr*ratio*upd (SimCLR
                                                     classic_momentum=False; LARS_DENOM unused) */
  /* global */
  TSR_OPT_MAX_GRAD_NORM = 20, /* global [0, inf)   clip the global gradient norm; 0 = off        */
  TSR_OPT_LOSS_SCALE = 21,    /* global (0, inf)   the gradients are divided by it (loss scaling) */
  TSR_OPT_BUCKET_BYTES = 22,  /* global [4096, 2^30] data parallel: bytes per all-reduce bucket  */
  TSR_OPT_THREADS = 23,       /* global [0, 4096]  OpenMP threads of the kernels; 0 = default    */
  /* LAMB (added in 0.x, issue 15) */
  TSR_OPT_EPS_ROOT = 24,      /* group  [0, inf)   epsilon inside the square root, with EPS outside:
                                                   u = m^ / (sqrt(v^ + EPS_ROOT) + EPS) (optax
                                                   scale_by_adam eps_root; 0 = off). With EPS_MODE
                                                   1: sqrt(v^ + EPS_ROOT + EPS)                  */
  TSR_OPT_PARAM_COUNT = 25
} tsr_opt_param;

/* The valid values of a parameter: lower..upper, each end open or closed,
 * integers only where `integer`; `kinds` is a bit set of (1 << tsr_opt_kind)
 * the parameter applies to; `global` 1 for optimizer-wide parameters. */
typedef struct tsr_opt_bounds {
  double lower, upper;
  int lower_open, upper_open;
  int integer;
  unsigned kinds;
  int global;
} tsr_opt_bounds;

/* What tsr_optimizer_query reports. */
typedef enum tsr_opt_query {
  TSR_OPTQ_KIND = 0,          /* tsr_opt_kind                                                  */
  TSR_OPTQ_DIST = 1,          /* tsr_opt_dist                                                  */
  TSR_OPTQ_PARAMS = 2,        /* n, elements of the flat parameter array                        */
  TSR_OPTQ_GROUPS = 3,        /* number of groups                                              */
  TSR_OPTQ_GROUP_OFFSET = 4,  /* (group) first element of the group                             */
  TSR_OPTQ_GROUP_SIZE = 5,    /* (group) elements of the group                                  */
  TSR_OPTQ_SHARD_OFFSET = 6,  /* first element whose state this rank holds (0 unless sharded)    */
  TSR_OPTQ_SHARD_SIZE = 7,    /* elements whose state this rank holds (n unless sharded)         */
  TSR_OPTQ_STEP = 8,          /* steps taken (skipped steps not counted); the next step is t+1  */
  TSR_OPTQ_SKIPPED = 9,       /* steps skipped for non-finite numbers                           */
  TSR_OPTQ_LAST_SKIPPED = 10, /* 1 if the last call of tsr_optimizer_step skipped               */
  TSR_OPTQ_GRAD_NORM = 11,    /* global norm of the averaged, unscaled gradient of the last step
                                 (before clipping; not finite after a skip)                     */
  TSR_OPTQ_CLIP_FACTOR = 12,  /* factor clipping applied to the gradient in the last step (1: none) */
  TSR_OPTQ_TRUST_RATIO = 13,  /* (group) the group's trust ratio in the last step                */
  TSR_OPTQ_LR = 14,           /* (group) the learning rate used in the last step                 */
  TSR_OPTQ_PASSES = 15,       /* passes over memory in the last step (docs/OPTIMIZERS.md)        */
  TSR_OPTQ_NORM_ALLREDUCES = 16, /* norm all-reduces in the last step (sharded: 1, or 2)         */
  TSR_OPTQ_STEP_BYTES = 17,   /* bytes the last step's kernels read and wrote on this rank        */
  TSR_OPTQ_STATE_BYTES = 18,  /* bytes of optimizer-owned memory on this rank                     */
  TSR_OPTQ_PARAM_TYPE = 19    /* tsr_dtype of the parameters and gradients                        */
} tsr_opt_query;

/* Optimizer state arrays (float32), for tsr_optimizer_get_state. */
typedef enum tsr_opt_state {
  TSR_OPT_STATE_M = 0,      /* LAMB: first moment m; LARS: momentum buffer v */
  TSR_OPT_STATE_V = 1,      /* LAMB: second moment v                          */
  TSR_OPT_STATE_MASTER = 2  /* bfloat16 parameters: the float32 master weights */
} tsr_opt_state;

/* Learning-rate schedule: returns the learning rate of group `group` for
 * step t (1 for the first step; a skipped step is retried with the same t),
 * given the group's TSR_OPT_LR. Called on every rank for every group at the
 * start of tsr_optimizer_step; it must return the same finite value >= 0 on
 * every rank (checked: TSR_ERR_INVALID_ARG otherwise). */
typedef double (*tsr_opt_schedule)(int64_t t, int group, double lr, void* user);

/* Create an optimizer over ctx for ngroups groups of group_sizes[g] elements
 * (the flat array has n = sum of them; groups of 0 elements are allowed).
 * param_type: TSR_FLOAT32, or TSR_BFLOAT16 (parameters and gradients as
 * bfloat16; the optimizer keeps float32 master weights, initialised from the
 * parameters at the first step). The preset sets every hyperparameter.
 * State starts at zero, the step count at 0.
 * Collective over ctx: preset, dist, param_type and the sizes must agree.
 * Errors: INVALID_ARG (NULL, unknown preset, dist or type, ngroups 0, differ
 * across ranks), UNSUPPORTED (sharded with n > INT_MAX), NO_MEMORY. */
TSR_API tsr_status tsr_optimizer_create(tsr_context ctx, tsr_opt_preset preset, tsr_opt_dist dist,
                                        tsr_dtype param_type, size_t ngroups,
                                        const size_t* group_sizes, tsr_optimizer* opt);
/* Free an optimizer; sets *opt to NULL (NULL is a no-op). Local. */
TSR_API tsr_status tsr_optimizer_destroy(tsr_optimizer* opt);

/* Set a parameter for every group (group parameters) or for the optimizer
 * (global parameters). Local; every rank must set the same values before the
 * next step (checked there). Errors: INVALID_ARG (unknown parameter, value
 * out of bounds or not an integer where one is needed, parameter of the
 * other kind). */
TSR_API tsr_status tsr_optimizer_set_param(tsr_optimizer opt, tsr_opt_param param, double value);
/* Set a group parameter for one group. Local. Errors as above, and
 * INVALID_ARG for a global parameter or a group out of range. */
TSR_API tsr_status tsr_optimizer_set_group_param(tsr_optimizer opt, int group, tsr_opt_param param,
                                                 double value);
/* Read a parameter (group ignored for global parameters). Local. */
TSR_API tsr_status tsr_optimizer_get_param(tsr_optimizer opt, int group, tsr_opt_param param,
                                           double* value);
/* The bounds of a parameter. Local, needs no optimizer. */
TSR_API tsr_status tsr_optimizer_param_bounds(tsr_opt_param param, tsr_opt_bounds* bounds);
/* "TSR_OPT_BETA1", "TSR_PRESET_LAMB_APEX"; "unknown" for other values. Local. */
TSR_API const char* tsr_optimizer_param_name(tsr_opt_param param);
TSR_API const char* tsr_optimizer_preset_name(tsr_opt_preset preset);
/* Install (fn non-NULL) or remove (fn NULL) a learning-rate schedule. Local;
 * every rank must install one that gives the same values. */
TSR_API tsr_status tsr_optimizer_set_schedule(tsr_optimizer opt, tsr_opt_schedule fn, void* user);

/* One optimizer step. params: the n parameters (param_type), updated in
 * place on every rank. grads: the n gradients (param_type) of this rank:
 * TSR_OPT_REPLICATED and TSR_OPT_SHARDED only read them; TSR_OPT_DATA_PARALLEL
 * overwrites them with their sum over the ranks (the average is applied
 * inside the step). count must be n (TSR_ERR_SHAPE otherwise;
 * TSR_COUNT_INVALID lets a wrapper fail every rank for a size error it found
 * on one). params and grads must not overlap.
 * Collective over the context: every rank passes its own buffers, the same
 * hyperparameters, schedule values and step count (checked).
 * Returns TSR_SUCCESS, or TSR_ERR_NUMERIC on every rank when the step was
 * skipped because the gradient norm (or a weight or update norm) is not
 * finite: parameters, state and step count untouched, TSR_OPTQ_SKIPPED + 1.
 * Other errors: INVALID_ARG (NULL, overlapping buffers, a bad schedule value,
 * TRUST_MIN > TRUST_MAX or NORM_MIN > NORM_MAX, hyperparameters that differ
 * across ranks), SHAPE, MPI. */
TSR_API tsr_status tsr_optimizer_step(tsr_optimizer opt, void* params, void* grads, size_t count);

/* Query a number (group: for the per-group queries, else ignored). Local. */
TSR_API tsr_status tsr_optimizer_query(tsr_optimizer opt, tsr_opt_query what, int group, double* value);
/* Copy this rank's part of a state array (elements TSR_OPTQ_SHARD_OFFSET ..
 * + TSR_OPTQ_SHARD_SIZE of the flat array) into out; count must be that size.
 * Local. Errors: INVALID_ARG (state the optimizer does not have, NULL),
 * SHAPE (count). */
TSR_API tsr_status tsr_optimizer_get_state(tsr_optimizer opt, tsr_opt_state which, float* out,
                                           size_t count);

/* The inverse of tsr_optimizer_get_state: overwrite this rank's part of a
 * state array (elements TSR_OPTQ_SHARD_OFFSET .. + TSR_OPTQ_SHARD_SIZE)
 * from in; count must be that size. For a state kept in another layout
 * than the optimizer's groups (tensor-parallel blocks written as whole
 * tensors, docs/OPTIMIZERS.md). Setting the master weights marks them
 * initialised. Local. Errors: INVALID_ARG (state the optimizer does not
 * have, NULL), SHAPE (count). */
TSR_API tsr_status tsr_optimizer_set_state(tsr_optimizer opt, tsr_opt_state which, const float* in,
                                           size_t count);
/* Set the step count (TSR_OPTQ_STEP): the next step is step + 1 (its bias
 * corrections and schedule value). Local; every rank must set the same
 * value before the next step (checked there). Errors: INVALID_ARG (NULL,
 * step < 0). */
TSR_API tsr_status tsr_optimizer_set_step(tsr_optimizer opt, int64_t step);

/* Tensor parallelism: groups whose tensors are cut over other ranks than
 * the optimizer's (each rank of the optimizer's context holds only its
 * blocks). With a norm context, every per-group sum a step assembles (the
 * sums of squares of the gradient, the weights and the update; LARS: G.w)
 * is multiplied by this rank's weights[g] and summed over the ranks of
 * norm_ctx (one all-reduce of float64 on norm_ctx's transport and ledger per
 * assembly: 1 or 2 per step, TSR_OPTQ_NORM_ALLREDUCES counts them), so
 * that trust ratios and the global gradient norm are those of the whole
 * tensors: weight 1 where the rank's block is distinct, 1 on one rank and 0
 * on the others where ranks hold the same block or a replicated tensor.
 * weights NULL: all 1. norm_ctx NULL removes the reduction. The step is then
 * collective over norm_ctx too (every rank of it steps its own optimizer
 * with the same step number, hyperparameters and decisions); norm_ctx must
 * not be the optimizer's context and cannot be destroyed before the
 * optimizer (TSR_ERR_STATE). Local. Errors: INVALID_ARG (NULL or stale
 * handles, norm_ctx the optimizer's context, ngroups not the optimizer's,
 * a weight not finite or < 0). */
TSR_API tsr_status tsr_optimizer_set_norm_reduction(tsr_optimizer opt, tsr_context norm_ctx,
                                                    size_t ngroups, const double* weights);

/* Write the optimizer state (kind, group sizes, every parameter of every
 * group, step and skip counters, m and v or the momentum, the master weights)
 * to path through tessera's I/O layer: parallel HDF5 where the build has it,
 * else the TSRBIN01 format (docs/FILES.md, docs/OPTIMIZERS.md). Crash-safe.
 * Collective over the context. Errors: INVALID_ARG (NULL), IO. */
TSR_API tsr_status tsr_optimizer_save(tsr_optimizer opt, const char* path);
/* Read a state written by tsr_optimizer_save into opt, which must have the
 * same kind, parameter type and group sizes; the distribution mode and the
 * number of ranks may differ. Restores the parameters of every group and the
 * counters (not the schedule callback). A round trip is bit-identical.
 * Collective over the context. Errors: INVALID_ARG (NULL, other kind or
 * type), SHAPE (other group sizes), IO (missing or damaged file). */
TSR_API tsr_status tsr_optimizer_load(tsr_optimizer opt, const char* path);

/* ------------------------------------------------------------------------- */
/* Planning: data parallel or sharded, by time, energy or energy x time       */
/* ------------------------------------------------------------------------- */
/* One step of an optimizer over n parameters on nranks ranks
 * (docs/OPTIMIZERS.md, "Planning"). Initialise with TSR_OPT_PROBLEM_INIT. */
typedef struct tsr_opt_problem {
  size_t size;                 /* sizeof(tsr_opt_problem) */
  unsigned int magic;          /* TSR_OPT_PROBLEM_MAGIC */
  tsr_opt_kind kind;           /* TSR_OPT_LAMB (default) or TSR_OPT_LARS (with momentum) */
  tsr_dtype param_type;        /* TSR_FLOAT32 (default) or TSR_BFLOAT16 */
  size_t n;                    /* parameters */
  size_t ngroups;              /* groups (L), >= 1 */
  int nranks;                  /* ranks of the context */
  int ranks_per_node;          /* context ranks per node, filled in rank order; 0: one node */
  double bucket_bytes;         /* data parallel: TSR_OPT_BUCKET_BYTES; 0: its default (25 MiB) */
  double memory_per_rank;      /* optimizer state bytes one rank may hold; 0: no limit */
  tsr_gemm_machine machine;    /* alpha, beta as for the GEMM; gamma here: seconds per byte of the
                                  kernels' memory traffic (0: 1e-10, 10 GB/s per rank) */
  tsr_objective objective;     /* DEFAULT: the context's default objective, time without one */
  struct tsr_energy_profile_s* profile; /* machine profile (energy.h); NULL: default-2025 */
  tsr_context context;         /* NULL, or the context whose default objective applies */
} tsr_opt_problem;

#define TSR_OPT_PROBLEM_MAGIC 0x0971a4e5u
#define TSR_OPT_PROBLEM_INIT                                                                   \
  {sizeof(tsr_opt_problem), TSR_OPT_PROBLEM_MAGIC, TSR_OPT_LAMB, TSR_FLOAT32, 0, 1, 1, 0, 0.0, 0.0, \
   {0, 0, 0}, TSR_OBJECTIVE_DEFAULT, NULL, NULL}

/* The modelled figures of one distribution's step (steps that do not clip
 * and are not skipped). */
typedef struct tsr_opt_candidate {
  tsr_opt_dist dist;           /* TSR_OPT_DATA_PARALLEL or TSR_OPT_SHARDED */
  double bytes;                /* data bytes the busiest rank receives per step (wire model) */
  double messages;             /* messages it receives per step */
  double intra_node_bytes, inter_node_bytes; /* received within / across nodes, all ranks */
  double kernel_bytes;         /* bytes the kernels read and write, all ranks (TSR_OPTQ_STEP_BYTES) */
  double state_bytes;          /* optimizer state of the busiest rank (m, v, master weights,
                                  gradient slice) */
  double time;                 /* modelled seconds per step */
  double joules, joules_low, joules_high; /* modelled joules per step, all ranks */
  int fits;                    /* state_bytes within problem.memory_per_rank */
  int chosen;
} tsr_opt_candidate;

typedef struct tsr_opt_plan {
  tsr_opt_dist dist;           /* the choice, for tsr_optimizer_create */
  tsr_objective objective;     /* what was minimised (DEFAULT resolved) */
  tsr_opt_candidate candidates[2]; /* [0] data parallel, [1] sharded */
  double missing_bytes;        /* > 0: neither fits; the sharded step's state is this much over */
} tsr_opt_plan;

/* Data parallel or sharded: both steps' bytes (all-reduce against
 * reduce-scatter + all-gather), state per rank, time and joules, and the
 * one of least time, energy or energy x time that fits memory_per_rank
 * (ties: time, then less state, then data parallel). Local, the same answer
 * on every rank. Errors: INVALID_ARG (NULL, not initialised, kind,
 * param_type, n, ngroups, nranks, ranks_per_node, bucket_bytes, machine,
 * objective, profile, context), NO_MEMORY (neither fits: *plan holds the
 * sharded plan and missing_bytes). */
TSR_API tsr_status tsr_optimizer_plan(const tsr_opt_problem* problem, tsr_opt_plan* plan);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_OPTIMIZER_H */
