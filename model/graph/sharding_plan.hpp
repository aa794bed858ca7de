#pragma once
/// \file sharding_plan.hpp
/// Where each embedding table lives. The file format (schema "perfcast.plan" 1.x) uses
/// TorchRec's ParameterSharding field names so plans carry over:
///   {"tables": {"<name>": {"sharding_type": "table_wise", "compute_kernel": "fused",
///     "ranks": [3], "sharding_spec": [{"shard_offsets": [0, 0], "shard_sizes": [rows, dim],
///     "placement": "rank:3/cuda:3"}]}}}
/// `sharding_spec` is optional; without it, row_wise and table_row_wise split rows and
/// column_wise and table_column_wise split columns evenly over `ranks` (grid needs it).
/// TorchRec's own plan shape (module path, then table) is read and written by
/// model/graph/torchrec_plan.hpp; parse_plan accepts either.
///
/// `compute_kernel` (TorchRec's names; docs/embedding.md, tables in host memory): "fused" (rows in HBM),
/// "fused_uvm" (rows and optimizer state in host memory, read over the host link),
/// "fused_uvm_caching" (host memory with an LRU row cache in HBM; its size from
/// `cache_params.load_factor`, default 0.2), and "dense" for data_parallel tables. Quantized
/// and key-value kernels are refused, never predicted as if they were something else.
///
/// Types (TorchRec semantics, docs/sharding-planners.md section 2.2):
///  - data_parallel: a full copy on every rank;
///  - table_wise: the whole table on one rank;
///  - row_wise: rows split over ranks (partial pooled sums, reduce-scatter over all ranks);
///  - column_wise: column shards on any ranks (each pooled like a table-wise table);
///  - table_row_wise (TWRW): rows split over the ranks of ONE node: intra-node
///    reduce-scatter, then the pooled all-to-all across nodes between ranks of the same
///    local index;
///  - table_column_wise (TWCW): column shards on ranks of ONE node, each shard pooled
///    like a table-wise table;
///  - grid: column blocks, each block's rows split over the ranks of one node (each
///    block communicates like a table_row_wise table of the block's width).
///  - hybrid (perfcast's, not TorchRec's; HugeCTR's hybrid embedding): the table's
///    `frequent_rows` hottest rows are data-parallel (a copy on every rank, looked up for the
///    local batch, their gradients all-reduced) and the other rows model-parallel, split
///    evenly over `ranks` (every rank); a rank sends a sample's rank the pooled partial sum
///    of its infrequent rows only for the bags that touched them. Without "frequent_rows"
///    the split comes from the table's index distribution (hybrid_frequent_rows). Its shards
///    are the infrequent rows' (from row frequent_rows on); no sharding_spec.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "model/graph/workload_spec.hpp"
#include "core/json_reader.hpp"

