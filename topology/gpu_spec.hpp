#pragma once
/// \file gpu_spec.hpp
/// One GPU as the spec sheet describes it, plus the named efficiency factors that turn
/// spec peaks into spec-derived predictions. Calibrated predictors (configs/calibration/)
/// replace the efficiency factors for the GPUs that have been measured.

#include <string>

#include "core/dtype.hpp"
#include "core/units.hpp"

namespace perfcast {

/// Fractions of spec peaks that real kernels reach, used by the spec-derived predictors.
/// Defaults and their sources (see also `perfcast list`):
struct EfficiencyFactors {
  /// Dense GEMM FLOP/s over spec peak. 0.77 = measured A100 FP32 15027 of 19500 GFLOP/s
  /// (gpuroofperf-toolkit figures quoted in docs/reference-paper.md section 3).
  double gemm = 0.77;
  /// Streaming HBM bytes/s over spec peak. 0.89 = measured A100 1391 of 1555 GB/s
  /// (same source).
  double memory = 0.89;
  /// Concat / copy kernels bytes/s over spec peak. 0.79: the reference model's concat
  /// constant (docs/reference-paper.md section 3, "0.79*peak DRAM BW").
  double copy = 0.79;
  /// Shortest time any kernel takes on the GPU (launch-to-retire of an empty kernel), s.
  /// 2us: assumed from the common 2-3 us floor of tiny kernels; a kernel calibration replaces it.
  Seconds min_kernel_time = 2e-6;
};

struct GpuSpec {
  std::string name;            ///< marketing name, e.g. "NVIDIA H100 SXM5 80GB"
  int sm_count = 0;            ///< streaming multiprocessors
  /// CUDA compute capability, e.g. 9.0 for Hopper, 8.0 for A100; 0 when the file states none.
  /// Software stacks choose kernels by it (Transformer Engine's fused attention on 9.0+).
  double compute_capability = 0;
  Hertz boost_clock = 0;       ///< max SM clock
  Bytes memory = 0;            ///< HBM capacity
  BytesPerSecond memory_bandwidth = 0;  ///< HBM peak
  Bytes l2_cache = 0;          ///< L2 capacity
  BytesPerSecond l2_bandwidth = 0;      ///< L2 peak read bandwidth (estimate, see the config's sources)
  FlopsPerSecond peak_fp32 = 0;  ///< non-tensor FP32 (FMA = 2 FLOP)
  FlopsPerSecond peak_tf32 = 0;  ///< dense tensor core
  FlopsPerSecond peak_fp16 = 0;  ///< dense tensor core, fp32 accumulate
  FlopsPerSecond peak_bf16 = 0;  ///< dense tensor core, fp32 accumulate
  FlopsPerSecond peak_fp8 = 0;   ///< dense tensor core (0 when unsupported)
  int nvlink_links = 0;          ///< NVLink links per GPU (0: none)
  BytesPerSecond nvlink_bandwidth = 0;  ///< all links together, one direction
  BytesPerSecond pcie_bandwidth = 0;    ///< host link, one direction
  EfficiencyFactors efficiency;

  /// Peak math rate for GEMMs of that type; fp8 falls back to fp16 where unsupported.
  [[nodiscard]] FlopsPerSecond peak(DType t) const;
};

}  // namespace perfcast
