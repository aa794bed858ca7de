#pragma once
/// \file kernel_rows.hpp
/// Measured kernels to compare predictions with (`perfcast kernels --measurements`): the
/// project's measurement files (JSON lines, measurement.hpp) and the public tables of
/// data/public-measurements/ (hopper-kernels/{gemm,attention,memory_bound,embedding}.csv,
/// embedding_kernel_times_h100.csv), each row turned into kernel descriptors, a measured
/// time, its source and the caveats its own text states.
///
/// A row the predictors cannot express (a composite eager op, a backward without its bytes,
/// a plain launch stream, a table given as a range of sizes, ...) is kept, with the reason,
/// so that reports count and name it. A malformed row (a wrong field count, a time or a
/// shape that is not a positive number, a missing column) is bad input: read_kernel_rows
/// throws ConfigError naming the file and the row, and nothing is returned.

#include <filesystem>
#include <string>
#include <vector>

#include "predictors/kernel_desc.hpp"

namespace perfcast {

/// Caveat weights of the fit (predictors/public_kernel_fit.hpp): a row whose GPU the source
/// does not state (inferred), the best shape of a sweep (optimistic by selection), or a kernel
/// timed inside a training step (it may share the GPU) counts half.
inline constexpr double kCaveatWeight = 0.5;

struct KernelRow {
  std::string file;            ///< the file as given
  std::string where;           ///< "line 14 (gem-00012)": the row in its file
  std::string row_id;          ///< the table's row_id, or "line N"
  std::string source;          ///< source id: the unit of weighting and of leave-one-source-out
  std::string table;           ///< report family: "gemm", "attention", "memory_bound", "embedding"
  std::string gpu;             ///< the GPU as the row names it
  /// "H100 SXM", "H100 PCIe", "H100 NVL", "H200", "H800", "GH200", or (measurement files)
  /// the device name: the system a row is predicted on is the one whose GPU has this class.
  std::string gpu_class;
  BytesPerSecond memory_bandwidth = 0;  ///< HBM rate the row's source states, replacing the class's (0: none)
  std::string implementation;  ///< as the row names it
  std::string op;              ///< operation name, as the row names it
  /// The kernels whose predicted times add up to the measurement (a fwd+bwd row: two).
  /// Empty: not expressible (not_expressible says why).
  std::vector<KernelDesc> kernels;
  std::string not_expressible;
  Seconds measured = 0;        ///< measured time of the row, s (> 0)
  double weight = 1;           ///< product of the caveat weights
  /// Timed by a harness around a Python call (Triton's do_bench), around a launch loop
  /// (CUDA events around back-to-back calls) or around each launch (an event pair per call),
  /// whose fixed cost per call the source does not state: the fit gives the source an
  /// intercept of its own (public_kernel_fit.hpp).
  bool harness_overhead = false;
  std::vector<std::string> caveats;  ///< "gpu inferred", "sweep maximum", "in situ", "hand transcribed", ...
};

/// The rows of one file: a measurement file (".jsonl") or one of the public tables
/// (recognised by its header). Throws ConfigError for a missing or unreadable file, an
/// unknown table or a bad row.
[[nodiscard]] std::vector<KernelRow> read_kernel_rows(const std::filesystem::path& file);

/// The GPU class of a GPU name ("NVIDIA H100 80GB HBM3" and "NVIDIA H100 SXM5 80GB" -> "H100 SXM",
/// "NVIDIA H200 SXM 141GB" -> "H200", "NVIDIA H100 PCIe" -> "H100 PCIe", "NVIDIA A100-SXM4-80GB"
/// and "NVIDIA A100 SXM4 80GB" -> "A100 SXM 80GB", "Tesla V100-SXM2-32GB" -> "V100 SXM", ...),
/// or the name itself for other GPUs.
[[nodiscard]] std::string gpu_class_of(const std::string& gpu_name);

}  // namespace perfcast
