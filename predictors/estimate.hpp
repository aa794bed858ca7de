#pragma once
/// \file estimate.hpp
/// What a predictor returns: a breakdown, not a bare number, and where it came from.

#include <string_view>

#include "core/units.hpp"

namespace perfcast {

struct Estimate {
  Seconds time = 0;          ///< kernel duration on the GPU (all its sub-kernels)
  double flops = 0;          ///< arithmetic work, FLOP
  Bytes dram_bytes = 0;      ///< bytes moved to/from HBM (or over PCIe for copies)
  Bytes l2_bytes = 0;        ///< bytes served by L2
  Bytes host_link_bytes = 0; ///< bytes over the host link (embedding tables in host memory), both directions
  int launches = 1;          ///< CUDA launches the host issues for it
  /// Registry name of the predictor. Static strings only: estimates are copied per
  /// kernel in every evaluation, so they hold no owning strings.
  std::string_view predictor;
  bool calibrated = false;   ///< false: spec-derived
  bool in_range = true;      ///< false: outside the calibrated range
  std::string_view bound;    ///< "compute", "memory", "l2", "latency", "pcie", "host_link" (static)
  int split_k = 1;           ///< GEMM: K slices the model assumed

  /// Sums times, work and launches (sub-kernels of one op).
  Estimate& operator+=(const Estimate& o);
};

}  // namespace perfcast
