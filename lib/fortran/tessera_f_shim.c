/* C side of the Fortran module `tessera` (lib/fortran/tessera.F90): the two
 * calls that need an MPI handle conversion (MPI_Comm_f2c, MPI_Comm_c2f), which
 * Fortran cannot do through iso_c_binding. Part of libtessera_f, not of the
 * public C API (no header declares them). */
#include <mpi.h>

#include "tessera/tessera.h"

/* The signatures the module binds to (bind(C) interfaces in tessera.F90). */
tsr_status tsr_f_context_create(MPI_Fint comm, int ranks_per_node, tsr_context* ctx);
tsr_status tsr_f_grid_comm(tsr_grid grid, int axis, MPI_Fint* comm);

/* tsr_context_create_ex on the C handle of a Fortran communicator (an integer
 * handle of `use mpi`, or the MPI_VAL of an mpi_f08 type(MPI_Comm)).
 * Before MPI_Init or after MPI_Finalize MPI_Comm_f2c may not be called: the
 * library gets MPI_COMM_NULL and reports TSR_ERR_STATE (it checks that MPI is
 * initialised first). */
tsr_status tsr_f_context_create(MPI_Fint comm, int ranks_per_node, tsr_context* ctx) {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  MPI_Comm c = (inited && !finalized) ? MPI_Comm_f2c(comm) : MPI_COMM_NULL;
  tsr_context_config config = TSR_CONTEXT_CONFIG_INIT;
  config.ranks_per_node = ranks_per_node;
  return tsr_context_create_ex(c, &config, ctx);
}

/* tsr_grid_comm, the communicator as a Fortran integer handle
 * (MPI_COMM_NULL's Fortran value on idle ranks). */
tsr_status tsr_f_grid_comm(tsr_grid grid, int axis, MPI_Fint* comm) {
  MPI_Comm c = MPI_COMM_NULL;
  const tsr_status st = tsr_grid_comm(grid, (tsr_grid_axis)axis, &c);
  if (comm != NULL) *comm = MPI_Comm_c2f(st == TSR_SUCCESS ? c : MPI_COMM_NULL);
  return st;
}
