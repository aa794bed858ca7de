#pragma once
/// \file kernels_command.hpp
/// `perfcast kernels` as a library call: predict single kernels on a system (from
/// command-line specs, kernel_spec_args.hpp), or every row of measurement files
/// (predictors/kernel_rows.hpp) on the system of its GPU, with per-row, per-family and
/// per-source errors; optionally leave one source out, and fit and write the kernel-model-2
/// calibrations of given systems (predictors/public_kernel_fit.hpp).

#include <string>
#include <utility>
#include <vector>

namespace perfcast {

struct KernelsRequest {
  /// System files (--system, repeatable): single kernels use the first; a measured row uses
  /// the one whose GPU class is the row's (kernel_rows.hpp gpu_class_of).
  std::vector<std::string> systems;
  std::vector<std::string> gemm, attention, memory_bound, embedding;  ///< single kernels (KEY=VALUE lists)
  std::vector<std::string> measurements;  ///< measurement files (.jsonl, public CSV tables)
  /// Kernel calibration for every system instead of each system's automatic one
  /// (configs/calibration/<gpu>.json beside the systems folder).
  std::string calibration;
  bool spec_derived = false;         ///< use no calibration
  bool leave_one_source_out = false; ///< predict each measured row by a fit on the other sources' rows
  /// Systems whose GPU's calibration to fit on the measurements and write (--fit,
  /// repeatable); the fit also runs leave-one-source-out for the held-out errors it records.
  std::vector<std::string> fit_systems;
  std::string fit_dir;  ///< where the fitted files go ("": ../calibration/ beside each system file)
  std::string note;     ///< recorded in the fitted calibrations
};

struct KernelsOutcome {
  std::string text;  ///< the report
  std::string json;  ///< {"context", "kernels"} or {"context", "rows", "summary", "not_expressible", "fit"}
  std::string csv;   ///< one line per kernel or measured row
  /// Calibration files to write (path, content), when fitting.
  std::vector<std::pair<std::string, std::string>> calibrations;
};

/// Throws ConfigError for bad arguments, bad systems, measurement files or rows (naming
/// the file and row); nothing is partly computed.
[[nodiscard]] KernelsOutcome run_kernels(const KernelsRequest& request);

}  // namespace perfcast
