// The pdgemm/psgemm drop-in on a context chosen by the caller: used by
// libtessera-scalapack (lib/scalapack, the pdgemm_/psgemm_ shim), which
// keeps its own context per BLACS grid so that the traffic stays in a ledger
// until MPI_Finalize. Not installed.
#pragma once

#include <array>
#include <map>

#include "tessera/tessera.h"

namespace tsr {
namespace gemm {

// The grids the drop-in planned over one context ({kind, dims} -> grid);
// free them (free_grids) before the context.
struct ScalapackGrids {
  std::map<std::array<int, 4>, tsr_grid> grids;
};
void free_grids(ScalapackGrids* g);

// tsr_pdgemm / tsr_psgemm on ctx instead of the context cached on the BLACS
// grid's communicator. ctx must span exactly the BLACS grid of desca[1], with
// context rank prow*npcol + pcol (a context over the grid's communicator,
// Cblacs2sys_handle(Cblacs_get(ctxt, 10)), has it): INVALID_ARG otherwise.
// Ranks outside the BLACS grid return TSR_SUCCESS at once (as pdgemm).
// The status is recorded for tsr_last_error(ctx) like a public call's.
tsr_status pdgemm_on(tsr_context ctx, ScalapackGrids* grids, const char* transa, const char* transb, const int* m,
                     const int* n, const int* k, const double* alpha, const double* a, const int* ia, const int* ja,
                     const int* desca, const double* b, const int* ib, const int* jb, const int* descb,
                     const double* beta, double* c, const int* ic, const int* jc, const int* descc);
tsr_status psgemm_on(tsr_context ctx, ScalapackGrids* grids, const char* transa, const char* transb, const int* m,
                     const int* n, const int* k, const float* alpha, const float* a, const int* ia, const int* ja,
                     const int* desca, const float* b, const int* ib, const int* jb, const int* descb,
                     const float* beta, float* c, const int* ic, const int* jc, const int* descc);

}  // namespace gemm
}  // namespace tsr
