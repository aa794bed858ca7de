#include "model/traces/trace_measurements.hpp"

#include <cctype>
#include <cmath>
#include <ctime>
#include <map>

#include <fmt/format.h>

#include "model/traces/trace_kernels.hpp"
#include "predictors/kernel_calibration.hpp"
#include "core/json_reader.hpp"

namespace perfcast {
namespace {

bool in_ranges(const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges, std::int64_t x) {
  if (ranges.empty()) return true;
  for (const auto& [lo, hi] : ranges)
    if (x >= lo && x <= hi) return true;
  return false;
}

std::string ranges_text(const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges) {
  std::string out;
  for (const auto& [lo, hi] : ranges) {
    if (!out.empty()) out += ",";
    out += lo == hi ? fmt::format("{}", lo) : fmt::format("{}-{}", lo, hi);
  }
  return out;
}

/// Parses a non-negative decimal integer filling all of `s`; false otherwise.
bool parse_count(const std::string& s, std::int64_t& out) {
  if (s.empty() || s.size() > 18) return false;
  out = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    out = out * 10 + (c - '0');
  }
  return true;
}

}  // namespace

bool TraceSelection::has_rank(std::int64_t r) const { return in_ranges(ranks, r); }
bool TraceSelection::has_step(std::int64_t s) const { return in_ranges(steps, s); }

std::string TraceSelection::describe() const {
  return fmt::format("{}, {}", ranks.empty() ? "all ranks" : "ranks " + ranges_text(ranks),
                     steps.empty() ? "all steps" : "steps " + ranges_text(steps));
}

std::vector<std::pair<std::int64_t, std::int64_t>> parse_ranges(const std::string& text, const std::string& option) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    const std::size_t dash = item.find('-');
    std::int64_t lo = 0, hi = 0;
    const bool ok = dash == std::string::npos
                        ? parse_count(item, lo) && parse_count(item, hi)
                        : parse_count(item.substr(0, dash), lo) && parse_count(item.substr(dash + 1), hi);
    if (!ok || hi < lo)
      throw ConfigError(option, "",
                        fmt::format("\"{}\": expected a comma-separated list of numbers or ranges A-B with A <= B "
                                    "(e.g. 0-3 or 1009,1011-1012)",
                                    text));
    out.emplace_back(lo, hi);
    pos = comma + 1;
  }
  return out;
}

std::string kineto_epoch_date(double ts_us) {
  constexpr double kYear2001 = 978307200e6, kYear2100 = 4102444800e6;  // Unix time, microseconds
  if (!(ts_us >= kYear2001 && ts_us < kYear2100)) return "";
  const auto secs = static_cast<std::time_t>(std::floor(ts_us / 1e6));
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::vector<Measurement> trace_measurements(const KinetoTrace& t, int rank, const ExecutionTrace* et,
                                            const TraceSelection& selection) {
  std::vector<Measurement> out;
  if (!selection.has_rank(rank)) return out;
  const std::vector<TraceKernelShape> shapes = trace_kernel_shapes(t, et);
  DeviceFingerprint device;
  device.name = t.device_name();
  for (const auto& d : t.devices)
    if (d.id == t.device) device.sm_count = d.sms;
  const std::string date = kineto_epoch_date(t.origin_us);
  std::map<int, std::size_t> group_of_lead;  // lead activity -> index in `out`
  for (std::size_t ai = 0; ai < t.gpu.size(); ++ai) {
    const TraceKernelShape& sh = shapes[ai];
    if (!sh.recognized() || sh.family == TraceKernelFamily::kCollective) continue;
    const GpuActivity& a = t.gpu[ai];
    if (sh.desc) {
      if (calibration_family(*sh.desc).empty()) continue;
      const int k = t.step_of_activity(static_cast<int>(ai));
      if (k < 0) continue;
      const std::int64_t step = t.steps[static_cast<std::size_t>(k)].number;
      if (!selection.has_step(step)) continue;
      Measurement m;
      m.kernel = *sh.desc;
      m.kernel_name = a.name;
      m.timing.timer = "kineto";
      m.timing.repetitions = 1;
      m.timing.median = a.duration;
      m.device = device;
      m.date = date;
      m.source = fmt::format("{} rank {} step {}", t.file, rank, step);
      group_of_lead[static_cast<int>(ai)] = out.size();
      out.push_back(std::move(m));
    } else if (const auto it = group_of_lead.find(sh.lead); it != group_of_lead.end()) {
      out[it->second].timing.median += a.duration;  // predicted with its lead: measured together
    }
  }
  std::vector<Measurement> kept;
  for (auto& m : out) {
    if (m.timing.median <= 0) continue;
    m.timing.mean = m.timing.p10 = m.timing.p90 = m.timing.median;
    kept.push_back(std::move(m));
  }
  return kept;
}

}  // namespace perfcast
