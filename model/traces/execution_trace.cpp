#include "model/traces/execution_trace.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/traces/trace_input.hpp"
#include "core/json_reader.hpp"
#include "core/limits.hpp"
#include "core/json_text.hpp"

namespace perfcast {
namespace {

using nlohmann::json;

/// Thrown by collect_tensors for a tensor tuple with a numel outside [0, 2^53) or an element
/// size outside [0, 64] bytes; the caller names the node.
struct TensorTupleError {};

/// A tensor argument: [tensor_id, storage_id, offset, numel, element_bytes, device].
bool is_tensor_tuple(const json& v) {
  return v.is_array() && v.size() == 6 && v[0].is_number_integer() && v[1].is_number_integer() &&
         v[2].is_number_integer() && v[3].is_number_integer() && v[4].is_number_integer() && v[5].is_string();
}

void collect_tensors(const json& v, std::vector<EtTensor>& out, int depth = 0) {
  if (is_tensor_tuple(v)) {
    EtTensor t;
    t.id = v[0].get<std::int64_t>();
    t.storage = v[1].get<std::int64_t>();
    t.offset = v[2].get<std::int64_t>();
    t.numel = v[3].get<std::int64_t>();
    t.element_bytes = v[4].get<std::int64_t>();
    // Sizes beyond these would overflow numel x element bytes (an int64).
    if (v[3].is_number_unsigned() && v[3].get<std::uint64_t>() > static_cast<std::uint64_t>(limits::kMaxTraceInteger)) t.numel = -1;
    if (t.numel < 0 || t.numel > limits::kMaxTraceInteger || t.element_bytes < 0 || t.element_bytes > 64)
      throw TensorTupleError{};
    t.device = v[5].get<std::string>();
    out.push_back(std::move(t));
    return;
  }
  if (v.is_array() && depth < 4) {
    for (const auto& x : v) collect_tensors(x, out, depth + 1);
  }
}

/// One size of a shape, within +-limits::kMaxTraceInteger.
std::int64_t shape_size(const json& d, const std::string& file, const std::string& pointer, const char* key) {
  if (d.is_number_unsigned() && d.get<std::uint64_t>() > static_cast<std::uint64_t>(limits::kMaxTraceInteger))
    throw ConfigError(file, pointer + "/" + key, fmt::format("a size larger than {}: {}", limits::kMaxTraceInteger, json_text(d)));
  const auto v = d.get<std::int64_t>();
  if (v < -limits::kMaxTraceInteger || v > limits::kMaxTraceInteger)
    throw ConfigError(file, pointer + "/" + key, fmt::format("a size outside +-{}: {}", limits::kMaxTraceInteger, json_text(d)));
  return v;
}

/// a x b for non-negative sizes, refusing results above limits::kMaxTraceInteger.
std::int64_t checked_product(std::int64_t a, std::int64_t b, const std::string& file, const std::string& pointer,
                             const char* key) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || r > limits::kMaxTraceInteger)
    throw ConfigError(file, pointer + "/" + key, fmt::format("a tensor with more than {} elements", limits::kMaxTraceInteger));
  return r;
}

/// "input_shapes": per argument a list of sizes ([] for non-tensors); a tensor list's
/// entry (a list of lists) is kept as one 1-D shape of its total element count.
std::vector<std::vector<std::int64_t>> read_shapes(const json& node, const char* key, const std::string& file,
                                                   const std::string& pointer) {
  std::vector<std::vector<std::int64_t>> out;
  const auto it = node.find(key);
  if (it == node.end()) return out;
  if (!it->is_array()) throw ConfigError(file, pointer + "/" + key, "expected a list of shapes");
  for (const auto& s : *it) {
    std::vector<std::int64_t> dims;
    if (s.is_array() && !s.empty() && s[0].is_array()) {
      std::int64_t total = 0;
      for (const auto& member : s) {
        if (!member.is_array()) continue;
        std::int64_t n = 1;
        for (const auto& d : member)
          if (d.is_number_integer()) n = checked_product(n, std::max<std::int64_t>(shape_size(d, file, pointer, key), 0), file, pointer, key);
        total = checked_product(1, total + n, file, pointer, key);
      }
      dims.push_back(total);
    } else if (s.is_array()) {
      for (const auto& d : s)
        if (d.is_number_integer()) dims.push_back(shape_size(d, file, pointer, key));
    }
    out.push_back(std::move(dims));
  }
  return out;
}

