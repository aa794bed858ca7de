#include "profiler/activity_records.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

namespace perfcast::profiler {

void ActivityBatch::append(ActivityBatch&& other) {
  gpu.insert(gpu.end(), std::make_move_iterator(other.gpu.begin()), std::make_move_iterator(other.gpu.end()));
  api.insert(api.end(), std::make_move_iterator(other.api.begin()), std::make_move_iterator(other.api.end()));
  external.insert(external.end(), other.external.begin(), other.external.end());
  dropped_records += other.dropped_records;
  invalid_records += other.invalid_records;
  other = ActivityBatch{};
}

std::uint64_t CorrelatedOp::launch_to_start_ns() const {
  if (!api || gpu.start_ns < api->start_ns) return 0;
  return gpu.start_ns - api->start_ns;
}

std::string strip_api_version(std::string f) {
  const auto p = f.rfind("_v");
  if (p == std::string::npos || p + 2 == f.size()) return f;
  for (std::size_t i = p + 2; i < f.size(); ++i) {
    if (f[i] < '0' || f[i] > '9') return f;
  }
  f.resize(p);
  return f;
}

bool is_launch_function(const std::string& f) {
  static const char* const kPrefixes[] = {"cudaLaunch", "cudaMemcpy", "cudaMemset", "cuLaunch",
                                          "cuMemcpy",   "cuMemset",   "cudaGraphLaunch", "cuGraphLaunch"};
  for (const char* p : kPrefixes) {
    if (f.rfind(p, 0) == 0) return true;
  }
  return false;
}

CorrelationResult correlate(const ActivityBatch& batch) {
  CorrelationResult r;
  r.dropped_records = batch.dropped_records;
  std::unordered_map<std::uint32_t, const ApiCall*> api_by_id;
  api_by_id.reserve(batch.api.size());
  for (const auto& c : batch.api) {
    if (c.correlation_id != 0) api_by_id.emplace(c.correlation_id, &c);  // first wins
  }
  std::unordered_map<std::uint32_t, std::uint64_t> ext_by_id;
  for (const auto& e : batch.external) ext_by_id.emplace(e.correlation_id, e.external_id);

  std::unordered_map<std::uint32_t, bool> api_used;
  r.ops.reserve(batch.gpu.size());
  for (const auto& g : batch.gpu) {
    if (g.start_ns == 0 || g.end_ns < g.start_ns) {
      ++r.invalid_records;
      continue;
    }
    CorrelatedOp op;
    op.gpu = g;
    if (g.correlation_id != 0) {
      if (auto it = api_by_id.find(g.correlation_id); it != api_by_id.end()) {
        op.api = *it->second;
        api_used[g.correlation_id] = true;
      }
      if (auto it = ext_by_id.find(g.correlation_id); it != ext_by_id.end()) op.external_id = it->second;
    }
    if (!op.api) ++r.unmatched_gpu;
    r.ops.push_back(std::move(op));
  }
  for (const auto& [id, c] : api_by_id) {
    if (is_launch_function(c->function) && !api_used.contains(id)) ++r.api_without_gpu;
  }
  std::sort(r.ops.begin(), r.ops.end(), [](const CorrelatedOp& a, const CorrelatedOp& b) {
    if (a.gpu.start_ns != b.gpu.start_ns) return a.gpu.start_ns < b.gpu.start_ns;
    return a.gpu.correlation_id < b.gpu.correlation_id;
  });
  return r;
}

namespace {

/// Linear-interpolated quantile of a sorted, non-empty sample (the same definition as
/// perfcast::timing_stats).
double quantile_sorted(const std::vector<double>& v, double q) {
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

std::vector<LaunchCostStats> launch_cost_stats(const std::vector<ApiCall>& api) {
  std::map<std::string, std::vector<double>> by_fn;
  for (const auto& c : api) {
    if (!is_launch_function(c.function) || c.end_ns < c.start_ns) continue;
    by_fn[c.function].push_back(static_cast<double>(c.end_ns - c.start_ns));
  }
  std::vector<LaunchCostStats> out;
  for (auto& [fn, v] : by_fn) {
    std::sort(v.begin(), v.end());
    LaunchCostStats s;
    s.function = fn;
    s.calls = v.size();
    s.median_ns = quantile_sorted(v, 0.5);
    s.p90_ns = quantile_sorted(v, 0.9);
    s.mean_ns = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    s.max_ns = v.back();
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<NamedDurations> durations_by_name(const CorrelationResult& r) {
  std::map<std::pair<int, std::string>, NamedDurations> groups;
  for (const auto& op : r.ops) {
    auto& g = groups[{static_cast<int>(op.gpu.kind), op.gpu.name}];
    g.name = op.gpu.name;
    g.kind = op.gpu.kind;
    g.durations_ns.push_back(op.duration_ns());
    if (op.api) g.launch_ns.push_back(op.launch_ns());
  }
  std::vector<NamedDurations> out;
  out.reserve(groups.size());
  for (auto& [key, g] : groups) out.push_back(std::move(g));
  auto total = [](const NamedDurations& g) {
    return std::accumulate(g.durations_ns.begin(), g.durations_ns.end(), std::uint64_t{0});
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const NamedDurations& a, const NamedDurations& b) { return total(a) > total(b); });
  return out;
}

std::vector<RepetitionTime> repetition_times(const CorrelationResult& r, std::uint64_t first_id, std::uint64_t count,
                                             const std::vector<GpuOpKind>& kinds) {
  struct Acc {
    std::uint64_t first = UINT64_MAX, last = 0, busy = 0, longest = 0;
    std::size_t n = 0;
    std::string longest_name;
  };
  std::map<std::uint64_t, Acc> acc;
  for (const auto& op : r.ops) {
    if (!op.external_id || *op.external_id < first_id || *op.external_id - first_id >= count) continue;
    if (std::find(kinds.begin(), kinds.end(), op.gpu.kind) == kinds.end()) continue;
    auto& a = acc[*op.external_id];
    a.first = std::min(a.first, op.gpu.start_ns);
    a.last = std::max(a.last, op.gpu.end_ns);
    a.busy += op.duration_ns();
    ++a.n;
    if (op.gpu.kind == GpuOpKind::kKernel && (a.longest_name.empty() || op.duration_ns() > a.longest)) {
      a.longest = op.duration_ns();
      a.longest_name = op.gpu.name;
    }
  }
  std::vector<RepetitionTime> out;
  out.reserve(acc.size());
  for (auto& [id, a] : acc) {
    out.push_back(RepetitionTime{id, a.last - a.first, a.busy, a.n, std::move(a.longest_name)});
  }
  return out;
}

const char* op_kind_name(GpuOpKind k) {
  switch (k) {
    case GpuOpKind::kKernel: return "kernel";
    case GpuOpKind::kMemcpy: return "memcpy";
    case GpuOpKind::kMemset: return "memset";
  }
  return "kernel";
}

const char* direction_name(MemcpyDirection d) {
  switch (d) {
    case MemcpyDirection::kHostToDevice: return "h2d";
    case MemcpyDirection::kDeviceToHost: return "d2h";
    case MemcpyDirection::kDeviceToDevice: return "d2d";
    case MemcpyDirection::kOther: return "other";
  }
  return "other";
}

void ActivitySink::add_gpu(GpuActivity a) {
  std::lock_guard lock(mu_);
  batch_.gpu.push_back(std::move(a));
}
void ActivitySink::add_api(ApiCall c) {
  std::lock_guard lock(mu_);
  batch_.api.push_back(std::move(c));
}
void ActivitySink::add_external(ExternalCorrelation e) {
  std::lock_guard lock(mu_);
  batch_.external.push_back(e);
}
void ActivitySink::add_dropped(std::uint64_t n) {
  std::lock_guard lock(mu_);
  batch_.dropped_records += n;
}
ActivityBatch ActivitySink::take() {
  std::lock_guard lock(mu_);
  ActivityBatch out = std::move(batch_);
  batch_ = ActivityBatch{};
  return out;
}
std::size_t ActivitySink::gpu_count() const {
  std::lock_guard lock(mu_);
  return batch_.gpu.size();
}

}  // namespace perfcast::profiler
