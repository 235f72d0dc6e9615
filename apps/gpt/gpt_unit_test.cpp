// Unit tests of the sample GPT (one rank): the Austen loader and its format
// checks, layout-independent batches, and a finite-difference gradient test
// in double for every layer of the kit and for the whole model.
//
// Gradient tolerance: central differences with step h = 1e-5 in double have
// a truncation error of O(h^2 f''') ~ 1e-10 and a rounding error of
// O(eps_mach |L| / h) ~ 1e-11 relative to the loss; we require
// max |analytic - numeric| <= 1e-7 * max |numeric| over the checked
// elements, which a wrong factor, a missing term or a transposed index
// exceeds by orders of magnitude (measured errors are printed).
#include <mpi.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "data.hpp"
#include "layers.hpp"
#include "model.hpp"
#include "rng.hpp"
#include "tessera/tessera.h"

using namespace gpt;

static int failures = 0;
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                            \
      std::printf("\n");                                   \
      ++failures;                                          \
    }                                                      \
  } while (0)

static std::vector<double> randv(size_t n, uint64_t stream, double sd = 1.0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = sd * normal(42, stream, i);
  return v;
}

constexpr double kH = 1e-5, kTol = 1e-7;

// Compares analytic gradient g of loss() with respect to x, on up to 40
// elements spread over x; returns the relative error.
static double fd_check(const char* what, std::vector<double>& x, const std::vector<double>& g,
                       const std::function<double()>& loss) {
  size_t n = x.size(), stride = n > 40 ? n / 40 : 1;
  double maxerr = 0, maxg = 0;
  for (size_t i = 0; i < n; i += stride) {
    double keep = x[i];
    x[i] = keep + kH;
    double lp = loss();
    x[i] = keep - kH;
    double lm = loss();
    x[i] = keep;
    double num = (lp - lm) / (2 * kH);
    maxerr = std::max(maxerr, std::fabs(num - g[i]));
    maxg = std::max(maxg, std::fabs(num));
  }
  double rel = maxerr / (maxg > 0 ? maxg : 1.0);
  std::printf("  grad %-24s rel err %.2e (max |g| %.3g)\n", what, rel, maxg);
  CHECK(rel <= kTol && maxg > 0, "%s: relative error %.3e > %.1e", what, rel, kTol);
  return rel;
}

static double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

static void test_fast_math() {
  double eerr = 0, terr = 0;
  for (int i = -800000; i <= 800000; ++i) {
    float x = static_cast<float>(i) * 1e-4f;
    eerr = std::max(eerr, std::fabs(exp_fast(x) - std::exp(static_cast<double>(x))) / std::exp(static_cast<double>(x)));
    terr = std::max(terr, std::fabs(vtanh(x) - std::tanh(static_cast<double>(x))));
  }
  std::printf("fast float exp: max relative error %.2e on [-80, 80]; tanh: max absolute error %.2e\n", eerr, terr);
  CHECK(eerr < 1e-6, "exp_fast relative error %g", eerr);
  CHECK(terr < 3e-7, "vtanh absolute error %g", terr);
  CHECK(exp_fast(-1000.0f) >= 0 && exp_fast(-1000.0f) < 1e-37f && std::isfinite(exp_fast(1000.0f)), "exp_fast clamping");
}

