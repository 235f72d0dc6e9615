// libtessera-scalapack: ScaLAPACK's pdgemm_ and psgemm_ (Fortran calling
// convention: every argument by address, 1-based IA/JA offsets) through
// tessera's GEMM, for unmodified ScaLAPACK programs linked with this library
// ahead of ScaLAPACK or run with it in LD_PRELOAD (docs/SCALAPACK.md).
//
// What tessera does not take goes to the next pdgemm_ in the link order
// (dlsym(RTLD_NEXT), i.e. ScaLAPACK's): pzgemm_ and pcgemm_ (complex), and
// calls tessera refuses before moving data (descriptor type other than 1,
// a context that is not a BLACS grid on this process, arguments ScaLAPACK
// would reject: ScaLAPACK then reports them its own way, with PXERBLA).
// Without a ScaLAPACK to fall back on, the call reports the reason in
// PXERBLA's form on stderr and returns with C untouched (as ScaLAPACK does
// for an illegal argument: no abort).
//
// This is a tool, like libtessera-pmpi: it holds process-wide state (one
// tessera context per BLACS grid, created on first use over the grid's
// communicator, kept until MPI_Finalize so that its ledger can be reported;
// an attribute on MPI_COMM_SELF frees everything there), and it may print:
//   TSR_SCALAPACK_VERBOSE=1   say once (per process, routine and reason)
//                             why a call fell back, and when a grid gets
//                             its tessera context (stderr)
//   TSR_SCALAPACK_REPORT=path at MPI_Finalize, rank 0 of every grid appends
//                             the calls and tessera's report of its context
//                             to path (one write per grid)
// Calls must come from one thread at a time (as ScaLAPACK's).
#include <dlfcn.h>
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "scalapack_dropin.hpp"
#include "tessera/tessera.h"

extern "C" {
void Cblacs_gridinfo(int ctxt, int* nprow, int* npcol, int* myrow, int* mycol) __attribute__((weak));
void Cblacs_get(int ctxt, int what, int* val) __attribute__((weak));
MPI_Comm Cblacs2sys_handle(int sysctxt) __attribute__((weak));
}

namespace {

enum Routine { kPd = 0, kPs = 1, kPz = 2, kPc = 3, kRoutines = 4 };
const char* const kName[kRoutines] = {"pdgemm_", "psgemm_", "pzgemm_", "pcgemm_"};

// One BLACS grid that went through tessera.
struct Entry {
  int ictxt = -1, nprow = 0, npcol = 0;
  MPI_Comm grid_comm = MPI_COMM_NULL;  // BLACS's communicator (not ours)
  bool retired = false;                // BLACS freed it (blacs_gridexit)
  tsr_context ctx = nullptr;           // over a duplicate of grid_comm
  tsr::gemm::ScalapackGrids grids;
  uint64_t taken[2] = {0, 0};          // pdgemm_, psgemm_ through tessera
};

struct Shim {
  std::vector<std::unique_ptr<Entry>> entries;
  int grid_key = MPI_KEYVAL_INVALID;  // on BLACS grid communicators -> Entry*
  int self_key = MPI_KEYVAL_INVALID;  // on MPI_COMM_SELF: MPI_Finalize
  bool verbose = false;
  std::string report;
  std::set<std::string> said;
  uint64_t fell_back[kRoutines] = {0, 0, 0, 0};
};
Shim* g_shim = nullptr;  // created on the first call, freed at MPI_Finalize

int world_rank() {
  int init = 0, fin = 0, r = -1;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "tessera-scalapack[rank %d]: %s\n", world_rank(), buf);
}