std::vector<std::string> read_strings(const json& node, const char* key) {
  std::vector<std::string> out;
  const auto it = node.find(key);
  if (it == node.end() || !it->is_array()) return out;
  for (const auto& s : *it) out.push_back(s.is_string() ? s.get<std::string>() : std::string());
  return out;
}

std::int64_t int_field(const json& node, const char* key, const std::string& file, const std::string& pointer,
                       std::optional<std::int64_t> fallback) {
  const auto it = node.find(key);
  if (it == node.end()) {
    if (fallback) return *fallback;
    throw ConfigError(file, pointer + "/" + key, "missing required key");
  }
  if (!it->is_number_integer()) throw ConfigError(file, pointer + "/" + key, fmt::format("expected an integer, got {}", it->type_name()));
  return it->get<std::int64_t>();
}

/// Rank number in a file name: the last run of digits after "rank", else after the last
/// '_' or '-' before the extension ("dlrm_eg_3.json", "worker3_step_12..." gives 3).
std::optional<int> rank_in_name(const std::string& name) {
  std::string base = name.substr(name.find_last_of("/:") == std::string::npos ? 0 : name.find_last_of("/:") + 1);
  std::string lower;
  for (char c : base) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (const char* key : {"rank", "worker"}) {
    if (const auto p = lower.find(key); p != std::string::npos) {
      std::size_t i = p + std::string_view(key).size();
      while (i < lower.size() && (lower[i] == '_' || lower[i] == '-')) ++i;
      std::size_t j = i;
      while (j < lower.size() && std::isdigit(static_cast<unsigned char>(lower[j]))) ++j;
      if (j > i) return j - i <= 9 ? std::optional<int>(std::stoi(lower.substr(i, j - i))) : std::nullopt;
    }
  }
  const auto dot = lower.find('.');
  const std::string stem = lower.substr(0, dot);
  const auto sep = stem.find_last_of("_-");
  if (sep == std::string::npos || sep + 1 >= stem.size()) return std::nullopt;
  const std::string digits = stem.substr(sep + 1);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return std::nullopt;
  if (digits.size() > 9) return std::nullopt;  // not a rank number (and beyond int)
  return std::stoi(digits);
}

/// Constant-time "is a a proper ancestor of n" on the parent tree, from the entry and exit
/// order of one depth-first walk from the roots (iterative: chains of any length).
/// Nodes on a parent cycle are reachable from no root and have no ancestors.
class AncestorIndex {
 public:
  explicit AncestorIndex(const ExecutionTrace& et) : enter_(et.nodes.size(), -1), exit_(et.nodes.size(), -1) {
    int clock = 0;
    std::vector<std::pair<int, std::size_t>> stack;  // node, next child
    for (std::size_t r = 0; r < et.nodes.size(); ++r) {
      const auto p = et.index_of_id.find(et.nodes[r].parent);
      if (p != et.index_of_id.end() && p->second != static_cast<int>(r)) continue;  // not a root
      stack.emplace_back(static_cast<int>(r), 0);
      enter_[r] = clock++;
      while (!stack.empty()) {
        auto& [node, next] = stack.back();
        const auto& children = et.nodes[static_cast<std::size_t>(node)].children;
        if (next < children.size()) {
          const int c = children[next++];
          if (enter_[static_cast<std::size_t>(c)] >= 0) continue;
          enter_[static_cast<std::size_t>(c)] = clock++;
          stack.emplace_back(c, 0);
        } else {
          exit_[static_cast<std::size_t>(node)] = clock++;
          stack.pop_back();
        }
      }
    }
  }
  [[nodiscard]] bool is_ancestor(int a, int n) const {
    const auto ai = static_cast<std::size_t>(a), ni = static_cast<std::size_t>(n);
    if (a == n || enter_[ai] < 0 || enter_[ni] < 0) return false;
    return enter_[ai] < enter_[ni] && exit_[ni] < exit_[ai];
  }

