/// \file source_spread.cpp
/// Disagreement between measured tables of the same hardware (source_spread.hpp).

#include "topology/source_spread.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "topology/collective_calibration.hpp"

namespace perfcast {

SourceSpread source_spread(const std::vector<CollectiveSample>& mine, const std::vector<CollectiveSample>& others) {
  constexpr double k64KiB = 64 * 1024.0, k1MiB = 1024.0 * 1024.0;
  SourceSpread out;
  std::vector<double> copy_from_1MiB, minimax_from_1MiB;
  for (const auto& a : mine) {
    if (a.bytes < k64KiB || !(a.time_s > 0)) continue;
    double closest = std::numeric_limits<double>::infinity();  // |t_B / t_A - 1| of the closest B
    double t_closest = 0;
    for (const auto& b : others) {
      if (b.kind != a.kind || b.ranks != a.ranks || b.nodes != a.nodes || b.bytes != a.bytes || !(b.time_s > 0)) continue;
      const double e = std::fabs(b.time_s / a.time_s - 1);
      if (e < closest) closest = e, t_closest = b.time_s;
    }
    if (!std::isfinite(closest)) continue;
    const double minimax = std::fabs(a.time_s - t_closest) / (a.time_s + t_closest);
    ++out.shared_sizes;
    out.max_from_64KiB = std::max(out.max_from_64KiB, closest);
    out.minimax_max_from_64KiB = std::max(out.minimax_max_from_64KiB, minimax);
    if (a.bytes >= k1MiB) {
      ++out.shared_from_1MiB;
      copy_from_1MiB.push_back(closest);
      minimax_from_1MiB.push_back(minimax);
    }
  }
  out.geomean_from_1MiB = geomean_abs(copy_from_1MiB);
  out.minimax_geomean_from_1MiB = geomean_abs(minimax_from_1MiB);
  return out;
}

}  // namespace perfcast
