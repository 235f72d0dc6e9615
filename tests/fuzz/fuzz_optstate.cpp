// Fuzz harness, end to end through the public API: a file's bytes handed to
// tsr_optimizer_load (three optimizers: LAMB and LARS float32, LAMB bfloat16
// with two groups) and to tsr_checkpoint_open and every reading call of the
// checkpoint (arrays, attributes, tsr_checkpoint_get_optimizer under the
// prefixes "" and "opt"). One rank (MPI_COMM_SELF; MPI_Init in
// LLVMFuzzerInitialize), the input written to a file (in /dev/shm when
// there is one) as rank 0 reads it through MPI-IO. Covers what fuzz_tsrbin
// does not: the optimizer state's attributes and datasets checked against
// the optimizer (optimizers/state_io.cpp), the checkpoint layer and the
// data reads. Slower (files, MPI-IO); built with the whole library
// (target fuzzers_mpi with -DTSR_FUZZ=ON, not in CI's time-boxed run).
// Contract checked: a documented status and a message, never a crash.
//
// TSR_FUZZ_MAKE_SEEDS=DIR: write the seed files (binary format) with the
// library itself into DIR and exit:
//   TSR_FUZZ_MAKE_SEEDS=$PWD/tests/fuzz/corpus/optstate mpiexec -n 1 build/tests/fuzz/fuzz_optstate x
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "tessera/io.h"
#include "tessera/optimizer.h"
#include "tessera/tessera.h"

