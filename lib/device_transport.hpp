// The device transport (issue 17, docs/GPU.md): how a communicator moves
// buffers in CUDA device memory. A communicator made while its context is
// bound to a device (tsr_context_set_device) gets, through attach(), a
// DeviceBackend in front of the host MPI backend: every call is routed by
// where its buffers live (device::space_of). Host buffers go to the host MPI
// backend unchanged; device buffers go to NCCL (one NCCL communicator per
// transport communicator) or, without it, to CUDA-aware MPI; with neither
// they are refused (TSR_ERR_UNSUPPORTED), never staged silently.
//
// Stream semantics: NCCL work is ordered on the context's stream and a call
// returns once it is enqueued (no host synchronisation). Nonblocking
// point-to-point calls on device buffers join the communicator's pending
// group; the first wait/test (or any other call) on that communicator starts
// the group (ncclGroupStart/End) on the communicator's own stream, after
// the work already on the context's stream; wait/test then order the
// context's stream after the group. The CUDA-aware MPI route synchronises
// the context's stream before handing device pointers to MPI (MPI knows no
// streams).
#pragma once

#include <cstddef>

#include "comm.hpp"
#include "core.hpp"

namespace tsr {
namespace device {

// Gives c a device transport when its context is bound to a device, or
// takes it away when the context is unbound (a no-op without CUDA).
// Collective over c (c's NCCL communicator: a unique id broadcast over c as
// control traffic, then ncclCommInitRank); callers agree on the status
// afterwards. Call it where every member of c makes it in the same order
// (context binding, grid and ring creation).
tsr_status attach(Comm& c);
// Starts c's pending group of nonblocking point-to-point operations on
// device buffers now (on c's own stream, after the work queued so far on the
// context's stream) without ordering the context's stream after it, so that
// kernels queued next run while the transfers do (the ring exchange engine
// calls it before each step's kernels). wait/test on the requests still
// order the context's stream after the group. A no-op when nothing is
// pending or without CUDA. Local.
tsr_status start(const Comm& c);
// Drops c's device transport (back to the host MPI path). Local.
void detach(Comm& c);
// Copies n bytes between device buffers of c's context, ordered on the
// context's stream (a rank's local part of a collective).
tsr_status copy(const Comm& c, void* dst, const void* src, size_t n);
// Whether the MPI library says it handles CUDA device pointers
// (MPIX_Query_cuda_support; TSR_CUDA_AWARE_MPI=0/1 in the environment
// overrides it). Always false without CUDA.
bool cuda_aware_mpi();
// Whether c can move device buffers: NCCL communicator, CUDA-aware MPI, or
// neither (then *why says why). Local.
bool can_move_device(const Comm& c, const char** why);

}  // namespace device
}  // namespace tsr
