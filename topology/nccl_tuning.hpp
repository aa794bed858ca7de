#pragma once
/// \file nccl_tuning.hpp
/// NCCL's own cost model, as its public tuning code describes it (src/graph/tuning.cc,
/// the channel search of src/graph/search.cc and the run-time channel choice of
/// src/enqueue.cc; docs/collectives-and-runtimes.md section 1 says it in our words). NCCL
/// uses it to pick an algorithm and a protocol for every collective call: for each
/// (algorithm, protocol) a latency L (us) and a bandwidth B (GB/s, already turned into
/// algorithm bandwidth), time = L + bytes / (1000 B), the smallest time wins. perfcast
/// uses the same choice, so the algorithm it names is the one NCCL would run, and (across
/// nodes) the same L and B as the structure of its time.
///
/// The channel search itself is not reproduced: its outcome is approximated per pattern
/// (nccl_graph): the fastest per-channel speed of NCCL's speed list that the GPU's NVLink
/// (one node) or its NIC path (several nodes) carries, as many channels as the links hold,
/// NCCL's channel duplication, and for trees on two nodes the doubled intra-node speed of
/// the search's second pass. An NVLink domain larger than a node (GB200 NVL72) is one NCCL
/// node, as NCCL treats a multi-node NVLink clique.

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "topology/collective.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

enum class NcclAlgo { kTree, kRing, kCollNetDirect, kCollNetChain, kNvls, kNvlsTree, kPat };
enum class NcclProto { kLL, kLL128, kSimple };
inline constexpr int kNcclAlgos = 7;
inline constexpr int kNcclProtos = 3;

/// perfcast's names: "tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat".
[[nodiscard]] std::string_view nccl_algo_name(NcclAlgo a);
[[nodiscard]] std::string_view nccl_proto_name(NcclProto p);
/// The algorithm of a perfcast name (also NCCL_ALGO spellings such as "NVLSTree",
/// "CollNetChain"); false when unknown.
[[nodiscard]] bool nccl_algo_from_name(std::string_view name, NcclAlgo* out);

/// GPU generations NCCL keys its constants by.
enum class NcclArch { kVolta, kAmpere, kHopper, kBlackwell };

/// What NCCL's tuning sees of a communicator: its ranks, NCCL nodes (NVLink domains) and
/// the links of one node.
struct NcclTopo {
  NcclArch arch = NcclArch::kHopper;
  int ranks = 1;
  int nodes = 1;                  ///< NVLink domains spanned
  double ppn = 1;                 ///< ranks / nodes
  bool nvswitch = false;          ///< NVLink switch fabric inside a node (else PCIe or mesh)
  bool nvlink_intra = false;      ///< NVLink between the GPUs of a node (switch or mesh)
  bool nvls = false;              ///< NVLink SHARP (NVSwitch multicast) usable
  bool collnet = false;           ///< CollNet (SHARP) enabled
  bool amd_cpu = false;           ///< AMD host CPUs (NCCL's multi-node LL caps and network overhead)
  bool arm_cpu = false;           ///< Arm host CPUs (Grace): NCCL's x86-only corrections are off
  double nvlink_gbps = 0;         ///< NCCL's NVLink rate of one GPU: links x per-lane rate, GB/s
  double pcie_gbps = 0;           ///< NCCL's PCIe rate of one GPU, GB/s
  double nic_gbps = 0;            ///< one NIC, GB/s (NCCL: speed in Mb/s / 8000)
  int nics_per_node = 0;          ///< NICs of one NCCL node (NVLink domain)
};

/// The communicator of `group` on `system` as NCCL's tuning sees it.
[[nodiscard]] NcclTopo nccl_topo(const SystemSpec& system, const RankGroup& group);
[[nodiscard]] NcclArch nccl_arch(const GpuSpec& gpu);

/// Outcome of the channel search for one pattern: channels and per-channel speeds, GB/s.
struct NcclGraph {
  int channels = 0;
  double bw_intra = 0;
  double bw_inter = 0;
};
enum class NcclPattern { kRing, kTree, kNvls };
[[nodiscard]] NcclGraph nccl_graph(const NcclTopo& t, NcclPattern pattern);

/// SMs NCCL's kernel of a collective holds while it runs: one CTA per channel (NCCL launches
/// its collective kernels with one block per channel, src/enqueue.cc), the channels of the
/// graph of `algorithm` (perfcast's name: ring and pat on the ring graph, tree and collnet on
/// the tree graph, nvls and nvls_tree on the NVLS graph) for this group; an all-to-all(v) of
/// three ranks or more holds NCCL's point-to-point channels (the ring graph's channels rounded
/// up to a power of two, at most 32); a transfer between two ranks (pipeline stages,
/// context-parallel ring steps) the channels NCCL gives one send or receive of its size
/// (pair_transfer_sms). 0 for other algorithm names ("local", ...) and for one rank.
[[nodiscard]] int nccl_kernel_sms(const SystemSpec& system, const RankGroup& group, const CollectiveDesc& desc,
                                  std::string_view algorithm);

