#include "model/traces/trace_kernels.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "model/traces/execution_trace.hpp"

namespace perfcast {
namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

using Dims = std::vector<std::vector<std::int64_t>>;

double numel(const std::vector<std::int64_t>& d) {
  double n = 1;
  for (auto x : d) n *= static_cast<double>(std::max<std::int64_t>(x, 0));
  return n;
}

/// Input shapes and types of a CPU op: the Kineto op's own ("Input Dims"), else those of
/// its linked execution-trace node (ET types are "Tensor(float)": the inner name is kept).
struct OpShapes {
  Dims dims;
  std::vector<std::string> types;
  const EtNode* node = nullptr;
};

OpShapes shapes_of(const KinetoTrace& t, int op, const ExecutionTrace* et) {
  OpShapes s;
  const CpuOp& o = t.ops[static_cast<std::size_t>(op)];
  s.node = et ? et->node_for(op) : nullptr;
  // Kineto writes a tensor list as [] ("TensorList"): the ET node has its shapes.
  const bool list = std::find(o.input_types.begin(), o.input_types.end(), "TensorList") != o.input_types.end();
  if (!o.input_dims.empty() && !(list && s.node)) {
    s.dims = o.input_dims;
    s.types = o.input_types;
  } else if (s.node) {
    s.dims = s.node->input_shapes;
    for (const auto& ty : s.node->input_types) {
      // "Tensor(float)" -> "float"; a list "GenericList[Tensor(float),Tensor(float)]" -> its first element's type.
      const auto open = ty.find("Tensor(");
      const auto close = open == std::string::npos ? std::string::npos : ty.find(')', open);
      s.types.push_back(close != std::string::npos ? ty.substr(open + 7, close - open - 7) : ty);
    }
  }
  s.types.resize(s.dims.size());
  return s;
}

bool is_gemm_op(std::string_view n) {
  return n == "aten::addmm" || n == "aten::mm" || n == "aten::bmm" || n == "aten::baddbmm" || n == "aten::linear" ||
         n == "aten::matmul";
}

/// TF32 tensor-core kernels (cuBLAS/CUTLASS names: "s1688gemm" = fp32 storage on 16x8x8
/// TF32 MMA, "s16816"/"tf32" likewise) run fp32 GEMMs at the TF32 rate.
bool tf32_kernel(std::string_view kernel) {
  return contains(kernel, "s1688") || contains(kernel, "s16816") || contains(kernel, "tf32");
}

std::optional<GemmDesc> gemm_shape(std::string_view op, const OpShapes& s, std::string_view kernel, std::string& reason) {
  const Dims& d = s.dims;
  GemmDesc g;
  std::size_t a = 0;  // index of the first matrix operand
  if (op == "aten::addmm" || op == "aten::baddbmm") a = 1;
  if (d.size() < a + 2) {
    reason = fmt::format("{} without input shapes", op);
    return std::nullopt;
  }
  const auto& x = d[a];
  const auto& w = d[a + 1];
  if (op == "aten::linear") {
    if (x.empty() || w.size() != 2 || x.back() != w[1]) {
      reason = "aten::linear shapes are not [..., k] x [n, k]";
      return std::nullopt;
    }
    g.k = w[1];
    g.n = w[0];
    g.m = static_cast<std::int64_t>(numel(x) / static_cast<double>(std::max<std::int64_t>(g.k, 1)));
  } else if (x.size() == 3 && w.size() == 3) {
    if (x[0] != w[0] || x[2] != w[1]) {
      reason = fmt::format("{} shapes are not [b, m, k] x [b, k, n]", op);
      return std::nullopt;
    }
    g.batch = x[0];
    g.m = x[1];
    g.k = x[2];
    g.n = w[2];
  } else if (op == "aten::matmul" && x.size() >= 3 && w.size() == 2) {
    // [..., m, k] x [k, n]: one GEMM over the flattened leading dimensions.
    if (x.back() != w[0]) {
      reason = "aten::matmul shapes are not [..., k] x [k, n]";
      return std::nullopt;
    }
    g.k = w[0];
    g.n = w[1];
    g.m = static_cast<std::int64_t>(numel(x) / static_cast<double>(std::max<std::int64_t>(g.k, 1)));
  } else if (x.size() == 2 && w.size() == 2) {
    if (x[1] != w[0]) {
      reason = fmt::format("{} shapes are not [m, k] x [k, n]", op);
      return std::nullopt;
    }
    g.m = x[0];
    g.k = x[1];
    g.n = w[1];
  } else {
    reason = fmt::format("{} with {}-D x {}-D operands", op, x.size(), w.size());
    return std::nullopt;
  }
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) {
    reason = fmt::format("{} with an empty dimension", op);
    return std::nullopt;
  }
  const auto dt = trace_dtype(s.types.size() > a ? s.types[a] : "");
  if (!dt) {
    reason = fmt::format("{} input type \"{}\" unknown", op, s.types.size() > a ? s.types[a] : "");
    return std::nullopt;
  }
  g.dtype = *dt == DType::kFp32 && tf32_kernel(kernel) ? DType::kTf32 : *dt;
  return g;
}

