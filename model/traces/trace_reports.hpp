#pragma once
/// \file trace_reports.hpp
/// Text and JSON views of `perfcast trace-stats` and `perfcast replay`. Every JSON result
/// starts with a `context` block (version, commit, date, inputs), as `predict`'s does.

#include <string>
#include <vector>

#include "model/traces/trace_replay.hpp"
#include "model/traces/trace_stats.hpp"

namespace perfcast {

/// `top`: kernels listed per trace (the JSON lists the same number).
[[nodiscard]] std::string render_trace_stats_text(const std::vector<TraceStats>& stats, int top);
[[nodiscard]] std::string render_trace_stats_json(const std::vector<TraceStats>& stats,
                                                  const std::vector<std::string>& inputs, int top);

/// JSON: {"context", "ranks": [{"rank", "measured_s", "simulated_s", "error", "steps": [...],
/// "graph": {...}}], "families": [], "geomean_abs_error", "max_abs_error",
/// "step_geomean_abs_error", "step_max_abs_error"}. "families"
/// (per kernel family errors of predicted kernels) is empty for measured replays.
[[nodiscard]] std::string render_replay_text(const ReplayResult& r);
[[nodiscard]] std::string render_replay_json(const ReplayResult& r, const std::vector<std::string>& inputs);

}  // namespace perfcast
