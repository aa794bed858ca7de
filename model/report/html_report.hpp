#pragma once
/// \file html_report.hpp
/// `perfcast report`: one self-contained HTML file (well-formed XHTML, inline SVG from
/// svg_plot.hpp, no scripts, no network) from perfcast's result files:
/// - predict --json: per-rank stacked bars (compute, exposed communication, exposed
///   copies, host-bound idle, other idle), per-rank memory (and host memory when tables live
///   there) and the critical rank's iteration split;
/// - comm --json: bus bandwidth against message size, one line per node count;
/// - shard --json: baselines and the best plan's iteration time, the best plan's per-rank
///   time, HBM and host memory (plans that do not fit drawn faded and marked);
/// - predict --sweep / --compare --json (a grid of points): iteration time per point, points
///   that do not fit or were not run marked;
/// - plan --json: the ranked plans' iteration times (the workload's own marked), what the
///   search covered and what screening rejected;
/// - replay --json: simulated against measured step time per rank (scatter, y = x, bands);
/// - validation result lines (JSON lines of schema perfcast.validation_result, as
///   `perfcast validate` writes them) or validate --json: predicted against measured (scatter);
/// - kernels --json: predicted against measured per row with the errors per family and
///   source, or single kernels' predicted times;
/// - trace-stats --json: each traced step's split per rank, the kernels with the most time;
/// - index-stats --json: per table, distinct and repeated rows per batch, accesses by reuse;
/// - calibrate comms / kernels --json: held-out errors against the prior; calibrate runtime
///   --json: fitted against measured runs;
/// - profile --json: cases per sweep and what the run measured.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace perfcast {

enum class ReportInputKind {
  kPredict,
  kGrid,
  kPlan,
  kComm,
  kShard,
  kReplay,
  kValidationLines,
  kKernels,
  kTraceStats,
  kIndexStats,
  kCalibration,
  kProfile
};

struct ReportInput {
  std::string file;
  ReportInputKind kind = ReportInputKind::kPredict;
  nlohmann::json doc;  ///< the result; for validation lines, an array of the lines
};

/// Reads `file` and recognises its kind by its keys; ConfigError (file, pointer, what
/// would be accepted) for anything else.
[[nodiscard]] ReportInput load_report_input(const std::string& file);

/// The HTML page with one section per input, in order. `title` heads the page.
[[nodiscard]] std::string render_html_report(const std::vector<ReportInput>& inputs, const std::string& title);

}  // namespace perfcast
