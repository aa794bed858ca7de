#pragma once
/// \file kernel_desc.hpp
/// Value-type descriptors of the GPU kernels perfcast predicts. Each is comparable and
/// hashable (estimates are cached by descriptor) and converts to JSON (kernel_json.hpp).

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "predictors/index_distribution.hpp"
#include "core/dtype.hpp"
#include "core/units.hpp"

namespace perfcast {

/// Which kernel library runs a GEMM: the vendor library (cuBLAS / cuBLASLt, what PyTorch's
/// matmul and linear call), DeepSeek's DeepGEMM (FP8 block-scaled, grouped), or a Triton
/// kernel. Calibrations fit each separately where measurements of it exist.
enum class GemmImpl { kCublas, kDeepGemm, kTriton };

/// C[batch][m x n] = A[m x k] * B[k x n] (+ epilogue). Row-major logical shapes. A grouped
/// GEMM of equal groups (mixture-of-experts layers) is `batch` groups of m x n x k.
struct GemmDesc {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t batch = 1;      ///< batched GEMM count, or groups of a grouped GEMM (1: plain GEMM)
  DType dtype = DType::kFp32;  ///< input type; tf32 means fp32 storage with TF32 math
  bool bias_epilogue = false;  ///< fused bias (+activation) epilogue
  /// fp8 only: block-scaled inputs (DeepSeek-V3's 1x128 activation and 128x128 weight
  /// scales) instead of one scale per tensor.
  bool block_scaled = false;
  GemmImpl impl = GemmImpl::kCublas;
  /// Further m x n operands (output type) the epilogue reads: a fused elementwise tail such
  /// as DCNv2's x0 * (.) + x_l (2), or a ReLU backward's activation mask (1).
  int epilogue_inputs = 0;
  bool operator==(const GemmDesc&) const = default;
};

enum class EmbeddingPass { kForward, kBackward };
/// The TBE's fused optimizer: SGD; row-wise Adagrad (one fp32 accumulator per row, FBGEMM's
/// EXACT_ROWWISE_ADAGRAD); Adam (two fp32 moments per element); Adagrad (one fp32
/// accumulator per element, FBGEMM's EXACT_ADAGRAD, torch.optim.Adagrad's rule); none (the
/// backward only produces the weights' gradient as a dense table, FBGEMM's
/// OptimType.NONE, as TorchRec's batch_index_select_dim0 runs it: nothing is updated).
/// New values go last (kernel hashes and calibration files use the order).
enum class EmbeddingOptimizer { kSgd, kRowwiseAdagrad, kAdam, kAdagrad, kNone };

/// Where a shard's rows live (FBGEMM's EmbeddingLocation, TorchRec's compute_kernel):
///  - kHbm: device memory ("fused");
///  - kHostUvm: host memory read and written by the kernels over the GPU's host link
///    ("fused_uvm"; FBGEMM EmbeddingLocation.MANAGED);
///  - kHostUvmCaching: host memory, with an LRU row cache in HBM that the forward fills
///    before the lookup ("fused_uvm_caching"; EmbeddingLocation.MANAGED_CACHING). The
///    optimizer state stays in host memory (FBGEMM's enforce_hbm=False default).
enum class EmbeddingStorage { kHbm, kHostUvm, kHostUvmCaching };

/// One table (or one shard of one) inside a batched embedding-bag kernel.
struct EmbeddingTableDesc {
  std::int64_t rows = 0;   ///< rows held by this shard
  std::int64_t dim = 0;    ///< columns held by this shard
  double pooling = 1;      ///< mean indices per bag that hit this shard
  IndexDistribution distribution;
  EmbeddingStorage storage = EmbeddingStorage::kHbm;
  double cache_rows = 0;   ///< kHostUvmCaching: rows the HBM cache holds for this shard
  /// Unpooled (TorchRec's EmbeddingCollection; FBGEMM TBE with PoolingMode.NONE): one
  /// output row per index (batch x pooling x dim fp32) instead of one per bag, and as many
  /// gradient rows in the backward.
  bool sequence = false;
  bool operator==(const EmbeddingTableDesc&) const = default;
};

/// A batched embedding lookup (FBGEMM TBE style), pooled unless a table is `sequence`: all tables of one op in one
/// kernel. Backward includes the fused optimizer update.
struct EmbeddingDesc {
  std::vector<EmbeddingTableDesc> tables;
  std::int64_t batch = 0;            ///< bags per table
  DType weight_dtype = DType::kFp32;
  EmbeddingPass pass = EmbeddingPass::kForward;
  EmbeddingOptimizer optimizer = EmbeddingOptimizer::kSgd;  ///< backward only
  int index_bytes = 8;               ///< int64 (8) or int32 (4) indices
  /// Host link of host-memory tables, host to device and device to host (B/s); 0: the
  /// GPU's PCIe rate.
  BytesPerSecond host_to_device = 0, device_to_host = 0;
  /// Type of the lookup's output and of the gradient the backward reads: fp32 (TorchRec's
  /// default output_dtype), or the weights' type for an unpooled gather (batch_index_select_dim0).
  DType output_dtype = DType::kFp32;
  /// Per-sample weights (TorchRec's weighted features): the backward also computes their
  /// gradient (FBGEMM's grad_indice_weights kernel: each index's row dotted with its gradient).
  bool weighted = false;
  /// Backward only: the optimizer runs inside the backward kernel (FBGEMM's TBE, HugeCTR), or
  /// after it as separate kernels that read back the unique rows' gradients the backward
  /// wrote (a non-fused optimizer).
  bool fused_optimizer = true;
  bool operator==(const EmbeddingDesc&) const = default;
};

/// Memory-bound kernels that stream their operands once: activations, losses, adds,
/// concat, gathers, optimizer updates, reductions.
struct ElementwiseDesc {
  std::string op;                 ///< "relu", "add", "sigmoid_bce", "concat", "sgd", ...
  std::int64_t elements = 0;      ///< elements of the output (or of the reduced input)
  double flops_per_element = 1;   ///< FP32 operations per element
  double bytes_per_element = 8;   ///< bytes read + written per element
  /// The operands start outside L2 (a benchmark that flushes L2 before each call). false:
  /// a working set that fits in L2 may be served from it (the producer just wrote it).
  bool cold_l2 = false;
  /// The kernel launches one thread per element (no grid-stride loop), so its blocks retire
  /// and are replaced once per wave of resident threads: a benchmark's plain kernel, not a
  /// library's vectorised one. false: not stated (the HBM rate alone bounds the kernel).
  bool thread_per_element = false;
  bool operator==(const ElementwiseDesc&) const = default;
};

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };

