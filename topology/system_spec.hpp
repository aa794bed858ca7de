#pragma once
/// \file system_spec.hpp
/// A machine or cluster: identical GPUs in identical nodes, the intra-node fabric, the
/// NICs and fabric between nodes, and the host's CPU-overhead constants.

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "topology/gpu_spec.hpp"
#include "core/json_reader.hpp"
#include "core/units.hpp"

namespace perfcast {

/// How GPUs of one node talk to each other.
enum class IntraFabric {
  kNvSwitch,  ///< every GPU reaches every other through NVSwitch at its full NVLink rate
  kPcie,      ///< through PCIe switches, and through the CPUs between switch groups
  /// NVLink wired GPU to GPU without a switch (DGX-1 hybrid cube mesh): per-pair link
  /// counts in SystemSpec::nvlink_mesh; pairs without a link relay through a third GPU.
  kNvlinkMesh,
  kNone,      ///< single GPU
};

struct PcieTopology {
  int switches = 1;  ///< PCIe switches per node; GPUs are spread evenly over them
  int cpus = 1;      ///< CPU sockets per node; switches are spread evenly over them
  /// Usable CPU-to-CPU bandwidth per direction (UPI/Infinity Fabric), for traffic between
  /// GPUs under different CPUs.
  BytesPerSecond cpu_interconnect_bandwidth = 0;
};

/// One tier of switches above the NICs (leaf, spine, core), lowest first. Traffic between
/// nodes of different groups of a tier crosses that tier's uplinks.
struct FabricLevel {
  std::string name;               ///< "leaf", "spine", ...
  /// Nodes in one group below this tier (consecutive node indices; 0: every node of the
  /// system). Leaf: the nodes whose NICs of one rail share a leaf switch (a DGX SuperPOD
  /// scalable unit holds 32 nodes).
  int nodes = 0;
  /// Downlink : uplink bandwidth of this tier's switches (1 = non-blocking). Traffic that
  /// leaves a group shares the uplinks, so its bandwidth is divided by the product of the
  /// oversubscriptions of every tier it crosses.
  double oversubscription = 1.0;
  Seconds latency = 0;            ///< one switch traversal of this tier (crossed up and down)
};

struct NetworkSpec {
  int nics_per_node = 0;           ///< NICs used for GPU traffic (one rail each)
  BytesPerSecond nic_bandwidth = 0;  ///< one NIC, one direction
  Seconds latency = 0;             ///< one network hop, end to end
  double oversubscription = 1.0;   ///< fabric oversubscription (1 = full bisection)
  /// Rail-optimized fabric (DGX SuperPOD style): NIC k of every node sits on leaf switch
  /// ("rail") k, so traffic between GPUs of the same local index stays on one rail; other
  /// pairs take one extra NVLink hop to the GPU that owns the target rail (NCCL PXN).
  /// false: one leaf switch per node, every pair crosses the spine.
  bool rail_optimized = true;
  /// One leaf/spine switch traversal, s; a non-rail-aligned or non-rail fabric pays 2 more
  /// (leaf-spine-leaf). 0: included in `latency`.
  Seconds switch_latency = 0;
  /// Switch tiers above the NICs, leaf first. Empty: one tier whose `oversubscription`
  /// applies between every two nodes (the fabric of files without "levels").
  std::vector<FabricLevel> levels;
  /// Messages one NIC sends per second (0: not modelled); bounds transfers of many small
  /// messages (all-to-all at scale: one message per peer and chunk).
  double message_rate = 0;
  /// In-network reduction (NVIDIA SHARP) available to NCCL as CollNet: NCCL then also
  /// weighs CollNet Direct / Chain (and NVLS across nodes) for all-reduce.
  bool sharp = false;