bool is_tbe_forward_op(std::string_view n) {
  return n.starts_with("fbgemm::split_embedding_codegen_lookup_") || n == "fbgemm::dense_embedding_codegen_lookup_function";
}

/// "rowwise_adagrad", "adagrad", "sgd", ... of a TBE forward op; "Dense" for the dense op.
std::string tbe_optimizer(std::string_view op) {
  if (op == "fbgemm::dense_embedding_codegen_lookup_function") return "Dense";
  constexpr std::string_view kPre = "fbgemm::split_embedding_codegen_lookup_", kPost = "_function";
  std::string_view s = op.substr(kPre.size());
  if (s.size() > kPost.size() && s.substr(s.size() - kPost.size()) == kPost) s.remove_suffix(kPost.size());
  return std::string(s);
}

/// The TBE backward autograd node ("torch::autograd::CppNode<SplitLookupFunction_<opt>_Op>").
std::optional<std::string> tbe_backward_optimizer(std::string_view n) {
  constexpr std::string_view kPre = "torch::autograd::CppNode<SplitLookupFunction_", kPost = "_Op>";
  if (!n.starts_with(kPre) || n.size() <= kPre.size() + kPost.size() || n.substr(n.size() - kPost.size()) != kPost)
    return std::nullopt;
  return std::string(n.substr(kPre.size(), n.size() - kPre.size() - kPost.size()));
}

EmbeddingOptimizer optimizer_of(std::string_view name) {
  if (contains(name, "adam") || contains(name, "lamb")) return EmbeddingOptimizer::kAdam;
  if (contains(name, "adagrad")) return contains(name, "rowwise") ? EmbeddingOptimizer::kRowwiseAdagrad : EmbeddingOptimizer::kAdagrad;
  return EmbeddingOptimizer::kSgd;
}

struct TbeShape {
  std::int64_t tables = 0, batch = 0;
  double indices = 0, weights = 0, momentum_rows = 0;
  int index_bytes = 8;
  DType weight_dtype = DType::kFp32;
  bool weighted = false;  ///< per-sample weights given (the split schema's indice_weights, input 14)
};

