// Hand-worked simulator scenarios. Kernel and collective durations are set directly, so
// every expected time below follows from the rules in simulator.hpp by hand.
#include <algorithm>

#include <catch2/catch.hpp>

#include "model/sim/annotate.hpp"
#include "model/sim/sim_engine.hpp"
#include "model/sim/simulator.hpp"
#include "model/sim/timeline_analysis.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_simulator_test {

using namespace perfcast;

namespace {

constexpr double us = 1e-6;

struct Scenario {
  ExecutionGraph g;
  TimedGraph t;
  std::vector<double> coll_times;

  explicit Scenario(int ranks) {
    g.ranks.resize(static_cast<std::size_t>(ranks));
    RankGroup all;
    for (int r = 0; r < ranks; ++r) all.ranks.push_back(r);
    g.groups.push_back(all);
  }
  /// A compute-stream op with one kernel of `dur` seconds.
  int kernel(int rank, const std::string& name, double dur, std::vector<int> deps = {}, Stream s = Stream::kCompute) {
    auto& ops = g.ranks[static_cast<std::size_t>(rank)].ops;
    ops.push_back(Op{name, Phase::kForward, s, {ElementwiseDesc{name, 1, 1, 1}}, {}, std::move(deps), false});
    durations[rank].push_back({dur});
    return static_cast<int>(ops.size()) - 1;
  }
  /// A collective op; `index` names the graph-wide collective (created on first use).
  int collective(int rank, const std::string& name, int index, double dur, std::vector<int> deps = {}) {
    if (static_cast<int>(g.collectives.size()) <= index) {
      g.collectives.resize(static_cast<std::size_t>(index) + 1);
      coll_times.resize(static_cast<std::size_t>(index) + 1);
    }
    coll_times[static_cast<std::size_t>(index)] = dur;
    auto& ops = g.ranks[static_cast<std::size_t>(rank)].ops;
    ops.push_back(Op{name, Phase::kBackward, Stream::kComm, {}, index, std::move(deps), false});
    durations[rank].push_back({});
    return static_cast<int>(ops.size()) - 1;
  }
  /// A host-to-device copy op on the copy stream (it fills the rank's PCIe link).
  int copy(int rank, const std::string& name, double dur, std::vector<int> deps = {}) {
    auto& ops = g.ranks[static_cast<std::size_t>(rank)].ops;
    ops.push_back(Op{name, Phase::kForward, Stream::kCopy, {MemcpyDesc{1e6, CopyKind::kHostToDevice}}, {}, std::move(deps), false});
    durations[rank].push_back({dur});
    return static_cast<int>(ops.size()) - 1;
  }
  Timeline run(HostSpec host, int iterations = 2, bool contention = true) {
    t.graph = &g;
    t.ops.clear();
    for (std::size_t r = 0; r < g.ranks.size(); ++r) {
      std::vector<OpTiming> ops;
      for (const auto& d : durations[static_cast<int>(r)]) {
        OpTiming o;
        for (double x : d) {
          Estimate e;
          e.time = x;
          o.kernels.push_back(e);
        }
        ops.push_back(o);
      }
      t.ops.push_back(ops);
    }
    t.collectives.clear();
    for (std::size_t i = 0; i < coll_times.size(); ++i) {
      CollectiveEstimate e;
      e.time = coll_times[i];
      if (i < nic_busy.size()) e.nic_busy = nic_busy[i];
      if (i < pcie_busy.size()) e.pcie_busy = pcie_busy[i];
      if (i < sms.size()) e.sms = sms[i];
      t.collectives.push_back(e);
    }
    if (sm_count > 0) add_nccl_sm_sharing(g, t, sm_count);
    SimulationOptions opt;
    opt.iterations = iterations;
    opt.contention = contention;
    return simulate(t, host, opt);
  }
  std::map<int, std::vector<std::vector<double>>> durations;
  std::vector<double> nic_busy, pcie_busy;  ///< per collective (contention cases)
  std::vector<int> sms;                     ///< per collective: SMs its NCCL kernel holds
  int sm_count = 0;                         ///< > 0: add_nccl_sm_sharing on a GPU of this many SMs
};

HostSpec host(double op, double launch) {
  HostSpec h;
  h.op_overhead = op;
  h.launch_overhead = launch;
  return h;
}

}  // namespace

