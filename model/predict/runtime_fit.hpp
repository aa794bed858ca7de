#pragma once
/// \file runtime_fit.hpp
/// `perfcast calibrate runtime`: fits a runtime profile's host cost per op (`op_overhead`) to
/// measured iteration times of the user's own runs, checks it on held-out runs, and writes
/// a profile (configs/runtimes/<name>.json) that records how it was made.
///
/// Measurements: a CSV with a header naming at least `workload` and `measured` (an iteration
/// time with its unit, e.g. "16.7ms", or seconds), optionally `set` (what-if overrides as
/// `predict --set` takes them, separated by ';'), `plan` (a DLRM sharding plan) and `split`
/// (`fit` or `heldout`; absent or empty: every third run is held out, the 3rd, 6th, ...).
/// Relative paths are relative to the CSV's folder.
///
/// The fit predicts every run on `system` with the base runtime profile and its op_overhead
/// replaced, over a grid (0, 1 us to 7.5 ms at 8 points per decade, and 10 ms; then two
/// rounds of 40 steps between the best point's neighbours), and keeps the value with the
/// smallest mean |error| on the fit runs (the mean, as the shipped profiles' fits: a geomean
/// lets one exact run decide). It refuses runs whose error hardly changes over the grid
/// (GPU-bound) and a best value at 10 ms, and reports the share of the fitted time that the host
/// cost adds (RuntimeFit::host_share). The profile written is the base profile with that
/// op_overhead and a new `fit` block.

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/units.hpp"

namespace perfcast {

struct StepMeasurement {
  std::string workload;                ///< path
  std::optional<std::string> plan;     ///< path
  std::vector<std::string> overrides;  ///< "PATH=VALUE"
  Seconds measured = 0;
  bool heldout = false;
  int line = 0;  ///< in the CSV, for messages
};

/// Reads the measurement CSV. Throws ConfigError naming the file and line (a missing
/// column, a time that is not a positive duration, an unknown split).
[[nodiscard]] std::vector<StepMeasurement> read_step_measurements(const std::string& path);

/// A fit that cannot be made from the runs (they do not depend on the host cost, or need
/// more than the grid holds): `calibrate runtime` exits 1 with the message.
class FitRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RuntimeFitRow {
  StepMeasurement run;
  Seconds base = 0;    ///< predicted with the base profile as it is
  Seconds fitted = 0;  ///< predicted with the fitted op_overhead
};

struct RuntimeFit {
  std::string base_runtime;      ///< profile name
  std::string base_file;         ///< its path
  Seconds op_overhead = 0;       ///< fitted, on the base profile's CPU scale (see runtime_fit.cpp)
  std::vector<RuntimeFitRow> rows;
  double fit_mean_abs_error = 0, fit_geomean_abs_error = 0;
  double heldout_geomean_abs_error = -1, base_heldout_geomean_abs_error = -1;  ///< < 0: no held-out runs
  int fit_runs = 0, heldout_runs = 0;
  /// Mean over the fit runs of the share of the fitted prediction that the host cost adds,
  /// 1 - (predicted with op_overhead 0) / (predicted with the fit). Small (below
  /// kLowHostShare): the runs are GPU-bound at the fitted value, and the host cost only
  /// closes a gap that slower kernels than predicted may cause as well.
  double host_share = 0;
};

/// Below this host share a fit is reported with a warning (calibrate kernels first).
inline constexpr double kLowHostShare = 0.25;

/// Fits op_overhead on `system` (a system file) with base runtime `base_runtime` ("": the
/// runs' own, named in their workloads or their kind's default, which must agree). Throws
/// ConfigError when no run is in the fit part, the runs' runtimes differ, or a run cannot
/// be predicted (naming its line); FitRefused when the runs do not constrain the fit.
[[nodiscard]] RuntimeFit fit_runtime_op_overhead(const std::string& system, const std::vector<StepMeasurement>& runs,
                                                 const std::string& base_runtime, const std::string& measurements_file);

/// The profile to write: the base profile's document with the fitted op_overhead, a `name`,
/// and a `fit` block (measured_on, method, heldout, its geomean |error|, the CPU).
[[nodiscard]] std::string fitted_runtime_json(const RuntimeFit& fit, const std::string& system, const std::string& name,
                                              const std::string& measurements_file);

}  // namespace perfcast
