/*
 * tessera device memory (C99): binding a context to a CUDA device and stream,
 * and where a buffer lives. Included by tessera.h; conventions as there
 * (every call returns a tsr_status, messages via tsr_last_error, collective
 * vs local stated per call). No CUDA header is needed: a stream is passed as
 * void* (a cudaStream_t). See docs/GPU.md.
 *
 * Buffers handed to tessera's calls may be CUDA device memory where the
 * context is bound to a device (tsr_context_set_device): the transport then
 * moves them with NCCL or CUDA-aware MPI on the context's stream, and a call
 * returns once its work is ordered on that stream (docs/GPU.md, "Stream
 * semantics"). Host buffers take the host MPI path unchanged.
 */
#ifndef TESSERA_DEVICE_H
#define TESSERA_DEVICE_H

#include "tessera/tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a buffer lives (numbers are ABI). Managed and registered (pinned)
 * host memory count as host memory. */
typedef enum tsr_memory_space {
  TSR_MEMORY_HOST = 0,
  TSR_MEMORY_DEVICE = 1
} tsr_memory_space;

/* Number of CUDA devices this process sees: 0 in a build without CUDA
 * (TSR_WITH_CUDA=OFF) or on a machine without a usable device (never an
 * error then). Local. */
TSR_API tsr_status tsr_device_count(int* count);

/* Bind the context to CUDA device `device` (0 .. tsr_device_count - 1) and
 * to `stream` (a cudaStream_t created on that device; NULL: the device's
 * default stream), or unbind it with device = -1 (stream must then be NULL).
 * Each rank passes its own device (ranks may share one). The stream is
 * borrowed: it must outlive the binding. Grids and rings created while the
 * context is bound get a device transport (an NCCL communicator per axis
 * where NCCL is built); those created before keep the host path only.
 * Changing the device (not only the stream) while grids or rings of the
 * context live is TSR_ERR_STATE. Collective over ctx (it creates the
 * context's NCCL communicator). INVALID_ARG: NULL/stale ctx, device out of
 * range (naming 'device'), a stream of another device or a stream with
 * device -1 (naming 'stream'); UNSUPPORTED: a device >= 0 in a build
 * without CUDA. The failure of any rank fails every rank. */
TSR_API tsr_status tsr_context_set_device(tsr_context ctx, int device, void* stream);
/* The context's device (-1 when unbound) and stream (NULL: the default
 * stream, or unbound); either pointer may be NULL. Local. */
TSR_API tsr_status tsr_context_get_device(tsr_context ctx, int* device, void** stream);

/* Where ptr lives: TSR_MEMORY_DEVICE for CUDA device memory, else
 * TSR_MEMORY_HOST (NULL and pointers CUDA does not know included; always
 * host in a build without CUDA). Local, thread-safe. */
TSR_API tsr_status tsr_pointer_space(const void* ptr, int* space);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_DEVICE_H */