namespace perfcast {

enum class ShardingType { kDataParallel, kTableWise, kRowWise, kColumnWise, kTableRowWise, kTableColumnWise, kGrid, kHybrid };
inline constexpr int kShardingTypeCount = 8;

[[nodiscard]] std::string_view sharding_type_name(ShardingType t);

/// Row-split types: a shard sees its share of the rows' lookups and produces partial
/// pooled sums that are reduced (row_wise, table_row_wise, grid).
[[nodiscard]] constexpr bool splits_rows(ShardingType t) {
  return t == ShardingType::kRowWise || t == ShardingType::kTableRowWise || t == ShardingType::kGrid;
}
/// Types whose shards are pooled and sent by the global pooled all-to-all (table_wise,
/// column_wise, table_column_wise).
[[nodiscard]] constexpr bool pooled_all_to_all(ShardingType t) {
  return t == ShardingType::kTableWise || t == ShardingType::kColumnWise || t == ShardingType::kTableColumnWise;
}
/// Types TorchRec shards a sequence (EmbeddingCollection) table with: table_wise,
/// row_wise, column_wise, data_parallel (torchrec/distributed/embedding.py,
/// create_embedding_sharding). A sequence row-wise shard sends its looked-up rows with the
/// all-to-all (nothing to reduce).
[[nodiscard]] constexpr bool sequence_sharding(ShardingType t) {
  return t == ShardingType::kTableWise || t == ShardingType::kRowWise || t == ShardingType::kColumnWise ||
         t == ShardingType::kDataParallel;
}
/// Fails at `entry`'s "sharding_type" when `spec` is a sequence table and `t` is not a
/// sequence_sharding (plan files of both formats).
void require_sequence_sharding(const JsonObject& entry, const EmbeddingTableSpec& spec, ShardingType t);
/// Types reduced inside one node and exchanged across nodes (table_row_wise, grid).
[[nodiscard]] constexpr bool node_reduced(ShardingType t) {
  return t == ShardingType::kTableRowWise || t == ShardingType::kGrid;
}

struct Shard {
  std::int64_t row_offset = 0, rows = 0;
  std::int64_t col_offset = 0, cols = 0;
  int rank = 0;
};

/// FBGEMM's and TorchRec's default cache_load_factor (FBGEMM
/// SplitTableBatchedEmbeddingBagsCodegen's cache_load_factor=0.2; TorchRec's planner
/// UVM_CACHING_RATIO, docs/sharding-planners.md section 2.4).
inline constexpr double kDefaultCacheLoadFactor = 0.2;

struct TableSharding {
  ShardingType type = ShardingType::kTableWise;
  std::vector<int> ranks;     ///< data_parallel: every rank
  std::vector<Shard> shards;  ///< data_parallel: one full shard per rank
  /// Where the rows live (compute_kernel); data_parallel tables are always in HBM.
  EmbeddingStorage storage = EmbeddingStorage::kHbm;
  /// fused_uvm_caching: rows of each shard the HBM cache holds, as a share of its rows, (0, 1].
  double cache_load_factor = 0;
  /// hybrid: the hottest rows, replicated on every rank (the shards hold the others).
  std::int64_t frequent_rows = 0;
  /// TorchRec's ParameterSharding output_dtype as its DataType member name ("FP16"), ""
  /// when the plan does not say (FP32, TorchRec's default).
  std::string output_dtype;
  /// Bytes per element of the table's pooled output (of output_dtype: FP32 4, FP16 / BF16
  /// 2, ...), which its output all-to-all or reduce-scatter moves, its lookup writes and
  /// its output buffer holds.
  double output_bytes = 4;
};

/// Bytes per element of table `t`'s pooled output: the plan's output_dtype when it states
/// one, else the stack's embedding output type (DlrmStack::embedding_output), else FP32.
[[nodiscard]] double pooled_output_bytes(const DlrmSpec& w, const TableSharding& t);

/// TorchRec's compute_kernel of a table: "dense" for data_parallel, else the storage's name.
[[nodiscard]] std::string_view compute_kernel_name(const TableSharding& t);

/// One entry per table of the workload, in the workload's table order.
/// What a plan read in TorchRec's shape carried beyond perfcast's model, so that writing it
/// back in TorchRec's shape gives the same JSON (model/graph/torchrec_plan.hpp).
struct TorchrecOrigin {
  bool serialized = false;           ///< read from ShardingPlan._serialize() output ({"plan": ...})
  std::vector<std::string> modules;  ///< per table (workload order): its module path
  /// Per table: the ParameterSharding fields perfcast records but does not model, as given
  /// (cache_params whole; null values kept), and "ranks" / "sharding_spec" when given as null.
  std::vector<nlohmann::json> recorded;
  /// Per table, per shard in the order read: ShardMetadata's fields beyond offsets, sizes and
  /// placement (bucket_id_offset, num_buckets), as given.
  std::vector<std::vector<nlohmann::json>> shard_extras;
};

struct ShardingPlan {
  std::string source;  ///< file, or "default: table_wise round-robin"
  std::vector<TableSharding> tables;
  std::optional<TorchrecOrigin> torchrec;  ///< set when read from a TorchRec-shaped plan
};

/// The frequent rows of a hybrid table of `spec` in a job of global batch `global_batch`:
/// the hottest rows each expected to be looked up at least once per iteration (a replicated
/// row then costs no more than its all-reduce: its gradient's all-reduce moves about what one
/// remote lookup and its gradient move), from the table's index distribution
/// (frequent_rows_for(), predictors/index_distribution.hpp); at most rows - `ranks` so that
/// every rank keeps an infrequent row.
[[nodiscard]] std::int64_t hybrid_frequent_rows(const EmbeddingTableSpec& spec, std::int64_t global_batch, int ranks);

/// Share of a hybrid table's lookups that hit its frequent rows (top_rows_access_share of its
/// distribution at `ts.frequent_rows`, a reuse histogram counted against the unique rows of
/// one iteration of `global_batch`).
[[nodiscard]] double hybrid_frequent_share(const EmbeddingTableSpec& spec, const TableSharding& ts, std::int64_t global_batch);

/// A hybrid sharding of `spec` over ranks 0..world-1 with `frequent` frequent rows (clamped to
/// [0, rows - world]): the infrequent rows split evenly, in rank order.
[[nodiscard]] TableSharding hybrid_sharding(const EmbeddingTableSpec& spec, int world, std::int64_t frequent);

/// Even split of `total` into `parts` (the first total % parts one larger).
[[nodiscard]] std::vector<std::int64_t> even_split(std::int64_t total, std::size_t parts);

/// Table-wise, round-robin over ranks in table order (perfcast's default plan).
[[nodiscard]] ShardingPlan default_plan(const DlrmSpec& w, int world_size);

/// The type whose sharding_type_name (or TorchRec's spelling: "grid_shard" for grid) is
/// `name`, or nullopt.
[[nodiscard]] std::optional<ShardingType> sharding_type_from_name(std::string_view name);

/// Reads a plan entry's `compute_kernel` and `cache_params` into t.storage and
/// t.cache_load_factor (t.type must be set): "dense" for data_parallel tables; "fused",
/// "fused_uvm" or "fused_uvm_caching" for the others (absent: "fused"/"dense"). cache_params
/// (TorchRec's CacheParams) may give load_factor in (0, 1] and algorithm "lru"; its other
/// fields must be null. Quantized and key-value kernels are refused with ConfigError.
void parse_compute_kernel(const JsonObject& entry, TableSharding& t);

/// Reads a plan entry's `output_dtype` (TorchRec's DataType: the member's name, str() of it
/// such as "DataType.FP16", or its value; absent or null: FP32) into t.output_dtype and
/// t.output_bytes; ConfigError naming the members otherwise.
void parse_output_dtype(const JsonObject& entry, TableSharding& t);

/// "" when `ts.shards` (read from a sharding_spec) tile `spec` as `ts.type` requires: a
/// data_parallel table one full shard on each of its ranks; the other types column blocks of
/// contiguous row ranges covering the table, with the type's shape (one shard for
/// table_wise, one node of `gpus_per_node` ranks for the node-local types). Else what is
/// wrong. Sorts the shards by (column, row) for the split types.
[[nodiscard]] std::string shard_layout_error(TableSharding& ts, const EmbeddingTableSpec& spec, int gpus_per_node);

/// Reads a plan; every workload table must appear, ranks must be < world_size, shards
/// must tile the table exactly (column blocks of contiguous row ranges), shard
/// placements must be among the table's `ranks`, and the node-local types
/// (table_row_wise, table_column_wise, each grid column block) must stay inside one
/// node of `gpus_per_node` ranks (0: one node of world_size). A document without a
/// "schema" key is read as a TorchRec plan (parse_torchrec_plan). Throws ConfigError naming
/// the JSON path.
[[nodiscard]] ShardingPlan parse_plan(const JsonDocument& doc, const DlrmSpec& w, int world_size, int gpus_per_node = 0);

}  // namespace perfcast
