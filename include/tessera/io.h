/*
 * tessera checkpoints: distributed arrays and typed attributes in one file,
 * written atomically and read back into any layout, on any grid, at any rank
 * count (C99). Included by tessera.h; the conventions of tessera.h hold here
 * too. File layout, crash safety and costs: docs/FILES.md.
 *
 * A checkpoint holds named arrays, each stored once at its global shape:
 *   - a distributed matrix (tsr_matrix: any grid, any layout, replicas
 *     written once) as an m x n dataset, row-major in the file;
 *   - a 1D array cut into contiguous shards, one per rank (the sharded
 *     optimizer's cut, or any other), as a dataset of global_count elements;
 *   - a replicated array (every rank holds the same 1 to 3-dimensional data),
 *     written once;
 *   - an optimizer's whole state (tsr_checkpoint_put_optimizer), as arrays
 *     and attributes under a name prefix;
 * plus typed attributes (64-bit integers, doubles, strings). An array is read
 * into whatever the reader describes: a matrix written on a 2x2 grid reads
 * into a 1D, 2.5D or block-cyclic layout on another grid and rank count, a
 * shard array into other shard boundaries.
 *
 * Files: parallel HDF5 where the build has it (one dataset per array, the
 * attributes as HDF5 attributes: h5dump and h5py read them without tessera),
 * else tessera's MPI-IO binary format; the reader takes the format from the
 * file itself.
 *
 * Writing: tsr_checkpoint_create, then any number of put / set calls, then
 * tsr_checkpoint_commit, which writes the file under a temporary name,
 * flushes it to stable storage, renames it over `path` and flushes the
 * directory: `path` holds the previous checkpoint or the new one, never a
 * mix, whenever a writer is killed. Put calls record the caller's buffers;
 * the data are read at commit, so buffers must stay valid and unchanged
 * until commit returns. Closing without a commit writes nothing.
 *
 * Reading: tsr_checkpoint_open, then list / get calls, then close.
 *
 * Every call with a checkpoint handle except the info queries (array and
 * attribute counts, info, get of attributes) is collective over the
 * checkpoint's context: every rank calls it with the same name and
 * description (its own buffer and shard bounds), and every rank returns the
 * same status. Errors name the path and the array. Disk bytes are charged to
 * the context's ledger (disk_write, disk_read); resharding a block-cyclic
 * matrix goes through the transport.
 */
#ifndef TESSERA_IO_H
#define TESSERA_IO_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsr_checkpoint_s* tsr_checkpoint;
/* tsr_matrix (gemm.h) and tsr_optimizer (optimizer.h) are spelled as their
 * struct pointers here, so that this header works whichever tessera header
 * a program includes first. */

/* File format of a new checkpoint. */
typedef enum tsr_ckpt_format {
  TSR_CKPT_AUTO = 0,   /* HDF5 if the build has parallel HDF5, else binary */
  TSR_CKPT_HDF5 = 1,   /* parallel HDF5 (TSR_ERR_UNSUPPORTED without it)    */
  TSR_CKPT_BINARY = 2  /* tessera's MPI-IO binary format (docs/FILES.md)    */
} tsr_ckpt_format;

/* Flags of tsr_checkpoint_create (bitwise or). */
#define TSR_CKPT_NO_SYNC 1 /* skip the flushes to stable storage (file and directory): faster,
                              and still atomic against a killed process, but not against a
                              machine crash or power loss. For scratch output. */

/* Kinds of attribute. */
typedef enum tsr_attr_kind {
  TSR_ATTR_STRING = 0,
  TSR_ATTR_INT64 = 1,
  TSR_ATTR_DOUBLE = 2
} tsr_attr_kind;

/* Begin a new checkpoint at path, to be written by tsr_checkpoint_commit.
 * Nothing is written yet; an existing file at path stays until the commit
 * replaces it. flags: 0 or TSR_CKPT_NO_SYNC. Collective over ctx; path,
 * format and flags must agree. Errors: INVALID_ARG (NULL, empty path, bad
 * format or flags), UNSUPPORTED (TSR_CKPT_HDF5 without HDF5). */
TSR_API tsr_status tsr_checkpoint_create(tsr_context ctx, const char* path, tsr_ckpt_format format,
                                         int flags, tsr_checkpoint* ckpt);