 private:
  std::vector<int> enter_, exit_;
};

}  // namespace

ExecutionTrace parse_execution_trace(const std::string& text, const std::string& name) {
  const json root = parse_json_text(text, name, "a PyTorch execution trace");
  if (!root.is_object()) throw ConfigError(name, "", "expected a PyTorch execution trace object {\"schema\", \"nodes\"}");
  ExecutionTrace et;
  et.file = name;
  const auto schema = root.find("schema");
  if (schema == root.end() || !schema->is_string())
    throw ConfigError(name, "/schema", "expected the execution trace schema version as a string, e.g. \"1.0.1\"");
  et.schema = schema->get<std::string>();
  if (et.schema.rfind("1.0.", 0) != 0 && et.schema.rfind("1.1.", 0) != 0)
    throw ConfigError(name, "/schema", fmt::format("expected schema 1.0.x or 1.1.x, got \"{}\"", et.schema));
  if (const auto pid = root.find("pid"); pid != root.end() && pid->is_number_integer()) et.pid = pid->get<std::int64_t>();
  const auto nodes = root.find("nodes");
  if (nodes == root.end() || !nodes->is_array()) throw ConfigError(name, "/nodes", "expected a list of nodes");

  if (nodes->size() > limits::kMaxTraceNodes)
    throw ConfigError(name, "/nodes", fmt::format("{} nodes; perfcast reads at most {}", nodes->size(), limits::kMaxTraceNodes));
  et.nodes.reserve(nodes->size());
  for (std::size_t i = 0; i < nodes->size(); ++i) {
    const json& n = (*nodes)[i];
    const std::string ptr = fmt::format("/nodes/{}", i);
    if (!n.is_object()) throw ConfigError(name, ptr, "expected a node object");
    EtNode node;
    node.id = int_field(n, "id", name, ptr, std::nullopt);
    const auto nm = n.find("name");
    if (nm == n.end() || !nm->is_string()) throw ConfigError(name, ptr + "/name", "expected the op name as a string");
    node.name = nm->get<std::string>();
    node.parent = int_field(n, "parent", name, ptr, -1);
    node.rf_id = int_field(n, "rf_id", name, ptr, -1);
    node.tid = int_field(n, "tid", name, ptr, 0);
    if (const auto s = n.find("op_schema"); s != n.end() && s->is_string()) node.op_schema = s->get<std::string>();
    node.input_shapes = read_shapes(n, "input_shapes", name, ptr);
    node.output_shapes = read_shapes(n, "output_shapes", name, ptr);
    node.input_types = read_strings(n, "input_types");
    node.output_types = read_strings(n, "output_types");
    for (const auto& [key, tensors] : {std::pair<const char*, std::vector<EtTensor>*>{"inputs", &node.input_tensors},
                                        std::pair<const char*, std::vector<EtTensor>*>{"outputs", &node.output_tensors}}) {
      const auto args = n.find(key);
      if (args == n.end()) continue;
      if (!args->is_array()) throw ConfigError(name, ptr + "/" + key, "expected a list of arguments");
      try {
        collect_tensors(*args, *tensors);
      } catch (const TensorTupleError&) {
        throw ConfigError(name, ptr + "/" + key,
                          fmt::format("a tensor [id, storage, offset, numel, element bytes, device] with numel outside [0, {}] "
                                      "or element bytes outside [0, 64]", limits::kMaxTraceInteger));
      }
    }
    if (!et.index_of_id.emplace(node.id, 0).second)
      throw ConfigError(name, ptr + "/id", fmt::format("node id {} appears twice", node.id));
    et.nodes.push_back(std::move(node));
  }
  std::stable_sort(et.nodes.begin(), et.nodes.end(), [](const EtNode& a, const EtNode& b) { return a.id < b.id; });
  for (std::size_t i = 0; i < et.nodes.size(); ++i) et.index_of_id[et.nodes[i].id] = static_cast<int>(i);
  for (std::size_t i = 0; i < et.nodes.size(); ++i) {
    const auto p = et.index_of_id.find(et.nodes[i].parent);
    if (p != et.index_of_id.end() && p->second != static_cast<int>(i))
      et.nodes[static_cast<std::size_t>(p->second)].children.push_back(static_cast<int>(i));
  }

  // Data dependencies: the latest earlier writer of each input tensor that is not an
  // ancestor of the reader (a parent lists its children's outputs as its own), lifted to
  // its outermost ancestor that does not enclose the reader (the op, not its internals).
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<int>> writers;
  const AncestorIndex ancestry(et);
  auto is_ancestor = [&](int a, int node) { return ancestry.is_ancestor(a, node); };
  for (std::size_t i = 0; i < et.nodes.size(); ++i) {
    EtNode& n = et.nodes[i];
    std::set<int> deps;
    for (const auto& t : n.input_tensors) {
      const auto w = writers.find({t.id, t.storage});
      if (w == writers.end()) continue;
      for (auto it = w->second.rbegin(); it != w->second.rend(); ++it) {
        if (*it != static_cast<int>(i) && !is_ancestor(*it, static_cast<int>(i))) {
          int w = *it;
          for (int depth = 0; depth < 1024; ++depth) {
            const auto p = et.index_of_id.find(et.nodes[static_cast<std::size_t>(w)].parent);
            if (p == et.index_of_id.end() || p->second == w || p->second == static_cast<int>(i) ||
                is_ancestor(p->second, static_cast<int>(i)))
              break;
            w = p->second;
          }
          deps.insert(w);
          break;
        }
      }
    }
    n.data_deps.assign(deps.begin(), deps.end());
    for (const auto& t : n.output_tensors) writers[{t.id, t.storage}].push_back(static_cast<int>(i));
  }
  return et;
}

