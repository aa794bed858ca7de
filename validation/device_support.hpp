#pragma once
/// \file device_support.hpp
/// RAII device and pinned host buffers and a planned cuBLASLt matmul, shared by the
/// executor's device code (device_dlrm.cpp). CUDA builds only: includes the CUDA runtime
/// and cuBLASLt headers.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <utility>

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "profiler/cuda_check.hpp"
#include "profiler/device_buffer.hpp"
#include "profiler/embedding_bag_types.hpp"

namespace perfcast::validation {

inline void lt_check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(fmt::format("{}:{}: cuBLASLt: {} failed with status {} ({})", file, line, call,
                                         static_cast<int>(s), cublasLtGetStatusString(s)));
  }
}
#define PERFCAST_LT_CHECK(call) lt_check((call), #call, __FILE__, __LINE__)

/// cuBLASLt workspace: 32 MiB, NVIDIA's recommendation for Hopper (cuBLAS documentation,
/// "cublasSetWorkspace"), as in profiler/bench_gemm.cpp.
inline constexpr std::size_t kLtWorkspaceBytes = 32u << 20;

inline std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

using profiler::DeviceBuffer;

/// Pinned host allocation.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t bytes) : bytes_(bytes) {
    PERFCAST_CUDA_CHECK(cudaMallocHost(&p_, bytes == 0 ? 1 : bytes));
  }
  ~PinnedBuffer() {
    if (p_) cudaFreeHost(p_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  [[nodiscard]] unsigned char* data() const { return static_cast<unsigned char*>(p_); }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

/// cuBLASLt data type of a storage precision.
inline cudaDataType_t lt_type(profiler::WeightPrecision p) {
  switch (p) {
    case profiler::WeightPrecision::kFp16: return CUDA_R_16F;
    case profiler::WeightPrecision::kBf16: return CUDA_R_16BF;
    case profiler::WeightPrecision::kFp32: break;
  }
  return CUDA_R_32F;
}

/// Largest power of two <= 256 dividing n (bytes), or the address: what a pointer guarantees for
/// CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES (whose default, 256, lets the heuristic pick
/// kernels that fail on less aligned operands, e.g. a layer's weights inside a flat buffer).
inline std::uint32_t bytes_alignment(std::uint64_t n) {
  std::uint32_t align = 256;
  while (align > 1 && n % align != 0) align /= 2;
  return align;
}
inline std::uint32_t pointer_alignment(const void* p) { return bytes_alignment(reinterpret_cast<std::uintptr_t>(p)); }

/// Bytes of one element of the types LtGemm uses (fp32, fp16, bf16).
inline std::uint64_t lt_type_bytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

/// A planned column-major cuBLASLt matmul C[m x n] = op(A) op(B) (+ bias, ReLU per epilogue),
/// optionally strided-batched; operand pointers are fixed at planning time. fp32 scale and
/// accumulation always (CUBLAS_COMPUTE_32F, or ..._FAST_TF32 when asked and every operand
/// is fp32); A, B and C each fp32, fp16 or bf16 (the mixed-precision weight gradient reads
/// half operands and writes fp32). The bias, when given, has C's type (cuBLASLt's rule for
/// CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE).
class LtGemm {
 public:
  struct Shape {
    bool trans_a = false, trans_b = false;
    std::int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
    std::int32_t batch = 1;
    std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const void* bias = nullptr;  ///< [m] of C's type, for the BIAS epilogues
    cudaDataType_t a_type = CUDA_R_32F, b_type = CUDA_R_32F, c_type = CUDA_R_32F;
  };

  LtGemm(cublasLtHandle_t lt, const Shape& s, bool tf32, const void* a, const void* b, void* c)
      : lt_(lt), a_(a), b_(b), c_(c) {
    const bool all_fp32 = s.a_type == CUDA_R_32F && s.b_type == CUDA_R_32F && s.c_type == CUDA_R_32F;
    const cublasComputeType_t compute = tf32 && all_fp32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    PERFCAST_LT_CHECK(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F));
    const cublasOperation_t ta = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    PERFCAST_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    PERFCAST_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (s.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      PERFCAST_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &s.epilogue,
                                                       sizeof(s.epilogue)));
      if (s.bias) {
        PERFCAST_LT_CHECK(
            cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &s.bias, sizeof(s.bias)));
      }
    }
    // Stored shapes: op(A) is m x k, so A is stored k x m when transposed.
    const auto rows_a = static_cast<std::uint64_t>(s.trans_a ? s.k : s.m);
    const auto cols_a = static_cast<std::uint64_t>(s.trans_a ? s.m : s.k);
    const auto rows_b = static_cast<std::uint64_t>(s.trans_b ? s.n : s.k);
    const auto cols_b = static_cast<std::uint64_t>(s.trans_b ? s.k : s.n);
    PERFCAST_LT_CHECK(cublasLtMatrixLayoutCreate(&la_, s.a_type, rows_a, cols_a, s.lda));
    PERFCAST_LT_CHECK(cublasLtMatrixLayoutCreate(&lb_, s.b_type, rows_b, cols_b, s.ldb));
    PERFCAST_LT_CHECK(cublasLtMatrixLayoutCreate(&lc_, s.c_type, static_cast<std::uint64_t>(s.m),
                                                 static_cast<std::uint64_t>(s.n), s.ldc));
    if (s.batch > 1) {
      for (auto [l, stride] : {std::pair{la_, s.stride_a}, std::pair{lb_, s.stride_b}, std::pair{lc_, s.stride_c}}) {
        PERFCAST_LT_CHECK(
            cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &s.batch, sizeof(s.batch)));
        PERFCAST_LT_CHECK(
            cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
      }
    }
    cublasLtMatmulPreference_t pref = nullptr;
    PERFCAST_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::uint64_t ws = kLtWorkspaceBytes;
    std::uint32_t align_a = pointer_alignment(a), align_b = pointer_alignment(b), align_c = pointer_alignment(c);
    if (s.batch > 1) {  // matrix i starts at base + i x stride: as aligned as the stride's bytes allow
      align_a = std::min(align_a, bytes_alignment(static_cast<std::uint64_t>(s.stride_a) * lt_type_bytes(s.a_type)));
      align_b = std::min(align_b, bytes_alignment(static_cast<std::uint64_t>(s.stride_b) * lt_type_bytes(s.b_type)));
      align_c = std::min(align_c, bytes_alignment(static_cast<std::uint64_t>(s.stride_c) * lt_type_bytes(s.c_type)));
    }
    cublasStatus_t ps =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    for (auto [attr, value] : {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a},
                               std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b},
                               std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c},
                               std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c}}) {
      if (ps == CUBLAS_STATUS_SUCCESS) ps = cublasLtMatmulPreferenceSetAttribute(pref, attr, value, sizeof(*value));
    }
    int returned = 0;
    const cublasStatus_t hs = ps != CUBLAS_STATUS_SUCCESS
                                  ? ps
                                  : cublasLtMatmulAlgoGetHeuristic(lt_, desc_, la_, lb_, lc_, lc_, pref, 1, &algo_, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    PERFCAST_LT_CHECK(hs);
    if (returned == 0) {
      throw std::runtime_error(fmt::format("cuBLASLt: no algorithm for m={} n={} k={} batch={} epilogue={} types {}/{}/{}",
                                           s.m, s.n, s.k, s.batch, static_cast<int>(s.epilogue),
                                           static_cast<int>(s.a_type), static_cast<int>(s.b_type),
                                           static_cast<int>(s.c_type)));
    }
  }
  ~LtGemm() {
    if (la_) cublasLtMatrixLayoutDestroy(la_);
    if (lb_) cublasLtMatrixLayoutDestroy(lb_);
    if (lc_) cublasLtMatrixLayoutDestroy(lc_);
    if (desc_) cublasLtMatmulDescDestroy(desc_);
  }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  void run(void* workspace, cudaStream_t stream) const {
    const float alpha = 1.0f, beta = 0.0f;
    PERFCAST_LT_CHECK(cublasLtMatmul(lt_, desc_, &alpha, a_, la_, b_, lb_, &beta, c_, lc_, c_, lc_, &algo_.algo,
                                     workspace, kLtWorkspaceBytes, stream));
  }

 private:
  cublasLtHandle_t lt_;
  const void* a_;
  const void* b_;
  void* c_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulHeuristicResult_t algo_{};
};

}  // namespace perfcast::validation
