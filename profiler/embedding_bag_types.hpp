#pragma once
/// \file embedding_bag_types.hpp
/// Enums and small value types shared by the CPU reference and the CUDA kernels of the
/// batched pooled embedding-bag operator (the TBE operator of FBGEMM / TorchRec).

#include <cstdint>

namespace perfcast::profiler {

/// How the rows of one bag are combined. kMean of an empty bag is 0 (as in FBGEMM).
enum class PoolingMode : std::int32_t { kSum = 0, kMean = 1 };

/// Storage type of the embedding weights; arithmetic is always fp32 and stores round to
/// nearest even.
enum class WeightPrecision : std::int32_t { kFp32 = 0, kFp16 = 1, kBf16 = 2 };

/// Optimizer fused into the backward pass.
enum class OptimizerKind : std::int32_t {
  kSgd = 0,             ///< w -= lr * g
  kRowwiseAdagrad = 1,  ///< state += mean(g^2 over the row); w -= lr / (sqrt(state) + eps) * g
};

/// Hyper-parameters of the fused optimizer. `g` is the gradient of one row summed over all
/// its occurrences in the batch (duplicates are combined before the single update).
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  float learning_rate = 0.01f;  ///< dimensionless step size
  float eps = 1e-8f;            ///< Adagrad only: added to sqrt(state)
};

/// Largest embedding dimension supported (the CUDA kernels keep a row's slice in registers).
inline constexpr std::int32_t kMaxEmbeddingDim = 1024;

/// Bytes per stored weight element.
[[nodiscard]] constexpr std::int32_t weight_bytes(WeightPrecision p) {
  return p == WeightPrecision::kFp32 ? 4 : 2;
}

[[nodiscard]] const char* pooling_name(PoolingMode m);
[[nodiscard]] const char* precision_name(WeightPrecision p);
[[nodiscard]] const char* optimizer_name(OptimizerKind k);

}  // namespace perfcast::profiler
