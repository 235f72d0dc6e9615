// The device transport (issue 17, docs/GPU.md): how a communicator moves
// buffers in CUDA device memory. A communicator of a context bound to a
// device (tsr_context_set_device) gets, when it is created (attach), a
// DeviceBackend in front of the host MPI backend: every call is routed by
// where its buffers live (device::space_of); host buffers go to the host MPI
// backend unchanged, device buffers to NCCL (a communicator per transport
// communicator) or to CUDA-aware MPI.
#pragma once

#include "comm.hpp"
#include "core.hpp"

namespace tsr {
namespace device {

// Gives c a device transport when its context is bound to a device (a no-op
// otherwise, and without CUDA). Collective over c (creates c's NCCL
// communicator: a unique id broadcast over c's MPI communicator, then
// ncclCommInitRank); callers agree on the status afterwards.
tsr_status attach(const Comm& c);
// Drops c's device transport (back to the host MPI path). Local.
void detach(const Comm& c);

}  // namespace device
}  // namespace tsr