/* Open an existing checkpoint for reading: rank 0 reads its description
 * (arrays, attributes) and broadcasts it. Collective over ctx. Errors: IO
 * (missing, truncated or foreign file, with the path), UNSUPPORTED (an HDF5
 * file in a build without HDF5). */
TSR_API tsr_status tsr_checkpoint_open(tsr_context ctx, const char* path, tsr_checkpoint* ckpt);

/* Free the handle; sets *ckpt to NULL (NULL is a no-op). An uncommitted
 * checkpoint is abandoned: nothing is written. Local. */
TSR_API tsr_status tsr_checkpoint_close(tsr_checkpoint* ckpt);

/* ---- writing (on a handle from tsr_checkpoint_create, before commit) ---- */
/* Array names: 1..255 characters of [A-Za-z0-9_.-], not "." or "..", unique
 * in a checkpoint, not starting with "tessera_". Errors of every put: STATE
 * (a handle opened for reading, or already committed), INVALID_ARG (name,
 * NULL data for a non-empty part, a description that differs across ranks),
 * and those named below. */

/* The distributed matrix mat (float32 or float64), this rank's local buffer
 * `local` (as for tsr_gemm). Stored as an m x n row-major dataset; each
 * element is written once (by the replica whose coordinates are 0 along the
 * grid dimensions the layout does not use). A block-cyclic matrix is first
 * redistributed into the balanced layout on its grid (through the transport;
 * a copy of the local block, held until commit). */
TSR_API tsr_status tsr_checkpoint_put_matrix(tsr_checkpoint ckpt, const char* name, struct tsr_matrix_s* mat,
                                             const void* local);

/* A 1D array of global_count elements of type, of which this rank holds
 * elements [offset, offset + count) in `local`. The ranks' shards must tile
 * [0, global_count) exactly: no gap, no overlap (count 0 allowed). Errors:
 * SHAPE (shard outside the array, shards that do not tile it), UNSUPPORTED
 * (sizes beyond the formats' limits, docs/FILES.md). */
TSR_API tsr_status tsr_checkpoint_put_shard(tsr_checkpoint ckpt, const char* name, tsr_dtype type,
                                            uint64_t global_count, uint64_t offset, uint64_t count,
                                            const void* local);

/* An array of 1 to 3 dimensions (shape[0..ndims-1], row-major) that every
 * rank holds identically in `data`; written once, by context rank 0. The
 * ranks' data are compared by a 64-bit digest at commit: data that differ
 * across ranks are INVALID_ARG ("differs across ranks"), naming the array. */
TSR_API tsr_status tsr_checkpoint_put_replicated(tsr_checkpoint ckpt, const char* name, tsr_dtype type,
                                                 int ndims, const uint64_t* shape, const void* data);

/* The whole state of an optimizer (kind, group sizes, hyperparameters, step
 * counts, moments, master weights) as arrays and attributes whose names
 * start with prefix + "." (prefix: a valid array name, e.g. "opt"); the same
 * layout as tsr_optimizer_save's file (docs/OPTIMIZERS.md) under the prefix.
 * The optimizer must belong to the checkpoint's context. */
TSR_API tsr_status tsr_checkpoint_put_optimizer(tsr_checkpoint ckpt, const char* prefix,
                                                struct tsr_optimizer_s* opt);

/* Typed attributes. Keys: as array names; a key set twice keeps the last
 * value. Strings: at most 65535 bytes. Collective; the same key and value
 * on every rank (INVALID_ARG otherwise). */
TSR_API tsr_status tsr_checkpoint_set_int(tsr_checkpoint ckpt, const char* key, int64_t value);
TSR_API tsr_status tsr_checkpoint_set_double(tsr_checkpoint ckpt, const char* key, double value);
TSR_API tsr_status tsr_checkpoint_set_string(tsr_checkpoint ckpt, const char* key, const char* value);

/* Write the file: every array and attribute put so far, atomically (see the
 * top of this header). Afterwards the handle only closes (STATE for further
 * puts). On failure nothing at path has changed and the temporary file is
 * removed. Errors: IO (cannot create, write, flush or rename; names the
 * path), INVALID_ARG (replicated data differ across ranks). */