std::vector<ExecutionTrace> load_execution_traces(const std::vector<std::string>& paths) {
  std::vector<ExecutionTrace> out;
  for (auto& doc : read_trace_inputs(paths)) {
    out.push_back(parse_execution_trace(doc.text, doc.name));
    doc.text.clear();
    doc.text.shrink_to_fit();
  }
  return out;
}

int link_execution_trace(ExecutionTrace& et, const KinetoTrace& t) {
  et.node_of_op.assign(t.ops.size(), -1);
  for (auto& n : et.nodes) n.kineto_op = -1;
  et.linked = 0;
  et.linked_by_rf_id = std::any_of(t.ops.begin(), t.ops.end(), [](const CpuOp& o) { return o.record_function_id >= 0; });
  if (et.linked_by_rf_id) {
    std::unordered_map<std::int64_t, int> node_of_rf;
    for (std::size_t i = 0; i < et.nodes.size(); ++i)
      if (et.nodes[i].rf_id >= 0) node_of_rf.emplace(et.nodes[i].rf_id, static_cast<int>(i));
    for (std::size_t o = 0; o < t.ops.size(); ++o) {
      const auto it = node_of_rf.find(t.ops[o].record_function_id);
      if (it == node_of_rf.end() || t.ops[o].name != et.nodes[static_cast<std::size_t>(it->second)].name) continue;
      et.node_of_op[o] = it->second;
      et.nodes[static_cast<std::size_t>(it->second)].kineto_op = static_cast<int>(o);
      et.linked++;
    }
    return et.linked;
  }
  // By name and order: ET nodes by rf_id (creation order), Kineto ops by start time.
  std::map<std::string, std::vector<int>> nodes_by_name, ops_by_name;
  std::vector<int> order(et.nodes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return et.nodes[static_cast<std::size_t>(a)].rf_id < et.nodes[static_cast<std::size_t>(b)].rf_id;
  });
  for (int i : order) nodes_by_name[et.nodes[static_cast<std::size_t>(i)].name].push_back(i);
  std::vector<int> op_order(t.ops.size());
  for (std::size_t i = 0; i < op_order.size(); ++i) op_order[i] = static_cast<int>(i);
  std::stable_sort(op_order.begin(), op_order.end(), [&](int a, int b) {
    return t.ops[static_cast<std::size_t>(a)].start < t.ops[static_cast<std::size_t>(b)].start;
  });
  for (int o : op_order) ops_by_name[t.ops[static_cast<std::size_t>(o)].name].push_back(o);
  for (const auto& [name, ops] : ops_by_name) {
    const auto it = nodes_by_name.find(name);
    if (it == nodes_by_name.end()) continue;
    const std::size_t n = std::min(ops.size(), it->second.size());
    for (std::size_t k = 0; k < n; ++k) {
      et.node_of_op[static_cast<std::size_t>(ops[k])] = it->second[k];
      et.nodes[static_cast<std::size_t>(it->second[k])].kineto_op = ops[k];
      et.linked++;
    }
  }
  return et.linked;
}

