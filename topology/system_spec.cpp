#include "topology/system_spec.hpp"

#include "core/input_file.hpp"
#include "core/limits.hpp"
#include "core/json_text.hpp"

#include <fmt/format.h>

namespace perfcast {
namespace {

constexpr std::int64_t kMaxCount = 1'000'000;

EfficiencyFactors parse_efficiency(const JsonObject& o) {
  EfficiencyFactors e;
  e.gemm = o.number_or("gemm", 0.01, 1.0, e.gemm);
  e.memory = o.number_or("memory", 0.01, 1.0, e.memory);
  e.copy = o.number_or("copy", 0.01, 1.0, e.copy);
  e.min_kernel_time = o.quantity_or("min_kernel_time", Dimension::kTime, e.min_kernel_time);
  o.finish();
  return e;
}

GpuSpec parse_gpu_object(const JsonObject& o) {
  GpuSpec g;
  g.name = o.string("name");
  g.sm_count = static_cast<int>(o.integer("sm_count", 1, 10'000));
  g.compute_capability = o.number_or("compute_capability", 1.0, 20.0, 0.0);
  g.boost_clock = o.quantity("boost_clock", Dimension::kFrequency);
  g.memory = o.quantity("memory", Dimension::kBytes);
  if (g.memory <= 0) o.fail("memory", "must be positive");
  g.memory_bandwidth = o.quantity("memory_bandwidth", Dimension::kBandwidth);
  if (g.memory_bandwidth <= 0) o.fail("memory_bandwidth", "must be positive");
  g.l2_cache = o.quantity("l2_cache", Dimension::kBytes);
  g.l2_bandwidth = o.quantity("l2_bandwidth", Dimension::kBandwidth);
  if (g.l2_bandwidth <= 0) o.fail("l2_bandwidth", "must be positive");
  const JsonObject peak = o.object("peak");
  g.peak_fp32 = peak.quantity("fp32", Dimension::kFlopRate);
  if (g.peak_fp32 <= 0) peak.fail("fp32", "must be positive");
  g.peak_tf32 = peak.quantity_or("tf32", Dimension::kFlopRate, 0);
  g.peak_fp16 = peak.quantity("fp16", Dimension::kFlopRate);
  if (g.peak_fp16 <= 0) peak.fail("fp16", "must be positive");
  g.peak_bf16 = peak.quantity_or("bf16", Dimension::kFlopRate, 0);
  g.peak_fp8 = peak.quantity_or("fp8", Dimension::kFlopRate, 0);
  peak.finish();
  if (auto nv = o.find("nvlink")) {
    const JsonObject n = nv->as_object();
    g.nvlink_links = static_cast<int>(n.integer("links", 0, 64));
    g.nvlink_bandwidth = n.quantity("bandwidth", Dimension::kBandwidth);
    n.finish();
  }
  g.pcie_bandwidth = o.quantity("pcie_bandwidth", Dimension::kBandwidth);
  if (g.pcie_bandwidth <= 0) o.fail("pcie_bandwidth", "must be positive");
  if (auto e = o.find("efficiency")) g.efficiency = parse_efficiency(e->as_object());
  o.finish();
  return g;
}

GpuSpec parse_gpu(const JsonValue& v, const std::filesystem::path& base_dir) {
  if (v.is_string()) {
    const std::filesystem::path ref = base_dir / v.as_string();
    JsonDocument other;
    try {
      other = load_json_file(ref);
    } catch (const ConfigError& e) {
      v.fail(fmt::format("cannot use \"{}\" as the GPU: {}", v.as_string(), e.what()));
    }
    const JsonObject root(other);
    const JsonValue gpu = root.at("gpu");
    if (!gpu.is_object()) gpu.fail("a GPU reference must point at a file with an inline \"gpu\" object");
    return parse_gpu_object(gpu.as_object());
  }
  return parse_gpu_object(v.as_object());
}

/// Fails at `at` unless `path` exists (and is a regular file when `regular_file`); a path the
/// system refuses to look up (a name too long, a loop of links) fails there too.
void require_input_path(const JsonValue& at, const std::filesystem::path& path, bool regular_file) {
  const InputPathStatus st = input_path_status(path);
  if (!st.error.empty()) at.fail(fmt::format("cannot look up {}: {}", path.string(), st.error));
  if (regular_file ? !st.regular() : !st.exists()) at.fail(fmt::format("no such file: {}", path.string()));
}

/// "levels": [{"name": "leaf", "nodes": 32, "oversubscription": 1, "latency": "0.6us"}, ...],
/// lowest tier first; each tier's groups hold more nodes than the one below (0: all nodes).
std::vector<FabricLevel> parse_fabric_levels(const JsonArray& a) {
  a.require_size(1, 8);
  std::vector<FabricLevel> out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const JsonObject o = a[i].as_object();
    FabricLevel l;
    l.name = o.string("name");
    l.nodes = static_cast<int>(o.integer_or("nodes", 0, kMaxCount, 0));
    l.oversubscription = o.number_or("oversubscription", 1.0, 64.0, 1.0);
    l.latency = o.quantity_or("latency", Dimension::kTime, 0.0);
    if (l.latency < 0) o.fail("latency", "must not be negative");
    if (!out.empty() && (out.back().nodes == 0 || (l.nodes != 0 && l.nodes <= out.back().nodes)))
      o.fail("nodes", fmt::format("expected more nodes per group than the tier below ({}), or 0 for all", out.back().nodes));
    o.finish();
    out.push_back(l);
  }
  return out;
}

}  // namespace

double NetworkSpec::oversubscription_between(int a, int b) const {
  if (a == b) return 1.0;
  if (levels.empty()) return oversubscription;
  double o = 1.0;
  for (const auto& l : levels) {
    if (l.nodes > 0 && a / l.nodes == b / l.nodes) break;  // same group of this tier: no uplink
    o *= l.oversubscription;
    if (l.nodes == 0) break;
  }
  return o;
}

Seconds NetworkSpec::tier_latency_between(int a, int b) const {
  Seconds t = 0;
  if (a == b) return t;
  for (std::size_t i = 0; i < levels.size(); ++i) {
    const auto& l = levels[i];
    if (l.nodes > 0 && a / l.nodes == b / l.nodes) break;
    if (i + 1 < levels.size()) t += 2 * levels[i + 1].latency;  // up to and down from the next tier
    if (l.nodes == 0) break;
  }
  return t;
}

int SystemSpec::socket_of(int rank) const {
  const int local = rank % gpus_per_node;
  const int per_socket = std::max(1, (gpus_per_node + pcie.cpus - 1) / pcie.cpus);
  return local / per_socket;
}

int SystemSpec::mesh_links(int a, int b) const {
  if (fabric != IntraFabric::kNvlinkMesh || node_of(a) != node_of(b)) return 0;
  const auto g = static_cast<std::size_t>(gpus_per_node);
  return nvlink_mesh[static_cast<std::size_t>(a % gpus_per_node) * g + static_cast<std::size_t>(b % gpus_per_node)];
}

std::string_view fabric_name(IntraFabric f) {
  switch (f) {
    case IntraFabric::kNvSwitch: return "nvswitch";
    case IntraFabric::kPcie: return "pcie";
    case IntraFabric::kNvlinkMesh: return "nvlink_mesh";
    case IntraFabric::kNone: return "none";
  }
  return "none";
}

SystemSpec parse_system(const JsonDocument& doc) {
  const JsonObject root(doc);
  root.require_schema("perfcast.system", 1);
  SystemSpec s;
  s.file = doc.file;
  s.name = root.string("name");
  s.gpu = parse_gpu(root.at("gpu"), std::filesystem::path(doc.file).parent_path());
  if (const JsonValue g = root.at("gpu"); g.is_string())
    s.gpu_file = (std::filesystem::path(doc.file).parent_path() / g.as_string()).string();
  s.gpus_per_node = static_cast<int>(root.integer("gpus_per_node", 1, 1024));
  s.nodes = static_cast<int>(root.integer_or("nodes", 1, kMaxCount, 1));
  if (s.world_size() > limits::kMaxGpus)  // per-pair structures are quadratic in GPUs
    root.fail("nodes", fmt::format("{} nodes x {} GPUs = {} GPUs; perfcast models at most {} (core/limits.hpp)", s.nodes,
                                   s.gpus_per_node, static_cast<long long>(s.nodes) * s.gpus_per_node, limits::kMaxGpus));

  if (auto intra = root.find("intra_node")) {
    const JsonObject o = intra->as_object();
    const std::string fabric = o.at("fabric").as_enum({"nvswitch", "pcie", "nvlink_mesh"});
    s.fabric = fabric == "nvswitch" ? IntraFabric::kNvSwitch
               : fabric == "pcie"   ? IntraFabric::kPcie
                                    : IntraFabric::kNvlinkMesh;
    if (s.fabric != IntraFabric::kPcie) {
      if (s.gpu.nvlink_bandwidth <= 0) o.fail("fabric", fmt::format("an {} fabric needs a GPU with \"nvlink\"", fabric));
      if (s.fabric == IntraFabric::kNvlinkMesh && s.gpu.nvlink_links <= 0) {
        o.fail("fabric", "an nvlink_mesh fabric needs the GPU's NVLink count (\"nvlink\": {\"links\": ...})");
      }
      s.fabric_bandwidth = s.gpu.nvlink_bandwidth;
    } else {
      s.fabric_bandwidth = s.gpu.pcie_bandwidth;
    }
    s.fabric_hop_latency = o.quantity("hop_latency", Dimension::kTime);
    s.nvls = o.bool_or("nvls", false);
    if (o.find("domain_gpus")) {
      if (s.fabric != IntraFabric::kNvSwitch) o.fail("domain_gpus", "an NVLink domain larger than a node needs an \"nvswitch\" fabric");
      s.domain_gpus = static_cast<int>(o.integer("domain_gpus", s.gpus_per_node, limits::kMaxGpus));
      if (s.domain_gpus % s.gpus_per_node != 0)
        o.fail("domain_gpus", fmt::format("expected a multiple of gpus_per_node ({}), got {}", s.gpus_per_node, s.domain_gpus));
    }
    if (auto links = o.find("links")) {
      if (s.fabric != IntraFabric::kNvlinkMesh) links->fail("\"links\" belongs to an \"nvlink_mesh\" fabric");
      const JsonArray rows = links->as_array();
      const auto g = static_cast<std::size_t>(s.gpus_per_node);
      rows.require_size(g, g);
      s.nvlink_mesh.assign(g * g, 0);
      for (std::size_t i = 0; i < g; ++i) {
        const JsonArray row = rows[i].as_array();
        row.require_size(g, g);
        int total = 0;
        for (std::size_t j = 0; j < g; ++j) {
          const int n = static_cast<int>(row[j].as_integer(0, s.gpu.nvlink_links));
          if (i == j && n != 0) row[j].fail("a GPU has no NVLink to itself: expected 0");
          s.nvlink_mesh[i * g + j] = n;
          total += n;
        }
        if (total > s.gpu.nvlink_links) {
          row.fail(fmt::format("GPU {} uses {} NVLinks, more than its {}", i, total, s.gpu.nvlink_links));
        }
      }
      for (std::size_t i = 0; i < g; ++i)
        for (std::size_t j = 0; j < i; ++j)
          if (s.nvlink_mesh[i * g + j] != s.nvlink_mesh[j * g + i]) {
            rows[i].as_array()[j].fail(fmt::format("links must be symmetric: GPU {} to {} has {}, {} to {} has {}", i, j,
                                                   s.nvlink_mesh[i * g + j], j, i, s.nvlink_mesh[j * g + i]));
          }
    } else if (s.fabric == IntraFabric::kNvlinkMesh) {
      o.fail("links", "missing required key (an nvlink_mesh fabric needs the NVLink count of every GPU pair)");
    }
    if (auto p = o.find("pcie")) {
      const JsonObject po = p->as_object();
      s.pcie.switches = static_cast<int>(po.integer("switches", 1, 64));
      s.pcie.cpus = static_cast<int>(po.integer("cpus", 1, 16));
      s.pcie.cpu_interconnect_bandwidth = po.quantity("cpu_interconnect_bandwidth", Dimension::kBandwidth);
      po.finish();
    } else if (s.fabric == IntraFabric::kPcie) {
      o.fail("pcie", "missing required key (a PCIe fabric needs its switches, cpus and cpu_interconnect_bandwidth)");
    }
    o.finish();
  } else if (s.gpus_per_node > 1) {
    root.fail("intra_node", fmt::format("missing required key (needed when gpus_per_node is {})", s.gpus_per_node));
  }

  if (auto net = root.find("network")) {
    const JsonObject o = net->as_object();
    s.network.nics_per_node = static_cast<int>(o.integer("nics_per_node", 1, 1024));
    s.network.nic_bandwidth = o.quantity("nic_bandwidth", Dimension::kBandwidth);
    if (s.network.nic_bandwidth <= 0) o.fail("nic_bandwidth", "must be positive");
    s.network.latency = o.quantity("latency", Dimension::kTime);
    s.network.oversubscription = o.number_or("oversubscription", 1.0, 64.0, 1.0);
    s.network.rail_optimized = o.bool_or("rail_optimized", true);
    s.network.switch_latency = o.quantity_or("switch_latency", Dimension::kTime, 0.0);
    if (s.network.switch_latency < 0) o.fail("switch_latency", "must not be negative");
    s.network.message_rate = o.number_or("message_rate", 1e3, 1e12, 0.0);
    s.network.sharp = o.bool_or("sharp", false);
    if (auto levels = o.find("levels")) s.network.levels = parse_fabric_levels(levels->as_array());
    o.finish();
  } else if (s.nodes > s.nodes_per_domain()) {
    root.fail("network", fmt::format("missing required key (needed when nodes is {})", s.nodes));
  }
  if (s.nodes % s.nodes_per_domain() != 0)
    root.fail("nodes", fmt::format("{} nodes do not fill whole NVLink domains of {} nodes ({} GPUs)", s.nodes,
                                   s.nodes_per_domain(), s.domain_size()));
  if (auto src = root.find("sources"); src && src->is_object()) {
    const JsonObject so = src->as_object();
    for (const auto& key : so.keys()) {
      const JsonValue v = so.at(key);
      s.sources.emplace_back(key, v.is_string() ? v.as_string() : json_text(v.raw()));
    }
  }

  if (auto host = root.find("host")) s.host = parse_host_spec(host->as_object(), s.host);
  s.host_memory.host_to_device = s.host_memory.device_to_host = s.gpu.pcie_bandwidth;
  if (auto hm = root.find("host_memory")) s.host_memory = parse_host_memory(hm->as_object(), s.host_memory);
  if (auto cpu = root.find("cpu")) s.cpu = parse_cpu(cpu->as_object());
  if (auto cal = root.find("kernel_calibration")) {
    s.kernel_calibration = std::filesystem::path(doc.file).parent_path() / cal->as_string();  // an absolute path stays itself
    require_input_path(*cal, s.kernel_calibration, /*regular_file=*/true);
  }
  if (auto cal = root.find("collective_calibration")) {
    s.comms_calibration = std::filesystem::path(doc.file).parent_path() / cal->as_string();
    require_input_path(*cal, s.comms_calibration, /*regular_file=*/false);
  }
  root.finish();
  return s;
}

SystemSpec load_system(const std::filesystem::path& path) { return parse_system(load_json_file(path)); }

HostMemorySpec parse_host_memory(const JsonObject& o, HostMemorySpec m) {
  m.capacity = o.quantity("capacity", Dimension::kBytes);
  if (m.capacity <= 0) o.fail("capacity", "must be positive");
  m.host_to_device = o.quantity_or("host_to_device_bandwidth", Dimension::kBandwidth, m.host_to_device);
  m.device_to_host = o.quantity_or("device_to_host_bandwidth", Dimension::kBandwidth, m.device_to_host);
  if (m.host_to_device <= 0) o.fail("host_to_device_bandwidth", "must be positive");
  if (m.device_to_host <= 0) o.fail("device_to_host_bandwidth", "must be positive");
  m.numa_nodes = static_cast<int>(o.integer_or("numa_nodes", 1, 64, m.numa_nodes));
  m.reserved_share = o.number_or("reserved_share", 0.0, 0.99, m.reserved_share);
  o.finish();
  return m;
}

CpuSpec parse_cpu(const JsonObject& o) {
  CpuSpec c;
  c.model = o.string("model");
  if (c.model.empty()) o.fail("model", "expected the CPU's name, e.g. \"Intel Xeon Platinum 8480C\"");
  c.sockets = static_cast<int>(o.integer("sockets", 1, 64));
  c.cores_per_socket = static_cast<int>(o.integer("cores_per_socket", 1, 4096));
  c.boost_clock_ghz = o.at("boost_clock_ghz").as_number_in(0.1, 10.0);
  if (o.find("host_speed")) {
    c.host_speed = o.at("host_speed").as_number_in(0.01, 100.0);
    c.host_speed_measured = true;
  } else {
    c.host_speed = c.boost_clock_ghz / kReferenceCpuBoostGhz;
  }
  o.finish();
  return c;
}

HostSpec parse_host_spec(const JsonObject& o, HostSpec h) {
  h.op_overhead = o.quantity_or("op_overhead", Dimension::kTime, h.op_overhead);
  if (o.find("backward_op_overhead")) {
    h.backward_op_overhead = o.quantity("backward_op_overhead", Dimension::kTime);  // refuses negatives
  }
  h.launch_overhead = o.quantity_or("launch_overhead", Dimension::kTime, h.launch_overhead);
  h.collective_launch_overhead = o.quantity_or("collective_launch_overhead", Dimension::kTime, h.collective_launch_overhead);
  h.moe_layer_overhead = o.quantity_or("moe_layer_overhead", Dimension::kTime, h.moe_layer_overhead);
  h.fp8_module_overhead = o.quantity_or("fp8_module_overhead", Dimension::kTime, h.fp8_module_overhead);
  h.table_overhead = o.quantity_or("table_overhead", Dimension::kTime, h.table_overhead);
  h.sample_overhead = o.quantity_or("sample_overhead", Dimension::kTime, h.sample_overhead);
  h.graph_launch_overhead = o.quantity_or("graph_launch_overhead", Dimension::kTime, h.graph_launch_overhead);
  h.launch_queue_depth = static_cast<int>(o.integer_or("launch_queue_depth", 0, 1 << 20, h.launch_queue_depth));
  o.finish();
  return h;
}

}  // namespace perfcast
