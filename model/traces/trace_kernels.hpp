#pragma once
/// \file trace_kernels.hpp
/// Kernel shapes from a profiler trace: for every GPU activity of a KinetoTrace, the
/// kernel family and, where the trace says enough, the descriptor our predictors take
/// (`perfcast replay --kernels predicted`, `perfcast import`).
///
/// Where the shapes come from (the CPU op that launched the kernel: the innermost
/// enclosing `cpu_op` of the launch call, see kineto_trace.hpp):
///  - GEMM: kernels launched under aten::addmm, aten::mm, aten::bmm, aten::baddbmm,
///    aten::linear or aten::matmul, from the op's "Input Dims" (addmm: bias, [m,k], [k,n];
///    mm: [m,k], [k,n]; bmm/baddbmm: [b,m,k], [b,k,n]; linear: [..., k], [n,k];
///    matmul: [..., m, k] x [k, n] or 2-D x 2-D). dtype from "Input type"; fp32 inputs whose kernel is a TF32
///    tensor-core kernel (name holds "s1688", "tf32" or "s16816") are predicted as TF32.
///  - Embedding lookup: FBGEMM table-batched embedding ops
///    (fbgemm::split_embedding_codegen_lookup_<optimizer>_function and
///    fbgemm::dense_embedding_codegen_lookup_function). Input positions follow the FBGEMM
///    operator schema the traces record (ET "op_schema", FBGEMM 0.4/0.5):
///    split: dev_weights 1, uvm_weights 2, weights_offsets 5, indices 11, offsets 12,
///    momentum1_dev 20; dense: dev_weights 0, weights_offsets 1, indices 7, offsets 8.
///    T = len(weights_offsets), B = (len(offsets) - 1) / T, pooling = len(indices) / (T B).
///    The pooled output [B, total_D] is not an input: it is read from the execution trace
///    node's output shape when an ET is linked, else from the backward autograd node
///    (`CppNode<SplitLookupFunction_<optimizer>_Op>`, whose input is the output gradient
///    [B, total_D]) with the same B. Rows: rowwise Adagrad keeps one momentum per row, so
///    rows = len(momentum1_dev); otherwise rows = weight elements / mean D. The T tables
///    are predicted as T equal tables (mean rows, mean D) with uniform indices: the
///    per-table split is not in the trace. Forward kernels are the forward op's; backward
///    kernels (with the fused optimizer) are those launched under the backward node.
///    Plain (non-rowwise) Adagrad is predicted as rowwise Adagrad (our predictor has no
///    full-size Adagrad state): it under-counts the state traffic.
///  - Elementwise: at::native elementwise, reduce and concatenation kernels under an op
///    with tensor inputs: elements = the largest input, bytes = inputs + one output of
///    that size (reductions: inputs only; concatenation: inputs + as many out). Kineto
///    writes tensor lists as [] ("TensorList"), so aten::cat needs the linked ET node
///    (its list is one input of the lists' total elements).
///  Shapes come from the Kineto op's "Input Dims", else (or for tensor lists) from the
///  linked execution-trace node's "input_shapes".
///  - Memcpy: memcpy activities (bytes and direction from the trace). Memsets keep their
///    measured time.
///  - Collectives: NCCL kernels (shapes in KinetoTrace's TraceCollective; predicted by the
///    collective model, not here).
/// Everything else (sorts, index kernels, fused optimizer kernels on tensor lists, ops
/// without "Input Dims") is "other": it keeps its measured duration and is counted as
/// unrecognized.
///
/// Kernels of one op are predicted together (a GEMM with its split-K reduce, an embedding
/// backward with its sort kernels): the op's first kernel of the family carries the
/// descriptor (`lead`), the others point to it.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/traces/kineto_trace.hpp"
#include "predictors/kernel_desc.hpp"

namespace perfcast {

struct ExecutionTrace;

enum class TraceKernelFamily { kGemm, kEmbedding, kElementwise, kMemcpy, kCollective, kOther };
inline constexpr int kTraceKernelFamilies = 6;

/// "gemm", "embedding", "elementwise", "memcpy", "collective", "other".
[[nodiscard]] std::string_view trace_family_name(TraceKernelFamily f);

struct TraceKernelShape {
  TraceKernelFamily family = TraceKernelFamily::kOther;
  /// The descriptor, on the lead activity of a recognized group; nullopt otherwise.
  std::optional<KernelDesc> desc;
  /// Index (into KinetoTrace::gpu) of the group's lead activity; this activity's own index
  /// when it leads or stands alone.
  int lead = -1;
  /// The CPU op (index into KinetoTrace::ops) whose shapes were used; -1 if none.
  int op = -1;
  /// For "other" and for families whose shape could not be read: why.
  std::string reason;
  [[nodiscard]] bool recognized() const { return family != TraceKernelFamily::kOther; }
};

/// One shape per KinetoTrace::gpu entry. `et`: the rank's execution trace already linked
/// to `t` (execution_trace.hpp), or nullptr.
[[nodiscard]] std::vector<TraceKernelShape> trace_kernel_shapes(const KinetoTrace& t, const ExecutionTrace* et = nullptr);

/// Predictor dtype of a trace "Input type" ("float", "c10::Half", "c10::BFloat16", ...).
[[nodiscard]] std::optional<DType> trace_dtype(std::string_view type);

}  // namespace perfcast