static void test_layers(tsr_ring ring) {
  std::printf("layer gradients (double, h = %.0e, tolerance %.0e):\n", kH, kTol);
  const size_t B = 2, Tl = 6, C = 8, V = 11, H = 2, N = B * Tl;
  // embedding
  {
    std::vector<int32_t> tok(N);
    for (size_t i = 0; i < N; ++i) tok[i] = static_cast<int32_t>(hash3(1, 2, i) % V);
    std::vector<int64_t> pos{3, 0, 5, 1, 2, 4};
    auto wte = randv(V * C, 1), wpe = randv(6 * C, 2), R = randv(N * C, 3);
    std::vector<double> out(N * C, 0.0);
    auto loss = [&] { embedding_forward(out.data(), tok.data(), pos.data(), B, Tl, wte.data(), wpe.data(), C); return dot(out, R); };
    std::vector<double> gte(V * C, 0), gpe(6 * C, 0);
    embedding_backward(gte.data(), gpe.data(), R.data(), tok.data(), pos.data(), B, Tl, C);
    fd_check("embedding wte", wte, gte, loss);
    fd_check("embedding wpe", wpe, gpe, loss);
  }
  // LayerNorm
  {
    auto x = randv(N * C, 4), g = randv(C, 5), b = randv(C, 6), R = randv(N * C, 7);
    std::vector<double> out(N * C), m(N), r(N);
    auto loss = [&] { layernorm_forward(out.data(), m.data(), r.data(), x.data(), g.data(), b.data(), N, C); return dot(out, R); };
    loss();
    std::vector<double> dx(N * C, 0), dg(C, 0), db(C, 0);
    layernorm_backward(dx.data(), dg.data(), db.data(), R.data(), x.data(), m.data(), r.data(), g.data(), N, C);
    fd_check("layernorm x", x, dx, loss);
    fd_check("layernorm gain", g, dg, loss);
    fd_check("layernorm bias", b, db, loss);
  }
  // linear
  {
    const size_t I = 8, O = 5;
    auto x = randv(N * I, 8), W = randv(I * O, 9), b = randv(O, 10), R = randv(N * O, 11);
    std::vector<double> out(N * O);
    auto loss = [&] { linear_forward(out.data(), x.data(), W.data(), b.data(), N, I, O); return dot(out, R); };
    std::vector<double> dx(N * I, 0), dW(I * O, 0), db(O, 0);
    linear_backward(dx.data(), dW.data(), db.data(), R.data(), x.data(), W.data(), N, I, O);
    fd_check("linear x", x, dx, loss);
    fd_check("linear W", W, dW, loss);
    fd_check("linear b", b, db, loss);
  }
  // GELU and residual
  {
    auto x = randv(N * C, 12, 2.0), y = randv(N * C, 13), R = randv(N * C, 14);
    std::vector<double> out(N * C);
    auto loss = [&] { gelu_forward(out.data(), x.data(), N * C); return dot(out, R); };
    std::vector<double> dx(N * C, 0);
    gelu_backward(dx.data(), R.data(), x.data(), N * C);
    fd_check("gelu x", x, dx, loss);
    auto lossr = [&] { residual_forward(out.data(), x.data(), y.data(), N * C); return dot(out, R); };
    std::vector<double> da(N * C, 0), dbb(N * C, 0);
    residual_backward(da.data(), dbb.data(), R.data(), N * C);
    fd_check("residual a", x, da, lossr);
    fd_check("residual b", y, dbb, lossr);
  }
  // causal attention through tessera's ring attention (one rank)
  {
    auto qkv = randv(N * 3 * C, 15), R = randv(N * C, 16);
    std::vector<double> y(N * C), q(N * C), k(N * C), v(N * C), o(N * C), lse(N * H);
    tsr_attn_config cfg = TSR_ATTN_CONFIG_INIT;
    cfg.causal = 1;
    cfg.seq_len = Tl;
    cfg.type = TSR_FLOAT64;
    auto loss = [&] {
      attention_forward(ring, cfg, y.data(), q.data(), k.data(), v.data(), o.data(), lse.data(), qkv.data(), B, Tl, C, H);
      return dot(y, R);
    };
    loss();
    std::vector<double> dqkv(N * 3 * C, 0), dq(N * C), dk(N * C), dv(N * C), dO(N * C);
    attention_backward(ring, cfg, dqkv.data(), R.data(), q.data(), k.data(), v.data(), o.data(), lse.data(),
                       dq.data(), dk.data(), dv.data(), dO.data(), B, Tl, C, H);
    fd_check("attention qkv", qkv, dqkv, loss);
    // causality: the output of token 0 of sequence 0 does not depend on token 1's key
    std::vector<double> y0(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(C));
    qkv[1 * 3 * C + C] += 1.0;
    loss();
    double d = 0;
    for (size_t c = 0; c < C; ++c) d = std::max(d, std::fabs(y[c] - y0[c]));
    CHECK(d == 0.0, "causal mask: token 0 changed by %g when token 1's key changed", d);
  }
  // softmax cross-entropy
  {
    auto logits = randv(N * V, 17, 3.0);
    std::vector<int32_t> tgt(N);
    for (size_t i = 0; i < N; ++i) tgt[i] = static_cast<int32_t>(hash3(3, 4, i) % V);
    std::vector<double> probs(N * V), dl(N * V);
    auto loss = [&] { return crossentropy_forward(probs.data(), logits.data(), tgt.data(), N, V) * 0.5; };
    loss();
    crossentropy_backward(dl.data(), probs.data(), tgt.data(), N, V, 0.5);
    fd_check("cross-entropy logits", logits, dl, loss);
  }
}

