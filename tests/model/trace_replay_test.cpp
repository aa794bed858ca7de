// Replay of measured traces through the simulator: hand-worked results on the fixtures
// (tests/data/kineto_*.json, event lists in kineto_trace_test.cpp) and replay errors on
// the real traces in data/ (public traces kept in the repository; data/README.md).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/traces/kineto_trace.hpp"
#include "model/traces/trace_replay.hpp"
#include "model/traces/trace_stats.hpp"
#include "core/json_reader.hpp"
#include "topology/system_spec.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_trace_replay_test {

using namespace perfcast;

namespace {

constexpr double us = 1e-6;
constexpr double ms = 1e-3;
const std::string kData = std::string(PERFCAST_SOURCE_DIR) + "/tests/data/";
const std::string kRepoData = std::string(PERFCAST_SOURCE_DIR) + "/data/";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool repo_data(const std::string& rel) {
  REQUIRE(std::filesystem::exists(kRepoData + rel));
  return true;
}

}  // namespace

TEST_CASE("replay graph of one rank: ops, host time, syncs, lanes", "[replay]") {
  const auto traces = load_kineto_traces({kData + "kineto_two_steps.json"});
  const auto rg = build_replay_graph(traces);
  REQUIRE(rg->graph.ranks.size() == 1);
  const auto& ops = rg->graph.ranks[0].ops;
  const auto& timing = rg->timed.ops[0];
  const auto& info = rg->ranks[0];
  // marker, gemm, relu, DtoH, stream sync, marker, mul, HtoD, device sync, end marker.
  REQUIRE(ops.size() == 10);
  CHECK(info.step_markers == std::vector<int>{0, 5, 9});
  CHECK(ops[1].name == "aten::linear");
  CHECK(std::get<MeasuredKernelDesc>(ops[1].kernels[0]).name == "gemm_kernel");
  CHECK(timing[1].kernels[0].time == Approx(30 * us));
  // Host time: from the previous launch returning to this launch returning.
  CHECK(*timing[0].host_time == 0);
  CHECK(*timing[1].host_time == Approx(20 * us));  // step start 0 -> launch returns at 20
  CHECK(*timing[2].host_time == Approx(26 * us));  // 20 -> 46
  // The copy to pageable memory blocks the host: its host time ends where the call starts.
  CHECK(ops[3].host_waits);
  CHECK(*timing[3].host_time == Approx(16 * us));  // 46 -> 62
  // The copy ended at 65 (measured); the call's 7 us after that and the gap up to the sync
  // count as host time, the wait itself does not.
  CHECK(ops[4].name == "cudaStreamSynchronize");
  CHECK(ops[4].host_waits);
  CHECK(ops[4].deps == std::vector<int>{3});
  CHECK(*timing[4].host_time == Approx(9 * us));   // 65 -> 74
  CHECK(*timing[5].host_time == Approx(26 * us));  // 74 -> step 2 at 100
  CHECK(ops[7].stream == Stream::kCopy);           // stream 9 holds only a memcpy
  CHECK(ops[6].stream == Stream::kCompute);
  CHECK(ops[8].name == "cudaDeviceSynchronize");
  CHECK(ops[8].deps == std::vector<int>{6, 7});    // every lane's last op
  CHECK(*timing[9].host_time == Approx(20 * us));  // 140 -> step end 160
  CHECK(info.host_syncs == 3);
  CHECK(info.blocked == Approx(3 * us));           // only the DtoH copy waited (62 -> 65)
  CHECK(info.launch_call_mean == Approx(4 * us));  // (5 + 4 + 4 + 3) / 4
}

