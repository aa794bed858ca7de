// Hand-worked per-rank analysis: each rank is measured over its own steady-state
// iteration, with work issued early (a prefetched batch copy) folded in once.
#include <algorithm>

#include <catch2/catch.hpp>

#include "model/sim/simulator.hpp"
#include "model/sim/timeline_analysis.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_timeline_analysis_test {

using namespace perfcast;

namespace {

constexpr double us = 1e-6;

/// A graph whose kernel, copy and collective durations are set directly.
struct Graph {
  ExecutionGraph g;
  std::vector<std::vector<double>> op_time;  ///< [rank][op], seconds (collectives: 0)
  std::vector<double> coll_time;

  explicit Graph(int ranks) : op_time(static_cast<std::size_t>(ranks)) {
    g.ranks.resize(static_cast<std::size_t>(ranks));
    RankGroup all;
    for (int r = 0; r < ranks; ++r) all.ranks.push_back(r);
    g.groups.push_back(all);
  }
  int add(int rank, Op op, double t) {
    auto& ops = g.ranks[static_cast<std::size_t>(rank)].ops;
    ops.push_back(std::move(op));
    op_time[static_cast<std::size_t>(rank)].push_back(t);
    return static_cast<int>(ops.size()) - 1;
  }
  int kernel(int rank, const std::string& name, double t, std::vector<int> deps) {
    return add(rank, Op{name, Phase::kForward, Stream::kCompute, {ElementwiseDesc{name, 1, 1, 1}}, {}, std::move(deps), false}, t);
  }
  int copy(int rank, const std::string& name, double t) {
    return add(rank, Op{name, Phase::kInput, Stream::kCopy, {MemcpyDesc{1e6, CopyKind::kHostToDevice}}, {}, {}, false}, t);
  }
  int collective(int rank, const std::string& name, CollectiveKind kind, double t, std::vector<int> deps) {
    if (g.collectives.empty()) {
      g.collectives.push_back(GraphCollective{CollectiveDesc{kind, 1e6, {}}, 0});
      coll_time.push_back(t);
    }
    return add(rank, Op{name, Phase::kBackward, Stream::kComm, {}, 0, std::move(deps), false}, 0);
  }
  Timeline run(const HostSpec& host, int iterations) {
    TimedGraph tg;
    tg.graph = &g;
    for (const auto& ranks : op_time) {
      std::vector<OpTiming> ops;
      for (double t : ranks) {
        OpTiming o;
        if (t > 0) {
          Estimate e;
          e.time = t;
          o.kernels.push_back(e);
        }
        ops.push_back(o);
      }
      tg.ops.push_back(ops);
    }
    for (double t : coll_time) {
      CollectiveEstimate e;
      e.time = t;
      tg.collectives.push_back(e);
    }
    SimulationOptions opt;
    opt.iterations = iterations;
    return simulate(tg, host, opt);
  }
};

}  // namespace

TEST_CASE("per-rank analysis: the fast rank of a straggler pair keeps its copy and host time", "[timeline_analysis]") {
  // Per rank: a 20 us batch copy, then "work" (rank 0: 100 us, rank 1: 300 us) that reads
  // it, an all-reduce (30 us) of its output, and a 10 us "consume" of the all-reduce.
  // The host pays 10 us per op and issues all iterations without waiting.
  Graph s(2);
  for (int r = 0; r < 2; ++r) {
    const int c = s.copy(r, "batch_copy", 20 * us);
    const int w = s.kernel(r, "work", (r == 0 ? 100 : 300) * us, {c});
    const int a = s.collective(r, "allreduce.bucket0", CollectiveKind::kAllReduce, 30 * us, {w});
    s.kernel(r, "consume", 10 * us, {a});
  }
  HostSpec host;
  host.op_overhead = 10 * us;
  host.launch_overhead = 0;
  const Timeline t = s.run(host, 3);
  // Host segments of iteration k: [40k, 40k+40] us; copies run at 10-30, 50-70, 90-110 us.
  // Iteration 0: work 30-130 (rank 0) / 30-330 (rank 1); all-reduce 330-360; consume 360-370.
  // Iteration 1: work from 370; rank 1 370-670; all-reduce 670-700; consume 700-710.
  // Iteration 2: rank 1 work 710-1010; all-reduce 1010-1040; consume 1040-1050.
  REQUIRE(t.iteration_time == Approx(340 * us));
  REQUIRE(t.iteration_end[0][1] == Approx(710 * us));
  REQUIRE(t.iteration_end[0][2] == Approx(1050 * us));
  const TimelineAnalysis a = analyze_timeline(t, s.g);
  REQUIRE(a.ranks.size() == 2);
  // Rank 0's window is [710, 1050] us. Its iteration-2 copy (90-110) and host time
  // (80-120) ran long before it; folded by whole periods (+680 us) they land at 770-790
  // and 760-800: 20 us of copy and 40 us of host time, as every steady-state iteration has.
  const RankBreakdown& fast = a.ranks[0];
  CHECK(fast.period == Approx(340 * us));
  CHECK(fast.copy_busy == Approx(20 * us));
  CHECK(fast.host_busy == Approx(40 * us));
  CHECK(fast.compute_busy == Approx(110 * us));         // work 710-810, consume 1040-1050
  CHECK(fast.communication_busy == Approx(30 * us));
  CHECK(fast.exposed_communication == Approx(30 * us));
  CHECK(fast.exposed_by_group[static_cast<std::size_t>(CommGroup::kData)] == Approx(30 * us));
  CHECK(fast.exposed_copy == Approx(0).margin(1e-12));  // 770-790 lies inside work
  CHECK(fast.gpu_idle == Approx(200 * us));             // 810-1010: waiting for rank 1
  CHECK(fast.host_bound_idle == Approx(0).margin(1e-12));
  const RankBreakdown& slow = a.ranks[1];
  CHECK(slow.copy_busy == Approx(20 * us));
  CHECK(slow.host_busy == Approx(40 * us));
  CHECK(slow.compute_busy == Approx(310 * us));
  CHECK(slow.gpu_idle == Approx(0).margin(1e-12));
  // The split of each period sums to it.
  for (const auto& b : a.ranks) {
    double sum = b.compute_busy + b.exposed_copy + b.gpu_idle;
    for (double x : b.exposed_by_group) sum += x;
    CHECK(sum == Approx(b.period));
  }
  const NotableRanks n = notable_ranks(a);
  CHECK(n.slowest == 1);
  CHECK(n.critical == 1);
  CHECK(a.ranks[1].critical_path >= 300 * us);
  // The path's events, in timeline order, include rank 1's last "work" (710-1010 us).
  REQUIRE(std::is_sorted(a.critical_events.begin(), a.critical_events.end()));
  bool slow_work = false;
  for (int i : a.critical_events) {
    const TimelineEvent& e = t.events[static_cast<std::size_t>(i)];
    if (e.rank == 1 && e.iteration == 2 && e.lane == Lane::kCompute && e.end - e.start > 299 * us) slow_work = true;
  }
  CHECK(slow_work);
}

