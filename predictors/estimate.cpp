#include "predictors/estimate.hpp"

namespace perfcast {

Estimate& Estimate::operator+=(const Estimate& o) {
  time += o.time;
  flops += o.flops;
  dram_bytes += o.dram_bytes;
  l2_bytes += o.l2_bytes;
  host_link_bytes += o.host_link_bytes;
  launches += o.launches;
  calibrated = calibrated && o.calibrated;
  in_range = in_range && o.in_range;
  return *this;
}

}  // namespace perfcast
