#pragma once
/// \file provenance.hpp
/// How each number of a prediction was obtained: per predictor family and for the
/// collectives, calibrated (from which file, measured on what, with its held-out error) or
/// spec-derived. The text report prints the headline under the iteration time; the JSON
/// report lists the entries in its context.

#include <optional>
#include <string>
#include <vector>

#include "model/predict/runtime_profile.hpp"
#include "predictors/kernel_calibration.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

struct ProvenanceEntry {
  std::string what;        ///< "one-node collectives", "GEMM", "host", ...
  bool calibrated = false;
  std::string source;      ///< calibration file ("" when spec-derived)
  std::string measured_on; ///< GPU / measurements the fit came from
  std::string basis;       ///< "nccl-tests", "profiler trace", or the spec constants used
  /// Worst held-out geomean |error| of the fits behind it; < 0 when none was measured.
  double heldout_error = -1;
  bool set_by_user = false;  ///< values given on the command line (--set), neither fitted nor spec-derived
  /// Calibrated at other node counts than the system's: modelled there with the fit's
  /// per-hop and per-byte terms (the basis names the counts).
  bool extrapolated = false;
};

/// Entries for a prediction on `system` with the kernel calibration `kernels` (read from
/// `kernel_file`), in a fixed order: one-node and multi-node collectives, GEMM, attention,
/// embedding, elementwise, memcpy, host (calibrated when `runtime` holds a fit). Throws
/// ConfigError for an unreadable comms file.
[[nodiscard]] std::vector<ProvenanceEntry> prediction_provenance(const SystemSpec& system,
                                                                 const std::optional<KernelCalibration>& kernels,
                                                                 const std::string& kernel_file,
                                                                 const RuntimeProfile* runtime = nullptr);

/// Marks the "host" entry as set with --set (`values`: the host values given, as JSON).
void mark_host_set_by_override(std::vector<ProvenanceEntry>& entries, const std::string& values);

/// "calibrated: one-node collectives (nccl-tests, 3.1% held-out), ...; spec-derived: GEMM, ...;
/// set by --set: host"
[[nodiscard]] std::string provenance_headline(const std::vector<ProvenanceEntry>& entries);

}  // namespace perfcast