std::vector<int> pair_execution_traces(const std::vector<ExecutionTrace>& ets, const std::vector<KinetoTrace>& traces) {
  if (ets.size() != traces.size())
    throw ConfigError(ets.empty() ? "--et" : ets.back().file, "",
                      fmt::format("{} execution traces for {} Kineto traces; give one of each per rank", ets.size(),
                                  traces.size()));
  const std::size_t n = traces.size();
  std::vector<int> pairing(n, -1);
  auto unique_match = [&](auto key_et, auto key_kineto) {
    std::map<std::int64_t, int> et_of;
    for (std::size_t e = 0; e < n; ++e) {
      const auto k = key_et(ets[e]);
      if (!k || !et_of.emplace(*k, static_cast<int>(e)).second) return false;
    }
    std::vector<int> out(n, -1);
    std::set<int> used;
    for (std::size_t r = 0; r < n; ++r) {
      const auto k = key_kineto(traces[r]);
      if (!k) return false;
      const auto it = et_of.find(*k);
      if (it == et_of.end() || !used.insert(it->second).second) return false;
      out[r] = it->second;
    }
    pairing = out;
    return true;
  };
  if (unique_match([](const ExecutionTrace& e) -> std::optional<std::int64_t> { return e.pid > 0 ? std::optional(e.pid) : std::nullopt; },
                   [](const KinetoTrace& t) -> std::optional<std::int64_t> { return t.pid > 0 ? std::optional(t.pid) : std::nullopt; }))
    return pairing;
  if (unique_match([](const ExecutionTrace& e) -> std::optional<std::int64_t> {
                     const auto r = rank_in_name(e.file);
                     return r ? std::optional<std::int64_t>(*r) : std::nullopt;
                   },
                   [](const KinetoTrace& t) -> std::optional<std::int64_t> {
                     if (t.rank) return *t.rank;
                     const auto r = rank_in_name(t.file);
                     return r ? std::optional<std::int64_t>(*r) : std::nullopt;
                   }))
    return pairing;
  for (std::size_t r = 0; r < n; ++r) pairing[r] = static_cast<int>(r);
  return pairing;
}

std::vector<const ExecutionTrace*> link_execution_traces(std::vector<ExecutionTrace>& ets, const std::vector<KinetoTrace>& traces) {
  const auto pairing = pair_execution_traces(ets, traces);
  std::vector<const ExecutionTrace*> out;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    ExecutionTrace& et = ets[static_cast<std::size_t>(pairing[i])];
    link_execution_trace(et, traces[i]);
    out.push_back(&et);
  }
  return out;
}

}  // namespace perfcast
