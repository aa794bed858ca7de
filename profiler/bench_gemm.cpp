#include "profiler/bench_gemm.hpp"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "profiler/bench_kernels.hpp"
#include "profiler/cuda_check.hpp"

namespace perfcast::profiler::bench {

namespace {

void lt_check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(fmt::format("cuBLASLt: {} failed with status {}", call, static_cast<int>(s)));
}
#define PERFCAST_LT_CHECK(call) lt_check((call), #call)

/// Workspace bytes (see CublasLt).
constexpr std::size_t kWorkspaceBytes = 32u << 20;

}  // namespace

struct CublasLt::Impl {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

CublasLt::CublasLt() : impl_(std::make_unique<Impl>()) {
  PERFCAST_LT_CHECK(cublasLtCreate(&impl_->handle));
  PERFCAST_CUDA_CHECK(cudaMalloc(&impl_->workspace, kWorkspaceBytes));
}

CublasLt::~CublasLt() {
  if (impl_->workspace) cudaFree(impl_->workspace);
  if (impl_->handle) cublasLtDestroy(impl_->handle);
}

std::string CublasLt::version() {
  const std::size_t v = cublasLtGetVersion();
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

struct GemmCase::Impl {
  CublasLt::Impl* lt = nullptr;
  GemmDesc g;
  bool ta = false, tb = false;
  void* a = nullptr;  // row-major logical A (stored transposed when ta)
  void* b = nullptr;
  void* c = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulHeuristicResult_t algo{};
  float alpha = 1.0f, beta = 0.0f;

  ~Impl() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (desc) cublasLtMatmulDescDestroy(desc);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
  }
};

GemmCase::GemmCase(CublasLt& lt, const GemmDesc& g, bool trans_a, bool trans_b, void* stream)
    : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  s.lt = &lt.impl();
  s.g = g;
  s.ta = trans_a;
  s.tb = trans_b;
  const bool half = g.dtype == DType::kFp16 || g.dtype == DType::kBf16;
  const cudaDataType_t type = g.dtype == DType::kFp16 ? CUDA_R_16F : g.dtype == DType::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute = g.dtype == DType::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (g.dtype == DType::kFp8) throw std::invalid_argument("GemmCase: fp8 GEMMs are not benchmarked");
  const std::size_t el = half ? 2 : 4;
  const auto sa = static_cast<std::size_t>(g.m * g.k), sb = static_cast<std::size_t>(g.k * g.n),
             sc = static_cast<std::size_t>(g.m * g.n);
  const auto batch = static_cast<std::size_t>(g.batch);
  PERFCAST_CUDA_CHECK(cudaMalloc(&s.a, sa * batch * el));
  PERFCAST_CUDA_CHECK(cudaMalloc(&s.b, sb * batch * el));
  PERFCAST_CUDA_CHECK(cudaMalloc(&s.c, sc * batch * el));
  const auto fill = [&](void* p, std::size_t n, std::uint64_t seed) {
    if (half) {
      launch_fill_uniform_16(p, static_cast<std::int64_t>(n), seed, -1.f, 1.f, g.dtype == DType::kBf16, stream);
    } else {
      launch_fill_uniform_f32(static_cast<float*>(p), static_cast<std::int64_t>(n), seed, -1.f, 1.f, stream);
    }
  };
  fill(s.a, sa * batch, 11);
  fill(s.b, sb * batch, 12);
  fill(s.c, sc * batch, 13);  // poison-free but non-zero: every element is overwritten (beta = 0)

