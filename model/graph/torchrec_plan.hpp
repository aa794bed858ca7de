#pragma once
/// \file torchrec_plan.hpp
/// Sharding plans in the shape TorchRec itself uses (torchrec.distributed.types: a
/// ShardingPlan maps module paths to per-table ParameterSharding), as JSON:
///   {"sparse_arch.embedding_bag_collection": {
///      "table_0": {"sharding_type": "row_wise", "compute_kernel": "fused", "ranks": [0, 1],
///                  "sharding_spec": {"shards": [
///                     {"shard_offsets": [0, 0], "shard_sizes": [500, 64], "placement": "rank:0/cuda:0"},
///                     {"shard_offsets": [500, 0], "shard_sizes": [500, 64], "placement": "rank:1/cuda:1"}]}},
///      "table_1": {"sharding_type": "data_parallel", "compute_kernel": "dense",
///                  "ranks": [0, 1], "sharding_spec": null}}}
/// `sharding_spec` is an EnumerableShardingSpec (its "shards" are ShardMetadata);
/// sharding_type strings are TorchRec's ShardingType values ("grid_shard" for grid);
/// a data_parallel table has no spec (null or absent) and, when `ranks` is given, lists
/// every rank. ShardingPlan._serialize()'s output is read as well: {"plan": {module:
/// {table: {...}}}} with each table's shards as "shards" beside its other fields.
/// output_dtype is modelled: the bytes per element of the table's pooled output, which its
/// output all-to-all or reduce-scatter moves, its lookup writes and its buffers hold
/// (TableSharding::output_bytes; FP32 when absent or null).
/// ParameterSharding's other fields (enforce_hbm, stochastic_rounding, bounds_check_mode,
/// key_value_params, and cache_params' reserved_memory, precision, stats,
/// multipass_prefetch_config) are checked against TorchRec's types and enum members and
/// recorded, not modelled: the plan's source names them.

#include <string>

#include "core/json_reader.hpp"
#include "model/graph/sharding_plan.hpp"

namespace perfcast {

/// TorchRec's module path of the embedding tables in its DLRM model
/// (torchrec.models.dlrm.DLRM: sparse_arch.embedding_bag_collection); the default when
/// writing a plan.
inline constexpr const char* kTorchrecDlrmModule = "sparse_arch.embedding_bag_collection";

/// True when `doc` is not perfcast's own plan format (an object with neither "schema" nor
/// "tables"), i.e. parse_plan should read it as a TorchRec plan.
[[nodiscard]] bool is_torchrec_plan(const JsonDocument& doc);

/// Reads a TorchRec-shaped plan. Table names are unique across modules; every workload
/// table must appear; placements "rank:R/cuda:L" need R < world_size and L = R mod
/// gpus_per_node; shards obey the same tiling and node rules as parse_plan. Throws
/// ConfigError naming the JSON path.
[[nodiscard]] ShardingPlan parse_torchrec_plan(const JsonDocument& doc, const DlrmSpec& w, int world_size, int gpus_per_node);

/// The two JSON shapes of a TorchRec plan: dataclasses.asdict's (ParameterSharding with
/// "sharding_spec": {"shards": [...]}, every field) and ShardingPlan._serialize()'s
/// ({"plan": {module: {table: {sharding_type, compute_kernel, ranks, shards}}}}); kAsRead
/// writes a plan read from TorchRec in the shape it was read in (asdict otherwise).
enum class TorchrecShape { kAsdict, kSerialize, kAsRead };

struct TorchrecWriteOptions {
  /// Every table under this module path; "" keeps each table's module as read (plans read
  /// from TorchRec), else kTorchrecDlrmModule.
  std::string module_path;
  TorchrecShape shape = TorchrecShape::kAsRead;
};

/// Plan text in TorchRec's shape; parse_torchrec_plan reads it back to the same plan. A plan
/// read from TorchRec (p.torchrec) is written back with the fields perfcast records but does
/// not model unchanged (cache_params' load_factor is the model's), so that reading and
/// writing a TorchRec plan gives the same JSON value. Throws ConfigError for a hybrid table.
[[nodiscard]] std::string plan_to_torchrec_json(const ShardingPlan& p, const DlrmSpec& w, int gpus_per_node,
                                                const TorchrecWriteOptions& options);

/// As above, asdict's shape, every table under `module_path`.
[[nodiscard]] std::string plan_to_torchrec_json(const ShardingPlan& p, const DlrmSpec& w, int gpus_per_node,
                                                const std::string& module_path = kTorchrecDlrmModule);

}  // namespace perfcast
