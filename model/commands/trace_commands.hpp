#pragma once
/// \file trace_commands.hpp
/// `perfcast import`, `perfcast replay` and `perfcast trace-stats` as library calls on PyTorch
/// profiler traces.

#include <cstdint>
#include <string>
#include <vector>

#include "model/traces/trace_replay.hpp"

namespace perfcast {

struct TraceStatsRequest {
  std::vector<std::string> files;  ///< Kineto traces (.json, .json.gz, or a .tar.gz of several ranks')
  int top = 10;                    ///< kernels to list per trace, [0, 100000]
};

struct TraceStatsOutcome {
  std::string text;  ///< the report for people
  std::string json;  ///< as `--json` writes it
};

/// Throws ConfigError for unreadable traces or a `top` out of range.
[[nodiscard]] TraceStatsOutcome run_trace_stats(const TraceStatsRequest& request);

struct ImportRequest {
  std::vector<std::string> kineto;  ///< Kineto traces, one per rank (.json, .json.gz, or a .tar.gz of several)
  std::vector<std::string> et;      ///< execution traces of the same step, one per rank, or none
  std::string name;                 ///< workload name ("" : "imported <first trace>")
  std::int64_t batch = 0;           ///< samples in the imported window (0: unknown)
};

struct ImportOutcome {
  std::string workload;  ///< the workload file text (model "trace"), as `--out` writes it
  std::string text;      ///< the summary for people (without the output file's name)
};

/// Throws ConfigError for unreadable or inconsistent traces.
[[nodiscard]] ImportOutcome run_import(const ImportRequest& request);

struct ReplayRequest {
  std::vector<std::string> kineto;
  std::vector<std::string> et;
  ReplayOptions options;           ///< host model, kernels, infer_waits (system/calibration set from the files below)
  std::string system;              ///< system file; required with kernels predicted, refused otherwise
  std::string calibration;         ///< kernel calibration file (kernels predicted only), or ""
  std::string ranks;               ///< e.g. "0-3" (default all)
  std::string steps;               ///< ProfilerStep numbers, e.g. "1009-1011" (default all)
  /// Non-empty: also produce one measurement line per recognized op (the text names the
  /// destination in error messages, e.g. the --measurements-out file).
  std::string measurements_out;
};

struct ReplayOutcome {
  std::string text;
  std::string json;          ///< as `--json` writes it
  std::string measurements;  ///< JSON lines (when requested)
  std::string csv;           ///< one row per (rank, step): measured_s, simulated_s, error
  std::vector<std::string> warnings;
};

/// Throws ConfigError for bad input (options named as the command line spells them).
[[nodiscard]] ReplayOutcome run_replay(ReplayRequest request);

}  // namespace perfcast
