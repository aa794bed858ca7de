#include "core/intervals.hpp"

#include <algorithm>

namespace perfcast {

TimeIntervals merge_intervals(TimeIntervals v) {
  std::sort(v.begin(), v.end());
  TimeIntervals out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second) out.back().second = std::max(out.back().second, iv.second);
    else out.push_back(iv);
  }
  return out;
}

Seconds total_length(const TimeIntervals& merged) {
  Seconds s = 0;
  for (const auto& iv : merged) s += iv.second - iv.first;
  return s;
}

Seconds overlap_length(const TimeIntervals& a, const TimeIntervals& b) {
  Seconds s = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const Seconds lo = std::max(a[i].first, b[j].first);
    const Seconds hi = std::min(a[i].second, b[j].second);
    if (hi > lo) s += hi - lo;
    if (a[i].second < b[j].second) ++i;
    else ++j;
  }
  return s;
}

}  // namespace perfcast
