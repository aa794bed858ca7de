#include "core/intervals.hpp"

#include <algorithm>
#include <iterator>

namespace perfcast {

namespace {

/// Sorts `v`, which timelines hand over mostly in order: the in-order run is kept, the few
/// intervals out of order are sorted apart and merged back (O(n + m log m) for m of them).
void sort_mostly_sorted(TimeIntervals& v) {
  if (std::is_sorted(v.begin(), v.end())) return;
  TimeIntervals run, rest;
  run.reserve(v.size());
  for (const auto& iv : v) (run.empty() || !(iv < run.back()) ? run : rest).push_back(iv);
  std::sort(rest.begin(), rest.end());
  v.clear();
  std::merge(run.begin(), run.end(), rest.begin(), rest.end(), std::back_inserter(v));
}

}  // namespace

TimeIntervals merge_intervals(TimeIntervals v) {
  sort_mostly_sorted(v);
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
