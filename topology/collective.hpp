#pragma once
/// \file collective.hpp
/// Collective descriptors and the collective cost interface. Byte accounting follows
/// nccl-tests (docs/collectives.md section 2): `bytes` is the full vector for all-reduce,
/// broadcast and reduce; the full gathered/scattered array (n x per-rank chunk) for
/// all-gather and reduce-scatter; one rank's whole send buffer for all-to-all.
/// All-to-allv carries a per-pair byte matrix instead.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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
  /// Link that bounds it: "nvlink" (NVLink / NVSwitch), "pcie", "cpu-link", "nic" (the
  /// NICs' rate), "spine" (the fabric above the leaf switches, oversubscribed), "none".
  std::string bottleneck;
  /// Where the time comes from: "spec-derived", "calibrated", or "calibrated at N node(s),
  /// extrapolated" (a fit used at another node count, size or rank count than it saw).
  std::string basis = "spec-derived";
  /// Time the most loaded rank's NIC share is busy at its achievable rate (bytes it moves
  /// over the network in one direction / network_bandwidth_per_gpu), s; 0 inside a node.
  /// The simulator uses it to share NICs between overlapping transfers.
  Seconds nic_busy = 0;
  /// Time the same rank's PCIe link is busy with that network traffic (GPUDirect RDMA
  /// crosses it), s; 0 inside a node.
  Seconds pcie_busy = 0;
  /// SMs the collective's kernel holds while it runs (NCCL: one CTA per channel,
  /// nccl_kernel_sms(); a two-rank transfer: pair_transfer_sms()); 0 where not modelled (one
  /// rank, an empty transfer, unknown algorithms). Set by the annotation, not by the collective
  /// models.
  int sms = 0;
};

/// A collective cost model. Contract: time is never negative, never decreases as bytes
/// grow, and busBw never exceeds the physical link rate of the bounding link class.
class CollectiveModel {
 public:
  virtual ~CollectiveModel() = default;
  [[nodiscard]] virtual CollectiveEstimate estimate(const CollectiveDesc& desc, const RankGroup& group) const = 0;
  [[nodiscard]] virtual std::string_view name() const = 0;
};

/// The spec-derived model, `nccl-alpha-beta-v4` (docs/collectives-and-runtimes.md section 1).
/// Which algorithm and protocol run is NCCL's choice (topology/nccl_tuning.hpp: NCCL's own
/// cost model, by node count, size and topology), so the algorithm printed is the one NCCL
/// would run. Its time:
///  - inside one NVLink domain: perfcast's link model of that algorithm and protocol
///    (ring, tree chain, NVLS over NVSwitch; LL / LL128 / Simple; NCCL's channel
///    scale-down), as v3;
///  - across NVLink domains: NCCL's own latency and bandwidth of the choice, with the
///    fabric's oversubscription between the nodes taking part, the switch latency of the
///    tiers crossed, NCCL's tree correction on every tree-shaped algorithm, plus the launch
///    overhead (NCCL's model leaves it out);
///  - all-to-all(v): pairwise, bound by the most loaded rank on each link class, with PXN on
///    rail-optimized fabrics (bytes for a GPU on another rail first cross NVLink to the local
///    GPU on that rail), the oversubscription between the nodes and the NICs' message rate.
/// Every candidate is affine in bytes with a non-negative slope at a fixed choice; where the
/// choice changes with size the time is the chosen one's, so the rule tests check that it
/// never decreases with size.
class AlphaBetaCollectiveModel final : public CollectiveModel {
 public:
  explicit AlphaBetaCollectiveModel(const SystemSpec& system);
  [[nodiscard]] CollectiveEstimate estimate(const CollectiveDesc& desc, const RankGroup& group) const override;
  [[nodiscard]] std::string_view name() const override { return "nccl-alpha-beta-v4"; }
  /// Every algorithm NCCL could run for this collective on this group, each with NCCL's
  /// best protocol for it, launch overhead included, ring first. Empty for one rank.
  [[nodiscard]] std::vector<CollectiveEstimate> candidates(const CollectiveDesc& desc, const RankGroup& group) const;
  /// The estimate when the run forces `algorithm` (NCCL_ALGO, perfcast's name); NCCL's own
  /// choice when the algorithm cannot run here (or is empty).
  [[nodiscard]] CollectiveEstimate forced(const CollectiveDesc& desc, const RankGroup& group, const std::string& algorithm) const;

