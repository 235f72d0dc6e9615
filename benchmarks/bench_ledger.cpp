// Google Benchmark micro-benchmarks of the accounting alone: what one charged
// message costs in the ledger, with 0 to 3 open regions (every open region is
// charged). Compare with bench_transport's per-message time.
#include <benchmark/benchmark.h>

#include "ledger.hpp"

namespace {

void BM_LedgerChargeSend(benchmark::State& state) {
  tsr::Ledger ledger;
  for (int r = 0; r < state.range(0); ++r) ledger.begin(("r" + std::to_string(r)).c_str());
  uint64_t bytes = 1024;
  for (auto _ : state) {
    benchmark::DoNotOptimize(bytes);
    ledger.p2p_sent(TSR_PEER_NODE, bytes, tsr::Traffic::data);
    benchmark::ClobberMemory();  // the counters must really be written each time
  }
  tsr_counters c;
  ledger.get("total", &c);
  benchmark::DoNotOptimize(c.p2p_sent[TSR_PEER_NODE].bytes);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LedgerChargeSend)->Arg(0)->Arg(1)->Arg(3);

void BM_LedgerChargeCollective(benchmark::State& state) {
  tsr::Ledger ledger;
  for (int r = 0; r < state.range(0); ++r) ledger.begin(("r" + std::to_string(r)).c_str());
  for (auto _ : state) {
    ledger.coll_call(TSR_COLL_ALLREDUCE, 1024, 1024, tsr::Traffic::data);
    ledger.coll_wire_sent(TSR_PEER_NODE, 14, 1792, tsr::Traffic::data);
    ledger.coll_wire_recv(TSR_PEER_NODE, 14, 1792, tsr::Traffic::data);
    benchmark::ClobberMemory();
  }
  tsr_counters c;
  ledger.get("total", &c);
  benchmark::DoNotOptimize(c.coll_calls[TSR_COLL_ALLREDUCE]);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LedgerChargeCollective)->Arg(0)->Arg(1)->Arg(3);

}  // namespace

BENCHMARK_MAIN();
