#pragma once
/// \file host_grid.hpp
/// Grid search of a runtime profile's two host op overheads (forward and backward, us), as the
/// accuracy checks in bench/ fit them: each point is scored by the caller (a mean |error| over
/// the rows it fits on) and given to the predictions as --set overrides.

#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace perfcast::bench {

/// `--set` overrides of the runtime's forward and backward host op overheads, microseconds,
/// and, when given, of its extra host time per FP8 module call (host.fp8_module_overhead).
inline std::vector<std::string> host_op_overrides(double forward_us, double backward_us,
                                                  std::optional<double> fp8_module_us = std::nullopt) {
  std::vector<std::string> o{fmt::format("runtime.host.op_overhead={}us", forward_us),
                             fmt::format("runtime.host.backward_op_overhead={}us", backward_us)};
  if (fp8_module_us) o.push_back(fmt::format("runtime.host.fp8_module_overhead={}us", *fp8_module_us));
  return o;
}

struct HostFit {
  double forward_us = 0, backward_us = 0;
  double error = 1e30;  ///< the score of the best point (1e30: none scored yet)
};

/// The point of forward x backward (us) with the smallest `error(forward, backward)`, or `best`
/// when none beats it; on ties the first point, forward varying slowest.
template <typename Error>
HostFit best_host_on_grid(const std::vector<double>& forward_us, const std::vector<double>& backward_us, Error error,
                          HostFit best = {}) {
  for (double f : forward_us) {
    for (double b : backward_us) {
      const double e = error(f, b);
      if (e < best.error) best = {f, b, e};
    }
  }
  return best;
}

/// `from`, `from + step`, ... up to `to` (inclusive).
inline std::vector<double> grid_steps(double from, double to, double step) {
  std::vector<double> v;
  for (double x = from; x <= to; x += step) v.push_back(x);
  return v;
}

}  // namespace perfcast::bench
