// Record processing of the CUPTI tracer on hand-made activity records (no GPU needed).
#include <catch2/catch.hpp>

#include "profiler/activity_records.hpp"
#include "profiler/trace_measurements.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_profiler_activity_records_test {

using namespace perfcast;
using namespace perfcast::profiler;

namespace {

GpuActivity kernel(std::uint32_t corr, const char* name, std::uint64_t start, std::uint64_t end) {
  GpuActivity a;
  a.kind = GpuOpKind::kKernel;
  a.correlation_id = corr;
  a.name = name;
  a.start_ns = start;
  a.end_ns = end;
  return a;
}

ApiCall launch(std::uint32_t corr, std::uint64_t start, std::uint64_t end, const char* fn = "cudaLaunchKernel") {
  return ApiCall{corr, fn, 0, start, end, 1};
}

}  // namespace

TEST_CASE("correlate joins out-of-order kernel and runtime records by correlation id", "[profiler][cupti]") {
  ActivityBatch b;
  // GPU records arrive out of time order, runtime records in another order.
  b.gpu.push_back(kernel(3, "k_c", 5000, 6000));
  b.gpu.push_back(kernel(1, "k_a", 1000, 2000));
  b.gpu.push_back(kernel(2, "k_b", 3000, 4500));
  b.api.push_back(launch(2, 2000, 2004));
  b.api.push_back(launch(3, 2100, 2110));
  b.api.push_back(launch(1, 500, 503));
  const auto r = correlate(b);
  REQUIRE(r.ops.size() == 3);
  CHECK(r.ops[0].gpu.name == "k_a");
  CHECK(r.ops[1].gpu.name == "k_b");
  CHECK(r.ops[2].gpu.name == "k_c");
  REQUIRE(r.ops[1].api);
  CHECK(r.ops[1].launch_ns() == 4);
  CHECK(r.ops[1].duration_ns() == 1500);
  CHECK(r.ops[0].launch_to_start_ns() == 500);
  CHECK(r.unmatched_gpu == 0);
  CHECK(r.api_without_gpu == 0);
}

TEST_CASE("correlate counts dropped, unmatched and invalid records", "[profiler][cupti]") {
  ActivityBatch b;
  b.dropped_records = 7;
  b.gpu.push_back(kernel(1, "k", 1000, 2000));
  b.gpu.push_back(kernel(2, "k", 3000, 2500));  // end before start: invalid
  b.gpu.push_back(kernel(0, "k", 0, 10));       // zero timestamp: invalid
  b.gpu.push_back(kernel(9, "k", 4000, 4100));  // its runtime record was dropped
  b.api.push_back(launch(1, 900, 910));
  b.api.push_back(launch(5, 950, 960));                        // its kernel record was dropped
  b.api.push_back(launch(6, 970, 980, "cudaStreamSynchronize"));  // not a launch
  b.api.push_back(launch(1, 0, 1));                            // duplicate id: first kept
  const auto r = correlate(b);
  CHECK(r.ops.size() == 2);
  CHECK(r.invalid_records == 2);
  CHECK(r.unmatched_gpu == 1);
  CHECK(r.api_without_gpu == 1);
  CHECK(r.dropped_records == 7);
  REQUIRE(r.ops[0].api);
  CHECK(r.ops[0].api->start_ns == 900);
  CHECK_FALSE(r.ops[1].api);
  CHECK(r.ops[1].launch_ns() == 0);
}

TEST_CASE("launch cost statistics per runtime function", "[profiler][cupti]") {
  std::vector<ApiCall> api;
  for (std::uint64_t d : {2, 4, 6, 8, 100}) api.push_back(launch(1, 1000, 1000 + d));
  api.push_back(launch(2, 0, 3000, "cudaMemcpyAsync"));
  api.push_back(launch(3, 0, 50, "cudaDeviceSynchronize"));  // ignored
  api.push_back(launch(4, 10, 5, "cudaLaunchKernel"));       // end < start: ignored
  const auto s = launch_cost_stats(api);
  REQUIRE(s.size() == 2);
  CHECK(s[0].function == "cudaLaunchKernel");
  CHECK(s[0].calls == 5);
  CHECK(s[0].median_ns == Approx(6));
  CHECK(s[0].mean_ns == Approx(24));
  CHECK(s[0].max_ns == Approx(100));
  CHECK(s[0].p90_ns == Approx(8 + 0.6 * 92));
  CHECK(s[1].function == "cudaMemcpyAsync");
  CHECK(is_launch_function("cuLaunchKernelEx"));
  CHECK_FALSE(is_launch_function("cudaEventRecord"));
  CHECK(strip_api_version("cudaLaunchKernel_v7000") == "cudaLaunchKernel");
  CHECK(strip_api_version("cudaMemcpyAsync_v3020") == "cudaMemcpyAsync");
  CHECK(strip_api_version("cudaLaunchKernel") == "cudaLaunchKernel");
  CHECK(strip_api_version("my_var_vx") == "my_var_vx");
  CHECK(strip_api_version("f_v") == "f_v");
}

