#pragma once
/// \file kernel_calibration.hpp
/// Per-GPU kernel calibration fitted from measurement files (`perfcast calibrate kernels`).
///
/// GEMM, per dtype: time = overhead + max(compute_at_peak / e_compute, memory_at_peak / e_memory)
/// with the wave- and tile-quantized work terms of gemm_work(): the spec model's shape
/// with fitted efficiencies and launch overhead. Streaming kernels (elementwise, memcpy
/// by direction): time = overhead + bytes / (bandwidth x e). Efficiencies are bounded by 1
/// (never above the spec peak). Fitted by minimising the sum of |relative error|
/// (iteratively reweighted least squares; alternating regime assignment and non-negative
/// least squares, Eigen): robust to the outliers of profiler traces (a kernel delayed by
/// a concurrent stream) and to whole-microsecond durations. On a deterministic 80% of the
/// shapes; the other 20% give the held-out error.
///
/// Embedding lookups ("embedding_forward", "embedding_backward": one batched multi-table
/// kernel each, with embedding_work()'s terms of all tables together):
///   time = overhead + max(dram / e_memory, l2 / e_l2, row_rounds x row_round_time)
///          + sort / e_sort (backward: the duplicate-grouping sort)
/// where dram and sort are bytes at the HBM peak (without the spec model's f(D): small rows
/// are left to the fitted per-round latency), l2 the bytes at the L2 peak, and row_rounds
/// the dependent row fetches of one warp slot (bag waves x mean pooling: occupancy and tail).
///
/// Kernel model 2 (`kernel_model: 2`, written by `perfcast kernels --fit` from public
/// measurements, predictors/public_kernel_fit.hpp): GEMM families by dtype, fp8 scaling and
/// library ("gemm.bf16" for bf16 and fp16, "gemm.fp8", "gemm.fp8_block.deepgemm", ...) on
/// Hopper tiles (kHopperGemmTiling); attention families by pass, implementation and dtype
/// ("attention_forward.cudnn.bf16", with "attention_forward.bf16" fitted over every
/// implementation as the fallback) on attention_work()'s terms; and memory-bound kernels
/// ("elementwise") with an L2-resident regime:
///   time = overhead + bytes (1 - h) / (HBM x e_memory) + bytes h / (L2 x e_l2) + waves x wave_time,
///   h = clamp((2 C - bytes) / C, 0, 1), C = l2_resident_share x L2 capacity (0 for cold L2),
///   waves = thread_waves(): 0 unless the kernel launches one thread per element.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "predictors/estimate.hpp"
#include "predictors/kernel_desc.hpp"
#include "predictors/measurement.hpp"
#include "topology/gpu_spec.hpp"
#include "core/json_reader.hpp"