static void test_model(tsr_ring ring) {
  std::printf("whole-model gradient (double, 2 layers, width 8, 2 heads, seq 6):\n");
  Shape s;
  s.vocab = 13, s.layers = 2, s.width = 8, s.heads = 2, s.seq = 6;
  Model<double> m(s, ring, TSR_ATTN_LAYOUT_CONTIGUOUS);
  std::vector<int64_t> pos{0, 1, 2, 3, 4, 5};
  m.resize(2, pos, 6);
  std::vector<double> P(param_count(m.layout())), G(P.size());
  init_params(P.data(), m.layout(), s, 7);
  for (size_t i = 0; i < P.size(); ++i) P[i] += 0.1 * normal(9, 9, i);  // break symmetry of zeros/ones
  std::vector<int32_t> tok(12), tgt(12);
  for (size_t i = 0; i < 12; ++i) tok[i] = static_cast<int32_t>(hash3(5, 1, i) % 13), tgt[i] = static_cast<int32_t>(hash3(5, 2, i) % 13);
  auto loss = [&] { return m.forward(P.data(), tok.data(), tgt.data()) / 12.0; };
  loss();
  m.backward(P.data(), G.data(), tok.data(), tgt.data(), 1.0 / 12.0);
  for (const ParamTensor& t : m.layout()) {
    std::vector<double> x(P.begin() + static_cast<std::ptrdiff_t>(t.offset), P.begin() + static_cast<std::ptrdiff_t>(t.offset + t.size));
    std::vector<double> g(G.begin() + static_cast<std::ptrdiff_t>(t.offset), G.begin() + static_cast<std::ptrdiff_t>(t.offset + t.size));
    auto l2 = [&] {
      std::copy(x.begin(), x.end(), P.begin() + static_cast<std::ptrdiff_t>(t.offset));
      return loss();
    };
    fd_check(t.name.c_str(), x, g, l2);
    std::copy(x.begin(), x.end(), P.begin() + static_cast<std::ptrdiff_t>(t.offset));
  }
}

