#pragma once
/// \file validate_command.hpp
/// `perfcast validate` as library calls: re-summarize result files, predict PyTorch
/// measurements, or generate random DLRM configs, predict them and (unless a dry run)
/// measure them with the reference executor, appending one result line per config to
/// <out_dir>/<gpu>/<name>.jsonl (validate_harness.hpp). Each returns the command's text,
/// `--json` document and `--csv` rows.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "validation/dlrm_config_generator.hpp"
#include "validation/validate_harness.hpp"

namespace perfcast::validation {

struct ValidateRequest {
  std::string system;  ///< system file (the GPUs the executor runs on)
  std::string name;    ///< result file name ("": <system>_seed<S>, plus _<dtype> unless fp32)
  std::string out_dir = "validation/results";
  std::string interaction = "cat";  ///< cat or dot
  std::string mlp_dtype = "fp32";   ///< fp32, tf32, bf16 or fp16
  int configs = 10, first = 0, warmup = 3, iterations = 10;
  std::int64_t max_rows = GeneratorOptions{}.max_rows;
  std::uint64_t seed = 1;
  bool dry_run = false;  ///< predict only: no executor, no GPU, no result file
};

struct ValidateOutcome {
  std::string text;  ///< the report (after the per-config lines a run streams)
  std::string json;  ///< the --json document
  std::string csv;   ///< the --csv rows
  int exit_code = 0; ///< 1 when a measuring run measured nothing
};

/// `--summarize FILE...`: every result file's summary and all of them together.
[[nodiscard]] ValidateOutcome summarize_validation(const std::vector<std::string>& files);

/// `--compare FILE...`: PyTorch result files (validation/pytorch/*_bench.py) predicted on
/// the one-GPU system `system`.
[[nodiscard]] ValidateOutcome compare_validation(const std::string& system, const std::vector<std::string>& files);

/// Called after each config with its result line (format_result) and how many are done.
using ValidateProgress = std::function<void(const std::string& line, int done)>;

/// The header line a run prints first ("perfcast validate: random DLRM configs #0-#9 ...").
[[nodiscard]] std::string validate_header(const ValidateRequest& request);

/// Generates, predicts and (unless request.dry_run) measures the configs; a measuring run
/// appends its lines to the result file and needs the executor (executor_available()).
/// ConfigError for a bad system file.
[[nodiscard]] ValidateOutcome run_validate(const ValidateRequest& request, const ValidateProgress& progress);

}  // namespace perfcast::validation
