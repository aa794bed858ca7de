#pragma once
/// \file estimate.hpp
/// What a predictor returns: a breakdown, not a bare number, and where it came from.

#include <string>

#include "topology/units.hpp"

namespace perfcast {

struct Estimate {
  Seconds time = 0;          ///< kernel duration on the GPU (all its sub-kernels)
  double flops = 0;          ///< arithmetic work, FLOP
  Bytes dram_bytes = 0;      ///< bytes moved to/from HBM (or over PCIe for copies)
  Bytes l2_bytes = 0;        ///< bytes served by L2
  int launches = 1;          ///< CUDA launches the host issues for it
  std::string predictor;     ///< registry name of the predictor
  bool calibrated = false;   ///< false: spec-derived
  bool in_range = true;      ///< false: outside the calibrated range (see note)
  std::string bound;         ///< "compute", "memory", "l2", "latency", "pcie"
  std::string note;

  /// Sums times, work and launches (sub-kernels of one op).
  Estimate& operator+=(const Estimate& o);
};

}  // namespace perfcast