  /// The parts of a time across NVLink domains, as `estimate` adds them (what a multi-node
  /// calibration scales): launch + latency + bytes / bandwidth (+ nothing else).
  struct Terms {
    std::string algorithm, protocol, bottleneck;
    bool multi_domain = false;  ///< false: the group is inside one NVLink domain (no terms)
    Seconds launch = 0;         ///< the system's collective launch overhead
    Seconds latency = 0;        ///< NCCL's latency of the choice plus tier latency
    Seconds transfer = 0;       ///< bytes / the choice's effective bandwidth
    int domains = 1;            ///< NVLink domains (NCCL nodes) of the group
  };
  /// `algorithm` / `protocol` force NCCL's choice ("" : NCCL's own; a protocol the algorithm
  /// cannot run is ignored).
  [[nodiscard]] Terms terms(const CollectiveDesc& desc, const RankGroup& group, const std::string& algorithm = "",
                            const std::string& protocol = "") const;

  /// Ring busBw (Simple protocol) between the ranks of `group`, bytes/s.
  [[nodiscard]] BytesPerSecond ring_bus_bandwidth(const RankGroup& group, std::string* bottleneck = nullptr) const;
  /// Per-GPU all-to-all bandwidth inside a node and across nodes, bytes/s.
  [[nodiscard]] BytesPerSecond a2a_intra_bandwidth(const RankGroup& group) const;
  [[nodiscard]] BytesPerSecond a2a_network_bandwidth_per_gpu() const;

  /// Sizes where NCCL's choice for `group` changes (up to 2^40 bytes) and the choice below
  /// each, cached per communicator shape: times never decrease across them (the choice
  /// just below a switch times the switch size too, and the larger time holds).
  [[nodiscard]] std::vector<std::pair<double, std::pair<int, int>>> switches(const RankGroup& group, CollectiveKind kind,
                                                                             const std::string& algorithm) const;
  /// The estimate of NCCL's (algo, proto) (topology/nccl_tuning.hpp enum values), timed.
  [[nodiscard]] CollectiveEstimate timed(const CollectiveDesc& desc, const RankGroup& group, int algo, int proto) const;

 private:
  struct SwitchCache;
  const SystemSpec* system_;
  std::shared_ptr<SwitchCache> switch_cache_;
  [[nodiscard]] CollectiveEstimate one_domain(const CollectiveDesc& desc, const RankGroup& group, int algo, int proto) const;
  [[nodiscard]] CollectiveEstimate across_domains(const CollectiveDesc& desc, const RankGroup& group, int algo, int proto) const;
  [[nodiscard]] CollectiveEstimate all_to_all(const CollectiveDesc& desc, const RankGroup& group) const;
};

/// The ranks of a group that spans several NVLink domains, moved into one: as many as fit,
/// from the start of its first domain; nothing when the group is inside one domain. A
/// collective on the spread group is never faster than on these (the floor both models keep).
[[nodiscard]] std::optional<RankGroup> one_domain_group(const SystemSpec& system, const RankGroup& group);

/// Seconds below which no algorithm can run an all-reduce, all-gather or reduce-scatter of
/// `bytes` (nccl-tests bytes) on `group`: the links at their line rates, no efficiency and
/// no latency. Each GPU sends at least its contribution over NVLink (S for all-reduce,
/// S (n-1)/n for all-gather and reduce-scatter); across NVLink domains each domain's NICs
/// carry at least S (all-reduce: its contribution leaves once, in-network reduction
/// included) or S (N-1)/N over N domains. 0 for other kinds. A calibrated time is never
/// below it (a fit's scales, made on whole nodes, must not beat the wire elsewhere).
[[nodiscard]] double line_rate_floor(const SystemSpec& system, const RankGroup& group, CollectiveKind kind, double bytes);

}  // namespace perfcast
