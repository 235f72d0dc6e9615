// libtessera-pmpi: the C wrappers. Each one calls the PMPI_ function (with
// t_depth raised, so that calls the MPI library makes to itself, or a Fortran
// binding's call into the C function, are not counted twice) and then charges
// what the call moved: point-to-point sends at the call, receives from the
// status at completion, collectives with their payload and wire model, files
// from the status. Wrappers pass straight through before MPI_Init and after
// MPI_Finalize.
#include <cstdarg>
#include <vector>

#include "coll.hpp"
#include "tool.hpp"

using namespace tsr::pmpi;
using tsr::WireModel;

namespace tsr {
namespace pmpi {
Coll g_scratch;
AllreduceMemo g_allreduce;
PendingRecv g_pending;
Coll& scratch_mt() {
  static thread_local Coll c;
  return c;
}

__attribute__((noinline, cold)) int recv_cold(Fn f) {
  on_recv_later(f, comm_info(t_call.comm), t_call.st);
  return MPI_SUCCESS;
}

__attribute__((noinline, cold)) void sent_cold(Fn f, MPI_Comm comm, int dest, long long count, MPI_Datatype t) {
  const uint64_t bytes = nbytes(count, t);
  const CommInfo* ci = comm_info(comm);
  on_send(f, ci, dest, bytes);
  // Refill the hot entry: only with a named (cached) datatype, in
  // single-threaded runs without the matrix.
  const uintptr_t tk = key_of(t);
  if (ci != nullptr && g_ready && !g_mt && !g_matrix && tk != 0 && g_last.type_key == tk) {
    g_hot.comm_key = 0;
    g_hot.type_key = tk;
    g_hot.type_size = g_last.type_size;
    g_hot.cls = ci->cls.data();
    g_hot.ci = ci;
    g_hot.npeers = static_cast<unsigned>(ci->npeers);
    g_hot.comm_key = key_of(comm);
  }
}
}  // namespace pmpi
}  // namespace tsr

namespace {
// A blocking receive: the library called with nothing kept in registers
// (t_call), then charged (recv_call). A receive that finds an earlier
// receive's charge still pending (only receives off the hot path leave one)
// makes it first, out of line, so that the common path calls nothing before
// the library.
template <class C, int (*P)(void*, C, MPI_Datatype, int, int, MPI_Comm, MPI_Status*)>
__attribute__((always_inline)) inline int recv_body(Fn f, void* buf, C count, MPI_Datatype t, int src, int tag,
                                                    MPI_Comm comm, MPI_Status* st) {
  MPI_Status local;
  MPI_Status* s = st == MPI_STATUS_IGNORE ? &local : st;
  t_call.comm = comm;
  t_call.st = s;
  ++t_depth;
  const int rc = P(buf, count, t, src, tag, comm, s);
  --t_depth;
  if (rc != MPI_SUCCESS) return rc;
  return recv_call(f);
}
template <class C, int (*P)(void*, C, MPI_Datatype, int, int, MPI_Comm, MPI_Status*)>
__attribute__((noinline)) int recv_flushing(Fn f, void* buf, C count, MPI_Datatype t, int src, int tag, MPI_Comm comm,
                                            MPI_Status* st) {
  flush_recv();
  return recv_body<C, P>(f, buf, count, t, src, tag, comm, st);
}
}  // namespace

extern "C" {

// ------------------------------------------------------------ init, finalize
int MPI_Init(int* argc, char*** argv) {
  int rc = nested([&] { return PMPI_Init(argc, argv); });
  if (rc == MPI_SUCCESS && t_depth == 0) {
    int provided = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&provided);
    setup(provided);
  }
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int rc = nested([&] { return PMPI_Init_thread(argc, argv, required, provided); });
  if (rc == MPI_SUCCESS && t_depth == 0) setup(*provided);
  return rc;
}

int MPI_Finalize(void) {
  if (t_depth == 0) finalize();
  return PMPI_Finalize();
}

int MPI_Pcontrol(const int level, ...) {
  if (!pass() && regions_enabled() && (level == 1 || level == -1)) {
    va_list ap;
    va_start(ap, level);
    const char* name = va_arg(ap, const char*);
    va_end(ap);
    pcontrol(level, name);
  }
  return PMPI_Pcontrol(level);
}

// ----------------------------------------------------------- point to point
#define TSR_SEND(NAME, FN, CNT)                                                                       \
  int MPI_##NAME(const void* buf, CNT count, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {      \
    if (pass()) return PMPI_##NAME(buf, count, t, dest, tag, comm);                                   \
    t_call.comm = comm;                                                                               \
    t_call.type = t;                                                                                  \
    t_call.count = static_cast<long long>(count);                                                     \
    t_call.peer = dest;                                                                               \
    ++t_depth;                                                                                        \
    const int rc = PMPI_##NAME(buf, count, t, dest, tag, comm);                                       \
    --t_depth;                                                                                        \
    if (rc != MPI_SUCCESS) return rc;                                                                 \
    return sent_call(FN);                                                                             \
  }