TEST_CASE("one rank, serial kernels: GPU-bound period", "[simulator]") {
  Scenario s(1);
  const int a = s.kernel(0, "A", 100 * us);
  s.kernel(0, "B", 50 * us, {a});
  const Timeline t = s.run(host(10 * us, 5 * us));
  // Iteration 0: host issues A at 15 us (10 + 5), A runs 15-115; B launched at 30, runs
  // 115-165. Iteration 1: A launched at 45 but waits for the stream: 165-265; B 265-315.
  CHECK(t.iteration_end[0][0] == Approx(165 * us));
  CHECK(t.iteration_end[0][1] == Approx(315 * us));
  CHECK(t.iteration_time == Approx(150 * us));
  const auto a2 = std::find_if(t.events.begin(), t.events.end(),
                               [](const auto& e) { return e.iteration == 1 && e.op == 0 && e.lane == Lane::kCompute; });
  CHECK(a2->binding == Binding::kStream);
  CHECK(a2->start == Approx(165 * us));
}

TEST_CASE("two ranks: the collective waits for the slower rank", "[simulator]") {
  Scenario s(2);
  for (int r = 0; r < 2; ++r) {
    const int k = s.kernel(r, "work", (r == 0 ? 100 : 200) * us);
    const int c = s.collective(r, "allreduce", 0, 30 * us, {k});
    s.kernel(r, "consume", 10 * us, {c});
  }
  const Timeline t = s.run(host(0, 0));
  // Collective: max(100, 200) = 200 -> 230 on both ranks; consumers 230-240.
  // Iteration 1: rank 0 work 240-340, rank 1 240-440; collective 440-470; consumers 470-480.
  CHECK(t.iteration_end[0][0] == Approx(240 * us));
  CHECK(t.iteration_end[1][1] == Approx(480 * us));
  CHECK(t.iteration_time == Approx(240 * us));
  int peers = 0;
  for (const auto& e : t.events) {
    if (e.lane != Lane::kComm) continue;
    CHECK(e.end - e.start == Approx(30 * us));
    if (e.rank == 0) {
      CHECK(e.binding == Binding::kPeer);
      ++peers;
    }
  }
  CHECK(peers == 2);
  const auto a = analyze_timeline(t, s.g);
  // Critical path: rank 1's work (200 us), the collective (30), the consumer (10).
  CHECK(a.critical_path_total == Approx(240 * us));
  CHECK(a.critical_path.front().label == "work");
  CHECK(a.critical_path.front().time == Approx(200 * us));
}

TEST_CASE("compute and communication overlap", "[simulator]") {
  Scenario s(2);
  for (int r = 0; r < 2; ++r) {
    const int a = s.kernel(r, "A", 100 * us);
    const int c = s.collective(r, "allreduce", 0, 80 * us, {a});
    s.kernel(r, "B", 100 * us);  // independent of the collective
    s.kernel(r, "C", 10 * us, {c});
  }
  const Timeline t = s.run(host(0, 0), 3);
  // Per iteration: A 100, then B (100) on compute while the all-reduce (80) runs beside it;
  // C waits for max(B end, all-reduce end) = B end. Period 210 instead of 290 serial.
  CHECK(t.iteration_time == Approx(210 * us));
  const auto a = analyze_timeline(t, s.g);
  for (const auto& r : a.ranks) {
    CHECK(r.compute_busy == Approx(210 * us));
    CHECK(r.communication_busy == Approx(80 * us));
    CHECK(r.exposed_communication == Approx(0).margin(1e-12));
  }
}

TEST_CASE("exposed communication when the consumer waits", "[simulator]") {
  Scenario s(2);
  for (int r = 0; r < 2; ++r) {
    const int a = s.kernel(r, "A", 100 * us);
    const int c = s.collective(r, "alltoall", 0, 80 * us, {a});
    s.kernel(r, "C", 10 * us, {c});
  }
  const Timeline t = s.run(host(0, 0), 3);
  CHECK(t.iteration_time == Approx(190 * us));
  const auto a = analyze_timeline(t, s.g);
  CHECK(a.ranks[0].exposed_communication == Approx(80 * us));
}

