// libtessera-pmpi: Fortran entry points, for the MPI libraries whose Fortran
// bindings call PMPI_ directly and so never reach the C wrappers (checked
// with nm and objdump on the project's Debian 12 machines; docs/ENERGY.md and
// tests/pmpi/fortran_layering.py):
//
//  - Open MPI 4.1: mpif.h and `use mpi` (mpi_send_, all four manglings) and
//    `use mpi_f08` (mpi_send_f08_) call PMPI_Send. Every routine below gets
//    a counting wrapper in both forms; it calls the library's pmpi_x_ /
//    pmpi_x_f08_ entry, which does the argument conversions.
//  - MPICH 4.0: mpif.h, `use mpi` and the buffer routines of `use mpi_f08`
//    (mpi_send_f08ts_) call the C MPI_Send, so the C wrappers count them; the
//    other mpi_f08 routines (init, finalize, wait and test, start, request
//    free, barrier, matched probes) call PMPI_ directly and get wrappers here.
//
// A wrapper raises t_depth around the library's entry, so that a binding that
// does reach a C wrapper is counted once, here. The PMPI Fortran entries are
// weak references: the tool needs no Fortran library, and a Fortran program
// brings its own.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "coll.hpp"
#include "tool.hpp"

using namespace tsr::pmpi;
using F = MPI_Fint;

