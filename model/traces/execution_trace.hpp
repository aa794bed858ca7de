#pragma once
/// \file execution_trace.hpp
/// A PyTorch execution trace (ET, `ExecutionTraceObserver`, JSON schema 1.0.x / 1.1.x) of
/// one rank: the operator nodes of one traced step with parent/child structure, record
/// function ids (`rf_id`), input and output shapes and types, and data dependencies
/// through tensor ids; and its link to the Kineto trace of the same step.
///
/// Format facts (checked on data/param-dlrm-v100-8rank/dlrm_pytorch_et.tar.gz,
/// schema "1.0.1"): top level {"schema", "pid", "time", "start_ts", "finish_ts", "nodes"};
/// a node {"name", "id", "rf_id", "parent", "fw_parent", "seq_id", "scope", "tid",
/// "fw_tid", "op_schema", "inputs", "input_shapes", "input_types", "outputs",
/// "output_shapes", "output_types"}. A tensor argument in "inputs"/"outputs" is
/// [tensor_id, storage_id, offset, numel, element_bytes, device]; a tensor list
/// ("GenericList[Tensor(...)...]") is a list of those; other arguments are plain values.
/// Node ids grow in creation order, so a parent's id is below its children's.
///
/// Linking to Kineto: newer traces write the ET `rf_id` into the Kineto cpu_op's
/// args["Record function id"]; older ones (the PARAM traces) do not, and there the k-th
/// ET node of a name (by rf_id) is the k-th Kineto op of that name (by start time). On
/// the PARAM traces the per-name counts of the two agree for every cpu_op and annotation
/// (checked on rank 0: 1,633 cpu_ops).

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/traces/kineto_trace.hpp"

namespace perfcast {

/// One tensor argument: ET's (tensor id, storage id) names it.
struct EtTensor {
  std::int64_t id = -1;
  std::int64_t storage = -1;
  std::int64_t offset = 0;      ///< elements
  std::int64_t numel = 0;
  std::int64_t element_bytes = 0;
  std::string device;           ///< "cuda:0", "cpu", ...
  bool operator==(const EtTensor& o) const { return id == o.id && storage == o.storage; }
};

struct EtNode {
  std::int64_t id = 0;
  std::string name;
  std::int64_t parent = -1;     ///< parent node id (-1: none)
  std::int64_t rf_id = -1;      ///< record function id; -1 when absent
  std::int64_t tid = 0;
  std::string op_schema;
  std::vector<std::vector<std::int64_t>> input_shapes, output_shapes;  ///< [] for non-tensors
  std::vector<std::string> input_types, output_types;                  ///< "Tensor(float)", "Int", ...
  std::vector<EtTensor> input_tensors, output_tensors;  ///< every tensor argument, lists flattened
  std::vector<int> children;    ///< node indices, by id
  /// Data dependencies: for each input tensor, the latest earlier node (not an ancestor)
  /// that wrote it as an output, lifted to its outermost ancestor that does not enclose
  /// this node; node indices, sorted, unique.
  std::vector<int> data_deps;
  int kineto_op = -1;           ///< linked KinetoTrace::ops index; -1: not linked
};

struct ExecutionTrace {
  std::string file;             ///< path, or "ARCHIVE:MEMBER"
  std::string schema;           ///< e.g. "1.0.1"
  std::int64_t pid = 0;
  std::vector<EtNode> nodes;    ///< by id
  std::unordered_map<std::int64_t, int> index_of_id;
  /// After link_execution_trace: per KinetoTrace::ops index, the ET node index or -1.
  std::vector<int> node_of_op;
  int linked = 0;               ///< nodes linked to a Kineto op
  bool linked_by_rf_id = false; ///< true: through "Record function id"; false: name order

  /// The node linked to Kineto op `op`, or nullptr.
  [[nodiscard]] const EtNode* node_for(int op) const {
    if (op < 0 || static_cast<std::size_t>(op) >= node_of_op.size() || node_of_op[static_cast<std::size_t>(op)] < 0)
      return nullptr;
    return &nodes[static_cast<std::size_t>(node_of_op[static_cast<std::size_t>(op)])];
  }
};

/// Parses the text of one ET. Throws ConfigError (file, JSON pointer, what was expected)
/// for invalid JSON, a schema other than 1.0.x/1.1.x, or malformed nodes.
[[nodiscard]] ExecutionTrace parse_execution_trace(const std::string& text, const std::string& name);

/// Reads ETs (plain, gzip or tar archives, see trace_input.hpp), one per rank, in input order.
[[nodiscard]] std::vector<ExecutionTrace> load_execution_traces(const std::vector<std::string>& paths);

/// Links `et`'s nodes to `t`'s CPU ops (see file comment); fills node_of_op, kineto_op and
/// `linked`. Returns the number of linked nodes.
int link_execution_trace(ExecutionTrace& et, const KinetoTrace& t);

/// Pairs ETs with Kineto traces of the same rank: by the ET's pid (equal to the Kineto
/// trace's process id where both are known), else by rank number in the file name
/// ("..._3.json", "rank3"), else by position. Throws ConfigError when the counts differ.
/// Returns, per Kineto trace, the ET index.
[[nodiscard]] std::vector<int> pair_execution_traces(const std::vector<ExecutionTrace>& ets,
                                                     const std::vector<KinetoTrace>& traces);

/// Pairs `ets` with `traces` (pair_execution_traces) and links each pair; returns, per
/// Kineto trace, its ET (pointers into `ets`, which must outlive them).
[[nodiscard]] std::vector<const ExecutionTrace*> link_execution_traces(std::vector<ExecutionTrace>& ets,
                                                                       const std::vector<KinetoTrace>& traces);

}  // namespace perfcast
