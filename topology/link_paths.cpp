#include "topology/link_paths.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace perfcast {

std::string_view link_class_name(LinkClass c) {
  switch (c) {
    case LinkClass::kLocal: return "local";
    case LinkClass::kNvlink: return "nvlink";
    case LinkClass::kPcieSwitch: return "pcie";
    case LinkClass::kPcieHost: return "pcie-host";
    case LinkClass::kCpuLink: return "cpu-link";
    case LinkClass::kNetwork: return "network";
  }
  return "?";
}

int pcie_switch_of(const SystemSpec& s, int rank) {
  const int local = rank % s.gpus_per_node;
  const int per_switch = std::max(1, (s.gpus_per_node + s.pcie.switches - 1) / s.pcie.switches);
  return local / per_switch;
}

BytesPerSecond nvlink_per_link_bandwidth(const SystemSpec& s) {
  return s.gpu.nvlink_links > 0 ? s.gpu.nvlink_bandwidth / s.gpu.nvlink_links * kNvlinkEfficiency : 0.0;
}

BytesPerSecond pcie_bandwidth_per_gpu(const SystemSpec& s) { return s.gpu.pcie_bandwidth * kPcieEfficiency; }

BytesPerSecond network_bandwidth_per_nic(const SystemSpec& s) {
  if (s.network.nics_per_node <= 0) return std::numeric_limits<double>::infinity();
  return std::min(s.network.nic_bandwidth * kNetworkEfficiency, pcie_bandwidth_per_gpu(s)) / s.network.oversubscription;
}

BytesPerSecond network_bandwidth_per_gpu(const SystemSpec& s) {
  if (s.network.nics_per_node <= 0) return std::numeric_limits<double>::infinity();
  const double nic_share = std::min(1.0, static_cast<double>(s.network.nics_per_node) / s.gpus_per_node);
  return std::min(s.network.nic_bandwidth * nic_share * kNetworkEfficiency, pcie_bandwidth_per_gpu(s)) /
         s.network.oversubscription;
}

PathInfo path_between(const SystemSpec& s, int a, int b) {
  if (a < 0 || b < 0 || a >= s.world_size() || b >= s.world_size()) {
    throw std::out_of_range("path_between: rank outside the system");
  }
  PathInfo p;
  if (a == b) {
    p.bandwidth = s.gpu.memory_bandwidth;
    return p;
  }
  if (s.node_of(a) == s.node_of(b)) {
    if (s.fabric == IntraFabric::kNvSwitch) {
      p.link = LinkClass::kNvlink;
      p.bandwidth = s.fabric_bandwidth * kNvlinkEfficiency;
      p.latency = s.fabric_hop_latency;
      p.hops = 1;
      return p;
    }
    if (s.fabric == IntraFabric::kNvlinkMesh) {
      p.link = LinkClass::kNvlink;
      int links = s.mesh_links(a, b);
      p.hops = 1;
      if (links == 0) {
        // Relay through the GPU with the widest two-leg path.
        const int base = a - a % s.gpus_per_node;
        for (int c = base; c < base + s.gpus_per_node; ++c) {
          if (c == a || c == b) continue;
          links = std::max(links, std::min(s.mesh_links(a, c), s.mesh_links(c, b)));
        }
        p.hops = 2;
      }
      if (links == 0) {  // no NVLink path: through the CPU
        p.link = LinkClass::kPcieHost;
        p.bandwidth = pcie_bandwidth_per_gpu(s);
      } else {
        p.bandwidth = links * nvlink_per_link_bandwidth(s);
      }
      p.latency = p.hops * s.fabric_hop_latency;
      return p;
    }
    p.bandwidth = s.fabric_bandwidth * kPcieEfficiency;
    if (s.socket_of(a) != s.socket_of(b)) {
      p.link = LinkClass::kCpuLink;
      if (s.pcie.cpu_interconnect_bandwidth > 0) p.bandwidth = std::min(p.bandwidth, s.pcie.cpu_interconnect_bandwidth);
      p.hops = 3;
    } else if (pcie_switch_of(s, a) != pcie_switch_of(s, b)) {
      p.link = LinkClass::kPcieHost;
      p.hops = 2;
    } else {
      p.link = LinkClass::kPcieSwitch;
      p.hops = 1;
    }
    p.latency = p.hops * s.fabric_hop_latency;
    return p;
  }
  p.link = LinkClass::kNetwork;
  p.bandwidth = network_bandwidth_per_gpu(s);
  p.latency = s.network.latency;
  p.hops = 1;
  const int la = a % s.gpus_per_node;
  const int lb = b % s.gpus_per_node;
  const int nics = std::max(1, s.network.nics_per_node);
  const bool same_rail = s.network.rail_optimized && la * nics / s.gpus_per_node == lb * nics / s.gpus_per_node;
  if (s.network.rail_optimized && !same_rail) {
    // PXN: one intra-node hop to the GPU on the target's rail, then that rail.
    p.latency += s.fabric_hop_latency;
    p.hops += 1;
  } else if (!s.network.rail_optimized) {
    p.latency += 2 * s.network.switch_latency;
    p.hops += 2;
  }
  return p;
}

}  // namespace perfcast
