#include "model/predict/trace_predict.hpp"

#include <cctype>
#include <filesystem>

#include <fmt/format.h>

#include "predictors/kernel_calibration.hpp"
#include "topology/collective_calibration.hpp"
#include "topology/nccl_tuning.hpp"

namespace perfcast {

namespace {

/// The GPU model in a device name: "H100" in "NVIDIA H100 80GB HBM3", "V100" in
/// "Tesla V100-SXM2-32GB" (a letter and 2-3 digits as a word part); "" when none.
std::string gpu_model(const std::string& name) {
  for (std::size_t i = 0; i + 2 < name.size(); ++i) {
    const auto up = static_cast<char>(std::toupper(static_cast<unsigned char>(name[i])));
    if (up < 'A' || up > 'Z' || (i > 0 && std::isalnum(static_cast<unsigned char>(name[i - 1])))) continue;
    std::size_t j = i + 1;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    if (j - i - 1 >= 2 && j - i - 1 <= 3) return std::string(1, up) + name.substr(i + 1, j - i - 1);
  }
  return "";
}

/// What an imported trace cannot say about this system: no GPU work, implausible step
/// lengths, and a traced GPU other than the system's (whose unrecognized kernels keep
/// their traced times).
void warn_about_trace(const TraceWorkload& w, const SystemSpec& system, std::vector<std::string>& warnings) {
  std::size_t gpu_ops = 0, kept = 0;
  Seconds kept_time = 0;
  for (const auto& prog : w.graph.ranks)
    for (const auto& op : prog.ops) {
      if (op.collective || !op.kernels.empty()) ++gpu_ops;
      for (const auto& k : op.kernels)
        if (const auto* m = std::get_if<MeasuredKernelDesc>(&k); m && m->duration > 0) {
          ++kept;
          kept_time += m->duration;
        }
    }
  if (gpu_ops == 0) warnings.push_back("imported trace: no GPU kernel, copy or collective; the prediction is host time only");
  for (std::size_t r = 0; r < w.measured_iteration.size(); ++r) {
    const Seconds m = w.measured_iteration[r];
    if (m > 3600 || (m > 0 && m < 1e-6))
      warnings.push_back(fmt::format("imported trace: rank {}'s measured step of {} is implausible (expected 1 us to 1 hour)",
                                     r < w.rank_ids.size() ? w.rank_ids[r] : static_cast<int>(r), format_time(m)));
  }
  const std::string traced = gpu_model(w.traced_gpu), target = gpu_model(system.gpu.name);
  if (!w.traced_gpu.empty() && traced != target) {
    warnings.push_back(fmt::format("imported trace recorded on {} and predicted on {}: {} unrecognized GPU op(s), {} of traced GPU time "
                                   "over all ranks, keep their traced times; only recognized kernels and sized collectives "
                                   "move with the GPU",
                                   w.traced_gpu, system.gpu.name, kept, format_time(kept_time)));
  }
}

}  // namespace

std::unique_ptr<Prediction> predict_trace(SystemSpec system, TraceWorkload workload, std::vector<std::string> overrides,
                                          int iterations) {
  auto p = std::make_unique<Prediction>();
  p->overrides = std::move(overrides);
  p->system = std::move(system);
  p->plan.source = "none (imported trace)";
  p->graph = workload.graph;
  const PredictionModels models = load_prediction_models(*p);
  Annotator annotator(p->system, *models.comm);
  if (models.calibration) annotator.set_calibration(&*models.calibration);
  p->timed = annotator.annotate(p->graph);
  // Collectives: estimated for the traced job's communicator, or measured when unsized.
  for (std::size_t k = 0; k < p->graph.collectives.size(); ++k) {
    const auto& c = p->graph.collectives[k];
    if (c.desc.bytes > 0) {
      const int n = workload.group_size[k];
      if (n > p->system.world_size())
        throw ConfigError(p->system.file, "/gpus_per_node",
                          fmt::format("{}: collective {} runs on {} ranks in the traced job, the system has {} GPUs",
                                      workload.file, k, n, p->system.world_size()));
      RankGroup g;
      for (int i = 0; i < n; ++i) g.ranks.push_back(i);
      p->timed.collectives[k] = models.comm->estimate(c.desc, g);
      p->timed.collectives[k].sms = nccl_kernel_sms(p->system, g, c.desc, p->timed.collectives[k].algorithm);
    } else {
      CollectiveEstimate e;
      e.time = workload.collective_measured[k].value_or(0);
      e.algorithm = "measured";
      p->timed.collectives[k] = e;
    }
  }
  add_nccl_sm_sharing(p->graph, p->timed, p->system.gpu.sm_count);  // with the traced communicators' collectives
  for (std::size_t r = 0; r < p->timed.ops.size(); ++r)
    for (std::size_t i = 0; i < p->timed.ops[r].size(); ++i) p->timed.ops[r][i].host_time = workload.host_time[r][i];
  p->timed.graph = &p->graph;
  HostSpec host = p->system.host;  // measured host times include the launch calls
  host.launch_overhead = 0;
  host.collective_launch_overhead = 0;
  SimulationOptions opts;
  opts.iterations = iterations;
  p->timeline = simulate(p->timed, host, opts);
  p->analysis = analyze_timeline(p->timeline, p->graph);
  for (std::size_t r = 0; r < p->graph.ranks.size(); ++r) {
    RankMemory m;  // not estimated for imported traces
    m.rank = static_cast<int>(r);
    m.capacity = p->system.gpu.memory;
    p->memory.push_back(m);
  }
  p->warnings.push_back("imported trace: device memory is not estimated; host times are the trace's");
  warn_about_trace(workload, p->system, p->warnings);
  if (p->kernel_calibration.empty()) p->warnings.push_back(missing_calibration_warning(p->system));
  p->workload = std::move(workload);
  return p;
}

}  // namespace perfcast
