// Checkpoint write and read bandwidth against a plain MPI-IO collective write
// and read of the same bytes, in the same run (public API only).
//
//   mpiexec -n P bench_checkpoint [--sizes 64,256,1024] [--reps 5] [--dir DIR]
//                                 [--format hdf5|binary] [--drop-caches]
//
// Sizes are MiB in total over all ranks: one float32 array cut into balanced
// shards, one per rank. Each repetition runs the variants back to back in a
// rotated order (so that none always follows another), each on its own file:
//   mpiio        MPI_File_open of a new file, MPI_File_write_at_all of the
//                rank's contiguous part, MPI_File_sync, close (what any MPI
//                code would do)
//   mpiio-nosync the same without MPI_File_sync
//   ckpt         tsr_checkpoint_create / put_shard / commit (flush, rename,
//                directory flush)
//   ckpt-nosync  the same with TSR_CKPT_NO_SYNC
//   ckpt-fresh   ckpt to a path that does not exist yet (the previous file is
//                removed first, untimed): no rename over an existing file.
//                On ext4 (auto_da_alloc, the default) a rename that replaces
//                a file forces the writeback of the new one, which is what
//                makes replace-by-rename safe there, and costs time.
// then reads each file back (MPI_File_read_at_all; tsr_checkpoint_open +
// get_shard). --drop-caches (root only) empties the page cache before every
// read, so that reads come from the disk, not from memory.
//
// Prints, per size, the median time and bandwidth of every variant with the
// spread (min..max) over repetitions, checkpoint / mpiio as a ratio of
// bandwidths (target: at least 0.8), and what the flushes add (ckpt minus
// ckpt-nosync, median).
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace {

int g_rank = 0, g_size = 1;

[[noreturn]] void usage(const char* why) {
  if (g_rank == 0)
    std::fprintf(stderr, "bench_checkpoint: %s\nusage: bench_checkpoint [--sizes MiB,...] [--reps N] [--dir DIR] "
                 "[--format hdf5|binary] [--drop-caches]\n", why);
  MPI_Finalize();
  std::exit(2);
}

void die(const char* what, const char* msg) {
  std::fprintf(stderr, "rank %d: %s: %s\n", g_rank, what, msg);
  MPI_Abort(MPI_COMM_WORLD, 3);
}

void check(tsr_status st, tsr_context ctx, const char* what) {
  if (st != TSR_SUCCESS) die(what, tsr_last_error(ctx));
}

void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char s[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, s, &n);
  die(what, s);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void drop_caches(bool on) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (on && g_rank == 0) {
    sync();
    FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w");
    if (f) {
      std::fputs("3\n", f);
      std::fclose(f);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Time of f() on the slowest rank.
double timed(const std::function<void()>& f) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  f();
  double t = MPI_Wtime() - t0, slowest = 0;
  MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  std::vector<double> sizes = {64, 256, 1024};
  int reps = 5;
  std::string dir = ".";
  tsr_ckpt_format fmt = TSR_CKPT_AUTO;
  bool drop = false;
  for (int a = 1; a < argc; ++a) {
    const std::string k = argv[a];
    auto val = [&]() -> std::string {
      if (a + 1 >= argc) usage(("missing value after " + k).c_str());
      return argv[++a];
    };
    if (k == "--sizes") {
      sizes.clear();
      std::string v = val();
      for (size_t at = 0; at <= v.size();) {
        const size_t c = std::min(v.find(',', at), v.size());
        char* end = nullptr;
        const double x = std::strtod(v.substr(at, c - at).c_str(), &end);
        if (!(x > 0) || *end != '\0') usage("--sizes takes positive MiB values separated by commas");
        sizes.push_back(x);
        at = c + 1;
      }
    } else if (k == "--reps") {
      reps = std::atoi(val().c_str());
      if (reps < 1) usage("--reps must be >= 1");
    } else if (k == "--dir") {
      dir = val();
    } else if (k == "--format") {
      const std::string f = val();
      if (f == "hdf5") fmt = TSR_CKPT_HDF5;
      else if (f == "binary") fmt = TSR_CKPT_BINARY;
      else usage("--format is hdf5 or binary");
    } else if (k == "--drop-caches") {
      drop = true;
    } else {
      usage(("unknown argument " + k).c_str());
    }
  }
  if (drop && geteuid() != 0) usage("--drop-caches needs root");
  tsr_context ctx = nullptr;
  check(tsr_context_create(MPI_COMM_WORLD, &ctx), nullptr, "tsr_context_create");
  {
    tsr_checkpoint probe = nullptr;
    check(tsr_checkpoint_create(ctx, (dir + "/.probe").c_str(), fmt, 0, &probe), ctx, "tsr_checkpoint_create");
    check(tsr_checkpoint_format(probe, &fmt), ctx, "tsr_checkpoint_format");
    tsr_checkpoint_close(&probe);
  }
  if (g_rank == 0) {
    std::printf("# bench_checkpoint: %d ranks, format %s, %d repetitions, dir %s, page cache %s before reads\n", g_size,
                fmt == TSR_CKPT_HDF5 ? "hdf5" : "binary", reps, dir.c_str(), drop ? "dropped" : "kept");
    std::printf("# %10s %-13s %10s %10s %21s %8s\n", "MiB", "variant", "median_s", "GB/s", "spread_s (min..max)",
                "vs_mpiio");
  }
  const int kVariants = 5;
  const char* names[kVariants] = {"mpiio", "mpiio-nosync", "ckpt", "ckpt-nosync", "ckpt-fresh"};
  for (double mib : sizes) {
    const uint64_t n = static_cast<uint64_t>(mib * 1048576.0 / 4.0);
    const uint64_t P = static_cast<uint64_t>(g_size), R = static_cast<uint64_t>(g_rank);
    const uint64_t cnt = n / P + (R < n % P), off = R * (n / P) + std::min<uint64_t>(R, n % P);
    std::vector<float> data(cnt), back(cnt);
    for (uint64_t k = 0; k < cnt; ++k) data[k] = static_cast<float>((off + k) % 4099) * 0.25f;
    std::vector<std::vector<double>> tw(kVariants), tr(kVariants);
    for (int rep = 0; rep < reps; ++rep) {
      for (int i = 0; i < kVariants; ++i) {
        const int v = (i + rep) % kVariants;
        const std::string path = dir + "/bench_ckpt_" + names[v];
        const bool sync = v == 0 || v == 2 || v == 4;
        if (v == 4) {  // a new path: the previous checkpoint removed, untimed
          MPI_Barrier(MPI_COMM_WORLD);
          if (g_rank == 0) std::remove(path.c_str());
        }
        if (v < 2) {
          // A new file, as a checkpoint writes (not blocks already allocated).
          MPI_Barrier(MPI_COMM_WORLD);
          if (g_rank == 0) std::remove(path.c_str());
          tw[v].push_back(timed([&] {
            MPI_File fh;
            MPI_Status st;
            mpi_check(MPI_File_open(MPI_COMM_WORLD, path.c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh),
                      "MPI_File_open");
            mpi_check(MPI_File_set_size(fh, static_cast<MPI_Offset>(n * 4)), "MPI_File_set_size");
            mpi_check(MPI_File_write_at_all(fh, static_cast<MPI_Offset>(off * 4), data.data(), static_cast<int>(cnt),
                                            MPI_FLOAT, &st), "MPI_File_write_at_all");
            if (sync) mpi_check(MPI_File_sync(fh), "MPI_File_sync");
            mpi_check(MPI_File_close(&fh), "MPI_File_close");
          }));
        } else {
          tw[v].push_back(timed([&] {
            tsr_checkpoint ck = nullptr;
            check(tsr_checkpoint_create(ctx, path.c_str(), fmt, sync ? 0 : TSR_CKPT_NO_SYNC, &ck), ctx, "create");
            check(tsr_checkpoint_put_shard(ck, "x", TSR_FLOAT32, n, off, cnt, data.data()), ctx, "put_shard");
            check(tsr_checkpoint_commit(ck), ctx, "commit");
            tsr_checkpoint_close(&ck);
          }));
        }
      }
      for (int i = 0; i < kVariants; ++i) {
        const int v = (i + rep) % kVariants;
        const std::string path = dir + "/bench_ckpt_" + names[v];
        drop_caches(drop);
        std::fill(back.begin(), back.end(), -1.0f);
        if (v < 2) {
          tr[v].push_back(timed([&] {
            MPI_File fh;
            MPI_Status st;
            mpi_check(MPI_File_open(MPI_COMM_WORLD, path.c_str(), MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), "MPI_File_open");
            mpi_check(MPI_File_read_at_all(fh, static_cast<MPI_Offset>(off * 4), back.data(), static_cast<int>(cnt),
                                           MPI_FLOAT, &st), "MPI_File_read_at_all");
            mpi_check(MPI_File_close(&fh), "MPI_File_close");
          }));
        } else {
          tr[v].push_back(timed([&] {
            tsr_checkpoint ck = nullptr;
            check(tsr_checkpoint_open(ctx, path.c_str(), &ck), ctx, "open");
            check(tsr_checkpoint_get_shard(ck, "x", TSR_FLOAT32, n, off, cnt, back.data()), ctx, "get_shard");
            tsr_checkpoint_close(&ck);
          }));
        }
        if (std::memcmp(back.data(), data.data(), cnt * 4) != 0) die(names[v], "read back different data");
      }
    }
    const double bytes = static_cast<double>(n) * 4;
    if (g_rank == 0) {
      for (int pass = 0; pass < 2; ++pass) {
        const auto& t = pass == 0 ? tw : tr;
        std::printf("%s\n", pass == 0 ? "# write" : "# read");
        for (int v = 0; v < kVariants; ++v) {
          const double med = median(t[v]);
          const double ref = median(t[v == 4 ? 0 : v < 2 ? 0 : v - 2]);
          std::printf("  %10.0f %-13s %10.4f %10.3f %10.4f..%-10.4f %8.3f\n", mib, names[v], med, bytes / med / 1e9,
                      *std::min_element(t[v].begin(), t[v].end()), *std::max_element(t[v].begin(), t[v].end()),
                      ref / med);
        }
      }
      std::printf("# %.0f MiB: checkpoint/mpiio bandwidth: write %.3f (synced), %.3f (no sync), %.3f (synced, new "
                  "path); read %.3f; the flushes add %.4f s to a checkpoint, %.4f s to mpiio\n",
                  mib, median(tw[0]) / median(tw[2]), median(tw[1]) / median(tw[3]), median(tw[0]) / median(tw[4]),
                  median(tr[0]) / median(tr[2]), median(tw[2]) - median(tw[3]), median(tw[0]) - median(tw[1]));
      std::fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0)
      for (const char* v : names) std::remove((dir + "/bench_ckpt_" + v).c_str());
  }
  tsr_context_destroy(&ctx);
  MPI_Finalize();
  return 0;
}
