#pragma once
/// \file collective.hpp
/// Collective descriptors and the collective cost interface. Byte accounting follows
/// nccl-tests (docs/collectives.md section 2): `bytes` is the full vector for all-reduce,
/// broadcast and reduce; the full gathered/scattered array (n x per-rank chunk) for
/// all-gather and reduce-scatter; one rank's whole send buffer for all-to-all.
/// All-to-allv carries a per-pair byte matrix instead.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "topology/system_spec.hpp"
#include "core/units.hpp"

namespace perfcast {

enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kAllToAllV, kBroadcast, kReduce };

[[nodiscard]] std::string_view collective_name(CollectiveKind k);

struct CollectiveDesc {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  Bytes bytes = 0;  ///< nccl-tests convention (see file comment); unused for all-to-allv
  /// All-to-allv only: n x n row-major, pair_bytes[i*n+j] = bytes group rank i sends to j.
  std::vector<double> pair_bytes;

  bool operator==(const CollectiveDesc&) const = default;
};

/// Global ranks taking part, in group order.
struct RankGroup {
  std::vector<int> ranks;
  [[nodiscard]] int size() const { return static_cast<int>(ranks.size()); }
};

struct CollectiveEstimate {
  Seconds time = 0;              ///< launch to completion on every rank once all have arrived
  std::string algorithm;         ///< e.g. "ring", "pairwise"
  std::string protocol;          ///< "LL", "LL128", "Simple"
  BytesPerSecond bus_bandwidth = 0;  ///< achieved busBw (nccl-tests definition)
  std::string bottleneck;        ///< link class that bounds it: "nvlink", "pcie", "network"
  /// Time the most loaded rank's NIC share is busy at its achievable rate (bytes it moves
  /// over the network in one direction / network_bandwidth_per_gpu), s; 0 inside a node.
  /// The simulator uses it to share NICs between overlapping transfers.
  Seconds nic_busy = 0;
  /// Time the same rank's PCIe link is busy with that network traffic (GPUDirect RDMA
  /// crosses it), s; 0 inside a node.
  Seconds pcie_busy = 0;
};

/// A collective cost model. Contract: time is never negative, never decreases as bytes
/// grow, and busBw never exceeds the physical link rate of the bounding link class.
class CollectiveModel {
 public:
  virtual ~CollectiveModel() = default;
  [[nodiscard]] virtual CollectiveEstimate estimate(const CollectiveDesc& desc, const RankGroup& group) const = 0;
  [[nodiscard]] virtual std::string_view name() const = 0;
};

/// Latency-bandwidth model following NCCL's structure (docs/collectives.md sections 0-1):
/// time = launch + min over eligible (algorithm, protocol) of latency + bytes / bandwidth.
/// Algorithms (topology/collective.cpp has the eligibility rules and constants):
///  - ring (every collective; LL / LL128 / Simple), busBw from the slowest link class;
///  - tree (all-reduce across >= 2 nodes: chain inside nodes, double binary tree across);
///  - nvls (NVSwitch in-switch reduction, one node, Simple; all-reduce, all-gather,
///    reduce-scatter) and nvls_tree (all-reduce, >= 2 nodes);
///  - hierarchical (all-reduce, all-gather, reduce-scatter across >= 2 nodes with the same
///    ranks per node: intra-node reduce-scatter, inter-node ring per rail, intra-node
///    all-gather);
///  - pairwise all-to-all(v), bound by the most loaded rank on each link class.
/// Every candidate is affine in bytes with a non-negative slope, so time is continuous and
/// never decreases with size.
class AlphaBetaCollectiveModel final : public CollectiveModel {
 public:
  explicit AlphaBetaCollectiveModel(const SystemSpec& system);
  [[nodiscard]] CollectiveEstimate estimate(const CollectiveDesc& desc, const RankGroup& group) const override;
  [[nodiscard]] std::string_view name() const override { return "nccl-alpha-beta-v3"; }
  /// Every eligible algorithm with its best protocol, launch overhead included, in a fixed
  /// order (ring first); estimate() returns the fastest. Empty for one rank.
  [[nodiscard]] std::vector<CollectiveEstimate> candidates(const CollectiveDesc& desc, const RankGroup& group) const;

  /// Ring busBw (Simple protocol) between the ranks of `group`, bytes/s.
  [[nodiscard]] BytesPerSecond ring_bus_bandwidth(const RankGroup& group, std::string* bottleneck = nullptr) const;
  /// Per-GPU all-to-all bandwidth inside a node and across nodes, bytes/s.
  [[nodiscard]] BytesPerSecond a2a_intra_bandwidth(const RankGroup& group) const;
  [[nodiscard]] BytesPerSecond a2a_network_bandwidth_per_gpu() const;

 private:
  const SystemSpec* system_;
  CollectiveEstimate ring(const CollectiveDesc& desc, const RankGroup& group) const;
  CollectiveEstimate tree(const CollectiveDesc& desc, const RankGroup& group) const;
  CollectiveEstimate nvls(const CollectiveDesc& desc, const RankGroup& group) const;
  CollectiveEstimate nvls_tree(const CollectiveDesc& desc, const RankGroup& group) const;
  CollectiveEstimate hierarchical(const CollectiveDesc& desc, const RankGroup& group) const;
  CollectiveEstimate all_to_all(const CollectiveDesc& desc, const RankGroup& group) const;
};

}  // namespace perfcast
