#include "profiler/embedding_bag_types.hpp"

namespace perfcast::profiler {

const char* pooling_name(PoolingMode m) {
  switch (m) {
    case PoolingMode::kSum: return "sum";
    case PoolingMode::kMean: return "mean";
  }
  return "unknown";
}

const char* precision_name(WeightPrecision p) {
  switch (p) {
    case WeightPrecision::kFp32: return "fp32";
    case WeightPrecision::kFp16: return "fp16";
    case WeightPrecision::kBf16: return "bf16";
  }
  return "unknown";
}

const char* optimizer_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd: return "sgd";
    case OptimizerKind::kRowwiseAdagrad: return "rowwise_adagrad";
  }
  return "unknown";
}

}  // namespace perfcast::profiler
