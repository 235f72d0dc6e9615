// The context object behind tsr_context. Not installed.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend.hpp"
#include "ledger.hpp"
#include "transport.hpp"

namespace tsr {
namespace energy {
struct ContextEnergy;  // energy_api.cpp: meters and settings of tsr_energy_start
void destroy(ContextEnergy* e);
struct ContextEnergyDeleter {
  void operator()(ContextEnergy* e) const { destroy(e); }
};
}  // namespace energy
}  // namespace tsr

struct tsr_context_s {
  static constexpr unsigned kMagic = 0x7c0a7e57u;
  unsigned magic = kMagic;
  MPI_Comm comm = MPI_COMM_NULL;  // our duplicate of the user's communicator
  int rank = 0, size = 0;
  std::vector<int> node_of;       // dense node id of every context rank
  int nnodes = 1;
  // The default objective of the planners (tsr_context_set_objective).
  int objective = 0;  // TSR_OBJECTIVE_TIME
  size_t max_chunk = 0;           // elements per MPI call (tsr_context_config.max_chunk), 1..INT_MAX
  tsr::Ledger ledger;
  std::unique_ptr<tsr::MpiBackend> backend;
  // The device backend (lib/device_transport.cpp), made by the first
  // device::attach of a bound context; routes to `backend` for host buffers.
  std::unique_ptr<tsr::Backend> device_backend;
  std::unique_ptr<tsr::Comm> world;  // transport view of `comm`
  int live_grids = 0;
  int live_rings = 0;  // tsr_ring objects over this context (collectives/ring.cpp)
  // Reports (tsr_report, tsr_energy_report) and optimizers of this context:
  // destroying the context refuses while any lives (their destroy calls are
  // local and may come from any thread, hence atomic).
  std::atomic<int> live_reports{0}, live_optimizers{0};
  // Workspace reused by the distributed GEMM and its redistributions
  // (collectives/gemm_internal.hpp, Pool): grows to the largest call, freed
  // with the context or by tsr_gemm_workspace_release.
  std::shared_ptr<void> gemm_pool;
  // CUDA device binding (tsr_context_set_device, lib/device.hpp): the device
  // ordinal (-1: unbound, host path only) and the cudaStream_t (nullptr: the
  // device's default stream) that device work and transfers are ordered on.
  int cuda_device = -1;
  void* cuda_stream = nullptr;
  // Energy accounting (tsr_energy_start); null until started.
  std::unique_ptr<tsr::energy::ContextEnergy, tsr::energy::ContextEnergyDeleter> energy;

  std::mutex error_mutex;
  std::unordered_map<std::thread::id, std::string> errors;
};

namespace tsr {
// Checks that ctx is a live context handle.
tsr_status check_context(tsr_context ctx, const char* argname = "ctx");
// The objective a planner minimises: `objective` unless it is
// TSR_OBJECTIVE_DEFAULT, then ctx's default (time without a context). ctx
// must be NULL or live (checked by the caller).
int resolve_objective(int objective, tsr_context ctx);
// Checks an objective of a problem ("<what> 'objective'"): DEFAULT, TIME,
// ENERGY or EDP; and that ctx is NULL or live ("<what> 'context'").
tsr_status check_objective(int objective, tsr_context ctx, const char* what);
}  // namespace tsr
