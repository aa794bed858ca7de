// The reference executor in CUDA builds (see executor.hpp and docs/gpu-calibration.md): one GPU
// directly; several GPUs of one node as one thread per GPU, each running its rank's
// DeviceDlrm with NCCL, in lockstep (a barrier starts and ends every iteration).
#include <algorithm>
#include <chrono>
#include <exception>
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
#include "core/json_reader.hpp"
#include "validation/batch_generator.hpp"
#include "validation/device_dlrm.hpp"
#include "validation/executor.hpp"
#include "validation/executor_common.hpp"
#include "validation/executor_trace.hpp"
#include "validation/multi_gpu_layout.hpp"
#if PERFCAST_HAVE_NCCL
#include "validation/nccl_comm.hpp"
#include "validation/rank_failure.hpp"
#include "core/json_text.hpp"
#endif

namespace perfcast::validation {
using namespace executor_detail;
namespace {

std::string version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot write " + path.string());
  f << text;
  if (!f) throw std::runtime_error("error writing " + path.string());
}

}  // namespace

namespace executor_detail {

/// Writes the CUPTI records of the timed iterations as measurement JSON lines and as a
/// Chrome trace, as the options ask.
void write_trace(profiler::CuptiTracer& tracer, const RunResult& result, const ExecutorOptions& options) {
  const profiler::ActivityBatch batch = tracer.take();
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
  if (options.chrome_trace_out) write_text(*options.chrome_trace_out, json_text(gpu_ops_chrome_trace(corr), 1) + "\n");
}

std::unique_ptr<profiler::CuptiTracer> start_tracer(const ExecutorOptions& options) {
  if (!options.measurements_out && !options.chrome_trace_out) return nullptr;
  profiler::TracerOptions to;
  to.external_correlation = false;  // not needed here; keeps the per-launch overhead low
  return std::make_unique<profiler::CuptiTracer>(to);  // throws TracerUnavailable
}

/// Fills the median, p10, p90 and timer note from per-iteration host and event times.
void summarize(RunResult& result, const std::vector<double>& host_s, const std::vector<double>& event_s) {
  result.iteration_s = host_s;
  const TimingStats st = timing_stats(host_s, "host_clock");
  result.median_s = st.median;
  result.p10_s = st.p10;
  result.p90_s = st.p90;
  const TimingStats ev = timing_stats(event_s, "cuda_events");
  result.timer = fmt::format("host_clock (cuda_events median {:.1f} us)", ev.median * 1e6);
}

DeviceDlrmOptions device_options(const DlrmSpec& workload, int device, std::uint64_t seed) {
  DeviceDlrmOptions o;
  o.device = device;
  o.seed = seed;
  o.tf32 = workload.mlp_dtype == DType::kTf32;
  if (workload.mlp_dtype == DType::kFp16) o.mlp_precision = profiler::WeightPrecision::kFp16;
  if (workload.mlp_dtype == DType::kBf16) o.mlp_precision = profiler::WeightPrecision::kBf16;
  return o;
}

std::string cublas_version_string() {
  const std::size_t v = cublasLtGetVersion();
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

}  // namespace executor_detail

#if PERFCAST_HAVE_NCCL
namespace {

/// Several GPUs of one node: NCCL communicators from ncclCommInitAll, one DeviceDlrm rank per
/// GPU, one host thread per rank (run_in_lockstep). Every iteration starts when all threads
/// pass a barrier and ends when the last rank has its loss on the host (second barrier): the
/// wall time of the slowest rank, as a synchronous data-parallel job sees it.
///
/// Failures: NCCL has no timeout, so when a rank throws (CUDA, cuBLASLt or NCCL error, ...)
/// the other ranks may already wait inside a collective for it, on the GPU and in
/// cudaStreamSynchronize on the host. The first failing rank F therefore aborts the
/// communicators of all OTHER ranks (RankFailure's action, once): their pending NCCL kernels
/// exit, their steps return or throw (later collectives on an aborted NcclComm throw; those
/// secondary errors are ignored), and every thread stops at the next iteration start. F's own
/// communicator is aborted only after all threads were joined, together with the rest: NCCL
/// frees the communicators of one ncclCommInitAll only once the last of them is aborted, so
/// none is freed while a rank thread may still be inside an NCCL call on it (nccl_comm.hpp).
/// Then the first error is rethrown as a RankError, "rank F: <what went wrong>". Errors that
/// can be found before the first step (ConfigError of the layout, ...) are thrown before the
/// threads start, as they were. The successful path has no synchronization besides the two
/// barriers; each step adds one ncclCommGetAsyncError (atomic loads), which turns an
/// asynchronous NCCL error after a completed step into an error of that rank.
RunResult run_dlrm_multi(const DlrmSpec& workload, const ShardingPlan& plan, const ExecutorOptions& options,
                         int world) {
  const MultiGpuLayout layout = multi_gpu_layout(workload, plan, world);  // ConfigError for what it cannot run
  const DlrmConfig global_cfg = dlrm_config_from_spec(workload, workload.batch_size);
  const DlrmConfig local_cfg = dlrm_config_from_spec(workload, layout.local_batch);
  const auto traffic = table_traffic(workload);
  RunResult result;
  result.world = world;
  for (int r = 0; r < world; ++r) result.devices.push_back(profiler::query_device_info(r));
  result.cublas_version = cublas_version_string();
  result.nccl_version = nccl_version();

  // Global batches split into every rank's share on the host (the input all-to-all of indices).
  const auto nranks = static_cast<std::size_t>(world);
  std::vector<std::vector<RankInput>> inputs(nranks);
  std::vector<DeviceDlrmShard> shards(nranks);
  for (int i = 0; i < options.batches; ++i) {
    const DlrmBatch global = generate_dlrm_batch(global_cfg, traffic, options.seed, static_cast<std::uint64_t>(i));
    for (std::size_t r = 0; r < nranks; ++r) {
      RankInput in = split_batch(layout, workload, global, static_cast<int>(r));
      grow_index_capacity(shards[r].max_indices, in);
      inputs[r].push_back(std::move(in));
    }
  }
  std::vector<int> devices(nranks);
  for (std::size_t r = 0; r < nranks; ++r) devices[r] = static_cast<int>(r);
  const auto comms = NcclComm::init_all(devices);
  const DlrmModel model = init_dlrm_model(local_cfg, options.seed, /*draw_embeddings=*/false);
  std::vector<std::unique_ptr<DeviceDlrm>> ranks;
  std::vector<std::vector<int>> ids(nranks);
  for (std::size_t r = 0; r < nranks; ++r) {
    const DeviceDlrmOptions dopt = device_options(workload, static_cast<int>(r), options.seed);
    shards[r].layout = &layout;
    shards[r].rank = static_cast<int>(r);
    shards[r].comm = comms[r].get();
    ranks.push_back(std::make_unique<DeviceDlrm>(model, dopt, shards[r]));
    for (const auto& in : inputs[r]) ids[r].push_back(ranks.back()->add_batch(in));
    inputs[r].clear();
  }

  const int total = options.warmup + options.iterations;
  std::vector<std::vector<float>> losses(nranks, std::vector<float>(static_cast<std::size_t>(total), 0.0f));
  std::vector<std::vector<double>> events(nranks, std::vector<double>(static_cast<std::size_t>(total), 0.0));
  // The first failure aborts the communicators of the ranks that did not fail; a failure of the
  // host thread (tracer) happens between iterations, with no collective in flight: nothing to
  // abort then, the ranks stop at the barrier.
  RankFailure failure([&comms](int failed) {
    if (failed == RankFailure::kHostThread) return;
    for (const auto& c : comms) {
      if (c->rank() != failed) c->abort();
    }
  });
  std::unique_ptr<profiler::CuptiTracer> tracer;
  std::vector<double> host_s, event_s;
  LockstepHooks hooks;
  hooks.step = [&](int rank, int it) {
    const auto r = static_cast<std::size_t>(rank);
    const auto i = static_cast<std::size_t>(it);
    StepTiming t;
    const auto& my = ids[r];
    losses[r][i] = ranks[r]->step(my[i % my.size()], &t);
    events[r][i] = t.event_s;
    comms[r]->check_async_error();
  };
  hooks.before_iteration = [&](int it) {
    if (it == options.warmup) tracer = start_tracer(options);  // between iterations: every rank waits
  };
  hooks.after_iteration = [&](int it, double wall_s) {
    if (it >= options.warmup) host_s.push_back(wall_s);
  };
  run_in_lockstep(world, total, hooks, failure);
  if (failure.failed()) {
    // Every thread is joined: abort the rest (the failed rank's communicator; its kernels may
    // still wait for peers) before the DeviceDlrm destructors free memory, which would wait
    // for them.
    for (const auto& c : comms) c->abort();
    failure.rethrow_if_failed();
  }
  const auto mean_loss = [&](int it) {
    double sum = 0;
    for (std::size_t r = 0; r < nranks; ++r) sum += losses[r][static_cast<std::size_t>(it)];
    return sum / static_cast<double>(world);  // equal local batches: the global mean loss
  };
  result.first_loss = mean_loss(0);
  result.last_loss = mean_loss(total - 1);
  for (int it = options.warmup; it < total; ++it) {
    double slowest = 0;
    for (std::size_t r = 0; r < nranks; ++r) slowest = std::max(slowest, events[r][static_cast<std::size_t>(it)]);
    event_s.push_back(slowest);
  }
  summarize(result, host_s, event_s);
  if (tracer) write_trace(*tracer, result, options);
  return result;
}

}  // namespace
#endif

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
  // One process per GPU: the world is the MPI size, spread over nodes (checked there).
  if (options.mpi) return run_dlrm_mpi(workload, plan, options);
  if (world > visible) {
    throw profiler::NoCudaDeviceError(fmt::format("the run needs {} GPUs, {} visible", world, visible));
  }
  if (world != 1) {
#if PERFCAST_HAVE_NCCL
    return run_dlrm_multi(workload, plan, options, world);
#else
    (void)multi_gpu_layout(workload, plan, world);  // ConfigError for what the multi-GPU path cannot run
    throw profiler::NoCudaDeviceError(
        fmt::format("this build has no NCCL: the executor runs on one GPU only ({} asked for)", world));
#endif
  }
  if (plan.tables.size() != workload.tables.size()) {
    throw ConfigError(plan.source, "/tables", fmt::format("the plan shards {} tables, the workload has {}",
                                                          plan.tables.size(), workload.tables.size()));
  }
  if (workload.batch_size % world != 0) {
    throw ConfigError(workload.file, "/batch_size", fmt::format("not divisible by the {} GPUs", world));
  }
  const DlrmConfig config = dlrm_config_from_spec(workload, workload.batch_size / world);
  const auto traffic = table_traffic(workload);
  RunResult result;
  result.world = world;
  result.devices.push_back(profiler::query_device_info(0));
  result.cublas_version = cublas_version_string();

  // Batches first (host), then the model: the index capacity is the largest batch's.
  std::vector<DlrmBatch> batches;
  std::int64_t max_indices = 1;
  for (int i = 0; i < options.batches; ++i) {
    batches.push_back(generate_dlrm_batch(config, traffic, options.seed, static_cast<std::uint64_t>(i)));
    max_indices = std::max(max_indices, static_cast<std::int64_t>(batches.back().indices.size()));
  }
  const DlrmModel model = init_dlrm_model(config, options.seed, /*draw_embeddings=*/false);
  DeviceDlrmOptions dopt = device_options(workload, 0, options.seed);
  dopt.max_indices = max_indices;
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

  std::unique_ptr<profiler::CuptiTracer> tracer = start_tracer(options);
  std::vector<double> host_s, event_s;
  for (int i = 0; i < options.iterations; ++i) {
    StepTiming t;
    const float loss = dev.step(next_id(), &t);
    if (options.warmup == 0 && i == 0) result.first_loss = loss;
    result.last_loss = loss;
    host_s.push_back(t.host_s);
    event_s.push_back(t.event_s);
  }
  summarize(result, host_s, event_s);

  if (tracer) {
    write_trace(*tracer, result, options);
  }
  return result;
}

}  // namespace perfcast::validation
