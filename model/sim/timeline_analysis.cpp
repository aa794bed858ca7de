#include "model/sim/timeline_analysis.hpp"

#include "core/intervals.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <unordered_map>

namespace perfcast {
namespace {

using Intervals = TimeIntervals;

Intervals merged(Intervals v) { return merge_intervals(std::move(v)); }
Seconds length(const Intervals& v) { return total_length(v); }
Seconds overlap(const Intervals& a, const Intervals& b) { return overlap_length(a, b); }

}  // namespace

std::string_view comm_group_name(CommGroup g) {
  switch (g) {
    case CommGroup::kTensor: return "tp";
    case CommGroup::kPipeline: return "pp";
    case CommGroup::kData: return "dp";
    case CommGroup::kEmbedding: return "ep";
    case CommGroup::kContext: return "cp";
    case CommGroup::kOther: break;
  }
  return "other";
}

CommGroup communication_group_of(const Op& op, const GraphCollective& c) {
  // Rules on the names the graph builders give (model/graph/transformer_builder.cpp,
  // dlrm_builder.cpp), first match wins.
  const auto has = [&](std::string_view s) { return op.name.find(s) != std::string::npos; };
  if (has("cp_ring")) return CommGroup::kContext;                  // context parallelism's KV ring
  if (has("send_") || has("recv_")) return CommGroup::kPipeline;  // pipeline p2p
  if (has("dist") || c.desc.kind == CollectiveKind::kAllToAll || c.desc.kind == CollectiveKind::kAllToAllV)
    return CommGroup::kEmbedding;  // DLRM input/output distribution, expert all-to-all
  if (has("grads") || has("dp_") || has("allreduce.") || has("params.all_gather") || has("data_parallel"))
    return CommGroup::kData;
  // Per-layer collectives of a Transformer are tensor-parallel (all-reduce, or
  // reduce-scatter / all-gather under sequence parallelism).
  if (has("tp_") || has("sp_") || has("layer") || has("all_gather") || has("get_batch") || has("cross_entropy"))
    return CommGroup::kTensor;
  return CommGroup::kOther;
}

std::string op_type_of(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  append_op_type(out, name);
  return out;
}

void append_op_type(std::string& out, std::string_view name) {
  // A run of digits is an index when it ends the name or a component ('.', '_', ']'):
  // "mb3.", "layer12.", "bucket1", "all_reduce_0"; "h2d" and "fp16x" are kept.
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0;
  while (i < name.size()) {
    std::size_t k = i;
    while (k < name.size() && !digit(name[k])) ++k;
    out.append(name.substr(i, k - i));  // the text up to the next digit, in one piece
    if (k == name.size()) break;
    std::size_t j = k;
    while (j < name.size() && digit(name[j])) ++j;
    const bool index = j == name.size() || name[j] == '.' || name[j] == '_' || name[j] == ']';
    if (index) out += '#';
    else out.append(name.substr(k, j - k));
    i = j;
  }
}

namespace {

/// Adds the parts of [lo, hi] that fall into [w0, w0 + period) after shifting by whole
/// periods (a periodic schedule repeats the interval every `period`).
void fold_into(Intervals& out, Seconds lo, Seconds hi, Seconds w0, Seconds period) {
  if (hi <= lo || period <= 0) return;
  const Seconds w1 = w0 + period;
  if (hi - lo >= period) {  // covers the whole period
    out.push_back({w0, w1});
    return;
  }
  const double k_lo = std::floor((w0 - hi) / period);
  const double k_hi = std::ceil((w1 - lo) / period);
  for (double k = k_lo; k <= k_hi; k += 1) {
    const Seconds a = std::max(lo + k * period, w0), b = std::min(hi + k * period, w1);
    if (b > a) out.push_back({a, b});
  }
}

Intervals minus_length_helper(const Intervals& a, const Intervals& b, Seconds* len) {
  // a \ b for merged lists; *len receives its length.
  Intervals out;
  std::size_t j = 0;
  for (auto [lo, hi] : a) {
    while (j < b.size() && b[j].second <= lo) ++j;
    std::size_t k = j;
    while (lo < hi) {
      if (k >= b.size() || b[k].first >= hi) {
        out.push_back({lo, hi});
        break;
      }
      if (b[k].first > lo) out.push_back({lo, b[k].first});
      lo = std::max(lo, b[k].second);
      ++k;
    }
  }
  *len = length(out);
  return out;
}

RankBreakdown analyze_rank(const Timeline& t, const ExecutionGraph& g, int r,
                           const std::vector<std::vector<const TimelineEvent*>>& last_iteration) {
  RankBreakdown b;
  b.rank = r;
  const auto& ends = t.iteration_end[static_cast<std::size_t>(r)];
  const Seconds w0 = ends.size() >= 2 ? ends[ends.size() - 2] : 0.0;
  b.period = std::max(0.0, ends.empty() ? 0.0 : ends.back() - w0);
  std::array<Intervals, kLaneCount> lanes;
  std::array<Intervals, kCommGroupCount> comm_by_group;
  for (const TimelineEvent* e : last_iteration[static_cast<std::size_t>(r)]) {
    fold_into(lanes[static_cast<std::size_t>(e->lane)], e->start, e->end, w0, b.period);
    if (e->lane == Lane::kCompute) b.host_bound_idle += e->host_delay;
    if (e->lane == Lane::kComm) {
      const Op& op = g.ranks[static_cast<std::size_t>(r)].ops[static_cast<std::size_t>(e->op)];
      const auto grp = op.collective ? communication_group_of(op, g.collectives[static_cast<std::size_t>(*op.collective)])
                                     : CommGroup::kOther;
      fold_into(comm_by_group[static_cast<std::size_t>(grp)], e->start, e->end, w0, b.period);
    }
  }
  const Intervals host = merged(lanes[0]), compute = merged(lanes[1]), comm = merged(lanes[2]), copy = merged(lanes[3]);
  b.host_busy = length(host);
  b.compute_busy = length(compute);
  b.communication_busy = length(comm);
  b.copy_busy = length(copy);
  b.exposed_communication = b.communication_busy - overlap(comm, compute);
  // Exposed communication per group: each group's time outside compute and outside the
  // groups before it (overlapping groups are counted once, in CommGroup order).
  Intervals covered = compute;
  for (int k = 0; k < kCommGroupCount; ++k) {
    Seconds len = 0;
    const Intervals own = minus_length_helper(merged(comm_by_group[static_cast<std::size_t>(k)]), covered, &len);
    b.exposed_by_group[static_cast<std::size_t>(k)] = len;
    if (own.empty()) continue;
    // Both lists are sorted: merge them in place, then join touching intervals.
    const auto middle = static_cast<std::ptrdiff_t>(covered.size());
    covered.insert(covered.end(), own.begin(), own.end());
    std::inplace_merge(covered.begin(), covered.begin() + middle, covered.end());
    covered = merged(std::move(covered));
  }
  minus_length_helper(copy, covered, &b.exposed_copy);
  Intervals all = compute;
  all.insert(all.end(), comm.begin(), comm.end());
  all.insert(all.end(), copy.begin(), copy.end());
  b.gpu_idle = std::max(0.0, b.period - length(merged(all)));
  return b;
}

}  // namespace

TimelineAnalysis analyze_timeline(const Timeline& t, const ExecutionGraph& g) {
  TimelineAnalysis out;
  const Seconds w0 = t.window_start;
  std::vector<std::vector<const TimelineEvent*>> last(static_cast<std::size_t>(t.world));
  for (const auto& e : t.events) {
    if (e.iteration == t.iterations - 1) last[static_cast<std::size_t>(e.rank)].push_back(&e);
  }
  out.ranks.reserve(static_cast<std::size_t>(t.world));
  for (int r = 0; r < t.world; ++r) {
    if (g.simulated(r)) {
      out.ranks.push_back(analyze_rank(t, g, r, last));
    } else {  // mirrored: its representative's figures (a lower rank, already analysed)
      RankBreakdown b = out.ranks[static_cast<std::size_t>(g.representative(r))];
      b.rank = r;
      out.ranks.push_back(std::move(b));
    }
  }

  // Critical path: from the event that ends last, follow the constraint that set each
  // start back to the window start, crediting each event the time it holds the path.
  int cur = -1;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    if (cur < 0 || t.events[i].end > t.events[static_cast<std::size_t>(cur)].end) cur = static_cast<int>(i);
  }
  // Labels per op type, found once per op (its kernels share it) and per host segment.
  std::unordered_map<std::string, std::size_t> label_index;  // label -> entry
  std::vector<CriticalPathEntry> entries;
  std::vector<std::vector<int>> gpu_label(g.ranks.size()), host_label(g.ranks.size());
  std::string label;
  auto entry_of = [&](const TimelineEvent& e) -> CriticalPathEntry& {
    const bool host = e.lane == Lane::kHost;
    auto& cache = (host ? host_label : gpu_label)[static_cast<std::size_t>(e.rank)];
    if (cache.empty()) cache.assign(g.ranks[static_cast<std::size_t>(e.rank)].ops.size(), -1);
    int& id = cache[static_cast<std::size_t>(e.op)];
    if (id < 0) {
      label.assign(host ? "host: " : "");
      append_op_type(label, g.ranks[static_cast<std::size_t>(e.rank)].ops[static_cast<std::size_t>(e.op)].name);
      auto [it, fresh] = label_index.try_emplace(label, entries.size());
      if (fresh) entries.push_back(CriticalPathEntry{label, 0, 0});
      id = static_cast<int>(it->second);
    }
    return entries[static_cast<std::size_t>(id)];
  };
  Seconds cursor = cur >= 0 ? t.events[static_cast<std::size_t>(cur)].end : w0;
  std::size_t guard = 0;
  while (cur >= 0 && cursor > w0 && guard++ < t.events.size() + 1) {
    const TimelineEvent& e = t.events[static_cast<std::size_t>(cur)];
    const Seconds from = std::max(e.start, w0);
    const Seconds held = std::max(0.0, cursor - from);
    if (held > 0) {
      auto& entry = entry_of(e);
      entry.time += held;
      entry.count++;
      out.critical_path_total += held;
      out.ranks[static_cast<std::size_t>(e.rank)].critical_path += held;
      out.critical_events.push_back(cur);
    }
    cursor = std::min(cursor, e.start);
    if (e.binding == Binding::kHost) {
      // Launched at e.launch from inside the host segment `cause`.
      cursor = std::min(cursor, e.launch);
    }
    cur = e.cause;
  }
  std::sort(out.critical_events.begin(), out.critical_events.end());
  out.critical_path = std::move(entries);
  // Longest first; equal times by label, so the order does not depend on the hash table.
  std::sort(out.critical_path.begin(), out.critical_path.end(),
            [](const auto& a, const auto& b) { return a.time != b.time ? a.time > b.time : a.label < b.label; });
  return out;
}

NotableRanks notable_ranks(const TimelineAnalysis& a) {
  NotableRanks n;
  Seconds best_busy = -1, best_cp = -1;
  for (const auto& b : a.ranks) {
    const Seconds busy = b.compute_busy + b.exposed_communication + b.exposed_copy;
    if (busy > best_busy) best_busy = busy, n.slowest = b.rank;
    if (b.critical_path > best_cp) best_cp = b.critical_path, n.critical = b.rank;
  }
  return n;
}

}  // namespace perfcast
