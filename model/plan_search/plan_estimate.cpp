/// \file plan_estimate.cpp
/// The screening estimate of `perfcast plan` (plan_estimate.hpp).

#include "model/plan_search/plan_estimate.hpp"

#include <algorithm>
#include <map>

namespace perfcast {

EstimateCounts estimate_counts(const ParallelismChoice& c, std::int64_t global_batch) {
  EstimateCounts n;
  const std::int64_t per_pass = std::max<std::int64_t>(c.dp, 1) * std::max<std::int64_t>(c.micro_batch, 1);
  n.micro_batches = std::max<std::int64_t>(global_batch / per_pass, 1);
  const std::int64_t step = c.vp > 1 ? std::max(c.pp, 1) : 1;  // the interleaved schedule needs multiples of pp
  if (n.micro_batches <= 4 * step) return n;  // direct: two short simulations would cost as much
  n.a = step;
  n.b = 2 * step;
  return n;
}

Seconds estimate_iteration_time(const EstimateCounts& n, Seconds ta, Seconds tb) {
  if (n.direct()) return tb;
  return std::max(tb, ta + n.increments() * (tb - ta));
}

WorkloadMetrics estimate_metrics(const EstimateCounts& n, const WorkloadMetrics& a, Seconds ta, const WorkloadMetrics& b,
                                 Seconds tb, Seconds e) {
  const double f = n.increments();
  auto along = [f](double va, double vb) { return std::max(0.0, va + f * (vb - va)); };
  WorkloadMetrics m = b;
  m.model_flops_per_iteration = along(a.model_flops_per_iteration, b.model_flops_per_iteration);
  if (e > 0) {
    m.samples_per_s = along(a.samples_per_s * ta, b.samples_per_s * tb) / e;
    m.tokens_per_s = along(a.tokens_per_s * ta, b.tokens_per_s * tb) / e;
    m.mfu = b.model_flops_per_iteration > 0 ? b.mfu * (m.model_flops_per_iteration / b.model_flops_per_iteration) * (tb / e) : 0.0;
  }
  std::map<std::string, Seconds> parts_a;
  for (const auto& p : a.breakdown) parts_a[p.name] += p.time;
  for (auto& p : m.breakdown) {
    const auto it = parts_a.find(p.name);
    p.time = along(it == parts_a.end() ? 0.0 : it->second, p.time);
  }
  m.tables.clear();  // DLRM only
  return m;
}

}  // namespace perfcast
