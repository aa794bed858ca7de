#pragma once
/// \file trace_measurements.hpp
/// Turns processed activity records (activity_records.hpp) into perfcast measurements
/// (predictors/measurement.hpp). CPU-only.

#include <string>
#include <vector>

#include "predictors/measurement.hpp"
#include "profiler/activity_records.hpp"

namespace perfcast::profiler {

/// One Measurement per GPU op name in `r` (kernels, memcpys, memsets): kernel =
/// MeasuredKernelDesc{name, median duration}, kernel_name = name, timing = timing_stats of
/// every occurrence (timer `timer`, "cupti" for activity records). Written by
/// measurement_to_jsonl as {"kernel": {"family": "measured", "name": ...}, "timing": ...}.
/// Ordered by total GPU time, longest first.
[[nodiscard]] std::vector<Measurement> measurements_by_name(const CorrelationResult& r, const std::string& timer,
                                                            const DeviceFingerprint& device, const std::string& date,
                                                            const std::string& commit);

/// Timing statistics of benchmark repetitions: each repetition's span (first start to last
/// end of its ops), in seconds. Throws std::invalid_argument when `reps` is empty.
[[nodiscard]] TimingStats repetition_stats(const std::vector<RepetitionTime>& reps, const std::string& timer);

/// Current UTC time as "YYYY-MM-DDTHH:MM:SSZ".
[[nodiscard]] std::string utc_timestamp();

}  // namespace perfcast::profiler
