#pragma once
/// \file calibrate_command.hpp
/// `perfcast calibrate comms|kernels|runtime` as library calls: fit the collective model to
/// nccl-tests logs or measurement tables, the kernel predictors to measurement files, or a
/// runtime profile's host cost per op to measured iteration times. Each returns its report,
/// its `--json` document and the file it would write; the caller (the command line, the
/// Python package) writes them. Bad input throws ConfigError naming the file and line or
/// JSON path; nothing is partly computed.

#include <string>
#include <vector>

namespace perfcast {

struct CalibrateCommsRequest {
  std::string system;             ///< system file the measurements come from
  std::vector<std::string> logs;  ///< nccl-tests outputs or measurement-table CSVs
  std::string collective;         ///< when the files do not say ("" = from the files)
  int ranks = 0;                  ///< when the files do not say (0 = from the files)
  std::string out;                ///< calibration file ("": <system>.comms.json beside the system)
  bool leave_one_out = false;     ///< also each rank count fitted without it
  bool leave_one_source_out = false;  ///< also each source fitted on the others
  bool force = false;             ///< write a fit that is worse than the prior on held-out sizes
  std::vector<std::string> only;  ///< measurement tables: keep sources whose GPU, URL or env contains one
};

struct CalibrateKernelsRequest {
  std::string system;                     ///< system whose GPU the measurements are of
  std::vector<std::string> measurements;  ///< measurement JSONL files
  std::string out;  ///< calibration file ("": configs/calibration/<gpu>.json beside the systems folder)
  std::vector<std::string> families;  ///< write only these fitted families (empty: all)
  std::string note;                   ///< free-text provenance recorded in the calibration
};

struct CalibrateRuntimeRequest {
  std::string system;        ///< system the runs were measured on
  std::string measurements;  ///< CSV workload,measured[,set,plan,split]
  std::string out;           ///< profile to write: NAME.json, NAME the runtime's name
  std::string base;          ///< runtime profile whose other values the fit keeps ("": the workloads' own)
  bool force = false;        ///< write the profile even when the held-out runs come out worse
};

/// What a calibration produced. `content` is empty when the fit was refused: then `errors`
/// says why (exit 1 at the command line) and nothing may be written but the report.
struct CalibrateOutcome {
  std::string text;     ///< the report, without the final "wrote FILE" line
  std::string json;     ///< the `--json` document; its "written" is the file or null
  std::string out;      ///< the calibration file
  std::string content;  ///< its content ("" when refused)
  std::string usage;    ///< how to use the written file, after "wrote FILE" ("" none)
  std::vector<std::string> warnings;  ///< to log as warnings
  std::vector<std::string> errors;    ///< to log as errors; non-empty: the fit was refused
};

[[nodiscard]] CalibrateOutcome calibrate_comms(const CalibrateCommsRequest& request);
[[nodiscard]] CalibrateOutcome calibrate_kernels(const CalibrateKernelsRequest& request);
/// Also refuses (ConfigError) an `out` that is not NAME.json with a runtime name, or whose
/// folder does not exist, before fitting.
[[nodiscard]] CalibrateOutcome calibrate_runtime(const CalibrateRuntimeRequest& request);

}  // namespace perfcast