  /// Oversubscription that traffic between node `a` and node `b` meets: the product over
  /// the tiers whose groups separate them (1 inside a group of the lowest tier).
  [[nodiscard]] double oversubscription_between(int a, int b) const;
  /// Switch latency added between nodes `a` and `b` beyond the leaf: 2 traversals per
  /// higher tier crossed, s.
  [[nodiscard]] Seconds tier_latency_between(int a, int b) const;
};

/// CPU costs of the training loop's host thread. Defaults and sources:
struct HostSpec {
  /// Host time per framework op (Python + dispatcher) before its first launch, s.
  /// 10us: assumed, in the 2-200 us range of the reference model's T1 gaps
  /// (docs/reference-paper.md section 6); replace with values from `perfcast import`.
  Seconds op_overhead = 10e-6;
  /// Host time per backward op run by the autograd engine (C++, no Python module call), s;
  /// unset: op_overhead. Recomputed forward ops (activation checkpointing) are Python module
  /// calls and keep op_overhead. Fitted values: see README "Transformers" (vTrain rows).
  std::optional<Seconds> backward_op_overhead;
  /// Host time of one cudaLaunchKernel/cudaMemcpyAsync call, s. 4us: the reference
  /// model's fixed T4 (docs/reference-paper.md section 6).
  Seconds launch_overhead = 4e-6;
  /// Extra fixed time of one NCCL collective that NCCL's own model leaves out, s.
  /// 20us: collectives.md section 0 (PyTorch harness floor ~40 us against the model's 15 us).
  Seconds collective_launch_overhead = 20e-6;
  /// Extra host time of one mixture-of-experts layer forward, s: the router's and token
  /// dispatcher's Python and small-tensor work that perfcast's op list does not spell out
  /// (top-k, load-balancing loss, token counts, permutation indices). 0: none; fitted values
  /// live in runtime profiles (configs/runtimes/megatron_core_ci.json).
  Seconds moe_layer_overhead = 0;
  /// Extra host time of one FP8 linear module call in the forward (Transformer Engine's
  /// scaling-factor bookkeeping around the cast and the GEMM: amax and scale handling, the
  /// scale inverse, the FP8 metadata the backward keeps), s. 0: none; runtime profiles set it.
  Seconds fp8_module_overhead = 0;
  /// Host time per table an op handles one by one (TorchRec's per-feature KeyedJaggedTensor
  /// splits, permutes and views), s; 0: none (runtime profiles set it).
  Seconds table_overhead = 0;
  /// Host time per sample the training thread handles (batch assembly without an overlapped
  /// reader), s; 0: none.
  Seconds sample_overhead = 0;
  /// Host time of one cudaGraphLaunch replaying a captured iteration, s. 10us: assumed, the
  /// order of a few kernel launches (CUDA graphs replace one launch call per kernel by one per
  /// graph); runtime profiles may set it.
  Seconds graph_launch_overhead = 10e-6;
  /// Launches a stream may have pending (issued, not finished) before the next launch call
  /// blocks until the oldest finishes; 0: unlimited. 1024: CUDA does not document it; launch
  /// calls are measured to stall after about 1000 pending kernels per stream (NVIDIA
  /// developer forum, "CUDA stream are blocked when launch lots of kernels (>1000)", 2018,
  /// and StackOverflow question 53970187).
  int launch_queue_depth = 1024;
};

/// Host (CPU) memory of one node, where fused_uvm and fused_uvm_caching embedding tables
/// live (docs/embedding.md, tables in host memory).
struct HostMemorySpec {
  Bytes capacity = 0;  ///< per node; 0: not declared (plans with host-memory tables are refused)
  /// Per GPU, per direction: host memory to the GPU and back (PCIe, or NVLink-C2C on Grace
  /// Hopper). Unset in the file: the GPU's pcie_bandwidth.
  BytesPerSecond host_to_device = 0, device_to_host = 0;
  /// NUMA domains (CPU sockets) of a node; GPUs are spread evenly over them and a GPU's
  /// host-memory tables are taken to be on its own domain (as numactl-bound trainers place them).
  int numa_nodes = 1;
  /// Share of the node's host memory held back for the OS, the data loader and pinned
  /// staging buffers. 0.1: assumed.
  double reserved_share = 0.1;
  /// Host memory one rank may use for its tables: (1 - reserved_share) x capacity / GPUs per node.
  [[nodiscard]] Bytes per_rank(int gpus_per_node) const { return capacity * (1 - reserved_share) / gpus_per_node; }
};

/// The host CPU of a node. Host costs of a fitted runtime profile (configs/runtimes/) hold
/// for the CPU they were measured on and are scaled by the ratio of single-thread speeds.
struct CpuSpec {
  std::string model;           ///< e.g. "Intel Xeon Platinum 8480C"; "": not declared
  int sockets = 0;             ///< per node
  int cores_per_socket = 0;
  double boost_clock_ghz = 0;  ///< the vendor's maximum single-core clock, GHz
  /// Single-thread host speed relative to the AMD EPYC 7742 (DGX A100's CPU, the CPU of the
  /// shipped runtime fits): host work that takes t there takes t / host_speed here. 0: not
  /// declared (no scaling). Unset in the file: boost_clock_ghz / 3.4 (the 7742's boost clock),
  /// which ignores differences in work per clock.
  double host_speed = 0;
  bool host_speed_measured = false;  ///< the file gives host_speed (with its source), not the clock ratio
};

/// AMD EPYC 7742 maximum boost clock, GHz (AMD product page: "Max. Boost Clock up to 3.4GHz").
inline constexpr double kReferenceCpuBoostGhz = 3.4;

struct SystemSpec {
  std::string name;   ///< e.g. "DGX H100"
  std::string file;   ///< the file it was read from
  std::string gpu_file;  ///< the system file whose "gpu" this one names ("" when inline)
  GpuSpec gpu;
  int gpus_per_node = 1;
  int nodes = 1;
  IntraFabric fabric = IntraFabric::kNone;
  /// Per-GPU, per-direction bandwidth into the intra-node fabric (NVLink total or PCIe).
  BytesPerSecond fabric_bandwidth = 0;
  Seconds fabric_hop_latency = 0;  ///< one hop through the intra-node fabric
  bool nvls = false;               ///< NVSwitch in-switch reduction (SHARP) available
  PcieTopology pcie;
  /// kNvlinkMesh only: gpus_per_node x gpus_per_node row-major NVLink counts between the
  /// GPUs of a node (symmetric, zero diagonal).
  std::vector<int> nvlink_mesh;
  /// GPUs that share one NVLink domain (NVSwitch fabric): gpus_per_node for a DGX/HGX node,
  /// 72 for a GB200 NVL72 rack of 18 compute trays of 4 GPUs. A multiple of gpus_per_node.
  /// Collectives treat a domain as NCCL treats a multi-node NVLink clique: one "node".
  int domain_gpus = 0;
  NetworkSpec network;
  HostSpec host;
  HostMemorySpec host_memory;
  CpuSpec cpu;
  /// Calibration file of the collective models ("collective_calibration", relative to the
  /// system file); empty: spec-derived models only.
  std::filesystem::path comms_calibration;
  /// "kernel_calibration": a kernel calibration file (relative to the system file's folder,
  /// or absolute); empty: configs/calibration/<gpu>.json next to the system's folder.
  std::filesystem::path kernel_calibration;

