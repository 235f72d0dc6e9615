/* A PMPI interposer that only forwards (MPI_Send, MPI_Recv, MPI_Allreduce
 * call their PMPI_ forms): preloaded into bench_pmpi instead of
 * libtessera-pmpi.so it measures what interposition alone costs (an extra
 * call through the PLT), the floor under the tool's own work.
 *
 *   mpiexec -n 2 env LD_PRELOAD=build/benchmarks/libtsr_pmpi_null.so build/benchmarks/bench_pmpi pingpong
 */
#include <mpi.h>

int MPI_Send(const void* buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {
  return PMPI_Send(buf, count, t, dest, tag, comm);
}
int MPI_Recv(void* buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Status* st) {
  return PMPI_Recv(buf, count, t, src, tag, comm, st);
}
int MPI_Allreduce(const void* s, void* r, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  return PMPI_Allreduce(s, r, count, t, op, comm);
}
