#pragma once
/// \file intervals.hpp
/// Time intervals [start, end) in seconds: merging, total length and the length of an
/// intersection. Used by the timeline analysis of predictions and by trace statistics.

#include <utility>
#include <vector>

#include "core/units.hpp"

namespace perfcast {

using TimeIntervals = std::vector<std::pair<Seconds, Seconds>>;

/// Sorted, overlapping and touching intervals merged, empty ones dropped.
[[nodiscard]] TimeIntervals merge_intervals(TimeIntervals v);

/// Sum of the lengths of merged intervals.
[[nodiscard]] Seconds total_length(const TimeIntervals& merged);

/// Length of the intersection of two merged lists.
[[nodiscard]] Seconds overlap_length(const TimeIntervals& a, const TimeIntervals& b);

}  // namespace perfcast
