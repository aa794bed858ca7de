#include "model/predict/trace_predict.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "predictors/kernel_calibration.hpp"
#include "topology/collective_calibration.hpp"

namespace perfcast {

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
    } else {
      CollectiveEstimate e;
      e.time = workload.collective_measured[k].value_or(0);
      e.algorithm = "measured";
      p->timed.collectives[k] = e;
    }
  }
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
  if (p->kernel_calibration.empty()) {
    p->warnings.push_back("spec-derived predictors: no calibration for " + p->system.gpu.name + " (configs/calibration/" +
                          calibration_file_name(p->system.gpu.name) + ")");
  }
  p->workload = std::move(workload);
  return p;
}

}  // namespace perfcast
