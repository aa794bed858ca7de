#include "model/traces/trace_stats.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "topology/collective.hpp"

namespace perfcast {
namespace {

constexpr double kMicrosecond = 1e-6;

/// NCCL kernel end times keyed by (step number, position among the step's NCCL kernels).
std::map<std::pair<std::int64_t, int>, Seconds> nccl_ends(const KinetoTrace& t) {
  std::map<std::pair<std::int64_t, int>, Seconds> out;
  std::unordered_map<int, int> seen;  // per step index
  for (std::size_t i = 0; i < t.gpu.size(); ++i) {
    const GpuActivity& a = t.gpu[i];
    if (!a.is_nccl()) continue;
    const int k = t.step_of_activity(static_cast<int>(i));
    if (k < 0) continue;
    out[{t.steps[static_cast<std::size_t>(k)].number, seen[k]++}] = a.end();
  }
  return out;
}

Seconds median(std::vector<Seconds> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

StepStats step_stats(const KinetoTrace& t, int k, const std::vector<int>& step_of) {
  StepStats s;
  const TraceStep& step = t.steps[static_cast<std::size_t>(k)];
  s.step = step.number;
  s.start = step.start;
  s.wall = t.step_wall(k);
  s.wall_is_period = t.step_wall_is_period(k);
  TimeIntervals all, compute, nccl, copy;
  for (std::size_t i = 0; i < t.gpu.size(); ++i) {
    if (step_of[i] != k) continue;
    const GpuActivity& a = t.gpu[i];
    all.push_back({a.start, a.end()});
    if (a.kind == GpuActivityKind::kKernel) {
      ++s.kernels;
      s.kernel_sum += a.duration;
      if (a.is_nccl()) {
        ++s.nccl_kernels;
        nccl.push_back({a.start, a.end()});
      } else {
        compute.push_back({a.start, a.end()});
      }
    } else {
      ++s.memcpys;
      copy.push_back({a.start, a.end()});
    }
  }
  const TimeIntervals m_compute = merge_intervals(std::move(compute)), m_nccl = merge_intervals(std::move(nccl));
  s.gpu_busy = total_length(merge_intervals(std::move(all)));
  s.compute_busy = total_length(m_compute);
  s.nccl_busy = total_length(m_nccl);
  s.exposed_communication = s.nccl_busy - overlap_length(m_nccl, m_compute);
  s.memcpy_busy = total_length(merge_intervals(std::move(copy)));
  return s;
}

}  // namespace

RankAlignment align_ranks(const std::vector<KinetoTrace>& traces) {
  RankAlignment out;
  out.shift.assign(traces.size(), 0.0);
  out.clock_offset.assign(traces.size(), 0.0);
  out.matched.assign(traces.size(), 0);
  if (traces.empty()) return out;
  const auto ref = nccl_ends(traces[0]);
  out.matched[0] = static_cast<int>(ref.size());
  for (std::size_t r = 1; r < traces.size(); ++r) {
    // Origins are absolute microseconds; their difference is exact in a double.
    const Seconds origin_delta = (traces[r].origin_us - traces[0].origin_us) * kMicrosecond;
    std::vector<Seconds> diffs;
    for (const auto& [key, end] : nccl_ends(traces[r])) {
      const auto it = ref.find(key);
      if (it != ref.end()) diffs.push_back(origin_delta + end - it->second);
    }
    out.matched[r] = static_cast<int>(diffs.size());
    out.clock_offset[r] = median(std::move(diffs));
    out.shift[r] = origin_delta - out.clock_offset[r];
  }
  return out;
}

std::vector<TraceStats> compute_trace_stats(const std::vector<KinetoTrace>& traces) {
  const RankAlignment align = align_ranks(traces);
  std::vector<TraceStats> out;
  for (std::size_t r = 0; r < traces.size(); ++r) {
    const KinetoTrace& t = traces[r];
    TraceStats s;
    s.file = t.file;
    s.rank = t.rank;
    s.world_size = t.world_size;
    s.gpu = t.device_name();
    s.device = t.device;
    s.clock_offset = align.clock_offset[r];
    s.aligned_collectives = traces.size() > 1 ? align.matched[r] : 0;
    std::vector<int> step_of(t.gpu.size());
    for (std::size_t i = 0; i < t.gpu.size(); ++i) step_of[i] = t.step_of_activity(static_cast<int>(i));
    for (int k = 0; k < static_cast<int>(t.steps.size()); ++k) s.steps.push_back(step_stats(t, k, step_of));

    std::unordered_map<std::string, std::size_t> by_name;
    std::map<std::string, CollectiveSummary> colls;
    for (std::size_t i = 0; i < t.gpu.size(); ++i) {
      if (step_of[i] < 0) continue;
      const GpuActivity& a = t.gpu[i];
      auto [it, fresh] = by_name.emplace(a.name, s.kernels.size());
      if (fresh) s.kernels.push_back({a.name, 0, 0, a.is_nccl()});
      KernelSummary& k = s.kernels[it->second];
      k.count++;
      k.total += a.duration;
      if (a.is_nccl()) {
        const std::string name =
            a.collective->name.empty() ? std::string(collective_name(a.collective->kind)) : a.collective->name;
        CollectiveSummary& c = colls[name];
        c.name = name;
        c.count++;
        c.total += a.duration;
        c.bytes += a.collective->bytes;
      }
    }
    std::stable_sort(s.kernels.begin(), s.kernels.end(),
                     [](const KernelSummary& a, const KernelSummary& b) { return a.total > b.total; });
    for (auto& [_, c] : colls) s.collectives.push_back(c);
    std::stable_sort(s.collectives.begin(), s.collectives.end(),
                     [](const CollectiveSummary& a, const CollectiveSummary& b) { return a.total > b.total; });
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace perfcast
