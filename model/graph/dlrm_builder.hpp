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

#include <cstdint>
#include <memory>
#include <vector>

#include "model/graph/execution_graph.hpp"
#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

/// table_row_wise and grid blocks add, per node holding some, an intra-node reduce-scatter
/// (forward) and all-gather (backward) of global batch x the node's block columns x 4 B,
/// and on several nodes the pooled all-to-all across nodes between ranks of the same
/// local index (docs/sharding-planners.md section 2.3, TWRW).
///
/// The link between a GPU and host memory, for tables kept there (fused_uvm,
/// fused_uvm_caching): per direction, B/s; 0: the GPU's pcie_bandwidth. A system's
/// host_memory gives it (host_link_of).
struct HostLink {
  BytesPerSecond host_to_device = 0, device_to_host = 0;
};

/// The system's host link (its host_memory bandwidths).
[[nodiscard]] inline HostLink host_link_of(const SystemSpec& s) {
  return HostLink{s.host_memory.host_to_device, s.host_memory.device_to_host};
}

/// `gpus_per_node` 0: one node of `world_size` ranks. Throws ConfigError when the global
/// batch does not divide over the ranks.
[[nodiscard]] ExecutionGraph build_dlrm_graph(const DlrmSpec& w, const ShardingPlan& plan, int world_size, int gpus_per_node = 0,
                                              HostLink link = {});

/// What a DlrmGraphBuilder::build changed against the graph of the previous call.
struct GraphChanges {
  bool all = true;                ///< everything was rebuilt (first call, or the plan's shape changed)
  std::vector<char> ranks;        ///< per rank: its program was rebuilt
  std::vector<char> collectives;  ///< per collective: new, or its descriptor changed
};

/// Builds the graphs of many plans of one workload (the sharding search), rebuilding
/// only what a plan changes: a rank's program is rebuilt when its shards (tables, types,
/// sizes) differ from the previous plan's, collective descriptors are recomputed by the
/// rebuilt ranks, and everything is rebuilt when the plan's shape changes (which
/// collectives exist: sparse tables, pooled all-to-all, row-wise, table_row_wise / grid
/// and their columns per node). The graph equals build_dlrm_graph's for the same plan
/// up to the numbering of collectives.
///
/// `symmetric`: ranks whose programs would be equal share one (ExecutionGraph::mirror_of;
/// the mirrored rank's program is empty and its representative's timeline is its own), so
/// the simulation runs one rank per distinct program. Two ranks are equal when they hold
/// the same shards and neither runs the hybrid layout's bottom MLP; on plans with
/// table_row_wise / grid tables, whose collectives run per node and per local index, rank
/// (node m, local i) stands for (m, j) only when that holds on every node, so each
/// mirrored collective group is the image of a simulated one and its members arrive
/// together. Contention needs nothing more: a transfer loads only its own rank's links
/// (sim/transfer_flows.cpp), which carry the same events on a mirror. The simulated times
/// equal those of the full graph (tests/model/plan_evaluator_test.cpp).
class DlrmGraphBuilder {
 public:
  /// Throws ConfigError as build_dlrm_graph does.
  DlrmGraphBuilder(const DlrmSpec& w, int world_size, int gpus_per_node = 0, HostLink link = {}, bool symmetric = false);
  ~DlrmGraphBuilder();
  DlrmGraphBuilder(const DlrmGraphBuilder&) = delete;
  DlrmGraphBuilder& operator=(const DlrmGraphBuilder&) = delete;

  /// The graph of `plan`; valid until the next build(). `changes` (optional) says what
  /// differs from the previous call's graph.
  const ExecutionGraph& build(const ShardingPlan& plan, GraphChanges* changes = nullptr);
  /// The program rank `r` had before the last build() rebuilt it (empty when that build
  /// was the first or left rank `r` as it was); valid until the next build(). Lets a
  /// caller keep what it derived from ops whose kernels did not change.
  [[nodiscard]] const RankProgram& previous_program(std::size_t r) const { return previous_[r]; }
  /// Moves the last graph out (the builder must not be used afterwards).
  [[nodiscard]] ExecutionGraph take() { return std::move(graph_); }

 private:
  struct RankKeyEntry {
    std::size_t table;
    int type;
    std::int64_t rows, cols;
    int storage;
    double cache_load_factor;
    bool operator==(const RankKeyEntry&) const = default;
  };
  struct Shape {
    bool sparse = false, pooled = false, row_wise = false, node = false, hybrid = false;
    bool operator==(const Shape&) const = default;
  };
  struct State;
  /// Fills `mirror` (one entry per rank: the rank that stands for it) from this build's
  /// keys; every rank stands for itself unless `symmetric_`.
  void find_mirrors(const std::vector<std::vector<RankKeyEntry>>& keys, bool node_groups, std::vector<int>& mirror) const;
  const DlrmSpec* w_;
  int world_;
  int gpus_per_node_;
  HostLink link_;
  bool symmetric_ = false;
  std::vector<int> mirror_, next_mirror_;  ///< per rank: the last build's representative, scratch
  /// Per node: the pooled-output bytes per sample of its table_row_wise / grid blocks, of
  /// the last build and this one.
  std::vector<double> node_bytes_, next_node_bytes_;
  ExecutionGraph graph_;
  std::unique_ptr<State> state_;
  std::vector<std::vector<RankKeyEntry>> keys_, next_keys_;  ///< per rank: the last plan's, scratch
  std::vector<RankProgram> previous_;  ///< per rank: its program before the last build rebuilt it
  Shape shape_;
  bool built_ = false;
};

}  // namespace perfcast
