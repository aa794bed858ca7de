#pragma once
/// \file sharding_plan.hpp
/// Where each embedding table lives. The file format (schema "perfcast.plan" 1.x) uses
/// TorchRec's ParameterSharding field names so plans carry over:
///   {"tables": {"<name>": {"sharding_type": "table_wise", "compute_kernel": "fused",
///     "ranks": [3], "sharding_spec": [{"shard_offsets": [0, 0], "shard_sizes": [rows, dim],
///     "placement": "rank:3/cuda:3"}]}}}
/// `sharding_spec` is optional; without it, row_wise splits rows and column_wise splits
/// columns evenly over `ranks`.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model/workload_spec.hpp"
#include "topology/json_reader.hpp"

namespace perfcast {

enum class ShardingType { kDataParallel, kTableWise, kRowWise, kColumnWise };

[[nodiscard]] std::string_view sharding_type_name(ShardingType t);

struct Shard {
  std::int64_t row_offset = 0, rows = 0;
  std::int64_t col_offset = 0, cols = 0;
  int rank = 0;
};

struct TableSharding {
  ShardingType type = ShardingType::kTableWise;
  std::vector<int> ranks;     ///< data_parallel: every rank
  std::vector<Shard> shards;  ///< data_parallel: one full shard per rank
};

/// One entry per table of the workload, in the workload's table order.
struct ShardingPlan {
  std::string source;  ///< file, or "default: table_wise round-robin"
  std::vector<TableSharding> tables;
};

/// Table-wise, round-robin over ranks in table order (the default).
[[nodiscard]] ShardingPlan default_plan(const DlrmSpec& w, int world_size);

/// Reads a plan; every workload table must appear, ranks must be < world_size, shards
/// must tile the table exactly. Throws ConfigError.
[[nodiscard]] ShardingPlan parse_plan(const JsonDocument& doc, const DlrmSpec& w, int world_size);

}  // namespace perfcast
