#pragma once
/// \file grid_report.hpp
/// One table for many predictions (compare / sweep), as text, CSV (RFC 4180) or JSON,
/// and the per-rank table of one prediction as CSV. Times in seconds, memory in bytes.

#include <memory>
#include <string>
#include <vector>

#include "model/predict/predict_grid.hpp"

namespace perfcast {

[[nodiscard]] std::string render_grid_text(const std::vector<GridPoint>& points,
                                           const std::vector<std::unique_ptr<Prediction>>& results);
[[nodiscard]] std::string render_grid_csv(const std::vector<GridPoint>& points,
                                          const std::vector<std::unique_ptr<Prediction>>& results);
/// {"points": [{"settings": {...}, "result": <render_json of the point>}]}. A null result
/// (a point not run: --timeout) is a text row "not run", no CSV row, and in JSON
/// `"result": null, "not_run": "..."` with `"timed_out": true` at the top.
[[nodiscard]] std::string render_grid_json(const std::vector<GridPoint>& points,
                                           const std::vector<std::unique_ptr<Prediction>>& results);

/// One row per rank: rank, period_s, compute_busy_s, ..., memory_total_bytes.
[[nodiscard]] std::string render_ranks_csv(const Prediction& p);

/// A CSV field, quoted when it holds a comma, quote or line break (RFC 4180).
[[nodiscard]] std::string csv_field(const std::string& s);

}  // namespace perfcast
