#pragma once
/// \file multi_gpu_layout.hpp
/// What each rank of a one-node multi-GPU DLRM run holds and exchanges, derived from a
/// ShardingPlan (CPU only, no CUDA; the NCCL executor and its tests use it). Matches the
/// communication model/graph/dlrm_builder.cpp predicts:
///  - every rank runs the MLPs data-parallel on a local batch b = batch_size / world
///    (global sample s belongs to rank s / b);
///  - table_wise and column_wise shards are looked up on the GLOBAL batch by the rank that
///    holds them; the pooled all-to-all sends rank j the [b, cols] fp32 rows of j's samples
///    of every such shard ("output_dist": src i -> dst j bytes = b x sum of i's pooled-shard
///    cols x 4, self included; the model's per-pair matrix, the diagonal being a local copy);
///  - row-split shards (row_wise, table_row_wise, grid: every column block of such a table
///    is a "row-wise block", its rows split over some ranks, at most one range per rank)
///    produce partial pooled sums [batch_size, row_wise_dims] (the columns of every block;
///    zeros in the blocks a rank holds no rows of), reduce-scattered over all ranks so that
///    rank r receives the summed rows of its own b samples ("output_dist.row_wise", whole
///    array bytes batch_size x row-wise dims x 4, nccl-tests convention); backward is the
///    all-gather of the same size. On one node this is what the model predicts for all
///    three types (table_row_wise / grid: a reduce-scatter inside the node); over several
///    nodes the model reduces table_row_wise / grid inside each node and sends the sums
///    across nodes by an all-to-all, which this executor does not do (it would run the same
///    arithmetic as one world-wide reduce-scatter);
///  - data_parallel tables: a full copy on every rank, looked up on the local batch, the
///    dense gradient all-reduced (rows x dim x 4 bytes) and applied with SGD;
///  - backward of the pooled all-to-all: the transposed matrix (gradients go back);
///  - DDP gradient buckets: layers in autograd order (top MLP last to first, then bottom
///    MLP last to first), (in*out + out) x 4 bytes each, a bucket closes when it reaches
///    DlrmSpec::first_bucket (the first, 1 MiB) or DlrmSpec::gradient_bucket (25 MB), the
///    rest is the last bucket (model/graph/dlrm_builder.cpp grad_ready / flush_bucket).
/// table_column_wise shards travel in the pooled all-to-all like column_wise ones.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
#include "profiler/embedding_bag_layout.hpp"
#include "validation/dlrm_reference.hpp"

namespace perfcast::validation {

/// One shard a rank holds.
struct LocalShard {
  std::size_t table = 0;  ///< workload table index
  ShardingType type = ShardingType::kTableWise;
  Shard shard;            ///< rows/cols of the table it covers
  /// Column of the pooled output [samples, total_dim] (sum of the dims of the tables
  /// before `table`, plus shard.col_offset) where this shard's columns belong.
  std::int64_t pooled_col = 0;
  /// Row-split shards only: column of this shard's block inside the row-wise partial-sum
  /// buffer [batch_size, row_wise_dims].
  std::int64_t row_wise_col = 0;
};

/// One column block of a row-split table (a row_wise or table_row_wise table: the whole
/// table; grid: each column block): `cols` columns at `pooled_col` of the pooled output and at
/// `row_wise_col` of the row-wise partial sums.
struct RowWiseBlock {
  std::size_t table = 0;
  std::int64_t pooled_col = 0, row_wise_col = 0, cols = 0;
};

/// One contiguous block of a pooled all-to-all message: `cols` columns of b samples,
/// stored [b, cols] row-major in the message, placed at column `pooled_col` of the
/// receiver's pooled [b, total_dim].
struct PooledBlock {
  std::size_t table = 0;
  std::int64_t pooled_col = 0, cols = 0;
};

struct RankLayout {
  /// Shards in plan order (table order, then the table's shard order).
  std::vector<LocalShard> shards;
  /// The message this rank sends every rank in the forward pooled all-to-all (the same
  /// blocks to every destination, each holding that destination's b samples): its
  /// table_wise and column_wise shards in `shards` order.
  std::vector<PooledBlock> pooled_send;
  /// The three embedding-bag launches of a rank, as indices into `shards` (each group is one
  /// EmbeddingBagLayout whose tables are the shards, rows x cols): table_wise and column_wise
  /// shards (global batch; output [batch_size, pooled_send_cols()]), row_wise shards (global
  /// batch; table order, so the output is the [batch_size, row_wise_dims] partial sums), and
  /// data_parallel tables (local batch).
  std::vector<std::size_t> pooled_group, row_wise_group, data_parallel_group;
  [[nodiscard]] std::int64_t pooled_send_cols() const;
};

/// A DDP bucket: a contiguous range of the flat MLP parameter/gradient buffer (layout of
/// DeviceDlrm: per layer [weights (out x in), bias (out)], bottom layers then top layers;
/// autograd order walks it backwards, so every bucket is contiguous).
struct GradientBucket {
  std::int64_t first_elem = 0, elems = 0;  ///< fp32 elements
  std::vector<int> layers;                 ///< layer indices, bottom 0.. then top, in autograd order
  [[nodiscard]] std::int64_t bytes() const { return elems * 4; }
};

struct MultiGpuLayout {
  int world = 1;
  std::int64_t global_batch = 0, local_batch = 0;  ///< samples
  std::int64_t total_dim = 0;                      ///< pooled width: sum of table dims
  std::int64_t row_wise_dims = 0;                  ///< columns of all row-wise blocks
  std::vector<RowWiseBlock> row_wise_blocks;       ///< in table order, then column order
  std::vector<RankLayout> ranks;
  /// Forward pooled all-to-all bytes, [src * world + dst] (diagonal: local copy).
  std::vector<std::int64_t> pooled_bytes;
  /// Row-wise reduce-scatter, whole-array bytes (global batch x row_wise_dims x 4);
  /// each rank receives local_batch x row_wise_dims x 4 of it.
  std::int64_t row_wise_bytes = 0;
  /// Data-parallel tables' gradient all-reduce bytes (rows x dim x 4 summed).
  std::int64_t data_parallel_bytes = 0;
  std::vector<GradientBucket> buckets;

