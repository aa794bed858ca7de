/// \file replay_kernel_source.cpp
/// Where a replayed kernel's duration comes from: the trace's measurement, or (predicted
/// kernels) our predictor for the shape the trace gives, with the prediction recorded
/// against the measured kernels of its op.

#include "model/traces/replay_rank_builder.hpp"
#include "predictors/kernel_calibration.hpp"
#include "predictors/registry.hpp"

namespace perfcast::replay {

KernelDesc ReplayRankBuilder::kernel_of(int ai, const GpuActivity& a) {
  if (!shapes_) return MeasuredKernelDesc{a.name, a.duration};
  const TraceKernelShape& sh = (*shapes_)[static_cast<std::size_t>(ai)];
  if (sh.recognized() && sh.family != TraceKernelFamily::kCollective) {
    if (sh.desc) {
      sample_of_lead_[ai] = info_.samples.size();
      KernelSample sample;
      sample.family = sh.family;
      sample.label = kernel_label(*sh.desc);
      sample.measured = a.duration;
      sample.kernels = 1;
      sample.rank = info_.rank;
      sample.step = step_number_;
      info_.samples.push_back(std::move(sample));
      info_.predicted_kernels++;
      return *sh.desc;
    }
    if (const auto it = sample_of_lead_.find(sh.lead); it != sample_of_lead_.end()) {
      KernelSample& sample = info_.samples[it->second];
      sample.measured += a.duration;
      sample.kernels++;
      info_.predicted_kernels++;
      return MeasuredKernelDesc{a.name, 0.0};  // predicted with its lead
    }
  }
  info_.unrecognized++;
  info_.unrecognized_time += a.duration;
  return MeasuredKernelDesc{a.name, a.duration};
}

Estimate ReplayRankBuilder::kernel_estimate(int ai, const GpuActivity& a, Op& op) {
  const KernelDesc k = kernel_of(ai, a);
  Estimate est = gpu_ && !std::holds_alternative<MeasuredKernelDesc>(k) ? predict_with_calibration(k, *gpu_, calibration_)
                                                                         : predict_kernel(k, GpuSpec{});
  if (const auto it = sample_of_lead_.find(ai); it != sample_of_lead_.end() && shapes_->at(static_cast<std::size_t>(ai)).desc)
    info_.samples[it->second].predicted = est.time;
  op.kernels.push_back(k);
  return est;
}

}  // namespace perfcast::replay