void report_entry(Shim* s, Entry* e) {
  tsr_report rep = nullptr;
  if (tsr_report_create(e->ctx, 0, &rep) != TSR_SUCCESS) return;
  int rank = -1;
  tsr_context_rank(e->ctx, &rank);
  if (rank == 0) {
    std::string out;
    char line[512];
    std::snprintf(line, sizeof line,
                  "== tessera-scalapack: BLACS context %d, %d x %d grid\n"
                  "calls through tessera: pdgemm %llu psgemm %llu\n"
                  "fallbacks to ScaLAPACK on this grid's rank 0 (whole process): pdgemm %llu psgemm %llu pzgemm %llu "
                  "pcgemm %llu\n",
                  e->ictxt, e->nprow, e->npcol, static_cast<unsigned long long>(e->taken[kPd]),
                  static_cast<unsigned long long>(e->taken[kPs]), static_cast<unsigned long long>(s->fell_back[kPd]),
                  static_cast<unsigned long long>(s->fell_back[kPs]), static_cast<unsigned long long>(s->fell_back[kPz]),
                  static_cast<unsigned long long>(s->fell_back[kPc]));
    out += line;
    // Per routine: the data moved, summed over the grid's ranks.
    int nreg = 0;
    tsr_report_region_count(rep, &nreg);
    for (int r = 0; r < nreg; ++r) {
      const char* path = nullptr;
      tsr_counters sum;
      if (tsr_report_region_path(rep, r, &path) != TSR_SUCCESS || tsr_report_stats(rep, r, nullptr, nullptr, &sum) != TSR_SUCCESS)
        continue;
      if (std::strcmp(path, "pdgemm") != 0 && std::strcmp(path, "psgemm") != 0) continue;
      uint64_t p2p = 0, p2pm = 0, wire = 0, wirem = 0;
      for (int c = 0; c < TSR_PEER_CLASSES; ++c) {
        p2p += sum.p2p_recv[c].bytes;
        p2pm += sum.p2p_recv[c].messages;
        wire += sum.coll_wire_recv[c].bytes;
        wirem += sum.coll_wire_recv[c].messages;
      }
      std::snprintf(line, sizeof line,
                    "region %s: received (sum over ranks) p2p_bytes %llu p2p_messages %llu coll_payload_bytes %llu "
                    "coll_wire_bytes %llu coll_wire_messages %llu control_messages %llu\n",
                    path, static_cast<unsigned long long>(p2p), static_cast<unsigned long long>(p2pm),
                    static_cast<unsigned long long>(sum.coll_payload_recv), static_cast<unsigned long long>(wire),
                    static_cast<unsigned long long>(wirem), static_cast<unsigned long long>(sum.control.messages));
      out += line;
    }
    size_t need = 0;
    if (tsr_report_format(rep, nullptr, 0, &need) == TSR_SUCCESS) {
      std::string table(need + 1, '\0');
      tsr_report_format(rep, &table[0], table.size(), &need);
      table.resize(need);
      out += table;
      if (!out.empty() && out.back() != '\n') out += '\n';
    }
    const int fd = open(s->report.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0 || write(fd, out.data(), out.size()) != static_cast<ssize_t>(out.size()))
      say("cannot write the report to %s: %s", s->report.c_str(), std::strerror(errno));
    if (fd >= 0) close(fd);
  }
  tsr_report_destroy(&rep);
}

// BLACS freed a grid's communicator: its entry stays (for the report) but is
// no longer found (BLACS may give the same context number to a new grid).
int grid_freed(MPI_Comm, int, void* attr, void*) {
  static_cast<Entry*>(attr)->retired = true;
  return MPI_SUCCESS;
}

// MPI_Finalize (MPI_COMM_SELF's attributes go first, with MPI still up):
// report, then free every context, in the order they were created (the same
// on every rank of a grid).
int at_finalize(MPI_Comm, int, void*, void*) {
  Shim* s = g_shim;
  if (s == nullptr) return MPI_SUCCESS;
  for (auto& e : s->entries) {
    if (!e->retired) MPI_Comm_delete_attr(e->grid_comm, s->grid_key);
    if (!s->report.empty()) report_entry(s, e.get());
    tsr::gemm::free_grids(&e->grids);
    tsr_context_destroy(&e->ctx);
  }
  MPI_Comm_free_keyval(&s->grid_key);
  MPI_Comm_free_keyval(&s->self_key);
  delete s;
  g_shim = nullptr;
  return MPI_SUCCESS;
}

Shim* shim() {
  if (g_shim != nullptr) return g_shim;
  std::unique_ptr<Shim> s(new Shim());
  const char* v = std::getenv("TSR_SCALAPACK_VERBOSE");
  s->verbose = v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  const char* r = std::getenv("TSR_SCALAPACK_REPORT");
  if (r != nullptr) s->report = r;
  if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, grid_freed, &s->grid_key, nullptr) != MPI_SUCCESS ||
      MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_finalize, &s->self_key, nullptr) != MPI_SUCCESS ||
      MPI_Comm_set_attr(MPI_COMM_SELF, s->self_key, nullptr) != MPI_SUCCESS)
    return nullptr;
  g_shim = s.release();
  return g_shim;
}

bool have_blacs() { return Cblacs_gridinfo != nullptr && Cblacs_get != nullptr && Cblacs2sys_handle != nullptr; }

