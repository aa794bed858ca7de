#pragma once
/// \file run_command.hpp
/// `perfcast run` as library calls: check the inputs (bad input is a ConfigError on any
/// machine), then train the workload's DLRM with the reference executor
/// (validation/executor.hpp) and return the measured iteration times as the command's text
/// and `--json` document. The measurement needs a build with CUDA and a GPU
/// (executor_available()).

#include <cstdint>
#include <string>

#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
#include "topology/system_spec.hpp"

namespace perfcast::validation {

struct RunRequest {
  std::string system, workload, plan;   ///< files; plan "": table-wise round-robin
  std::string measurements_out;         ///< also write the CUPTI kernel trace as measurement lines ("": no)
  std::string trace_out;                ///< also write it as a Chrome trace ("": no)
  bool mpi = false;                     ///< one process per GPU under an MPI launcher
  int iterations = 20, warmup = 5;
  int devices = 0;                      ///< GPUs to use (0: the system's GPU count)
  std::uint64_t seed = 1;
};

/// What the executor runs: the loaded system, workload and plan.
struct RunInputs {
  SystemSpec system;
  DlrmSpec workload;
  ShardingPlan plan;
};

/// Loads and checks the inputs: ConfigError (file, JSON path, what was expected) for bad
/// files and for what the executor does not run (DCNv2 cross layers, adagrad, a hybrid
/// bottom MLP, a pipelined loop, tables outside HBM).
[[nodiscard]] RunInputs check_run_inputs(const RunRequest& request);

struct RunOutcome {
  bool reports = true;  ///< false on the ranks other than 0 of an MPI run (rank 0 reports for all)
  std::string text;     ///< the report
  std::string json;     ///< the --json document
};

/// Runs the reference executor on `inputs` (check_run_inputs' result). Needs the executor.
[[nodiscard]] RunOutcome run_measurement(const RunRequest& request, const RunInputs& inputs);

}  // namespace perfcast::validation