namespace {

[[noreturn]] void missing(const char* name) {
  std::fprintf(stderr, "libtessera-pmpi: the MPI library has no %s; is this program's Fortran MPI library the one "
               "libtessera-pmpi was built for?\n", name);
  std::abort();
}

// Runs the library's entry PM with t_depth raised; returns false (and the
// wrapper returns) when the call failed or the tool is not active.
#define TSR_FCALL(PM, ...)                          \
  F ie_ = 0;                                        \
  F* e = ierr != nullptr ? ierr : &ie_;             \
  if (PM == nullptr) missing(#PM);                  \
  if (pass()) {                                     \
    PM(__VA_ARGS__, e);                             \
    return;                                         \
  }                                                 \
  {                                                 \
    Nest n_;                                        \
    PM(__VA_ARGS__, e);                             \
  }                                                 \
  if (*e != MPI_SUCCESS) return;

[[maybe_unused]] uint64_t fbytes(F count, F type) { return nbytes(count, PMPI_Type_f2c(type)); }
const CommInfo* fcomm(F comm) { return comm_info(PMPI_Comm_f2c(comm)); }

}  // namespace

#if defined(TSR_PMPI_OPENMPI)
// ------------------------------------------------------------------ Open MPI
namespace {

// Fortran statuses are MPI_STATUS_SIZE integers; MPI_STATUS(ES)_IGNORE are
// addresses of Open MPI's sentinels.
constexpr int kStatusSize = static_cast<int>(sizeof(MPI_Status) / sizeof(F));

bool ignored(const F* status, bool array) {
  if (status == (array ? MPI_F_STATUSES_IGNORE : MPI_F_STATUS_IGNORE)) return true;
  static const std::vector<const void*> single = [] {
    std::vector<const void*> v;
    for (const char* s : {"mpi_fortran_status_ignore_", "mpi_fortran_status_ignore", "mpi_fortran_status_ignore__",
                          "MPI_FORTRAN_STATUS_IGNORE"})
      if (void* p = ::dlsym(RTLD_DEFAULT, s)) v.push_back(p);
    return v;
  }();
  static const std::vector<const void*> many = [] {
    std::vector<const void*> v;
    for (const char* s : {"mpi_fortran_statuses_ignore_", "mpi_fortran_statuses_ignore",
                          "mpi_fortran_statuses_ignore__", "MPI_FORTRAN_STATUSES_IGNORE"})
      if (void* p = ::dlsym(RTLD_DEFAULT, s)) v.push_back(p);
    return v;
  }();
  for (const void* p : array ? many : single)
    if (p == status) return true;
  return false;
}

MPI_Status to_c(const F* fs) {
  MPI_Status s;
  PMPI_Status_f2c(fs, &s);
  return s;
}

// A status buffer: the caller's, or ours when the caller ignores it.
struct FStatus {
  F own[32];
  F* p;
  explicit FStatus(F* caller) : p(caller == nullptr || ignored(caller, false) ? own : caller) {}
};
struct FStatuses {
  std::vector<F> own;
  F* p;
  FStatuses(F* caller, F n) {
    if (caller == nullptr || ignored(caller, true)) {
      own.resize(static_cast<size_t>(n > 0 ? n : 1) * kStatusSize);
      p = own.data();
    } else {
      p = caller;
    }
  }
  MPI_Status at(int i) const { return to_c(p + static_cast<size_t>(i) * kStatusSize); }
};

std::vector<MPI_Request> c_requests(F n, const F* r) {
  std::vector<MPI_Request> v(static_cast<size_t>(n > 0 ? n : 0));
  for (size_t i = 0; i < v.size(); ++i) v[i] = PMPI_Request_f2c(r[i]);
  return v;
}

// ------------------------------------------------------- the routine shapes
using init_fn = void(F*);
using init_thread_fn = void(F*, F*, F*);
using send_fn = void(void*, F*, F*, F*, F*, F*, F*);
using isend_fn = void(void*, F*, F*, F*, F*, F*, F*, F*);
using recv_fn = void(void*, F*, F*, F*, F*, F*, F*, F*);
using sendrecv_fn = void(void*, F*, F*, F*, F*, void*, F*, F*, F*, F*, F*, F*, F*);
using sendrecv_replace_fn = void(void*, F*, F*, F*, F*, F*, F*, F*, F*, F*);
using mprobe_fn = void(F*, F*, F*, F*, F*, F*);
using improbe_fn = void(F*, F*, F*, F*, F*, F*, F*);
using mrecv_fn = void(void*, F*, F*, F*, F*, F*);
using wait_fn = void(F*, F*, F*);
using waitall_fn = void(F*, F*, F*, F*);
using waitany_fn = void(F*, F*, F*, F*, F*);
using waitsome_fn = void(F*, F*, F*, F*, F*, F*);
using test_fn = void(F*, F*, F*, F*);
using testall_fn = void(F*, F*, F*, F*, F*);
using testany_fn = void(F*, F*, F*, F*, F*, F*);
using start_fn = void(F*, F*);
using startall_fn = void(F*, F*, F*);
using barrier_fn = void(F*, F*);
using ibarrier_fn = void(F*, F*, F*);
using bcast_fn = void(void*, F*, F*, F*, F*, F*);
using ibcast_fn = void(void*, F*, F*, F*, F*, F*, F*);
using reduce_fn = void(void*, void*, F*, F*, F*, F*, F*, F*);
using ireduce_fn = void(void*, void*, F*, F*, F*, F*, F*, F*, F*);
using allreduce_fn = void(void*, void*, F*, F*, F*, F*, F*);
using iallreduce_fn = void(void*, void*, F*, F*, F*, F*, F*, F*);
using gather_fn = void(void*, F*, F*, void*, F*, F*, F*, F*, F*);
using igather_fn = void(void*, F*, F*, void*, F*, F*, F*, F*, F*, F*);
using gatherv_fn = void(void*, F*, F*, void*, F*, F*, F*, F*, F*, F*);
using igatherv_fn = void(void*, F*, F*, void*, F*, F*, F*, F*, F*, F*, F*);
using scatterv_fn = void(void*, F*, F*, F*, void*, F*, F*, F*, F*, F*);
using iscatterv_fn = void(void*, F*, F*, F*, void*, F*, F*, F*, F*, F*, F*);
using allgather_fn = void(void*, F*, F*, void*, F*, F*, F*, F*);
using iallgather_fn = void(void*, F*, F*, void*, F*, F*, F*, F*, F*);
using allgatherv_fn = void(void*, F*, F*, void*, F*, F*, F*, F*, F*);
using iallgatherv_fn = void(void*, F*, F*, void*, F*, F*, F*, F*, F*, F*);
using alltoallv_fn = void(void*, F*, F*, F*, void*, F*, F*, F*, F*, F*);
using ialltoallv_fn = void(void*, F*, F*, F*, void*, F*, F*, F*, F*, F*, F*);
using redscat_fn = void(void*, void*, F*, F*, F*, F*, F*);
using iredscat_fn = void(void*, void*, F*, F*, F*, F*, F*, F*);

}  // namespace

// Weak references to the library's entries, the mpif.h and the mpi_f08 one.
#define TSR_WEAK(SHAPE, name)                                   \
  extern "C" SHAPE##_fn pmpi_##name##_ __attribute__((weak));   \
  extern "C" SHAPE##_fn pmpi_##name##_f08_ __attribute__((weak));
// The four mpif.h manglings and the mpi_f08 name, as aliases of our two.
#define TSR_ALIASES(name, NAME)                                                                  \
  extern "C" decltype(tsr_f_##name) mpi_##name __attribute__((alias("tsr_f_" #name)));           \
  extern "C" decltype(tsr_f_##name) mpi_##name##_ __attribute__((alias("tsr_f_" #name)));       \
  extern "C" decltype(tsr_f_##name) mpi_##name##__ __attribute__((alias("tsr_f_" #name)));      \
  extern "C" decltype(tsr_f_##name) NAME __attribute__((alias("tsr_f_" #name)));                 \
  extern "C" decltype(tsr_f08_##name) mpi_##name##_f08_ __attribute__((alias("tsr_f08_" #name)));
// DEF(IMPL, PM) defines one wrapper; BOTH makes the mpif.h and mpi_f08 ones.
#define TSR_BOTH(SHAPE, DEF, name, NAME) \
  TSR_WEAK(SHAPE, name)                  \
  DEF(tsr_f_##name, pmpi_##name##_)      \
  DEF(tsr_f08_##name, pmpi_##name##_f08_) \
  TSR_ALIASES(name, NAME)

// --------------------------------------------------------------- init, finalize
#define TSR_DEF_INIT(IMPL, PM)                                                   \
  extern "C" void IMPL(F* ierr) {                                                \
    F ie_ = 0;                                                                   \
    F* e = ierr != nullptr ? ierr : &ie_;                                        \
    if (PM == nullptr) missing(#PM);                                             \
    {                                                                            \
      Nest n_;                                                                   \
      PM(e);                                                                     \
    }                                                                            \
    if (*e == MPI_SUCCESS && t_depth == 0) {                                     \
      int provided = MPI_THREAD_SINGLE;                                          \
      PMPI_Query_thread(&provided);                                              \
      setup(provided);                                                           \
    }                                                                            \
  }
TSR_BOTH(init, TSR_DEF_INIT, init, MPI_INIT)
#define TSR_DEF_INIT_THREAD(IMPL, PM)                                            \
  extern "C" void IMPL(F* required, F* provided, F* ierr) {                      \
    F ie_ = 0;                                                                   \
    F* e = ierr != nullptr ? ierr : &ie_;                                        \
    if (PM == nullptr) missing(#PM);                                             \
    {                                                                            \
      Nest n_;                                                                   \
      PM(required, provided, e);                                                 \
    }                                                                            \
    if (*e == MPI_SUCCESS && t_depth == 0) setup(*provided);                     \
  }
TSR_BOTH(init_thread, TSR_DEF_INIT_THREAD, init_thread, MPI_INIT_THREAD)
#define TSR_DEF_FINALIZE(IMPL, PM)                                               \
  extern "C" void IMPL(F* ierr) {                                                \
    F ie_ = 0;                                                                   \
    if (PM == nullptr) missing(#PM);                                             \
    if (t_depth == 0) finalize();                                                \
    Nest n_;                                                                     \
    PM(ierr != nullptr ? ierr : &ie_);                                           \
  }
TSR_BOTH(init, TSR_DEF_FINALIZE, finalize, MPI_FINALIZE)

// ------------------------------------------------------------- point to point
#define TSR_F_SEND(name, NAME, FN)                                                             \
  TSR_WEAK(send, name)                                                                         \
  extern "C" void tsr_f_##name(void* buf, F* count, F* type, F* dest, F* tag, F* comm, F* ierr) { \
    TSR_FCALL(pmpi_##name##_, buf, count, type, dest, tag, comm)                               \
    on_send(FN, fcomm(*comm), *dest, fbytes(*count, *type));                                   \
  }                                                                                            \
  extern "C" void tsr_f08_##name(void* buf, F* count, F* type, F* dest, F* tag, F* comm, F* ierr) { \
    TSR_FCALL(pmpi_##name##_f08_, buf, count, type, dest, tag, comm)                           \
    on_send(FN, fcomm(*comm), *dest, fbytes(*count, *type));                                   \
  }                                                                                            \
  TSR_ALIASES(name, NAME)
TSR_F_SEND(send, MPI_SEND, F_Send)
TSR_F_SEND(bsend, MPI_BSEND, F_Bsend)
TSR_F_SEND(ssend, MPI_SSEND, F_Ssend)
TSR_F_SEND(rsend, MPI_RSEND, F_Rsend)

// Nonblocking sends charge at the call; persistent ones at every start.
#define TSR_F_ISEND_BODY(PM, FN, PERSISTENT)                                                   \
  TSR_FCALL(PM, buf, count, type, dest, tag, comm, req)                                        \
  const MPI_Request r = PMPI_Request_f2c(*req);                                                \
  if (PERSISTENT) {                                                                            \
    defer_send(FN, PMPI_Comm_f2c(*comm), *dest, fbytes(*count, *type), r);                     \
  } else {                                                                                     \
    on_send(FN, fcomm(*comm), *dest, fbytes(*count, *type));                                   \
    if (req_pending()) req_forget(r);                                                          \
  }
#define TSR_F_ISEND(name, NAME, FN, PERSISTENT)                                                \
  TSR_WEAK(isend, name)                                                                        \
  extern "C" void tsr_f_##name(void* buf, F* count, F* type, F* dest, F* tag, F* comm, F* req, F* ierr) { \
    TSR_F_ISEND_BODY(pmpi_##name##_, FN, PERSISTENT)                                           \
  }                                                                                            \
  extern "C" void tsr_f08_##name(void* buf, F* count, F* type, F* dest, F* tag, F* comm, F* req, F* ierr) { \
    TSR_F_ISEND_BODY(pmpi_##name##_f08_, FN, PERSISTENT)                                       \
  }                                                                                            \
  TSR_ALIASES(name, NAME)
TSR_F_ISEND(isend, MPI_ISEND, F_Isend, false)
TSR_F_ISEND(ibsend, MPI_IBSEND, F_Ibsend, false)
TSR_F_ISEND(issend, MPI_ISSEND, F_Issend, false)
TSR_F_ISEND(irsend, MPI_IRSEND, F_Irsend, false)
TSR_F_ISEND(send_init, MPI_SEND_INIT, F_Send_init, true)
TSR_F_ISEND(bsend_init, MPI_BSEND_INIT, F_Bsend_init, true)
TSR_F_ISEND(ssend_init, MPI_SSEND_INIT, F_Ssend_init, true)
TSR_F_ISEND(rsend_init, MPI_RSEND_INIT, F_Rsend_init, true)

#define TSR_F_RECV_BODY(PM)                                                                    \
  FStatus fs(status);                                                                          \
  TSR_FCALL(PM, buf, count, type, src, tag, comm, fs.p)                                        \
  const MPI_Status s = to_c(fs.p);                                                             \
  on_recv(F_Recv, fcomm(*comm), &s);
TSR_WEAK(recv, recv)
extern "C" void tsr_f_recv(void* buf, F* count, F* type, F* src, F* tag, F* comm, F* status, F* ierr) {
  TSR_F_RECV_BODY(pmpi_recv_)
}
extern "C" void tsr_f08_recv(void* buf, F* count, F* type, F* src, F* tag, F* comm, F* status, F* ierr) {
  TSR_F_RECV_BODY(pmpi_recv_f08_)
}
TSR_ALIASES(recv, MPI_RECV)

#define TSR_F_IRECV(name, NAME, FN, PERSISTENT)                                                \
  TSR_WEAK(recv, name)                                                                         \
  extern "C" void tsr_f_##name(void* buf, F* count, F* type, F* src, F* tag, F* comm, F* req, F* ierr) { \
    TSR_FCALL(pmpi_##name##_, buf, count, type, src, tag, comm, req)                           \
    defer_recv(FN, fcomm(*comm), PMPI_Request_f2c(*req), PERSISTENT);                          \
  }                                                                                            \
  extern "C" void tsr_f08_##name(void* buf, F* count, F* type, F* src, F* tag, F* comm, F* req, F* ierr) { \
    TSR_FCALL(pmpi_##name##_f08_, buf, count, type, src, tag, comm, req)                       \
    defer_recv(FN, fcomm(*comm), PMPI_Request_f2c(*req), PERSISTENT);                          \
  }                                                                                            \
  TSR_ALIASES(name, NAME)
TSR_F_IRECV(irecv, MPI_IRECV, F_Irecv, false)
TSR_F_IRECV(recv_init, MPI_RECV_INIT, F_Recv_init, true)

#define TSR_F_SENDRECV_BODY(PM)                                                                \
  FStatus fs(status);                                                                          \
  TSR_FCALL(PM, sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, fs.p)   \
  const CommInfo* ci = fcomm(*comm);                                                           \
  const MPI_Status s = to_c(fs.p);                                                             \
  on_send(F_Sendrecv, ci, *dest, fbytes(*scount, *stype));                                     \
  on_recv(F_Sendrecv, ci, &s, false);
TSR_WEAK(sendrecv, sendrecv)
extern "C" void tsr_f_sendrecv(void* sbuf, F* scount, F* stype, F* dest, F* stag, void* rbuf, F* rcount, F* rtype,
                               F* src, F* rtag, F* comm, F* status, F* ierr) {
  TSR_F_SENDRECV_BODY(pmpi_sendrecv_)
}
extern "C" void tsr_f08_sendrecv(void* sbuf, F* scount, F* stype, F* dest, F* stag, void* rbuf, F* rcount, F* rtype,
                                 F* src, F* rtag, F* comm, F* status, F* ierr) {
  TSR_F_SENDRECV_BODY(pmpi_sendrecv_f08_)
}
TSR_ALIASES(sendrecv, MPI_SENDRECV)

#define TSR_F_SENDRECV_REPLACE_BODY(PM)                                                        \
  FStatus fs(status);                                                                          \
  TSR_FCALL(PM, buf, count, type, dest, stag, src, rtag, comm, fs.p)                           \
  const CommInfo* ci = fcomm(*comm);                                                           \
  const MPI_Status s = to_c(fs.p);                                                             \
  on_send(F_Sendrecv_replace, ci, *dest, fbytes(*count, *type));                               \
  on_recv(F_Sendrecv_replace, ci, &s, false);
TSR_WEAK(sendrecv_replace, sendrecv_replace)
extern "C" void tsr_f_sendrecv_replace(void* buf, F* count, F* type, F* dest, F* stag, F* src, F* rtag, F* comm,
                                       F* status, F* ierr) {
  TSR_F_SENDRECV_REPLACE_BODY(pmpi_sendrecv_replace_)
}
extern "C" void tsr_f08_sendrecv_replace(void* buf, F* count, F* type, F* dest, F* stag, F* src, F* rtag, F* comm,
                                         F* status, F* ierr) {
  TSR_F_SENDRECV_REPLACE_BODY(pmpi_sendrecv_replace_f08_)
}
TSR_ALIASES(sendrecv_replace, MPI_SENDRECV_REPLACE)

#define TSR_F_MPROBE_BODY(PM)                                                                  \
  TSR_FCALL(PM, src, tag, comm, msg, status)                                                   \
  msg_add(PMPI_Message_f2c(*msg), fcomm(*comm));
TSR_WEAK(mprobe, mprobe)
extern "C" void tsr_f_mprobe(F* src, F* tag, F* comm, F* msg, F* status, F* ierr) { TSR_F_MPROBE_BODY(pmpi_mprobe_) }
extern "C" void tsr_f08_mprobe(F* src, F* tag, F* comm, F* msg, F* status, F* ierr) {
  TSR_F_MPROBE_BODY(pmpi_mprobe_f08_)
}
TSR_ALIASES(mprobe, MPI_MPROBE)
#define TSR_F_IMPROBE_BODY(PM)                                                                 \
  TSR_FCALL(PM, src, tag, comm, flag, msg, status)                                             \
  if (*flag) msg_add(PMPI_Message_f2c(*msg), fcomm(*comm));
TSR_WEAK(improbe, improbe)
extern "C" void tsr_f_improbe(F* src, F* tag, F* comm, F* flag, F* msg, F* status, F* ierr) {
  TSR_F_IMPROBE_BODY(pmpi_improbe_)
}
extern "C" void tsr_f08_improbe(F* src, F* tag, F* comm, F* flag, F* msg, F* status, F* ierr) {
  TSR_F_IMPROBE_BODY(pmpi_improbe_f08_)
}
TSR_ALIASES(improbe, MPI_IMPROBE)
#define TSR_F_MRECV_BODY(PM)                                                                   \
  const CommInfo* ci = msg_take(PMPI_Message_f2c(*msg));                                       \
  FStatus fs(status);                                                                          \
  TSR_FCALL(PM, buf, count, type, msg, fs.p)                                                   \
  const MPI_Status s = to_c(fs.p);                                                             \
  on_recv(F_Mrecv, ci, &s);
TSR_WEAK(mrecv, mrecv)
extern "C" void tsr_f_mrecv(void* buf, F* count, F* type, F* msg, F* status, F* ierr) { TSR_F_MRECV_BODY(pmpi_mrecv_) }
extern "C" void tsr_f08_mrecv(void* buf, F* count, F* type, F* msg, F* status, F* ierr) {
  TSR_F_MRECV_BODY(pmpi_mrecv_f08_)
}
TSR_ALIASES(mrecv, MPI_MRECV)
#define TSR_F_IMRECV_BODY(PM)                                                                  \
  const CommInfo* ci = msg_take(PMPI_Message_f2c(*msg));                                       \
  TSR_FCALL(PM, buf, count, type, msg, req)                                                    \
  if (ci != nullptr) defer_recv(F_Imrecv, ci, PMPI_Request_f2c(*req), false);
TSR_WEAK(mrecv, imrecv)
extern "C" void tsr_f_imrecv(void* buf, F* count, F* type, F* msg, F* req, F* ierr) {
  TSR_F_IMRECV_BODY(pmpi_imrecv_)
}
extern "C" void tsr_f08_imrecv(void* buf, F* count, F* type, F* msg, F* req, F* ierr) {
  TSR_F_IMRECV_BODY(pmpi_imrecv_f08_)
}
TSR_ALIASES(imrecv, MPI_IMRECV)

// ----------------------------------------------------------------- completion
#define TSR_F_WAIT_BODY(PM)                                                                    \
  const MPI_Request h = PMPI_Request_f2c(*req);                                                \
  FStatus fs(status);                                                                          \
  TSR_FCALL(PM, req, fs.p)                                                                     \
  const MPI_Status s = to_c(fs.p);                                                             \
  req_done(h, &s);
TSR_WEAK(wait, wait)
extern "C" void tsr_f_wait(F* req, F* status, F* ierr) { TSR_F_WAIT_BODY(pmpi_wait_) }
extern "C" void tsr_f08_wait(F* req, F* status, F* ierr) { TSR_F_WAIT_BODY(pmpi_wait_f08_) }
TSR_ALIASES(wait, MPI_WAIT)

#define TSR_F_TEST_BODY(PM)                                                                    \
  const MPI_Request h = PMPI_Request_f2c(*req);                                                \
  FStatus fs(status);                                                                          \
  TSR_FCALL(PM, req, flag, fs.p)                                                               \
  if (*flag) {                                                                                 \
    const MPI_Status s = to_c(fs.p);                                                           \
    req_done(h, &s);                                                                           \
  }
TSR_WEAK(test, test)
extern "C" void tsr_f_test(F* req, F* flag, F* status, F* ierr) { TSR_F_TEST_BODY(pmpi_test_) }
extern "C" void tsr_f08_test(F* req, F* flag, F* status, F* ierr) { TSR_F_TEST_BODY(pmpi_test_f08_) }
TSR_ALIASES(test, MPI_TEST)

#define TSR_F_WAITALL_BODY(PM)                                                                 \
  const std::vector<MPI_Request> h = c_requests(*n, reqs);                                     \
  FStatuses fs(statuses, *n);                                                                  \
  TSR_FCALL(PM, n, reqs, fs.p)                                                                 \
  for (int i = 0; i < *n; ++i) {                                                               \
    const MPI_Status s = fs.at(i);                                                             \
    req_done(h[static_cast<size_t>(i)], &s);                                                   \
  }
TSR_WEAK(waitall, waitall)
extern "C" void tsr_f_waitall(F* n, F* reqs, F* statuses, F* ierr) { TSR_F_WAITALL_BODY(pmpi_waitall_) }
extern "C" void tsr_f08_waitall(F* n, F* reqs, F* statuses, F* ierr) { TSR_F_WAITALL_BODY(pmpi_waitall_f08_) }
TSR_ALIASES(waitall, MPI_WAITALL)

#define TSR_F_TESTALL_BODY(PM)                                                                 \
  const std::vector<MPI_Request> h = c_requests(*n, reqs);                                     \
  FStatuses fs(statuses, *n);                                                                  \
  TSR_FCALL(PM, n, reqs, flag, fs.p)                                                           \
  if (*flag)                                                                                   \
    for (int i = 0; i < *n; ++i) {                                                             \
      const MPI_Status s = fs.at(i);                                                           \
      req_done(h[static_cast<size_t>(i)], &s);                                                 \
    }
TSR_WEAK(testall, testall)
extern "C" void tsr_f_testall(F* n, F* reqs, F* flag, F* statuses, F* ierr) { TSR_F_TESTALL_BODY(pmpi_testall_) }
extern "C" void tsr_f08_testall(F* n, F* reqs, F* flag, F* statuses, F* ierr) {
  TSR_F_TESTALL_BODY(pmpi_testall_f08_)
}
TSR_ALIASES(testall, MPI_TESTALL)

// Fortran indices are 1-based.
#define TSR_F_WAITANY_BODY(PM)                                                                 \
  const std::vector<MPI_Request> h = c_requests(*n, reqs);                                     \
  FStatus fs(status);                                                                          \
  TSR_FCALL(PM, n, reqs, index, fs.p)                                                          \
  if (*index != MPI_UNDEFINED && *index >= 1 && *index <= *n) {                                \
    const MPI_Status s = to_c(fs.p);                                                           \
    req_done(h[static_cast<size_t>(*index - 1)], &s);                                          \
  }
TSR_WEAK(waitany, waitany)
extern "C" void tsr_f_waitany(F* n, F* reqs, F* index, F* status, F* ierr) { TSR_F_WAITANY_BODY(pmpi_waitany_) }
extern "C" void tsr_f08_waitany(F* n, F* reqs, F* index, F* status, F* ierr) {
  TSR_F_WAITANY_BODY(pmpi_waitany_f08_)
}
TSR_ALIASES(waitany, MPI_WAITANY)

#define TSR_F_TESTANY_BODY(PM)                                                                 \
  const std::vector<MPI_Request> h = c_requests(*n, reqs);                                     \
  FStatus fs(status);                                                                          \
  TSR_FCALL(PM, n, reqs, index, flag, fs.p)                                                    \
  if (*flag && *index != MPI_UNDEFINED && *index >= 1 && *index <= *n) {                       \
    const MPI_Status s = to_c(fs.p);                                                           \
    req_done(h[static_cast<size_t>(*index - 1)], &s);                                          \
  }
TSR_WEAK(testany, testany)
extern "C" void tsr_f_testany(F* n, F* reqs, F* index, F* flag, F* status, F* ierr) {
  TSR_F_TESTANY_BODY(pmpi_testany_)
}
extern "C" void tsr_f08_testany(F* n, F* reqs, F* index, F* flag, F* status, F* ierr) {
  TSR_F_TESTANY_BODY(pmpi_testany_f08_)
}
TSR_ALIASES(testany, MPI_TESTANY)

#define TSR_F_WAITSOME_BODY(PM)                                                                \
  const std::vector<MPI_Request> h = c_requests(*n, reqs);                                     \
  FStatuses fs(statuses, *n);                                                                  \
  TSR_FCALL(PM, n, reqs, outcount, indices, fs.p)                                              \
  if (*outcount != MPI_UNDEFINED)                                                              \
    for (int k = 0; k < *outcount; ++k) {                                                      \
      const int i = indices[k] - 1;                                                            \
      if (i < 0 || i >= *n) continue;                                                          \
      const MPI_Status s = fs.at(k);                                                           \
      req_done(h[static_cast<size_t>(i)], &s);                                                 \
    }
TSR_WEAK(waitsome, waitsome)
extern "C" void tsr_f_waitsome(F* n, F* reqs, F* outcount, F* indices, F* statuses, F* ierr) {
  TSR_F_WAITSOME_BODY(pmpi_waitsome_)
}
extern "C" void tsr_f08_waitsome(F* n, F* reqs, F* outcount, F* indices, F* statuses, F* ierr) {
  TSR_F_WAITSOME_BODY(pmpi_waitsome_f08_)
}
TSR_ALIASES(waitsome, MPI_WAITSOME)
TSR_WEAK(waitsome, testsome)
extern "C" void tsr_f_testsome(F* n, F* reqs, F* outcount, F* indices, F* statuses, F* ierr) {
  TSR_F_WAITSOME_BODY(pmpi_testsome_)
}
extern "C" void tsr_f08_testsome(F* n, F* reqs, F* outcount, F* indices, F* statuses, F* ierr) {
  TSR_F_WAITSOME_BODY(pmpi_testsome_f08_)
}
TSR_ALIASES(testsome, MPI_TESTSOME)

#define TSR_F_FREE_BODY(PM)                                                                    \
  const MPI_Request h = PMPI_Request_f2c(*req);                                                \
  TSR_FCALL(PM, req)                                                                           \
  req_freed(h);
TSR_WEAK(start, request_free)
extern "C" void tsr_f_request_free(F* req, F* ierr) { TSR_F_FREE_BODY(pmpi_request_free_) }
extern "C" void tsr_f08_request_free(F* req, F* ierr) { TSR_F_FREE_BODY(pmpi_request_free_f08_) }
TSR_ALIASES(request_free, MPI_REQUEST_FREE)

#define TSR_F_START_BODY(PM)                                                                   \
  TSR_FCALL(PM, req)                                                                           \
  req_started(PMPI_Request_f2c(*req));
TSR_WEAK(start, start)
extern "C" void tsr_f_start(F* req, F* ierr) { TSR_F_START_BODY(pmpi_start_) }
extern "C" void tsr_f08_start(F* req, F* ierr) { TSR_F_START_BODY(pmpi_start_f08_) }
TSR_ALIASES(start, MPI_START)
#define TSR_F_STARTALL_BODY(PM)                                                                \
  TSR_FCALL(PM, n, reqs)                                                                       \
  for (int i = 0; i < *n; ++i) req_started(PMPI_Request_f2c(reqs[i]));
TSR_WEAK(startall, startall)
extern "C" void tsr_f_startall(F* n, F* reqs, F* ierr) { TSR_F_STARTALL_BODY(pmpi_startall_) }
extern "C" void tsr_f08_startall(F* n, F* reqs, F* ierr) { TSR_F_STARTALL_BODY(pmpi_startall_f08_) }
TSR_ALIASES(startall, MPI_STARTALL)

// ---------------------------------------------------------------- collectives
// MAKE builds the Coll from the arguments (ci is the communicator's info);
// nonblocking forms charge at the call like the C wrappers.
#define TSR_F_COLL(name, NAME, SHAPE, FN, PARAMS, ARGS, COMM, MAKE)   \
  TSR_WEAK(SHAPE, name)                                               \
  extern "C" void tsr_f_##name PARAMS {                               \
    TSR_FCALL(pmpi_##name##_, TSR_UNPAREN ARGS)                       \
    if (const CommInfo* ci = fcomm(*COMM)) charge(FN, ci, MAKE);      \
  }                                                                   \
  extern "C" void tsr_f08_##name PARAMS {                             \
    TSR_FCALL(pmpi_##name##_f08_, TSR_UNPAREN ARGS)                   \
    if (const CommInfo* ci = fcomm(*COMM)) charge(FN, ci, MAKE);      \
  }                                                                   \
  TSR_ALIASES(name, NAME)
#define TSR_UNPAREN(...) __VA_ARGS__

TSR_F_COLL(barrier, MPI_BARRIER, barrier, F_Barrier, (F * comm, F * ierr), (comm), comm, c_barrier(ci))
TSR_F_COLL(ibarrier, MPI_IBARRIER, ibarrier, F_Ibarrier, (F * comm, F * r, F * ierr), (comm, r), comm, c_barrier(ci))
TSR_F_COLL(bcast, MPI_BCAST, bcast, F_Bcast, (void* buf, F* count, F* t, F* root, F* comm, F* ierr),
           (buf, count, t, root, comm), comm, c_bcast(ci, fbytes(*count, *t), *root))
TSR_F_COLL(ibcast, MPI_IBCAST, ibcast, F_Ibcast, (void* buf, F* count, F* t, F* root, F* comm, F* r, F* ierr),
           (buf, count, t, root, comm, r), comm, c_bcast(ci, fbytes(*count, *t), *root))
TSR_F_COLL(reduce, MPI_REDUCE, reduce, F_Reduce,
           (void* s, void* rb, F* count, F* t, F* op, F* root, F* comm, F* ierr), (s, rb, count, t, op, root, comm),
           comm, c_reduce(ci, fbytes(*count, *t), *root))
TSR_F_COLL(ireduce, MPI_IREDUCE, ireduce, F_Ireduce,
           (void* s, void* rb, F* count, F* t, F* op, F* root, F* comm, F* r, F* ierr),
           (s, rb, count, t, op, root, comm, r), comm, c_reduce(ci, fbytes(*count, *t), *root))
TSR_F_COLL(allreduce, MPI_ALLREDUCE, allreduce, F_Allreduce,
           (void* s, void* rb, F* count, F* t, F* op, F* comm, F* ierr), (s, rb, count, t, op, comm), comm,
           c_allreduce(ci, *count, PMPI_Type_f2c(*t)))
TSR_F_COLL(iallreduce, MPI_IALLREDUCE, iallreduce, F_Iallreduce,
           (void* s, void* rb, F* count, F* t, F* op, F* comm, F* r, F* ierr), (s, rb, count, t, op, comm, r), comm,
           c_allreduce(ci, *count, PMPI_Type_f2c(*t)))
TSR_F_COLL(gather, MPI_GATHER, gather, F_Gather,
           (void* s, F* sc, F* st, void* rb, F* rc, F* rt, F* root, F* comm, F* ierr),
           (s, sc, st, rb, rc, rt, root, comm), comm, c_gather(ci, fbytes(*sc, *st), fbytes(*rc, *rt), *root))
TSR_F_COLL(igather, MPI_IGATHER, igather, F_Igather,
           (void* s, F* sc, F* st, void* rb, F* rc, F* rt, F* root, F* comm, F* r, F* ierr),
           (s, sc, st, rb, rc, rt, root, comm, r), comm, c_gather(ci, fbytes(*sc, *st), fbytes(*rc, *rt), *root))
TSR_F_COLL(gatherv, MPI_GATHERV, gatherv, F_Gatherv,
           (void* s, F* sc, F* st, void* rb, F* rcs, F* displs, F* rt, F* root, F* comm, F* ierr),
           (s, sc, st, rb, rcs, displs, rt, root, comm), comm,
           c_gatherv(ci, fbytes(*sc, *st), rcs, PMPI_Type_f2c(*rt), *root))
TSR_F_COLL(igatherv, MPI_IGATHERV, igatherv, F_Igatherv,
           (void* s, F* sc, F* st, void* rb, F* rcs, F* displs, F* rt, F* root, F* comm, F* r, F* ierr),
           (s, sc, st, rb, rcs, displs, rt, root, comm, r), comm,
           c_gatherv(ci, fbytes(*sc, *st), rcs, PMPI_Type_f2c(*rt), *root))
TSR_F_COLL(scatter, MPI_SCATTER, gather, F_Scatter,
           (void* s, F* sc, F* st, void* rb, F* rc, F* rt, F* root, F* comm, F* ierr),
           (s, sc, st, rb, rc, rt, root, comm), comm, c_scatter(ci, fbytes(*sc, *st), fbytes(*rc, *rt), *root))
TSR_F_COLL(iscatter, MPI_ISCATTER, igather, F_Iscatter,
           (void* s, F* sc, F* st, void* rb, F* rc, F* rt, F* root, F* comm, F* r, F* ierr),
           (s, sc, st, rb, rc, rt, root, comm, r), comm, c_scatter(ci, fbytes(*sc, *st), fbytes(*rc, *rt), *root))
TSR_F_COLL(scatterv, MPI_SCATTERV, scatterv, F_Scatterv,
           (void* s, F* scs, F* displs, F* st, void* rb, F* rc, F* rt, F* root, F* comm, F* ierr),
           (s, scs, displs, st, rb, rc, rt, root, comm), comm,
           c_scatterv(ci, scs, PMPI_Type_f2c(*st), fbytes(*rc, *rt), *root))
TSR_F_COLL(iscatterv, MPI_ISCATTERV, iscatterv, F_Iscatterv,
           (void* s, F* scs, F* displs, F* st, void* rb, F* rc, F* rt, F* root, F* comm, F* r, F* ierr),
           (s, scs, displs, st, rb, rc, rt, root, comm, r), comm,
           c_scatterv(ci, scs, PMPI_Type_f2c(*st), fbytes(*rc, *rt), *root))
TSR_F_COLL(allgather, MPI_ALLGATHER, allgather, F_Allgather,
           (void* s, F* sc, F* st, void* rb, F* rc, F* rt, F* comm, F* ierr), (s, sc, st, rb, rc, rt, comm), comm,
           c_allgather(ci, fbytes(*sc, *st), fbytes(*rc, *rt)))
TSR_F_COLL(iallgather, MPI_IALLGATHER, iallgather, F_Iallgather,
           (void* s, F* sc, F* st, void* rb, F* rc, F* rt, F* comm, F* r, F* ierr), (s, sc, st, rb, rc, rt, comm, r),
           comm, c_allgather(ci, fbytes(*sc, *st), fbytes(*rc, *rt)))
TSR_F_COLL(allgatherv, MPI_ALLGATHERV, allgatherv, F_Allgatherv,
           (void* s, F* sc, F* st, void* rb, F* rcs, F* displs, F* rt, F* comm, F* ierr),
           (s, sc, st, rb, rcs, displs, rt, comm), comm, c_allgatherv(ci, fbytes(*sc, *st), rcs, PMPI_Type_f2c(*rt)))
TSR_F_COLL(iallgatherv, MPI_IALLGATHERV, iallgatherv, F_Iallgatherv,
           (void* s, F* sc, F* st, void* rb, F* rcs, F* displs, F* rt, F* comm, F* r, F* ierr),
           (s, sc, st, rb, rcs, displs, rt, comm, r), comm,
           c_allgatherv(ci, fbytes(*sc, *st), rcs, PMPI_Type_f2c(*rt)))
TSR_F_COLL(alltoall, MPI_ALLTOALL, allgather, F_Alltoall,
           (void* s, F* sc, F* st, void* rb, F* rc, F* rt, F* comm, F* ierr), (s, sc, st, rb, rc, rt, comm), comm,
           c_alltoall(ci, fbytes(*rc, *rt)))
TSR_F_COLL(ialltoall, MPI_IALLTOALL, iallgather, F_Ialltoall,
           (void* s, F* sc, F* st, void* rb, F* rc, F* rt, F* comm, F* r, F* ierr), (s, sc, st, rb, rc, rt, comm, r),
           comm, c_alltoall(ci, fbytes(*rc, *rt)))
#define TSR_F_A2AV_MAKE                                                                            \
  c_alltoallv(ci,                                                                                  \
              fortran_in_place(s) ? per_peer(rcs, PMPI_Type_f2c(*rt), group_size(ci))              \
                                  : per_peer(scs, PMPI_Type_f2c(*st), group_size(ci)),             \
              per_peer(rcs, PMPI_Type_f2c(*rt), group_size(ci)))
TSR_F_COLL(alltoallv, MPI_ALLTOALLV, alltoallv, F_Alltoallv,
           (void* s, F* scs, F* sds, F* st, void* rb, F* rcs, F* rds, F* rt, F* comm, F* ierr),
           (s, scs, sds, st, rb, rcs, rds, rt, comm), comm, TSR_F_A2AV_MAKE)
TSR_F_COLL(ialltoallv, MPI_IALLTOALLV, ialltoallv, F_Ialltoallv,
           (void* s, F* scs, F* sds, F* st, void* rb, F* rcs, F* rds, F* rt, F* comm, F* r, F* ierr),
           (s, scs, sds, st, rb, rcs, rds, rt, comm, r), comm, TSR_F_A2AV_MAKE)
TSR_F_COLL(reduce_scatter, MPI_REDUCE_SCATTER, redscat, F_Reduce_scatter,
           (void* s, void* rb, F* rcs, F* t, F* op, F* comm, F* ierr), (s, rb, rcs, t, op, comm), comm,
           c_reduce_scatter(ci, rcs, PMPI_Type_f2c(*t)))
TSR_F_COLL(ireduce_scatter, MPI_IREDUCE_SCATTER, iredscat, F_Ireduce_scatter,
           (void* s, void* rb, F* rcs, F* t, F* op, F* comm, F* r, F* ierr), (s, rb, rcs, t, op, comm, r), comm,
           c_reduce_scatter(ci, rcs, PMPI_Type_f2c(*t)))
TSR_F_COLL(reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK, allreduce, F_Reduce_scatter_block,
           (void* s, void* rb, F* rc, F* t, F* op, F* comm, F* ierr), (s, rb, rc, t, op, comm), comm,
           c_reduce_scatter_block(ci, fbytes(*rc, *t)))
TSR_F_COLL(ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK, iallreduce, F_Ireduce_scatter_block,
           (void* s, void* rb, F* rc, F* t, F* op, F* comm, F* r, F* ierr), (s, rb, rc, t, op, comm, r), comm,
           c_reduce_scatter_block(ci, fbytes(*rc, *t)))
TSR_F_COLL(scan, MPI_SCAN, allreduce, F_Scan, (void* s, void* rb, F* count, F* t, F* op, F* comm, F* ierr),
           (s, rb, count, t, op, comm), comm, c_scan(ci, fbytes(*count, *t)))
TSR_F_COLL(iscan, MPI_ISCAN, iallreduce, F_Iscan,
           (void* s, void* rb, F* count, F* t, F* op, F* comm, F* r, F* ierr), (s, rb, count, t, op, comm, r), comm,
           c_scan(ci, fbytes(*count, *t)))
TSR_F_COLL(exscan, MPI_EXSCAN, allreduce, F_Exscan, (void* s, void* rb, F* count, F* t, F* op, F* comm, F* ierr),
           (s, rb, count, t, op, comm), comm, c_scan(ci, fbytes(*count, *t)))
TSR_F_COLL(iexscan, MPI_IEXSCAN, iallreduce, F_Iexscan,
           (void* s, void* rb, F* count, F* t, F* op, F* comm, F* r, F* ierr), (s, rb, count, t, op, comm, r), comm,
           c_scan(ci, fbytes(*count, *t)))


// ---------------------------------------------- alltoallw, neighbourhood
namespace {
std::vector<MPI_Datatype> c_types(size_t n, const F* t) {
  std::vector<MPI_Datatype> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = PMPI_Type_f2c(t[i]);
  return v;
}
using alltoallw_fn = void(void*, F*, F*, F*, void*, F*, F*, F*, F*, F*);
using ialltoallw_fn = void(void*, F*, F*, F*, void*, F*, F*, F*, F*, F*, F*);
using nbw_fn = void(void*, F*, MPI_Aint*, F*, void*, F*, MPI_Aint*, F*, F*, F*);
using inbw_fn = void(void*, F*, MPI_Aint*, F*, void*, F*, MPI_Aint*, F*, F*, F*, F*);
}  // namespace

#define TSR_F_A2AW_MAKE                                                                              \
  c_alltoallv(ci,                                                                                    \
              fortran_in_place(s) ? per_peer_w(rcs, c_types(group_size(ci), rts).data(), group_size(ci)) \
                                  : per_peer_w(scs, c_types(group_size(ci), sts).data(), group_size(ci)), \
              per_peer_w(rcs, c_types(group_size(ci), rts).data(), group_size(ci)))
TSR_F_COLL(alltoallw, MPI_ALLTOALLW, alltoallw, F_Alltoallw,
           (void* s, F* scs, F* sds, F* sts, void* rb, F* rcs, F* rds, F* rts, F* comm, F* ierr),
           (s, scs, sds, sts, rb, rcs, rds, rts, comm), comm, TSR_F_A2AW_MAKE)
TSR_F_COLL(ialltoallw, MPI_IALLTOALLW, ialltoallw, F_Ialltoallw,
           (void* s, F* scs, F* sds, F* sts, void* rb, F* rcs, F* rds, F* rts, F* comm, F* r, F* ierr),
           (s, scs, sds, sts, rb, rcs, rds, rts, comm, r), comm, TSR_F_A2AW_MAKE)

// Neighbourhood collectives: exact edges from the communicator's topology.
#define TSR_F_NB(name, NAME, SHAPE, FN, PARAMS, ARGS, TO, FROM)                 \
  TSR_WEAK(SHAPE, name)                                                         \
  extern "C" void tsr_f_##name PARAMS {                                         \
    TSR_FCALL(pmpi_##name##_, TSR_UNPAREN ARGS)                                 \
    TSR_F_NB_CHARGE(FN, TO, FROM)                                               \
  }                                                                             \
  extern "C" void tsr_f08_##name PARAMS {                                       \
    TSR_FCALL(pmpi_##name##_f08_, TSR_UNPAREN ARGS)                             \
    TSR_F_NB_CHARGE(FN, TO, FROM)                                               \
  }                                                                             \
  TSR_ALIASES(name, NAME)
#define TSR_F_NB_CHARGE(FN, TO, FROM)                                           \
  const MPI_Comm cc = PMPI_Comm_f2c(*comm);                                     \
  if (const CommInfo* ci = comm_info(cc)) {                                     \
    std::vector<int> in, out;                                                   \
    neighbours(cc, &in, &out);                                                  \
    charge(FN, ci, c_neighbour(in, out, TO, FROM));                             \
  }
TSR_F_NB(neighbor_allgather, MPI_NEIGHBOR_ALLGATHER, allgather, F_Neighbor_allgather,
         (void* s, F* sc, F* st, void* rb, F* rc, F* rt, F* comm, F* ierr), (s, sc, st, rb, rc, rt, comm),
         std::vector<uint64_t>(out.size(), fbytes(*sc, *st)), std::vector<uint64_t>(in.size(), fbytes(*rc, *rt)))
TSR_F_NB(ineighbor_allgather, MPI_INEIGHBOR_ALLGATHER, iallgather, F_Ineighbor_allgather,
         (void* s, F* sc, F* st, void* rb, F* rc, F* rt, F* comm, F* r, F* ierr), (s, sc, st, rb, rc, rt, comm, r),
         std::vector<uint64_t>(out.size(), fbytes(*sc, *st)), std::vector<uint64_t>(in.size(), fbytes(*rc, *rt)))
TSR_F_NB(neighbor_allgatherv, MPI_NEIGHBOR_ALLGATHERV, allgatherv, F_Neighbor_allgatherv,
         (void* s, F* sc, F* st, void* rb, F* rcs, F* displs, F* rt, F* comm, F* ierr),
         (s, sc, st, rb, rcs, displs, rt, comm), std::vector<uint64_t>(out.size(), fbytes(*sc, *st)),
         per_peer(rcs, PMPI_Type_f2c(*rt), in.size()))
TSR_F_NB(ineighbor_allgatherv, MPI_INEIGHBOR_ALLGATHERV, iallgatherv, F_Ineighbor_allgatherv,
         (void* s, F* sc, F* st, void* rb, F* rcs, F* displs, F* rt, F* comm, F* r, F* ierr),
         (s, sc, st, rb, rcs, displs, rt, comm, r), std::vector<uint64_t>(out.size(), fbytes(*sc, *st)),
         per_peer(rcs, PMPI_Type_f2c(*rt), in.size()))
TSR_F_NB(neighbor_alltoall, MPI_NEIGHBOR_ALLTOALL, allgather, F_Neighbor_alltoall,
         (void* s, F* sc, F* st, void* rb, F* rc, F* rt, F* comm, F* ierr), (s, sc, st, rb, rc, rt, comm),
         std::vector<uint64_t>(out.size(), fbytes(*sc, *st)), std::vector<uint64_t>(in.size(), fbytes(*rc, *rt)))
TSR_F_NB(ineighbor_alltoall, MPI_INEIGHBOR_ALLTOALL, iallgather, F_Ineighbor_alltoall,
         (void* s, F* sc, F* st, void* rb, F* rc, F* rt, F* comm, F* r, F* ierr), (s, sc, st, rb, rc, rt, comm, r),
         std::vector<uint64_t>(out.size(), fbytes(*sc, *st)), std::vector<uint64_t>(in.size(), fbytes(*rc, *rt)))
TSR_F_NB(neighbor_alltoallv, MPI_NEIGHBOR_ALLTOALLV, alltoallv, F_Neighbor_alltoallv,
         (void* s, F* scs, F* sds, F* st, void* rb, F* rcs, F* rds, F* rt, F* comm, F* ierr),
         (s, scs, sds, st, rb, rcs, rds, rt, comm), per_peer(scs, PMPI_Type_f2c(*st), out.size()),
         per_peer(rcs, PMPI_Type_f2c(*rt), in.size()))
TSR_F_NB(ineighbor_alltoallv, MPI_INEIGHBOR_ALLTOALLV, ialltoallv, F_Ineighbor_alltoallv,
         (void* s, F* scs, F* sds, F* st, void* rb, F* rcs, F* rds, F* rt, F* comm, F* r, F* ierr),
         (s, scs, sds, st, rb, rcs, rds, rt, comm, r), per_peer(scs, PMPI_Type_f2c(*st), out.size()),
         per_peer(rcs, PMPI_Type_f2c(*rt), in.size()))
TSR_F_NB(neighbor_alltoallw, MPI_NEIGHBOR_ALLTOALLW, nbw, F_Neighbor_alltoallw,
         (void* s, F* scs, MPI_Aint* sds, F* sts, void* rb, F* rcs, MPI_Aint* rds, F* rts, F* comm, F* ierr),
         (s, scs, sds, sts, rb, rcs, rds, rts, comm), per_peer_w(scs, c_types(out.size(), sts).data(), out.size()),
         per_peer_w(rcs, c_types(in.size(), rts).data(), in.size()))
TSR_F_NB(ineighbor_alltoallw, MPI_INEIGHBOR_ALLTOALLW, inbw, F_Ineighbor_alltoallw,
         (void* s, F* scs, MPI_Aint* sds, F* sts, void* rb, F* rcs, MPI_Aint* rds, F* rts, F* comm, F* r, F* ierr),
         (s, scs, sds, sts, rb, rcs, rds, rts, comm, r),
         per_peer_w(scs, c_types(out.size(), sts).data(), out.size()),
         per_peer_w(rcs, c_types(in.size(), rts).data(), in.size()))

// ------------------------------------------------------------------ one-sided
namespace {
using put_fn = void(void*, F*, F*, F*, MPI_Aint*, F*, F*, F*, F*);
using rput_fn = void(void*, F*, F*, F*, MPI_Aint*, F*, F*, F*, F*, F*);
using acc_fn = void(void*, F*, F*, F*, MPI_Aint*, F*, F*, F*, F*, F*);
using racc_fn = void(void*, F*, F*, F*, MPI_Aint*, F*, F*, F*, F*, F*, F*);
using gacc_fn = void(void*, F*, F*, void*, F*, F*, F*, MPI_Aint*, F*, F*, F*, F*, F*);
using rgacc_fn = void(void*, F*, F*, void*, F*, F*, F*, MPI_Aint*, F*, F*, F*, F*, F*, F*);
using fop_fn = void(void*, void*, F*, F*, MPI_Aint*, F*, F*, F*);
using cas_fn = void(void*, void*, void*, F*, F*, MPI_Aint*, F*, F*);
void rma(Fn fn, F win, F target, uint64_t sent, uint64_t got) {
  const CommInfo* ci = win_info(PMPI_Win_f2c(win));
  if (sent > 0 || got == 0) on_send(fn, ci, target, sent);
  if (got > 0) on_recv_bytes(fn, ci, target, got, sent == 0);
}
}  // namespace
#define TSR_F_RMA(name, NAME, SHAPE, PARAMS, ARGS, CHARGE) \
  TSR_WEAK(SHAPE, name)                                   \
  extern "C" void tsr_f_##name PARAMS {                   \
    TSR_FCALL(pmpi_##name##_, TSR_UNPAREN ARGS)           \
    CHARGE;                                               \
  }                                                       \
  extern "C" void tsr_f08_##name PARAMS {                 \
    TSR_FCALL(pmpi_##name##_f08_, TSR_UNPAREN ARGS)       \
    CHARGE;                                               \
  }                                                       \
  TSR_ALIASES(name, NAME)
TSR_F_RMA(put, MPI_PUT, put, (void* o, F* oc, F* ot, F* tr, MPI_Aint* td, F* tc, F* tt, F* w, F* ierr),
          (o, oc, ot, tr, td, tc, tt, w), rma(F_Put, *w, *tr, fbytes(*oc, *ot), 0))
TSR_F_RMA(get, MPI_GET, put, (void* o, F* oc, F* ot, F* tr, MPI_Aint* td, F* tc, F* tt, F* w, F* ierr),
          (o, oc, ot, tr, td, tc, tt, w), rma(F_Get, *w, *tr, 0, fbytes(*oc, *ot)))
TSR_F_RMA(rput, MPI_RPUT, rput, (void* o, F* oc, F* ot, F* tr, MPI_Aint* td, F* tc, F* tt, F* w, F* r, F* ierr),
          (o, oc, ot, tr, td, tc, tt, w, r), rma(F_Rput, *w, *tr, fbytes(*oc, *ot), 0))
TSR_F_RMA(rget, MPI_RGET, rput, (void* o, F* oc, F* ot, F* tr, MPI_Aint* td, F* tc, F* tt, F* w, F* r, F* ierr),
          (o, oc, ot, tr, td, tc, tt, w, r), rma(F_Rget, *w, *tr, 0, fbytes(*oc, *ot)))
TSR_F_RMA(accumulate, MPI_ACCUMULATE, acc,
          (void* o, F* oc, F* ot, F* tr, MPI_Aint* td, F* tc, F* tt, F* op, F* w, F* ierr),
          (o, oc, ot, tr, td, tc, tt, op, w), rma(F_Accumulate, *w, *tr, fbytes(*oc, *ot), 0))
TSR_F_RMA(raccumulate, MPI_RACCUMULATE, racc,
          (void* o, F* oc, F* ot, F* tr, MPI_Aint* td, F* tc, F* tt, F* op, F* w, F* r, F* ierr),
          (o, oc, ot, tr, td, tc, tt, op, w, r), rma(F_Raccumulate, *w, *tr, fbytes(*oc, *ot), 0))
TSR_F_RMA(get_accumulate, MPI_GET_ACCUMULATE, gacc,
          (void* o, F* oc, F* ot, void* res, F* rc, F* rt, F* tr, MPI_Aint* td, F* tc, F* tt, F* op, F* w, F* ierr),
          (o, oc, ot, res, rc, rt, tr, td, tc, tt, op, w),
          rma(F_Get_accumulate, *w, *tr, fbytes(*oc, *ot), fbytes(*rc, *rt)))
TSR_F_RMA(rget_accumulate, MPI_RGET_ACCUMULATE, rgacc,
          (void* o, F* oc, F* ot, void* res, F* rc, F* rt, F* tr, MPI_Aint* td, F* tc, F* tt, F* op, F* w, F* r,
           F* ierr),
          (o, oc, ot, res, rc, rt, tr, td, tc, tt, op, w, r),
          rma(F_Rget_accumulate, *w, *tr, fbytes(*oc, *ot), fbytes(*rc, *rt)))
TSR_F_RMA(fetch_and_op, MPI_FETCH_AND_OP, fop, (void* o, void* res, F* t, F* tr, MPI_Aint* td, F* op, F* w, F* ierr),
          (o, res, t, tr, td, op, w), rma(F_Fetch_and_op, *w, *tr, fbytes(1, *t), fbytes(1, *t)))
TSR_F_RMA(compare_and_swap, MPI_COMPARE_AND_SWAP, cas,
          (void* o, void* cmp, void* res, F* t, F* tr, MPI_Aint* td, F* w, F* ierr), (o, cmp, res, t, tr, td, w),
          rma(F_Compare_and_swap, *w, *tr, fbytes(2, *t), fbytes(1, *t)))

// --------------------------------------------------------------------- MPI-IO
namespace {
using fio_fn = void(F*, void*, F*, F*, F*, F*);
using fio_at_fn = void(F*, MPI_Offset*, void*, F*, F*, F*, F*);
using fend_fn = void(F*, void*, F*, F*);
void fdisk_status(Fn fn, bool write, const F* fs) {
  const MPI_Status s = to_c(fs);
  on_disk(fn, write, status_bytes(&s));
}
void fdisk_defer(Fn fn, bool write, F req) {
  Deferred d;
  d.f = fn;
  d.kind = write ? Deferred::disk_write : Deferred::disk_read;
  req_add(PMPI_Request_f2c(req), std::move(d));
}
}  // namespace
#define TSR_F_FILE(name, NAME, FN, WRITE)                                                        \
  TSR_WEAK(fio, file_##name)                                                                     \
  extern "C" void tsr_f_file_##name(F* fh, void* buf, F* count, F* type, F* status, F* ierr) {   \
    FStatus fs(status);                                                                          \
    TSR_FCALL(pmpi_file_##name##_, fh, buf, count, type, fs.p)                                   \
    fdisk_status(FN, WRITE, fs.p);                                                               \
  }                                                                                              \
  extern "C" void tsr_f08_file_##name(F* fh, void* buf, F* count, F* type, F* status, F* ierr) { \
    FStatus fs(status);                                                                          \
    TSR_FCALL(pmpi_file_##name##_f08_, fh, buf, count, type, fs.p)                               \
    fdisk_status(FN, WRITE, fs.p);                                                               \
  }                                                                                              \
  TSR_ALIASES(file_##name, NAME)
#define TSR_F_FILE_AT(name, NAME, FN, WRITE)                                                     \
  TSR_WEAK(fio_at, file_##name)                                                                  \
  extern "C" void tsr_f_file_##name(F* fh, MPI_Offset* off, void* buf, F* count, F* type, F* status, F* ierr) { \
    FStatus fs(status);                                                                          \
    TSR_FCALL(pmpi_file_##name##_, fh, off, buf, count, type, fs.p)                              \
    fdisk_status(FN, WRITE, fs.p);                                                               \
  }                                                                                              \
  extern "C" void tsr_f08_file_##name(F* fh, MPI_Offset* off, void* buf, F* count, F* type, F* status, F* ierr) { \
    FStatus fs(status);                                                                          \
    TSR_FCALL(pmpi_file_##name##_f08_, fh, off, buf, count, type, fs.p)                          \
    fdisk_status(FN, WRITE, fs.p);                                                               \
  }                                                                                              \
  TSR_ALIASES(file_##name, NAME)
#define TSR_F_FILE_I(name, NAME, FN, WRITE)                                                      \
  TSR_WEAK(fio, file_##name)                                                                     \
  extern "C" void tsr_f_file_##name(F* fh, void* buf, F* count, F* type, F* req, F* ierr) {      \
    TSR_FCALL(pmpi_file_##name##_, fh, buf, count, type, req)                                    \
    fdisk_defer(FN, WRITE, *req);                                                                \
  }                                                                                              \
  extern "C" void tsr_f08_file_##name(F* fh, void* buf, F* count, F* type, F* req, F* ierr) {    \
    TSR_FCALL(pmpi_file_##name##_f08_, fh, buf, count, type, req)                                \
    fdisk_defer(FN, WRITE, *req);                                                                \
  }                                                                                              \
  TSR_ALIASES(file_##name, NAME)
#define TSR_F_FILE_I_AT(name, NAME, FN, WRITE)                                                   \
  TSR_WEAK(fio_at, file_##name)                                                                  \
  extern "C" void tsr_f_file_##name(F* fh, MPI_Offset* off, void* buf, F* count, F* type, F* req, F* ierr) { \
    TSR_FCALL(pmpi_file_##name##_, fh, off, buf, count, type, req)                               \
    fdisk_defer(FN, WRITE, *req);                                                                \
  }                                                                                              \
  extern "C" void tsr_f08_file_##name(F* fh, MPI_Offset* off, void* buf, F* count, F* type, F* req, F* ierr) { \
    TSR_FCALL(pmpi_file_##name##_f08_, fh, off, buf, count, type, req)                           \
    fdisk_defer(FN, WRITE, *req);                                                                \
  }                                                                                              \
  TSR_ALIASES(file_##name, NAME)
#define TSR_F_FILE_END(name, NAME, FN, WRITE)                                                    \
  TSR_WEAK(fend, file_##name)                                                                    \
  extern "C" void tsr_f_file_##name(F* fh, void* buf, F* status, F* ierr) {                      \
    FStatus fs(status);                                                                          \
    TSR_FCALL(pmpi_file_##name##_, fh, buf, fs.p)                                                \
    fdisk_status(FN, WRITE, fs.p);                                                               \
  }                                                                                              \
  extern "C" void tsr_f08_file_##name(F* fh, void* buf, F* status, F* ierr) {                    \
    FStatus fs(status);                                                                          \
    TSR_FCALL(pmpi_file_##name##_f08_, fh, buf, fs.p)                                            \
    fdisk_status(FN, WRITE, fs.p);                                                               \
  }                                                                                              \
  TSR_ALIASES(file_##name, NAME)
TSR_F_FILE(read, MPI_FILE_READ, F_File_read, false)
TSR_F_FILE(read_all, MPI_FILE_READ_ALL, F_File_read_all, false)
TSR_F_FILE(read_shared, MPI_FILE_READ_SHARED, F_File_read_shared, false)
TSR_F_FILE(read_ordered, MPI_FILE_READ_ORDERED, F_File_read_ordered, false)
TSR_F_FILE(write, MPI_FILE_WRITE, F_File_write, true)
TSR_F_FILE(write_all, MPI_FILE_WRITE_ALL, F_File_write_all, true)
TSR_F_FILE(write_shared, MPI_FILE_WRITE_SHARED, F_File_write_shared, true)
TSR_F_FILE(write_ordered, MPI_FILE_WRITE_ORDERED, F_File_write_ordered, true)
TSR_F_FILE_AT(read_at, MPI_FILE_READ_AT, F_File_read_at, false)
TSR_F_FILE_AT(read_at_all, MPI_FILE_READ_AT_ALL, F_File_read_at_all, false)
TSR_F_FILE_AT(write_at, MPI_FILE_WRITE_AT, F_File_write_at, true)
TSR_F_FILE_AT(write_at_all, MPI_FILE_WRITE_AT_ALL, F_File_write_at_all, true)
TSR_F_FILE_I(iread, MPI_FILE_IREAD, F_File_iread, false)
TSR_F_FILE_I(iread_all, MPI_FILE_IREAD_ALL, F_File_iread_all, false)
TSR_F_FILE_I(iread_shared, MPI_FILE_IREAD_SHARED, F_File_iread_shared, false)
TSR_F_FILE_I(iwrite, MPI_FILE_IWRITE, F_File_iwrite, true)
TSR_F_FILE_I(iwrite_all, MPI_FILE_IWRITE_ALL, F_File_iwrite_all, true)
TSR_F_FILE_I(iwrite_shared, MPI_FILE_IWRITE_SHARED, F_File_iwrite_shared, true)
TSR_F_FILE_I_AT(iread_at, MPI_FILE_IREAD_AT, F_File_iread_at, false)
TSR_F_FILE_I_AT(iread_at_all, MPI_FILE_IREAD_AT_ALL, F_File_iread_at_all, false)
TSR_F_FILE_I_AT(iwrite_at, MPI_FILE_IWRITE_AT, F_File_iwrite_at, true)
TSR_F_FILE_I_AT(iwrite_at_all, MPI_FILE_IWRITE_AT_ALL, F_File_iwrite_at_all, true)
TSR_F_FILE_END(read_all_end, MPI_FILE_READ_ALL_END, F_File_read_all_end, false)
TSR_F_FILE_END(read_at_all_end, MPI_FILE_READ_AT_ALL_END, F_File_read_at_all_end, false)
TSR_F_FILE_END(read_ordered_end, MPI_FILE_READ_ORDERED_END, F_File_read_ordered_end, false)
TSR_F_FILE_END(write_all_end, MPI_FILE_WRITE_ALL_END, F_File_write_all_end, true)
TSR_F_FILE_END(write_at_all_end, MPI_FILE_WRITE_AT_ALL_END, F_File_write_at_all_end, true)
TSR_F_FILE_END(write_ordered_end, MPI_FILE_WRITE_ORDERED_END, F_File_write_ordered_end, true)

#elif defined(TSR_PMPI_MPICH)
// --------------------------------------------------------------------- MPICH
// Only the mpi_f08 routines that call PMPI_ directly. TYPE(MPI_Status) is
// MPI_F08_status; MPI_STATUS(ES)_IGNORE are MPI_F08_STATUS(ES)_IGNORE.
namespace {

struct FStatus {
  MPI_F08_status own;
  MPI_F08_status* p;
  explicit FStatus(MPI_F08_status* caller)
      : own(), p(caller == nullptr || caller == MPI_F08_STATUS_IGNORE ? &own : caller) {}
};
struct FStatuses {
  std::vector<MPI_F08_status> own;
  MPI_F08_status* p;
  FStatuses(MPI_F08_status* caller, F n) {
    if (caller == nullptr || caller == MPI_F08_STATUSES_IGNORE) {
      own.resize(static_cast<size_t>(n > 0 ? n : 1));
      p = own.data();
    } else {
      p = caller;
    }
  }
};
MPI_Status to_c(const MPI_F08_status* fs) {
  MPI_Status s;
  PMPI_Status_f082c(fs, &s);
  return s;
}
std::vector<MPI_Request> c_requests(F n, const F* r) {
  std::vector<MPI_Request> v(static_cast<size_t>(n > 0 ? n : 0));
  for (size_t i = 0; i < v.size(); ++i) v[i] = PMPI_Request_f2c(r[i]);
  return v;
}
using S = MPI_F08_status;

}  // namespace

// MPICH exports no pmpi_*_f08_ entries: the wrappers call the library's own
// mpi_*_f08_ (the next definition after this tool, found with RTLD_NEXT),
// which converts the arguments and calls the C PMPI_ function.
template <class T>
T* next(T*, const char* name) {
  void* p = ::dlsym(RTLD_NEXT, name);
  if (p == nullptr) missing(name);
  return reinterpret_cast<T*>(p);
}
#define TSR_NEXT(NAME, ...)    \
  using NAME##_type = __VA_ARGS__; \
  static NAME##_type* const NAME##_next = next(static_cast<NAME##_type*>(nullptr), #NAME);

extern "C" {
void mpi_init_f08_(F* ierr) {
  TSR_NEXT(mpi_init_f08_, void(F*))
  F ie_ = 0;
  F* e = ierr != nullptr ? ierr : &ie_;
  {
    Nest n_;
    mpi_init_f08__next(e);
  }
  if (*e == MPI_SUCCESS && t_depth == 0) {
    int provided = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&provided);
    setup(provided);
  }
}
void mpi_init_thread_f08_(F* required, F* provided, F* ierr) {
  TSR_NEXT(mpi_init_thread_f08_, void(F*, F*, F*))
  F ie_ = 0;
  F* e = ierr != nullptr ? ierr : &ie_;
  {
    Nest n_;
    mpi_init_thread_f08__next(required, provided, e);
  }
  if (*e == MPI_SUCCESS && t_depth == 0) setup(*provided);
}
void mpi_finalize_f08_(F* ierr) {
  TSR_NEXT(mpi_finalize_f08_, void(F*))
  F ie_ = 0;
  if (t_depth == 0) finalize();
  Nest n_;
  mpi_finalize_f08__next(ierr != nullptr ? ierr : &ie_);
}
void mpi_wait_f08_(F* req, S* status, F* ierr) {
  TSR_NEXT(mpi_wait_f08_, void(F*, S*, F*))
  const MPI_Request h = PMPI_Request_f2c(*req);
  FStatus fs(status);
  TSR_FCALL(mpi_wait_f08__next, req, fs.p)
  const MPI_Status s = to_c(fs.p);
  req_done(h, &s);
}
void mpi_test_f08_(F* req, F* flag, S* status, F* ierr) {
  TSR_NEXT(mpi_test_f08_, void(F*, F*, S*, F*))
  const MPI_Request h = PMPI_Request_f2c(*req);
  FStatus fs(status);
  TSR_FCALL(mpi_test_f08__next, req, flag, fs.p)
  if (*flag) {
    const MPI_Status s = to_c(fs.p);
    req_done(h, &s);
  }
}
void mpi_waitall_f08_(F* n, F* reqs, S* statuses, F* ierr) {
  TSR_NEXT(mpi_waitall_f08_, void(F*, F*, S*, F*))
  const std::vector<MPI_Request> h = c_requests(*n, reqs);
  FStatuses fs(statuses, *n);
  TSR_FCALL(mpi_waitall_f08__next, n, reqs, fs.p)
  for (int i = 0; i < *n; ++i) {
    const MPI_Status s = to_c(&fs.p[i]);
    req_done(h[static_cast<size_t>(i)], &s);
  }
}
void mpi_testall_f08_(F* n, F* reqs, F* flag, S* statuses, F* ierr) {
  TSR_NEXT(mpi_testall_f08_, void(F*, F*, F*, S*, F*))
  const std::vector<MPI_Request> h = c_requests(*n, reqs);
  FStatuses fs(statuses, *n);
  TSR_FCALL(mpi_testall_f08__next, n, reqs, flag, fs.p)
  if (*flag)
    for (int i = 0; i < *n; ++i) {
      const MPI_Status s = to_c(&fs.p[i]);
      req_done(h[static_cast<size_t>(i)], &s);
    }
}
// MPICH 4.0's mpi_f08 Waitany/Testany/Waitsome/Testsome return C (0-based)
// indices, not Fortran ones: a completed request is recognised by its handle
// turning into MPI_REQUEST_NULL (or, persistent, by the standard index).
int completed(const std::vector<MPI_Request>& before, const F* after, F n, F findex, std::vector<char>* used) {
  for (int cand : {static_cast<int>(findex) - 1, static_cast<int>(findex)}) {
    if (cand < 0 || cand >= n || (*used)[static_cast<size_t>(cand)]) continue;
    const MPI_Request h = before[static_cast<size_t>(cand)];
    if (h == MPI_REQUEST_NULL) continue;
    if (PMPI_Request_f2c(after[cand]) == MPI_REQUEST_NULL || (cand == findex - 1 && req_persistent(h))) {
      (*used)[static_cast<size_t>(cand)] = 1;
      return cand;
    }
  }
  return -1;
}
void mpi_waitany_f08_(F* n, F* reqs, F* index, S* status, F* ierr) {
  TSR_NEXT(mpi_waitany_f08_, void(F*, F*, F*, S*, F*))
  const std::vector<MPI_Request> h = c_requests(*n, reqs);
  FStatus fs(status);
  TSR_FCALL(mpi_waitany_f08__next, n, reqs, index, fs.p)
  std::vector<char> used(h.size(), 0);
  const int i = *index == MPI_UNDEFINED ? -1 : completed(h, reqs, *n, *index, &used);
  if (i >= 0) {
    const MPI_Status s = to_c(fs.p);
    req_done(h[static_cast<size_t>(i)], &s);
  }
}
void mpi_testany_f08_(F* n, F* reqs, F* index, F* flag, S* status, F* ierr) {
  TSR_NEXT(mpi_testany_f08_, void(F*, F*, F*, F*, S*, F*))
  const std::vector<MPI_Request> h = c_requests(*n, reqs);
  FStatus fs(status);
  TSR_FCALL(mpi_testany_f08__next, n, reqs, index, flag, fs.p)
  std::vector<char> used(h.size(), 0);
  const int i = !*flag || *index == MPI_UNDEFINED ? -1 : completed(h, reqs, *n, *index, &used);
  if (i >= 0) {
    const MPI_Status s = to_c(fs.p);
    req_done(h[static_cast<size_t>(i)], &s);
  }
}
#define TSR_MPICH_SOME(name)                                                     \
  void mpi_##name##_f08_(F* n, F* reqs, F* outcount, F* indices, S* statuses, F* ierr) { \
    TSR_NEXT(mpi_##name##_f08_, void(F*, F*, F*, F*, S*, F*))                    \
    const std::vector<MPI_Request> h = c_requests(*n, reqs);                     \
    FStatuses fs(statuses, *n);                                                  \
    TSR_FCALL(mpi_##name##_f08__next, n, reqs, outcount, indices, fs.p)          \
    if (*outcount == MPI_UNDEFINED) return;                                      \
    std::vector<char> used(h.size(), 0);                                         \
    for (int k = 0; k < *outcount; ++k) {                                        \
      const int i = completed(h, reqs, *n, indices[k], &used);                   \
      if (i < 0) continue;                                                       \
      const MPI_Status s = to_c(&fs.p[k]);                                       \
      req_done(h[static_cast<size_t>(i)], &s);                                   \
    }                                                                            \
  }
TSR_MPICH_SOME(waitsome)
TSR_MPICH_SOME(testsome)
void mpi_start_f08_(F* req, F* ierr) {
  TSR_NEXT(mpi_start_f08_, void(F*, F*))
  TSR_FCALL(mpi_start_f08__next, req)
  req_started(PMPI_Request_f2c(*req));
}
void mpi_startall_f08_(F* n, F* reqs, F* ierr) {
  TSR_NEXT(mpi_startall_f08_, void(F*, F*, F*))
  TSR_FCALL(mpi_startall_f08__next, n, reqs)
  for (int i = 0; i < *n; ++i) req_started(PMPI_Request_f2c(reqs[i]));
}
void mpi_request_free_f08_(F* req, F* ierr) {
  TSR_NEXT(mpi_request_free_f08_, void(F*, F*))
  const MPI_Request h = PMPI_Request_f2c(*req);
  TSR_FCALL(mpi_request_free_f08__next, req)
  req_freed(h);
}
void mpi_barrier_f08_(F* comm, F* ierr) {
  TSR_NEXT(mpi_barrier_f08_, void(F*, F*))
  TSR_FCALL(mpi_barrier_f08__next, comm)
  if (const CommInfo* ci = fcomm(*comm)) charge(F_Barrier, ci, c_barrier(ci));
}
void mpi_ibarrier_f08_(F* comm, F* r, F* ierr) {
  TSR_NEXT(mpi_ibarrier_f08_, void(F*, F*, F*))
  TSR_FCALL(mpi_ibarrier_f08__next, comm, r)
  if (const CommInfo* ci = fcomm(*comm)) charge(F_Ibarrier, ci, c_barrier(ci));
}
void mpi_mprobe_f08_(F* src, F* tag, F* comm, F* msg, S* status, F* ierr) {
  TSR_NEXT(mpi_mprobe_f08_, void(F*, F*, F*, F*, S*, F*))
  TSR_FCALL(mpi_mprobe_f08__next, src, tag, comm, msg, status)
  msg_add(PMPI_Message_f2c(*msg), fcomm(*comm));
}
void mpi_improbe_f08_(F* src, F* tag, F* comm, F* flag, F* msg, S* status, F* ierr) {
  TSR_NEXT(mpi_improbe_f08_, void(F*, F*, F*, F*, F*, S*, F*))
  TSR_FCALL(mpi_improbe_f08__next, src, tag, comm, flag, msg, status)
  if (*flag) msg_add(PMPI_Message_f2c(*msg), fcomm(*comm));
}
}  // extern "C"
#endif
