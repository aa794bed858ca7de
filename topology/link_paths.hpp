#pragma once
/// \file link_paths.hpp
/// The path between two ranks of a system: which link class bounds it, the bandwidth one
/// flow reaches on it alone (per direction) and its hop latency. Also the achievable link
/// rates the collective models share (efficiency constants with their sources).

#include <string_view>

#include "topology/system_spec.hpp"
#include "core/units.hpp"

namespace perfcast {

/// Share of per-direction NVLink line rate a ring reaches: H100 ring busBw 360-370 GB/s of
/// 450 (docs/collectives.md section 3), so 0.82.
inline constexpr double kNvlinkEfficiency = 0.82;
/// PCIe: NCCL models Gen5 x16 at 48 of 63 GB/s (docs/collectives.md sections 1.2, 3), 0.76.
inline constexpr double kPcieEfficiency = 0.76;
/// Network: 0.9-0.96 of NIC line rate (docs/collectives.md section 0); 0.92 taken.
inline constexpr double kNetworkEfficiency = 0.92;

/// Link classes, from the fastest path to the slowest.
enum class LinkClass {
  kLocal,        ///< the same rank
  kNvlink,       ///< through NVSwitch
  kPcieSwitch,   ///< GPU - PCIe switch - GPU
  kPcieHost,     ///< two PCIe switches under one CPU: through its root complex
  kCpuLink,      ///< GPUs under different CPU sockets: the CPU interconnect (UPI/xGMI)
  kNetwork,      ///< different nodes: GPU - PCIe - NIC - fabric - NIC - PCIe - GPU
};

[[nodiscard]] std::string_view link_class_name(LinkClass c);

struct PathInfo {
  LinkClass link = LinkClass::kLocal;
  BytesPerSecond bandwidth = 0;  ///< one flow alone, one direction, achievable (after efficiency)
  Seconds latency = 0;           ///< one message, end to end
  int hops = 0;                  ///< links and switches crossed (GPU to GPU = 1 through NVSwitch)
};

/// Path between global ranks `a` and `b` (both < system.world_size()). Rules:
///  - NVSwitch: fabric rate x kNvlinkEfficiency, fabric hop latency, 1 hop.
///  - NVLink mesh: the pair's links x the per-link rate x kNvlinkEfficiency, 1 hop; a pair
///    without a link relays through the third GPU with the most links to both (2 hops, the
///    narrower of the two legs); no relay: through the CPU at the PCIe rate.
///  - PCIe, same switch: PCIe rate x kPcieEfficiency, 1 hop latency; different switches
///    under one CPU: the same rate through the root complex, 2 hops; different CPUs:
///    bounded by the CPU interconnect, 3 hops.
///  - Different nodes: the GPU's NIC share (at most one NIC per GPU: NCCL does not
///    aggregate NICs for one GPU, docs/collectives.md section 6) x kNetworkEfficiency, bounded
///    by the GPU's PCIe link (GPUDirect RDMA crosses it), divided by the oversubscription;
///    latency = network latency, plus one NVLink/PCIe hop (PXN) when the two GPUs sit on
///    different rails of a rail-optimized fabric (it stays on the target's rail), plus 2
///    switch traversals (leaf-spine-leaf) on a fabric without rails.
[[nodiscard]] PathInfo path_between(const SystemSpec& system, int a, int b);

/// Achievable per-direction network bandwidth of one GPU (its NIC share, PCIe bound,
/// oversubscription), bytes/s; +inf without a network.
[[nodiscard]] BytesPerSecond network_bandwidth_per_gpu(const SystemSpec& system);
/// Achievable per-direction bandwidth of one NIC as one GPU drives it (no sharing), bytes/s.
[[nodiscard]] BytesPerSecond network_bandwidth_per_nic(const SystemSpec& system);
/// Achievable per-direction bandwidth of a GPU's PCIe link, bytes/s.
[[nodiscard]] BytesPerSecond pcie_bandwidth_per_gpu(const SystemSpec& system);
/// Achievable per-direction rate of one NVLink (the GPU's NVLink total over its links), bytes/s.
[[nodiscard]] BytesPerSecond nvlink_per_link_bandwidth(const SystemSpec& system);
/// PCIe switch of a rank inside its node (GPUs spread evenly over the switches), 0-based.
[[nodiscard]] int pcie_switch_of(const SystemSpec& system, int rank);

}  // namespace perfcast
