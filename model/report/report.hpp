#pragma once
/// \file report.hpp
/// Views of a prediction: a text report for people, a JSON object for programs (with a
/// `context` block first), and a Chrome trace (one process per rank, one thread per
/// host thread and stream) that Perfetto and chrome://tracing open.

#include <string>
#include <vector>

#include "model/predict/predict.hpp"

namespace perfcast {

[[nodiscard]] std::string render_text(const Prediction& p, int top_ops = 8);
[[nodiscard]] std::string render_json(const Prediction& p);
/// The whole trace as a string (small predictions and tests; write_chrome_trace streams).
[[nodiscard]] std::string render_chrome_trace(const Prediction& p);

/// Which events a trace keeps (empty: all).
struct ChromeTraceOptions {
  std::vector<int> ranks;       ///< ranks (pid) to write
  std::vector<int> iterations;  ///< simulated iterations to write (0-based)
};

/// Throws ConfigError naming --trace-ranks / --trace-iterations for a rank or iteration
/// outside the prediction.
void check_trace_options(const Prediction& p, const ChromeTraceOptions& options);

/// Streams the Chrome trace to `path`, gzip-compressed when it ends in ".gz": events are
/// formatted one at a time into a 1 MiB buffer (no JSON document in memory), into a
/// temporary file renamed over `path` at the end. Collective events carry bytes,
/// algorithm and protocol. Throws ConfigError for a rank or iteration out of range,
/// std::runtime_error when the file cannot be written.
void write_chrome_trace(const Prediction& p, const std::string& path, const ChromeTraceOptions& options = {});

/// Writes the timeline as PyTorch profiler (Kineto) JSON traces, DIR/rank<N>.json per
/// rank kept by `options` (model/report/kineto_trace_writer.cpp says what each holds), each
/// written to a temporary file and renamed. Throws ConfigError for a filter out of range or
/// `dir` naming a file, std::runtime_error when a file cannot be written.
void write_kineto_traces(const Prediction& p, const std::string& dir, const ChromeTraceOptions& options = {});

/// The `context` block of every JSON result: version, commit, date, inputs.
[[nodiscard]] std::string context_json(const Prediction& p);

}  // namespace perfcast
