// perfcast run: parses the options; the library call (validation/commands/run_command.hpp)
// checks the inputs and, where this executable has the reference executor, measures.
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/gpu_binary.hpp"
#include "cli/log.hpp"
#include "core/output_files.hpp"
#include "profiler/device_info.hpp"
#include "validation/commands/run_command.hpp"
#include "validation/executor.hpp"

namespace perfcast::cli {
namespace {

struct RunArgs {
  validation::RunRequest request;
  std::string json_out;
};

int run(const RunArgs& a) {
  // Inputs first: bad input is exit 2 even on a machine without a GPU.
  const validation::RunInputs inputs = validation::check_run_inputs(a.request);
  if (!profiler::cuda_support_built()) {
    log().error("perfcast run needs a CUDA GPU: {}", run_gpu_binary());
    return 1;
  }
  std::string why;
  if (!validation::executor_available(&why)) {
    log().error("perfcast run needs a CUDA GPU: {}", why);
    return 1;
  }
  const validation::RunOutcome r = validation::run_measurement(a.request, inputs);
  if (!r.reports) return 0;  // --mpi: rank 0 reports for all
  if (!a.json_out.empty()) write_outputs({{a.json_out, r.json}});
  if (a.json_out != "-") std::cout << r.text;
  return 0;
}

}  // namespace

Action add_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Train the workload's DLRM on this machine's GPU and measure its iteration time");
  auto a = std::make_shared<RunArgs>();
  auto& q = a->request;
  cmd->add_option("--system", q.system, "system file (configs/systems/*.json)")->required();
  cmd->add_option("--workload", q.workload, "DLRM workload file (configs/workloads/*.json)")->required();
  cmd->add_option("--plan", q.plan, "sharding plan file; default: table-wise round-robin");
  cmd->add_option("--iterations", q.iterations, "timed iterations")->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", q.warmup, "untimed iterations first")->check(CLI::Range(0, 100000));
  cmd->add_option("--seed", q.seed, "seed of the weights and the index batches");
  cmd->add_option("--devices", q.devices, "GPUs to use (default: the system's GPU count)")->check(CLI::Range(0, 4096));
  cmd->add_flag("--mpi", q.mpi,
                "one process per GPU under an MPI launcher (mpirun -np N perfcast run --mpi ...; several nodes "
                "possible); rank 0 reports");
  cmd->add_option("--json", a->json_out, "write the result as JSON to FILE, or - for standard output");
  cmd->add_option("--measurements", q.measurements_out, "write the CUPTI kernel trace as measurement JSON lines");
  cmd->add_option("--trace", q.trace_out, "write the CUPTI kernel trace as a Chrome trace (Perfetto)");
  return [a]() { return run(*a); };
}

}  // namespace perfcast::cli
