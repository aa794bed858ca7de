// perfcast run: trains the workload's DLRM on this machine's GPU(s) with the reference
// executor (validation/executor.hpp) and reports the measured iteration time.
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/gpu_binary.hpp"
#include "cli/log.hpp"
#include "core/output_files.hpp"
#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
#include "perfcast/build_info.hpp"
#include "profiler/cuda_error.hpp"
#include "profiler/device_info.hpp"
#include "core/json_reader.hpp"
#include "topology/system_spec.hpp"
#include "validation/executor.hpp"
#include "core/utc_time.hpp"
#include "core/json_text.hpp"

namespace perfcast::cli {
namespace {

struct RunArgs {
  std::string system, workload, plan, json_out, measurements_out, trace_out;
  bool mpi = false;
  int iterations = 20, warmup = 5, devices = 0;
  std::uint64_t seed = 1;
};

std::string us(double s) { return fmt::format("{:.1f} us", s * 1e6); }

int run(const RunArgs& a) {
  // Inputs first: bad input is exit 2 even on a machine without a GPU.
  const SystemSpec system = load_system(a.system);
  const DlrmSpec workload = load_workload(a.workload);
  // --devices N runs the first N GPUs of the system as the whole job (plan for N ranks).
  const int world = a.devices > 0 ? a.devices : system.world_size();
  const ShardingPlan plan = a.plan.empty() ? default_plan(workload, world)
                                           : parse_plan(load_json_file(a.plan), workload, world, system.gpus_per_node);
  if (workload.interaction == Interaction::kDcnV2) {
    throw ConfigError(workload.file, "/interaction", "perfcast run does not execute DCNv2 cross layers yet (dot or cat)");
  }
  if (workload.dense_optimizer == DenseOptimizer::kAdagrad) {
    throw ConfigError(workload.file, "/dense_optimizer", "perfcast run executes the sgd and adam dense optimizers only");
  }
  if (workload.bottom_mlp_rank >= 0) {
    throw ConfigError(workload.file, "/bottom_mlp_rank", "perfcast run executes a data-parallel bottom MLP only");
  }
  if (workload.pipeline != TrainPipeline::kNone) {
    throw ConfigError(workload.file, "/pipeline", "perfcast run executes a plain training loop; set \"pipeline\": \"none\" "
                                                  "to compare it with a prediction");
  }
  // The reference executor keeps every table in HBM: a host-memory plan would run as
  // something else than it says.
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    if (plan.tables[t].storage != EmbeddingStorage::kHbm) {
      throw ConfigError(a.plan, "", fmt::format("table \"{}\" uses compute_kernel \"{}\"; perfcast run executes HBM-resident "
                                                "tables only (fused, dense)", workload.tables[t].name,
                                                compute_kernel_name(plan.tables[t])));
    }
  }
  if (!profiler::cuda_support_built()) {
    log().error("perfcast run needs a CUDA GPU: {}", run_gpu_binary());
    return 1;
  }
  std::string why;
  if (!validation::executor_available(&why)) {
    log().error("perfcast run needs a CUDA GPU: {}", why);
    return 1;
  }
  validation::ExecutorOptions opt;
  opt.iterations = a.iterations;
  opt.warmup = a.warmup;
  opt.seed = a.seed;
  opt.devices = a.devices;
  opt.mpi = a.mpi;
  if (!a.measurements_out.empty()) opt.measurements_out = a.measurements_out;
  if (!a.trace_out.empty()) opt.chrome_trace_out = a.trace_out;
  const validation::RunResult r = validation::run_dlrm(system, workload, plan, opt);
  if (r.process_rank != 0) return 0;  // --mpi: rank 0 reports for all

  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : r.devices) devices.push_back({{"index", d.index}, {"name", d.name}, {"describe", profiler::describe(d)}});
  const nlohmann::json j = {
      {"context",
       {{"perfcast_version", build_info::kVersion},
        {"git_commit", build_info::kGitCommit},
        {"date", utc_now_iso8601()},
        {"system", {{"name", system.name}, {"file", system.file}, {"gpu", system.gpu.name}, {"nodes", system.nodes},
                    {"gpus_per_node", system.gpus_per_node}}},
        {"workload", {{"name", workload.name}, {"file", workload.file}, {"batch_size", workload.batch_size},
                      {"tables", workload.tables.size()}}},
        {"plan", plan.source},
        {"seed", a.seed},
        {"warmup", a.warmup},
        {"iterations", a.iterations},
        {"timer", r.timer},
        {"cublas", r.cublas_version},
        {"nccl", r.nccl_version},
        {"devices", devices}}},
      {"world", r.world},
      {"iteration_s", {{"median", r.median_s}, {"p10", r.p10_s}, {"p90", r.p90_s}, {"all", r.iteration_s}}},
      {"samples_per_s", r.median_s > 0 ? static_cast<double>(workload.batch_size) / r.median_s : 0.0},
      {"loss", {{"first", r.first_loss}, {"last", r.last_loss}}},
  };
  if (!a.json_out.empty()) write_outputs({{a.json_out, json_text(j, 2) + "\n"}});
  if (a.json_out != "-") {
    std::cout << fmt::format("perfcast run: {} on {} ({} GPU{})\n", workload.name, system.name, r.world,
                             r.world == 1 ? "" : "s");
    for (const auto& d : r.devices) std::cout << "  device " << d.index << ": " << profiler::describe(d) << "\n";
    const bool mixed = workload.mlp_dtype == DType::kFp16 || workload.mlp_dtype == DType::kBf16;
    std::cout << fmt::format("  batch {}, {} embedding tables ({}), MLPs {}{}, plan: {}\n", workload.batch_size,
                             workload.tables.size(), dtype_name(workload.embedding_dtype), dtype_name(workload.mlp_dtype),
                             mixed ? " mixed precision" : "", plan.source);
    std::cout << fmt::format("\nmeasured iteration time: median {}  p10 {}  p90 {}  ({:.0f} samples/s)\n", us(r.median_s),
                             us(r.p10_s), us(r.p90_s), j["samples_per_s"].get<double>());
    std::cout << fmt::format("  {} timed iterations after {} warm-up, timer {}; loss {:.4f} -> {:.4f}\n", a.iterations,
                             a.warmup, r.timer, r.first_loss, r.last_loss);
  }
  return 0;
}

}  // namespace