TEST_CASE("replay of one rank: hand-worked step times", "[replay]") {
  // Simulated host: launches return at 20 and 46; gemm [20,50), relu [50,60); the DtoH
  // copy is launched at 62, runs [62,64) and the host resumes at 64 (measured: 65, the
  // copy started 1 us after its launch); +9 -> the sync at 73; +26 -> step 2 starts at 99.
  // Step 2: +11 -> 110, +14 -> 124, +15 -> 139 (device sync, GPU idle since 130), +20 -> 159.
  const ReplayResult r = replay_traces(load_kineto_traces({kData + "kineto_two_steps.json"}));
  REQUIRE(r.ranks.size() == 1);
  REQUIRE(r.ranks[0].steps.size() == 2);
  CHECK(r.ranks[0].steps[0].step == 1);
  CHECK(r.ranks[0].steps[0].measured == Approx(100 * us));
  CHECK(r.ranks[0].steps[0].simulated == Approx(99 * us));
  CHECK(r.ranks[0].steps[0].error() == Approx(-0.01));
  CHECK(r.ranks[0].steps[1].measured == Approx(60 * us));
  CHECK(r.ranks[0].steps[1].simulated == Approx(60 * us));
  CHECK(r.ranks[0].measured == Approx(80 * us));
  CHECK(r.ranks[0].simulated == Approx(79.5 * us));

  // Every start here is explained by launch, stream and rules: inference adds nothing.
  ReplayOptions infer;
  infer.infer_waits = true;
  const ReplayResult ri = replay_traces(load_kineto_traces({kData + "kineto_two_steps.json"}), infer);
  CHECK(ri.replay->ranks[0].inferred == 0);
  CHECK(ri.ranks[0].steps[0].simulated == Approx(99 * us));

  // Mean host model: 8 non-marker ops share their 106 us of host time equally.
  ReplayOptions mean;
  mean.host = ReplayHostModel::kMean;
  const auto rg = build_replay_graph(load_kineto_traces({kData + "kineto_two_steps.json"}), mean);
  CHECK(*rg->timed.ops[0][1].host_time == Approx((20 + 26 + 16 + 9 + 11 + 14 + 15) * us / 7));
}

TEST_CASE("replay of two ranks: collective own duration, comm waits for compute, joins", "[replay]") {
  const auto traces = load_kineto_traces({kData + "kineto_rank1.json", kData + "kineto_rank0.json"});
  const auto rg = build_replay_graph(traces);
  REQUIRE(rg->ranks.size() == 2);
  CHECK(rg->ranks[0].rank == 0);  // ordered by distributedInfo.rank, not input order
  CHECK(rg->ranks[1].start_offset == Approx(20 * us));
  REQUIRE(rg->graph.collectives.size() == 1);
  CHECK(rg->graph.collectives[0].desc.kind == CollectiveKind::kAllReduce);
  CHECK(rg->graph.collectives[0].desc.bytes == 4096);
  CHECK(rg->timed.collectives[0].time == Approx(30 * us));  // min(80, 30): rank 0 waited 50 us for rank 1
  const auto& ops = rg->graph.ranks[0].ops;
  // marker, gemm, all-reduce, add, DtoH, end marker.
  REQUIRE(ops.size() == 6);
  CHECK(ops[2].collective == 0);
  CHECK(ops[2].stream == Stream::kComm);
  CHECK(ops[2].deps == std::vector<int>{1});  // the collective waits for the compute front
  CHECK(ops[3].deps == std::vector<int>{2});  // c10d::wait's cudaStreamWaitEvent joins
  CHECK(rg->ranks[0].joins == 1);
  CHECK(rg->ranks[0].collectives == 1);

  // Rank 0 reaches the collective at 57 (gemm [17,57)), rank 1 at 107 (offset 20, gemm
  // launched at 37, 70 us): it runs [107,137) on both. add [137,147), DtoH [147,148), the
  // host resumes at 148 and spends 51 us up to the step end: 199 and 199 - 20 = 179.
  const ReplayResult r = replay_traces(traces);
  REQUIRE(r.ranks.size() == 2);
  CHECK(r.ranks[0].measured == Approx(200 * us));
  CHECK(r.ranks[0].simulated == Approx(199 * us));
  CHECK(r.ranks[1].measured == Approx(180 * us));
  CHECK(r.ranks[1].simulated == Approx(179 * us));
  CHECK(r.max_abs_error == Approx(1.0 / 180));
  CHECK(r.geomean_abs_error == Approx(std::sqrt(0.005 * (1.0 / 180))));
}