  /// The file's "sources": what each group of constants was taken from (key, text).
  std::vector<std::pair<std::string, std::string>> sources;

  [[nodiscard]] int world_size() const { return gpus_per_node * nodes; }
  [[nodiscard]] int node_of(int rank) const { return rank / gpus_per_node; }
  /// GPUs per NVLink domain (domain_gpus, or gpus_per_node when unset).
  [[nodiscard]] int domain_size() const { return domain_gpus > 0 ? domain_gpus : gpus_per_node; }
  /// NVLink domain of a rank (ranks of one domain reach each other over NVLink).
  [[nodiscard]] int domain_of(int rank) const { return rank / domain_size(); }
  /// Nodes (hosts) per NVLink domain.
  [[nodiscard]] int nodes_per_domain() const { return domain_size() / gpus_per_node; }
  /// CPU socket of a rank inside its node (PCIe systems), 0-based.
  [[nodiscard]] int socket_of(int rank) const;
  /// NVLinks between two ranks of one node on a mesh fabric (0 elsewhere).
  [[nodiscard]] int mesh_links(int a, int b) const;
};

/// Reads a system file (schema "perfcast.system" 1.x). `doc` may carry --set edits.
/// A "gpu" given as a string names another system file (relative to this one's folder)
/// whose inline "gpu" block is used. Throws ConfigError.
[[nodiscard]] SystemSpec parse_system(const JsonDocument& doc);

/// Reads a `host` object (op_overhead, backward_op_overhead, launch_overhead,
/// collective_launch_overhead, moe_layer_overhead, fp8_module_overhead, table_overhead,
/// sample_overhead, graph_launch_overhead; times) over `base`: keys present replace base's values.
[[nodiscard]] HostSpec parse_host_spec(const JsonObject& host, HostSpec base);
/// Reads a `host_memory` object (capacity required; host_to_device_bandwidth,
/// device_to_host_bandwidth, numa_nodes, reserved_share optional) over `base`.
[[nodiscard]] HostMemorySpec parse_host_memory(const JsonObject& host_memory, HostMemorySpec base);
/// Reads a `cpu` object: model, sockets, cores_per_socket, boost_clock_ghz required;
/// host_speed optional (default: boost_clock_ghz / kReferenceCpuBoostGhz).
[[nodiscard]] CpuSpec parse_cpu(const JsonObject& cpu);
[[nodiscard]] SystemSpec load_system(const std::filesystem::path& path);

[[nodiscard]] std::string_view fabric_name(IntraFabric f);

}  // namespace perfcast
