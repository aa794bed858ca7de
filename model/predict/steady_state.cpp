/// \file steady_state.cpp
/// Steady-state extrapolation of Transformer iterations (steady_state.hpp).

#include "model/predict/steady_state.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace perfcast {
namespace {

/// Calls f(x.t, y.t, z.t) for every additive time t of three rank breakdowns (period
/// included); each of x, y, z may be const or not.
template <typename X, typename Y, typename Z, typename F>
void for_each_time(X& x, Y& y, Z& z, F f) {
  f(x.period, y.period, z.period);
  f(x.compute_busy, y.compute_busy, z.compute_busy);
  f(x.communication_busy, y.communication_busy, z.communication_busy);
  f(x.copy_busy, y.copy_busy, z.copy_busy);
  f(x.exposed_communication, y.exposed_communication, z.exposed_communication);
  for (std::size_t g = 0; g < x.exposed_by_group.size(); ++g) f(x.exposed_by_group[g], y.exposed_by_group[g], z.exposed_by_group[g]);
  f(x.exposed_copy, y.exposed_copy, z.exposed_copy);
  f(x.host_busy, y.host_busy, z.host_busy);
  f(x.host_bound_idle, y.host_bound_idle, z.host_bound_idle);
  f(x.gpu_idle, y.gpu_idle, z.gpu_idle);
  f(x.critical_path, y.critical_path, z.critical_path);
}

/// Critical-path entries by label.
std::map<std::string, CriticalPathEntry> entries_by_label(const TimelineAnalysis& a) {
  std::map<std::string, CriticalPathEntry> m;
  for (const auto& e : a.critical_path) m[e.label] = e;
  return m;
}

/// The entry of `label` in `m`, or a zero entry (the label is not on that critical path).
CriticalPathEntry entry_or_zero(const std::map<std::string, CriticalPathEntry>& m, const std::string& label) {
  const auto it = m.find(label);
  return it == m.end() ? CriticalPathEntry{label, 0, 0} : it->second;
}

}  // namespace

std::optional<SteadyStatePlan> steady_state_plan(const TransformerSpec& w, const SteadyStateOptions& o) {
  if (!o.enabled) return std::nullopt;
  SteadyStatePlan p;
  p.micro_batches = w.micro_batches();
  p.step = w.vp > 1 ? w.pp : 1;  // the interleaved schedule needs M to be a multiple of pp
  // The longest warmup (stage 0) is 2 (pp - 1) + (vp - 1) pp virtual micro-batches, under
  // 2 pp micro-batches of vp chunks each whatever vp is; so is the cooldown.
  std::int64_t base = std::max<std::int64_t>(o.min_base, 2LL * w.pp) * std::max<std::int64_t>(o.base_scale, 1);
  base = (base + p.step - 1) / p.step * p.step;
  for (std::size_t k = 0; k < p.simulated.size(); ++k) p.simulated[k] = base + static_cast<std::int64_t>(k) * p.step;
  // Three shorter simulations pay only when together they hold fewer micro-batches than M.
  if (p.micro_batches <= p.simulated[0] + p.simulated[1] + p.simulated[2]) return std::nullopt;
  return p;
}

TransformerSpec with_micro_batches(const TransformerSpec& w, std::int64_t micro_batches) {
  TransformerSpec s = w;
  s.global_batch = micro_batches * w.micro_batch * w.dp;
  return s;
}

bool increments_agree(const TimelineAnalysis& a0, const TimelineAnalysis& a1, const TimelineAnalysis& a2, Seconds period,
                      double agreement) {
  if (agreement < 0 || a0.ranks.size() != a1.ranks.size() || a1.ranks.size() != a2.ranks.size()) return false;
  const double tolerance = agreement * std::abs(period);
  bool agree = true;
  auto same_step = [&](double x0, double x1, double x2) {
    if (!(std::abs((x2 - x1) - (x1 - x0)) <= tolerance)) agree = false;
  };
  for (std::size_t r = 0; r < a0.ranks.size(); ++r) for_each_time(a0.ranks[r], a1.ranks[r], a2.ranks[r], same_step);
  same_step(a0.critical_path_total, a1.critical_path_total, a2.critical_path_total);
  const auto e0 = entries_by_label(a0), e1 = entries_by_label(a1), e2 = entries_by_label(a2);
  for (const auto* m : {&e0, &e1})
    for (const auto& [label, e] : *m)
      if (!e2.contains(label)) return false;  // a label leaving the path: not settled
  for (const auto& [label, e] : e2) {
    const CriticalPathEntry x0 = entry_or_zero(e0, label), x1 = entry_or_zero(e1, label);
    same_step(x0.time, x1.time, e.time);
    if (e.count - x1.count != x1.count - x0.count) return false;
  }
  return agree;
}

TimelineAnalysis extrapolate_analysis(const TimelineAnalysis& a, const TimelineAnalysis& b, double steps) {
  auto ahead = [steps](double x, double y) { return std::max(0.0, y + steps * (y - x)); };
  TimelineAnalysis out;
  out.ranks = b.ranks;
  for (std::size_t r = 0; r < out.ranks.size() && r < a.ranks.size(); ++r)
    for_each_time(out.ranks[r], a.ranks[r], b.ranks[r], [&](Seconds& o, Seconds x, Seconds y) { o = ahead(x, y); });
  out.critical_path_total = ahead(a.critical_path_total, b.critical_path_total);
  const auto ea = entries_by_label(a);
  for (const auto& e : b.critical_path) {
    const CriticalPathEntry x = entry_or_zero(ea, e.label);
    const double count = std::round(e.count + steps * (e.count - x.count));
    out.critical_path.push_back({e.label, ahead(x.time, e.time), static_cast<std::int64_t>(std::max(0.0, count))});
  }
  // As analyze_timeline orders them: longest first, equal times by label.
  std::sort(out.critical_path.begin(), out.critical_path.end(), [](const CriticalPathEntry& x, const CriticalPathEntry& y) {
    return x.time != y.time ? x.time > y.time : x.label < y.label;
  });
  return out;
}

}  // namespace perfcast