TEST_CASE("host-bound: launches dominate tiny kernels", "[simulator]") {
  Scenario s(1);
  int prev = s.kernel(0, "k0", 1 * us);
  for (int i = 1; i < 10; ++i) prev = s.kernel(0, "k" + std::to_string(i), 1 * us, {prev});
  const Timeline t = s.run(host(20 * us, 5 * us), 3);
  // Each op costs the host 25 us and the GPU 1 us: the period is 10 x 25 us.
  CHECK(t.iteration_time == Approx(250 * us));
  const auto a = analyze_timeline(t, s.g);
  CHECK(a.ranks[0].compute_busy == Approx(10 * us));
  // In the window every kernel waited 24 us for its launch.
  CHECK(a.ranks[0].host_bound_idle == Approx(10 * 24 * us));
  CHECK(a.critical_path.front().label.rfind("host: ", 0) == 0);
}

TEST_CASE("host-bound: backward (autograd) ops pay backward_op_overhead, recomputed forwards op_overhead", "[simulator]") {
  Scenario s(1);
  // Four 1-us kernels: a forward op, a recomputed forward and two autograd ops.
  int prev = s.kernel(0, "fwd", 1 * us);
  prev = s.kernel(0, "recompute.fwd", 1 * us, {prev});
  prev = s.kernel(0, "bwd.a", 1 * us, {prev});
  s.kernel(0, "bwd.b", 1 * us, {prev});
  auto& ops = s.g.ranks[0].ops;
  for (std::size_t i = 1; i < ops.size(); ++i) ops[i].phase = Phase::kBackward;
  ops[1].recompute = true;
  HostSpec h = host(20 * us, 5 * us);
  // Unset: every op 20 + 5 us of host time, period 4 x 25 us.
  CHECK(s.run(h, 3).iteration_time == Approx(100 * us));
  // Set: the two autograd ops cost 2 + 5 us each: 25 + 25 + 7 + 7 = 64 us.
  h.backward_op_overhead = 2 * us;
  CHECK(s.run(h, 3).iteration_time == Approx(64 * us));
  // Zero: the autograd ops cost their launches only: 25 + 25 + 5 + 5 = 60 us.
  h.backward_op_overhead = 0.0;
  CHECK(s.run(h, 3).iteration_time == Approx(60 * us));
}

TEST_CASE("host-bound: an FP8 module call pays fp8_module_overhead on top, forward and recomputed", "[simulator]") {
  Scenario s(1);
  // Three 1-us kernels: an FP8 linear forward, its recomputation and its backward.
  int prev = s.kernel(0, "qkv", 1 * us);
  prev = s.kernel(0, "recompute.qkv", 1 * us, {prev});
  s.kernel(0, "backward.qkv", 1 * us, {prev});
  auto& ops = s.g.ranks[0].ops;
  ops[1].phase = ops[2].phase = Phase::kBackward;
  ops[1].recompute = true;
  for (auto& op : ops) op.fp8_module = true;
  HostSpec h = host(20 * us, 5 * us);
  h.backward_op_overhead = 0.0;
  // None set: 25 + 25 + 5 us.
  CHECK(s.run(h, 3).iteration_time == Approx(55 * us));
  // 30 us more per FP8 module call, forward and recomputed; the autograd op keeps its
  // backward cost: (20 + 30 + 5) x 2 + 5 = 115 us.
  h.fp8_module_overhead = 30 * us;
  CHECK(s.run(h, 3).iteration_time == Approx(115 * us));
}

TEST_CASE("a blocking op makes the host wait", "[simulator]") {
  Scenario s(1);
  const int a = s.kernel(0, "A", 500 * us);
  s.g.ranks[0].ops.push_back(Op{"sync", Phase::kOptimizer, Stream::kCompute, {ElementwiseDesc{"sync", 1, 1, 1}}, {}, {a}, true});
  s.durations[0].push_back({1 * us});
  const Timeline t = s.run(host(10 * us, 0), 3);
  // A 10-510, sync 510-511 then the host resumes at 511; next A launches at 521.
  CHECK(t.iteration_time == Approx(511 * us));
}

