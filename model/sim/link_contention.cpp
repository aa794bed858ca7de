#include "model/sim/link_contention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "core/deadline.hpp"

namespace perfcast {
namespace {

double max_share(const ContentionFlow& f) {
  double m = 0;
  for (const auto& u : f.uses) m = std::max(m, u.share);
  return m;
}

}  // namespace

std::vector<double> max_min_speeds(const std::vector<const ContentionFlow*>& active) {
  const std::size_t n = active.size();
  std::vector<double> speed(n, 1.0);
  std::vector<char> frozen(n, 0);
  std::vector<double> umax(n, 0.0);
  // Resource -> (flow, share) of the active flows.
  std::map<int, std::vector<std::pair<std::size_t, double>>> users;
  for (std::size_t i = 0; i < n; ++i) {
    umax[i] = std::min(1.0, max_share(*active[i]));
    if (umax[i] <= 0) frozen[i] = 1;  // uses nothing: solo speed
    for (const auto& u : active[i]->uses)
      if (u.share > 0) users[u.resource].push_back({i, std::min(1.0, u.share)});
  }
  // Level b: an unfrozen flow's bandwidth on its most used resource; its speed min(1, b/umax).
  auto speed_at = [&](std::size_t i, double b) { return std::min(1.0, b / umax[i]); };
  for (std::size_t round = 0; round <= n; ++round) {
    if (std::all_of(frozen.begin(), frozen.end(), [](char f) { return f != 0; })) break;
    double best_b = std::numeric_limits<double>::infinity();
    for (const auto& [res, list] : users) {
      double used = 0, b_max = 0;
      bool has_unfrozen = false;
      for (const auto& [i, share] : list) {
        if (frozen[i]) {
          used += share * speed[i];
        } else {
          has_unfrozen = true;
          b_max = std::max(b_max, umax[i]);
        }
      }
      if (!has_unfrozen) continue;
      const double left = std::max(0.0, 1.0 - used);
      auto demand = [&, &flows = list](double b) {  // (clang 14 cannot capture a structured binding)
        double d = 0;
        for (const auto& [i, share] : flows)
          if (!frozen[i]) d += share * speed_at(i, b);
        return d;
      };
      if (demand(b_max) <= left) continue;  // every flow on it can run at full speed
      double lo = 0, hi = b_max;            // demand is continuous and increasing in b
      for (int it = 0; it < 60; ++it) {
        const double mid = 0.5 * (lo + hi);
        (demand(mid) > left ? hi : lo) = mid;
      }
      best_b = std::min(best_b, lo);
    }
    if (!std::isfinite(best_b)) {
      for (std::size_t i = 0; i < n; ++i) frozen[i] = 1;  // nothing saturates: solo speeds
      break;
    }
    // Freeze the flows on every resource that saturates at best_b, and flows at solo speed.
    for (const auto& [res, list] : users) {
      double used = 0, d = 0;
      bool has_unfrozen = false;
      for (const auto& [i, share] : list) {
        if (frozen[i]) {
          used += share * speed[i];
        } else {
          has_unfrozen = true;
          d += share * speed_at(i, best_b);
        }
      }
      if (!has_unfrozen || d < (1.0 - used) * (1.0 - 1e-9)) continue;
      for (const auto& [i, share] : list) {
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
