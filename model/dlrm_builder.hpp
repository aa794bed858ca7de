#pragma once
/// \file dlrm_builder.hpp
/// Turns a DLRM workload and a sharding plan into one training iteration per rank.
///
/// Per rank, in host order: batch copy H2D; (several ranks) the input all-to-all of
/// lengths and indices; bottom MLP; embedding lookups of the rank's shards; the pooled
/// all-to-all (table/column-wise) and reduce-scatter (row-wise); interaction; top MLP;
/// loss; then the backward of each in autograd order with DDP gradient all-reduces in
/// buckets (first bucket 1 MiB, then `gradient_bucket`) overlapped with the backward;
/// embedding backward with the fused optimizer; the dense optimizer step; and the host
/// reading the loss (`sync_each_iteration`).

#include "model/execution_graph.hpp"
#include "model/sharding_plan.hpp"
#include "model/workload_spec.hpp"

namespace perfcast {

/// Throws ConfigError when the global batch does not divide over the ranks.
[[nodiscard]] ExecutionGraph build_dlrm_graph(const DlrmSpec& w, const ShardingPlan& plan, int world_size);

}  // namespace perfcast