TEST_CASE("collectives issued in different orders are reported, not hung", "[simulator]") {
  Scenario s(2);
  s.collective(0, "first", 0, 10 * us);
  s.collective(0, "second", 1, 10 * us);
  s.collective(1, "second", 1, 10 * us);
  s.collective(1, "first", 0, 10 * us);
  CHECK_THROWS_AS(s.run(host(0, 0)), SimulationError);
}

TEST_CASE("an op without GPU work passes its inputs on", "[simulator]") {
  Scenario s(1);
  const int a = s.kernel(0, "A", 100 * us, {}, Stream::kCopy);
  s.g.ranks[0].ops.push_back(Op{"view", Phase::kForward, Stream::kCompute, {}, {}, {a}, false});
  s.durations[0].push_back({});
  s.kernel(0, "Y", 10 * us, {1});
  const Timeline t = s.run(host(0, 0));
  // Y waits for A through the empty op: A 0-100, Y 100-110.
  CHECK(t.iteration_end[0][0] == Approx(110 * us));
}

TEST_CASE("a rank outside a collective's group is reported", "[simulator]") {
  Scenario s(3);
  s.g.groups.push_back(RankGroup{{0, 1}});
  s.collective(0, "pair", 0, 10 * us);
  s.g.collectives[0].group = 1;
  s.collective(2, "pair", 0, 10 * us);
  s.collective(1, "pair", 0, 10 * us);
  CHECK_THROWS_WITH(s.run(host(0, 0)), Catch::Contains("not a member"));
}

TEST_CASE("contention: a copy and a collective sharing one PCIe link take twice as long", "[simulator][contention]") {
  // Rank 0 copies 100 us host-to-device while a 2-rank collective whose network traffic
  // keeps rank 0's PCIe link busy its whole 100 us (pcie_busy = time) starts at the same
  // moment. Max-min fair share: each gets half the link, so both end at 200 us.
  auto build = [](Scenario& s) {
    s.copy(0, "h2d", 100 * us);
    s.collective(0, "a2a", 0, 100 * us);
    s.collective(1, "a2a", 0, 100 * us);
    s.nic_busy = {50 * us};
    s.pcie_busy = {100 * us};
  };
  Scenario s(2);
  build(s);
  const Timeline t = s.run(host(0, 0), 2);
  for (const auto& e : t.events) {
    if (e.lane == Lane::kHost) continue;
    INFO("rank " << e.rank << " op " << e.op << " iteration " << e.iteration);
    // Iteration 0: 0-200 us; iteration 1 (streams free at 200): 200-400 us.
    CHECK(e.start == Approx(e.iteration * 200 * us).margin(1e-12));
    CHECK(e.end - e.start == Approx(200 * us));
  }
  CHECK(t.iteration_time == Approx(200 * us));
  // Two re-runs: the first pass replays the solo timeline, where iteration 1 starts at
  // 100 us under iteration 0's stretched transfers; the second re-run moves nothing.
  CHECK(t.contention_passes == 2);

  Scenario off(2);
  build(off);
  CHECK(off.run(host(0, 0), 2, false).iteration_time == Approx(100 * us));  // opted out: solo speeds
}

TEST_CASE("contention: transfers on different links or at different times keep their durations", "[simulator][contention]") {
  // The copy is on rank 1, the collective's PCIe traffic on both ranks: rank 1 shares.
  // But when the copy only starts after the collective (it depends on it), nothing overlaps.
  Scenario s(2);
  const int c0 = s.collective(0, "a2a", 0, 100 * us);
  s.collective(1, "a2a", 0, 100 * us);
  s.copy(0, "h2d", 100 * us, {c0});
  s.g.ranks[0].ops.back().host_waits = true;  // the next iteration's collective comes after it
  s.pcie_busy = {100 * us};
  const Timeline t = s.run(host(0, 0), 2);
  for (const auto& e : t.events) {
    if (e.lane != Lane::kHost) CHECK(e.end - e.start == Approx(100 * us));
  }
  // A collective that uses a quarter of the link beside a copy that fills it: max-min gives
  // the collective its quarter (full speed) and the copy the other three quarters until the
  // collective ends at 100 us (75 us of copy work done), then the copy's last 25 us alone.
  Scenario q(2);
  q.collective(0, "a2a", 0, 100 * us);
  q.copy(0, "h2d", 100 * us);
  q.g.ranks[0].ops.back().host_waits = true;  // keeps iteration 1 off iteration 0's transfers
  q.collective(1, "a2a", 0, 100 * us);
  q.pcie_busy = {25 * us};
  const Timeline u = q.run(host(0, 0), 2);
  for (const auto& e : u.events) {
    if (e.iteration != 0 || e.lane == Lane::kHost) continue;
    CHECK(e.end == Approx(e.lane == Lane::kCopy ? 125 * us : 100 * us));
  }
}

