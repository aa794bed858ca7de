#pragma once
/// \file utc_time.hpp
/// The current time as the "date" field of every result's context block and of measurement
/// and validation lines: ISO 8601 in UTC, seconds resolution, e.g. "2026-11-22T16:25:41Z".

#include <string>

namespace perfcast {

[[nodiscard]] std::string utc_now_iso8601();

/// Today's UTC date, "2026-11-22": the "date" a calibration records.
[[nodiscard]] std::string utc_today();

}  // namespace perfcast
