// The I/O layer's pure byte formats (io_format.hpp): the binary format's
// header and table, encoded and decoded, and the sniffing of a file's first
// bytes. No MPI, no files: io.cpp reads the bytes (rank 0, MPI-IO) and calls
// these; the fuzzer (tests/fuzz/fuzz_tsrbin.cpp) calls them on bytes in
// memory. Byte layouts: docs/FILES.md.
#include "io_format.hpp"

#include <cinttypes>
#include <cstring>
#include <functional>

#include "core.hpp"

namespace tsr {
namespace io {
namespace {

const char* cstr(const std::string& s) { return s.c_str(); }

constexpr char kMagic[] = "TSRBIN02";     // "TSRBIN" + two-digit format version (written)
constexpr char kMagicV1[] = "TSRBIN01";   // read too: string attributes only
constexpr size_t kMagicBytes = 8;
constexpr uint32_t kEndianMarker = 0x01020304u;
constexpr char kHdf5Signature[] = "\x89HDF\r\n\x1a\n";

// ------------------------------------------------- binary header and table
class Out {
 public:
  void raw(const void* p, size_t n) { s_.append(static_cast<const char*>(p), n); }
  void u32(uint32_t v) { raw(&v, sizeof v); }
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void str(const std::string& v) { u32(static_cast<uint32_t>(v.size())); s_ += v; }
  std::string& bytes() { return s_; }

 private:
  std::string s_;
};

// Reads data[pos..size) (pos <= size is the caller's promise; a read past
// the end fails and sticks).
class In {
 public:
  In(const uint8_t* data, size_t size, size_t pos) : p_(data), size_(size), pos_(pos < size ? pos : size) {}
  bool raw(void* p, size_t n) {
    if (!ok_ || size_ - pos_ < n) return ok_ = false;
    if (n) std::memcpy(p, p_ + pos_, n);
    pos_ += n;
    return true;
  }
  uint32_t u32() { uint32_t v = 0; raw(&v, sizeof v); return v; }
  uint64_t u64() { uint64_t v = 0; raw(&v, sizeof v); return v; }
  std::string str(size_t max) {
    const uint32_t n = u32();
    if (!ok_ || n > max || size_ - pos_ < n) { ok_ = false; return {}; }
    pos_ += n;
    return std::string(reinterpret_cast<const char*>(p_) + pos_ - n, n);
  }
  size_t left() const { return ok_ ? size_ - pos_ : 0; }
  bool ok() const { return ok_; }
  bool done() const { return ok_ && pos_ == size_; }