  /// Backward pooled all-to-all bytes (transpose of pooled_bytes), [src * world + dst].
  [[nodiscard]] std::vector<std::int64_t> pooled_backward_bytes() const;
};

/// Lays `workload` out over `world` ranks as `plan` says. Throws ConfigError: a plan for a
/// different table count, a sharding type the executor does not implement (naming the
/// table and type), a rank >= world, a batch not divisible by world.
[[nodiscard]] MultiGpuLayout multi_gpu_layout(const DlrmSpec& workload, const ShardingPlan& plan, int world);

/// Places the outputs of rank `rank`'s row-wise lookup group: `layout` (built from the
/// group's shards in row_wise_group order) gets each shard's block column as its
/// output_offset and row_wise_dims as its row width, so the lookup writes straight into the
/// [batch_size, row_wise_dims] partial sums (the other blocks' columns are never written:
/// they stay zero). Throws std::invalid_argument when the layout is not that group's.
void place_row_wise_outputs(profiler::EmbeddingBagLayout& layout, const MultiGpuLayout& L, int rank);

/// One group's sparse input in the CSR layout of embedding_bag_layout.hpp: `bags` bags per
/// shard, shard after shard; row_wise indices re-based to the shard's first row.
struct GroupInput {
  std::int64_t bags = 0;
  std::vector<std::int64_t> indices, offsets;
};

/// What rank r is handed of one global batch: its local samples [r*b, (r+1)*b) for the
/// data-parallel MLPs (dense, labels, every table's bags: the data loader's share of the
/// rank), and the inputs of its three embedding groups. The executor stages these in pinned
/// memory and copies them to the GPU every step; the input all-to-all of indices that
/// TorchRec runs (the model's "input_dist") is done here on the host instead.
struct RankInput {
  DlrmBatch local;
  GroupInput pooled, row_wise, data_parallel;
};

/// Splits `global` (batch_size samples, all tables, CSR as in DlrmBatch) for `rank`.
/// Throws std::invalid_argument when the batch does not match the layout's sizes.
[[nodiscard]] RankInput split_batch(const MultiGpuLayout& layout, const DlrmSpec& workload, const DlrmBatch& global,
                                    int rank);

/// Raises `capacity` (pooled, row_wise, data_parallel) to at least the index counts of
/// `input`'s three groups: the per-group index capacity a rank needs for its batches.
void grow_index_capacity(std::array<std::int64_t, 3>& capacity, const RankInput& input);

/// DDP buckets of the MLP gradients (see the file comment). Layer indices: bottom layers
/// 0..nb-1, then top layers nb..nb+nt-1.
[[nodiscard]] std::vector<GradientBucket> ddp_buckets(const DlrmSpec& workload);

}  // namespace perfcast::validation