struct MemcpyDesc {
  Bytes bytes = 0;
  CopyKind kind = CopyKind::kHostToDevice;
  bool operator==(const MemcpyDesc&) const = default;
};

/// A kernel whose duration was measured (a profiler trace being replayed): the name the
/// trace gives and its duration on the GPU, s. Its "prediction" is that duration.
struct MeasuredKernelDesc {
  std::string name;      ///< kernel, memcpy or memset name as the trace writes it
  Seconds duration = 0;  ///< measured GPU duration, s (>= 0)
  bool operator==(const MeasuredKernelDesc&) const = default;
};

enum class AttentionPass { kForward, kBackward };
/// The fused-attention kernel: FlashAttention-2 (PyTorch SDPA's flash backend),
/// FlashAttention-3 (Hopper), cuDNN's SDPA, a Triton kernel, a TileLang kernel.
enum class AttentionKernel { kFlash2, kFlash3, kCudnn, kTriton, kTileLang };

/// Fused (flash-style) attention core of one layer on one rank: softmax(Q K^T / sqrt(d)
/// [+ causal mask]) V for `batch` x `heads` independent problems, without materialising
/// the seq_q x seq_kv score matrix. Backward recomputes the scores (FlashAttention-2).
struct AttentionDesc {
  std::int64_t batch = 1;      ///< sequences (micro-batch)
  std::int64_t heads = 1;      ///< query heads on this rank
  std::int64_t kv_heads = 1;   ///< key/value heads on this rank (GQA: < heads)
  std::int64_t seq_q = 0;      ///< query tokens per sequence
  std::int64_t seq_kv = 0;     ///< key/value tokens per sequence
  std::int64_t head_dim = 0;   ///< elements per head
  bool causal = false;         ///< causal mask: about half the score blocks are skipped
  DType dtype = DType::kBf16;  ///< Q/K/V type
  AttentionPass pass = AttentionPass::kForward;
  /// Elements per head of V and of the output; 0: head_dim. Multi-latent attention's differ
  /// (DeepSeek-V2: queries and keys 128 + 64 rotary, values 128).
  std::int64_t v_head_dim = 0;
  /// Sliding window: keys each query attends to (0: all, as the mask allows).
  std::int64_t window = 0;
  AttentionKernel impl = AttentionKernel::kFlash2;
  [[nodiscard]] std::int64_t value_dim() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
  bool operator==(const AttentionDesc&) const = default;
};

/// New alternatives go last: hash_value() seeds with the variant index.
using KernelDesc = std::variant<GemmDesc, EmbeddingDesc, ElementwiseDesc, MemcpyDesc, MeasuredKernelDesc, AttentionDesc>;

/// Kernel family name: "gemm", "embedding_forward", "embedding_backward", "elementwise", "memcpy",
/// "measured", "attention_forward", "attention_backward".
[[nodiscard]] std::string kernel_family(const KernelDesc& k);
/// Short human label, e.g. "gemm 2048x512x512 fp32".
[[nodiscard]] std::string kernel_label(const KernelDesc& k);

[[nodiscard]] std::size_t hash_value(const KernelDesc& k);

struct KernelDescHash {
  std::size_t operator()(const KernelDesc& k) const { return hash_value(k); }
};

[[nodiscard]] std::string_view optimizer_name(EmbeddingOptimizer o);
/// The inverse of optimizer_name for "sgd", "rowwise_adagrad", "adam", "adagrad" (the
/// callers' enum checks the text); anything else is SGD.
[[nodiscard]] EmbeddingOptimizer embedding_optimizer_from_name(std::string_view name);
/// TorchRec's compute_kernel name of a storage: "fused", "fused_uvm", "fused_uvm_caching".
[[nodiscard]] std::string_view storage_kernel_name(EmbeddingStorage s);

/// "cublas", "deepgemm", "triton".
[[nodiscard]] std::string_view gemm_impl_name(GemmImpl i);
[[nodiscard]] std::optional<GemmImpl> gemm_impl_from_name(std::string_view name);
/// "flash2", "flash3", "cudnn", "triton", "tilelang".
[[nodiscard]] std::string_view attention_kernel_name(AttentionKernel i);
[[nodiscard]] std::optional<AttentionKernel> attention_kernel_from_name(std::string_view name);

}  // namespace perfcast