namespace {

tsr_context g_ctx = nullptr;
tsr_optimizer g_opts[3] = {nullptr, nullptr, nullptr};
std::string g_path;

void finish() {
  for (tsr_optimizer& o : g_opts) tsr_optimizer_destroy(&o);
  tsr_context_destroy(&g_ctx);
  if (!g_path.empty()) std::remove(g_path.c_str());
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

void ok(tsr_status st, const char* what) {
  FUZZ_CHECK(st == TSR_SUCCESS, "%s: %s", what, tsr_last_error(g_ctx));
}

// A state file in the binary format (tsr_optimizer_save picks HDF5 where the
// build has it): a checkpoint holding the optimizer under the prefix "" has
// the same datasets and attributes.
void save_binary(tsr_optimizer o, const std::string& path) {
  tsr_checkpoint c = nullptr;
  ok(tsr_checkpoint_create(g_ctx, path.c_str(), TSR_CKPT_BINARY, TSR_CKPT_NO_SYNC, &c), "create");
  ok(tsr_checkpoint_put_optimizer(c, "", o), "put optimizer");
  ok(tsr_checkpoint_commit(c), "commit");
  ok(tsr_checkpoint_close(&c), "close");
}

void make_seeds(const std::string& dir) {
  std::vector<float> p(5, 0.5f), g(5, 0.25f);
  ok(tsr_optimizer_step(g_opts[0], p.data(), g.data(), 3), "step");
  save_binary(g_opts[0], dir + "/seed-lamb-state.bin");
  save_binary(g_opts[1], dir + "/seed-lars-state.bin");
  std::vector<uint16_t> pb(5, 0x3f00), gb(5, 0x3e80);
  ok(tsr_optimizer_step(g_opts[2], pb.data(), gb.data(), 5), "step bf16");
  save_binary(g_opts[2], dir + "/seed-lamb-bf16-master.bin");
  tsr_checkpoint c = nullptr;
  ok(tsr_checkpoint_create(g_ctx, (dir + "/seed-checkpoint.bin").c_str(), TSR_CKPT_BINARY, TSR_CKPT_NO_SYNC, &c),
     "create");
  ok(tsr_checkpoint_put_optimizer(c, "opt", g_opts[0]), "put optimizer");
  const double w[6] = {1, 2, 3, 4, 5, 6};
  const uint64_t shape[2] = {2, 3};
  ok(tsr_checkpoint_put_replicated(c, "w", TSR_FLOAT64, 2, shape, w), "put replicated");
  const int32_t s[4] = {1, -2, 3, -4};
  ok(tsr_checkpoint_put_shard(c, "s", TSR_INT32, 4, 0, 4, s), "put shard");
  ok(tsr_checkpoint_set_int(c, "epoch", 3), "set int");
  ok(tsr_checkpoint_set_double(c, "loss", 0.5), "set double");
  ok(tsr_checkpoint_set_string(c, "note", "fuzz"), "set string");
  ok(tsr_checkpoint_commit(c), "commit");
  ok(tsr_checkpoint_close(&c), "close");
}

// Statuses a reader of a damaged file may return (docs/API.md); never
// TSR_ERR_INTERNAL, and always with a message.
void check(tsr_status st, const char* call) {
  if (st == TSR_SUCCESS) return;
  FUZZ_CHECK(st == TSR_ERR_IO || st == TSR_ERR_INVALID_ARG || st == TSR_ERR_SHAPE || st == TSR_ERR_UNSUPPORTED ||
                 st == TSR_ERR_NO_MEMORY,
             "%s: status %s: %s", call, tsr_status_name(st), tsr_last_error(g_ctx));
  const std::string msg = tsr_last_error(g_ctx);
  FUZZ_CHECK(msg.find(call) != std::string::npos && msg.size() > std::string(call).size() + 2,
             "%s: message '%s'", call, msg.c_str());
}

void read_checkpoint() {
  tsr_checkpoint c = nullptr;
  const tsr_status st = tsr_checkpoint_open(g_ctx, g_path.c_str(), &c);
  check(st, "tsr_checkpoint_open");
  if (st != TSR_SUCCESS) return;
  int n = 0;
  ok(tsr_checkpoint_array_count(c, &n), "array_count");
  for (int i = 0; i < n; ++i) {
    const char* name = nullptr;
    tsr_dtype type = TSR_BYTE;
    int nd = 0;
    uint64_t shape[3] = {0, 0, 0};
    ok(tsr_checkpoint_array_info(c, i, &name, &type, &nd, shape), "array_info");
    uint64_t elems = 1;
    for (int d = 0; d < nd; ++d) elems = shape[d] > (uint64_t{1} << 16) ? (uint64_t{1} << 17) : elems * shape[d];
    if (elems > (uint64_t{1} << 16)) continue;  // large arrays: the shape is what matters here
    std::vector<uint8_t> buf(static_cast<size_t>(elems) * tsr_dtype_size(type) + 1);
    check(tsr_checkpoint_get_replicated(c, name, type, nd, shape, buf.data()), "tsr_checkpoint_get_replicated");
    check(tsr_checkpoint_get_shard(c, name, type, elems, 0, elems, buf.data()), "tsr_checkpoint_get_shard");
  }
  ok(tsr_checkpoint_attr_count(c, &n), "attr_count");
  for (int i = 0; i < n; ++i) {
    const char* key = nullptr;
    tsr_attr_kind kind = TSR_ATTR_STRING;
    ok(tsr_checkpoint_attr_info(c, i, &key, &kind), "attr_info");
    int64_t iv = 0;
    double dv = 0;
    char text[64];
    size_t need = 0;
    if (kind == TSR_ATTR_INT64) ok(tsr_checkpoint_get_int(c, key, &iv), "get_int");
    if (kind == TSR_ATTR_DOUBLE) ok(tsr_checkpoint_get_double(c, key, &dv), "get_double");
    if (kind == TSR_ATTR_STRING) ok(tsr_checkpoint_get_string(c, key, text, sizeof text, &need), "get_string");
  }
  for (const char* prefix : {"", "opt"})
    for (tsr_optimizer o : g_opts) check(tsr_checkpoint_get_optimizer(c, prefix, o), "tsr_checkpoint_get_optimizer");
  ok(tsr_checkpoint_close(&c), "close");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) MPI_Init(nullptr, nullptr);
  std::atexit(finish);
  ok(tsr_context_create(MPI_COMM_SELF, &g_ctx), "context");
  const size_t one[1] = {3}, two[2] = {2, 3};
  ok(tsr_optimizer_create(g_ctx, TSR_PRESET_LAMB_PAPER, TSR_OPT_REPLICATED, TSR_FLOAT32, 1, one, &g_opts[0]), "lamb");
  ok(tsr_optimizer_create(g_ctx, TSR_PRESET_LARS_PAPER, TSR_OPT_REPLICATED, TSR_FLOAT32, 1, one, &g_opts[1]), "lars");
  ok(tsr_optimizer_create(g_ctx, TSR_PRESET_LAMB_APEX, TSR_OPT_SHARDED, TSR_BFLOAT16, 2, two, &g_opts[2]), "bf16");
  if (const char* dir = std::getenv("TSR_FUZZ_MAKE_SEEDS")) {
    make_seeds(dir);
    std::printf("seeds written to %s\n", dir);
    std::exit(0);
  }
  const char* tmp = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  g_path = std::string(tmp) + "/tsr_fuzz_optstate_" + std::to_string(::getpid()) + ".bin";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(g_path.c_str(), "wb");
  FUZZ_CHECK(f != nullptr, "cannot write %s", g_path.c_str());
  FUZZ_CHECK(size == 0 || std::fwrite(data, 1, size, f) == size, "short write");
  std::fclose(f);
  for (tsr_optimizer o : g_opts) check(tsr_optimizer_load(o, g_path.c_str()), "tsr_optimizer_load");
  read_checkpoint();
  return 0;
}