TEST_CASE("replay rejects traces that do not belong together", "[replay]") {
  const std::string r0 = read_text(kData + "kineto_rank0.json");
  const std::string r1 = read_text(kData + "kineto_rank1.json");
  std::vector<KinetoTrace> dup{parse_kineto_trace(r0, "a.json"), parse_kineto_trace(r0, "b.json")};
  CHECK_THROWS_WITH(build_replay_graph(dup), "b.json: /distributedInfo/rank: rank 0 is also the rank of a.json; give one "
                                             "trace per rank");

  std::string no_nccl = r1;
  no_nccl.replace(no_nccl.find("ncclKernel_AllReduce"), 20, "notnccl_AllReduce___");
  std::vector<KinetoTrace> mismatch{parse_kineto_trace(r0, "r0.json"), parse_kineto_trace(no_nccl, "r1.json")};
  CHECK_THROWS_WITH(build_replay_graph(mismatch), Catch::Contains("r1.json: /traceEvents: 0 NCCL kernels in steps 5..5"));

  std::string other_step = r1;
  other_step.replace(other_step.find("ProfilerStep#5"), 14, "ProfilerStep#6");
  std::vector<KinetoTrace> disjoint{parse_kineto_trace(r0, "r0.json"), parse_kineto_trace(other_step, "r1.json")};
  CHECK_THROWS_WITH(build_replay_graph(disjoint), "r1.json: /traceEvents: the traces share no ProfilerStep#N");
  CHECK_THROWS_AS(build_replay_graph({}), ConfigError);
}

TEST_CASE("replay of the 8-rank PARAM DLRM step (V100)", "[replay][data]") {
  if (!repo_data("param-dlrm-v100-8rank/dlrm_kineto.tar.gz")) return;
  const auto traces = load_kineto_traces({kRepoData + "param-dlrm-v100-8rank/dlrm_kineto.tar.gz"});
  REQUIRE(traces.size() == 8);
  const auto stats = compute_trace_stats(traces);
  // Step 10 spans 12.5-19.9 ms per rank (data README); the ranks share one clock.
  CHECK(stats[1].steps[0].wall == Approx(19.901 * ms));
  CHECK(stats[7].steps[0].wall == Approx(12.509 * ms));
  for (const auto& s : stats) {
    CHECK(std::fabs(s.clock_offset) < 5 * us);
    CHECK(s.aligned_collectives == 8);
  }
  const ReplayResult r = replay_traces(traces);
  REQUIRE(r.ranks.size() == 8);
  for (const auto& rr : r.ranks) {
    INFO("rank " << rr.rank << " measured " << rr.measured << " simulated " << rr.simulated);
    CHECK(std::fabs(rr.error()) < 0.01);  // measured 0.20-0.38% when written
  }
  CHECK(r.replay->graph.collectives.size() == 8);
}