 private:
  const uint8_t* p_;
  size_t size_, pos_;
  bool ok_ = true;
};

// Header (40 bytes) and table, in the writer's byte order (docs/FILES.md).
std::string encode(const Meta& m, uint64_t table_bytes) {
  Out o;
  o.raw(kMagic, kMagicBytes);
  o.u32(kEndianMarker);
  o.u32(static_cast<uint32_t>(m.sets.size()));
  o.u32(static_cast<uint32_t>(m.attrs.size()));
  o.u32(0);
  o.u64(table_bytes);
  o.u64(m.file_bytes);
  for (const Entry& e : m.sets) {
    o.str(e.info.name);
    o.u32(static_cast<uint32_t>(e.info.type));
    o.u32(static_cast<uint32_t>(e.info.ndims));
    for (uint64_t g : e.info.global) o.u64(g);
    o.u64(e.offset);
    o.u64(e.bytes);
  }
  for (const auto& kv : m.attrs) {
    o.str(kv.first);
    o.u32(static_cast<uint32_t>(kv.second.kind));
    if (kv.second.kind == TSR_ATTR_INT64) {
      o.u32(8);
      o.raw(&kv.second.i, 8);
    } else if (kv.second.kind == TSR_ATTR_DOUBLE) {
      o.u32(8);
      o.raw(&kv.second.d, 8);
    } else {
      o.str(kv.second.text);
    }
  }
  return std::move(o.bytes());
}

}  // namespace

std::string describe(Meta* m) {
  for (Entry& e : m->sets) product(e.info.ndims, e.info.global, tsr_dtype_size(e.info.type), &e.bytes);
  const uint64_t table = encode(*m, 0).size() - kHeaderBytes;  // offsets have fixed width
  uint64_t at = kHeaderBytes + table;
  for (Entry& e : m->sets) {
    e.offset = at;
    at += e.bytes;
  }
  m->file_bytes = at;
  return encode(*m, table);
}

namespace {

constexpr uint64_t kMinDatasetEntry = 52, kMinAttrEntry = 8;  // bytes, empty names (docs/FILES.md)

tsr_status corrupt(const std::string& path, const char* what) {
  return fail(TSR_ERR_IO, "file '%s' is not a valid tessera file: %s", cstr(path), what);
}

tsr_status decode_entry(In& in, const std::string& path, uint64_t data_start, uint64_t file_bytes, Entry* e) {
  e->info.name = in.str(kMaxName);
  const uint32_t type = in.u32(), nd = in.u32();
  for (uint64_t& g : e->info.global) g = in.u64();
  e->offset = in.u64();
  e->bytes = in.u64();
  if (!in.ok()) return corrupt(path, "the dataset table ends early");
  // The type checked as the integer it is in the file: a tsr_dtype holding a
  // value outside the enumeration is undefined behaviour (found by
  // tests/fuzz/fuzz_tsrbin, UBSan: "load of value 66 ... for type 'tsr_dtype'").
  if (type > static_cast<uint32_t>(TSR_BFLOAT16)) return corrupt(path, "a dataset entry has a bad name, type or shape");
  e->info.type = static_cast<tsr_dtype>(type);
  e->info.ndims = static_cast<int>(nd);
  uint64_t bytes = 0;
  if (!name_valid(e->info.name) || nd < 1 || nd > 3 ||
      !product(3, e->info.global, tsr_dtype_size(e->info.type), &bytes) || bytes != e->bytes)
    return corrupt(path, "a dataset entry has a bad name, type or shape");
  for (uint32_t d = nd; d < 3; ++d)
    if (e->info.global[d] != 1) return corrupt(path, "a dataset entry has a bad shape");
  if (e->offset < data_start || e->offset > file_bytes || e->bytes > file_bytes - e->offset)
    return corrupt(path, "a dataset lies outside the data section");
  return TSR_SUCCESS;
}

}  // namespace

tsr_status decode(const std::string& head, const std::string& path, Meta* m) {
  In in(reinterpret_cast<const uint8_t*>(head.data()), head.size(), kMagicBytes + 4);
  const uint32_t nsets = in.u32(), nattrs = in.u32();
  in.u32();
  const uint64_t table = in.u64();
  m->file_bytes = in.u64();
  if (!in.ok() || table != head.size() - kHeaderBytes) return corrupt(path, "the header is inconsistent");
  // Counts against the table's size before anything is allocated for them: a
  // dataset entry takes at least 52 bytes, an attribute at least 8 (found by
  // tests/fuzz/fuzz_tsrbin: a count of 2^26 made it allocate 6.7 GB).
  if (nsets > table / kMinDatasetEntry || nattrs > table / kMinAttrEntry)
    return corrupt(path, "the header counts more datasets or attributes than its table can hold");
  m->sets.resize(nsets);
  for (Entry& e : m->sets) TSR_TRY(decode_entry(in, path, kHeaderBytes + table, m->file_bytes, &e));
  const bool typed = head.compare(0, kMagicBytes, kMagic, kMagicBytes) == 0;  // version 02
  for (uint32_t i = 0; i < nattrs; ++i) {
    std::string key = in.str(kMaxName);
    Value v;
    const uint32_t kind = typed ? in.u32() : uint32_t{TSR_ATTR_STRING};
    const std::string raw = in.str(kMaxValue);
    if (kind == TSR_ATTR_INT64 || kind == TSR_ATTR_DOUBLE) {
      if (raw.size() != 8) return corrupt(path, "a numeric attribute does not have 8 bytes");
      v.kind = static_cast<tsr_attr_kind>(kind);
      std::memcpy(kind == TSR_ATTR_INT64 ? static_cast<void*>(&v.i) : static_cast<void*>(&v.d), raw.data(), 8);
    } else if (kind == TSR_ATTR_STRING) {
      v.text = raw;
    } else {
      return corrupt(path, "an attribute has an unknown kind");
    }
    if (!in.ok() || !name_valid(key) || !m->attrs.emplace(std::move(key), std::move(v)).second)
      return corrupt(path, "the attribute table is malformed");
  }
  if (!in.done()) return corrupt(path, "the attribute table is malformed");
  return TSR_SUCCESS;
}

namespace {

// The 40-byte header: byte order, and its sizes against the file's size.
tsr_status check_header(const std::string& head, const std::string& path, uint64_t size, uint64_t* table) {
  In in(reinterpret_cast<const uint8_t*>(head.data()), head.size(), kMagicBytes);
  const uint32_t marker = in.u32();
  in.u32();
  in.u32();
  in.u32();
  *table = in.u64();
  const uint64_t file_bytes = in.u64();
  const char* f = cstr(path);
  if (marker != kEndianMarker)
    return fail(TSR_ERR_UNSUPPORTED, "file '%s' was written with the other byte order, which this build does not read", f);
  if (file_bytes > size)
    return fail(TSR_ERR_IO, "file '%s' is truncated: its header says %" PRIu64 " bytes, the file has %" PRIu64, f, file_bytes, size);
  if (file_bytes < size)
    return fail(TSR_ERR_IO, "file '%s' has %" PRIu64 " bytes, more than the %" PRIu64 " its header describes", f, size, file_bytes);
  if (*table > file_bytes - kHeaderBytes || *table > kMaxTableBytes)
    return corrupt(path, "the table size in the header is out of range");
  return TSR_SUCCESS;
}

}  // namespace

tsr_status sniff_with(const std::string& path, uint64_t n, const ReadAt& read, Format* fmt, std::string* head) {
  TSR_TRY(read(0, n < kMagicBytes ? n : kMagicBytes, head));
  if (*head == std::string(kHdf5Signature, kMagicBytes)) {
    *fmt = Format::hdf5;
    head->clear();
    return TSR_SUCCESS;
  }
  *fmt = Format::binary;
  if (head->compare(0, 6, kMagic, 6) != 0 || head->size() < kMagicBytes)
    return fail(TSR_ERR_IO, "file '%s' is not a tessera file: it starts with neither the HDF5 signature nor \"TSRBIN\"",
                cstr(path));
  if (*head != kMagic && *head != kMagicV1)
    return fail(TSR_ERR_IO, "file '%s' has binary format version '%s', this build reads '%s' and '%s'", cstr(path),
                head->substr(6).c_str(), kMagicV1 + 6, kMagic + 6);
  if (n < kHeaderBytes)
    return fail(TSR_ERR_IO, "file '%s' is truncated: %" PRIu64 " bytes, less than the %" PRIu64 "-byte header",
                cstr(path), n, kHeaderBytes);
  std::string rest;
  uint64_t table = 0;
  TSR_TRY(read(kMagicBytes, kHeaderBytes - kMagicBytes, &rest));
  *head += rest;
  TSR_TRY(check_header(*head, path, n, &table));
  TSR_TRY(read(kHeaderBytes, table, &rest));
  *head += rest;
  return TSR_SUCCESS;
}

bool name_valid(const std::string& s) {
  if (s.empty() || s.size() > kMaxName || s == "." || s == "..") return false;
  for (char ch : s) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '_' || ch == '.' || ch == '-';
    if (!ok) return false;
  }
  return true;
}

// p = elem * d[0] * ... * d[nd-1]; false on overflow.
bool product(int nd, const uint64_t* d, uint64_t elem, uint64_t* p) {
  *p = elem;
  for (int i = 0; i < nd; ++i)
    if (__builtin_mul_overflow(*p, d[i], p)) return false;
  return true;
}

tsr_status parse_file(const uint8_t* data, size_t size, const std::string& path, Format* fmt, Meta* m) {
  if (data == nullptr && size > 0) return fail(TSR_ERR_INVALID_ARG, "argument 'data' is NULL");
  auto read = [&](uint64_t off, uint64_t len, std::string* out) {
    const uint64_t at = off < size ? off : size, take = len < size - at ? len : size - at;
    out->assign(reinterpret_cast<const char*>(data) + at, static_cast<size_t>(take));
    return TSR_SUCCESS;
  };
  std::string head;
  TSR_TRY(sniff_with(path, size, read, fmt, &head));
  if (*fmt == Format::hdf5) return TSR_SUCCESS;  // HDF5's own library decodes these
  TSR_TRY(decode(head, path, m));
  m->fmt = *fmt;
  return TSR_SUCCESS;
}

}  // namespace io
}  // namespace tsr
