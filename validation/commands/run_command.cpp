#include "validation/commands/run_command.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"
#include "core/json_text.hpp"
#include "core/utc_time.hpp"
#include "perfcast/build_info.hpp"
#include "profiler/device_info.hpp"
#include "validation/executor.hpp"

namespace perfcast::validation {
namespace {

std::string us(double s) { return fmt::format("{:.1f} us", s * 1e6); }

/// The executor keeps every table in HBM and runs a plain training loop of dot / cat
/// interactions, sgd / adam dense optimizers and a data-parallel bottom MLP.
void check_executable(const RunRequest& a, const RunInputs& in) {
  const DlrmSpec& w = in.workload;
  if (w.interaction == Interaction::kDcnV2)
    throw ConfigError(w.file, "/interaction", "perfcast run does not execute DCNv2 cross layers yet (dot or cat)");
  if (w.dense_optimizer == DenseOptimizer::kAdagrad)
    throw ConfigError(w.file, "/dense_optimizer", "perfcast run executes the sgd and adam dense optimizers only");
  if (w.bottom_mlp_rank >= 0) throw ConfigError(w.file, "/bottom_mlp_rank", "perfcast run executes a data-parallel bottom MLP only");
  if (w.pipeline != TrainPipeline::kNone) {
    throw ConfigError(w.file, "/pipeline", "perfcast run executes a plain training loop; set \"pipeline\": \"none\" "
                                           "to compare it with a prediction");
  }
  // A host-memory plan would run as something else than it says.
  for (std::size_t t = 0; t < in.plan.tables.size(); ++t) {
    if (in.plan.tables[t].storage != EmbeddingStorage::kHbm) {
      throw ConfigError(a.plan, "", fmt::format("table \"{}\" uses compute_kernel \"{}\"; perfcast run executes HBM-resident "
                                                "tables only (fused, dense)", w.tables[t].name,
                                                compute_kernel_name(in.plan.tables[t])));
    }
  }
}

}  // namespace

RunInputs check_run_inputs(const RunRequest& a) {
  RunInputs in{load_system(a.system), load_workload(a.workload), {}};
  // --devices N runs the first N GPUs of the system as the whole job (plan for N ranks).
  const int world = a.devices > 0 ? a.devices : in.system.world_size();
  in.plan = a.plan.empty() ? default_plan(in.workload, world)
                           : parse_plan(load_json_file(a.plan), in.workload, world, in.system.gpus_per_node);
  check_executable(a, in);
  return in;
}

RunOutcome run_measurement(const RunRequest& a, const RunInputs& in) {
  ExecutorOptions opt;
  opt.iterations = a.iterations;
  opt.warmup = a.warmup;
  opt.seed = a.seed;
  opt.devices = a.devices;
  opt.mpi = a.mpi;
  if (!a.measurements_out.empty()) opt.measurements_out = a.measurements_out;
  if (!a.trace_out.empty()) opt.chrome_trace_out = a.trace_out;
  const RunResult r = run_dlrm(in.system, in.workload, in.plan, opt);
  RunOutcome out;
  if (r.process_rank != 0) {
    out.reports = false;
    return out;
  }
  const SystemSpec& system = in.system;
  const DlrmSpec& workload = in.workload;
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : r.devices) devices.push_back({{"index", d.index}, {"name", d.name}, {"describe", profiler::describe(d)}});
  const double samples_per_s = r.median_s > 0 ? static_cast<double>(workload.batch_size) / r.median_s : 0.0;
  const nlohmann::json j = {
      {"context",
       {{"perfcast_version", build_info::kVersion},
        {"git_commit", build_info::kGitCommit},
        {"date", utc_now_iso8601()},
        {"system", {{"name", system.name}, {"file", system.file}, {"gpu", system.gpu.name}, {"nodes", system.nodes},
                    {"gpus_per_node", system.gpus_per_node}}},
        {"workload", {{"name", workload.name}, {"file", workload.file}, {"batch_size", workload.batch_size},
                      {"tables", workload.tables.size()}}},
        {"plan", in.plan.source},
        {"seed", a.seed},
        {"warmup", a.warmup},
        {"iterations", a.iterations},
        {"timer", r.timer},
        {"cublas", r.cublas_version},
        {"nccl", r.nccl_version},
        {"devices", devices}}},
      {"world", r.world},
      {"iteration_s", {{"median", r.median_s}, {"p10", r.p10_s}, {"p90", r.p90_s}, {"all", r.iteration_s}}},
      {"samples_per_s", samples_per_s},
      {"loss", {{"first", r.first_loss}, {"last", r.last_loss}}},
  };
  out.json = json_text(j, 2) + "\n";
  out.text = fmt::format("perfcast run: {} on {} ({} GPU{})\n", workload.name, system.name, r.world, r.world == 1 ? "" : "s");
  for (const auto& d : r.devices) out.text += fmt::format("  device {}: {}\n", d.index, profiler::describe(d));
  const bool mixed = workload.mlp_dtype == DType::kFp16 || workload.mlp_dtype == DType::kBf16;
  out.text += fmt::format("  batch {}, {} embedding tables ({}), MLPs {}{}, plan: {}\n", workload.batch_size, workload.tables.size(),
                          dtype_name(workload.embedding_dtype), dtype_name(workload.mlp_dtype), mixed ? " mixed precision" : "",
                          in.plan.source);
  out.text += fmt::format("\nmeasured iteration time: median {}  p10 {}  p90 {}  ({:.0f} samples/s)\n", us(r.median_s), us(r.p10_s),
                          us(r.p90_s), samples_per_s);
  out.text += fmt::format("  {} timed iterations after {} warm-up, timer {}; loss {:.4f} -> {:.4f}\n", a.iterations, a.warmup, r.timer,
                          r.first_loss, r.last_loss);
  return out;
}

}  // namespace perfcast::validation
