#include "model/sharding/plan_shapes.hpp"
#include "core/json_text.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

namespace perfcast {
namespace {

/// Rows per shard as TorchRec's planner splits a table's rows (torchrec/distributed/
/// sharding/rw_sharding.py _calculate_rw_shard_sizes_and_offsets, planner/utils
/// _twrw_shard_table_rows): ceil(total / parts) each, the remainder on the last shard. So
/// every shard but the last of a node-local block is the same size, and ranks holding
/// them run equal programs (the search simulates one of them, DlrmGraphBuilder). Where
/// that would leave the last shard empty (fewer rows than parts x the block), the rows
/// are spread as evenly as even_split does.
std::vector<std::int64_t> row_blocks(std::int64_t total, std::size_t parts) {
  const auto n = static_cast<std::int64_t>(parts);
  if (n <= 1) return even_split(total, parts);
  const std::int64_t block = (total + n - 1) / n;
  const std::int64_t last = total - block * (n - 1);
  if (last < 1) return even_split(total, parts);
  std::vector<std::int64_t> out(parts, block);
  out.back() = last;
  return out;
}

}  // namespace

TableSharding table_wise(const EmbeddingTableSpec& t, int rank) {
  return TableSharding{ShardingType::kTableWise, {rank}, {Shard{0, t.rows, 0, t.dim, rank}}};
}

TableSharding column_wise(const EmbeddingTableSpec& t, const std::vector<int>& ranks) {
  TableSharding s{ShardingType::kColumnWise, ranks, {}};
  const auto parts = even_split(t.dim, ranks.size());
  std::int64_t off = 0;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    s.shards.push_back(Shard{0, t.rows, off, parts[i], ranks[i]});
    off += parts[i];
  }
  return s;
}

TableSharding row_wise(const EmbeddingTableSpec& t, const std::vector<int>& ranks) {
  TableSharding s{ShardingType::kRowWise, ranks, {}};
  const auto parts = row_blocks(t.rows, ranks.size());
  std::int64_t off = 0;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    s.shards.push_back(Shard{off, parts[i], 0, t.dim, ranks[i]});
    off += parts[i];
  }
  return s;
}

TableSharding table_row_wise(const EmbeddingTableSpec& t, const std::vector<int>& ranks) {
  TableSharding s = row_wise(t, ranks);
  s.type = ShardingType::kTableRowWise;
  return s;
}

TableSharding table_column_wise(const EmbeddingTableSpec& t, const std::vector<int>& ranks) {
  TableSharding s = column_wise(t, ranks);
  s.type = ShardingType::kTableColumnWise;
  return s;
}

TableSharding grid(const EmbeddingTableSpec& t, const std::vector<std::vector<int>>& blocks) {
  TableSharding s{ShardingType::kGrid, {}, {}};
  const auto widths = even_split(t.dim, blocks.size());
  std::int64_t col = 0;
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const auto rows = row_blocks(t.rows, blocks[b].size());
    std::int64_t row = 0;
    for (std::size_t i = 0; i < blocks[b].size(); ++i) {
      s.shards.push_back(Shard{row, rows[i], col, widths[b], blocks[b][i]});
      s.ranks.push_back(blocks[b][i]);
      row += rows[i];
    }
    col += widths[b];
  }
  return s;
}

TableSharding data_parallel(const EmbeddingTableSpec& t, int world) {
  TableSharding s{ShardingType::kDataParallel, {}, {}};
  for (int r = 0; r < world; ++r) {
    s.ranks.push_back(r);
    s.shards.push_back(Shard{0, t.rows, 0, t.dim, r});
  }
  return s;
}

std::string plan_to_json(const ShardingPlan& p, const DlrmSpec& w, int world_size, int gpus_per_node) {
  nlohmann::json tables = nlohmann::json::object();
  for (std::size_t i = 0; i < p.tables.size(); ++i) {
    const auto& ts = p.tables[i];
    nlohmann::json spec = nlohmann::json::array();
    for (const auto& sh : ts.shards) {
      spec.push_back({{"shard_offsets", {sh.row_offset, sh.col_offset}},
                      {"shard_sizes", {sh.rows, sh.cols}},
                      {"placement", "rank:" + std::to_string(sh.rank) + "/cuda:" + std::to_string(sh.rank % gpus_per_node)}});
    }
    nlohmann::json entry = {{"sharding_type", sharding_type_name(ts.type)},
                            {"compute_kernel", compute_kernel_name(ts)},
                            {"ranks", ts.ranks}};
    if (ts.type == ShardingType::kHybrid) {
      entry["frequent_rows"] = ts.frequent_rows;  // its shards follow from it (no sharding_spec)
    } else {
      entry["sharding_spec"] = spec;
    }
    if (ts.storage == EmbeddingStorage::kHostUvmCaching) entry["cache_params"] = {{"algorithm", "lru"}, {"load_factor", ts.cache_load_factor}};
    if (!ts.output_dtype.empty()) entry["output_dtype"] = ts.output_dtype;
    tables[w.tables[i].name] = std::move(entry);
  }
  nlohmann::json j = {{"schema", "perfcast.plan"}, {"schema_version", "1.0"}, {"world_size", world_size}, {"tables", tables}};
  return json_text(j, 2) + "\n";
}

std::size_t table_sharding_hash(const TableSharding& t) {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
  mix(static_cast<std::uint64_t>(t.type) + 17);
  mix(static_cast<std::uint64_t>(t.storage) + 101);
  mix(static_cast<std::uint64_t>(std::llround(t.cache_load_factor * 1e9)));
  mix(static_cast<std::uint64_t>(t.frequent_rows) + 7);
  mix(static_cast<std::uint64_t>(std::llround(t.output_bytes * 4)) + 3);  // output_dtype: 0.25 to 8 bytes
  for (const auto& s : t.shards) {
    mix(static_cast<std::uint64_t>(s.rank));
    mix(static_cast<std::uint64_t>(s.row_offset));
    mix(static_cast<std::uint64_t>(s.rows));
    mix(static_cast<std::uint64_t>(s.col_offset));
    mix(static_cast<std::uint64_t>(s.cols));
  }
  return static_cast<std::size_t>(h);
}

std::size_t plan_hash_term(std::size_t index, std::size_t table_hash) {
  // splitmix64's finalizer (Steele, Lea, Flood 2014) of the hash offset by the index.
  std::uint64_t z = static_cast<std::uint64_t>(table_hash) + (static_cast<std::uint64_t>(index) + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return static_cast<std::size_t>(z ^ (z >> 31));
}

std::size_t plan_hash(const ShardingPlan& p) {
  std::size_t h = 0;
  for (std::size_t t = 0; t < p.tables.size(); ++t) h += plan_hash_term(t, table_sharding_hash(p.tables[t]));
  return h;
}

}  // namespace perfcast
