#pragma once
/// \file public_kernel_fit.hpp
/// Kernel model 2 fitted on measured kernels of several public sources and GPUs
/// (`perfcast kernels --fit`, docs/calibration.md): GEMM families by dtype, scaling and
/// library; attention families by pass, implementation and dtype (and each pass and dtype
/// over every implementation); memory-bound kernels with their launch floor, L2-resident
/// rate and one HBM efficiency per GPU class. Efficiencies are shares of each row's own GPU's
/// spec peaks, so H800, GH200, H100 PCIe and NVL rows inform the H100 SXM and H200 fits of
/// the same kernels; the HBM efficiency of memory-bound kernels is per GPU class (the H200's
/// HBM3e reaches a smaller share of its peak than the H100's HBM3).
///
/// The fit minimises the weighted sum of |relative error| (iteratively reweighted
/// non-negative least squares, core/nnls.hpp), alternating with the assignment of each GEMM
/// row to its compute- or memory-bound regime and, for memory-bound kernels, with a search
/// of the L2-resident share over 0.30, 0.35, ..., 0.90. Every source weighs the same in
/// total (each row 1 / the source's rows in its family, times its caveat weight,
/// kernel_rows.hpp), so that one large source does not drown the others. Rows timed by a
/// harness with an unknown fixed cost per call (KernelRow::harness_overhead: do_bench, an
/// event pair around a launch loop or around each launch) give their source an intercept of
/// its own (one per source), fitted and reported, never used to predict a kernel; left out, such a
/// source's rows are scored after a constant of their own (HeldOutPredictions::harness). An attention
/// launch costs the GEMM rows' fitted overhead (the attention rows are all long kernels). No
/// efficiency exceeds 1. A family no row constrains keeps its prior: the spec model's
/// efficiencies (GEMM 0.77 of the peak, HBM 0.89, the flash-attention shares), a GEMM
/// family without memory-bound rows the other GEMM families' memory efficiency, and the L2
/// regime a share of 0.5 at the system's L2 rate.

#include <map>
#include <string>
#include <vector>

#include "predictors/kernel_calibration.hpp"
#include "predictors/kernel_rows.hpp"
#include "topology/gpu_spec.hpp"

namespace perfcast {

/// One expressible row and the spec of the GPU it was measured on (the row's stated HBM
/// rate already applied).
struct FitSample {
  const KernelRow* row = nullptr;
  GpuSpec gpu;
};

/// The fitted group a row belongs to: "gemm", "attention", "memory_bound"; "" for rows no
/// kernel-model-2 family covers (embedding, copies).
[[nodiscard]] std::string fit_group(const KernelRow& row);

struct PublicKernelFit {
  std::vector<FamilyFit> families;  ///< GEMM and attention families (GPU-independent shares)
  FamilyFit elementwise;            ///< memory-bound kernels; memory_efficiency: pooled over GPU classes
  std::map<std::string, double> memory_efficiency_by_class;  ///< memory-bound HBM share per GPU class
  /// Fitted per-call harness cost of each harness-timed source: a property of how the source
  /// timed, never of a kernel (never predicted for a new kernel). One per source, whatever
  /// kernels it times: fitted in the first group that has the source's rows (GEMM, then
  /// attention, then memory-bound), held fixed in the others.
  std::map<std::string, Seconds> harness_overhead_by_source;
  /// The fitted harness cost of a harness-timed row's source; 0 for other rows and for
  /// sources this fit did not see.
  [[nodiscard]] Seconds harness_cost(const KernelRow& row) const;
  /// The calibration of one GPU class: every family, the memory-bound HBM share of that class
  /// (pooled when it has no rows), attention's memory term at that share. Kernel model 2,
  /// basis "public measurements"; the caller fills in the GPU name, dates and errors.
  [[nodiscard]] KernelCalibration calibration_for(const std::string& gpu_class) const;
};

/// Fits every group that has rows. Samples outside the groups are ignored.
[[nodiscard]] PublicKernelFit fit_public_kernels(const std::vector<FitSample>& samples);

/// A sample's predicted time, s: the sum of its kernels' estimates under `cal` (spec-derived
/// where `cal` is null or has no family for a kernel).
[[nodiscard]] Seconds predict_sample(const FitSample& s, const KernelCalibration* cal);

/// Leave-one-source-out predictions, in the order of the samples.
struct HeldOutPredictions {
  /// Each sample predicted by the fit on every other source's samples (spec-derived where
  /// that fit covers nothing of it): the kernels' time alone.
  std::vector<Seconds> kernel;
  /// A harness-timed source's own per-call cost: the constant c >= 0 that minimises the sum
  /// of |kernel + c - measured| / measured over the source's harness-timed rows (a weighted
  /// median), the one nuisance term the fit also grants the source when it is fitted. 0 for
  /// rows not harness-timed. A held-out row is scored on kernel + harness: the model predicts
  /// kernels, and a harness's cost is not a kernel's.
  std::vector<Seconds> harness;
};
[[nodiscard]] HeldOutPredictions leave_one_source_out(const std::vector<FitSample>& samples);

}  // namespace perfcast
