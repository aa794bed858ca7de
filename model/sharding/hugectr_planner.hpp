#pragma once
/// \file hugectr_planner.hpp
/// HugeCTR's "auto" and "hier_auto" embedding sharding planner, as its DLRM-DCNv2 sample
/// (NVIDIA-Merlin/HugeCTR samples/dlrm/sharding/planner.py and generate_plan.py, the same
/// files in NVIDIA's MLPerf Training DLRM-DCNv2 implementation) runs it, restated:
///  - each table's cost on a bucket (a GPU for "auto", a node for "hier_auto") is its hotness
///    (multi-hot size, perfcast's pooling) divided by the buckets it is split over, plus a
///    fixed cost per shard (mem_comm_bw_ratio / mem_comm_work_ratio);
///  - a shard's memory is its rows x dim x bytes per element (8 under Adagrad, 4 under SGD),
///    and a bucket holds at most memory_cap_gb (x GPUs per node for "hier_auto");
///  - tables under dp_threshold_gb are data-parallel; the others are placed hottest first,
///    each shard on the cheapest bucket that does not hold the table yet and has room;
///  - a placement that cannot fit doubles the split of the table that did not fit; one that
///    fits is a candidate, and then the hottest table that can still double its split does;
///    max_iterations rounds; the candidate with the lowest maximum bucket cost wins, the
///    "every table split over every bucket" plan first among equals.
/// A table on several buckets is split evenly by rows over them; under "hier_auto" every GPU
/// of a node holds the node's tables, so their rows are split over the node's GPUs too.
/// Deviations: a table is not split beyond one row per GPU, and a table with fewer rows than a
/// node's GPUs stays data-parallel under "hier_auto". perfcast exchanges a row split over some
/// GPUs as any row_wise table (a reduce-scatter of its pooled outputs over all ranks), where
/// HugeCTR sends the partial sums in its all-to-all: the split's GPUs move about the same bytes,
/// the others more.

#include <optional>

#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

struct HugectrPlannerOptions {
  bool hierarchical = false;     ///< "hier_auto": buckets are nodes
  double mem_comm_bw_ratio = 7;  ///< HBM over communication bandwidth (MEM_COMM_BW_RATIO)
  double mem_comm_work_ratio = 4;  ///< train.py's default 8 / 2
  double dp_threshold_gb = 0.008;  ///< DP_SHARDING_THRESHOLD
  double memory_cap_gb = 60;       ///< train.py's memory_cap_for_embedding default, per GPU
  int max_iterations = 20;         ///< the planner's max_search_iter
};

/// The settings of HugeCTR's DGX H100 configurations for `nodes` nodes:
/// config_DGXH100_1x8x6912.sh ("auto", MEM_COMM_BW_RATIO 7, DP_SHARDING_THRESHOLD 0.008) on
/// one node, config_DGXH100_8x8x2112.sh ("hier_auto", 67, 0.0125) on more.
[[nodiscard]] HugectrPlannerOptions hugectr_dgx_h100_options(int nodes);

/// The plan HugeCTR's planner makes for `w` on `s`; nullopt when even the plan that splits
/// every table over every bucket exceeds the memory cap (HugeCTR then raises).
[[nodiscard]] std::optional<ShardingPlan> hugectr_auto_plan(const DlrmSpec& w, const SystemSpec& s, const HugectrPlannerOptions& o);

}  // namespace perfcast