Action add_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Train the workload's DLRM on this machine's GPU and measure its iteration time");
  auto a = std::make_shared<RunArgs>();
  cmd->add_option("--system", a->system, "system file (configs/systems/*.json)")->required();
  cmd->add_option("--workload", a->workload, "DLRM workload file (configs/workloads/*.json)")->required();
  cmd->add_option("--plan", a->plan, "sharding plan file; default: table-wise round-robin");
  cmd->add_option("--iterations", a->iterations, "timed iterations")->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", a->warmup, "untimed iterations first")->check(CLI::Range(0, 100000));
  cmd->add_option("--seed", a->seed, "seed of the weights and the index batches");
  cmd->add_option("--devices", a->devices, "GPUs to use (default: the system's GPU count)")->check(CLI::Range(0, 4096));
  cmd->add_flag("--mpi", a->mpi,
                "one process per GPU under an MPI launcher (mpirun -np N perfcast run --mpi ...; several nodes "
                "possible); rank 0 reports");
  cmd->add_option("--json", a->json_out, "write the result as JSON to FILE, or - for standard output");
  cmd->add_option("--measurements", a->measurements_out, "write the CUPTI kernel trace as measurement JSON lines");
  cmd->add_option("--trace", a->trace_out, "write the CUPTI kernel trace as a Chrome trace (Perfetto)");
  return [a]() { return run(*a); };
}

}  // namespace perfcast::cli