TEST_CASE("contention: NICs and PCIe links are full duplex for point-to-point transfers", "[simulator][contention]") {
  // Point-to-point transfers as the pipeline schedules build them: 2-rank all-to-allvs with
  // bytes one way, issued side by side (Op::concurrent). Each fills the NIC and the PCIe link
  // it crosses for its whole 100 us (nic_busy = pcie_busy = time).
  auto send = [](Scenario& s, int index, int from, int to) {
    s.g.groups.push_back(RankGroup{{from, to}});
    s.collective(from, "send", index, 100 * us);
    s.collective(to, "send", index, 100 * us);
    s.g.ranks[static_cast<std::size_t>(from)].ops.back().concurrent = true;
    s.g.ranks[static_cast<std::size_t>(to)].ops.back().concurrent = true;
    s.g.collectives[static_cast<std::size_t>(index)].group = static_cast<int>(s.g.groups.size()) - 1;
    s.g.collectives[static_cast<std::size_t>(index)].desc = CollectiveDesc{CollectiveKind::kAllToAllV, 0, {0, 1e6, 0, 0}};
    s.nic_busy.push_back(100 * us);
    s.pcie_busy.push_back(100 * us);
  };
  // The host waits for each rank's last transfer, so iteration 1's transfers start after
  // iteration 0's (concurrent ops queue behind nothing).
  auto wait_last = [](Scenario& s) {
    for (auto& r : s.g.ranks) r.ops.back().host_waits = true;
  };
  auto durations = [](const Timeline& t) {
    std::vector<double> d;
    for (const auto& e : t.events)
      if (e.lane != Lane::kHost && e.iteration == 0) d.push_back(e.end - e.start);
    return d;
  };
  // Ranks 0 and 1 send to each other at once: rank 0's outgoing side carries one, its
  // incoming side the other (and the same on rank 1), so neither slows: 100 us each.
  Scenario both_ways(2);
  send(both_ways, 0, 0, 1);
  send(both_ways, 1, 1, 0);
  wait_last(both_ways);
  for (double d : durations(both_ways.run(host(0, 0), 2))) CHECK(d == Approx(100 * us));
  // Rank 0 sends to ranks 1 and 2 at once: both leave through rank 0's outgoing side, so each
  // gets half of it: 200 us each.
  Scenario fan_out(3);
  send(fan_out, 0, 0, 1);
  send(fan_out, 1, 0, 2);
  wait_last(fan_out);
  for (double d : durations(fan_out.run(host(0, 0), 2))) CHECK(d == Approx(200 * us));
}

