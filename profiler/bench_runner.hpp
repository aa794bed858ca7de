#pragma once
/// \file bench_runner.hpp
/// Runs microbenchmark cases (sweep.hpp) on a GPU and turns them into perfcast measurements
/// (predictors/measurement.hpp). Includes no CUDA header. In a build without CUDA everything
/// here exists; BenchRunner's constructor and run_sweeps throw NoCudaDeviceError.
///
/// Timing of one case: `warmup` untimed runs, then `repetitions` timed runs, each preceded (when
/// the sweep's flush_l2 is set) by a memset of a buffer of twice the L2 size so every run starts
/// with a cold L2. Timer "cupti": each run's GPU ops are found through an external correlation
/// id pushed around its launches, and its time is the span from the first op's start to the
/// last op's end (so multi-kernel GEMMs count their gaps, as a framework would see them).
/// Timer "cuda_events" (when CUPTI cannot start): cudaEventElapsedTime between events recorded
/// around the run (adds ~2-5 us of event overhead for tiny kernels).

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "predictors/measurement.hpp"
#include "profiler/sweep.hpp"

namespace perfcast::profiler {

class BenchRunner {
 public:
  /// Selects `device`, allocates the L2 flush buffer and starts the CUPTI tracer when `use_cupti`
  /// (falling back to CUDA events if it cannot start; `timer()` says which).
  /// Throws NoCudaDeviceError without a device, std::out_of_range for a bad ordinal.
  explicit BenchRunner(int device = 0, bool use_cupti = true);
  ~BenchRunner();
  BenchRunner(const BenchRunner&) = delete;
  BenchRunner& operator=(const BenchRunner&) = delete;

  /// Measures one case. Throws std::invalid_argument for descriptors it cannot run (measured
  /// kernels, fp8 GEMMs), CudaError / std::runtime_error on failures (e.g. out of memory).
  [[nodiscard]] Measurement measure(const BenchCase& c, const SweepSettings& s);

  /// "cupti" or "cuda_events".
  [[nodiscard]] const std::string& timer() const;
  /// Why CUPTI is not used ("" when it is).
  [[nodiscard]] const std::string& cupti_error() const;
  [[nodiscard]] const DeviceFingerprint& device() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

struct ProfileOptions {
  int device = 0;
  std::size_t offset = 0;     ///< cases to skip first (over all sweeps, in order): resume a run
  std::size_t limit = 0;      ///< at most this many cases (0: all)
  double time_budget_s = 0;   ///< start no new case after this many seconds (0: no budget)
  bool progress = false;      ///< progress bar on standard error
  bool use_cupti = true;
};

struct ProfileSummary {
  std::size_t measured = 0;
  std::size_t failed = 0;
  std::size_t not_run = 0;    ///< left out by --limit or the time budget
  std::string timer;
  std::string cupti_error;
  std::vector<std::string> failures;  ///< "label: what()" of the first 20 failures
};

/// Runs the cases of `sweeps` in order and hands each measurement to `out` as soon as it exists
/// (so a file can be written incrementally). A failing case is counted and skipped.
ProfileSummary run_sweeps(const std::vector<Sweep>& sweeps, const ProfileOptions& options,
                          const std::function<void(const Measurement&)>& out);

}  // namespace perfcast::profiler
