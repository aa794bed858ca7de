// Kineto reader and trace statistics on hand-written fixtures in the real format
// (tests/data/kineto_*.json), with every expected value worked out from the event list:
//
// kineto_two_steps.json (times in us after ts 1000; one thread, device 0):
//   ProfilerStep#1 [0, 100); ProfilerStep#2 [100, 160)
//   aten::linear [10,30)  cudaLaunchKernel [15,20) corr 1 -> gemm_kernel   stream 7 [22,52)
//   aten::relu   [40,50)  cudaLaunchKernel [42,46) corr 2 -> relu_kernel   stream 7 [52,62)
//   aten::to     [60,80)  cudaMemcpyAsync  [62,72) corr 3 -> DtoH pageable stream 7 [63,65)
//                         cudaStreamSynchronize [74,75)
//   aten::mul    [105,115) cudaLaunchKernel [107,111) corr 5 -> mul_kernel stream 7 [112,132)
//   aten::copy_  [120,130) cudaMemcpyAsync  [122,125) corr 6 -> HtoD pinned stream 9 [126,132)
//                         cudaDeviceSynchronize [140,143)
// kineto_rank0.json / kineto_rank1.json: one all-reduce between two ranks; rank 1's clock
// reads 1000 us more than rank 0's, and rank 1 starts its step 20 us later (common clock).
//   rank 0: gemm_a [18,58), NCCL [58,138) (waits for rank 1), add [138,148), DtoH [148,149)
//   rank 1: gemm_a [38,108), NCCL [108,138), add [138,148), DtoH [148,149)
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "model/traces/kineto_trace.hpp"
#include "model/traces/trace_input.hpp"
#include "model/traces/trace_stats.hpp"
#include "core/json_reader.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_kineto_trace_test {

using namespace perfcast;