TEST_CASE("replay of the A100 DLRM iterations (HTA, rank 3)", "[replay][data]") {
  if (!repo_data("hta-a100-dlrm-rank3/control.json.gz")) return;
  const auto traces = load_kineto_traces({kRepoData + "hta-a100-dlrm-rank3/control.json.gz"});
  REQUIRE(traces.size() == 1);
  const auto stats = compute_trace_stats(traces);
  REQUIRE(stats[0].steps.size() == 6);
  CHECK(stats[0].steps[0].step == 1009);
  CHECK(stats[0].steps[0].wall == Approx(75.516 * ms));
  int nccl = 0;
  for (const auto& s : stats[0].steps) nccl += s.nccl_kernels;
  CHECK(nccl == 60);

  // Rules only, the side stream's kernels start while a long compute kernel holds the SMs
  // (contention the simulator does not model): about 6% short when written.
  const ReplayResult r = replay_traces(traces);
  CHECK(r.ranks[0].error() < 0);
  CHECK(r.ranks[0].error() > -0.10);
  ReplayOptions infer;
  infer.infer_waits = true;
  const ReplayResult ri = replay_traces(traces, infer);
  CHECK(std::fabs(ri.ranks[0].error()) < 0.03);  // 1.2% when written
  CHECK(ri.replay->ranks[0].inferred > 0);

  // Predicted kernels (spec-derived, the embedding backward's per-index cost fitted on steps
  // 1009-1011) with the one traced rank's collectives measured: every held-out step within 5%
  // (-2.76%, -2.88%, -1.87% when written; docs/traces.md).
  const SystemSpec a100 = load_system(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/hgx_a100_40gb.json");
  ReplayOptions predicted;
  predicted.kernels = ReplayKernels::kPredicted;
  predicted.system = &a100;
  const ReplayResult rp = replay_traces(traces, predicted);
  CHECK(rp.replay->measured_collectives == 60);  // every NCCL kernel of the 6 steps
  for (const auto& step : rp.ranks[0].steps) {
    INFO("step " << step.step);
    if (step.step >= 1012) CHECK(std::fabs(step.error()) < 0.05);
  }
}

namespace {

/// A GPU-bound one-rank trace as CUDA would record it: per step `kernels` launches of
/// `kernel_us` on one stream; each launch is 1 us of CPU work and a 4 us call, except that
/// a call finds 1024 launches pending (the launch queue) and returns 1 us after the oldest
/// one finishes. `scale` multiplies every kernel's recorded duration afterwards, its start
/// kept (a trace whose kernels ran `scale` times as long, on the same host timeline).
std::string gpu_bound_trace(double kernel_us, int steps, int kernels, double scale) {
  nlohmann::json ev = nlohmann::json::array();
  std::vector<double> kend;
  double t = 1000, gpu_free = 0;
  int corr = 1;
  for (int k = 0; k < steps; ++k) {
    const double step_start = t;
    for (int i = 0; i < kernels; ++i, ++corr) {
      const std::size_t g = kend.size();
      const double call_start = t + 1;
      const double slot_free = g >= 1024 ? kend[g - 1024] + 1 : 0;
      const double call_end = std::max(call_start + 4, slot_free);
      const double start = std::max(call_end + 3, gpu_free);
      kend.push_back(start + kernel_us);
      gpu_free = kend.back();
      ev.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "aten::mul"}, {"pid", 100}, {"tid", 1}, {"ts", t},
                    {"dur", call_end - t + 0.5}, {"args", {{"External id", corr}}}});
      ev.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 100}, {"tid", 1},
                    {"ts", call_start}, {"dur", call_end - call_start}, {"args", {{"correlation", corr}, {"cbid", 211}}}});
      ev.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "mul_kernel"}, {"pid", 0}, {"tid", 7}, {"ts", start},
                    {"dur", kernel_us * scale},
                    {"args", {{"correlation", corr}, {"stream", 7}, {"device", 0}, {"grid", {1, 1, 1}}, {"block", {128, 1, 1}}}}});
      t = call_end + 1;
    }
    ev.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#" + std::to_string(k + 1)}, {"pid", 100},
                  {"tid", 1}, {"ts", step_start}, {"dur", t - step_start}});
  }
  const nlohmann::json trace = {{"schemaVersion", 1},
                                {"deviceProperties", {{{"id", 0}, {"name", "Test GPU"}, {"totalGlobalMem", 34079899648LL},
                                                       {"computeMajor", 9}, {"computeMinor", 0}, {"numSms", 132}}}},
                                {"traceEvents", ev}};
  const auto path = std::filesystem::temp_directory_path() /
                    ("perfcast_gpu_bound_" + std::to_string(static_cast<int>(scale * 100)) + ".json");
  std::ofstream(path) << trace.dump();
  return path.string();
}

}  // namespace

TEST_CASE("a GPU-bound trace: launch-queue waits are not host time, so faster kernels shorten the step", "[replay][launch_queue]") {
  // 2500 kernels of 20 us per step: 50 ms of GPU work, 15 ms of host work (6 us per launch).
  const std::string measured = gpu_bound_trace(20, 3, 2500, 1.0);
  const ReplayResult r = replay_traces(load_kineto_traces({measured}));
  REQUIRE(r.ranks.size() == 1);
  const auto& info = r.replay->ranks[0];
  // From launch 1025 on (6,476 calls) each call waits for a kernel to finish: about 20 us
  // less the 6 us of host work, some 90 ms in all, while the host's own work is 45 ms.
  CHECK(info.queue_blocked_calls > 5500);
  CHECK(info.queue_blocked > 75 * ms);
  CHECK(info.host_time < 3 * 17 * ms);
  // The middle step, GPU-bound: simulated as measured (50 ms), within 1%.
  CHECK(r.ranks[0].steps[1].measured == Approx(50 * ms).epsilon(0.01));
  CHECK(r.ranks[0].steps[1].simulated == Approx(r.ranks[0].steps[1].measured).epsilon(0.01));

  // Every kernel halved on the same host timeline: the step follows the GPU (25 ms), where
  // host time that still held the queue waits would have kept it at 50 ms.
  const ReplayResult h = replay_traces(load_kineto_traces({gpu_bound_trace(20, 3, 2500, 0.5)}));
  CHECK(h.ranks[0].steps[1].simulated == Approx(25 * ms).epsilon(0.02));
  CHECK(h.ranks[0].steps[1].simulated < 0.6 * r.ranks[0].steps[1].simulated);
}

}  // namespace perfcast_test_model_trace_replay_test