TSR_API tsr_status tsr_checkpoint_commit(tsr_checkpoint ckpt);

/* ---- reading (on a handle from tsr_checkpoint_open) ---- */
/* Arrays in the order they were written, and their global shapes (unused
 * dimensions 1). A matrix is an array of 2 dimensions {m, n}; a shard array
 * and an optimizer's arrays have their own (docs/FILES.md). name lives as
 * long as the handle. Any output may be NULL. Local. Errors: INVALID_ARG
 * (index out of range), STATE (a handle being written). */
TSR_API tsr_status tsr_checkpoint_array_count(tsr_checkpoint ckpt, int* count);
TSR_API tsr_status tsr_checkpoint_array_info(tsr_checkpoint ckpt, int index, const char** name,
                                             tsr_dtype* type, int* ndims, uint64_t shape[3]);
/* The index of an array by name, or -1 when there is none (not an error). Local. */
TSR_API tsr_status tsr_checkpoint_find_array(tsr_checkpoint ckpt, const char* name, int* index);

/* Read array `name` into the matrix mat's local buffer (any grid, layout
 * and rank count; ld honoured). The array must be 2-dimensional m x n with
 * mat's m, n and type. Errors: IO (no such array), INVALID_ARG (type),
 * SHAPE (shape), STATE. */
TSR_API tsr_status tsr_checkpoint_get_matrix(tsr_checkpoint ckpt, const char* name, struct tsr_matrix_s* mat,
                                             void* local);
/* Read elements [offset, offset + count) of the array `name` (any number of
 * dimensions: its row-major elements) into local. Any shard boundaries;
 * ranks may read overlapping or no elements. Errors: IO, INVALID_ARG
 * (type), SHAPE (global_count is not the array's element count, or the
 * range exceeds it), STATE. */
TSR_API tsr_status tsr_checkpoint_get_shard(tsr_checkpoint ckpt, const char* name, tsr_dtype type,
                                            uint64_t global_count, uint64_t offset, uint64_t count,
                                            void* local);
/* Read the whole array `name` on every rank; ndims and shape must be the
 * array's. Errors: IO, INVALID_ARG (type), SHAPE, STATE. */
TSR_API tsr_status tsr_checkpoint_get_replicated(tsr_checkpoint ckpt, const char* name, tsr_dtype type,
                                                 int ndims, const uint64_t* shape, void* data);
/* Restore an optimizer from the state put under prefix. Any rank count and
 * distribution (sharded state written on 4 ranks loads on 2); the groups
 * must match. Errors: as tsr_optimizer_load, with the prefix. */
TSR_API tsr_status tsr_checkpoint_get_optimizer(tsr_checkpoint ckpt, const char* prefix,
                                                struct tsr_optimizer_s* opt);

/* Attributes (user keys; the optimizer's, under their prefix, too), sorted
 * by key. key lives as long as the handle. Local. */
TSR_API tsr_status tsr_checkpoint_attr_count(tsr_checkpoint ckpt, int* count);
TSR_API tsr_status tsr_checkpoint_attr_info(tsr_checkpoint ckpt, int index, const char** key,
                                            tsr_attr_kind* kind);
/* An attribute's value. Errors: INVALID_ARG (no such key: the message says
 * so; NULL output), SHAPE (the attribute has another kind). The string form
 * works like snprintf: at most len bytes including the terminating 0 go to
 * buf, *needed gets the full length without the 0 (len = 0, buf NULL asks
 * for the size). Local. */
TSR_API tsr_status tsr_checkpoint_get_int(tsr_checkpoint ckpt, const char* key, int64_t* value);
TSR_API tsr_status tsr_checkpoint_get_double(tsr_checkpoint ckpt, const char* key, double* value);
TSR_API tsr_status tsr_checkpoint_get_string(tsr_checkpoint ckpt, const char* key, char* buf, size_t len,
                                             size_t* needed);

/* The file's format (TSR_CKPT_HDF5 or TSR_CKPT_BINARY; for a handle being
 * written, the format it will be written in). Local. */
TSR_API tsr_status tsr_checkpoint_format(tsr_checkpoint ckpt, tsr_ckpt_format* format);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_IO_H */
