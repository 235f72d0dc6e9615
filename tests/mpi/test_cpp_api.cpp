// The C++ API: RAII owners, exceptions carrying the status and message,
// spans. tessera.hpp is included first and alone (it must be self-contained).
#include "tessera/tessera.hpp"

#include <gtest/gtest.h>

#include <numeric>
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
