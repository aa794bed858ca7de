#include "core/units.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "core/limits.hpp"

namespace perfcast {
namespace {

struct UnitEntry {
  std::string_view symbol;
  Dimension dim;
  double factor;
};

// Longest symbols first is not needed: the whole suffix must match exactly.
constexpr std::array kUnits = {
    UnitEntry{"s", Dimension::kTime, 1.0},
    UnitEntry{"ms", Dimension::kTime, 1e-3},
    UnitEntry{"us", Dimension::kTime, 1e-6},
    UnitEntry{"ns", Dimension::kTime, 1e-9},
    UnitEntry{"B", Dimension::kBytes, 1.0},
    UnitEntry{"KB", Dimension::kBytes, 1e3},
    UnitEntry{"MB", Dimension::kBytes, 1e6},
    UnitEntry{"GB", Dimension::kBytes, 1e9},
    UnitEntry{"TB", Dimension::kBytes, 1e12},
    UnitEntry{"KiB", Dimension::kBytes, 1024.0},
    UnitEntry{"MiB", Dimension::kBytes, 1024.0 * 1024.0},
    UnitEntry{"GiB", Dimension::kBytes, 1024.0 * 1024.0 * 1024.0},
    UnitEntry{"TiB", Dimension::kBytes, 1024.0 * 1024.0 * 1024.0 * 1024.0},
    UnitEntry{"B/s", Dimension::kBandwidth, 1.0},
    UnitEntry{"KB/s", Dimension::kBandwidth, 1e3},
    UnitEntry{"MB/s", Dimension::kBandwidth, 1e6},
    UnitEntry{"GB/s", Dimension::kBandwidth, 1e9},
    UnitEntry{"TB/s", Dimension::kBandwidth, 1e12},
    UnitEntry{"KiB/s", Dimension::kBandwidth, 1024.0},
    UnitEntry{"MiB/s", Dimension::kBandwidth, 1024.0 * 1024.0},
    UnitEntry{"GiB/s", Dimension::kBandwidth, 1024.0 * 1024.0 * 1024.0},
    UnitEntry{"b/s", Dimension::kBandwidth, 1.0 / 8},
    UnitEntry{"Kb/s", Dimension::kBandwidth, 1e3 / 8},
    UnitEntry{"Mb/s", Dimension::kBandwidth, 1e6 / 8},
    UnitEntry{"Gb/s", Dimension::kBandwidth, 1e9 / 8},
    UnitEntry{"Tb/s", Dimension::kBandwidth, 1e12 / 8},
    UnitEntry{"FLOP/s", Dimension::kFlopRate, 1.0},
    UnitEntry{"GFLOP/s", Dimension::kFlopRate, 1e9},
    UnitEntry{"TFLOP/s", Dimension::kFlopRate, 1e12},
    UnitEntry{"PFLOP/s", Dimension::kFlopRate, 1e15},
    UnitEntry{"Hz", Dimension::kFrequency, 1.0},
    UnitEntry{"KHz", Dimension::kFrequency, 1e3},
    UnitEntry{"MHz", Dimension::kFrequency, 1e6},
    UnitEntry{"GHz", Dimension::kFrequency, 1e9},
};

/// The stated range of each dimension in SI (core/limits.hpp); zero is allowed for
/// times, sizes and clocks (measurements write "0MHz" for a clock not known), not for
/// bandwidths and FLOP rates (a time divided by zero would be infinite).
struct Range {
  double lo, hi;
  bool zero_ok;
};

Range range_of(Dimension d) {
  switch (d) {
    case Dimension::kTime: return {limits::kMinTime, limits::kMaxTime, true};
    case Dimension::kBytes: return {limits::kMinBytes, limits::kMaxBytesQuantity, true};
    case Dimension::kBandwidth: return {limits::kMinBandwidth, limits::kMaxBandwidth, false};
    case Dimension::kFlopRate: return {limits::kMinFlopRate, limits::kMaxFlopRate, false};
    case Dimension::kFrequency: return {limits::kMinFrequency, limits::kMaxFrequency, true};  // 0: clock not known
  }
  return {0, 0, false};
}

}  // namespace

std::string_view dimension_example(Dimension d) {
  switch (d) {
    case Dimension::kTime: return "\"5us\"";
    case Dimension::kBytes: return "\"80GiB\"";
    case Dimension::kBandwidth: return "\"900GB/s\"";
    case Dimension::kFlopRate: return "\"989TFLOP/s\"";
    case Dimension::kFrequency: return "\"1.98GHz\"";
  }
  return "";
}

std::string_view dimension_name(Dimension d) {
  switch (d) {
    case Dimension::kTime: return "a time";
    case Dimension::kBytes: return "a size";
    case Dimension::kBandwidth: return "a bandwidth";
    case Dimension::kFlopRate: return "a FLOP rate";
    case Dimension::kFrequency: return "a frequency";
  }
  return "";
}

double parse_quantity(std::string_view text, Dimension expected) {
  auto fail = [&](std::string_view why) -> double {
    throw std::invalid_argument(fmt::format("expected {} such as {}, got \"{}\" ({})", dimension_name(expected),
                                            dimension_example(expected), text, why));
  };
  std::size_t pos = 0;
  while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  const std::size_t num_begin = pos;
  while (pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.' ||
                               text[pos] == 'e' || text[pos] == 'E' || text[pos] == '-' || text[pos] == '+')) {
    // 'e' followed by a letter that is not a digit/sign belongs to the unit (none of ours start with e).
    ++pos;
  }
  if (pos == num_begin) return fail("no number");
  double value = 0.0;
  const auto* first = text.data() + num_begin;
  const auto* last = text.data() + pos;
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec == std::errc::result_out_of_range) return fail("the number is out of the range of a double");
  if (ec != std::errc() || ptr != last) return fail("malformed number");
  while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  std::string_view unit = text.substr(pos);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.back()))) unit.remove_suffix(1);
  if (unit.empty()) return fail("missing unit");
  for (const auto& u : kUnits) {
    if (u.symbol == unit) {
      if (u.dim != expected) return fail(fmt::format("\"{}\" is {}", unit, dimension_name(u.dim)));
      if (!std::isfinite(value)) return fail("not finite");
      if (value < 0) return fail("negative");
      const double si = value * u.factor;
      const Range r = range_of(expected);
      if (si == 0 && r.zero_ok) return 0.0;
      if (!(si >= r.lo && si <= r.hi))
        return fail(fmt::format("outside the supported range {:g} to {:g} in SI units{}", r.lo, r.hi,
                                r.zero_ok ? ", or 0" : ""));
      return si;
    }
  }
  return fail(fmt::format("unknown unit \"{}\"", unit));
}

std::string format_time(Seconds s) {
  const double a = std::fabs(s);
  if (a >= 1.0) return fmt::format("{:.3f} s", s);
  if (a >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  if (a >= 1e-6) return fmt::format("{:.1f} us", s * 1e6);
  return fmt::format("{:.0f} ns", s * 1e9);
}

std::string format_bytes(Bytes b) {
  const double a = std::fabs(b);
  constexpr double kKi = 1024.0;
  if (a >= kKi * kKi * kKi) return fmt::format("{:.2f} GiB", b / (kKi * kKi * kKi));
  if (a >= kKi * kKi) return fmt::format("{:.2f} MiB", b / (kKi * kKi));
  if (a >= kKi) return fmt::format("{:.2f} KiB", b / kKi);
  return fmt::format("{:.0f} B", b);
}

}  // namespace perfcast