TEST_CASE("per-rank analysis: a prefetched copy counts once and hides under compute", "[timeline_analysis]") {
  // One rank: copy 50 us -> kernel 100 us; the host is fast (1 us per op), so each copy
  // runs right after the previous one, under the previous iteration's kernel.
  Graph s(1);
  const int c = s.copy(0, "batch_copy", 50 * us);
  s.kernel(0, "work", 100 * us, {c});
  HostSpec host;
  host.op_overhead = 1 * us;
  host.launch_overhead = 0;
  const Timeline t = s.run(host, 3);
  // Copies 1-51, 51-101, 101-151 us; work 51-151, 151-251, 251-351: period 100 us. The
  // iteration-2 copy (101-151) folds into the window [251, 351] at 301-351, under work.
  CHECK(t.iteration_time == Approx(100 * us));
  const TimelineAnalysis a = analyze_timeline(t, s.g);
  CHECK(a.ranks[0].copy_busy == Approx(50 * us));
  CHECK(a.ranks[0].compute_busy == Approx(100 * us));
  CHECK(a.ranks[0].exposed_copy == Approx(0).margin(1e-12));
  CHECK(a.ranks[0].gpu_idle == Approx(0).margin(1e-12));
}

TEST_CASE("op types replace digit runs; collectives are grouped by their names", "[timeline_analysis]") {
  CHECK(op_type_of("mb3.layer12.attention.tp_reduce") == "mb#.layer#.attention.tp_reduce");
  CHECK(op_type_of("bottom_mlp") == "bottom_mlp");
  CHECK(op_type_of("batch_h2d") == "batch_h2d");
  CHECK(op_type_of("cross_entropy.all_reduce_2") == "cross_entropy.all_reduce_#");
  const GraphCollective ar{CollectiveDesc{CollectiveKind::kAllReduce, 1, {}}, 0};
  const GraphCollective a2a{CollectiveDesc{CollectiveKind::kAllToAllV, 0, {}}, 0};
  auto op = [](const std::string& n) { return Op{n, Phase::kForward, Stream::kComm, {}, 0, {}, false}; };
  CHECK(communication_group_of(op("mb0.layer3.mlp.tp_reduce"), ar) == CommGroup::kTensor);
  CHECK(communication_group_of(op("mb0.layer3.backward.attention.dense.all_gather"), ar) == CommGroup::kTensor);
  CHECK(communication_group_of(op("mb1.send_forward"), a2a) == CommGroup::kPipeline);
  CHECK(communication_group_of(op("mb1.layer2.cp_ring0.send_next"), a2a) == CommGroup::kContext);
  CHECK(communication_group_of(op("grads.all_reduce"), ar) == CommGroup::kData);
  CHECK(communication_group_of(op("allreduce.bucket3"), ar) == CommGroup::kData);
  CHECK(communication_group_of(op("output_dist"), a2a) == CommGroup::kEmbedding);
  CHECK(communication_group_of(op("nccl:all_reduce"), ar) == CommGroup::kOther);
}

}  // namespace perfcast_test_model_timeline_analysis_test