std::optional<TbeShape> tbe_inputs(std::string_view op, const OpShapes& s, std::string& reason) {
  const bool dense = op == "fbgemm::dense_embedding_codegen_lookup_function";
  // Positions in the FBGEMM schemas (see the header).
  const std::size_t w = dense ? 0 : 1, wo = dense ? 1 : 5, idx = dense ? 7 : 11, off = dense ? 8 : 12, mom = 20;
  if (s.dims.size() <= off) {
    reason = fmt::format("{} with {} inputs: not the FBGEMM schema", op, s.dims.size());
    return std::nullopt;
  }
  auto len = [&](std::size_t i) { return s.dims[i].size() == 1 ? s.dims[i][0] : -1; };
  TbeShape t;
  t.tables = len(wo);
  const std::int64_t offsets = len(off);
  t.indices = static_cast<double>(len(idx));
  if (t.tables <= 0 || offsets <= 1 || t.indices < 0 || (offsets - 1) % t.tables != 0) {
    reason = fmt::format("{}: weights_offsets/offsets/indices are not 1-D with (offsets - 1) a multiple of the tables", op);
    return std::nullopt;
  }
  t.batch = (offsets - 1) / t.tables;
  t.weights = numel(s.dims[w]);
  if (!dense && s.dims.size() > 2) t.weights = std::max(t.weights, numel(s.dims[2]));  // UVM-placed weights
  if (!dense && s.dims.size() > mom && s.dims[mom].size() == 1) t.momentum_rows = static_cast<double>(s.dims[mom][0]);
  constexpr std::size_t kIndiceWeights = 14;
  t.weighted = !dense && s.dims.size() > kIndiceWeights && s.dims[kIndiceWeights].size() == 1 && s.dims[kIndiceWeights][0] > 0;
  if (s.types.size() > idx && (contains(s.types[idx], "int") && !contains(s.types[idx], "long"))) t.index_bytes = 4;
  if (const auto dt = trace_dtype(s.types.size() > w ? s.types[w] : "")) t.weight_dtype = *dt;
  return t;
}

bool is_elementwise_kernel(std::string_view k) {
  return contains(k, "elementwise_kernel") || contains(k, "reduce_kernel") || contains(k, "CatArrayBatchedCopy") ||
         contains(k, "elementwise_kernel_with_index");
}

/// CPU ops that wrap code generated by torch.compile (TorchInductor): the autograd
/// functions of a compiled graph, the profiler's region annotation and the compiled graph
/// call. Kernels inside them are generated (Triton) or fused, and the region's input
/// shapes say nothing about any one of them.
bool is_compiled_region(std::string_view op) {
  return op == "CompiledFunction" || op == "CompiledFunctionBackward" || op.starts_with("Torch-Compiled Region") ||
         contains(op, "CompiledFxGraph") || op.starts_with("torch_compile");
}

/// Triton kernels as TorchInductor names them (triton_poi_*, triton_red_*, triton_per_*, ...).
bool is_triton_kernel(std::string_view k) { return k.starts_with("triton_") || contains(k, "_triton_"); }

bool is_reduction_op(std::string_view op) {
  for (std::string_view r : {"sum", "mean", "max", "min", "norm", "prod", "amax", "std", "var", "all", "any"})
    if (op == "aten::" + std::string(r) || op == "aten::" + std::string(r) + "_") return true;
  return false;
}

std::optional<ElementwiseDesc> elementwise_shape(std::string_view op, const OpShapes& s, std::string& reason) {
  double largest = 0, in_bytes = 0, out_elem_bytes = 0;
  for (std::size_t i = 0; i < s.dims.size(); ++i) {
    const int b = trace_dtype_bytes(s.types[i]);
    if (b == 0) continue;  // Scalar, None, unknown types
    const double n = numel(s.dims[i]);  // a 0-d tensor ([] with a tensor type) holds 1 element
    in_bytes += n * b;
    if (n > largest) {
      largest = n;
      out_elem_bytes = b;
    }
  }
  if (largest <= 0) {
    reason = fmt::format("{} without tensor input shapes", op);
    return std::nullopt;
  }
  ElementwiseDesc e;
  std::string name(op);
  if (name.starts_with("aten::")) name = name.substr(6);
  const bool cat = name == "cat" || name == "_cat";
  e.op = cat ? "concat" : name;
  e.elements = static_cast<std::int64_t>(largest);
  // Output: one tensor of the largest input's size; a concatenation writes all inputs;
  // a reduction writes next to nothing.
  const double out = cat ? in_bytes : is_reduction_op(op) ? 0 : largest * out_elem_bytes;
  e.bytes_per_element = (in_bytes + out) / largest;
  e.flops_per_element = 1;
  return e;
}

}  // namespace

