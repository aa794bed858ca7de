#pragma once
/// \file plan_shapes.hpp
/// Building one table's sharding from a type and ranks, and writing plans as JSON with
/// TorchRec's ParameterSharding field names (the format parse_plan reads).

#include <string>
#include <vector>

#include "model/graph/sharding_plan.hpp"

namespace perfcast {

[[nodiscard]] TableSharding table_wise(const EmbeddingTableSpec& t, int rank);
/// Column-wise over `ranks`, columns split evenly (the first shards one column wider when
/// the dim does not divide).
[[nodiscard]] TableSharding column_wise(const EmbeddingTableSpec& t, const std::vector<int>& ranks);
/// Row-wise over `ranks`, rows split as TorchRec's planner splits them: ceil(rows / ranks)
/// each, the remainder on the last (evenly when that would leave the last empty).
[[nodiscard]] TableSharding row_wise(const EmbeddingTableSpec& t, const std::vector<int>& ranks);
/// Table-row-wise: rows split over `ranks` as row_wise does; `ranks` must be of one node.
[[nodiscard]] TableSharding table_row_wise(const EmbeddingTableSpec& t, const std::vector<int>& ranks);
/// Table-column-wise: columns split evenly over `ranks`, which must be ranks of one node.
[[nodiscard]] TableSharding table_column_wise(const EmbeddingTableSpec& t, const std::vector<int>& ranks);
/// Grid: columns split evenly into `blocks.size()` blocks; block i's rows split over
/// `blocks[i]` (ranks of one node) as row_wise does.
[[nodiscard]] TableSharding grid(const EmbeddingTableSpec& t, const std::vector<std::vector<int>>& blocks);
/// A full copy on each of `world` ranks.
[[nodiscard]] TableSharding data_parallel(const EmbeddingTableSpec& t, int world);

/// Plan file text (schema "perfcast.plan" 1.0) with shard offsets, sizes and placements.
[[nodiscard]] std::string plan_to_json(const ShardingPlan& p, const DlrmSpec& w, int world_size, int gpus_per_node);

/// Hash of a plan (types, shards, ranks), for the search's cache: the sum (mod 2^64) of
/// plan_hash_term(t, table_sharding_hash(table t)) over the tables, so that a search that
/// changes a few tables updates it in O(changed tables).
[[nodiscard]] std::size_t plan_hash(const ShardingPlan& p);
/// FNV-1a over one table's type and shards (rank, rows, columns).
[[nodiscard]] std::size_t table_sharding_hash(const TableSharding& t);
/// Table `index`'s term of plan_hash (a splitmix64 finalizer of both).
[[nodiscard]] std::size_t plan_hash_term(std::size_t index, std::size_t table_hash);

}  // namespace perfcast
