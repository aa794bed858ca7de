#pragma once
/// \file trace_measurements.hpp
/// Kernel measurements from a PyTorch profiler (Kineto) trace: the shapes the importer
/// recognizes (trace_kernels.hpp) paired with the kernels' measured durations, as
/// Measurement records (predictors/measurement.hpp) that `perfcast calibrate kernels` fits
/// (`perfcast replay --measurements-out FILE`).
///
/// One Measurement per recognized op whose kernels one KernelDesc of a calibratable family
/// describes (calibration_family() non-empty: GEMM, elementwise, memcpy, FBGEMM TBE
/// forward/backward): the descriptor of the group's lead kernel, and as the time the sum of
/// the durations of the group's kernels (a GEMM with its split-K reduce, a TBE backward
/// with its sort kernels), exactly what `replay --kernels predicted` compares a prediction
/// with. Timer "kineto", repetitions 1 (median = mean = p10 = p90 = the duration, stddev 0).
/// Device: deviceProperties' name and SM count of the rank's GPU (the trace has no clocks,
/// driver or runtime version: those stay 0 / ""). Date: the trace's time origin as UTC
/// ISO 8601 when its timestamps are Unix-epoch microseconds (libkineto's clock on the
/// traces we have), else "". Commit "". Source: "FILE rank R step N".
/// Groups with a zero measured duration, collectives and unrecognized kernels are skipped.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/traces/kineto_trace.hpp"
#include "predictors/measurement.hpp"

namespace perfcast {

struct ExecutionTrace;

/// Which ranks and steps (ProfilerStep#N numbers) an operation covers: inclusive ranges;
/// an empty list selects all.
struct TraceSelection {
  std::vector<std::pair<std::int64_t, std::int64_t>> ranks, steps;
  [[nodiscard]] bool has_rank(std::int64_t r) const;
  [[nodiscard]] bool has_step(std::int64_t s) const;
  [[nodiscard]] bool empty() const { return ranks.empty() && steps.empty(); }
  /// "ranks 0-3, steps 1009-1011" ("all ranks", "all steps" for empty lists).
  [[nodiscard]] std::string describe() const;
};

/// Parses "0-3", "1009,1011-1012" into inclusive ranges. Throws ConfigError naming
/// `option` for anything else (negative numbers, a range whose end is before its start).
[[nodiscard]] std::vector<std::pair<std::int64_t, std::int64_t>> parse_ranges(const std::string& text,
                                                                               const std::string& option);

/// Measurements of one rank's trace (see file comment). `rank`: the trace's rank
/// (distributedInfo, else its position in the input); `et`: its linked execution trace or
/// nullptr. Only groups whose lead kernel was launched in a selected step, and nothing
/// when `rank` is not selected.
[[nodiscard]] std::vector<Measurement> trace_measurements(const KinetoTrace& t, int rank, const ExecutionTrace* et,
                                                          const TraceSelection& selection);

/// UTC "YYYY-MM-DDTHH:MM:SSZ" of a Kineto timestamp in microseconds when it is a plausible
/// Unix-epoch time (years 2001 to 2099), else "".
[[nodiscard]] std::string kineto_epoch_date(double ts_us);

}  // namespace perfcast
