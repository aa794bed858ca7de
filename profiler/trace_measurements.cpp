#include "profiler/trace_measurements.hpp"

#include <chrono>
#include <ctime>
#include <stdexcept>

#include <fmt/format.h>

namespace perfcast::profiler {

std::vector<Measurement> measurements_by_name(const CorrelationResult& r, const std::string& timer,
                                              const DeviceFingerprint& device, const std::string& date,
                                              const std::string& commit) {
  std::vector<Measurement> out;
  for (const auto& g : durations_by_name(r)) {
    std::vector<Seconds> s;
    s.reserve(g.durations_ns.size());
    for (auto d : g.durations_ns) s.push_back(static_cast<double>(d) * 1e-9);
    Measurement m;
    m.timing = timing_stats(s, timer);
    m.kernel = MeasuredKernelDesc{g.name, m.timing.median};
    m.kernel_name = g.name;
    m.device = device;
    m.date = date;
    m.commit = commit;
    out.push_back(std::move(m));
  }
  return out;
}

TimingStats repetition_stats(const std::vector<RepetitionTime>& reps, const std::string& timer) {
  if (reps.empty()) throw std::invalid_argument("repetition_stats: no repetitions");
  std::vector<Seconds> s;
  s.reserve(reps.size());
  for (const auto& r : reps) s.push_back(static_cast<double>(r.span_ns) * 1e-9);
  return timing_stats(std::move(s), timer);
}

std::string utc_timestamp() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec);
}

}  // namespace perfcast::profiler
