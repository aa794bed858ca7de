#pragma once
/// \file validate_harness.hpp
/// The loop behind `perfcast validate`: generate a random DLRM config -> predict it on the
/// system (predict_parsed, with whatever kernel calibration the system's GPU has) ->
/// measure it -> error = predicted / measured - 1 -> one JSON line, flushed before the
/// next config starts (an interrupted run keeps every finished config). The measuring step
/// is a function: the CLI binds it to the reference executor (run_dlrm), tests to a fake.
///
/// Result lines (schema "perfcast.validation_result" 1.0), one JSON object per line:
///   {"schema", "schema_version", "index", "seed", "system", "gpu", "driver", "cuda",
///    "date", "commit", "version", "config" (the workload document; parse_workload reads it),
///    "plan" (sharder name), "description", "predicted_s", "measured_s", "error",
///    "kernel_calibration", "measurement" {"median_s", "p10_s", "p90_s", "warmup",
///    "iterations", "world", "timer", "first_loss", "last_loss"}}
/// A config whose measurement failed has "measured_s": null, "error": null, "failure": why.
/// Times in seconds; error is the reference paper's signed relative error (section 2).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/system_spec.hpp"
#include "validation/dlrm_config_generator.hpp"
#include "core/error_stats.hpp"

namespace perfcast::validation {

/// One measured config, seconds.
struct Measured {
  double median_s = 0, p10_s = 0, p90_s = 0;
  int world = 1;
  std::string timer;
  std::string gpu, driver, cuda;  ///< the device that ran it ("" = unknown)
  double first_loss = 0, last_loss = 0;
};

/// Measures one config; throws on failure (the harness records the message and goes on).
using MeasureFn = std::function<Measured(const GeneratedConfig&)>;

/// Where and when: written into every line. Device fields are overridden by what the
/// measurement reports when it names a device.
struct Provenance {
  std::string gpu, driver, cuda;
  std::string date;     ///< ISO 8601 UTC
  std::string commit;   ///< perfcast's git commit
  std::string version;  ///< perfcast's version
};

struct HarnessOptions {
  std::uint64_t seed = 1;
  int configs = 10;
  int first_index = 0;  ///< configs first_index .. first_index + configs - 1 (split long runs)
  int warmup = 3;       ///< recorded in each line (the measure function applies them)
  int iterations = 10;
  GeneratorOptions generator;
};

struct ConfigResult {
  GeneratedConfig config;
  std::string description;
  double predicted_s = 0;
  std::string kernel_calibration;       ///< calibration file the prediction used, "" = spec-derived
  std::optional<Measured> measured;     ///< empty: dry run or failure
  std::optional<double> error;          ///< predicted / measured - 1
  std::string failure;                  ///< why the measurement failed, "" otherwise
};

struct HarnessResult {
  std::vector<ConfigResult> results;
  ErrorSummary summary;  ///< over the configs with an error
  int failed = 0;
};

/// Runs `options.configs` configs (indices first_index .. first_index + configs - 1). `measure` empty: dry run (no
/// measurement, no lines written). `jsonl` (may be null) receives one line per config,
/// flushed. `on_result(result, done)` is called after each config (progress, printing).
[[nodiscard]] HarnessResult run_validation(const SystemSpec& system, const HarnessOptions& options, const MeasureFn& measure,
                                           std::ostream* jsonl, const Provenance& provenance,
                                           const std::function<void(const ConfigResult&, int)>& on_result = {});

/// The JSON line of one result (without the trailing newline).
[[nodiscard]] nlohmann::json result_line(const ConfigResult& r, const SystemSpec& system, const HarnessOptions& options,
                                         const Provenance& provenance);

/// One line of text: "#3 heavy, 12 tables, ...  predicted 1.234 ms  measured 1.300 ms  error -5.08%".
[[nodiscard]] std::string format_result(const ConfigResult& r);

/// Results re-read from existing result files (`perfcast validate --summarize`).
struct ResultFileSummary {
  std::string file;
  std::size_t lines = 0;           ///< result lines read
  std::size_t failed = 0;          ///< lines without a measurement
  std::vector<double> errors;      ///< recomputed from predicted_s and measured_s
  std::vector<std::string> gpus;   ///< distinct "gpu" values, in order of appearance
  std::vector<std::string> systems;
  ErrorSummary summary;
};

/// Reads result files (JSON lines; blank lines skipped). Throws ConfigError naming the
/// file, the line and the field for a line that is not a result.
[[nodiscard]] std::vector<ResultFileSummary> summarize_result_files(const std::vector<std::filesystem::path>& files);

/// Text: one line per file and the total ("geomean |error| 4.21% over 50 configs ...").
[[nodiscard]] std::string render_file_summaries(const std::vector<ResultFileSummary>& files);

/// "4.21% geomean |error|, MAPE 5.02%, max 12.3%, bias -1.10% (50 configs)".
[[nodiscard]] std::string format_summary(const ErrorSummary& s);

/// One PyTorch benchmark line (validation/pytorch/*_bench.py, schema
/// "perfcast.pytorch_result") predicted on a one-GPU system.
struct PytorchComparison {
  std::string source;   ///< "<file> line <n>"
  std::string model;    ///< "dlrm" or "transformer"
  std::string workload; ///< workload name
  double measured_s = 0, predicted_s = 0, error = 0;
};

/// Reads PyTorch result lines and predicts each line's "config" (DLRM: table-wise
/// round-robin plan; transformer: its parallelism resolved on the system). The benchmarks
/// run on one GPU, so `system` must have one (ConfigError otherwise). Throws ConfigError
/// naming file and line for a bad line.
[[nodiscard]] std::vector<PytorchComparison> compare_pytorch_files(const SystemSpec& system,
                                                                   const std::vector<std::filesystem::path>& files);

/// A file-name-safe form of a GPU name: "NVIDIA H100 80GB HBM3" -> "nvidia_h100_80gb_hbm3".
[[nodiscard]] std::string safe_file_name(const std::string& s);

}  // namespace perfcast::validation
