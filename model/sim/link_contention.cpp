#include "model/sim/link_contention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <utility>

#include "core/deadline.hpp"

namespace perfcast {
namespace {

double max_share(const ContentionFlow& f) {
  double m = 0;
  for (const auto& u : f.uses) m = std::max(m, u.share);
  return m;
}

/// One active flow's use of one resource.
struct ResourceUse {
  int resource = 0;
  std::size_t flow = 0;
  double share = 0;
};

/// The level b at which a resource with `left` capacity free saturates, given its unfrozen
/// flows' (umax, share): the least b with sum share x min(1, b / umax) = left. The demand is
/// piecewise linear in b with a break at each umax, so it is solved exactly on the segment
/// where it crosses `left`. Infinite when every flow fits at solo speed (demand at the
/// largest umax <= left). Sorts `flows` by umax.
double saturation_level(std::vector<std::pair<double, double>>& flows, double left) {
  double total = 0;
  for (const auto& [u, share] : flows) total += share;
  if (total <= left) return std::numeric_limits<double>::infinity();
  std::sort(flows.begin(), flows.end());
  // Below flows[k].first: flows before k run at speed 1 (demand `full`), the others at b / umax.
  double full = 0, slope = 0;
  for (const auto& [u, share] : flows) slope += share / u;
  for (const auto& [u, share] : flows) {
    if (full + u * slope >= left) return slope > 0 ? std::max(0.0, (left - full) / slope) : u;
    full += share;
    slope = std::max(0.0, slope - share / u);
  }
  return flows.back().first;  // rounding only: the total exceeds `left`
}

}  // namespace

std::vector<double> max_min_speeds(const std::vector<const ContentionFlow*>& active) {
  const std::size_t n = active.size();
  std::vector<double> speed(n, 1.0);
  std::vector<char> frozen(n, 0);
  std::vector<double> umax(n, 0.0);
  // (resource, flow, share) of the active flows, grouped by resource.
  std::vector<ResourceUse> uses;
  for (std::size_t i = 0; i < n; ++i) {
    umax[i] = std::min(1.0, max_share(*active[i]));
    if (umax[i] <= 0) frozen[i] = 1;  // uses nothing: solo speed
    for (const auto& u : active[i]->uses)
      if (u.share > 0) uses.push_back({u.resource, i, std::min(1.0, u.share)});
  }
  std::sort(uses.begin(), uses.end(), [](const ResourceUse& a, const ResourceUse& b) {
    return a.resource != b.resource ? a.resource < b.resource : a.flow < b.flow;
  });
  std::vector<std::size_t> group_start;
  for (std::size_t k = 0; k < uses.size(); ++k)
    if (k == 0 || uses[k].resource != uses[k - 1].resource) group_start.push_back(k);
  group_start.push_back(uses.size());
  const std::size_t groups = group_start.size() - 1;
  // Level b: an unfrozen flow's bandwidth on its most used resource; its speed min(1, b/umax).
  auto speed_at = [&](std::size_t i, double b) { return std::min(1.0, b / umax[i]); };
  std::vector<std::pair<double, double>> unfrozen;  // (umax, share) of one resource's unfrozen flows
  for (std::size_t round = 0; round <= n; ++round) {
    if (std::all_of(frozen.begin(), frozen.end(), [](char f) { return f != 0; })) break;
    double best_b = std::numeric_limits<double>::infinity();
    for (std::size_t g = 0; g < groups; ++g) {
      double used = 0;
      unfrozen.clear();
      for (std::size_t k = group_start[g]; k < group_start[g + 1]; ++k) {
        const ResourceUse& u = uses[k];
        if (frozen[u.flow]) {
          used += u.share * speed[u.flow];
        } else {
          unfrozen.push_back({umax[u.flow], u.share});
        }
      }
      if (unfrozen.empty()) continue;
      const double b = saturation_level(unfrozen, std::max(0.0, 1.0 - used));
      best_b = std::min(best_b, b);
    }
    if (!std::isfinite(best_b)) {
      for (std::size_t i = 0; i < n; ++i) frozen[i] = 1;  // nothing saturates: solo speeds
      break;
    }
    // Freeze the flows on every resource that saturates at best_b, and flows at solo speed.
    for (std::size_t g = 0; g < groups; ++g) {
      double used = 0, d = 0;
      bool has_unfrozen = false;
      for (std::size_t k = group_start[g]; k < group_start[g + 1]; ++k) {
        const ResourceUse& u = uses[k];
        if (frozen[u.flow]) {
          used += u.share * speed[u.flow];
        } else {
          has_unfrozen = true;
          d += u.share * speed_at(u.flow, best_b);
        }
      }
      if (!has_unfrozen || d < (1.0 - used) * (1.0 - 1e-9)) continue;
      for (std::size_t k = group_start[g]; k < group_start[g + 1]; ++k) {
        const std::size_t i = uses[k].flow;
        if (!frozen[i]) {
          speed[i] = std::max(1e-12, speed_at(i, best_b));
          frozen[i] = 1;
        }
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (!frozen[i] && umax[i] <= best_b) {
        speed[i] = 1.0;
        frozen[i] = 1;
      }
    }
  }
  return speed;
}

std::vector<Seconds> fluid_finish_times(const std::vector<ContentionFlow>& flows) {
  const std::size_t n = flows.size();
  std::vector<Seconds> finish(n, 0.0);
  std::vector<double> remaining(n, 0.0);
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return flows[a].start < flows[b].start; });
  std::vector<std::size_t> active;
  std::size_t next = 0;
  double t = n > 0 ? flows[order[0]].start : 0.0;
  while (next < n || !active.empty()) {
    check_deadline();  // a long contention replay stops at the command's limit
    if (active.empty()) t = std::max(t, flows[order[next]].start);
    while (next < n && flows[order[next]].start <= t) {
      const std::size_t i = order[next++];
      remaining[i] = std::max(0.0, flows[i].work);
      if (remaining[i] <= 0) {
        finish[i] = flows[i].start;
      } else {
        active.push_back(i);
      }
    }
    if (active.empty()) continue;
    std::vector<const ContentionFlow*> ptrs;
    ptrs.reserve(active.size());
    for (std::size_t i : active) ptrs.push_back(&flows[i]);
    const std::vector<double> speed = max_min_speeds(ptrs);
    double dt = next < n ? flows[order[next]].start - t : std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < active.size(); ++k) dt = std::min(dt, remaining[active[k]] / speed[k]);
    std::vector<std::size_t> still;
    still.reserve(active.size());
    for (std::size_t k = 0; k < active.size(); ++k) {
      const std::size_t i = active[k];
      const double left = remaining[i] - speed[k] * dt;
      if (left <= 1e-12 * flows[i].work) {
        finish[i] = t + dt;
      } else {
        remaining[i] = left;
        still.push_back(i);
      }
    }
    active.swap(still);
    t += dt;
  }
  return finish;
}

bool any_overlap(const std::vector<ContentionFlow>& flows) {
  std::map<int, std::vector<std::pair<Seconds, Seconds>>> per_resource;
  for (const auto& f : flows) {
    if (f.work <= 0) continue;
    for (const auto& u : f.uses)
      if (u.share > 0) per_resource[u.resource].push_back({f.start, f.start + f.work});
  }
  for (auto& [res, spans] : per_resource) {
    std::sort(spans.begin(), spans.end());
    Seconds end = -std::numeric_limits<double>::infinity();
    for (const auto& [a, b] : spans) {
      if (a < end) return true;
      end = std::max(end, b);
    }
  }
  return false;
}

}  // namespace perfcast