TEST_CASE("repetitions are grouped by external correlation id, ignoring flush memsets", "[profiler][cupti]") {
  ActivityBatch b;
  // Repetition 10: memset (flush) then two kernels; repetition 11: one kernel. Records shuffled.
  GpuActivity flush;
  flush.kind = GpuOpKind::kMemset;
  flush.correlation_id = 1;
  flush.name = "memset";
  flush.start_ns = 100;
  flush.end_ns = 900;
  b.gpu.push_back(kernel(5, "gemm", 3000, 3400));
  b.gpu.push_back(kernel(3, "splitk_reduce", 1300, 1400));
  b.gpu.push_back(flush);
  b.gpu.push_back(kernel(2, "gemm", 1000, 1250));
  b.external = {{1, 10}, {2, 10}, {3, 10}, {5, 11}};
  const auto r = correlate(b);
  const auto reps = repetition_times(r, 10, 3);
  REQUIRE(reps.size() == 2);  // id 12 has no ops
  CHECK(reps[0].external_id == 10);
  CHECK(reps[0].span_ns == 400);
  CHECK(reps[0].busy_ns == 350);
  CHECK(reps[0].op_count == 2);
  CHECK(reps[0].longest_kernel == "gemm");
  CHECK(reps[1].span_ns == 400);
  const auto all = repetition_times(r, 10, 3, {GpuOpKind::kKernel, GpuOpKind::kMemset});
  CHECK(all[0].span_ns == 1300);
  const auto t = repetition_stats(reps, "cupti");
  CHECK(t.timer == "cupti");
  CHECK(t.repetitions == 2);
  CHECK(t.median == Approx(400e-9));
  CHECK(t.cv == Approx(0).margin(1e-12));
  CHECK_THROWS_AS(repetition_stats({}, "cupti"), std::invalid_argument);
}

TEST_CASE("per-name measurements from a trace", "[profiler][cupti]") {
  ActivityBatch b;
  b.gpu.push_back(kernel(1, "small", 0 + 10, 20));
  for (std::uint32_t i = 0; i < 5; ++i) b.gpu.push_back(kernel(10 + i, "big", 1000 * (i + 1), 1000 * (i + 1) + 100 + 10 * i));
  GpuActivity cp;
  cp.kind = GpuOpKind::kMemcpy;
  cp.name = "memcpy HtoD";
  cp.start_ns = 50;
  cp.end_ns = 60;
  b.gpu.push_back(cp);
  const auto r = correlate(b);
  const auto by = durations_by_name(r);
  REQUIRE(by.size() == 3);
  CHECK(by[0].name == "big");
  CHECK(by[0].durations_ns.size() == 5);
  CHECK(by[0].launch_ns.empty());
  DeviceFingerprint dev;
  dev.name = "fake";
  const auto ms = measurements_by_name(r, "cupti", dev, "2026-01-01T00:00:00Z", "abc");
  REQUIRE(ms.size() == 3);
  const auto* k = std::get_if<MeasuredKernelDesc>(&ms[0].kernel);
  REQUIRE(k);
  CHECK(k->name == "big");
  CHECK(k->duration == Approx(120e-9));
  CHECK(ms[0].timing.repetitions == 5);
  CHECK(ms[0].timing.p10 == Approx(104e-9));
  const std::string line = measurement_to_jsonl(ms[0]);
  CHECK(line.find("\"family\":\"measured\"") != std::string::npos);
  CHECK(line.find("\"big\"") != std::string::npos);
  CHECK(line.back() == '\n');
}

TEST_CASE("the sink collects from several threads and empties on take", "[profiler][cupti]") {
  ActivitySink sink;
  sink.add_gpu(kernel(1, "k", 1, 2));
  sink.add_api(launch(1, 0, 1));
  sink.add_external({1, 4});
  sink.add_dropped(3);
  CHECK(sink.gpu_count() == 1);
  auto b = sink.take();
  CHECK(b.gpu.size() == 1);
  CHECK(b.api.size() == 1);
  CHECK(b.external.size() == 1);
  CHECK(b.dropped_records == 3);
  CHECK(sink.gpu_count() == 0);
  ActivityBatch total;
  total.append(std::move(b));
  total.append(sink.take());
  CHECK(total.gpu.size() == 1);
  CHECK(total.dropped_records == 3);
}

}  // namespace perfcast_test_profiler_activity_records_test