#define TSR_ISEND(NAME, FN, CNT)                                                                          \
  int MPI_##NAME(const void* buf, CNT count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,            \
                 MPI_Request* req) {                                                                      \
    if (pass()) return PMPI_##NAME(buf, count, t, dest, tag, comm, req);                                  \
    const int rc = nested([&] { return PMPI_##NAME(buf, count, t, dest, tag, comm, req); });              \
    if (rc == MPI_SUCCESS) {                                                                              \
      sent_hot(FN, comm, dest, static_cast<long long>(count), t);                                         \
      if (req_pending()) req_forget(*req);                                                                \
    }                                                                                                     \
    return rc;                                                                                            \
  }
#define TSR_SEND_INIT(NAME, FN, CNT)                                                                      \
  int MPI_##NAME(const void* buf, CNT count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,            \
                 MPI_Request* req) {                                                                      \
    if (pass()) return PMPI_##NAME(buf, count, t, dest, tag, comm, req);                                  \
    const int rc = nested([&] { return PMPI_##NAME(buf, count, t, dest, tag, comm, req); });              \
    if (rc == MPI_SUCCESS) defer_send(FN, comm, dest, nbytes(count, t), *req);                            \
    return rc;                                                                                            \
  }
#define TSR_RECV(NAME, FN, CNT)                                                                         \
  int MPI_##NAME(void* buf, CNT count, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Status* st) { \
    if (pass()) return PMPI_##NAME(buf, count, t, src, tag, comm, st);                                  \
    if (g_pending.ci != nullptr) return recv_flushing<CNT, PMPI_##NAME>(FN, buf, count, t, src, tag, comm, st); \
    return recv_body<CNT, PMPI_##NAME>(FN, buf, count, t, src, tag, comm, st);                          \
  }
#define TSR_IRECV(NAME, FN, CNT, PERSISTENT)                                                            \
  int MPI_##NAME(void* buf, CNT count, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Request* req) { \
    if (pass()) return PMPI_##NAME(buf, count, t, src, tag, comm, req);                                 \
    const int rc = nested([&] { return PMPI_##NAME(buf, count, t, src, tag, comm, req); });             \
    if (rc == MPI_SUCCESS) defer_recv(FN, comm_info(comm), *req, PERSISTENT);                           \
    return rc;                                                                                          \
  }
#define TSR_SENDRECV(NAME, FN, CNT)                                                                     \
  int MPI_##NAME(const void* sbuf, CNT scount, MPI_Datatype stype, int dest, int stag, void* rbuf,      \
                 CNT rcount, MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status* st) {    \
    if (pass()) return PMPI_##NAME(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, st); \
    MPI_Status local;                                                                                   \
    MPI_Status* s = st == MPI_STATUS_IGNORE ? &local : st;                                             \
    const int rc = nested(                                                                              \
        [&] { return PMPI_##NAME(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, s); }); \
    if (rc == MPI_SUCCESS) {                                                                            \
      const CommInfo* ci = comm_info(comm);                                                             \
      on_send(FN, ci, dest, nbytes(scount, stype));                                                     \
      on_recv(FN, ci, s, false);                                                        \
    }                                                                                                   \
    return rc;                                                                                          \
  }
#define TSR_SENDRECV_REPLACE(NAME, FN, CNT)                                                             \
  int MPI_##NAME(void* buf, CNT count, MPI_Datatype t, int dest, int stag, int src, int rtag, MPI_Comm comm, \
                 MPI_Status* st) {                                                                      \
    if (pass()) return PMPI_##NAME(buf, count, t, dest, stag, src, rtag, comm, st);                     \
    MPI_Status local;                                                                                   \
    MPI_Status* s = st == MPI_STATUS_IGNORE ? &local : st;                                             \
    const int rc = nested([&] { return PMPI_##NAME(buf, count, t, dest, stag, src, rtag, comm, s); });  \
    if (rc == MPI_SUCCESS) {                                                                            \
      const CommInfo* ci = comm_info(comm);                                                             \
      on_send(FN, ci, dest, nbytes(count, t));                                                          \
      on_recv(FN, ci, s, false);                                                        \
    }                                                                                                   \
    return rc;                                                                                          \
  }
#define TSR_MRECV(NAME, FN, CNT)                                                                        \
  int MPI_##NAME(void* buf, CNT count, MPI_Datatype t, MPI_Message* msg, MPI_Status* st) {              \
    if (pass()) return PMPI_##NAME(buf, count, t, msg, st);                                             \
    const CommInfo* ci = msg_take(*msg);                                                                \
    MPI_Status local;                                                                                   \
    MPI_Status* s = st == MPI_STATUS_IGNORE ? &local : st;                                             \
    const int rc = nested([&] { return PMPI_##NAME(buf, count, t, msg, s); });                          \
    if (rc == MPI_SUCCESS) on_recv(FN, ci, s);                                                          \
    return rc;                                                                                          \
  }
#define TSR_IMRECV(NAME, FN, CNT)                                                                       \
  int MPI_##NAME(void* buf, CNT count, MPI_Datatype t, MPI_Message* msg, MPI_Request* req) {            \
    if (pass()) return PMPI_##NAME(buf, count, t, msg, req);                                            \
    const CommInfo* ci = msg_take(*msg);                                                                \
    const int rc = nested([&] { return PMPI_##NAME(buf, count, t, msg, req); });                        \
    if (rc == MPI_SUCCESS && ci != nullptr) defer_recv(FN, ci, *req, false);                            \
    return rc;                                                                                          \
  }
#define TSR_P2P_ALL(SUF, CNT)                                   \
  TSR_SEND(Send##SUF, F_Send, CNT)                              \
  TSR_SEND(Bsend##SUF, F_Bsend, CNT)                            \
  TSR_SEND(Ssend##SUF, F_Ssend, CNT)                            \
  TSR_SEND(Rsend##SUF, F_Rsend, CNT)                            \
  TSR_ISEND(Isend##SUF, F_Isend, CNT)                           \
  TSR_ISEND(Ibsend##SUF, F_Ibsend, CNT)                         \
  TSR_ISEND(Issend##SUF, F_Issend, CNT)                         \
  TSR_ISEND(Irsend##SUF, F_Irsend, CNT)                         \
  TSR_SEND_INIT(Send_init##SUF, F_Send_init, CNT)               \
  TSR_SEND_INIT(Bsend_init##SUF, F_Bsend_init, CNT)             \
  TSR_SEND_INIT(Ssend_init##SUF, F_Ssend_init, CNT)             \
  TSR_SEND_INIT(Rsend_init##SUF, F_Rsend_init, CNT)             \
  TSR_RECV(Recv##SUF, F_Recv, CNT)                              \
  TSR_IRECV(Irecv##SUF, F_Irecv, CNT, false)                    \
  TSR_IRECV(Recv_init##SUF, F_Recv_init, CNT, true)             \
  TSR_SENDRECV(Sendrecv##SUF, F_Sendrecv, CNT)                  \
  TSR_SENDRECV_REPLACE(Sendrecv_replace##SUF, F_Sendrecv_replace, CNT) \
  TSR_MRECV(Mrecv##SUF, F_Mrecv, CNT)                           \
  TSR_IMRECV(Imrecv##SUF, F_Imrecv, CNT)
TSR_P2P_ALL(, int)

int MPI_Mprobe(int src, int tag, MPI_Comm comm, MPI_Message* msg, MPI_Status* st) {
  if (pass()) return PMPI_Mprobe(src, tag, comm, msg, st);
  const int rc = nested([&] { return PMPI_Mprobe(src, tag, comm, msg, st); });
  if (rc == MPI_SUCCESS) msg_add(*msg, comm_info(comm));
  return rc;
}

int MPI_Improbe(int src, int tag, MPI_Comm comm, int* flag, MPI_Message* msg, MPI_Status* st) {
  if (pass()) return PMPI_Improbe(src, tag, comm, flag, msg, st);
  const int rc = nested([&] { return PMPI_Improbe(src, tag, comm, flag, msg, st); });
  if (rc == MPI_SUCCESS && *flag) msg_add(*msg, comm_info(comm));
  return rc;
}

#if MPI_VERSION >= 4
// Large counts (counted under the function without _c), and the MPI-4
// nonblocking exchanges: the send half at the call, the receive half at
// completion (the request's status is the receive's).
TSR_P2P_ALL(_c, MPI_Count)
#define TSR_ISENDRECV(NAME, FN, CNT)                                                                    \
  int MPI_##NAME(const void* sbuf, CNT scount, MPI_Datatype stype, int dest, int stag, void* rbuf,      \
                 CNT rcount, MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Request* req) {  \
    if (pass()) return PMPI_##NAME(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, req); \
    const int rc = nested(                                                                              \
        [&] { return PMPI_##NAME(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, req); }); \
    if (rc == MPI_SUCCESS) {                                                                            \
      const CommInfo* ci = comm_info(comm);                                                             \
      on_send(FN, ci, dest, nbytes(scount, stype));                                                     \
      defer_posted_recv(FN, ci, *req, src, nbytes(rcount, rtype));                                      \
    }                                                                                                   \
    return rc;                                                                                          \
  }
#define TSR_ISENDRECV_REPLACE(NAME, FN, CNT)                                                            \
  int MPI_##NAME(void* buf, CNT count, MPI_Datatype t, int dest, int stag, int src, int rtag, MPI_Comm comm, \
                 MPI_Request* req) {                                                                    \
    if (pass()) return PMPI_##NAME(buf, count, t, dest, stag, src, rtag, comm, req);                    \
    const int rc = nested([&] { return PMPI_##NAME(buf, count, t, dest, stag, src, rtag, comm, req); }); \
    if (rc == MPI_SUCCESS) {                                                                            \
      const CommInfo* ci = comm_info(comm);                                                             \
      on_send(FN, ci, dest, nbytes(count, t));                                                          \
      defer_posted_recv(FN, ci, *req, src, nbytes(count, t));                                           \
    }                                                                                                   \
    return rc;                                                                                          \
  }
TSR_ISENDRECV(Isendrecv, F_Isendrecv, int)
TSR_ISENDRECV(Isendrecv_c, F_Isendrecv, MPI_Count)
TSR_ISENDRECV_REPLACE(Isendrecv_replace, F_Isendrecv_replace, int)
TSR_ISENDRECV_REPLACE(Isendrecv_replace_c, F_Isendrecv_replace, MPI_Count)
#endif  // MPI_VERSION >= 4

// --------------------------------------------------------------- completion
int MPI_Wait(MPI_Request* req, MPI_Status* st) {
  if (pass() || !req_pending()) return PMPI_Wait(req, st);
  const MPI_Request h = *req;
  MPI_Status local;
  MPI_Status* s = st == MPI_STATUS_IGNORE ? &local : st;
  const int rc = nested([&] { return PMPI_Wait(req, s); });
  if (rc == MPI_SUCCESS) req_done(h, s);
  return rc;
}

int MPI_Test(MPI_Request* req, int* flag, MPI_Status* st) {
  if (pass() || !req_pending()) return PMPI_Test(req, flag, st);
  const MPI_Request h = *req;
  MPI_Status local;
  MPI_Status* s = st == MPI_STATUS_IGNORE ? &local : st;
  const int rc = nested([&] { return PMPI_Test(req, flag, s); });
  if (rc == MPI_SUCCESS && *flag) req_done(h, s);
  return rc;
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) {
  if (pass() || !req_pending()) return PMPI_Waitall(n, reqs, sts);
  Saved saved(n, reqs);
  std::vector<MPI_Status> local;
  MPI_Status* s = sts;
  if (sts == MPI_STATUSES_IGNORE) {
    local.resize(static_cast<size_t>(n > 0 ? n : 0));
    s = local.data();
  }
  const int rc = nested([&] { return PMPI_Waitall(n, reqs, s); });
  if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS)
    for (int i = 0; i < n; ++i)
      if (rc == MPI_SUCCESS || s[i].MPI_ERROR == MPI_SUCCESS) req_done(saved.h[static_cast<size_t>(i)], &s[i]);
  return rc;
}

int MPI_Testall(int n, MPI_Request reqs[], int* flag, MPI_Status sts[]) {
  if (pass() || !req_pending()) return PMPI_Testall(n, reqs, flag, sts);
  Saved saved(n, reqs);
  std::vector<MPI_Status> local;
  MPI_Status* s = sts;
  if (sts == MPI_STATUSES_IGNORE) {
    local.resize(static_cast<size_t>(n > 0 ? n : 0));
    s = local.data();
  }
  const int rc = nested([&] { return PMPI_Testall(n, reqs, flag, s); });
  if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *flag)
    for (int i = 0; i < n; ++i)
      if (rc == MPI_SUCCESS || s[i].MPI_ERROR == MPI_SUCCESS) req_done(saved.h[static_cast<size_t>(i)], &s[i]);
  return rc;
}

int MPI_Waitany(int n, MPI_Request reqs[], int* index, MPI_Status* st) {
  if (pass() || !req_pending()) return PMPI_Waitany(n, reqs, index, st);
  Saved saved(n, reqs);
  MPI_Status local;
  MPI_Status* s = st == MPI_STATUS_IGNORE ? &local : st;
  const int rc = nested([&] { return PMPI_Waitany(n, reqs, index, s); });
  if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED) req_done(saved.h[static_cast<size_t>(*index)], s);
  return rc;
}

int MPI_Testany(int n, MPI_Request reqs[], int* index, int* flag, MPI_Status* st) {
  if (pass() || !req_pending()) return PMPI_Testany(n, reqs, index, flag, st);
  Saved saved(n, reqs);
  MPI_Status local;
  MPI_Status* s = st == MPI_STATUS_IGNORE ? &local : st;
  const int rc = nested([&] { return PMPI_Testany(n, reqs, index, flag, s); });
  if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED) req_done(saved.h[static_cast<size_t>(*index)], s);
  return rc;
}

int MPI_Waitsome(int n, MPI_Request reqs[], int* outcount, int indices[], MPI_Status sts[]) {
  if (pass() || !req_pending()) return PMPI_Waitsome(n, reqs, outcount, indices, sts);
  Saved saved(n, reqs);
  std::vector<MPI_Status> local;
  MPI_Status* s = sts;
  if (sts == MPI_STATUSES_IGNORE) {
    local.resize(static_cast<size_t>(n > 0 ? n : 0));
    s = local.data();
  }
  const int rc = nested([&] { return PMPI_Waitsome(n, reqs, outcount, indices, s); });
  if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *outcount != MPI_UNDEFINED)
    for (int k = 0; k < *outcount; ++k)
      if (rc == MPI_SUCCESS || s[k].MPI_ERROR == MPI_SUCCESS) req_done(saved.h[static_cast<size_t>(indices[k])], &s[k]);
  return rc;
}

int MPI_Testsome(int n, MPI_Request reqs[], int* outcount, int indices[], MPI_Status sts[]) {
  if (pass() || !req_pending()) return PMPI_Testsome(n, reqs, outcount, indices, sts);
  Saved saved(n, reqs);
  std::vector<MPI_Status> local;
  MPI_Status* s = sts;
  if (sts == MPI_STATUSES_IGNORE) {
    local.resize(static_cast<size_t>(n > 0 ? n : 0));
    s = local.data();
  }
  const int rc = nested([&] { return PMPI_Testsome(n, reqs, outcount, indices, s); });
  if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *outcount != MPI_UNDEFINED)
    for (int k = 0; k < *outcount; ++k)
      if (rc == MPI_SUCCESS || s[k].MPI_ERROR == MPI_SUCCESS) req_done(saved.h[static_cast<size_t>(indices[k])], &s[k]);
  return rc;
}

int MPI_Request_free(MPI_Request* req) {
  if (pass() || !req_pending()) return PMPI_Request_free(req);
  const MPI_Request h = *req;
  const int rc = nested([&] { return PMPI_Request_free(req); });
  if (rc == MPI_SUCCESS) req_freed(h);
  return rc;
}

int MPI_Start(MPI_Request* req) {
  if (pass() || !req_pending()) return PMPI_Start(req);
  const int rc = nested([&] { return PMPI_Start(req); });
  if (rc == MPI_SUCCESS) req_started(*req);
  return rc;
}

int MPI_Startall(int n, MPI_Request reqs[]) {
  if (pass() || !req_pending()) return PMPI_Startall(n, reqs);
  const int rc = nested([&] { return PMPI_Startall(n, reqs); });
  if (rc == MPI_SUCCESS)
    for (int i = 0; i < n; ++i) req_started(reqs[i]);
  return rc;
}

// -------------------------------------------------------------- collectives
// One body for the blocking (B), nonblocking (N) and persistent (P, MPI-4)
// forms of a collective, with int or MPI_Count (large-count, MPI-4) counts:
// PMPI call, then the charge of the Coll that MAKE builds (persistent: at
// every MPI_Start).
#define TSR_B_PARAMS
#define TSR_B_ARGS
#define TSR_B_REQ nullptr
#define TSR_B_PERS false
#define TSR_N_PARAMS , MPI_Request* r
#define TSR_N_ARGS , r
#define TSR_N_REQ r
#define TSR_N_PERS false
#define TSR_P_PARAMS , MPI_Info info, MPI_Request* r
#define TSR_P_ARGS , info, r
#define TSR_P_REQ r
#define TSR_P_PERS true

#define TSR_COLL_BODY(FN, CALL, COMM, MAKE, REQ, PERSISTENT)                                    \
  if (pass()) return CALL;                                                                      \
  const int rc = nested([&] { return CALL; });                                                  \
  if (rc == MPI_SUCCESS) {                                                                      \
    if (const CommInfo* ci = comm_info(COMM)) charge_or_defer(FN, ci, MAKE, REQ, PERSISTENT);   \
  }                                                                                             \
  return rc;

#define TSR_W_BARRIER(NAME, FN, T)                                                               \
  int MPI_##NAME(MPI_Comm comm TSR_##T##_PARAMS) {                                               \
    TSR_COLL_BODY(FN, PMPI_##NAME(comm TSR_##T##_ARGS), comm, c_barrier(ci), TSR_##T##_REQ, TSR_##T##_PERS) \
  }
#define TSR_W_BCAST(NAME, FN, CNT, T)                                                            \
  int MPI_##NAME(void* buf, CNT count, MPI_Datatype t, int root, MPI_Comm comm TSR_##T##_PARAMS) { \
    TSR_COLL_BODY(FN, PMPI_##NAME(buf, count, t, root, comm TSR_##T##_ARGS), comm,               \
                  c_bcast(ci, nbytes(count, t), root), TSR_##T##_REQ, TSR_##T##_PERS)            \
  }
#define TSR_W_REDUCE(NAME, FN, CNT, T)                                                           \
  int MPI_##NAME(const void* s, void* rb, CNT count, MPI_Datatype t, MPI_Op op, int root,        \
                 MPI_Comm comm TSR_##T##_PARAMS) {                                               \
    TSR_COLL_BODY(FN, PMPI_##NAME(s, rb, count, t, op, root, comm TSR_##T##_ARGS), comm,         \
                  c_reduce(ci, nbytes(count, t), root), TSR_##T##_REQ, TSR_##T##_PERS)           \
  }
#define TSR_W_ALLREDUCE(NAME, FN, CNT, T, MAKE)                                                  \
  int MPI_##NAME(const void* s, void* rb, CNT count, MPI_Datatype t, MPI_Op op,                  \
                 MPI_Comm comm TSR_##T##_PARAMS) {                                               \
    TSR_COLL_BODY(FN, PMPI_##NAME(s, rb, count, t, op, comm TSR_##T##_ARGS), comm, MAKE,         \
                  TSR_##T##_REQ, TSR_##T##_PERS)                                                 \
  }
#define TSR_W_ALLREDUCE_BLOCKING(NAME, FN, CNT)                                                   \
  int MPI_##NAME(const void* s, void* rb, CNT count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {     \
    if (pass()) return PMPI_##NAME(s, rb, count, t, op, comm);                                       \
    const int rc = nested([&] { return PMPI_##NAME(s, rb, count, t, op, comm); });                   \
    if (rc == MPI_SUCCESS) {                                                                         \
      if (const CommInfo* ci = comm_info(comm)) charge_allreduce(FN, ci, count, t);                  \
    }                                                                                                \
    return rc;                                                                                       \
  }
#define TSR_W_GATHER(NAME, FN, CNT, T, MAKE)                                                     \
  int MPI_##NAME(const void* s, CNT sc, MPI_Datatype st, void* rb, CNT rc_, MPI_Datatype rt, int root, \
                 MPI_Comm comm TSR_##T##_PARAMS) {                                               \
    TSR_COLL_BODY(FN, PMPI_##NAME(s, sc, st, rb, rc_, rt, root, comm TSR_##T##_ARGS), comm, MAKE, \
                  TSR_##T##_REQ, TSR_##T##_PERS)                                                 \
  }
#define TSR_W_GATHERV(NAME, FN, CNT, DSP, T)                                                     \
  int MPI_##NAME(const void* s, CNT sc, MPI_Datatype st, void* rb, const CNT rcs[], const DSP displs[], \
                 MPI_Datatype rt, int root, MPI_Comm comm TSR_##T##_PARAMS) {                    \
    TSR_COLL_BODY(FN, PMPI_##NAME(s, sc, st, rb, rcs, displs, rt, root, comm TSR_##T##_ARGS), comm, \
                  c_gatherv(ci, nbytes(sc, st), rcs, rt, root), TSR_##T##_REQ, TSR_##T##_PERS)   \
  }
#define TSR_W_SCATTERV(NAME, FN, CNT, DSP, T)                                                    \
  int MPI_##NAME(const void* s, const CNT scs[], const DSP displs[], MPI_Datatype st, void* rb, CNT rc_, \
                 MPI_Datatype rt, int root, MPI_Comm comm TSR_##T##_PARAMS) {                    \
    TSR_COLL_BODY(FN, PMPI_##NAME(s, scs, displs, st, rb, rc_, rt, root, comm TSR_##T##_ARGS), comm, \
                  c_scatterv(ci, scs, st, nbytes(rc_, rt), root), TSR_##T##_REQ, TSR_##T##_PERS) \
  }
#define TSR_W_ALLGATHER(NAME, FN, CNT, T, MAKE)                                                  \
  int MPI_##NAME(const void* s, CNT sc, MPI_Datatype st, void* rb, CNT rc_, MPI_Datatype rt,     \
                 MPI_Comm comm TSR_##T##_PARAMS) {                                               \
    TSR_COLL_BODY(FN, PMPI_##NAME(s, sc, st, rb, rc_, rt, comm TSR_##T##_ARGS), comm, MAKE,      \
                  TSR_##T##_REQ, TSR_##T##_PERS)                                                 \
  }
#define TSR_W_ALLGATHERV(NAME, FN, CNT, DSP, T)                                                  \
  int MPI_##NAME(const void* s, CNT sc, MPI_Datatype st, void* rb, const CNT rcs[], const DSP displs[], \
                 MPI_Datatype rt, MPI_Comm comm TSR_##T##_PARAMS) {                              \
    TSR_COLL_BODY(FN, PMPI_##NAME(s, sc, st, rb, rcs, displs, rt, comm TSR_##T##_ARGS), comm,    \
                  c_allgatherv(ci, nbytes(sc, st), rcs, rt), TSR_##T##_REQ, TSR_##T##_PERS)      \
  }
#define TSR_W_ALLTOALLV(NAME, FN, CNT, DSP, T)                                                   \
  int MPI_##NAME(const void* s, const CNT scs[], const DSP sds[], MPI_Datatype st, void* rb,     \
                 const CNT rcs[], const DSP rds[], MPI_Datatype rt, MPI_Comm comm TSR_##T##_PARAMS) { \
    TSR_COLL_BODY(FN, PMPI_##NAME(s, scs, sds, st, rb, rcs, rds, rt, comm TSR_##T##_ARGS), comm, \
                  c_alltoallv(ci,                                                                \
                              s == MPI_IN_PLACE ? per_peer(rcs, rt, group_size(ci))              \
                                                : per_peer(scs, st, group_size(ci)),             \
                              per_peer(rcs, rt, group_size(ci))),                                \
                  TSR_##T##_REQ, TSR_##T##_PERS)                                                 \
  }
#define TSR_W_ALLTOALLW(NAME, FN, CNT, DSP, T)                                                   \
  int MPI_##NAME(const void* s, const CNT scs[], const DSP sds[], const MPI_Datatype sts[], void* rb, \
                 const CNT rcs[], const DSP rds[], const MPI_Datatype rts[], MPI_Comm comm TSR_##T##_PARAMS) { \
    TSR_COLL_BODY(FN, PMPI_##NAME(s, scs, sds, sts, rb, rcs, rds, rts, comm TSR_##T##_ARGS), comm, \
                  c_alltoallv(ci,                                                                \
                              s == MPI_IN_PLACE ? per_peer_w(rcs, rts, group_size(ci))           \
                                                : per_peer_w(scs, sts, group_size(ci)),          \
                              per_peer_w(rcs, rts, group_size(ci))),                             \
                  TSR_##T##_REQ, TSR_##T##_PERS)                                                 \
  }
#define TSR_W_REDSCAT(NAME, FN, CNT, T)                                                          \
  int MPI_##NAME(const void* s, void* rb, const CNT rcs[], MPI_Datatype t, MPI_Op op,            \
                 MPI_Comm comm TSR_##T##_PARAMS) {                                               \
    TSR_COLL_BODY(FN, PMPI_##NAME(s, rb, rcs, t, op, comm TSR_##T##_ARGS), comm,                 \
                  c_reduce_scatter(ci, rcs, t), TSR_##T##_REQ, TSR_##T##_PERS)                   \
  }

#define TSR_NB_BODY(FN, CALL, COMM, TO, FROM, REQ, PERSISTENT)                 \
  if (pass()) return CALL;                                                     \
  const int rc = nested([&] { return CALL; });                                 \
  if (rc == MPI_SUCCESS) {                                                     \
    if (const CommInfo* ci = comm_info(COMM)) {                                \
      std::vector<int> in, out;                                                \
      neighbours(COMM, &in, &out);                                             \
      charge_or_defer(FN, ci, c_neighbour(in, out, TO, FROM), REQ, PERSISTENT); \
    }                                                                          \
  }                                                                            \
  return rc;
#define TSR_W_NB_ALLGATHER(NAME, FN, CNT, T)                                                      \
  int MPI_##NAME(const void* s, CNT sc, MPI_Datatype st, void* rb, CNT rc_, MPI_Datatype rt,       \
                 MPI_Comm comm TSR_##T##_PARAMS) {                                                 \
    TSR_NB_BODY(FN, PMPI_##NAME(s, sc, st, rb, rc_, rt, comm TSR_##T##_ARGS), comm,                \
                std::vector<uint64_t>(out.size(), nbytes(sc, st)),                                 \
                std::vector<uint64_t>(in.size(), nbytes(rc_, rt)), TSR_##T##_REQ, TSR_##T##_PERS)  \
  }
#define TSR_W_NB_ALLGATHERV(NAME, FN, CNT, DSP, T)                                                \
  int MPI_##NAME(const void* s, CNT sc, MPI_Datatype st, void* rb, const CNT rcs[], const DSP displs[], \
                 MPI_Datatype rt, MPI_Comm comm TSR_##T##_PARAMS) {                                \
    TSR_NB_BODY(FN, PMPI_##NAME(s, sc, st, rb, rcs, displs, rt, comm TSR_##T##_ARGS), comm,        \
                std::vector<uint64_t>(out.size(), nbytes(sc, st)), per_peer(rcs, rt, in.size()),   \
                TSR_##T##_REQ, TSR_##T##_PERS)                                                     \
  }
#define TSR_W_NB_ALLTOALLV(NAME, FN, CNT, DSP, T)                                                 \
  int MPI_##NAME(const void* s, const CNT scs[], const DSP sds[], MPI_Datatype st, void* rb,       \
                 const CNT rcs[], const DSP rds[], MPI_Datatype rt, MPI_Comm comm TSR_##T##_PARAMS) { \
    TSR_NB_BODY(FN, PMPI_##NAME(s, scs, sds, st, rb, rcs, rds, rt, comm TSR_##T##_ARGS), comm,     \
                per_peer(scs, st, out.size()), per_peer(rcs, rt, in.size()), TSR_##T##_REQ,        \
                TSR_##T##_PERS)                                                                    \
  }
#define TSR_W_NB_ALLTOALLW(NAME, FN, CNT, T)                                                      \
  int MPI_##NAME(const void* s, const CNT scs[], const MPI_Aint sds[], const MPI_Datatype sts[], void* rb, \
                 const CNT rcs[], const MPI_Aint rds[], const MPI_Datatype rts[],                  \
                 MPI_Comm comm TSR_##T##_PARAMS) {                                                 \
    TSR_NB_BODY(FN, PMPI_##NAME(s, scs, sds, sts, rb, rcs, rds, rts, comm TSR_##T##_ARGS), comm,   \
                per_peer_w(scs, sts, out.size()), per_peer_w(rcs, rts, in.size()), TSR_##T##_REQ,  \
                TSR_##T##_PERS)                                                                    \
  }

// The int-count forms (MPI-3): blocking and nonblocking.
TSR_W_BARRIER(Barrier, F_Barrier, B)
TSR_W_BARRIER(Ibarrier, F_Ibarrier, N)
TSR_W_BCAST(Bcast, F_Bcast, int, B)
TSR_W_BCAST(Ibcast, F_Ibcast, int, N)
TSR_W_REDUCE(Reduce, F_Reduce, int, B)
TSR_W_REDUCE(Ireduce, F_Ireduce, int, N)
TSR_W_ALLREDUCE_BLOCKING(Allreduce, F_Allreduce, int)
TSR_W_ALLREDUCE(Iallreduce, F_Iallreduce, int, N, c_allreduce(ci, count, t))
TSR_W_GATHER(Gather, F_Gather, int, B, c_gather(ci, nbytes(sc, st), nbytes(rc_, rt), root))
TSR_W_GATHER(Igather, F_Igather, int, N, c_gather(ci, nbytes(sc, st), nbytes(rc_, rt), root))
TSR_W_GATHERV(Gatherv, F_Gatherv, int, int, B)
TSR_W_GATHERV(Igatherv, F_Igatherv, int, int, N)
TSR_W_GATHER(Scatter, F_Scatter, int, B, c_scatter(ci, nbytes(sc, st), nbytes(rc_, rt), root))
TSR_W_GATHER(Iscatter, F_Iscatter, int, N, c_scatter(ci, nbytes(sc, st), nbytes(rc_, rt), root))
TSR_W_SCATTERV(Scatterv, F_Scatterv, int, int, B)
TSR_W_SCATTERV(Iscatterv, F_Iscatterv, int, int, N)
TSR_W_ALLGATHER(Allgather, F_Allgather, int, B, c_allgather(ci, nbytes(sc, st), nbytes(rc_, rt)))
TSR_W_ALLGATHER(Iallgather, F_Iallgather, int, N, c_allgather(ci, nbytes(sc, st), nbytes(rc_, rt)))
TSR_W_ALLGATHERV(Allgatherv, F_Allgatherv, int, int, B)
TSR_W_ALLGATHERV(Iallgatherv, F_Iallgatherv, int, int, N)
TSR_W_ALLGATHER(Alltoall, F_Alltoall, int, B, c_alltoall(ci, nbytes(rc_, rt)))
TSR_W_ALLGATHER(Ialltoall, F_Ialltoall, int, N, c_alltoall(ci, nbytes(rc_, rt)))
TSR_W_ALLTOALLV(Alltoallv, F_Alltoallv, int, int, B)
TSR_W_ALLTOALLV(Ialltoallv, F_Ialltoallv, int, int, N)
TSR_W_ALLTOALLW(Alltoallw, F_Alltoallw, int, int, B)
TSR_W_ALLTOALLW(Ialltoallw, F_Ialltoallw, int, int, N)
TSR_W_REDSCAT(Reduce_scatter, F_Reduce_scatter, int, B)
TSR_W_REDSCAT(Ireduce_scatter, F_Ireduce_scatter, int, N)
TSR_W_ALLREDUCE(Reduce_scatter_block, F_Reduce_scatter_block, int, B, c_reduce_scatter_block(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Ireduce_scatter_block, F_Ireduce_scatter_block, int, N, c_reduce_scatter_block(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Scan, F_Scan, int, B, c_scan(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Iscan, F_Iscan, int, N, c_scan(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Exscan, F_Exscan, int, B, c_scan(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Iexscan, F_Iexscan, int, N, c_scan(ci, nbytes(count, t)))
TSR_W_NB_ALLGATHER(Neighbor_allgather, F_Neighbor_allgather, int, B)
TSR_W_NB_ALLGATHER(Ineighbor_allgather, F_Ineighbor_allgather, int, N)
TSR_W_NB_ALLGATHERV(Neighbor_allgatherv, F_Neighbor_allgatherv, int, int, B)
TSR_W_NB_ALLGATHERV(Ineighbor_allgatherv, F_Ineighbor_allgatherv, int, int, N)
TSR_W_NB_ALLGATHER(Neighbor_alltoall, F_Neighbor_alltoall, int, B)
TSR_W_NB_ALLGATHER(Ineighbor_alltoall, F_Ineighbor_alltoall, int, N)
TSR_W_NB_ALLTOALLV(Neighbor_alltoallv, F_Neighbor_alltoallv, int, int, B)
TSR_W_NB_ALLTOALLV(Ineighbor_alltoallv, F_Ineighbor_alltoallv, int, int, N)
TSR_W_NB_ALLTOALLW(Neighbor_alltoallw, F_Neighbor_alltoallw, int, B)
TSR_W_NB_ALLTOALLW(Ineighbor_alltoallw, F_Ineighbor_alltoallw, int, N)

#if MPI_VERSION >= 4
// MPI-4: persistent collectives, and the large-count (_c) forms of all three,
// counted under the function without _c.
TSR_W_BARRIER(Barrier_init, F_Barrier_init, P)
TSR_W_BCAST(Bcast_init, F_Bcast_init, int, P)
TSR_W_REDUCE(Reduce_init, F_Reduce_init, int, P)
TSR_W_ALLREDUCE(Allreduce_init, F_Allreduce_init, int, P, c_allreduce(ci, count, t))
TSR_W_GATHER(Gather_init, F_Gather_init, int, P, c_gather(ci, nbytes(sc, st), nbytes(rc_, rt), root))
TSR_W_GATHERV(Gatherv_init, F_Gatherv_init, int, int, P)
TSR_W_GATHER(Scatter_init, F_Scatter_init, int, P, c_scatter(ci, nbytes(sc, st), nbytes(rc_, rt), root))
TSR_W_SCATTERV(Scatterv_init, F_Scatterv_init, int, int, P)
TSR_W_ALLGATHER(Allgather_init, F_Allgather_init, int, P, c_allgather(ci, nbytes(sc, st), nbytes(rc_, rt)))
TSR_W_ALLGATHERV(Allgatherv_init, F_Allgatherv_init, int, int, P)
TSR_W_ALLGATHER(Alltoall_init, F_Alltoall_init, int, P, c_alltoall(ci, nbytes(rc_, rt)))
TSR_W_ALLTOALLV(Alltoallv_init, F_Alltoallv_init, int, int, P)
TSR_W_ALLTOALLW(Alltoallw_init, F_Alltoallw_init, int, int, P)
TSR_W_REDSCAT(Reduce_scatter_init, F_Reduce_scatter_init, int, P)
TSR_W_ALLREDUCE(Reduce_scatter_block_init, F_Reduce_scatter_block_init, int, P, c_reduce_scatter_block(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Scan_init, F_Scan_init, int, P, c_scan(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Exscan_init, F_Exscan_init, int, P, c_scan(ci, nbytes(count, t)))
TSR_W_NB_ALLGATHER(Neighbor_allgather_init, F_Neighbor_allgather_init, int, P)
TSR_W_NB_ALLGATHERV(Neighbor_allgatherv_init, F_Neighbor_allgatherv_init, int, int, P)
TSR_W_NB_ALLGATHER(Neighbor_alltoall_init, F_Neighbor_alltoall_init, int, P)
TSR_W_NB_ALLTOALLV(Neighbor_alltoallv_init, F_Neighbor_alltoallv_init, int, int, P)
TSR_W_NB_ALLTOALLW(Neighbor_alltoallw_init, F_Neighbor_alltoallw_init, int, P)
TSR_W_BCAST(Bcast_c, F_Bcast, MPI_Count, B)
TSR_W_BCAST(Ibcast_c, F_Ibcast, MPI_Count, N)
TSR_W_BCAST(Bcast_init_c, F_Bcast_init, MPI_Count, P)
TSR_W_REDUCE(Reduce_c, F_Reduce, MPI_Count, B)
TSR_W_REDUCE(Ireduce_c, F_Ireduce, MPI_Count, N)
TSR_W_REDUCE(Reduce_init_c, F_Reduce_init, MPI_Count, P)
TSR_W_ALLREDUCE_BLOCKING(Allreduce_c, F_Allreduce, MPI_Count)
TSR_W_ALLREDUCE(Iallreduce_c, F_Iallreduce, MPI_Count, N, c_allreduce(ci, count, t))
TSR_W_ALLREDUCE(Allreduce_init_c, F_Allreduce_init, MPI_Count, P, c_allreduce(ci, count, t))
TSR_W_GATHER(Gather_c, F_Gather, MPI_Count, B, c_gather(ci, nbytes(sc, st), nbytes(rc_, rt), root))
TSR_W_GATHER(Igather_c, F_Igather, MPI_Count, N, c_gather(ci, nbytes(sc, st), nbytes(rc_, rt), root))
TSR_W_GATHER(Gather_init_c, F_Gather_init, MPI_Count, P, c_gather(ci, nbytes(sc, st), nbytes(rc_, rt), root))
TSR_W_GATHERV(Gatherv_c, F_Gatherv, MPI_Count, MPI_Aint, B)
TSR_W_GATHERV(Igatherv_c, F_Igatherv, MPI_Count, MPI_Aint, N)
TSR_W_GATHERV(Gatherv_init_c, F_Gatherv_init, MPI_Count, MPI_Aint, P)
TSR_W_GATHER(Scatter_c, F_Scatter, MPI_Count, B, c_scatter(ci, nbytes(sc, st), nbytes(rc_, rt), root))
TSR_W_GATHER(Iscatter_c, F_Iscatter, MPI_Count, N, c_scatter(ci, nbytes(sc, st), nbytes(rc_, rt), root))
TSR_W_GATHER(Scatter_init_c, F_Scatter_init, MPI_Count, P, c_scatter(ci, nbytes(sc, st), nbytes(rc_, rt), root))
TSR_W_SCATTERV(Scatterv_c, F_Scatterv, MPI_Count, MPI_Aint, B)
TSR_W_SCATTERV(Iscatterv_c, F_Iscatterv, MPI_Count, MPI_Aint, N)
TSR_W_SCATTERV(Scatterv_init_c, F_Scatterv_init, MPI_Count, MPI_Aint, P)
TSR_W_ALLGATHER(Allgather_c, F_Allgather, MPI_Count, B, c_allgather(ci, nbytes(sc, st), nbytes(rc_, rt)))
TSR_W_ALLGATHER(Iallgather_c, F_Iallgather, MPI_Count, N, c_allgather(ci, nbytes(sc, st), nbytes(rc_, rt)))
TSR_W_ALLGATHER(Allgather_init_c, F_Allgather_init, MPI_Count, P, c_allgather(ci, nbytes(sc, st), nbytes(rc_, rt)))
TSR_W_ALLGATHERV(Allgatherv_c, F_Allgatherv, MPI_Count, MPI_Aint, B)
TSR_W_ALLGATHERV(Iallgatherv_c, F_Iallgatherv, MPI_Count, MPI_Aint, N)
TSR_W_ALLGATHERV(Allgatherv_init_c, F_Allgatherv_init, MPI_Count, MPI_Aint, P)
TSR_W_ALLGATHER(Alltoall_c, F_Alltoall, MPI_Count, B, c_alltoall(ci, nbytes(rc_, rt)))
TSR_W_ALLGATHER(Ialltoall_c, F_Ialltoall, MPI_Count, N, c_alltoall(ci, nbytes(rc_, rt)))
TSR_W_ALLGATHER(Alltoall_init_c, F_Alltoall_init, MPI_Count, P, c_alltoall(ci, nbytes(rc_, rt)))
TSR_W_ALLTOALLV(Alltoallv_c, F_Alltoallv, MPI_Count, MPI_Aint, B)
TSR_W_ALLTOALLV(Ialltoallv_c, F_Ialltoallv, MPI_Count, MPI_Aint, N)
TSR_W_ALLTOALLV(Alltoallv_init_c, F_Alltoallv_init, MPI_Count, MPI_Aint, P)
TSR_W_ALLTOALLW(Alltoallw_c, F_Alltoallw, MPI_Count, MPI_Aint, B)
TSR_W_ALLTOALLW(Ialltoallw_c, F_Ialltoallw, MPI_Count, MPI_Aint, N)
TSR_W_ALLTOALLW(Alltoallw_init_c, F_Alltoallw_init, MPI_Count, MPI_Aint, P)
TSR_W_REDSCAT(Reduce_scatter_c, F_Reduce_scatter, MPI_Count, B)
TSR_W_REDSCAT(Ireduce_scatter_c, F_Ireduce_scatter, MPI_Count, N)
TSR_W_REDSCAT(Reduce_scatter_init_c, F_Reduce_scatter_init, MPI_Count, P)
TSR_W_ALLREDUCE(Reduce_scatter_block_c, F_Reduce_scatter_block, MPI_Count, B, c_reduce_scatter_block(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Ireduce_scatter_block_c, F_Ireduce_scatter_block, MPI_Count, N, c_reduce_scatter_block(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Reduce_scatter_block_init_c, F_Reduce_scatter_block_init, MPI_Count, P, c_reduce_scatter_block(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Scan_c, F_Scan, MPI_Count, B, c_scan(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Iscan_c, F_Iscan, MPI_Count, N, c_scan(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Scan_init_c, F_Scan_init, MPI_Count, P, c_scan(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Exscan_c, F_Exscan, MPI_Count, B, c_scan(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Iexscan_c, F_Iexscan, MPI_Count, N, c_scan(ci, nbytes(count, t)))
TSR_W_ALLREDUCE(Exscan_init_c, F_Exscan_init, MPI_Count, P, c_scan(ci, nbytes(count, t)))
TSR_W_NB_ALLGATHER(Neighbor_allgather_c, F_Neighbor_allgather, MPI_Count, B)
TSR_W_NB_ALLGATHER(Ineighbor_allgather_c, F_Ineighbor_allgather, MPI_Count, N)
TSR_W_NB_ALLGATHER(Neighbor_allgather_init_c, F_Neighbor_allgather_init, MPI_Count, P)
TSR_W_NB_ALLGATHERV(Neighbor_allgatherv_c, F_Neighbor_allgatherv, MPI_Count, MPI_Aint, B)
TSR_W_NB_ALLGATHERV(Ineighbor_allgatherv_c, F_Ineighbor_allgatherv, MPI_Count, MPI_Aint, N)
TSR_W_NB_ALLGATHERV(Neighbor_allgatherv_init_c, F_Neighbor_allgatherv_init, MPI_Count, MPI_Aint, P)
TSR_W_NB_ALLGATHER(Neighbor_alltoall_c, F_Neighbor_alltoall, MPI_Count, B)
TSR_W_NB_ALLGATHER(Ineighbor_alltoall_c, F_Ineighbor_alltoall, MPI_Count, N)
TSR_W_NB_ALLGATHER(Neighbor_alltoall_init_c, F_Neighbor_alltoall_init, MPI_Count, P)
TSR_W_NB_ALLTOALLV(Neighbor_alltoallv_c, F_Neighbor_alltoallv, MPI_Count, MPI_Aint, B)
TSR_W_NB_ALLTOALLV(Ineighbor_alltoallv_c, F_Ineighbor_alltoallv, MPI_Count, MPI_Aint, N)
TSR_W_NB_ALLTOALLV(Neighbor_alltoallv_init_c, F_Neighbor_alltoallv_init, MPI_Count, MPI_Aint, P)
TSR_W_NB_ALLTOALLW(Neighbor_alltoallw_c, F_Neighbor_alltoallw, MPI_Count, B)
TSR_W_NB_ALLTOALLW(Ineighbor_alltoallw_c, F_Ineighbor_alltoallw, MPI_Count, N)
TSR_W_NB_ALLTOALLW(Neighbor_alltoallw_init_c, F_Neighbor_alltoallw_init, MPI_Count, P)
#endif  // MPI_VERSION >= 4

// ---------------------------------------------------------------- one-sided
#define TSR_RMA_BODY(FN, CALL, WIN, TARGET, SENT, GOT)                         \
  if (pass()) return CALL;                                                     \
  const int rc = nested([&] { return CALL; });                                 \
  if (rc == MPI_SUCCESS) {                                                     \
    const CommInfo* ci = win_info(WIN);                                        \
    const uint64_t s_ = SENT, g_ = GOT;                                        \
    if (s_ > 0 || g_ == 0) on_send(FN, ci, TARGET, s_);                         \
    if (g_ > 0) on_recv_bytes(FN, ci, TARGET, g_, s_ == 0);                    \
  }                                                                            \
  return rc;

// Put/Get/Accumulate and their request forms, written out (const-ness differs).
#define TSR_RMA_FAMILY(SUF, CNT)                                                                        \
  int MPI_Put##SUF(const void* o, CNT oc, MPI_Datatype ot, int target, MPI_Aint td, CNT tc, MPI_Datatype tt, \
                   MPI_Win w) {                                                                         \
    TSR_RMA_BODY(F_Put, PMPI_Put##SUF(o, oc, ot, target, td, tc, tt, w), w, target, nbytes(oc, ot), 0)  \
  }                                                                                                     \
  int MPI_Get##SUF(void* o, CNT oc, MPI_Datatype ot, int target, MPI_Aint td, CNT tc, MPI_Datatype tt,   \
                   MPI_Win w) {                                                                         \
    TSR_RMA_BODY(F_Get, PMPI_Get##SUF(o, oc, ot, target, td, tc, tt, w), w, target, 0, nbytes(oc, ot))  \
  }                                                                                                     \
  int MPI_Accumulate##SUF(const void* o, CNT oc, MPI_Datatype ot, int target, MPI_Aint td, CNT tc,      \
                          MPI_Datatype tt, MPI_Op op, MPI_Win w) {                                      \
    TSR_RMA_BODY(F_Accumulate, PMPI_Accumulate##SUF(o, oc, ot, target, td, tc, tt, op, w), w, target,   \
                 nbytes(oc, ot), 0)                                                                     \
  }                                                                                                     \
  int MPI_Get_accumulate##SUF(const void* o, CNT oc, MPI_Datatype ot, void* res, CNT rc_, MPI_Datatype rt, \
                              int target, MPI_Aint td, CNT tc, MPI_Datatype tt, MPI_Op op, MPI_Win w) { \
    TSR_RMA_BODY(F_Get_accumulate, PMPI_Get_accumulate##SUF(o, oc, ot, res, rc_, rt, target, td, tc, tt, op, w), \
                 w, target, nbytes(oc, ot), nbytes(rc_, rt))                                            \
  }                                                                                                     \
  int MPI_Rput##SUF(const void* o, CNT oc, MPI_Datatype ot, int target, MPI_Aint td, CNT tc, MPI_Datatype tt, \
                    MPI_Win w, MPI_Request* r) {                                                        \
    TSR_RMA_BODY(F_Rput, PMPI_Rput##SUF(o, oc, ot, target, td, tc, tt, w, r), w, target, nbytes(oc, ot), 0) \
  }                                                                                                     \
  int MPI_Rget##SUF(void* o, CNT oc, MPI_Datatype ot, int target, MPI_Aint td, CNT tc, MPI_Datatype tt,  \
                    MPI_Win w, MPI_Request* r) {                                                        \
    TSR_RMA_BODY(F_Rget, PMPI_Rget##SUF(o, oc, ot, target, td, tc, tt, w, r), w, target, 0, nbytes(oc, ot)) \
  }                                                                                                     \
  int MPI_Raccumulate##SUF(const void* o, CNT oc, MPI_Datatype ot, int target, MPI_Aint td, CNT tc,     \
                           MPI_Datatype tt, MPI_Op op, MPI_Win w, MPI_Request* r) {                     \
    TSR_RMA_BODY(F_Raccumulate, PMPI_Raccumulate##SUF(o, oc, ot, target, td, tc, tt, op, w, r), w, target, \
                 nbytes(oc, ot), 0)                                                                     \
  }                                                                                                     \
  int MPI_Rget_accumulate##SUF(const void* o, CNT oc, MPI_Datatype ot, void* res, CNT rc_, MPI_Datatype rt, \
                               int target, MPI_Aint td, CNT tc, MPI_Datatype tt, MPI_Op op, MPI_Win w,  \
                               MPI_Request* r) {                                                        \
    TSR_RMA_BODY(F_Rget_accumulate,                                                                     \
                 PMPI_Rget_accumulate##SUF(o, oc, ot, res, rc_, rt, target, td, tc, tt, op, w, r), w, target, \
                 nbytes(oc, ot), nbytes(rc_, rt))                                                       \
  }
TSR_RMA_FAMILY(, int)
#if MPI_VERSION >= 4
TSR_RMA_FAMILY(_c, MPI_Count)
#endif

int MPI_Fetch_and_op(const void* o, void* res, MPI_Datatype t, int target, MPI_Aint td, MPI_Op op, MPI_Win w) {
  TSR_RMA_BODY(F_Fetch_and_op, PMPI_Fetch_and_op(o, res, t, target, td, op, w), w, target, type_size(t),
               type_size(t))
}
int MPI_Compare_and_swap(const void* o, const void* cmp, void* res, MPI_Datatype t, int target, MPI_Aint td,
                         MPI_Win w) {
  TSR_RMA_BODY(F_Compare_and_swap, PMPI_Compare_and_swap(o, cmp, res, t, target, td, w), w, target,
               2 * type_size(t), type_size(t))
}

// ------------------------------------------------------------------- MPI-IO
#define TSR_FILE_BLOCKING(NAME, WRITE, BUFQ, ...)                                               \
  int MPI_File_##NAME(MPI_File fh, __VA_ARGS__ BUFQ void* buf, int count, MPI_Datatype t, MPI_Status* st) { \
    if (pass()) return PMPI_File_##NAME(fh, TSR_FILE_ARGS_##NAME buf, count, t, st);                  \
    MPI_Status local;                                                                            \
    MPI_Status* s = st == MPI_STATUS_IGNORE ? &local : st;                                      \
    const int rc = nested([&] { return PMPI_File_##NAME(fh, TSR_FILE_ARGS_##NAME buf, count, t, s); }); \
    if (rc == MPI_SUCCESS) on_disk(F_File_##NAME, WRITE, status_bytes(s));                      \
    return rc;                                                                                   \
  }
#define TSR_FILE_NONBLOCKING(NAME, WRITE, BUFQ, ...)                                                  \
  int MPI_File_##NAME(MPI_File fh, __VA_ARGS__ BUFQ void* buf, int count, MPI_Datatype t, MPI_Request* r) { \
    if (pass()) return PMPI_File_##NAME(fh, TSR_FILE_ARGS_##NAME buf, count, t, r);                       \
    const int rc = nested([&] { return PMPI_File_##NAME(fh, TSR_FILE_ARGS_##NAME buf, count, t, r); });    \
    if (rc == MPI_SUCCESS) defer_disk(F_File_##NAME, WRITE, *r);                                       \
    return rc;                                                                                         \
  }
#define TSR_FILE_END(NAME, WRITE, BUFQ)                                                        \
  int MPI_File_##NAME(MPI_File fh, BUFQ void* buf, MPI_Status* st) {                           \
    if (pass()) return PMPI_File_##NAME(fh, buf, st);                                          \
    MPI_Status local;                                                                          \
    MPI_Status* s = st == MPI_STATUS_IGNORE ? &local : st;                                    \
    const int rc = nested([&] { return PMPI_File_##NAME(fh, buf, s); });                       \
    if (rc == MPI_SUCCESS) on_disk(F_File_##NAME, WRITE, status_bytes(s));                    \
    return rc;                                                                                 \
  }
#define TSR_FILE_ARGS_read
#define TSR_FILE_ARGS_read_all
#define TSR_FILE_ARGS_read_shared
#define TSR_FILE_ARGS_read_ordered
#define TSR_FILE_ARGS_read_at off,
#define TSR_FILE_ARGS_read_at_all off,
#define TSR_FILE_ARGS_write
#define TSR_FILE_ARGS_write_all
#define TSR_FILE_ARGS_write_shared
#define TSR_FILE_ARGS_write_ordered
#define TSR_FILE_ARGS_write_at off,
#define TSR_FILE_ARGS_write_at_all off,
#define TSR_FILE_ARGS_iread
#define TSR_FILE_ARGS_iread_all
#define TSR_FILE_ARGS_iread_shared
#define TSR_FILE_ARGS_iread_at off,
#define TSR_FILE_ARGS_iread_at_all off,
#define TSR_FILE_ARGS_iwrite
#define TSR_FILE_ARGS_iwrite_all
#define TSR_FILE_ARGS_iwrite_shared
#define TSR_FILE_ARGS_iwrite_at off,
#define TSR_FILE_ARGS_iwrite_at_all off,
#define TSR_NOARG
TSR_FILE_BLOCKING(read, false, TSR_NOARG, )
TSR_FILE_BLOCKING(read_all, false, TSR_NOARG, )
TSR_FILE_BLOCKING(read_shared, false, TSR_NOARG, )
TSR_FILE_BLOCKING(read_ordered, false, TSR_NOARG, )
TSR_FILE_BLOCKING(read_at, false, TSR_NOARG, MPI_Offset off, )
TSR_FILE_BLOCKING(read_at_all, false, TSR_NOARG, MPI_Offset off, )
TSR_FILE_BLOCKING(write, true, const, )
TSR_FILE_BLOCKING(write_all, true, const, )
TSR_FILE_BLOCKING(write_shared, true, const, )
TSR_FILE_BLOCKING(write_ordered, true, const, )
TSR_FILE_BLOCKING(write_at, true, const, MPI_Offset off, )
TSR_FILE_BLOCKING(write_at_all, true, const, MPI_Offset off, )
TSR_FILE_NONBLOCKING(iread, false, TSR_NOARG, )
TSR_FILE_NONBLOCKING(iread_all, false, TSR_NOARG, )
TSR_FILE_NONBLOCKING(iread_shared, false, TSR_NOARG, )
TSR_FILE_NONBLOCKING(iread_at, false, TSR_NOARG, MPI_Offset off, )
TSR_FILE_NONBLOCKING(iread_at_all, false, TSR_NOARG, MPI_Offset off, )
TSR_FILE_NONBLOCKING(iwrite, true, const, )
TSR_FILE_NONBLOCKING(iwrite_all, true, const, )
TSR_FILE_NONBLOCKING(iwrite_shared, true, const, )
TSR_FILE_NONBLOCKING(iwrite_at, true, const, MPI_Offset off, )
TSR_FILE_NONBLOCKING(iwrite_at_all, true, const, MPI_Offset off, )
TSR_FILE_END(read_all_end, false, TSR_NOARG)
TSR_FILE_END(read_at_all_end, false, TSR_NOARG)
TSR_FILE_END(read_ordered_end, false, TSR_NOARG)
TSR_FILE_END(write_all_end, true, const)
TSR_FILE_END(write_at_all_end, true, const)
TSR_FILE_END(write_ordered_end, true, const)

}  // extern "C"