/// Channels (one CTA each) of NCCL's point-to-point kernel for a transfer between the two ranks
/// of `group`, the larger direction's bytes (an all-to-allv's pair_bytes; an all-to-all's
/// bytes / 2, its share for the other rank), with the pair as
/// the communicator (src/graph/paths.cc ncclTopoGetNchannels and ncclTopoComputeP2pChannels,
/// src/enqueue.cc addP2pToPlan and the p2p task split, src/init.cc p2pChunkSize; NCCL 2.30):
/// channels per peer 2 x the NVLink links between them (2 over PCIe; across NVLink domains the
/// larger of the GPU's NICs and their GB/s / 14), a power of two, at most the communicator's
/// point-to-point channels (the ring graph's rounded up to a power of two, at most 32); a send
/// starts on the per-peer channels halved until both ranks fit the communicator's, one per
/// min-part (chunk / 8 in a domain, chunk / 2 across; chunk 512 KiB over NVLink, 128 KiB over
/// PCIe or a network, 256 KiB on Grace Blackwell's network) of its bytes, and doubles while a
/// part exceeds the max-part (chunk x 32 in a domain, chunk across). 0 for an empty transfer
/// or a group that is not two ranks. A job's pipeline communicator spans all its stages: NCCL
/// there takes the least channels of any of their peers, which the pair does not see.
[[nodiscard]] int pair_transfer_sms(const SystemSpec& system, const RankGroup& group, const CollectiveDesc& desc);

/// NCCL's latency (us) and algorithm bandwidth (GB/s; 0 = not available) of every
/// (algorithm, protocol) for one collective kind, after its enable rules (NVLS only with
/// NVSwitch multicast, across nodes only with CollNet; NVLS Tree across nodes only; CollNet
/// with SHARP; PAT with one rank per node; LL128 only over NVLink-class paths).
struct NcclTable {
  std::array<std::array<double, kNcclProtos>, kNcclAlgos> latency_us{};
  std::array<std::array<double, kNcclProtos>, kNcclAlgos> bandwidth_gbps{};
  int ring_channels = 1;  ///< the communicator's channel count (NCCL's comm->nChannels)
};
[[nodiscard]] NcclTable nccl_table(const NcclTopo& t, CollectiveKind kind);

/// One (algorithm, protocol) at one size: NCCL's latency (with its multi-node ring
/// "plateau" factor) and bandwidth (with its tree correction factor), and their time.
struct NcclCost {
  NcclAlgo algo = NcclAlgo::kRing;
  NcclProto proto = NcclProto::kSimple;
  double latency_us = 0;
  double bandwidth_gbps = 0;
  double time_us = 0;
};
/// The cost of (algo, proto) at `bytes` (nccl-tests bytes of the collective); false when
/// NCCL would not run it.
[[nodiscard]] bool nccl_cost(const NcclTopo& t, const NcclTable& table, CollectiveKind kind, double bytes,
                             NcclAlgo algo, NcclProto proto, NcclCost* out);

/// NCCL's latency of (algo, proto) at `bytes`, us: the table's, times its multi-node ring
/// "plateau" factor (x1.4 from Ampere, x1.9 before, for Simple rings across nodes once each
/// channel and rank moves at least 64 bytes).
[[nodiscard]] double nccl_latency_us(const NcclTopo& t, const NcclTable& table, CollectiveKind kind, double bytes,
                                     NcclAlgo algo, NcclProto proto);

/// NCCL's per-hop hardware latency of (algo, proto), us: over the network, or inside a node
/// (NVLink, or PCIe where the node has no NVLink).
[[nodiscard]] double nccl_hop_latency_us(const NcclTopo& t, NcclAlgo algo, NcclProto proto, bool network);

/// NCCL's choice: the fastest available (algorithm, protocol) at `bytes`, restricted to
/// `forced_algo` / `forced_proto` when given (NCCL_ALGO / NCCL_PROTO; a forced algorithm
/// that is not available falls back to NCCL's own choice, as NCCL errors out instead).
[[nodiscard]] NcclCost nccl_choice(const NcclTopo& t, const NcclTable& table, CollectiveKind kind, double bytes,
                                   const NcclAlgo* forced_algo = nullptr, const NcclProto* forced_proto = nullptr);

/// NCCL's tree correction factor for `proto` at `bytes` (64 B to 256 MB; 1 outside), as
/// NCCL applies it: one value per power-of-two bin.
[[nodiscard]] double nccl_tree_correction(NcclProto proto, double bytes);
/// The same factors interpolated linearly in log2(bytes) between bin centres, for times:
/// continuous, and bytes / factor never decreases (the factor changes by at most 0.1 per
/// doubling and is at least 0.4).
[[nodiscard]] double nccl_tree_correction_smooth(NcclProto proto, double bytes);

/// A size where NCCL's choice changes, and the choice just below it.
struct NcclSwitch {
  double bytes = 0;
  NcclAlgo algo_before = NcclAlgo::kRing;
  NcclProto proto_before = NcclProto::kSimple;
};
/// Every size up to `max_bytes` (from 8 B) where nccl_choice changes (found on a grid of
/// 2^(1/4) steps and refined by bisection to 1e-6 relative), in increasing order.
[[nodiscard]] std::vector<NcclSwitch> nccl_switches(const NcclTopo& t, const NcclTable& table, CollectiveKind kind,
                                                    double max_bytes, const NcclAlgo* forced_algo = nullptr);

}  // namespace perfcast
