// The I/O layer (io.hpp): argument checks and agreement, the MPI-IO binary
// format, the parallel HDF5 format and the crash-safe publish of a file.
// Byte layouts: docs/FILES.md.
//
// Hang safety: before every collective MPI-IO or HDF5 call the ranks agree on
// the outcome of the steps before it (or a rank whose local step failed still
// takes part, with nothing to move), so that a failure on one rank makes all
// ranks leave together instead of some waiting in a collective. Agreements
// are few (one per dataset and a handful per file): each is an all-reduce.
#include "io.hpp"
#include "io_format.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <set>

#include "backend.hpp"
#include "core.hpp"
#include "tessera/tsr_config.h"

#if TSR_HAVE_HDF5
#include <hdf5.h>
#ifndef H5_HAVE_PARALLEL
#error "tessera needs an HDF5 built with parallel (MPI-IO) support"
#endif
#endif

namespace tsr {
namespace io {
namespace {

constexpr char kReserved[] = "tessera_";  // attribute keys the format itself uses

// ------------------------------------------------------------ small helpers
const char* cstr(const std::string& s) { return s.c_str(); }

bool reserved(const std::string& key) { return key.compare(0, sizeof kReserved - 1, kReserved) == 0; }

uint64_t block_elements(const Block& b) {
  uint64_t n = 0;
  product(b.ndims, b.extent, 1, &n);  // checked by check_block
  return n;
}

std::string shape(int nd, const uint64_t* d) {
  std::string s;
  for (int i = 0; i < nd; ++i) s += (i ? "x" : "") + std::to_string(d[i]);
  return s;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// A tag for temporary names: distinct across processes (pid), calls (counter)
// and time, without needing a random device.
uint64_t unique_tag() {
  static std::atomic<uint64_t> counter{0};
  uint64_t x = static_cast<uint64_t>(getpid()) << 32 ^ counter++ ^
               static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;  // splitmix64 finaliser
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// -------------------------------------------------------------- agreement
// tsr::agree lets a failing rank keep its own status; this layer promises one
// status on every rank, so on failure all ranks also take the status of the
// lowest failing rank (each keeps its message, which names the file).
tsr_status agree_io(const Comm& c, tsr_status local) {
  const tsr_status st = agree(c, local);
  if (st == TSR_SUCCESS) return st;
  int64_t key = local == TSR_SUCCESS ? 0 : int64_t{c.size() - c.rank()} * 16 + local, top = 0;
  const std::string keep = pending_message();
  if (allreduce(c, &key, &top, 1, TSR_INT64, TSR_MAX, nullptr, Traffic::control) != TSR_SUCCESS) return st;
  set_pending_message(keep);
  return top == 0 ? st : static_cast<tsr_status>(top % 16);
}

// Every rank must pass the same description (digest); a separate agreement
// after the local checks, so that a mismatch gets its own message.
tsr_status agree_same(const Comm& c, const std::string& path, uint64_t digest, const char* what) {
  const tsr_status st = agree(c, TSR_SUCCESS, &digest);
  if (st != TSR_ERR_INVALID_ARG) return st;
  return fail(TSR_ERR_INVALID_ARG, "file '%s': %s differ across the %d ranks; every rank must pass the same",
              cstr(path), what, c.size());
}

// --------------------------------------------------------------- checks
// The block alone: type, dimensions, inside the global shape, sizes the
// formats can address, data pointer.
tsr_status check_block(const std::string& path, const Block& b) {
  const char *f = cstr(path), *n = cstr(b.name);
  if (!dtype_valid(b.type))
    return fail(TSR_ERR_INVALID_ARG, "file '%s', dataset '%s': type %d is not a tsr_dtype", f, n, static_cast<int>(b.type));
  if (b.ndims < 1 || b.ndims > 3)
    return fail(TSR_ERR_INVALID_ARG, "file '%s', dataset '%s': ndims = %d, expected 1..3", f, n, b.ndims);
  for (int d = b.ndims; d < 3; ++d)
    if (b.global[d] != 1 || b.offset[d] != 0 || b.extent[d] != 1)
      return fail(TSR_ERR_INVALID_ARG, "file '%s', dataset '%s': unused dimension %d must have global 1, offset 0, extent 1",
                  f, n, d);
  for (int d = 0; d < b.ndims; ++d) {
    if (b.global[d] > INT_MAX)
      return fail(TSR_ERR_UNSUPPORTED, "file '%s', dataset '%s': global extent %" PRIu64 " in dimension %d exceeds INT_MAX",
                  f, n, b.global[d], d);
    if (b.offset[d] > b.global[d] || b.extent[d] > b.global[d] - b.offset[d])
      return fail(TSR_ERR_SHAPE, "file '%s', dataset '%s': block [%" PRIu64 ", %" PRIu64 ") in dimension %d lies outside the global shape %s",
                  f, n, b.offset[d], b.offset[d] + b.extent[d], d, shape(b.ndims, b.global).c_str());
  }
  uint64_t elems = 0, bytes = 0;
  if (!product(b.ndims, b.extent, 1, &elems) || elems > INT_MAX)
    return fail(TSR_ERR_UNSUPPORTED, "file '%s', dataset '%s': blocks of more than INT_MAX elements are not supported", f, n);
  if (!product(b.ndims, b.global, tsr_dtype_size(b.type), &bytes) || bytes > (uint64_t{1} << 62))
    return fail(TSR_ERR_UNSUPPORTED, "file '%s', dataset '%s': the dataset exceeds 2^62 bytes", f, n);
  if (elems > 0 && b.data == nullptr)
    return fail(TSR_ERR_INVALID_ARG, "file '%s', dataset '%s': data is NULL for a block of %" PRIu64 " elements", f, n, elems);
  return TSR_SUCCESS;
}

tsr_status check_attrs(const std::string& path, const Attrs& attrs) {
  for (const auto& kv : attrs) {
    if (!name_valid(kv.first) || reserved(kv.first))
      return fail(TSR_ERR_INVALID_ARG, "file '%s': attribute key '%s' is not 1..255 characters of [A-Za-z0-9_.-] "
                  "or starts with the reserved '%s'", cstr(path), cstr(kv.first), kReserved);
    if (kv.second.kind != TSR_ATTR_STRING && kv.second.kind != TSR_ATTR_INT64 && kv.second.kind != TSR_ATTR_DOUBLE)
      return fail(TSR_ERR_INVALID_ARG, "file '%s': attribute '%s' has kind %d, not a tsr_attr_kind", cstr(path),
                  cstr(kv.first), static_cast<int>(kv.second.kind));
    if (kv.second.text.size() > kMaxValue || kv.second.text.find('\0') != std::string::npos)
      return fail(TSR_ERR_INVALID_ARG, "file '%s': the value of attribute '%s' holds a NUL byte or exceeds %zu bytes",
                  cstr(path), cstr(kv.first), kMaxValue);
  }
  return TSR_SUCCESS;
}

tsr_status check_write(const std::string& path, const std::vector<Block>& blocks, const Attrs& attrs, Format fmt) {
  if (path.empty()) return fail(TSR_ERR_INVALID_ARG, "argument 'path' is empty");
  if (fmt == Format::hdf5 && !TSR_HAVE_HDF5)
    return fail(TSR_ERR_UNSUPPORTED, "file '%s': this build has no parallel HDF5; write Format::binary", cstr(path));
  std::set<std::string> seen;
  for (const Block& b : blocks) {
    if (!name_valid(b.name))
      return fail(TSR_ERR_INVALID_ARG, "file '%s': dataset name '%s' is not 1..255 characters of [A-Za-z0-9_.-] "
                  "(nor '.' or '..')", cstr(path), cstr(b.name));
    if (!seen.insert(b.name).second)
      return fail(TSR_ERR_INVALID_ARG, "file '%s': dataset name '%s' appears twice", cstr(path), cstr(b.name));
    TSR_TRY(check_block(path, b));
  }
  return check_attrs(path, attrs);
}

// The requested blocks against the file: each names a dataset of the file,
// with its type and global shape. which[i] = index of block i's dataset.
tsr_status match_blocks(const std::string& path, const Meta& m, const std::vector<Block>& blocks,
                        std::vector<size_t>* which) {
  const char* f = cstr(path);
  for (const Block& b : blocks) {
    size_t i = 0;
    while (i < m.sets.size() && m.sets[i].info.name != b.name) ++i;
    if (i == m.sets.size()) return fail(TSR_ERR_IO, "file '%s' has no dataset '%s'", f, cstr(b.name));
    const DatasetInfo& d = m.sets[i].info;
    if (b.type != d.type)
      return fail(TSR_ERR_INVALID_ARG, "file '%s', dataset '%s': the file holds %s, the block asks for %s", f,
                  cstr(b.name), dtype_name(d.type), dtype_name(b.type));
    if (b.ndims != d.ndims || shape(d.ndims, d.global) != shape(b.ndims, b.global))
      return fail(TSR_ERR_SHAPE, "file '%s', dataset '%s': the file has global shape %s, the block says %s", f,
                  cstr(b.name), shape(d.ndims, d.global).c_str(),
                  b.ndims >= 1 && b.ndims <= 3 ? shape(b.ndims, b.global).c_str() : "(bad ndims)");
    TSR_TRY(check_block(path, b));
    which->push_back(i);
  }
  return TSR_SUCCESS;
}

// The binary layout of blocks' datasets (sizes checked by check_block).
Meta layout(const std::vector<Block>& blocks, const Attrs& attrs, std::string* head) {
  Meta m;
  m.attrs = attrs;
  for (const Block& b : blocks) {
    Entry e;
    e.info = {b.name, b.type, b.ndims, {b.global[0], b.global[1], b.global[2]}};
    m.sets.push_back(e);
  }
  *head = describe(&m);
  return m;
}

// ---------------------------------------------------------------- MPI-IO
tsr_status mpiio_fail(int rc, const std::string& path, const char* what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0, cls = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "MPI error code %d", rc);
  MPI_Error_class(rc, &cls);
  const char* plain = cls == MPI_ERR_NO_SUCH_FILE ? "no such file or directory"
                      : cls == MPI_ERR_ACCESS    ? "permission denied"
                      : cls == MPI_ERR_READ_ONLY ? "read-only file or file system"
                      : cls == MPI_ERR_NO_SPACE  ? "no space left on the device"
                                                 : nullptr;
  return fail(TSR_ERR_IO, "file '%s': %s: %s", cstr(path), what, plain ? plain : text);
}

tsr_status mpiio(int rc, const std::string& path, const char* what) {
  return rc == MPI_SUCCESS ? TSR_SUCCESS : mpiio_fail(rc, path, what);
}

// An open MPI file, closed (collectively) when it goes out of scope on an
// error path: every rank takes the same path, see agree_io.
struct File {
  MPI_File fh = MPI_FILE_NULL;
  File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() {
    if (fh != MPI_FILE_NULL) MPI_File_close(&fh);
  }
  // Local status: the caller agrees.
  tsr_status close(const std::string& path) {
    const int rc = MPI_File_close(&fh);
    fh = MPI_FILE_NULL;
    return mpiio(rc, path, "MPI_File_close");
  }
};

// Independent read of n bytes at off (rank 0's header reads); charged.
tsr_status read_bytes(const Comm& c, MPI_File fh, const std::string& path, uint64_t off, uint64_t n, std::string* out) {
  out->assign(n, '\0');
  MPI_Status status;
  int got = 0;
  TSR_TRY(mpiio(MPI_File_read_at(fh, static_cast<MPI_Offset>(off), &(*out)[0], static_cast<int>(n), MPI_BYTE, &status),
                path, "reading the header"));
  MPI_Get_count(&status, MPI_BYTE, &got);
  c.ledger().disk_read(static_cast<uint64_t>(got));
  out->resize(static_cast<size_t>(got));
  return TSR_SUCCESS;
}

// Rank 0 alone: sniff_with over the file, read through MPI-IO (charged).
tsr_status sniff(const Comm& c, const std::string& path, Format* fmt, std::string* head) {
  File f;
  TSR_TRY(mpiio(MPI_File_open(MPI_COMM_SELF, path.c_str(), MPI_MODE_RDONLY, MPI_INFO_NULL, &f.fh), path,
                "cannot open it for reading"));
  MPI_Offset size = 0;
  TSR_TRY(mpiio(MPI_File_get_size(f.fh, &size), path, "MPI_File_get_size"));
  const ReadAt read = [&](uint64_t off, uint64_t len, std::string* out) {
    return read_bytes(c, f.fh, path, off, len, out);
  };
  return sniff_with(path, static_cast<uint64_t>(size), read, fmt, head);
}

// The ledger: the bytes of this rank's block, moved to or from the file.
void charge(const Comm& c, const Block& b, bool writing) {
  const uint64_t bytes = block_elements(b) * tsr_dtype_size(b.type);
  if (writing)
    c.ledger().disk_write(bytes);
  else
    c.ledger().disk_read(bytes);
}

tsr_status subarray(const Block& b, MPI_Datatype etype, MPI_Datatype* out) {
  int sizes[3], subs[3], starts[3];
  for (int d = 0; d < b.ndims; ++d) {
    sizes[d] = static_cast<int>(b.global[d]);  // all checked to fit an int
    subs[d] = static_cast<int>(b.extent[d]);
    starts[d] = static_cast<int>(b.offset[d]);
  }
  TSR_MPI_TRY(MPI_Type_create_subarray(b.ndims, sizes, subs, starts, MPI_ORDER_C, etype, out));
  const int rc = MPI_Type_commit(out);
  if (rc != MPI_SUCCESS) MPI_Type_free(out);
  return rc == MPI_SUCCESS ? TSR_SUCCESS : mpi_fail(rc, "MPI_Type_commit");
}

// Collective: this rank's block of the dataset at disp, through a subarray
// file view, written from or read into b.data. Charged. A rank whose view
// could not be set still takes part in the collective transfer, moving nothing.
tsr_status transfer(const Comm& c, MPI_File fh, const std::string& path, uint64_t disp, const Block& b, bool writing) {
  const MPI_Datatype etype = mpi_type(b.type);
  const uint64_t n = block_elements(b);
  // A block whose rows span the whole of every later dimension (a 1D shard,
  // a block of whole rows) is one contiguous run of the file: written at its
  // offset through the plain view, which MPI-IO implementations handle
  // faster than a subarray file type.
  bool contiguous = true;
  for (int d = 1; d < b.ndims; ++d) contiguous = contiguous && b.extent[d] == b.global[d];
  uint64_t at = 0;  // elements from disp
  if (contiguous) {
    at = b.offset[0];
    for (int d = 1; d < b.ndims; ++d) at *= b.global[d];
  }
  MPI_Datatype ftype = etype;
  tsr_status st = n > 0 && !contiguous ? subarray(b, etype, &ftype) : TSR_SUCCESS;
  if (st != TSR_SUCCESS) ftype = etype;
  const int view = MPI_File_set_view(fh, static_cast<MPI_Offset>(disp), etype, ftype, "native", MPI_INFO_NULL);
  if (ftype != etype) MPI_Type_free(&ftype);
  if (st == TSR_SUCCESS) st = mpiio(view, path, "MPI_File_set_view");
  MPI_Status status;
  const int count = st == TSR_SUCCESS ? static_cast<int>(n) : 0;
  const MPI_Offset off = static_cast<MPI_Offset>(count > 0 ? at : 0);
  const int rc = writing ? MPI_File_write_at_all(fh, off, b.data, count, etype, &status)
                         : MPI_File_read_at_all(fh, off, b.data, count, etype, &status);
  int got = count;
  if (rc == MPI_SUCCESS && !writing) MPI_Get_count(&status, etype, &got);
  if (st == TSR_SUCCESS) st = mpiio(rc, path, writing ? "writing data" : "reading data");
  if (st == TSR_SUCCESS && got != count)
    st = fail(TSR_ERR_IO, "file '%s', dataset '%s': read %d of %d elements", cstr(path), cstr(b.name), got, count);
  if (st == TSR_SUCCESS) charge(c, b, writing);
  return agree_io(c, st);
}

tsr_status bin_write(const Comm& c, const std::string& path, const std::string& tmp, const std::vector<Block>& blocks,
                     const Attrs& attrs, bool sync) {
  std::string head;
  const Meta m = layout(blocks, attrs, &head);
  File f;
  const std::string what = "cannot create the temporary file '" + tmp + "'";
  TSR_TRY(agree_io(c, mpiio(MPI_File_open(c.mpi(), tmp.c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &f.fh),
                            path, what.c_str())));
  // Exact size (no stale bytes), then rank 0's independent header write.
  tsr_status st = mpiio(MPI_File_set_size(f.fh, static_cast<MPI_Offset>(m.file_bytes)), path, "MPI_File_set_size");
  if (st == TSR_SUCCESS && c.rank() == 0) {
    MPI_Status status;
    st = mpiio(MPI_File_write_at(f.fh, 0, head.data(), static_cast<int>(head.size()), MPI_BYTE, &status), path,
               "writing the header");
    if (st == TSR_SUCCESS) c.ledger().disk_write(head.size());
  }
  TSR_TRY(agree_io(c, st));
  for (size_t i = 0; i < blocks.size(); ++i)
    TSR_TRY(transfer(c, f.fh, path, m.sets[i].offset, blocks[i], true));
  // Data on stable storage before the rename makes the new file visible.
  st = sync ? mpiio(MPI_File_sync(f.fh), path, "MPI_File_sync") : TSR_SUCCESS;
  const tsr_status closed = f.close(path);
  return agree_io(c, st != TSR_SUCCESS ? st : closed);
}

tsr_status bin_read(const Comm& c, const std::string& path, const Meta& m, std::vector<Block>& blocks,
                    const std::vector<size_t>& which) {
  File f;
  TSR_TRY(agree_io(c, mpiio(MPI_File_open(c.mpi(), path.c_str(), MPI_MODE_RDONLY, MPI_INFO_NULL, &f.fh), path,
                            "cannot open it for reading")));
  for (size_t i = 0; i < blocks.size(); ++i)
    TSR_TRY(transfer(c, f.fh, path, m.sets[which[i]].offset, blocks[i], false));
  return agree_io(c, f.close(path));
}

// -------------------------------------------------------------------- HDF5
#if TSR_HAVE_HDF5
constexpr char kH5Marker[] = "tessera_format", kH5MarkerValue[] = "tessera-hdf5";
constexpr char kH5Version[] = "tessera_format_version", kH5Dtype[] = "tessera_dtype";
constexpr int kH5FormatVersion = 2;  // 2: attributes may be int64 or double; 1 (strings only) is read too

// HDF5 prints its error stack by default; the library never prints, so
// printing is off while tessera calls HDF5 (and restored after, for the
// application's own HDF5 use).
class H5Quiet {
 public:
  H5Quiet() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~H5Quiet() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  H5Quiet(const H5Quiet&) = delete;
  H5Quiet& operator=(const H5Quiet&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// An HDF5 identifier, closed with its close function at end of scope.
class Hid {
 public:
  using Close = herr_t (*)(hid_t);
  Hid(hid_t id, Close close) : id_(id), close_(close) {}
  ~Hid() { release(); }
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  void reset(hid_t id, Close close) {
    release();
    id_ = id;
    close_ = close;
  }
  herr_t release() {
    const herr_t e = id_ >= 0 ? close_(id_) : 0;
    id_ = -1;
    return e;
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  Close close_;
};

herr_t innermost(unsigned, const H5E_error2_t* e, void* out) {
  if (e->desc && *e->desc) *static_cast<std::string*>(out) = e->desc;
  return 0;
}

// TSR_ERR_IO with the innermost (most specific) entry of HDF5's error stack.
tsr_status h5_fail(const std::string& path, const std::string& what) {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, innermost, &detail);
  return fail(TSR_ERR_IO, "file '%s': HDF5 %s failed%s%s", cstr(path), what.c_str(), detail.empty() ? "" : ": ",
              detail.c_str());
}

hid_t h5_type(tsr_dtype t) {
  switch (t) {
    case TSR_BYTE: return H5T_NATIVE_UINT8;
    case TSR_INT32: return H5T_NATIVE_INT32;
    case TSR_INT64: return H5T_NATIVE_INT64;
    case TSR_FLOAT32: return H5T_NATIVE_FLOAT;
    case TSR_FLOAT64: return H5T_NATIVE_DOUBLE;
    case TSR_BFLOAT16: return H5T_NATIVE_UINT16;  // bit pattern; the dataset's tessera_dtype says bfloat16
  }
  return H5I_INVALID_HID;
}

const char* const kTypeWords[] = {"byte", "int32", "int64", "float32", "float64", "bfloat16"};  // by tsr_dtype

bool type_of_word(const std::string& w, tsr_dtype* t) {
  for (int i = TSR_BYTE; i <= TSR_BFLOAT16; ++i) {
    if (w != kTypeWords[i]) continue;
    *t = static_cast<tsr_dtype>(i);
    return true;
  }
  return false;
}

// A scalar fixed-length string attribute, NUL-padded (values hold no NUL).
tsr_status h5_put_string(hid_t obj, const std::string& path, const char* key, std::string value) {
  const size_t len = value.empty() ? 1 : value.size();  // HDF5 strings have at least one byte
  value.resize(len, '\0');
  Hid type(H5Tcopy(H5T_C_S1), H5Tclose), space(H5Screate(H5S_SCALAR), H5Sclose), attr(-1, H5Aclose);
  if (type.ok() && space.ok() && H5Tset_size(type.get(), len) >= 0 && H5Tset_strpad(type.get(), H5T_STR_NULLPAD) >= 0)
    attr.reset(H5Acreate2(obj, key, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok() || H5Awrite(attr.get(), type.get(), value.data()) < 0)
    return h5_fail(path, std::string("writing attribute '") + key + "'");
  return TSR_SUCCESS;
}

tsr_status h5_get_string(hid_t obj, const std::string& path, const char* key, std::string* value) {
  const std::string what = std::string("reading string attribute '") + key + "'";
  Hid attr(H5Aopen(obj, key, H5P_DEFAULT), H5Aclose), type(-1, H5Tclose);
  if (attr.ok()) type.reset(H5Aget_type(attr.get()), H5Tclose);
  if (!type.ok()) return h5_fail(path, what);
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) != 0)
    return fail(TSR_ERR_IO, "file '%s': attribute '%s' is not a fixed-length string", cstr(path), key);
  std::string buf(H5Tget_size(type.get()), '\0');
  if (H5Aread(attr.get(), type.get(), &buf[0]) < 0) return h5_fail(path, what);
  *value = buf.substr(0, buf.find('\0'));
  return TSR_SUCCESS;
}

tsr_status h5_put_root_attrs(hid_t file, const std::string& path, const Attrs& attrs) {
  Hid space(H5Screate(H5S_SCALAR), H5Sclose), attr(-1, H5Aclose);
  if (space.ok()) attr.reset(H5Acreate2(file, kH5Version, H5T_NATIVE_INT, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok() || H5Awrite(attr.get(), H5T_NATIVE_INT, &kH5FormatVersion) < 0)
    return h5_fail(path, std::string("writing attribute '") + kH5Version + "'");
  TSR_TRY(h5_put_string(file, path, kH5Marker, kH5MarkerValue));
  for (const auto& kv : attrs) {
    if (kv.second.kind == TSR_ATTR_STRING) {
      TSR_TRY(h5_put_string(file, path, kv.first.c_str(), kv.second.text));
      continue;
    }
    const bool integer = kv.second.kind == TSR_ATTR_INT64;
    const hid_t type = integer ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE;
    Hid a(space.ok() ? H5Acreate2(file, kv.first.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT) : -1, H5Aclose);
    const void* v = integer ? static_cast<const void*>(&kv.second.i) : static_cast<const void*>(&kv.second.d);
    if (!a.ok() || H5Awrite(a.get(), type, v) < 0) return h5_fail(path, "writing attribute '" + kv.first + "'");
  }
  return TSR_SUCCESS;
}

tsr_status h5_create(hid_t file, const std::string& path, const Block& b, Hid* dset) {
  hsize_t dims[3];
  for (int d = 0; d < b.ndims; ++d) dims[d] = b.global[d];
  // Every element is written by some rank (or is left undefined): no fill pass.
  Hid space(H5Screate_simple(b.ndims, dims, nullptr), H5Sclose), dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (space.ok() && dcpl.ok() && H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER) >= 0)
    dset->reset(H5Dcreate2(file, b.name.c_str(), h5_type(b.type), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                H5Dclose);
  if (!dset->ok()) return h5_fail(path, "creating dataset '" + b.name + "'");
  return h5_put_string(dset->get(), path, kH5Dtype, kTypeWords[b.type]);
}

// Selections of this rank's block in the file and in memory; false if HDF5 failed.
bool h5_select(hid_t fspace, const Block& b, Hid* mspace) {
  hsize_t start[3], count[3];
  for (int d = 0; d < b.ndims; ++d) {
    start[d] = b.offset[d];
    count[d] = b.extent[d];
  }
  if (block_elements(b) == 0) {
    const hsize_t one = 1;
    mspace->reset(H5Screate_simple(1, &one, nullptr), H5Sclose);
    return mspace->ok() && H5Sselect_none(fspace) >= 0 && H5Sselect_none(mspace->get()) >= 0;
  }
  mspace->reset(H5Screate_simple(b.ndims, count, nullptr), H5Sclose);
  return mspace->ok() && H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, count, nullptr) >= 0;
}

// Collective: this rank's block of dset, written from or read into b.data.
// Charged. prior: the outcome of creating or opening dset, agreed on here
// together with the selection.
tsr_status h5_transfer(const Comm& c, hid_t dset, const std::string& path, const Block& b, bool writing,
                       tsr_status prior) {
  Hid fspace(-1, H5Sclose), mspace(-1, H5Sclose), dxpl(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  tsr_status st = prior;
  if (st == TSR_SUCCESS) {
    fspace.reset(H5Dget_space(dset), H5Sclose);
    if (!fspace.ok() || !dxpl.ok() || H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE) < 0 ||
        !h5_select(fspace.get(), b, &mspace))
      st = h5_fail(path, "selecting the block of dataset '" + b.name + "'");
  }
  TSR_TRY(agree_io(c, st));
  uint64_t global = 0;
  product(b.ndims, b.global, 1, &global);
  if (global == 0) return TSR_SUCCESS;  // HDF5 gives a dataset of no elements no storage to transfer
  static char nothing;  // HDF5 wants a buffer even for an empty selection
  void* buf = b.data ? b.data : &nothing;
  const herr_t e = writing ? H5Dwrite(dset, h5_type(b.type), mspace.get(), fspace.get(), dxpl.get(), buf)
                           : H5Dread(dset, h5_type(b.type), mspace.get(), fspace.get(), dxpl.get(), buf);
  st = e < 0 ? h5_fail(path, (writing ? "writing dataset '" : "reading dataset '") + b.name + "'") : TSR_SUCCESS;
  if (st == TSR_SUCCESS) charge(c, b, writing);
  return agree_io(c, st);
}

tsr_status h5_fapl(const Comm& c, const std::string& path, Hid* fapl) {
  fapl->reset(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl->ok() || H5Pset_fapl_mpio(fapl->get(), c.mpi(), MPI_INFO_NULL) < 0)
    return h5_fail(path, "setting up MPI-IO file access");
  return TSR_SUCCESS;
}

tsr_status h5_close(const Comm& c, Hid* file, const std::string& path, tsr_status prior = TSR_SUCCESS) {
  const tsr_status st = file->release() < 0 ? h5_fail(path, "closing the file") : TSR_SUCCESS;
  return agree_io(c, prior != TSR_SUCCESS ? prior : st);
}

// HDF5 1.10 does not survive a write that runs out of space: H5Fclose fails
// and the library crashes later, at MPI_Finalize. So before HDF5 touches the
// file, rank 0 reserves the space the file will need (data plus a generous
// allowance for HDF5's metadata) in a scratch file next to it, and removes it
// again: a full disk or a file size limit then fails here, cleanly. File
// systems without fallocate(2) skip the check.
tsr_status h5_reserve(const Comm& c, const std::string& path, const std::string& tmp, const std::vector<Block>& blocks,
                      const Attrs& attrs) {
  tsr_status st = TSR_SUCCESS;
  if (c.rank() == 0) {
    uint64_t need = 64 << 10;
    for (const Block& b : blocks) {
      uint64_t bytes = 0;
      product(b.ndims, b.global, tsr_dtype_size(b.type), &bytes);
      need += bytes + 4096 + b.name.size();
    }
    for (const auto& kv : attrs) need += 512 + kv.first.size() + kv.second.text.size();
    const std::string probe = tmp + ".space";
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      st = fail(TSR_ERR_IO, "file '%s': cannot create the temporary file '%s': %s", cstr(path), cstr(probe),
                std::strerror(errno));
    } else {
      if (::fallocate(fd, 0, 0, static_cast<off_t>(need)) != 0 && errno != EOPNOTSUPP && errno != ENOSYS)
        st = fail(TSR_ERR_IO, "file '%s': cannot reserve the %" PRIu64 " bytes the file needs: %s", cstr(path), need,
                  errno == EFBIG ? "file size limit exceeded" : std::strerror(errno));
      ::close(fd);
      ::unlink(probe.c_str());
    }
  }
  return agree_io(c, st);
}

tsr_status h5_write(const Comm& c, const std::string& path, const std::string& tmp, const std::vector<Block>& blocks,
                    const Attrs& attrs, bool sync) {
  TSR_TRY(h5_reserve(c, path, tmp, blocks, attrs));
  H5Quiet quiet;
  Hid fapl(-1, H5Pclose), fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose), file(-1, H5Fclose);
  tsr_status st = h5_fapl(c, path, &fapl);
  // Creation order lets inspect() list the datasets in the order written.
  if (st == TSR_SUCCESS &&
      (!fcpl.ok() || H5Pset_link_creation_order(fcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED) < 0))
    st = h5_fail(path, "setting up file creation");
  TSR_TRY(agree_io(c, st));
  file.reset(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose);
  TSR_TRY(agree_io(c, file.ok() ? TSR_SUCCESS : h5_fail(path, "creating the temporary file '" + tmp + "'")));
  TSR_TRY(agree_io(c, h5_put_root_attrs(file.get(), path, attrs)));
  for (const Block& b : blocks) {
    Hid dset(-1, H5Dclose);
    const tsr_status made = h5_create(file.get(), path, b, &dset);
    TSR_TRY(h5_transfer(c, dset.get(), path, b, true, made));
  }
  // Data on stable storage before the rename makes the new file visible.
  // (H5Fflush with the MPI-IO driver ends in MPI_File_sync.)
  st = sync && H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0 ? h5_fail(path, "flushing the file") : TSR_SUCCESS;
  return h5_close(c, &file, path, st);
}

herr_t collect_name(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

tsr_status h5_get_attrs(hid_t file, const std::string& path, Attrs* attrs) {
  std::vector<std::string> names;
  if (H5Aiterate2(file, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_name, &names) < 0)
    return h5_fail(path, "listing the attributes");
  for (const std::string& key : names) {
    if (reserved(key)) continue;
    Hid a(H5Aopen(file, key.c_str(), H5P_DEFAULT), H5Aclose), type(-1, H5Tclose), space(-1, H5Sclose);
    if (a.ok()) type.reset(H5Aget_type(a.get()), H5Tclose);
    if (a.ok()) space.reset(H5Aget_space(a.get()), H5Sclose);
    if (!type.ok() || !space.ok()) return h5_fail(path, "reading attribute '" + key + "'");
    const H5T_class_t cls = H5Tget_class(type.get());
    Value v;
    if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
      if (H5Sget_simple_extent_npoints(space.get()) != 1)
        return fail(TSR_ERR_IO, "file '%s': attribute '%s' is not a single number", cstr(path), cstr(key));
      v.kind = cls == H5T_INTEGER ? TSR_ATTR_INT64 : TSR_ATTR_DOUBLE;
      const herr_t e = cls == H5T_INTEGER ? H5Aread(a.get(), H5T_NATIVE_INT64, &v.i)
                                          : H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v.d);
      if (e < 0) return h5_fail(path, "reading attribute '" + key + "'");
    } else {
      TSR_TRY(h5_get_string(file, path, key.c_str(), &v.text));
    }
    (*attrs)[key] = std::move(v);
  }
  return TSR_SUCCESS;
}

tsr_status h5_describe(hid_t file, const std::string& path, const std::string& name, DatasetInfo* info) {
  info->name = name;
  Hid dset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose), space(-1, H5Sclose), type(-1, H5Tclose);
  if (dset.ok()) space.reset(H5Dget_space(dset.get()), H5Sclose);
  if (dset.ok()) type.reset(H5Dget_type(dset.get()), H5Tclose);
  if (!space.ok() || !type.ok()) return h5_fail(path, "opening dataset '" + name + "'");
  std::string word;
  TSR_TRY(h5_get_string(dset.get(), path, kH5Dtype, &word));
  const int nd = H5Sget_simple_extent_ndims(space.get());
  hsize_t dims[3] = {1, 1, 1};
  if (!type_of_word(word, &info->type) || H5Tget_size(type.get()) != tsr_dtype_size(info->type) || nd < 1 || nd > 3 ||
      H5Sget_simple_extent_dims(space.get(), dims, nullptr) < 0)
    return fail(TSR_ERR_IO, "file '%s', dataset '%s': not a tessera dataset (type '%s', %d dimensions)", cstr(path),
                cstr(name), cstr(word), nd);
  info->ndims = nd;
  for (int d = 0; d < 3; ++d) info->global[d] = dims[d];
  return TSR_SUCCESS;
}

tsr_status h5_list(hid_t file, const std::string& path, Meta* m) {
  H5G_info_t g;
  if (H5Gget_info(file, &g) < 0) return h5_fail(path, "reading the root group");
  m->sets.resize(g.nlinks);
  for (hsize_t i = 0; i < g.nlinks; ++i) {
    const ssize_t len = H5Lget_name_by_idx(file, ".", H5_INDEX_CRT_ORDER, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    std::vector<char> name(len > 0 ? static_cast<size_t>(len) + 1 : 1, '\0');
    if (len <= 0 ||
        H5Lget_name_by_idx(file, ".", H5_INDEX_CRT_ORDER, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT) < 0)
      return h5_fail(path, "listing the datasets");
    TSR_TRY(h5_describe(file, path, name.data(), &m->sets[i].info));
  }
  return TSR_SUCCESS;
}

tsr_status h5_check_marker(hid_t file, const std::string& path) {
  std::string marker;
  if (H5Aexists(file, kH5Marker) <= 0 || h5_get_string(file, path, kH5Marker, &marker) != TSR_SUCCESS ||
      marker != kH5MarkerValue)
    return fail(TSR_ERR_IO, "file '%s' is an HDF5 file but not a tessera file (no root attribute %s = \"%s\")",
                cstr(path), kH5Marker, kH5MarkerValue);
  int version = 0;
  Hid attr(H5Aopen(file, kH5Version, H5P_DEFAULT), H5Aclose);
  if (!attr.ok() || H5Aread(attr.get(), H5T_NATIVE_INT, &version) < 0) return h5_fail(path, "reading the format version");
  if (version < 1 || version > kH5FormatVersion)
    return fail(TSR_ERR_IO, "file '%s' has tessera HDF5 format version %d, this build reads 1 to %d", cstr(path),
                version, kH5FormatVersion);
  return TSR_SUCCESS;
}

// Rank 0 alone (serial driver): the marker, the datasets and the attrs.
tsr_status h5_summary(const std::string& path, Meta* m) {
  H5Quiet quiet;
  Hid file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) return h5_fail(path, "opening the file");
  TSR_TRY(h5_check_marker(file.get(), path));
  TSR_TRY(h5_list(file.get(), path, m));
  TSR_TRY(h5_get_attrs(file.get(), path, &m->attrs));
  return file.release() < 0 ? h5_fail(path, "closing the file") : TSR_SUCCESS;
}

// Collective: the blocks, already matched against the file by probe().
tsr_status h5_read(const Comm& c, const std::string& path, std::vector<Block>& blocks) {
  H5Quiet quiet;
  Hid fapl(-1, H5Pclose), file(-1, H5Fclose);
  TSR_TRY(agree_io(c, h5_fapl(c, path, &fapl)));
  file.reset(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  TSR_TRY(agree_io(c, file.ok() ? TSR_SUCCESS : h5_fail(path, "opening the file")));
  for (Block& b : blocks) {
    Hid dset(H5Dopen2(file.get(), b.name.c_str(), H5P_DEFAULT), H5Dclose);
    const tsr_status opened = dset.ok() ? TSR_SUCCESS : h5_fail(path, "opening dataset '" + b.name + "'");
    TSR_TRY(h5_transfer(c, dset.get(), path, b, false, opened));
  }
  return h5_close(c, &file, path);
}
#endif  // TSR_HAVE_HDF5

// --------------------------------------------------------------- probing
// Rank 0 alone: the format and the file's description as a binary header
// and table (for HDF5 files too: one form to broadcast and decode).
tsr_status summary(const Comm& c, const std::string& path, Format* fmt, std::string* head) {
  TSR_TRY(sniff(c, path, fmt, head));
  if (*fmt == Format::binary) return TSR_SUCCESS;
#if TSR_HAVE_HDF5
  Meta m;
  TSR_TRY(h5_summary(path, &m));
  *head = describe(&m);
  return TSR_SUCCESS;
#else
  return fail(TSR_ERR_UNSUPPORTED, "file '%s' is an HDF5 file and this build has no HDF5", cstr(path));
#endif
}

// Collective: the file's format and description, read by rank 0 alone and
// broadcast, so that a bad file fails before any collective open. Callers
// have checked that the paths agree.
tsr_status probe(const Comm& c, const std::string& path, Meta* m) {
  if (path.empty()) return agree_io(c, fail(TSR_ERR_INVALID_ARG, "argument 'path' is empty"));
  std::string head;
  TSR_TRY(agree_io(c, c.rank() == 0 ? summary(c, path, &m->fmt, &head) : TSR_SUCCESS));
  uint64_t note[2] = {m->fmt == Format::hdf5 ? 1u : 0u, head.size()};
  TSR_TRY(bcast(c, note, 2, TSR_INT64, 0, nullptr, Traffic::control));
  head.resize(note[1]);
  TSR_TRY(bcast(c, &head[0], head.size(), TSR_BYTE, 0, nullptr, Traffic::control));
  TSR_TRY(decode(head, path, m));  // the same bytes on every rank: the same outcome, no agreement needed
  m->fmt = note[0] ? Format::hdf5 : Format::binary;
  return TSR_SUCCESS;
}

// ------------------------------------------------------------- publishing
tsr_status temp_name(const Comm& c, const std::string& path, std::string* tmp) {
  uint64_t tag = c.rank() == 0 ? unique_tag() : 0;
  TSR_TRY(bcast(c, &tag, 1, TSR_INT64, 0, nullptr, Traffic::control));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, tag);
  *tmp = path + ".tsr-tmp-" + hex;
  return TSR_SUCCESS;
}

// Rank 0 renames the finished temporary over path (atomic on POSIX file
// systems: readers see the old file or the new one, never a mix).
// With sync, the directory is then flushed too, so that the new name
// survives a crash of the machine.
tsr_status publish(const Comm& c, const std::string& tmp, const std::string& path, bool sync) {
  tsr_status st = TSR_SUCCESS;
  if (c.rank() == 0 && std::rename(tmp.c_str(), path.c_str()) != 0)
    st = fail(TSR_ERR_IO, "file '%s': cannot rename the temporary file '%s' to it: %s", cstr(path), cstr(tmp),
              std::strerror(errno));
  if (st == TSR_SUCCESS && sync && c.rank() == 0) {
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    // A file system that cannot sync a directory (EINVAL) has nothing to flush.
    if (fd < 0 || (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS))
      st = fail(TSR_ERR_IO, "file '%s': renamed, but flushing its directory '%s' failed: %s", cstr(path), cstr(dir),
                std::strerror(errno));
    if (fd >= 0) ::close(fd);
  }
  return agree_io(c, st);
}

// After a failed write: rank 0 removes the temporary (if it was created), and
// no rank returns before it is gone. Keeps the failure's message.
void discard(const Comm& c, const std::string& tmp) {
  const std::string keep = pending_message();
  if (c.rank() == 0) std::remove(tmp.c_str());
  agree(c, TSR_SUCCESS);
  set_pending_message(keep);
}

Format resolve(Format f) {
  if (f != Format::automatic) return f;
  return TSR_HAVE_HDF5 ? Format::hdf5 : Format::binary;
}

// The local checks of write(), and the digest of what every rank must pass
// identically: path, format, dataset descriptions and attrs (the binary
// header and table encode all of them). Readers refuse tables over 64 MiB.
tsr_status check_and_digest(const std::string& path, const std::vector<Block>& blocks, const Attrs& attrs, Format fmt,
                            uint64_t* digest) {
  TSR_TRY(check_write(path, blocks, attrs, fmt));
  std::string head;
  layout(blocks, attrs, &head);
  if (head.size() - kHeaderBytes > kMaxTableBytes)
    return fail(TSR_ERR_UNSUPPORTED, "file '%s': the description of %zu datasets and %zu attrs exceeds %" PRIu64 " bytes",
                cstr(path), blocks.size(), attrs.size(), kMaxTableBytes);
  *digest = fnv1a(path + '\n' + (fmt == Format::hdf5 ? 'h' : 'b') + head);
  return TSR_SUCCESS;
}

uint64_t names_digest(const std::string& path, const std::vector<Block>& blocks) {
  std::string all = path + '\n';
  for (const Block& b : blocks) all += b.name + '\n';
  return fnv1a(all);
}

}  // namespace