namespace {

constexpr double us = 1e-6;
const std::string kData = std::string(PERFCAST_SOURCE_DIR) + "/tests/data/";

const GpuActivity& by_name(const KinetoTrace& t, const std::string& name) {
  for (const auto& a : t.gpu)
    if (a.name == name) return a;
  FAIL("no activity " << name);
  return t.gpu.front();
}

/// A fresh temporary folder, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() / ("perfcast_kineto_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

std::string kineto_error(const std::string& text) {
  try {
    (void)parse_kineto_trace(text, "t.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("kineto reader: steps, runtime calls, kernels and op shapes", "[kineto]") {
  const auto traces = load_kineto_traces({kData + "kineto_two_steps.json"});
  REQUIRE(traces.size() == 1);
  const KinetoTrace& t = traces[0];
  CHECK(t.origin_us == 1000);
  CHECK(t.rank == 0);
  CHECK(t.world_size == 1);
  CHECK(t.backend == "nccl");
  CHECK(t.device == 0);
  CHECK(t.device_name() == "Test GPU");
  REQUIRE(t.steps.size() == 2);
  CHECK(t.steps[0].number == 1);
  CHECK(t.steps[1].number == 2);
  CHECK(t.steps[1].start == Approx(100 * us));
  CHECK(t.step_wall(0) == Approx(100 * us));  // start-to-start
  CHECK(t.step_wall(1) == Approx(60 * us));   // the last step's span
  CHECK(t.step_wall_is_period(0));
  CHECK_FALSE(t.step_wall_is_period(1));

  // 5 GPU activities (the "Trace" span, flows and metadata are skipped).
  REQUIRE(t.gpu.size() == 5);
  const GpuActivity& gemm = by_name(t, "gemm_kernel");
  CHECK(gemm.stream == 7);
  CHECK(gemm.correlation == 1);
  CHECK(gemm.start == Approx(22 * us));
  CHECK(gemm.duration == Approx(30 * us));
  CHECK_FALSE(gemm.is_nccl());
  const GpuActivity& h2d = by_name(t, "Memcpy HtoD (Pinned -> Device)");
  CHECK(h2d.kind == GpuActivityKind::kMemcpy);
  CHECK(h2d.bytes == 832);
  CHECK(h2d.stream == 9);

  // Kernel -> launch (by correlation) -> innermost cpu_op with its shapes.
  REQUIRE(gemm.launch >= 0);
  const RuntimeCall& launch = t.runtime[static_cast<std::size_t>(gemm.launch)];
  CHECK(launch.name == "cudaLaunchKernel");
  CHECK(launch.start == Approx(15 * us));
  const int op = t.innermost_cpu_op(gemm.launch);
  REQUIRE(op >= 0);
  const CpuOp& linear = t.ops[static_cast<std::size_t>(op)];
  CHECK(linear.name == "aten::linear");
  REQUIRE(linear.input_dims.size() == 3);
  CHECK(linear.input_dims[0] == std::vector<std::int64_t>{16, 13});
  CHECK(linear.input_dims[1] == std::vector<std::int64_t>{256, 13});
  CHECK(linear.input_types == std::vector<std::string>{"float", "float", "float"});
  // Its parent is the ProfilerStep annotation, which is no cpu_op.
  REQUIRE(linear.parent >= 0);
  CHECK(t.ops[static_cast<std::size_t>(linear.parent)].name == "ProfilerStep#1");
  CHECK(t.top_level_cpu_op(gemm.launch) == op);

  // Steps of activities by their launch time.
  CHECK(t.step_of_activity(static_cast<int>(&gemm - t.gpu.data())) == 0);
  CHECK(t.step_of_activity(static_cast<int>(&h2d - t.gpu.data())) == 1);
}

TEST_CASE("kineto reader: NCCL kernels with collective metadata from annotation or kernel args", "[kineto]") {
  const auto traces = load_kineto_traces({kData + "kineto_rank0.json", kData + "kineto_rank1.json"});
  REQUIRE(traces.size() == 2);
  for (const auto& t : traces) {
    int nccl = 0;
    for (const auto& a : t.gpu) {
      if (!a.is_nccl()) continue;
      ++nccl;
      CHECK(a.collective->kind == CollectiveKind::kAllReduce);
      CHECK(a.collective->bytes == 1024 * 4);  // 1024 floats
    }
    CHECK(nccl == 1);
  }
  // Rank 0 names it from the enclosing "nccl:all_reduce" annotation; rank 1 from the
  // kernel's own args (PyTorch >= 2.1 style).
  CHECK(by_name(traces[0], "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)")
            .collective->name == "all_reduce");
  const auto& c1 = *by_name(traces[1], "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)")
                        .collective;
  CHECK(c1.from_kernel_args);
  CHECK(c1.group_size == 2);
  CHECK(c1.dtype == "Float");
  CHECK(traces[1].rank == 1);
  CHECK(traces[1].device == 1);
}

TEST_CASE("collective kinds from kernel and collective names", "[kineto]") {
  CHECK(trace_collective_kind("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)") == CollectiveKind::kAllReduce);
  CHECK(trace_collective_kind("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)") ==
        CollectiveKind::kAllGather);
  CHECK(trace_collective_kind("ncclKernel_ReduceScatter_RING_SIMPLE_Sum_bf16(x)") == CollectiveKind::kReduceScatter);
  CHECK(trace_collective_kind("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)") == CollectiveKind::kAllToAll);
  CHECK(trace_collective_kind("ncclKernel_Reduce_RING_LL_Sum_float(x)") == CollectiveKind::kReduce);
  CHECK(trace_collective_kind("all_to_all") == CollectiveKind::kAllToAll);
  CHECK(trace_collective_kind("_allgather_base") == CollectiveKind::kAllGather);
  CHECK(trace_collective_kind("reduce_scatter_tensor") == CollectiveKind::kReduceScatter);
  CHECK(trace_collective_kind("broadcast") == CollectiveKind::kBroadcast);
  CHECK_FALSE(trace_collective_kind("gemm_kernel").has_value());
  CHECK(is_nccl_kernel_name("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"));
  CHECK_FALSE(is_nccl_kernel_name("volta_sgemm_128x32_nt"));
  CHECK(trace_dtype_bytes("float") == 4);
  CHECK(trace_dtype_bytes("c10::Half") == 2);
  CHECK(trace_dtype_bytes("long int") == 8);
  CHECK(trace_dtype_bytes("BFloat16") == 2);
  CHECK(trace_dtype_bytes("Scalar") == 0);
}

TEST_CASE("trace stats: wall, GPU busy as a union, NCCL and exposed communication", "[kineto]") {
  const auto stats = compute_trace_stats(load_kineto_traces({kData + "kineto_two_steps.json"}));
  REQUIRE(stats.size() == 1);
  const auto& s = stats[0];
  REQUIRE(s.steps.size() == 2);
  // Step 1: gemm [22,52) + relu [52,62) + DtoH [63,65): busy 42, compute 40, memcpy 2.
  CHECK(s.steps[0].wall == Approx(100 * us));
  CHECK(s.steps[0].wall_is_period);
  CHECK(s.steps[0].gpu_busy == Approx(42 * us));
  CHECK(s.steps[0].compute_busy == Approx(40 * us));
  CHECK(s.steps[0].memcpy_busy == Approx(2 * us));
  CHECK(s.steps[0].kernel_sum == Approx(40 * us));
  CHECK(s.steps[0].kernels == 2);
  CHECK(s.steps[0].memcpys == 1);
  CHECK(s.steps[0].nccl_busy == 0);
  // Step 2: mul [112,132) and HtoD [126,132) overlap: busy 20, not 26.
  CHECK(s.steps[1].wall == Approx(60 * us));
  CHECK_FALSE(s.steps[1].wall_is_period);
  CHECK(s.steps[1].gpu_busy == Approx(20 * us));
  CHECK(s.steps[1].memcpy_busy == Approx(6 * us));
  REQUIRE(s.kernels.size() == 5);
  CHECK(s.kernels[0].name == "gemm_kernel");
  CHECK(s.kernels[0].total == Approx(30 * us));
  CHECK(s.kernels[1].name == "mul_kernel");
  CHECK(s.collectives.empty());

  const auto two = compute_trace_stats(load_kineto_traces({kData + "kineto_rank0.json", kData + "kineto_rank1.json"}));
  REQUIRE(two.size() == 2);
  // Rank 0: gemm 40 + NCCL 80 + add 10 + DtoH 1, no overlap: busy 131, all NCCL time exposed.
  CHECK(two[0].steps[0].wall == Approx(200 * us));
  CHECK(two[0].steps[0].gpu_busy == Approx(131 * us));
  CHECK(two[0].steps[0].compute_busy == Approx(50 * us));
  CHECK(two[0].steps[0].nccl_busy == Approx(80 * us));
  CHECK(two[0].steps[0].exposed_communication == Approx(80 * us));
  CHECK(two[0].steps[0].nccl_kernels == 1);
  REQUIRE(two[0].collectives.size() == 1);
  CHECK(two[0].collectives[0].bytes == 4096);
  // Rank 1: 70 + 30 + 10 + 1; its clock reads 1000 us more (NCCL ends 6138 vs 5138).
  CHECK(two[1].steps[0].wall == Approx(180 * us));
  CHECK(two[1].steps[0].gpu_busy == Approx(111 * us));
  CHECK(two[1].steps[0].nccl_busy == Approx(30 * us));
  CHECK(two[1].clock_offset == Approx(1000 * us));
  CHECK(two[1].aligned_collectives == 1);
}

TEST_CASE("rank alignment on collective ends", "[kineto]") {
  const auto traces = load_kineto_traces({kData + "kineto_rank0.json", kData + "kineto_rank1.json"});
  const RankAlignment a = align_ranks(traces);
  // Rank 1's origin (its step start, ts 6020) is 1020 us after rank 0's (5000); 1000 us
  // of that is clock offset, so its step starts 20 us later on the common clock.
  CHECK(a.clock_offset[1] == Approx(1000 * us));
  CHECK(a.shift[1] == Approx(20 * us));
  CHECK(a.shift[0] == 0);
}

TEST_CASE("trace inputs: gzip and tar.gz (zlib and libarchive)", "[kineto]") {
  TempDir dir;
  const std::string d = dir.path.string();
  const std::string cmd = "cd '" + d + "' && cp '" + kData + "kineto_rank0.json' '" + kData + "kineto_rank1.json' . && " +
                          "gzip -c kineto_rank0.json > single.json.gz && tar -czf ranks.tar.gz kineto_rank1.json " +
                          "kineto_rank0.json && gzip -k kineto_rank1.json && tar -czf gz_members.tar.gz kineto_rank1.json.gz";
  REQUIRE(std::system(cmd.c_str()) == 0);

  const auto gz = load_kineto_traces({d + "/single.json.gz"});
  REQUIRE(gz.size() == 1);
  CHECK(gz[0].rank == 0);
  CHECK(gz[0].gpu.size() == 4);

  const auto tar = load_kineto_traces({d + "/ranks.tar.gz"});
  REQUIRE(tar.size() == 2);
  CHECK(tar[0].file == d + "/ranks.tar.gz:kineto_rank0.json");  // members in name order
  CHECK(tar[0].rank == 0);
  CHECK(tar[1].rank == 1);

  const auto nested = load_kineto_traces({d + "/gz_members.tar.gz"});
  REQUIRE(nested.size() == 1);
  CHECK(nested[0].rank == 1);

  // Damaged inputs are bad input (ConfigError naming the file).
  { std::ofstream(d + "/broken.json.gz") << "\x1f\x8b not really gzip"; }
  CHECK_THROWS_WITH(load_kineto_traces({d + "/broken.json.gz"}), Catch::Contains("broken.json.gz: /: damaged gzip stream"));
  CHECK_THROWS_WITH(load_kineto_traces({d + "/missing.json"}), Catch::Contains("cannot open the file"));
  { std::ofstream(d + "/empty.tar") << ""; }
  CHECK_THROWS_AS(load_kineto_traces({d + "/empty.tar"}), ConfigError);
}

TEST_CASE("trace archives are read in-process: member names run nothing", "[kineto][limits]") {
  // Members named like tar options ran a shell command or truncated a file when the
  // archive was listed and extracted by spawning tar with the member names.
  TempDir dir;
  const std::string d = dir.path.string();
  { std::ofstream(d + "/victim") << "keep"; }
  const std::string py =
      "import io, sys, tarfile\n"
      "d, trace = sys.argv[1], sys.argv[2]\n"
      "body = open(trace, 'rb').read()\n"
      "with tarfile.open(d + '/evil.tar.gz', 'w:gz') as t:\n"
      "    for m in ('--use-compress-program=touch ' + d + '/PWNED .json', '--index-file=' + d + '/victim',\n"
      "              '--to-command=touch ' + d + '/PWNED2;.json', 'rank0.json'):\n"
      "        i = tarfile.TarInfo(m); i.size = len(body); t.addfile(i, io.BytesIO(body))\n";
  { std::ofstream(d + "/make.py") << py; }
  REQUIRE(std::system(("python3 '" + d + "/make.py' '" + d + "' '" + kData + "kineto_rank0.json'").c_str()) == 0);
  const auto traces = load_kineto_traces({d + "/evil.tar.gz"});
  REQUIRE(traces.size() == 3);  // the three *.json members, in name order
  CHECK(traces[0].file == d + "/evil.tar.gz:--to-command=touch " + d + "/PWNED2;.json");
  CHECK_FALSE(std::filesystem::exists(d + "/PWNED"));
  CHECK_FALSE(std::filesystem::exists(d + "/PWNED2"));
  std::ifstream victim(d + "/victim");
  std::string content;
  victim >> content;
  CHECK(content == "keep");
}

TEST_CASE("kineto reader: integers beyond the limits are errors, not overflow", "[kineto][limits]") {
  const std::string head = R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 0, "dur": 5, "tid": 1, "name": )";
  CHECK(kineto_error(head + R"("ProfilerStep#999999999999999999"}]})") ==
        "t.json: /traceEvents/0/name: step number in \"ProfilerStep#999999999999999999\" is larger than 9007199254740991");
  CHECK(kineto_error(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 0, "dur": 5, "tid": 1e300, "name": "a"}]})") ==
        "t.json: /traceEvents/0/tid: expected an integer within +-9007199254740991, got 1e+300");
  CHECK(kineto_error(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 1e300, "dur": 5, "name": "a"}]})") ==
        "t.json: /traceEvents/0/ts: expected a number within +-1e+18, got 1e+300");
  CHECK(kineto_error(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 0, "dur": 5, "name": "k",
                         "args": {"stream": 18446744073709551615}}]})") ==
        "t.json: /traceEvents/0/args/stream: expected an integer in [-9007199254740991, 9007199254740991], got "
        "18446744073709551615");
  // 2^50 doubles pass the element bound but are 2^53 bytes: the bound is on bytes.
  CHECK_THAT(kineto_error(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 0, "dur": 5,
                         "name": "ncclDevKernel_AllReduce_Sum_f64_RING_LL", "args": {"stream": 7, "device": 0,
                         "Collective name": "allreduce", "In msg nelems": 1125899906842624, "dtype": "Double"}}]})"),
             Catch::StartsWith("t.json: /traceEvents/0/args/In msg nelems: 1.1259e+15 elements of Double are 9.0072e+15 bytes"));
  CHECK(kineto_error(R"({"deviceProperties": [{"id": "zero"}], "traceEvents": []})") ==
        "t.json: /deviceProperties/0/id: expected an integer, got string");
  CHECK(kineto_error(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 0, "dur": 1e400, "name": "a"}]})") ==
        "t.json: /: the number 1e400 is out of the range of a double (largest 1.8e308) (expected a PyTorch profiler trace)");
}

