#pragma once
/// \file bench_gemm.hpp
/// GEMMs through cuBLASLt for the microbenchmarks: row-major logical C[b][m x n] =
/// op(A)[m x k] * op(B)[k x n], fp32 / tf32 (fp32 storage, CUBLAS_COMPUTE_32F_FAST_TF32) /
/// fp16 / bf16 (16-bit inputs and output, fp32 accumulation), strided batches. Includes no
/// CUDA header; defined only when PERFCAST_HAVE_CUDA is 1.

#include <cstddef>
#include <memory>
#include <string>

#include "predictors/kernel_desc.hpp"

namespace perfcast::profiler::bench {

/// A cuBLASLt handle and its workspace (32 MiB: NVIDIA's recommendation for Hopper in the
/// cuBLAS documentation, "cublasSetWorkspace").
class CublasLt {
 public:
  CublasLt();
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;
  /// "13.0.0" from cublasLtGetVersion().
  [[nodiscard]] static std::string version();

  struct Impl;
  [[nodiscard]] Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

/// One GEMM shape with its operands (random, uniform in [-1, 1)) and the algorithm cuBLASLt's
/// heuristic picked. Throws CudaError / std::runtime_error (cuBLASLt status) on failure, e.g.
/// out of memory or no algorithm.
class GemmCase {
 public:
  GemmCase(CublasLt& lt, const GemmDesc& g, bool trans_a, bool trans_b, void* stream);
  ~GemmCase();
  GemmCase(const GemmCase&) = delete;
  GemmCase& operator=(const GemmCase&) = delete;
  /// Enqueues one GEMM on `stream`.
  void launch(void* stream);
  /// Checks C against an fp64 host product on up to 64 sampled elements of batch 0; returns
  /// the largest error relative to the products' magnitude, |c - ref| / sum_p |a_p b_p|, the
  /// quantity rounding bounds (a result near 0 by cancellation is not an error). Synchronizes.
  [[nodiscard]] double check_sampled(void* stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perfcast::profiler::bench