  // Column-major view: C^T[n x m] = op(B)^T[n x k] * op(A)^T[k x m]; cuBLASLt's "A" is our B.
  PERFCAST_LT_CHECK(cublasLtMatmulDescCreate(&s.desc, compute, CUDA_R_32F));
  const cublasOperation_t op_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // applied to B storage
  const cublasOperation_t op_b = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // applied to A storage
  PERFCAST_LT_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  PERFCAST_LT_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  // Stored (pre-op) column-major shapes.
  const std::uint64_t rows_a = trans_b ? g.k : g.n, cols_a = trans_b ? g.n : g.k;
  const std::uint64_t rows_b = trans_a ? g.m : g.k, cols_b = trans_a ? g.k : g.m;
  PERFCAST_LT_CHECK(cublasLtMatrixLayoutCreate(&s.la, type, rows_a, cols_a, static_cast<std::int64_t>(rows_a)));
  PERFCAST_LT_CHECK(cublasLtMatrixLayoutCreate(&s.lb, type, rows_b, cols_b, static_cast<std::int64_t>(rows_b)));
  PERFCAST_LT_CHECK(cublasLtMatrixLayoutCreate(&s.lc, type, g.n, g.m, g.n));
  if (g.batch > 1) {
    const auto count = static_cast<std::int32_t>(g.batch);
    const std::int64_t stride_a = static_cast<std::int64_t>(sb), stride_b = static_cast<std::int64_t>(sa),
                       stride_c = static_cast<std::int64_t>(sc);
    for (auto [l, stride] : {std::pair{s.la, stride_a}, std::pair{s.lb, stride_b}, std::pair{s.lc, stride_c}}) {
      PERFCAST_LT_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      PERFCAST_LT_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  PERFCAST_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const std::uint64_t ws = kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  int returned = 0;
  const cublasStatus_t hs =
      cublasLtMatmulAlgoGetHeuristic(s.lt->handle, s.desc, s.la, s.lb, s.lc, s.lc, pref, 1, &s.algo, &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  lt_check(hs, "cublasLtMatmulAlgoGetHeuristic");
  if (returned == 0) throw std::runtime_error("cuBLASLt: no algorithm for " + kernel_label(KernelDesc{g}));
}

GemmCase::~GemmCase() = default;

void GemmCase::launch(void* stream) {
  auto& s = *impl_;
  PERFCAST_LT_CHECK(cublasLtMatmul(s.lt->handle, s.desc, &s.alpha, s.b, s.la, s.a, s.lb,
                                   &s.beta, s.c, s.lc, s.c, s.lc, &s.algo.algo, s.lt->workspace, kWorkspaceBytes,
                                   static_cast<cudaStream_t>(stream)));
}

double GemmCase::check_sampled(void* stream) {
  auto& s = *impl_;
  const auto& g = s.g;
  PERFCAST_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  const bool half = g.dtype == DType::kFp16 || g.dtype == DType::kBf16;
  const std::size_t el = half ? 2 : 4;
  auto load = [&](const void* p, std::size_t n) {
    std::vector<unsigned char> raw(n * el);
    PERFCAST_CUDA_CHECK(cudaMemcpy(raw.data(), p, raw.size(), cudaMemcpyDeviceToHost));
    std::vector<double> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (!half) {
        out[i] = reinterpret_cast<const float*>(raw.data())[i];
      } else if (g.dtype == DType::kFp16) {
        out[i] = __half2float(reinterpret_cast<const __half*>(raw.data())[i]);
      } else {
        out[i] = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(raw.data())[i]);
      }
    }
    return out;
  };
  const auto a = load(s.a, static_cast<std::size_t>(g.m * g.k));
  const auto b = load(s.b, static_cast<std::size_t>(g.k * g.n));
  const auto c = load(s.c, static_cast<std::size_t>(g.m * g.n));
  double worst = 0;
  for (int t = 0; t < 64; ++t) {
    const std::int64_t i = (t * 7919) % g.m, j = (t * 104729) % g.n;
    double ref = 0, magnitude = 0;
    for (std::int64_t p = 0; p < g.k; ++p) {
      const double av = s.ta ? a[static_cast<std::size_t>(p * g.m + i)] : a[static_cast<std::size_t>(i * g.k + p)];
      const double bv = s.tb ? b[static_cast<std::size_t>(j * g.k + p)] : b[static_cast<std::size_t>(p * g.n + j)];
      ref += av * bv;
      magnitude += std::fabs(av * bv);
    }
    const double got = c[static_cast<std::size_t>(i * g.n + j)];
    // Rounding errors of a dot product are bounded relative to the sum of |products|, not to
    // the result (which cancellation can bring near 0): error / sum |a_p b_p|.
    const double denom = std::max(magnitude, 1e-30);
    if (!std::isfinite(got)) return INFINITY;
    worst = std::max(worst, std::fabs(got - ref) / denom);
  }
  return worst;
}

}  // namespace perfcast::profiler::bench