static void write_bytes(const std::string& path, const std::vector<unsigned char>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

static void expect_data_error(const std::string& path, const char* needle) {
  try {
    read_rdb_strings(path);
    CHECK(false, "no error for %s", path.c_str());
  } catch (const DataError& e) {
    CHECK(std::strstr(e.what(), needle) != nullptr, "message '%s' lacks '%s'", e.what(), needle);
  }
}

static void test_data(bool have_austen) {
  std::printf("data:\n");
  if (have_austen) {
    auto recs = read_rdb_strings(kAustenRdb);
    CHECK(recs.size() == 6, "%zu records", recs.size());
    std::multiset<size_t> lines, want{16235, 15349, 7856, 8328, 13030, 12624};
    size_t total = 0;
    for (auto& r : recs) {
      lines.insert(static_cast<size_t>(std::count(r.begin(), r.end(), '\n')));
      total += r.size();
    }
    CHECK(lines == want, "line counts of the six novels differ from the package's");
    std::string text = load_text(kAustenRdb);
    std::printf("  Austen: %zu records, %zu bytes of text\n", recs.size(), text.size());
    CHECK(text.size() > 4000000 && text.size() < 4100000, "%zu bytes", text.size());
    CHECK(text.find("Pride and Prejudice") != std::string::npos || text.find("PRIDE AND PREJUDICE") != std::string::npos,
          "no title found");
    Split sp = split_text(text, 0.1, 128);
    CHECK(sp.val.size() == text.size() / 10 && sp.train.size() + sp.val.size() == text.size(), "split sizes");
    double h = unigram_entropy(sp.val);
    std::printf("  unigram entropy of the validation text: %.4f nats\n", h);
    CHECK(h > 2.5 && h < 3.5, "unigram entropy %g", h);
  } else {
    std::printf("  SKIP Austen (r-cran-janeaustenr not installed)\n");
  }
  // Format checks on synthetic records.
  auto record = [](const std::vector<unsigned char>& raw) {
    std::vector<unsigned char> out(4), z(compressBound(raw.size()));
    uLongf zl = z.size();
    compress(z.data(), &zl, raw.data(), raw.size());
    uint32_t n = static_cast<uint32_t>(raw.size());
    out[0] = n >> 24, out[1] = (n >> 16) & 255, out[2] = (n >> 8) & 255, out[3] = n & 255;
    out.insert(out.end(), z.begin(), z.begin() + static_cast<std::ptrdiff_t>(zl));
    return out;
  };
  auto i32 = [](std::vector<unsigned char>& v, int32_t x) {
    uint32_t u = static_cast<uint32_t>(x);
    for (int s = 24; s >= 0; s -= 8) v.push_back((u >> s) & 255);
  };
  std::vector<unsigned char> good{'X', '\n'};
  i32(good, 3), i32(good, 0x40202), i32(good, 0x30500), i32(good, 5);
  for (char c : std::string("UTF-8")) good.push_back(static_cast<unsigned char>(c));
  i32(good, 16), i32(good, 2);
  i32(good, 0x40009), i32(good, 2), good.push_back('h'), good.push_back('i');
  i32(good, 9), i32(good, -1);
  write_bytes("gpt_ut_good.rdb", record(good));
  auto recs = read_rdb_strings("gpt_ut_good.rdb");
  CHECK(recs.size() == 1 && recs[0] == "hi\n\n", "synthetic record parsed as '%s'", recs.empty() ? "" : recs[0].c_str());
  std::vector<unsigned char> bad = record(good);
  bad[4] = 'Z';
  write_bytes("gpt_ut_type.rdb", bad);
  expect_data_error("gpt_ut_type.rdb", "expected a zlib stream");
  std::vector<unsigned char> notr = good;
  notr[0] = 'A';
  write_bytes("gpt_ut_notr.rdb", record(notr));
  expect_data_error("gpt_ut_notr.rdb", "not R's XDR");
  std::vector<unsigned char> intv = good;
  intv[2 + 12 + 4 + 5 + 3] = 13;  // INTSXP
  write_bytes("gpt_ut_int.rdb", record(intv));
  expect_data_error("gpt_ut_int.rdb", "not a character vector");
  std::vector<unsigned char> trunc = record(good);
  trunc.resize(trunc.size() - 6);
  write_bytes("gpt_ut_trunc.rdb", trunc);
  expect_data_error("gpt_ut_trunc.rdb", "damaged");
  // In memory (parse_rdb_strings, what tests/fuzz/fuzz_rdb drives): a
  // record header announcing 1 GiB over a stream of a few bytes, and one
  // byte more or less than the stream holds, are damaged records; the good
  // record parses the same as from the file.
  {
    std::vector<unsigned char> r = record(good);
    auto parse_error = [&](const std::vector<unsigned char>& b, const char* needle) {
      try {
        parse_rdb_strings(b.data(), b.size(), "mem.rdb");
        CHECK(false, "no error for '%s'", needle);
      } catch (const DataError& e) {
        CHECK(std::strstr(e.what(), needle) != nullptr && std::strstr(e.what(), "mem.rdb record 0") != nullptr,
              "message '%s' lacks '%s'", e.what(), needle);
      }
    };
    CHECK(parse_rdb_strings(r.data(), r.size(), "mem.rdb") == recs, "in-memory parse differs");
    const uint32_t n = static_cast<uint32_t>(good.size());
    for (uint32_t len : {uint32_t{1} << 30, n + 1, n - 1}) {
      std::vector<unsigned char> b = r;
      b[0] = len >> 24, b[1] = (len >> 16) & 255, b[2] = (len >> 8) & 255, b[3] = len & 255;
      const std::string want = std::to_string(len < n ? len + 1 : n) + " of " + std::to_string(len) + " bytes";
      parse_error(b, want.c_str());
    }
  }
  try {
    load_text("gpt_ut_missing_file.txt");
    CHECK(false, "missing file accepted");
  } catch (const DataError& e) {
    CHECK(std::strstr(e.what(), "cannot open") != nullptr, "%s", e.what());
  }
  for (const char* f : {"gpt_ut_good.rdb", "gpt_ut_type.rdb", "gpt_ut_notr.rdb", "gpt_ut_int.rdb", "gpt_ut_trunc.rdb"}) std::remove(f);

  // Batches: the tokens a rank sees are the global batch's, whatever the
  // layout (DP ranges of sequences, SP zigzag positions).
  std::vector<uint8_t> data(5000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(hash3(8, 8, i));
  const size_t Bg = 8, T = 16;
  std::vector<int64_t> all(T);
  for (size_t t = 0; t < T; ++t) all[t] = static_cast<int64_t>(t);
  std::vector<int32_t> X(Bg * T), Y(Bg * T);
  fill_batch(data, 5, STREAM_TRAIN_BATCH, 3, 0, Bg, T, all.data(), T, X.data(), Y.data());
  for (size_t b = 0; b < Bg; ++b)
    for (size_t t = 0; t + 1 < T; ++t) CHECK(Y[b * T + t] == X[b * T + t + 1], "targets are not shifted tokens");
  int mismatches = 0;
  for (int D : {1, 2, 4})
    for (int S : {1, 2, 4})
      for (int d = 0; d < D; ++d)
        for (int sr = 0; sr < S; ++sr) {
          size_t nl = 0;
          tsr_attn_shard_len(TSR_ATTN_LAYOUT_ZIGZAG, T, S, sr, &nl);
          std::vector<int64_t> pos(nl);
          tsr_attn_positions(TSR_ATTN_LAYOUT_ZIGZAG, T, S, sr, pos.data());
          size_t nb = Bg / D, b0 = d * nb;
          std::vector<int32_t> x(nb * nl), y(nb * nl);
          fill_batch(data, 5, STREAM_TRAIN_BATCH, 3, b0, nb, T, pos.data(), nl, x.data(), y.data());
          for (size_t i = 0; i < nb; ++i)
            for (size_t t = 0; t < nl; ++t)
              mismatches += x[i * nl + t] != X[(b0 + i) * T + pos[t]] || y[i * nl + t] != Y[(b0 + i) * T + pos[t]];
        }
  CHECK(mismatches == 0, "%d tokens differ between layouts", mismatches);
  std::vector<int32_t> X2(Bg * T), Y2(Bg * T);
  fill_batch(data, 6, STREAM_TRAIN_BATCH, 3, 0, Bg, T, all.data(), T, X2.data(), Y2.data());
  CHECK(X2 != X, "another seed gives the same batch");
  std::printf("  batches: identical tokens on DP 1/2/4 x SP 1/2/4 (zigzag)\n");
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  tsr_context ctx = nullptr;
  tsr_ring ring = nullptr;
  if (tsr_context_create(MPI_COMM_SELF, &ctx) != TSR_SUCCESS || tsr_ring_create_comm(ctx, MPI_COMM_SELF, &ring) != TSR_SUCCESS) {
    std::printf("FAIL: tessera setup: %s\n", tsr_last_error(nullptr));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  bool have_austen = std::ifstream(kAustenRdb).good();
  try {
    test_data(have_austen);
    test_fast_math();
    test_layers(ring);
    test_model(ring);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    ++failures;
  }
  tsr_ring_destroy(&ring);
  tsr_context_destroy(&ctx);
  MPI_Finalize();
  std::printf("%s (%d failures)\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
