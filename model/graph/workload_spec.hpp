#pragma once
/// \file workload_spec.hpp
/// Training workloads as users describe them (schema "perfcast.workload" 1.x).
/// MLP shapes follow DLRM's --arch-mlp-bot / --arch-mlp-top convention: "bottom_mlp"
/// starts with the number of dense features and lists each layer's output width;
/// "top_mlp" lists each layer's output width (its input is the interaction's output).

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "predictors/index_distribution.hpp"
#include "predictors/kernel_desc.hpp"
#include "core/dtype.hpp"
#include "core/json_reader.hpp"
#include "core/units.hpp"

namespace perfcast {

struct EmbeddingTableSpec {
  std::string name;
  std::int64_t rows = 0;
  std::int64_t dim = 0;
  double pooling = 1;  ///< mean indices per sample (bag length; the sequence length of a sequence table)
  IndexDistribution distribution;
  /// "sequence": true: a table of TorchRec's EmbeddingCollection (unpooled: one embedding
  /// per index, exchanged as such). The model sums each sample's sequence before the
  /// interaction (see docs/embedding.md#sequence-embeddings-embeddingcollection).
  bool sequence = false;
};

/// Feature interaction: dot (DLRM's pairwise dots), cat (concatenation), dcn_v2 (the
/// concatenation through DCNv2 low-rank cross layers, Wang et al. 2021, TorchRec's
/// LowRankCrossNet: x_{l+1} = x0 * (W_l (V_l x_l) + b_l) + x_l).
enum class Interaction { kDot, kCat, kDcnV2 };
/// Optimizer of the dense (MLP) parameters: SGD, Adam (two fp32 moments), Adagrad (one fp32
/// accumulator; torch.optim.Adagrad, as the MLPerf DLRM-DCNv2 reference's --adagrad runs it).
enum class DenseOptimizer { kSgd, kAdam, kAdagrad };

/// How the training loop feeds batches (TorchRec's train pipelines):
///  - kNone: copy the batch, distribute its indices, then forward and backward (a plain loop);
///  - kSparseDist: TrainPipelineSparseDist. Iteration k starts the index all-to-all of batch
///    k+1 and the copy of batch k+2 before batch k's forward, on their own streams; batch
///    k's lookup reads the indices distributed in iteration k-1, and the backward waits for
///    batch k+1's all-to-all (wait_sparse_data_dist). Two batches' inputs are held.
///  - kSemiSync: TrainPipelineSemiSync ("each batch prediction is calculated on parameters
///    last updated B-2 ... the Embedding All-to-All from B fully overlapped with forward pass
///    of B-1"): as kSparseDist, and iteration k also looks up and exchanges batch k+1's
///    embeddings (from the indices distributed this iteration), while batch k's interaction
///    reads the embeddings exchanged in iteration k-1. Two batches' pooled embeddings are held.
enum class TrainPipeline { kNone, kSparseDist, kSemiSync };

/// How far an elementwise tail is fused (a runtime profile's "fusion" settings):
///  - kNone: eager PyTorch, one kernel per elementwise operator;
///  - kPointwise: one generated kernel for the whole tail (torch.compile / TorchInductor);
///  - kEpilogue: into the GEMM's epilogue (cuBLASLt epilogues, HugeCTR's fused layers): no
///    kernel of its own, its operands read by the GEMM.
enum class Fusion { kNone, kPointwise, kEpilogue };
[[nodiscard]] std::string_view fusion_name(Fusion f);

/// The software stack's choices for a DLRM step (configs/runtimes/NAME.json "dlrm"; defaults:
/// perfcast's graph before stacks existed, which pytorch_eager keeps).
struct DlrmStack {
  /// DCNv2 cross layer x0 * (W V x + b) + x: kNone two kernels (mul, add) forward and three
  /// backward; kPointwise one each; kEpilogue in W's GEMM (forward) and the input-gradient GEMM
  /// (backward).
  Fusion dcn_cross = Fusion::kPointwise;
  /// An MLP layer's ReLU backward and bias gradient: kNone two kernels; kPointwise one;
  /// kEpilogue in the data- and weight-gradient GEMMs (cuBLASLt DRELU_BGRAD / BGRADB).
  Fusion mlp_backward = Fusion::kNone;
  /// Dot interaction: concatenation, Gram matrix and lower triangle as one kernel (and its
  /// backward as one), as NVIDIA's fused dot-interaction kernels; false: separate kernels.
  bool fused_interaction = false;
  /// The embedding optimizer inside the TBE backward (FBGEMM, HugeCTR); false: a separate update.
  bool fused_embedding_optimizer = true;
  /// A reader thread copies batch k+1 to the GPU during iteration k (TorchRec's train
  /// pipelines' copy stream, HugeCTR's asynchronous reader): the batch copy is the previous
  /// iteration's and its host work is off the training thread.
  bool overlapped_reader = false;
  /// The iteration's GPU work is captured in a CUDA graph and replayed with one launch.
  bool cuda_graphs = false;
  /// The dense part (bottom MLP; interaction, cross layers, top MLP and loss) is compiled
  /// (torch.compile): each compiled region is one call whose generated wrapper launches its
  /// kernels, so only the region's first op pays a framework op's host cost (its backward
  /// likewise); the launches stay.
  bool compiled_dense = false;
  /// Type of the pooled embedding outputs where the plan does not state one (TorchRec's
  /// output_dtype): what the lookups write, the all-to-alls move and the interaction reads,
  /// and the type of their gradients. Unset: FP32, TorchRec's default. HugeCTR under mixed
  /// precision: FP16.
  std::optional<DType> embedding_output;
  /// The dense layers above the interaction (top MLP, DCN cross layers) compute their weight
  /// gradients after the whole activation-gradient chain (HugeCTR's async_wgrad, a second
  /// stream): the embedding gradients' exchange starts once the interaction's gradient is
  /// ready, and the weight-gradient GEMMs run while it is in flight. false: each layer's
  /// backward computes both before the next layer's (PyTorch autograd).
  bool async_weight_gradients = false;
  /// Type of the dense gradients the data-parallel all-reduces move (and the data-parallel
  /// tables' gradients). Unset: FP32, PyTorch DDP's gradients of FP32 parameters. HugeCTR under
  /// mixed precision: FP16.
  std::optional<DType> gradient_dtype;
  /// All dense gradients in one all-reduce once the backward has produced them all (HugeCTR's
  /// grouped_all_reduce); false: DDP's buckets, each all-reduced as it fills.
  bool grouped_allreduce = false;
  /// The plan a prediction uses when none is given: perfcast's table-wise round robin, or the
  /// stack's own planner (HugeCTR's "auto" / "hier_auto", model/sharding/hugectr_planner.hpp).
  bool hugectr_planner = false;
};

struct DlrmSpec {
  std::string name;
  std::string file;
  std::int64_t batch_size = 0;             ///< global batch (samples per iteration, all ranks)
  std::vector<std::int64_t> bottom_mlp;    ///< [dense features, layer widths...]
  std::vector<std::int64_t> top_mlp;       ///< [layer widths...], last is 1
  Interaction interaction = Interaction::kDot;
  int dcn_layers = 0;           ///< dcn_v2: cross layers ("dcn": {"layers": N, "rank": r})
  std::int64_t dcn_rank = 0;    ///< dcn_v2: low-rank dimension r of each layer's V (width x r) and W (r x width)
  DType mlp_dtype = DType::kFp32;          ///< GEMM math type
  DType embedding_dtype = DType::kFp32;    ///< embedding weight storage
  int index_bytes = 8;                     ///< int64 (8) or int32 (4)
  EmbeddingOptimizer embedding_optimizer = EmbeddingOptimizer::kSgd;
  DenseOptimizer dense_optimizer = DenseOptimizer::kSgd;
  Bytes gradient_bucket = 25e6;            ///< DDP bucket_cap_mb (25 MB default)
  Bytes first_bucket = 1024.0 * 1024.0;    ///< DDP's first bucket (1 MiB default)
  bool sync_each_iteration = true;         ///< host reads the loss every iteration (loss.item())
  TrainPipeline pipeline = TrainPipeline::kNone;  ///< "pipeline": "none" | "sparse_dist" | "semi_sync"
  /// "bottom_mlp_rank": -1 (absent): the bottom MLP is data-parallel, each rank its local
  /// batch. r: NVIDIA's hybrid-parallel DLRM: rank r runs the bottom MLP for the whole global
  /// batch (its dense features copied there only) and sends each rank its samples' output
  /// with an all-to-all; the gradients come back the same way, and the bottom MLP's weights
  /// exist once, so DDP does not all-reduce them.
  int bottom_mlp_rank = -1;
  std::vector<EmbeddingTableSpec> tables;
  DlrmStack stack;  ///< set from the runtime profile (model/predict/runtime_profile.hpp)

  [[nodiscard]] std::int64_t dense_features() const { return bottom_mlp.front(); }
  /// Parameters of the bottom MLP alone.
  [[nodiscard]] double bottom_parameters() const;
  /// Width of the top MLP's input.
  [[nodiscard]] std::int64_t interaction_width() const;
  /// Tables with "sequence": true (unpooled EmbeddingCollection tables).
  [[nodiscard]] std::size_t sequence_tables() const;
  /// Total dense parameters (weights + biases of both MLPs).
  [[nodiscard]] double dense_parameters() const;
};

/// Reads a workload file (schema "perfcast.workload" 1.x, model "dlrm"). Throws ConfigError.
[[nodiscard]] DlrmSpec parse_workload(const JsonDocument& doc);
[[nodiscard]] DlrmSpec load_workload(const std::filesystem::path& path);

/// Reads an "index distribution" object: {"kind": "uniform"} | {"kind": "zipf", "alpha": a}
/// | {"kind": "hot_set", "hot_rows": f, "hot_accesses": g} | {"kind": "reuse_histogram", "shares": [17]}.
[[nodiscard]] IndexDistribution parse_index_distribution(const JsonObject& o);

}  // namespace perfcast