namespace perfcast {

/// Resident threads per SM on the GPUs perfcast models (compute capability 7.0, 8.0 and 9.0:
/// 2,048; CUDA C++ Programming Guide, table "Technical Specifications per Compute Capability").
inline constexpr double kResidentThreadsPerSm = 2048;

/// Waves of resident threads of a kernel that launches one thread per element: elements /
/// (SMs x kResidentThreadsPerSm); 0 for any other kernel or a GPU without an SM count.
[[nodiscard]] double thread_waves(const ElementwiseDesc& d, const GpuSpec& gpu);

struct FamilyFit {
  std::string family;      ///< "gemm.fp32", ..., "elementwise", "memcpy.h2d", ..., "embedding_forward", "embedding_backward"
  double compute_efficiency = 0;  ///< GEMM only: share of the tensor / FP32 peak
  double memory_efficiency = 0;   ///< share of HBM (or PCIe for host copies) bandwidth
  Seconds overhead = 0;           ///< fixed time per kernel
  double l2_efficiency = 0;       ///< embedding only: share of the L2 peak
  Seconds row_round_time = 0;     ///< embedding only: time per dependent row fetch of a warp slot
  double sort_efficiency = 0;     ///< embedding backward only: share of HBM the index sort reaches
  double l2_resident_share = 0;   ///< elementwise, kernel model 2: share of L2 a warm working set keeps
  /// elementwise, kernel model 2: time per wave of resident threads, s, of a kernel that
  /// launches one thread per element (its blocks' launch, one memory round trip and retire),
  /// added to the bytes' time (ElementwiseDesc::thread_per_element)
  Seconds wave_time = 0;
  std::vector<std::string> sources;  ///< kernel model 2: the sources of the rows fitted (their source ids)
  std::size_t train_samples = 0;
  std::size_t heldout_samples = 0;
  double heldout_geomean_abs_error = 0;
  double train_geomean_abs_error = 0;
};

struct KernelCalibration {
  std::string gpu;      ///< device name the measurements came from
  std::string driver, cuda_runtime, cublas;
  std::string date, commit;
  std::vector<std::string> measurements;  ///< source files
  /// Distinct Measurement::source values (traces: "FILE rank R step S"), in first-seen
  /// order; empty for our own microbenchmarks.
  std::vector<std::string> sources;
  /// Distinct Measurement::date values (when the measured run happened), sorted.
  std::vector<std::string> measured_dates;
  std::string note;  ///< free text: how the data was split, why families were left out ("" if none)
  /// 1: the spec model's work terms with fitted efficiencies (`calibrate kernels`); 2: the
  /// Hopper work terms, attention and the L2 regime (`kernels --fit`).
  int kernel_model = 1;
  /// How the fits were obtained, for the provenance line: "" (measurements of this GPU,
  /// held out by shape) or "public measurements" (rows of public sources, each family's
  /// held-out error from leaving one source out).
  std::string basis;
  std::vector<FamilyFit> fits;

  [[nodiscard]] const FamilyFit* find(const std::string& family) const;
  /// The first family of `candidates` the calibration has, or nullptr.
  [[nodiscard]] const FamilyFit* find_first(const std::vector<std::string>& candidates) const;
};

/// The calibration family of a kernel ("gemm.bf16", "elementwise", "memcpy.h2d",
/// "embedding_forward", "embedding_backward"), or ""
/// for kernels no calibrated model covers yet.
[[nodiscard]] std::string calibration_family(const KernelDesc& k);

/// Kernel model 2: the families that may cover a kernel, most specific first: a GEMM's
/// "gemm.<type>.<library>" (no library suffix for cuBLAS; <type> is "bf16" for bf16 and
/// fp16, "fp8_block" for block-scaled fp8), then "gemm.<type>"; an attention's
/// "attention_<pass>.<impl>.<dtype>", then "attention_<pass>.<dtype>" (fp16: "<impl>.fp16",
/// "<impl>.bf16", then "attention_<pass>.bf16": the same tensor-core rate); "elementwise".
[[nodiscard]] std::vector<std::string> model2_families(const KernelDesc& k);

/// Fits every family with at least 10 samples. `gpu` provides the peaks the work terms
/// are measured against. Throws std::invalid_argument when nothing can be fitted.
[[nodiscard]] KernelCalibration fit_kernel_calibration(const std::vector<Measurement>& measurements, const GpuSpec& gpu);

/// Predicts with the calibration where it covers the kernel's family, else with the
/// spec-derived predictor (Estimate::calibrated says which).
[[nodiscard]] Estimate predict_with_calibration(const KernelDesc& k, const GpuSpec& gpu, const KernelCalibration* cal);

[[nodiscard]] std::string kernel_calibration_to_json(const KernelCalibration& c);
[[nodiscard]] KernelCalibration parse_kernel_calibration(const JsonDocument& doc);

/// File name used for a GPU's calibration: its name in lower case with non-alphanumerics
/// as '_' plus ".json" ("NVIDIA H100 80GB HBM3" -> "nvidia_h100_80gb_hbm3.json").
[[nodiscard]] std::string calibration_file_name(const std::string& gpu_name);

}  // namespace perfcast
