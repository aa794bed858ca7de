#include "model/sim/timeline_analysis.hpp"

#include <algorithm>
#include <array>
#include <map>

namespace perfcast {
namespace {

using Intervals = std::vector<std::pair<Seconds, Seconds>>;

/// Sorts and merges overlapping intervals.
Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second) out.back().second = std::max(out.back().second, iv.second);
    else out.push_back(iv);
  }
  return out;
}

Seconds length(const Intervals& v) {
  Seconds s = 0;
  for (const auto& iv : v) s += iv.second - iv.first;
  return s;
}

/// Length of the intersection of two merged interval lists.
Seconds overlap(const Intervals& a, const Intervals& b) {
  Seconds s = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const Seconds lo = std::max(a[i].first, b[j].first);
    const Seconds hi = std::min(a[i].second, b[j].second);
    if (hi > lo) s += hi - lo;
    if (a[i].second < b[j].second) ++i;
    else ++j;
  }
  return s;
}

}  // namespace

TimelineAnalysis analyze_timeline(const Timeline& t, const ExecutionGraph& g) {
  TimelineAnalysis out;
  const Seconds w0 = t.window_start, w1 = t.window_end;
  std::vector<std::array<Intervals, kLaneCount>> lanes(static_cast<std::size_t>(t.world));
  out.ranks.resize(static_cast<std::size_t>(t.world));
  for (int r = 0; r < t.world; ++r) out.ranks[static_cast<std::size_t>(r)].rank = r;
  for (const auto& e : t.events) {
    const Seconds lo = std::max(e.start, w0), hi = std::min(e.end, w1);
    if (hi > lo) lanes[static_cast<std::size_t>(e.rank)][static_cast<std::size_t>(e.lane)].push_back({lo, hi});
    if (e.lane == Lane::kCompute && e.start >= w0 && e.start < w1)
      out.ranks[static_cast<std::size_t>(e.rank)].host_bound_idle += e.host_delay;
  }
  for (int r = 0; r < t.world; ++r) {
    auto& b = out.ranks[static_cast<std::size_t>(r)];
    auto& l = lanes[static_cast<std::size_t>(r)];
    const Intervals host = merged(l[0]), compute = merged(l[1]), comm = merged(l[2]), copy = merged(l[3]);
    b.host_busy = length(host);
    b.compute_busy = length(compute);
    b.communication_busy = length(comm);
    b.copy_busy = length(copy);
    b.exposed_communication = b.communication_busy - overlap(comm, compute);
    Intervals all = compute;
    all.insert(all.end(), comm.begin(), comm.end());
    all.insert(all.end(), copy.begin(), copy.end());
    b.gpu_idle = std::max(0.0, (w1 - w0) - length(merged(all)));
  }

  // Critical path: from the event that ends last, follow the constraint that set each
  // start back to the window start, crediting each event the time it holds the path.
  int cur = -1;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    if (cur < 0 || t.events[i].end > t.events[static_cast<std::size_t>(cur)].end) cur = static_cast<int>(i);
  }
  std::map<std::string, CriticalPathEntry> by_label;
  Seconds cursor = cur >= 0 ? t.events[static_cast<std::size_t>(cur)].end : w0;
  std::size_t guard = 0;
  while (cur >= 0 && cursor > w0 && guard++ < t.events.size() + 1) {
    const TimelineEvent& e = t.events[static_cast<std::size_t>(cur)];
    const Seconds from = std::max(e.lane == Lane::kHost ? e.start : e.start, w0);
    const Seconds held = std::max(0.0, cursor - from);
    if (held > 0) {
      const auto& op = g.ranks[static_cast<std::size_t>(e.rank)].ops[static_cast<std::size_t>(e.op)];
      const std::string label = e.lane == Lane::kHost ? "host: " + op.name : op.name;
      auto& entry = by_label[label];
      entry.label = label;
      entry.time += held;
      entry.count++;
      out.critical_path_total += held;
    }
    cursor = std::min(cursor, e.start);
    if (e.binding == Binding::kHost) {
      // Launched at e.launch from inside the host segment `cause`.
      cursor = std::min(cursor, e.launch);
    }
    cur = e.cause;
  }
  for (auto& [_, entry] : by_label) out.critical_path.push_back(entry);
  std::sort(out.critical_path.begin(), out.critical_path.end(),
            [](const auto& a, const auto& b) { return a.time > b.time; });
  return out;
}

}  // namespace perfcast