TEST_CASE("a simulation reusing an earlier timeline's storage gives the same timeline", "[simulator][contention]") {
  // The sharding search hands each simulation the previous one's timeline to reuse its
  // buffers; the result must not depend on what that timeline held. A contended case (the
  // copy and collective above) and an uncontended one (the same without the PCIe traffic).
  for (const double pcie : {100 * us, 0.0}) {
    INFO("pcie_busy " << pcie);
    Scenario s(2);
    s.copy(0, "h2d", 100 * us);
    s.collective(0, "a2a", 0, 100 * us);
    s.collective(1, "a2a", 0, 100 * us);
    s.kernel(1, "k", 30 * us);
    s.pcie_busy = {pcie};
    const Timeline fresh = s.run(host(1 * us, 2 * us), 2);
    SimulationOptions opt;
    opt.iterations = 2;
    SimulationOptions longer;
    longer.iterations = 3;
    // Storage of a larger timeline (3 iterations, other host costs), then of a result
    // equal to the expected one.
    Timeline reused = simulate(s.t, host(0, 0), opt, simulate(s.t, host(0, 0), longer));
    reused = simulate(s.t, host(1 * us, 2 * us), opt, std::move(reused));
    reused = simulate(s.t, host(1 * us, 2 * us), opt, std::move(reused));
    CHECK(reused.iteration_time == fresh.iteration_time);
    CHECK(reused.window_start == fresh.window_start);
    CHECK(reused.window_end == fresh.window_end);
    CHECK(reused.iteration_end == fresh.iteration_end);
    REQUIRE(reused.events.size() == fresh.events.size());
    for (std::size_t i = 0; i < fresh.events.size(); ++i) {
      const TimelineEvent& a = reused.events[i];
      const TimelineEvent& b = fresh.events[i];
      INFO("event " << i);
      CHECK((a.rank == b.rank && a.iteration == b.iteration && a.op == b.op && a.kernel == b.kernel && a.lane == b.lane));
      CHECK((a.start == b.start && a.end == b.end && a.launch == b.launch && a.host_delay == b.host_delay));
      CHECK((a.binding == b.binding && a.cause == b.cause));
    }
  }
}

TEST_CASE("NCCL kernels hold SMs: the compute beside them runs on the others, hand-worked", "[simulator][sm_sharing]") {
  Scenario s(1);
  const int a = s.kernel(0, "A", 10 * us);
  const int c = s.collective(0, "bucket", 0, 20 * us, {a});
  const int b = s.kernel(0, "B", 30 * us);
  const int after = s.kernel(0, "C", 5 * us, {c});
  s.sms = {16};
  s.sm_count = 132;
  const Timeline t = s.run(host(0, 0), 2, false);
  // A 0-10 us; the bucket's all-reduce 10-30 us on its stream; B from 10 us overlaps it for
  // 20 us with 16 of 132 SMs held: 20 x 16 / 116 = 2.7586 us longer; C after both.
  const double extra = 20 * us * 16 / 116;
  CHECK(s.t.stretch(0, static_cast<std::size_t>(b)) == Approx((30 * us + extra) / (30 * us)));
  CHECK(s.t.stretch(0, static_cast<std::size_t>(a)) == 1.0);  // before the collective
  CHECK(s.t.stretch(0, static_cast<std::size_t>(after)) == 1.0);  // after it
  const auto first_b = std::find_if(t.events.begin(), t.events.end(),
                                    [&](const auto& e) { return e.iteration == 0 && e.op == b && e.lane == Lane::kCompute; });
  REQUIRE(first_b != t.events.end());
  CHECK(first_b->end - first_b->start == Approx(30 * us + extra));
  // Rules: no SMs held, no stretch; a kernel never gets shorter.
  Scenario plain(1);
  const int pa = plain.kernel(0, "A", 10 * us);
  plain.collective(0, "bucket", 0, 20 * us, {pa});
  plain.kernel(0, "B", 30 * us);
  plain.sms = {0};
  plain.sm_count = 132;
  (void)plain.run(host(0, 0), 2, false);
  for (std::size_t i = 0; i < plain.g.ranks[0].ops.size(); ++i) CHECK(plain.t.stretch(0, i) == 1.0);
  for (const auto& row : s.t.kernel_stretch)
    for (double f : row) CHECK(f >= 1.0);
}

TEST_CASE("NCCL kernels hold SMs: not counted again beside a userbuffers GEMM, nor for replayed kernels", "[simulator][sm_sharing]") {
  Scenario s(1);
  const int a = s.kernel(0, "A", 10 * us);
  const int c = s.collective(0, "tp_reduce", 0, 20 * us, {a});
  const int b = s.kernel(0, "B", 30 * us);
  s.g.ranks[0].ops[static_cast<std::size_t>(b)].sm_sharing_op = c;  // Annotator counts this pair
  s.g.ranks[0].ops[static_cast<std::size_t>(b)].sm_sharing_sms = 16;
  s.sms = {16};
  s.sm_count = 132;
  (void)s.run(host(0, 0), 2, false);
  for (std::size_t i = 0; i < s.g.ranks[0].ops.size(); ++i) CHECK(s.t.stretch(0, i) == 1.0);
  Scenario replay(1);
  const int ra = replay.kernel(0, "A", 10 * us);
  replay.collective(0, "bucket", 0, 20 * us, {ra});
  const int rb = replay.kernel(0, "B", 30 * us);
  replay.g.ranks[0].ops[static_cast<std::size_t>(rb)].kernels = {MeasuredKernelDesc{"gemm", 30 * us}};
  replay.sms = {16};
  replay.sm_count = 132;
  (void)replay.run(host(0, 0), 2, false);
  for (std::size_t i = 0; i < replay.g.ranks[0].ops.size(); ++i) CHECK(replay.t.stretch(0, i) == 1.0);
}

