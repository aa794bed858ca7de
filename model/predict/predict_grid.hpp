#pragma once
/// \file predict_grid.hpp
/// Compare and sweep: one prediction per point of a grid of input files and what-if
/// overrides, run on a thread pool, results in input order (identical to serial runs:
/// every point is an independent, deterministic prediction).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/predict/predict.hpp"

namespace perfcast {

/// One axis: `key` is "system", "workload" or "plan" (a list of files) or an override path
/// such as "workload.batch_size" (a list of values).
struct GridAxis {
  std::string key;
  std::vector<std::string> values;
};

/// Parses "KEY=v1,v2,..." (ConfigError for a missing '=' or an empty value).
[[nodiscard]] GridAxis parse_grid_axis(const std::string& text, const std::string& option);

struct GridPoint {
  std::vector<std::pair<std::string, std::string>> settings;  ///< (axis key, value), in axis order
  PredictRequest request;
};

/// Most points of one --compare / --sweep grid (each is a whole prediction).
inline constexpr std::size_t kMaxGridPoints = 100'000;

/// The cartesian product of the axes over `base`; the last axis varies fastest. A grid of
/// more than kMaxGridPoints is a ConfigError, before any point is made.
[[nodiscard]] std::vector<GridPoint> expand_grid(const PredictRequest& base, const std::vector<GridAxis>& axes);

/// Runs every point on up to `threads` threads (0, or more than the machine has cores: one per core), results in point
/// order. `progress(done, total)` is called from the calling thread only. The first
/// failing point's exception (in point order) is rethrown after all threads stop.
/// With `timeout_s` > 0 (wall-clock seconds), or a limit set on the calling thread
/// (core/deadline.hpp), no point starts after that time and a point running when it passes
/// is cut between two simulation steps: both stay null ("not run").
/// As run_grid, but hands each prediction to `consume(point index, prediction)` on the
/// worker thread that made it, instead of keeping it (for searches that keep a summary
/// per point: memory stays that of one prediction per thread). `consume` must be safe to
/// call from several threads for distinct indices. Returns, per point, whether it ran.
[[nodiscard]] std::vector<bool> run_grid_each(const std::vector<GridPoint>& points, unsigned threads,
                                              const std::function<void(std::size_t, std::unique_ptr<Prediction>)>& consume,
                                              const std::function<void(std::size_t, std::size_t)>& progress = {},
                                              double timeout_s = 0);

[[nodiscard]] std::vector<std::unique_ptr<Prediction>> run_grid(const std::vector<GridPoint>& points, unsigned threads = 0,
                                                                const std::function<void(std::size_t, std::size_t)>& progress = {},
                                                                double timeout_s = 0);

}  // namespace perfcast
