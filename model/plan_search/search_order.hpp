#pragma once
/// \file search_order.hpp
/// The order in which `perfcast plan` predicts its candidates, so that a search cut by
/// --budget has covered the choices most likely to win: the workload file's own
/// parallelism (usually a published recipe) first, then one candidate of each TP size in
/// turn, each TP size's candidates ordered by a cheap estimate of their cost (pipeline
/// bubble, recomputation, exposed communication). The estimate only orders: every
/// candidate that runs is ranked by its full prediction.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "model/plan_search/parallelism_space.hpp"

namespace perfcast {

/// A relative cost estimate of `c` for a global batch of `global_batch` sequences, >= 1
/// (1: no bubble, no recomputation, nothing exposed). Used only to order candidates.
/// Terms (each a fraction of the iteration, first-order):
///   - pipeline bubble (pp - 1) / (vp x m), m = global_batch / (dp x micro_batch) micro-batches
///     (Narayanan et al., SC'21, section 2.2);
///   - recomputation: selective +3% (attention's softmax and dropout only), full +33% (one
///     more forward over three passes);
///   - TP communication: +4% per doubling of tp, halved with TP communication overlap;
///   - DP gradient reduction: +5% when dp x cp > 1 without overlap;
///   - micro-batch 1 GEMMs run below peak: +4% / micro_batch.
[[nodiscard]] double estimated_relative_cost(const ParallelismChoice& c, std::int64_t global_batch);

/// A permutation of `choices` (indices) in the order to predict them: `asked`'s index first
/// when present, then round-robin over the TP sizes in ascending order, each TP size's
/// choices by estimated_relative_cost ascending (ties keep their index order).
[[nodiscard]] std::vector<std::size_t> search_order(const std::vector<ParallelismChoice>& choices, std::int64_t global_batch,
                                                    const std::optional<ParallelismChoice>& asked);

}  // namespace perfcast