TEST_CASE("timeline assembly: iteration ends per rank stay ordered, the period is the last window", "[simulator]") {
  // Rank 0 ends iterations 0, 1, 2 at 10, 25, 40 us; rank 1's last event of iteration 1
  // ends at 20 us but a host that ran ahead ended iteration 0 at 30 us: its iteration 1
  // counts as ending at 30 us. Window: max over ranks of iteration 1's end (30) to max of
  // iteration 2's end (45): 15 us.
  auto ev = [](int rank, int iteration, double end) {
    TimelineEvent e;
    e.rank = rank;
    e.iteration = iteration;
    e.end = end * us;
    return e;
  };
  std::vector<TimelineEvent> events{ev(0, 0, 10), ev(0, 1, 25), ev(0, 2, 40), ev(1, 0, 30), ev(1, 1, 20), ev(1, 2, 45),
                                    ev(0, 2, 38)};
  const Timeline t = sim::assemble_timeline(events, 2, 3, {});
  REQUIRE(t.iteration_end.size() == 2);
  CHECK(t.iteration_end[0] == std::vector<Seconds>{10 * us, 25 * us, 40 * us});
  CHECK(t.iteration_end[1] == std::vector<Seconds>{30 * us, 30 * us, 45 * us});
  CHECK(t.window_start == Approx(30 * us));
  CHECK(t.window_end == Approx(45 * us));
  CHECK(t.iteration_time == Approx(15 * us));
  CHECK(t.events.size() == events.size());
}

TEST_CASE("a full launch queue blocks the host until the stream's oldest pending launch ends", "[simulator][launch_queue]") {
  // 8 kernels of 100 us, host 1 us per op + 1 us per launch, a queue of 3 launches.
  Scenario s(1);
  for (int i = 0; i < 8; ++i) s.kernel(0, "k" + std::to_string(i), 100 * us);
  HostSpec h = host(1 * us, 1 * us);
  h.launch_queue_depth = 3;
  const Timeline t = s.run(h, 2);
  auto host_start = [&](int iteration, int op) {
    for (const auto& e : t.events)
      if (e.iteration == iteration && e.op == op && e.lane == Lane::kHost) return e.start;
    return -1.0;
  };
  // k0 launched at 2 us runs 2-102, k1 102-202, k2 202-302: three pending. k3's launch waits
  // for k0 to end (102 us), k4's for k1 (202 us), ...: op n (n >= 3) starts at the end of
  // kernel n - 3, i.e. 2 + 100 (n - 2) us.
  CHECK(host_start(0, 2) == Approx(4 * us));
  CHECK(host_start(0, 3) == Approx(102 * us));
  CHECK(host_start(0, 7) == Approx(502 * us));
  // Across iterations the queue carries on: iteration 1's op 0 waits for kernel 5 (602 us).
  CHECK(host_start(1, 0) == Approx(602 * us));
  // The GPU never idles: the period is the kernels' 800 us.
  CHECK(t.iteration_time == Approx(800 * us));
  // Unlimited (0): the host runs ahead, op 7 at 14 us.
  h.launch_queue_depth = 0;
  const Timeline u = s.run(h, 2);
  for (const auto& e : u.events)
    if (e.iteration == 0 && e.op == 7 && e.lane == Lane::kHost) CHECK(e.start == Approx(14 * us));
  CHECK(u.iteration_time == Approx(800 * us));
}

