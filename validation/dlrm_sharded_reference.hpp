#pragma once
/// \file dlrm_sharded_reference.hpp
/// CPU reference of one SHARDED DLRM training step over `world` ranks, the algorithm the
/// multi-GPU CUDA executor runs (one thread per GPU, NCCL), with every collective done in
/// memory. Each rank holds what multi_gpu_layout.hpp says it holds and is fed what
/// split_batch gives it. Global batch B, local batch b = B / world, rank r owns samples
/// [r*b, (r+1)*b).
///
/// Forward on rank r:
///  1. bottom MLP on its local dense features [b, F];
///  2. "pooled" group (its table_wise and column_wise shards, RankLayout::pooled_group
///     order): sum embedding-bag lookup on the GLOBAL batch -> [B, pooled_send_cols];
///     all-to-all: rows [j*b, (j+1)*b) go to rank j, which places each PooledBlock at its
///     pooled_col of its pooled [b, total_dim];
///  3. "row_wise" group: lookup of its row range of every row_wise table on the GLOBAL batch
///     (indices re-based) -> partial sums [B, row_wise_dims]; reduce-scatter (fp32 sum in
///     rank order 0..W-1; rank j keeps rows [j*b, (j+1)*b)); each table's columns placed at
///     its pooled column;
///  4. "data_parallel" group: full copies, lookup on the LOCAL batch, placed likewise;
///  5. interaction, top MLP, BCE on the b local samples. Rank loss = mean over b; the
///     global loss = mean of the rank losses. The logit gradient is (sigmoid(z) - y) / B
///     with the GLOBAL B, so that the sum over ranks is the single-process gradient.
/// Backward on rank r:
///  6. top MLP, interaction, bottom MLP backward on the local batch; the MLP gradients are
///     all-reduced (fp32 sum in rank order, the DDP buckets) and every rank applies the
///     dense optimizer (SGD or Adam) identically, so all ranks' MLPs stay bitwise equal;
///  7. pooled group: transposed all-to-all (rank j returns to source i the [b, cols]
///     gradient columns of i's blocks); source i stacks them in rank order into
///     [B, pooled_send_cols] and runs profiler::embedding_bag_backward_update_reference;
///  8. row_wise group: each rank's [b, row_wise_dims] gradient columns, all-gathered into
///     [B, row_wise_dims]; fused backward + update on every rank's row range;
///  9. data_parallel group: per rank the dense fp32 gradient of each table from its local
///     batch (every occurrence adds its bag's gradient, in position order), all-reduced
///     (fp32 sum in rank order), then the optimizer on every rank's copy, per row with a
///     non-zero gradient, with the fp32 arithmetic of the fused reference: SGD
///     w -= lr*g; row-wise Adagrad G += sum(g^2)/dim, w -= lr/(sqrt(G)+eps) * g; the new
///     weight rounded once into the storage precision. A row whose summed gradient is all
///     zero is left unchanged (the fused reference moves a touched zero-gradient row by
///     exactly 0), which is FBGEMM's sparse update with duplicate indices merged.
///
/// Equivalence with dlrm_train_step on the global batch (tests/validation/
/// dlrm_sharded_reference_test.cpp): per sample, every operator computes the same values
/// from the same inputs; only the order of fp32 sums across ranks differs (MLP gradients,
/// row-wise partial sums, data-parallel gradients), so results agree to a few fp32 ulps,
/// and bit for bit with one rank. Known non-equivalence: a table split by columns
/// (column_wise, table_column_wise, grid) with row-wise Adagrad keeps one accumulator per row
/// of each column shard (the mean of g^2 over the
/// shard's columns), as TorchRec does, so its update differs from the unsharded table's.

#include <cstdint>
#include <vector>

#include "model/graph/workload_spec.hpp"
#include "profiler/embedding_bag_layout.hpp"
#include "profiler/host_embedding_weights.hpp"
#include "validation/dlrm_reference.hpp"
#include "validation/multi_gpu_layout.hpp"

namespace perfcast::validation {

/// One embedding-bag launch of a rank: its shards as the "tables" of one layout.
struct ShardGroup {
  std::vector<std::size_t> shards;        ///< indices into RankLayout::shards, group order
  profiler::EmbeddingBagLayout layout;    ///< tables = shards (rows x cols); no table when empty
  profiler::HostEmbeddingWeights weights;
  std::vector<float> rowwise_state;       ///< [layout.total_rows] row-wise Adagrad accumulators
  [[nodiscard]] bool empty() const { return shards.empty(); }
};

/// What one rank holds: a full copy of the MLPs (and Adam state) and its three groups.
struct RankState {
  std::vector<DenseLayer> bottom, top;
  std::vector<DenseLayer> adam_m, adam_v;  ///< bottom layers then top layers (Adam only)
  std::int64_t adam_step = 0;
  ShardGroup pooled;         ///< table_wise + column_wise shards, batch = global B
  ShardGroup row_wise;       ///< row ranges of the row_wise tables (table order), batch = global B
  ShardGroup data_parallel;  ///< full copies of the data_parallel tables, batch = local b
};

struct ShardedDlrmState {
  DlrmConfig config;  ///< the single-process config (batch_size = global B)
  std::vector<RankState> ranks;
};

/// Per-rank values of one step (for comparing the CUDA executor operator by operator).
struct ShardedStepTrace {
  std::vector<std::vector<float>> pooled;  ///< per rank, [b, total_dim] after the exchanges
  std::vector<std::vector<float>> logits;  ///< per rank, [b]
  std::vector<double> loss;                ///< per rank, mean BCE over its b samples
};

/// Slices a single-process model over the ranks of `layout`: every rank gets the MLPs and
/// Adam state; a shard gets rows [row_offset, +rows) x cols [col_offset, +cols) of its
/// table (and the row-wise accumulators of those rows). Throws std::invalid_argument when
/// the model's batch, tables or pooled width do not match the layout, its embeddings were
/// not drawn, or a table's shards do not tile it exactly (every element on exactly one
/// rank; data_parallel: on every rank). multi_gpu_layout checks the tiling too (naming the
/// table); this check covers a layout built or edited by hand.
[[nodiscard]] ShardedDlrmState init_sharded_dlrm(const DlrmModel& full, const MultiGpuLayout& layout);

/// One training step of every rank on `global` (B samples, all tables, DlrmBatch CSR).
/// Returns the global loss before the update (mean of the rank losses). `spec` is the
/// workload the layout was made from (split_batch needs its table count and dense width).
/// Throws std::invalid_argument on a batch that does not match.
double sharded_train_step(ShardedDlrmState& state, const MultiGpuLayout& layout, const DlrmSpec& spec,
                          const DlrmBatch& global, ShardedStepTrace* trace = nullptr);

/// Reassembles a single-process model: rank 0's MLPs and Adam state, every table from its
/// shards (data_parallel tables from rank 0's copy). Row-wise accumulators: a table_wise or
/// row_wise row's own; a column_wise row gets sum_k cols_k * G_k / dim over its column
/// shards (the unsharded accumulator when the gradients are the same).
[[nodiscard]] DlrmModel gather_sharded(const ShardedDlrmState& state, const MultiGpuLayout& layout);

}  // namespace perfcast::validation
