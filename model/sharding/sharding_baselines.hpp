#pragma once
/// \file sharding_baselines.hpp
/// Baseline sharders, as proposers for the search and as the comparison users see:
///  - the reference model's sharders (docs/reference-paper.md section 8, from DreamShard):
///    round_robin, random, size_greedy (table bytes), lookup_greedy (D x L) and
///    size_lookup_greedy (D x L x log10 E): longest-first onto the least-loaded rank
///    whose embedding memory still has room;
///  - torchrec_greedy: TorchRec's planner shape (docs/sharding-planners.md section 2):
///    per table the fastest option by its EmbeddingPerfEstimator formulas (table-wise, or
///    column-wise in 128-wide shards), then greedy bin packing of shard perf over ranks
///    (GreedyPerfPartitioner), each rank's cost the plain sum of its shards.

#include <cstdint>
#include <string>
#include <vector>

#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

struct NamedPlan {
  std::string name;
  ShardingPlan plan;
};

/// Bytes of embedding weights and optimizer state each rank can hold: capacity minus
/// the reserve, dense model, activations and I/O buffers of an empty plan.
[[nodiscard]] Bytes embedding_budget(const DlrmSpec& w, const SystemSpec& s);

/// Weights + optimizer state of a whole table, bytes.
[[nodiscard]] Bytes table_bytes(const DlrmSpec& w, const EmbeddingTableSpec& t);

/// Why no plan can fit, when the tables' weights and optimizer state exceed what all ranks
/// together can hold for embeddings (n x embedding_budget): the bytes needed and
/// available, and the GPU count that would hold them. "" when they could fit (a plan may
/// still be infeasible through its placement). Host-memory tiers (TorchRec's
/// fused_uvm / fused_uvm_caching kernels) are not modelled.
[[nodiscard]] std::string capacity_hint(const DlrmSpec& w, const SystemSpec& s);

/// All baselines, in a stable order. `seed` drives the random sharder.
[[nodiscard]] std::vector<NamedPlan> baseline_plans(const DlrmSpec& w, const SystemSpec& s, std::uint64_t seed);

}  // namespace perfcast
