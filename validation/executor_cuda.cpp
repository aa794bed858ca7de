// The reference executor in CUDA builds: one GPU for now (see executor.hpp and
// profiler/RUNBOOK.md); several GPUs with NCCL are issue 6 part B.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <fmt/format.h>

#include "perfcast/build_info.hpp"
#include "predictors/measurement.hpp"
#include "profiler/cuda_error.hpp"
#include "profiler/cupti_tracer.hpp"
#include "profiler/device_info.hpp"
#include "profiler/trace_measurements.hpp"
#include "topology/json_reader.hpp"
#include "validation/batch_generator.hpp"
#include "validation/device_dlrm.hpp"
#include "validation/executor.hpp"
#include "validation/executor_trace.hpp"
#include "validation/multi_gpu_layout.hpp"

namespace perfcast::validation {
namespace {

std::string version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot write " + path.string());
  f << text;
  if (!f) throw std::runtime_error("error writing " + path.string());
}

}  // namespace

bool executor_available(std::string* why) {
  if (!profiler::cuda_device_available()) {
    if (why) *why = "no CUDA device visible";
    return false;
  }
  if (why) why->clear();
  return true;
}

RunResult run_dlrm(const SystemSpec& system, const DlrmSpec& workload, const ShardingPlan& plan,
                   const ExecutorOptions& options) {
  if (options.iterations < 1) throw std::invalid_argument("run_dlrm: iterations must be >= 1");
  if (options.warmup < 0) throw std::invalid_argument("run_dlrm: warmup must be >= 0");
  if (options.batches < 1) throw std::invalid_argument("run_dlrm: batches must be >= 1");
  const int world = options.devices > 0 ? options.devices : system.world_size();
  const int visible = profiler::cuda_device_count();
  if (visible == 0) throw profiler::NoCudaDeviceError("no CUDA device visible");
  if (world > visible) {
    throw profiler::NoCudaDeviceError(fmt::format("the run needs {} GPUs, {} visible", world, visible));
  }
  if (world != 1) {
    // The plan is checked against what the multi-GPU path implements (ConfigError naming the
    // table and sharding type) before refusing: multi_gpu_layout.hpp and nccl_comm.hpp hold
    // the layout and the NCCL exchange, the per-rank training step is not written yet.
    (void)multi_gpu_layout(workload, plan, world);
    throw std::runtime_error(fmt::format(
        "the executor runs on one GPU only so far ({} asked for): use a one-GPU system such as "
        "configs/systems/h100_sxm.json",
        world));
  }
  if (plan.tables.size() != workload.tables.size()) {
    throw ConfigError(plan.source, "/tables", fmt::format("the plan shards {} tables, the workload has {}",
                                                          plan.tables.size(), workload.tables.size()));
  }
  if (workload.mlp_dtype != DType::kFp32 && workload.mlp_dtype != DType::kTf32) {
    throw ConfigError(workload.file, "/mlp_dtype",
                      "the executor runs the MLPs in fp32 or tf32 (fp16/bf16 mixed precision is not implemented)");
  }
  if (workload.batch_size % world != 0) {
    throw ConfigError(workload.file, "/batch_size", fmt::format("not divisible by the {} GPUs", world));
  }
  const DlrmConfig config = dlrm_config_from_spec(workload, workload.batch_size / world);
  const auto traffic = table_traffic(workload);
  RunResult result;
  result.world = world;
  result.devices.push_back(profiler::query_device_info(0));
  result.cublas_version = [] {
    const std::size_t v = cublasLtGetVersion();
    return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
  }();

  // Batches first (host), then the model: the index capacity is the largest batch's.
  std::vector<DlrmBatch> batches;
  std::int64_t max_indices = 1;
  for (int i = 0; i < options.batches; ++i) {
    batches.push_back(generate_dlrm_batch(config, traffic, options.seed, static_cast<std::uint64_t>(i)));
    max_indices = std::max(max_indices, static_cast<std::int64_t>(batches.back().indices.size()));
  }
  const DlrmModel model = init_dlrm_model(config, options.seed, /*draw_embeddings=*/false);
  DeviceDlrmOptions dopt;
  dopt.device = 0;
  dopt.tf32 = workload.mlp_dtype == DType::kTf32;
  dopt.max_indices = max_indices;
  dopt.seed = options.seed;
  DeviceDlrm dev(model, dopt);
  std::vector<int> ids;
  for (const auto& b : batches) ids.push_back(dev.add_batch(b));
  batches.clear();

  int next = 0;
  const auto next_id = [&] {
    const int id = ids[static_cast<std::size_t>(next)];
    next = (next + 1) % static_cast<int>(ids.size());
    return id;
  };
  for (int i = 0; i < options.warmup; ++i) {
    const float loss = dev.step(next_id());
    if (i == 0) result.first_loss = loss;
  }

  const bool want_trace = options.measurements_out.has_value() || options.chrome_trace_out.has_value();
  std::unique_ptr<profiler::CuptiTracer> tracer;
  if (want_trace) {
    profiler::TracerOptions to;
    to.external_correlation = false;  // not needed here; keeps the per-launch overhead low
    tracer = std::make_unique<profiler::CuptiTracer>(to);  // throws TracerUnavailable
  }
  std::vector<double> host_s, event_s;
  for (int i = 0; i < options.iterations; ++i) {
    StepTiming t;
    const float loss = dev.step(next_id(), &t);
    if (options.warmup == 0 && i == 0) result.first_loss = loss;
    result.last_loss = loss;
    host_s.push_back(t.host_s);
    event_s.push_back(t.event_s);
  }
  result.iteration_s = host_s;
  const TimingStats st = timing_stats(host_s, "host_clock");
  result.median_s = st.median;
  result.p10_s = st.p10;
  result.p90_s = st.p90;
  const TimingStats ev = timing_stats(event_s, "cuda_events");
  result.timer = fmt::format("host_clock (cuda_events median {:.1f} us)", ev.median * 1e6);

  if (tracer) {
    const profiler::ActivityBatch batch = tracer->take();
    tracer.reset();
    const profiler::CorrelationResult corr = profiler::correlate(batch);
    if (options.measurements_out) {
      const auto& info = result.devices.front();
      DeviceFingerprint fp;
      fp.name = info.name;
      fp.sm_count = info.sm_count;
      fp.sm_clock = info.sm_clock_khz * 1e3;
      fp.memory_clock = info.memory_clock_khz * 1e3;
      fp.driver = version_string(info.driver_version);
      fp.cuda_runtime = version_string(info.runtime_version);
      std::string text;
      for (const auto& m : profiler::measurements_by_name(corr, "cupti", fp, profiler::utc_timestamp(), build_info::kGitCommit)) {
        text += measurement_to_jsonl(m);
      }
      write_text(*options.measurements_out, text);
    }
    if (options.chrome_trace_out) write_text(*options.chrome_trace_out, gpu_ops_chrome_trace(corr).dump(1) + "\n");
  }
  return result;
}

}  // namespace perfcast::validation