// Why tessera does not take a call with these descriptors on this process
// (nullptr: it may), the same on every process of the grid.
const char* refuse(const int* desca, const int* descb, const int* descc) {
  if (!have_blacs()) return "ScaLAPACK's BLACS is not in this program";
  if (desca == nullptr || descb == nullptr || descc == nullptr) return "a descriptor is NULL";
  if (desca[0] != 1 || descb[0] != 1 || descc[0] != 1)
    return "a descriptor's type (DESC(1)) is not 1, block-cyclic 2D: tessera takes type 1 only";
  int nprow = -1, npcol = -1, myrow = -1, mycol = -1;
  Cblacs_gridinfo(desca[1], &nprow, &npcol, &myrow, &mycol);
  if (nprow < 1 || npcol < 1 || myrow < 0 || mycol < 0)
    return "DESCA(2) is not a BLACS grid this process belongs to";
  return nullptr;
}

// The entry of the BLACS grid ctxt (created on first use: collective over
// the grid). nullptr with *why on failure.
Entry* entry_of(Shim* s, int ctxt, std::string* why) {
  int nprow = -1, npcol = -1, myrow = -1, mycol = -1, sys = -1;
  Cblacs_gridinfo(ctxt, &nprow, &npcol, &myrow, &mycol);
  Cblacs_get(ctxt, 10, &sys);  // the system context of the grid's communicator
  MPI_Comm comm = Cblacs2sys_handle(sys);
  void* val = nullptr;
  int flag = 0;
  if (MPI_Comm_get_attr(comm, s->grid_key, &val, &flag) != MPI_SUCCESS) {
    *why = "MPI_Comm_get_attr on the BLACS grid's communicator failed";
    return nullptr;
  }
  if (flag) return static_cast<Entry*>(val);
  std::unique_ptr<Entry> e(new Entry());
  e->ictxt = ctxt;
  e->nprow = nprow;
  e->npcol = npcol;
  e->grid_comm = comm;
  if (tsr_context_create(comm, &e->ctx) != TSR_SUCCESS) {
    *why = std::string("creating tessera's context: ") + tsr_last_error(nullptr);
    return nullptr;
  }
  if (MPI_Comm_set_attr(comm, s->grid_key, e.get()) != MPI_SUCCESS) {
    tsr_context_destroy(&e->ctx);
    *why = "MPI_Comm_set_attr on the BLACS grid's communicator failed";
    return nullptr;
  }
  if (s->verbose && myrow == 0 && mycol == 0)
    say("BLACS context %d (%d x %d grid): GEMMs through tessera (TSR_SCALAPACK_REPORT=%s)", ctxt, nprow, npcol,
        s->report.empty() ? "unset" : s->report.c_str());
  s->entries.push_back(std::move(e));
  return s->entries.back().get();
}

// Statuses returned before any data moved (docs/GEMM.md): ScaLAPACK can
// still do the call. Any other failure happened during the multiplication.
bool before_data(tsr_status st) {
  return st == TSR_ERR_INVALID_ARG || st == TSR_ERR_SHAPE || st == TSR_ERR_UNSUPPORTED || st == TSR_ERR_NO_MEMORY;
}

// Hand the call to the next definition of the routine (ScaLAPACK's), or
// report like PXERBLA when there is none. Returns the function or nullptr.
void* next_of(Routine r, const std::string& why, const int* desca) {
  Shim* s = g_shim != nullptr ? g_shim : shim();
  if (s != nullptr) {
    ++s->fell_back[r];
    if (s->verbose && s->said.insert(std::string(kName[r]) + why).second)
      say("%s: falls back to ScaLAPACK: %s", kName[r], why.c_str());
  }
  void* f = dlsym(RTLD_NEXT, kName[r]);
  if (f == nullptr) {
    int nprow = -1, npcol = -1, myrow = -1, mycol = -1;
    if (have_blacs() && desca != nullptr) Cblacs_gridinfo(desca[1], &nprow, &npcol, &myrow, &mycol);
    std::string up(kName[r]);
    up.pop_back();
    for (char& c : up) c = static_cast<char>(c - 'a' + 'A');
    std::fprintf(stderr,
                 "{ %5d, %5d }:  On entry to %s (libtessera-scalapack), the call could not be done: %s, and no "
                 "ScaLAPACK %s follows in the link order\n",
                 myrow, mycol, up.c_str(), why.c_str(), kName[r]);
  }
  return f;
}

template <class T>
using Gemm = void (*)(const char*, const char*, const int*, const int*, const int*, const T*, const T*, const int*,
                      const int*, const int*, const T*, const int*, const int*, const int*, const T*, T*, const int*,
                      const int*, const int*);