std::string_view trace_family_name(TraceKernelFamily f) {
  switch (f) {
    case TraceKernelFamily::kGemm: return "gemm";
    case TraceKernelFamily::kEmbedding: return "embedding";
    case TraceKernelFamily::kElementwise: return "elementwise";
    case TraceKernelFamily::kMemcpy: return "memcpy";
    case TraceKernelFamily::kCollective: return "collective";
    case TraceKernelFamily::kOther: return "other";
  }
  return "other";
}

std::optional<DType> trace_dtype(std::string_view type) {
  if (type == "float" || type == "Float") return DType::kFp32;
  if (type == "c10::Half" || type == "Half" || type == "half" || type == "__half") return DType::kFp16;
  if (type == "c10::BFloat16" || type == "BFloat16" || type == "bfloat16") return DType::kBf16;
  if (contains(type, "Float8")) return DType::kFp8;
  return std::nullopt;
}

std::vector<TraceKernelShape> trace_kernel_shapes(const KinetoTrace& t, const ExecutionTrace* et) {
  std::vector<TraceKernelShape> out(t.gpu.size());

  // Pooled output widths (total_D) of the TBE backward nodes, per optimizer, in order:
  // the node's input is the output gradient [B, total_D].
  std::map<std::string, std::vector<std::pair<std::int64_t, std::int64_t>>> backward_widths;
  for (const auto& o : t.ops) {
    const auto opt = tbe_backward_optimizer(o.name);
    if (opt && !o.input_dims.empty() && o.input_dims[0].size() == 2)
      backward_widths[*opt].emplace_back(o.input_dims[0][0], o.input_dims[0][1]);
  }
  std::map<std::string, int> tbe_seen;  // forward TBE ops per optimizer so far
  // Forward TBE op index -> its descriptor (backward nodes reuse it, in reverse order).
  std::map<std::string, std::vector<EmbeddingDesc>> forward_descs;
  std::map<int, std::optional<EmbeddingDesc>> tbe_desc;  // by CPU op
  std::map<int, std::string> tbe_reason;

  auto tbe_for_op = [&](int op) -> std::optional<EmbeddingDesc> {
    if (const auto it = tbe_desc.find(op); it != tbe_desc.end()) return it->second;
    const CpuOp& o = t.ops[static_cast<std::size_t>(op)];
    const OpShapes s = shapes_of(t, op, et);
    std::string reason;
    std::optional<EmbeddingDesc> result;
    const std::string opt = tbe_optimizer(o.name);
    const int k = tbe_seen[opt]++;
    if (const auto in = tbe_inputs(o.name, s, reason)) {
      std::int64_t total_d = 0;
      if (s.node && !s.node->output_shapes.empty() && s.node->output_shapes[0].size() == 2 &&
          s.node->output_shapes[0][0] == in->batch)
        total_d = s.node->output_shapes[0][1];
      if (total_d <= 0) {
        // Backward nodes run in reverse order of their forward ops.
        const auto it = backward_widths.find(opt);
        if (it != backward_widths.end()) {
          std::vector<std::int64_t> same_batch;
          for (const auto& [b, d] : it->second)
            if (b == in->batch) same_batch.push_back(d);
          if (static_cast<std::size_t>(k) < same_batch.size()) total_d = same_batch[same_batch.size() - 1 - static_cast<std::size_t>(k)];
        }
      }
      if (total_d <= 0) {
        reason = fmt::format("{}: pooled width unknown (no ET output shape, no backward node input [B, total_D])", o.name);
      } else {
        const double dim = static_cast<double>(total_d) / static_cast<double>(in->tables);
        const double rows = opt == "rowwise_adagrad" && in->momentum_rows > 0 ? in->momentum_rows : in->weights / dim;
        EmbeddingDesc d;
        d.batch = in->batch;
        d.weight_dtype = in->weight_dtype;
        d.index_bytes = in->index_bytes;
        d.weighted = in->weighted;
        d.optimizer = opt == "Dense" ? EmbeddingOptimizer::kSgd : optimizer_of(opt);
        EmbeddingTableDesc table;
        table.rows = std::max<std::int64_t>(1, static_cast<std::int64_t>(rows / static_cast<double>(in->tables)));
        table.dim = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::llround(dim)));
        table.pooling = in->indices / static_cast<double>(in->tables * in->batch);
        d.tables.assign(static_cast<std::size_t>(in->tables), table);
        result = d;
        forward_descs[opt].push_back(d);
      }
    }
    tbe_desc[op] = result;
    if (!result) tbe_reason[op] = reason;
    return result;
  };

  // Backward nodes consume forward descriptors in reverse order, per optimizer.
  std::map<std::string, int> backward_seen;
  std::map<int, std::optional<EmbeddingDesc>> backward_desc;  // by CPU op of the backward node

  // Forward TBE ops first, in time order, so that backward nodes find them.
  std::vector<int> op_order(t.ops.size());
  std::iota(op_order.begin(), op_order.end(), 0);
  std::stable_sort(op_order.begin(), op_order.end(), [&](int a, int b) {
    return t.ops[static_cast<std::size_t>(a)].start < t.ops[static_cast<std::size_t>(b)].start;
  });
  for (int o : op_order)
    if (is_tbe_forward_op(t.ops[static_cast<std::size_t>(o)].name)) (void)tbe_for_op(o);
  for (int o : op_order) {
    const auto opt = tbe_backward_optimizer(t.ops[static_cast<std::size_t>(o)].name);
    if (!opt) continue;
    const auto& fw = forward_descs[*opt];
    const int k = backward_seen[*opt]++;
    if (static_cast<std::size_t>(k) < fw.size()) {
      EmbeddingDesc d = fw[fw.size() - 1 - static_cast<std::size_t>(k)];
      d.pass = EmbeddingPass::kBackward;
      backward_desc[o] = d;
    } else {
      backward_desc[o] = std::nullopt;
    }
  }

  // Groups: (CPU op, family) -> lead activity.
  std::map<std::pair<int, int>, int> lead_of;
  for (std::size_t i = 0; i < t.gpu.size(); ++i) {
    const GpuActivity& a = t.gpu[i];
    TraceKernelShape& s = out[i];
    s.lead = static_cast<int>(i);
    if (a.is_nccl()) {
      s.family = TraceKernelFamily::kCollective;
      if (a.collective->bytes <= 0) {
        s.family = TraceKernelFamily::kOther;
        s.reason = "NCCL kernel without a message size";
      }
      continue;
    }
    if (a.kind == GpuActivityKind::kMemset) {
      s.reason = "memset";
      continue;
    }
    if (a.kind == GpuActivityKind::kMemcpy) {
      if (a.bytes <= 0) {
        s.reason = "memcpy without bytes";
        continue;
      }
      MemcpyDesc m;
      m.bytes = a.bytes;
      m.kind = contains(a.name, "HtoD") ? CopyKind::kHostToDevice
               : contains(a.name, "DtoH") ? CopyKind::kDeviceToHost
                                          : CopyKind::kDeviceToDevice;
      s.family = TraceKernelFamily::kMemcpy;
      s.desc = m;
      continue;
    }
    if (a.launch < 0) {
      s.reason = "no launch call";
      continue;
    }
    const int inner = t.innermost_cpu_op(a.launch);
    // Walk up from the innermost op to find the op that gives the shape.
    int gemm_op = -1, tbe_op = -1, tbe_bwd = -1, compiled = -1;
    for (int o = t.runtime[static_cast<std::size_t>(a.launch)].op; o >= 0; o = t.ops[static_cast<std::size_t>(o)].parent) {
      const std::string& n = t.ops[static_cast<std::size_t>(o)].name;
      if (gemm_op < 0 && is_gemm_op(n)) gemm_op = o;
      if (tbe_op < 0 && is_tbe_forward_op(n)) tbe_op = o;
      if (tbe_bwd < 0 && backward_desc.count(o)) tbe_bwd = o;
      if (compiled < 0 && is_compiled_region(n)) compiled = o;
    }
    // A torch.compile region: its generated and fused kernels keep their measured times
    // (a GEMM with its own aten op inside the region is still predicted).
    if (compiled >= 0 && gemm_op < 0 && tbe_op < 0 && tbe_bwd < 0 &&
        (is_triton_kernel(a.name) || is_elementwise_kernel(a.name) || inner == compiled)) {
      s.op = compiled;
      s.reason = fmt::format("{} kernel inside a torch.compile region ({}): generated code, shapes not in the trace",
                             is_triton_kernel(a.name) ? "Triton" : "fused", t.ops[static_cast<std::size_t>(compiled)].name);
      continue;
    }
    auto join_group = [&](int op, TraceKernelFamily fam) {
      const auto key = std::make_pair(op, static_cast<int>(fam));
      const auto [it, fresh] = lead_of.emplace(key, static_cast<int>(i));
      s.family = fam;
      s.op = op;
      s.lead = it->second;
      return fresh;
    };
    if (tbe_op >= 0 || tbe_bwd >= 0) {
      const int op = tbe_op >= 0 ? tbe_op : tbe_bwd;
      const auto d = tbe_op >= 0 ? tbe_for_op(tbe_op) : backward_desc[tbe_bwd];
      if (!d) {
        s.op = op;
        s.reason = tbe_op >= 0 ? tbe_reason[tbe_op] : "embedding backward node without a recognized forward op";
        continue;
      }
      if (join_group(op, TraceKernelFamily::kEmbedding)) s.desc = *d;
      continue;
    }
    if (gemm_op >= 0) {
      const OpShapes sh = shapes_of(t, gemm_op, et);
      std::string reason;
      const auto key = std::make_pair(gemm_op, static_cast<int>(TraceKernelFamily::kGemm));
      if (const auto it = lead_of.find(key); it != lead_of.end()) {
        join_group(gemm_op, TraceKernelFamily::kGemm);
        continue;
      }
      if (const auto g = gemm_shape(t.ops[static_cast<std::size_t>(gemm_op)].name, sh, a.name, reason)) {
        join_group(gemm_op, TraceKernelFamily::kGemm);
        s.desc = *g;
      } else {
        s.op = gemm_op;
        s.reason = reason;
      }
      continue;
    }
    if (is_elementwise_kernel(a.name) && inner >= 0) {
      const OpShapes sh = shapes_of(t, inner, et);
      std::string reason;
      const auto key = std::make_pair(inner, static_cast<int>(TraceKernelFamily::kElementwise));
      if (lead_of.count(key)) {
        join_group(inner, TraceKernelFamily::kElementwise);
        continue;
      }
      if (const auto e = elementwise_shape(t.ops[static_cast<std::size_t>(inner)].name, sh, reason)) {
        join_group(inner, TraceKernelFamily::kElementwise);
        s.desc = *e;
      } else {
        s.op = inner;
        s.reason = reason;
      }
      continue;
    }
    s.op = inner;
    s.reason = inner >= 0 ? fmt::format("kernel under {} has no predictor", t.ops[static_cast<std::size_t>(inner)].name)
                          : "kernel outside any CPU op";
  }
  return out;
}

}  // namespace perfcast