TEST_CASE("kineto reader: bad input names file and JSON pointer", "[kineto]") {
  CHECK(kineto_error("{\"traceEvents\": [") == "t.json: /: invalid JSON at line 1, column 18 (expected a PyTorch profiler trace)");
  CHECK(kineto_error("{\"schemaVersion\": 1}") ==
        "t.json: /traceEvents: not a PyTorch profiler trace: expected an array \"traceEvents\"");
  CHECK(kineto_error("{\"traceEvents\": []}") ==
        "t.json: /traceEvents: no CPU op, runtime call or GPU event: not a PyTorch profiler trace");
  CHECK(kineto_error(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {}}]})") ==
        "t.json: /traceEvents/0/args/stream: missing required key");
  CHECK(kineto_error(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "1", "dur": 2}]})") ==
        "t.json: /traceEvents/0/ts: expected a number, got string");
  CHECK(kineto_error(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": -2}]})") ==
        "t.json: /traceEvents/0/dur: expected a duration >= 0, got -2");
  // A trace without ProfilerStep#N is one step over everything.
  const KinetoTrace t = parse_kineto_trace(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 10, "dur": 5},
      {"ph": "X", "cat": "cpu_op", "name": "b", "ts": 20, "dur": 5}]})",
                                           "t.json");
  REQUIRE(t.steps.size() == 1);
  CHECK(t.steps_synthesized);
  CHECK(t.steps[0].number == -1);
  CHECK(t.steps[0].duration == Approx(15 * us));
}

}  // namespace perfcast_test_model_kineto_trace_test