template <class T>
void gemm(Routine r, const char* ta, const char* tb, const int* m, const int* n, const int* k, const T* alpha,
          const T* a, const int* ia, const int* ja, const int* desca, const T* b, const int* ib, const int* jb,
          const int* descb, const T* beta, T* c, const int* ic, const int* jc, const int* descc) {
  std::string why;
  if (const char* no = refuse(desca, descb, descc)) {
    why = no;
  } else if (Shim* s = shim()) {
    if (Entry* e = entry_of(s, desca[1], &why)) {
      const char* region = r == kPd ? "pdgemm" : "psgemm";
      tsr_region_begin(e->ctx, region);
      tsr_status st;
      if constexpr (sizeof(T) == 8)
        st = tsr::gemm::pdgemm_on(e->ctx, &e->grids, ta, tb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb,
                                  beta, c, ic, jc, descc);
      else
        st = tsr::gemm::psgemm_on(e->ctx, &e->grids, ta, tb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb,
                                  beta, c, ic, jc, descc);
      tsr_region_end(e->ctx, region);
      if (st == TSR_SUCCESS) {
        ++e->taken[r];
        return;
      }
      if (!before_data(st)) {  // C may be partly written: say so always, as PXERBLA would
        std::fprintf(stderr, "tessera-scalapack: %s failed during the multiplication: %s\n", kName[r],
                     tsr_last_error(e->ctx));
        return;
      }
      why = std::string("tessera refused it: ") + tsr_last_error(e->ctx);
    }
  } else {
    why = "the shim could not set up its MPI attributes";
  }
  if (void* f = next_of(r, why, desca))
    reinterpret_cast<Gemm<T>>(f)(ta, tb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c, ic, jc, descc);
}

}  // namespace

extern "C" {

// Fortran passes the lengths of TRANSA and TRANSB as hidden trailing
// arguments; like ScaLAPACK's own (C) pdgemm_, the shim reads the first
// character and ignores them.
__attribute__((visibility("default"))) void pdgemm_(const char* transa, const char* transb, const int* m,
                                                    const int* n, const int* k, const double* alpha, const double* a,
                                                    const int* ia, const int* ja, const int* desca, const double* b,
                                                    const int* ib, const int* jb, const int* descb,
                                                    const double* beta, double* c, const int* ic, const int* jc,
                                                    const int* descc) {
  gemm<double>(kPd, transa, transb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c, ic, jc, descc);
}

__attribute__((visibility("default"))) void psgemm_(const char* transa, const char* transb, const int* m,
                                                    const int* n, const int* k, const float* alpha, const float* a,
                                                    const int* ia, const int* ja, const int* desca, const float* b,
                                                    const int* ib, const int* jb, const int* descb, const float* beta,
                                                    float* c, const int* ic, const int* jc, const int* descc) {
  gemm<float>(kPs, transa, transb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c, ic, jc, descc);
}

// Complex: not taken by tessera; always ScaLAPACK's (counted, and said once
// with TSR_SCALAPACK_VERBOSE). Complex numbers are passed as pairs of reals.
using ZGemm = void (*)(const char*, const char*, const int*, const int*, const int*, const void*, const void*,
                       const int*, const int*, const int*, const void*, const int*, const int*, const int*, const void*,
                       void*, const int*, const int*, const int*);

__attribute__((visibility("default"))) void pzgemm_(const char* transa, const char* transb, const int* m,
                                                    const int* n, const int* k, const void* alpha, const void* a,
                                                    const int* ia, const int* ja, const int* desca, const void* b,
                                                    const int* ib, const int* jb, const int* descb, const void* beta,
                                                    void* c, const int* ic, const int* jc, const int* descc) {
  if (void* f = next_of(kPz, "complex matrices: tessera takes real single and double precision only", desca))
    reinterpret_cast<ZGemm>(f)(transa, transb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c, ic, jc,
                               descc);
}

__attribute__((visibility("default"))) void pcgemm_(const char* transa, const char* transb, const int* m,
                                                    const int* n, const int* k, const void* alpha, const void* a,
                                                    const int* ia, const int* ja, const int* desca, const void* b,
                                                    const int* ib, const int* jb, const int* descb, const void* beta,
                                                    void* c, const int* ic, const int* jc, const int* descc) {
  if (void* f = next_of(kPc, "complex matrices: tessera takes real single and double precision only", desca))
    reinterpret_cast<ZGemm>(f)(transa, transb, m, n, k, alpha, a, ia, ja, desca, b, ib, jb, descb, beta, c, ic, jc,
                               descc);
}

}  // extern "C"
