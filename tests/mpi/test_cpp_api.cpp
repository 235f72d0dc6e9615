// The C++ API: RAII owners, exceptions carrying the status and message,
// spans. tessera.hpp is included first and alone (it must be self-contained).
#include "tessera/tessera.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

namespace {

int world_rank() { int r = 0; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }

TEST(CppApi, ContextGridCollectivesReport) {
  tessera::context ctx(MPI_COMM_WORLD, 2);
  EXPECT_EQ(ctx.rank(), world_rank());
  EXPECT_EQ(ctx.node().first, world_rank() / 2);
  const tessera::dims3 d = tessera::grid::dims_for(TSR_GRID_2D, ctx.size());
  tessera::grid g(ctx, TSR_GRID_2D, d);
  EXPECT_EQ(g.dims(), d);
  EXPECT_TRUE(g.is_member());
  const tessera::dims3 me = g.coords();
  EXPECT_EQ(g.coords(g.rank()), me);
  const auto row = g.axis(TSR_AXIS_ROW);
  EXPECT_EQ(row.first, me[1]);
  EXPECT_EQ(row.second, d[1]);
  {
    tessera::region r(ctx, "cpp");
    std::vector<double> x(5, 1.0 + me[1]), y(5);
    g.allreduce(TSR_AXIS_ROW, tessera::span<const double>(x), tessera::span<double>(y));
    EXPECT_EQ(y[4], d[1] * (d[1] + 1) / 2.0);
    std::vector<int32_t> one(2, me[0]), all(2 * static_cast<size_t>(d[0]));
    g.allgather(TSR_AXIS_COL, tessera::span<const int32_t>(one), tessera::span<int32_t>(all));
    for (int i = 0; i < d[0]; ++i) EXPECT_EQ(all[2 * static_cast<size_t>(i)], i);
    std::vector<float> s(3, static_cast<float>(me[1])), t(3);
    g.shift(TSR_AXIS_ROW, tessera::span<const float>(s), tessera::span<float>(t), 1);
    EXPECT_EQ(t[0], static_cast<float>((me[1] - 1 + d[1]) % d[1]));
  }
  const tsr_counters c = ctx.counters("cpp");
  EXPECT_EQ(c.coll_calls[TSR_COLL_ALLREDUCE], 1u);
  EXPECT_EQ(c.coll_calls[TSR_COLL_ALLGATHER], 1u);
  tessera::report rep(ctx);
  const std::vector<std::string> regions = rep.regions();
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_EQ(regions[1], "cpp");
  EXPECT_EQ(rep.region_stats(1).sum.coll_calls[TSR_COLL_ALLREDUCE], static_cast<uint64_t>(ctx.size()));
  EXPECT_NE(rep.str().find("region cpp"), std::string::npos);
  tessera::report moved(std::move(rep));
  EXPECT_EQ(rep.get(), nullptr);
  EXPECT_NE(moved.get(), nullptr);
}

TEST(CppApi, ErrorsCarryStatusAndMessage) {
  tessera::context ctx(MPI_COMM_WORLD);
  try {
    tessera::grid bad(ctx, TSR_GRID_3D, {3, 3, 3});
    FAIL() << "no exception";
  } catch (const tessera::error& e) {
    EXPECT_EQ(e.status(), TSR_ERR_SHAPE);
    EXPECT_NE(std::string(e.what()).find("tsr_grid_create: argument 'dims'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tessera::grid::dims_for(TSR_GRID_3D, 12), tessera::error);
  EXPECT_THROW(tessera::region(ctx, "a/b"), tessera::error);
  EXPECT_THROW((void)ctx.counters("nope"), tessera::error);
  // A wrong-size receive span fails on every rank of the axis; the rank with
  // the bad span learns why.
  tessera::grid g(ctx, TSR_GRID_1D, {ctx.size(), 1, 1});
  std::vector<double> x(4, 1.0), y(world_rank() == 0 ? 3 : 4);
  try {
    g.allreduce(TSR_AXIS_COL, tessera::span<const double>(x), tessera::span<double>(y));
    FAIL() << "no exception";
  } catch (const tessera::error& e) {
    if (world_rank() == 0) {
      EXPECT_EQ(e.status(), TSR_ERR_SHAPE);
      EXPECT_NE(std::string(e.what()).find("receive span has 3 elements; expected 4"), std::string::npos);
    } else {
      EXPECT_EQ(e.status(), TSR_ERR_SHAPE);
      EXPECT_NE(std::string(e.what()).find("rank 0 failed"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("TSR_COUNT_INVALID"), std::string::npos) << e.what();
    }
  }
  const tessera::version_info v = tessera::version();
  EXPECT_EQ(v.code, TSR_VERSION_CODE);
}

}  // namespace

namespace {

// Device wrappers (device.hpp, included by tessera.hpp): the host-only view
// of a build without a GPU; binding a device is a GPU test (tests/device).
TEST(CppApi, DeviceWrappers) {
  tessera::context ctx(MPI_COMM_WORLD);
  EXPECT_GE(tessera::device_count(), 0);
  double x = 0;
  EXPECT_EQ(tessera::pointer_space(&x), tessera::memory_space::host);
  const tessera::device_binding b = tessera::get_device(ctx);
  EXPECT_EQ(b.device, -1);
  EXPECT_EQ(b.stream, nullptr);
  try {
    tessera::set_device(ctx, -2);
    FAIL() << "no exception";
  } catch (const tessera::error& e) {
    EXPECT_EQ(e.status(), TSR_ERR_INVALID_ARG);
    EXPECT_NE(std::string(e.what()).find("tsr_context_set_device: argument 'device'"), std::string::npos) << e.what();
  }
  tessera::set_device(ctx, -1);  // unbinding an unbound context: fine
  EXPECT_EQ(tessera::get_device(ctx).device, -1);
}

}  // namespace

namespace {

// Optimizer wrappers for tensor parallelism (optimizer.hpp): set_state,
// set_step, set_norm_reduction / clear_norm_reduction.
std::vector<float> ramp(std::size_t n, float a, float b) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = a + b * static_cast<float>((i * 7919u) % 101u) / 101.0f;
  return v;
}

// A sharded optimizer's state and step count moved into a fresh one with
// set_state / set_step: the state reads back equal and the next step is
// bit-identical.
TEST(CppApi, OptimizerSetStateAndStep) {
  tessera::context ctx(MPI_COMM_WORLD);
  const std::vector<std::size_t> sizes{37, 64, 5};
  tessera::optimizer a(ctx, TSR_PRESET_LAMB_PAPER, sizes, TSR_OPT_SHARDED);
  tessera::optimizer b(ctx, TSR_PRESET_LAMB_PAPER, sizes, TSR_OPT_SHARDED);
  const std::size_t n = 37 + 64 + 5;
  std::vector<float> w = ramp(n, 0.5f, 1.0f);
  for (int s = 1; s <= 2; ++s) {
    std::vector<float> g = ramp(n, -0.5f, static_cast<float>(s));
    ASSERT_TRUE(a.step(w, g));
  }
  EXPECT_EQ(b.set_step(a.steps()).steps(), 2);
  EXPECT_EQ(b.query(TSR_OPTQ_STEP), 2.0);
  for (tsr_opt_state st : {TSR_OPT_STATE_M, TSR_OPT_STATE_V}) {
    const std::vector<float> sa = a.state(st);
    ASSERT_EQ(sa.size(), static_cast<std::size_t>(a.query(TSR_OPTQ_SHARD_SIZE)));
    if (!sa.empty()) {
      EXPECT_NE(sa, b.state(st));  // b's state is still zero
    }
    b.set_state(st, sa);
    EXPECT_EQ(b.state(st), sa);
  }
  std::vector<float> wb = w, g3 = ramp(n, 0.25f, -2.0f), g3b = g3;
  ASSERT_TRUE(a.step(w, g3));
  ASSERT_TRUE(b.step(wb, g3b));
  EXPECT_EQ(wb, w);
  EXPECT_EQ(b.steps(), 3);
}

// Every rank holds a block of groups 0 and 1 and the whole of group 2 (a
// replicated tensor: weight 1 on rank 0, 0 elsewhere); one optimizer per rank
// on its own context with the norms summed over the world has the trust
// ratios of one optimizer over the whole tensors, and steps bit-identically
// to the same setting made with the C call.
TEST(CppApi, OptimizerNormReduction) {
  tessera::context world(MPI_COMM_WORLD);  // declared first: outlives the optimizers
  tessera::context self(MPI_COMM_SELF);
  const int p = world.size(), r = world.rank();
  const std::vector<std::size_t> whole{40, 24, 5};
  std::vector<std::size_t> mine(3), lo(3), off{0, 40, 64};
  for (std::size_t g = 0; g < 2; ++g) {
    lo[g] = whole[g] * static_cast<std::size_t>(r) / static_cast<std::size_t>(p);
    mine[g] = whole[g] * static_cast<std::size_t>(r + 1) / static_cast<std::size_t>(p) - lo[g];
  }
  lo[2] = 0, mine[2] = whole[2];
  const std::vector<double> weights{1.0, 1.0, r == 0 ? 1.0 : 0.0};
  auto local_of = [&](const std::vector<float>& v) {
    std::vector<float> l;
    for (std::size_t g = 0; g < 3; ++g)
      l.insert(l.end(), v.begin() + static_cast<long>(off[g] + lo[g]),
               v.begin() + static_cast<long>(off[g] + lo[g] + mine[g]));
    return l;
  };
  tessera::optimizer ref(self, TSR_PRESET_LAMB_PAPER, whole, TSR_OPT_REPLICATED);
  tessera::optimizer cpp(self, TSR_PRESET_LAMB_PAPER, mine, TSR_OPT_REPLICATED);
  tessera::optimizer viac(self, TSR_PRESET_LAMB_PAPER, mine, TSR_OPT_REPLICATED);
  tessera::optimizer dflt(self, TSR_PRESET_LAMB_PAPER, mine, TSR_OPT_REPLICATED);
  for (tessera::optimizer* o : {&ref, &cpp, &viac, &dflt}) o->set(TSR_OPT_MAX_GRAD_NORM, 0);
  EXPECT_EQ(&cpp.set_norm_reduction(world, weights), &cpp);
  ASSERT_EQ(tsr_optimizer_set_norm_reduction(viac.get(), world.get(), 3, weights.data()), TSR_SUCCESS);
  dflt.set_norm_reduction(world);  // weights all 1: group 2 counted p times
  const std::size_t n = 69;
  std::vector<float> wr = ramp(n, 0.5f, 1.0f), wc = local_of(wr), wv = wc, wd = wc;
  for (int s = 1; s <= 2; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const std::vector<float> g = ramp(n, -0.5f, static_cast<float>(s));  // the same whole gradient everywhere
    std::vector<float> gr = g, gc = local_of(g), gv = gc, gd = gc;
    ASSERT_TRUE(ref.step(wr, gr));
    ASSERT_TRUE(cpp.step(wc, gc));
    ASSERT_TRUE(viac.step(wv, gv));
    ASSERT_TRUE(dflt.step(wd, gd));
    EXPECT_EQ(wc, wv);
    EXPECT_EQ(cpp.query(TSR_OPTQ_NORM_ALLREDUCES), viac.query(TSR_OPTQ_NORM_ALLREDUCES));
    EXPECT_GE(cpp.query(TSR_OPTQ_NORM_ALLREDUCES), 1);
    EXPECT_NEAR(cpp.query(TSR_OPTQ_GRAD_NORM), ref.query(TSR_OPTQ_GRAD_NORM), 1e-12 * ref.query(TSR_OPTQ_GRAD_NORM));
    for (int k = 0; k < 3; ++k) {
      const double t = ref.query(TSR_OPTQ_TRUST_RATIO, k);
      EXPECT_NE(t, 1.0) << "group " << k;
      EXPECT_NEAR(cpp.query(TSR_OPTQ_TRUST_RATIO, k), t, 1e-9 * t) << "group " << k;
      if (k < 2) {
        EXPECT_NEAR(dflt.query(TSR_OPTQ_TRUST_RATIO, k), t, 1e-9 * t) << "group " << k;
      }
    }
  }
  // Cleared: the step reduces over its own context only (none, replicated).
  cpp.clear_norm_reduction();
  std::vector<float> g3 = local_of(ramp(n, 0.1f, 3.0f));
  ASSERT_TRUE(cpp.step(wc, g3));
  EXPECT_EQ(cpp.query(TSR_OPTQ_NORM_ALLREDUCES), 0);
  viac.clear_norm_reduction();
  dflt.clear_norm_reduction();
}

TEST(CppApi, OptimizerSettersThrowWithStatus) {
  tessera::context ctx(MPI_COMM_WORLD);
  tessera::context other(MPI_COMM_WORLD);
  tessera::optimizer opt(ctx, TSR_PRESET_LAMB_PAPER, {16, 4}, TSR_OPT_REPLICATED);
  auto expect_throw = [](tsr_status want, const char* what, const std::function<void()>& f) {
    try {
      f();
      ADD_FAILURE() << "no exception: " << what;
    } catch (const tessera::error& e) {
      EXPECT_EQ(e.status(), want) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_throw(TSR_ERR_INVALID_ARG, "tsr_optimizer_set_step: argument 'step'", [&] { opt.set_step(-1); });
  EXPECT_EQ(opt.steps(), 0);
  expect_throw(TSR_ERR_SHAPE, "argument 'count'", [&] { opt.set_state(TSR_OPT_STATE_M, std::vector<float>(19)); });
  expect_throw(TSR_ERR_INVALID_ARG, "argument 'which'",
               [&] { opt.set_state(TSR_OPT_STATE_MASTER, std::vector<float>(20)); });
  expect_throw(TSR_ERR_INVALID_ARG, "argument 'norm_ctx'", [&] { opt.set_norm_reduction(ctx); });
  expect_throw(TSR_ERR_INVALID_ARG, "argument 'ngroups'", [&] { opt.set_norm_reduction(other, {1.0}); });
  expect_throw(TSR_ERR_INVALID_ARG, "argument 'weights'", [&] { opt.set_norm_reduction(other, {1.0, -1.0}); });
  opt.set_norm_reduction(other, {1.0, 0.0}).clear_norm_reduction();
  tessera::optimizer gone(std::move(opt));
  // A moved-from optimizer: INVALID_ARG. (The message of a NULL handle is
  // kept in tsr_last_error(NULL), not the context's, so only the status is
  // checked here, as for the other methods of the class.)
  expect_throw(TSR_ERR_INVALID_ARG, "", [&] { opt.set_step(1); });  // NOLINT: use after move, on purpose
  EXPECT_NE(std::string(tsr_last_error(nullptr)).find("tsr_optimizer_set_step: argument 'opt'"), std::string::npos)
      << tsr_last_error(nullptr);
  EXPECT_EQ(gone.set_step(5).steps(), 5);
}

}  // namespace
