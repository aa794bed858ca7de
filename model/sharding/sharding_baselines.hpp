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
///    (GreedyPerfPartitioner), each rank's cost the plain sum of its shards;
///  - hugectr_auto (one node) or hugectr_hier_auto (several): HugeCTR's planner with its
///    DGX H100 settings (hugectr_planner.hpp).

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
/// together can hold for embeddings (n x embedding_budget, plus each rank's share of host
/// memory when `memory_tiers`): the bytes needed and available, and the GPU count that
/// would hold them. "" when they could fit (a plan may still be infeasible through its
/// placement).
[[nodiscard]] std::string capacity_hint(const DlrmSpec& w, const SystemSpec& s, bool memory_tiers = false);

/// `plan` with tables moved to host memory until every rank fits its HBM (TorchRec's
/// planner moves tables to fused_uvm_caching under memory pressure the same way): on the
/// rank most over its capacity, the HBM table with the fewest lookups per byte becomes
/// fused_uvm_caching at the default load factor; when none is left, its cached table with
/// the fewest lookups per byte halves its load factor (down to 1%). Stops when every rank
/// fits, or when nothing more can move (the plan stays infeasible).
[[nodiscard]] ShardingPlan with_host_memory(const ShardingPlan& plan, const DlrmSpec& w, const SystemSpec& s);

/// All baselines, in a stable order. `seed` drives the random sharder. `memory_tiers`:
/// each baseline that does not fit in HBM is followed by its with_host_memory version
/// ("NAME+host_memory").
[[nodiscard]] std::vector<NamedPlan> baseline_plans(const DlrmSpec& w, const SystemSpec& s, std::uint64_t seed,
                                                    bool memory_tiers = false);

}  // namespace perfcast