TEST_CASE("prev_deps: an input prepared one iteration ahead overlaps the compute that reads it", "[simulator][pipeline]") {
  // A 100 us copy and a 50 us kernel that reads it, the host waiting for the kernel (as a
  // loss.item() does); host 1 us per op and per launch.
  Scenario s(1);
  const int copy = s.copy(0, "batch", 100 * us);
  const int k = s.kernel(0, "compute", 50 * us);
  s.g.ranks[0].ops[static_cast<std::size_t>(k)].deps = {copy};
  s.g.ranks[0].ops[static_cast<std::size_t>(k)].host_waits = true;
  const Timeline plain = s.run(host(1 * us, 1 * us), 3);
  // Plain loop: iteration 1's copy is launched 2 us after kernel 0 ends (152 -> 154),
  // runs 154-254, then the kernel 254-304: 152 us per iteration.
  CHECK(plain.iteration_time == Approx(152 * us));
  s.g.ranks[0].ops[static_cast<std::size_t>(k)].deps.clear();
  s.g.ranks[0].ops[static_cast<std::size_t>(k)].prev_deps = {copy};
  const Timeline piped = s.run(host(1 * us, 1 * us), 3);
  // Pipelined: iteration 0's kernel reads nothing (the pipeline's fill, 4-54 us); copy 1
  // is launched at 56 and runs 102-202, kernel 1 waits for copy 0 (102-152), the host for
  // kernel 1; copy 2 runs 202-302. The copies set the pace, 100 us per iteration, with the
  // kernel hidden under the next copy.
  CHECK(piped.iteration_time == Approx(100 * us));
  CHECK(piped.iteration_end[0][0] == Approx(102 * us));  // copy 0: 2-102 (kernel 0: 4-54)
  CHECK(piped.iteration_end[0][1] == Approx(202 * us));  // copy 1: 102-202; kernel 1 after copy 0: 102-152
}

TEST_CASE("CUDA graphs: captured ops pay neither op nor launch costs, the graph launch pays once", "[simulator][stack]") {
  // Host-bound on purpose: three 1 us kernels, op 100 us, launch 20 us, graph launch 30 us.
  auto build = [](bool graphs) {
    Scenario s(1);
    if (graphs) {
      auto& ops = s.g.ranks[0].ops;
      ops.push_back(Op{"cuda_graph.launch", Phase::kForward, Stream::kCompute, {}, {}, {}, false});
      ops.back().graph_launch = true;
      s.durations[0].push_back({});
    }
    int prev = -1;
    for (const char* n : {"A", "B", "C"}) {
      prev = s.kernel(0, n, 1 * us, prev >= 0 ? std::vector<int>{prev} : std::vector<int>{});
      s.g.ranks[0].ops.back().captured = graphs;
    }
    return s;
  };
  HostSpec h = host(100 * us, 20 * us);
  h.graph_launch_overhead = 30 * us;
  Scenario eager = build(false);
  // Eager: each op 100 + 20 us of host time: 360 us a period.
  CHECK(eager.run(h).iteration_time == Approx(360 * us));
  Scenario graphs = build(true);
  // Graph: the host pays 30 us per iteration; the GPU's 3 us of work follows each launch.
  CHECK(graphs.run(h).iteration_time == Approx(30 * us));
}

TEST_CASE("host costs that scale with the job: per table and per sample, captured or not", "[simulator][stack]") {
  Scenario s(1);
  s.kernel(0, "lookup", 1 * us);
  s.g.ranks[0].ops.back().host_tables = 26;
  s.kernel(0, "batch", 1 * us, {0});
  s.g.ranks[0].ops.back().host_samples = 1000;
  HostSpec h = host(10 * us, 0);
  h.table_overhead = 2 * us;
  h.sample_overhead = 0.05 * us;
  // 2 x 10 us per op + 26 x 2 us + 1000 x 0.05 us = 20 + 52 + 50 = 122 us a period.
  CHECK(s.run(h).iteration_time == Approx(122 * us));
  // Captured in a graph the per-op 10 us go, the framework's per-table and per-sample work stays.
  for (auto& op : s.g.ranks[0].ops) op.captured = true;
  CHECK(s.run(h).iteration_time == Approx(102 * us));
}

}  // namespace perfcast_test_model_simulator_test
