#include "model/plan_search/search_order.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace perfcast {

double estimated_relative_cost(const ParallelismChoice& c, std::int64_t global_batch) {
  const double replicas_micro = static_cast<double>(std::max(c.dp, 1)) * static_cast<double>(std::max<std::int64_t>(c.micro_batch, 1));
  const double micro_batches = std::max(1.0, static_cast<double>(std::max<std::int64_t>(global_batch, 1)) / replicas_micro);
  double cost = 1.0;
  cost += static_cast<double>(std::max(c.pp, 1) - 1) / (static_cast<double>(std::max(c.vp, 1)) * micro_batches);
  if (c.recompute == Recompute::kSelective) cost += 0.03;
  if (c.recompute == Recompute::kFull) cost += 0.33;
  const double tp_term = 0.04 * std::log2(static_cast<double>(std::max(c.tp, 1)));
  cost += c.tp_comm_overlap ? tp_term / 2 : tp_term;
  if (c.dp * c.cp > 1 && !c.overlap_grad_reduce) cost += 0.05;
  cost += 0.04 / static_cast<double>(std::max<std::int64_t>(c.micro_batch, 1));
  return cost;
}

std::vector<std::size_t> search_order(const std::vector<ParallelismChoice>& choices, std::int64_t global_batch,
                                      const std::optional<ParallelismChoice>& asked) {
  std::vector<std::size_t> order;
  order.reserve(choices.size());
  std::map<int, std::vector<std::size_t>> by_tp;  // ascending TP size
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (asked && choices[i] == *asked && order.empty()) {
      order.push_back(i);
      continue;
    }
    by_tp[choices[i].tp].push_back(i);
  }
  std::vector<double> cost(choices.size());
  for (std::size_t i = 0; i < choices.size(); ++i) cost[i] = estimated_relative_cost(choices[i], global_batch);
  for (auto& [tp, group] : by_tp)
    std::stable_sort(group.begin(), group.end(), [&](std::size_t a, std::size_t b) { return cost[a] < cost[b]; });
  for (std::size_t round = 0;; ++round) {
    bool any = false;
    for (const auto& [tp, group] : by_tp) {
      if (round >= group.size()) continue;
      order.push_back(group[round]);
      any = true;
    }
    if (!any) break;
  }
  return order;
}

}  // namespace perfcast
