#pragma once
/// \file registry.hpp
/// Every predictor and collective model, with a one-line description and the source of
/// its constants (`perfcast list` prints this), and the dispatch from a kernel
/// descriptor to its predictor.

#include <string>
#include <vector>

#include "predictors/estimate.hpp"
#include "predictors/kernel_desc.hpp"
#include "topology/gpu_spec.hpp"

namespace perfcast {

struct RegistryEntry {
  std::string name;         ///< e.g. "gemm.spec_roofline"
  std::string family;       ///< kernel family or "collective"
  std::string description;  ///< one line
  std::string source;       ///< citation or calibration file of its constants
};

/// The built-in predictors and models, in a stable order.
[[nodiscard]] const std::vector<RegistryEntry>& builtin_registry();

/// Predicts one kernel with the predictor of its family.
[[nodiscard]] Estimate predict_kernel(const KernelDesc& k, const GpuSpec& gpu);

}  // namespace perfcast