// ------------------------------------------------------------------ public

bool Value::operator==(const Value& o) const {
  return kind == o.kind && text == o.text && i == o.i && std::memcmp(&d, &o.d, sizeof d) == 0;
}

tsr_status write(const Comm& c, const std::string& path, const std::vector<Block>& blocks, const Attrs& attrs,
                 Format fmt, bool sync) {
  fmt = resolve(fmt);
  uint64_t digest = 0;
  TSR_TRY(agree_io(c, check_and_digest(path, blocks, attrs, fmt, &digest)));
  TSR_TRY(agree_same(c, path, digest, "the path, format, dataset names, types and global shapes, or attrs"));
  std::string tmp;
  TSR_TRY(temp_name(c, path, &tmp));
  tsr_status st = TSR_SUCCESS;
#if TSR_HAVE_HDF5
  if (fmt == Format::hdf5) st = h5_write(c, path, tmp, blocks, attrs, sync);
#endif
  if (fmt == Format::binary) st = bin_write(c, path, tmp, blocks, attrs, sync);
  if (st == TSR_SUCCESS) st = publish(c, tmp, path, sync);
  if (st != TSR_SUCCESS) discard(c, tmp);
  return st;
}

tsr_status read(const Comm& c, const std::string& path, std::vector<Block>& blocks, Attrs* attrs) {
  TSR_TRY(agree_same(c, path, names_digest(path, blocks), "the paths or the requested dataset names"));
  Meta m;
  TSR_TRY(probe(c, path, &m));
  std::vector<size_t> which;
  TSR_TRY(agree_io(c, match_blocks(path, m, blocks, &which)));
#if TSR_HAVE_HDF5
  if (m.fmt == Format::hdf5) TSR_TRY(h5_read(c, path, blocks));
#endif
  if (m.fmt == Format::binary) TSR_TRY(bin_read(c, path, m, blocks, which));
  if (attrs) *attrs = m.attrs;
  return TSR_SUCCESS;
}

tsr_status inspect(const Comm& c, const std::string& path, std::vector<DatasetInfo>* sets, Format* fmt, Attrs* attrs) {
  TSR_TRY(agree_same(c, path, fnv1a(path), "the paths"));
  Meta m;
  TSR_TRY(probe(c, path, &m));
  if (sets) {
    sets->clear();
    for (const Entry& e : m.sets) sets->push_back(e.info);
  }
  if (fmt) *fmt = m.fmt;
  if (attrs) *attrs = m.attrs;
  return TSR_SUCCESS;
}

}  // namespace io
}  // namespace tsr
