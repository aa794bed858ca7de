#include "core/intervals.hpp"

#include <algorithm>
#include <iterator>

namespace perfcast {

namespace {

/// Merges the sorted runs of `v` that start at `starts` (ascending, first 0) pairwise until
/// one is left: O(n log runs).
void merge_runs(TimeIntervals& v, std::vector<std::size_t> starts) {
  starts.push_back(v.size());
  while (starts.size() > 2) {
    std::vector<std::size_t> next;
    std::size_t k = 0;
    for (; k + 2 < starts.size(); k += 2) {
      std::inplace_merge(v.begin() + std::ptrdiff_t(starts[k]), v.begin() + std::ptrdiff_t(starts[k + 1]),
                         v.begin() + std::ptrdiff_t(starts[k + 2]));
      next.push_back(starts[k]);
    }
    if (k + 1 < starts.size()) next.push_back(starts[k]);  // an odd run out: kept for the next round
    next.push_back(v.size());
    starts = std::move(next);
  }
}

/// Sorts `v`, which timelines hand over mostly in order: a few ascending runs (periodic
/// folding wraps the tail of an iteration to the front) are merged in O(n log runs); else
/// the longest in-order subsequence taken greedily is kept, the intervals out of order are
/// sorted apart and merged back (O(n + m log m) for m of them).
void sort_mostly_sorted(TimeIntervals& v) {
  constexpr std::size_t kMaxRuns = 16;
  std::vector<std::size_t> starts{0};
  for (std::size_t i = 1; i < v.size() && starts.size() <= kMaxRuns; ++i)
    if (v[i] < v[i - 1]) starts.push_back(i);
  if (starts.size() == 1) return;
  if (starts.size() <= kMaxRuns) return merge_runs(v, std::move(starts));
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
