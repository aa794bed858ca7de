#pragma once
/// \file profile_command.hpp
/// `perfcast profile` as library calls: load and count the microbenchmark sweeps
/// (configs/sweeps/*.json; bad files are a ConfigError on any machine), and run them on a
/// GPU, writing the measurements as JSON lines (predictors/measurement.hpp) to <out>.partial
/// as they are measured and renaming it to <out> at the end.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/bench_runner.hpp"
#include "profiler/sweep.hpp"

namespace perfcast::validation {

struct ProfileRequest {
  std::vector<std::string> sweeps;    ///< sweep files
  std::string out;                    ///< measurement file (JSON lines)
  profiler::ProfileOptions options;   ///< device, offset, limit, progress, CUPTI
  double time_budget_s = 0;           ///< start no new case after this many seconds (0: none)
  bool append = false;                ///< append to `out` instead of replacing it
};

struct LoadedSweeps {
  std::vector<profiler::Sweep> sweeps;
  std::string text;     ///< each sweep's cases and runs, and the total ("N cases in all")
  nlohmann::json json;  ///< {"context", "dry_run": true, "sweeps": [...], "cases"}
};

/// Loads and checks every sweep file (ConfigError naming the file and JSON path).
[[nodiscard]] LoadedSweeps load_profile_sweeps(const std::vector<std::string>& files);

struct ProfileOutcome {
  profiler::ProfileSummary summary;
  nlohmann::json json;  ///< the sweeps' document with "dry_run": false and the run's counts
};

/// Runs the sweeps on the GPU of request.options.device (needs a build with CUDA and the
/// device); throws std::runtime_error when the output cannot be written.
[[nodiscard]] ProfileOutcome run_profile_sweeps(const ProfileRequest& request, const LoadedSweeps& loaded);

}  // namespace perfcast::validation
