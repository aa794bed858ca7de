#pragma once
/// \file html_report.hpp
/// `perfcast report`: one self-contained HTML file (well-formed XHTML, inline SVG from
/// svg_plot.hpp, no scripts, no network) from perfcast's result files:
/// - predict --json: per-rank stacked bars (compute, exposed communication, exposed
///   copies, host-bound idle, other idle) and the critical rank's iteration split;
/// - comm --json: bus bandwidth against message size, one line per node count;
/// - shard --json: baselines and the best plan's iteration time, the best plan's per-rank
///   time and memory;
/// - replay --json: simulated against measured step time per rank (scatter, y = x, bands);
/// - validation result lines (JSON lines of schema perfcast.validation_result, as
///   `perfcast validate` writes them): predicted against measured (scatter).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace perfcast {

enum class ReportInputKind { kPredict, kComm, kShard, kReplay, kValidationLines };

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
