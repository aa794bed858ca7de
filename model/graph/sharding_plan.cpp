#include "model/graph/sharding_plan.hpp"

#include <cstdio>

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include <fmt/format.h>

#include "model/graph/torchrec_plan.hpp"

namespace perfcast {

std::string_view sharding_type_name(ShardingType t) {
  switch (t) {
    case ShardingType::kDataParallel: return "data_parallel";
    case ShardingType::kTableWise: return "table_wise";
    case ShardingType::kRowWise: return "row_wise";
    case ShardingType::kColumnWise: return "column_wise";
    case ShardingType::kTableRowWise: return "table_row_wise";
    case ShardingType::kTableColumnWise: return "table_column_wise";
    case ShardingType::kGrid: return "grid";
    case ShardingType::kHybrid: return "hybrid";
  }
  return "?";
}

std::optional<ShardingType> sharding_type_from_name(std::string_view name) {
  if (name == "grid_shard") return ShardingType::kGrid;
  for (int k = 0; k < kShardingTypeCount; ++k)
    if (sharding_type_name(static_cast<ShardingType>(k)) == name) return static_cast<ShardingType>(k);
  return std::nullopt;
}

std::string_view compute_kernel_name(const TableSharding& t) {
  return t.type == ShardingType::kDataParallel ? "dense" : storage_kernel_name(t.storage);
}

namespace {

/// cache_params (TorchRec's CacheParams): load_factor and an LRU algorithm are modelled.
double parse_cache_load_factor(const JsonValue& v) {
  if (v.raw().is_null()) return kDefaultCacheLoadFactor;
  const JsonObject o = v.as_object();
  double load_factor = kDefaultCacheLoadFactor;
  for (const auto& key : o.keys()) {
    const JsonValue f = o.at(key);
    if (key == "load_factor") {
      if (f.raw().is_null()) continue;
      load_factor = f.as_number_in(1e-9, 1.0);
    } else if (key == "algorithm") {
      if (f.raw().is_null()) continue;
      // FBGEMM's CacheAlgorithm (LRU = 0, LFU = 1) as its name, its value or Python's str().
      std::string a = f.raw().is_number_integer() ? (f.as_integer(0, 1) == 0 ? "LRU" : "LFU") : f.as_string();
      if (a.rfind("CacheAlgorithm.", 0) == 0) a = a.substr(15);
      if (a != "lru" && a != "LRU") f.fail(fmt::format("cache algorithm \"{}\" is not modelled (perfcast models LRU, FBGEMM's default)", a));
    } else if (key == "prefetch_pipeline") {
      if (!f.raw().is_null() && f.as_bool()) f.fail("prefetch_pipeline true is not modelled: the prefetch is predicted in front of the lookup");
    } else if (key == "reserved_memory") {
      if (!f.raw().is_null()) (void)f.as_number_in(0, 1e15);  // recorded: HBM TorchRec keeps free, not modelled
    } else if (key == "precision") {
      if (!f.raw().is_null()) (void)f.as_string();  // recorded: the cache's DataType, not modelled
    } else if (key == "stats" || key == "multipass_prefetch_config") {
      // recorded: statistics reporting and prefetch passes change no predicted time
    } else if (!f.raw().is_null()) {
      f.fail(fmt::format("cache_params.{} is not a TorchRec CacheParams field (algorithm, load_factor, reserved_memory, "
                         "precision, prefetch_pipeline, stats, multipass_prefetch_config)",
                         key));
    }
  }
  return load_factor;
}

}  // namespace

void require_sequence_sharding(const JsonObject& entry, const EmbeddingTableSpec& spec, ShardingType t) {
  if (!spec.sequence || sequence_sharding(t)) return;
  entry.fail("sharding_type", fmt::format("table \"{}\" is a sequence (EmbeddingCollection) table: TorchRec shards those "
                                          "table_wise, row_wise, column_wise or data_parallel, not {}",
                                          spec.name, sharding_type_name(t)));
}

namespace {

/// TorchRec's DataType members (torchrec/types.py) and their bytes per element.
constexpr std::array<std::pair<const char*, double>, 10> kDataTypeBytes{{{"FP32", 4},
                                                                          {"FP16", 2},
                                                                          {"BF16", 2},
                                                                          {"INT64", 8},
                                                                          {"INT32", 4},
                                                                          {"INT8", 1},
                                                                          {"UINT8", 1},
                                                                          {"INT4", 0.5},
                                                                          {"INT2", 0.25},
                                                                          {"NFP8", 1}}};

}  // namespace

double pooled_output_bytes(const DlrmSpec& w, const TableSharding& t) {
  if (!t.output_dtype.empty() || !w.stack.embedding_output) return t.output_bytes;
  return dtype_bytes(*w.stack.embedding_output);
}

void parse_output_dtype(const JsonObject& t, TableSharding& ts) {
  ts.output_dtype.clear();
  ts.output_bytes = 4;
  const auto v = t.find("output_dtype");
  if (!v || v->raw().is_null()) return;
  std::vector<std::string> members;
  for (const auto& [name, bytes] : kDataTypeBytes) members.emplace_back(name);
  std::string name;
  if (v->raw().is_number_integer()) {
    name = members[static_cast<std::size_t>(v->as_integer(0, static_cast<std::int64_t>(members.size()) - 1))];
  } else {
    name = v->as_string();
    if (name.rfind("DataType.", 0) == 0) name = name.substr(9);
  }
  for (const auto& [member, bytes] : kDataTypeBytes) {
    if (name == member) {
      ts.output_dtype = member;
      ts.output_bytes = bytes;
      return;
    }
  }
  v->fail(fmt::format("expected a DataType ({}), got \"{}\"", fmt::join(members, ", "), v->as_string()));
}

void parse_compute_kernel(const JsonObject& t, TableSharding& ts) {
  const bool dp = ts.type == ShardingType::kDataParallel;
  ts.storage = EmbeddingStorage::kHbm;
  ts.cache_load_factor = 0;
  if (auto kernel = t.find("compute_kernel")) {
    const std::string k = kernel->as_string();
    if (k == "quant" || k == "quant_uvm" || k == "quant_uvm_caching" || k == "key_value" || k == "ssd_virtual_table" ||
        k == "dram_virtual_table") {
      kernel->fail(fmt::format("compute_kernel \"{}\" is not modelled (modelled: fused, fused_uvm, fused_uvm_caching, "
                               "and dense for data_parallel)",
                               k));
    }
    if (k != "dense" && k != "fused" && k != "fused_uvm" && k != "fused_uvm_caching") {
      kernel->fail(fmt::format("unknown compute_kernel \"{}\" (expected fused, fused_uvm, fused_uvm_caching or dense)", k));
    }
    if (dp && k != "dense") kernel->fail("a data_parallel table uses compute_kernel \"dense\" (a full copy in HBM on every rank)");
    if (!dp && k == "dense") kernel->fail(fmt::format("compute_kernel \"dense\" is for data_parallel tables; a {} table uses fused, "
                                                      "fused_uvm or fused_uvm_caching", sharding_type_name(ts.type)));
    if (k == "fused_uvm") ts.storage = EmbeddingStorage::kHostUvm;
    if (k == "fused_uvm_caching") ts.storage = EmbeddingStorage::kHostUvmCaching;
  }
  const auto cache = t.find("cache_params");
  if (ts.storage == EmbeddingStorage::kHostUvmCaching) {
    ts.cache_load_factor = cache ? parse_cache_load_factor(*cache) : kDefaultCacheLoadFactor;
  } else if (cache && !cache->raw().is_null()) {
    (void)parse_cache_load_factor(*cache);  // checked, and without effect (as in TorchRec) on a table without a cache
  }
}

ShardingPlan default_plan(const DlrmSpec& w, int world_size) {
  ShardingPlan p;
  p.source = "default: table_wise round-robin";
  for (std::size_t i = 0; i < w.tables.size(); ++i) {
    TableSharding ts;
    ts.type = ShardingType::kTableWise;
    const int r = static_cast<int>(i % static_cast<std::size_t>(world_size));
    ts.ranks = {r};
    ts.shards = {Shard{0, w.tables[i].rows, 0, w.tables[i].dim, r}};
    p.tables.push_back(ts);
  }
  return p;
}

std::vector<std::int64_t> even_split(std::int64_t total, std::size_t parts) {
  std::vector<std::int64_t> out(parts, total / static_cast<std::int64_t>(parts));
  for (std::size_t i = 0; i < static_cast<std::size_t>(total % static_cast<std::int64_t>(parts)); ++i) out[i]++;
  return out;
}

std::int64_t hybrid_frequent_rows(const EmbeddingTableSpec& spec, std::int64_t global_batch, int ranks) {
  const double accesses = static_cast<double>(global_batch) * spec.pooling;
  const double k = frequent_rows_for(spec.distribution, static_cast<double>(spec.rows), accesses, 1.0);
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(k), 0, std::max<std::int64_t>(0, spec.rows - ranks));
}

double hybrid_frequent_share(const EmbeddingTableSpec& spec, const TableSharding& ts, std::int64_t global_batch) {
  if (ts.type != ShardingType::kHybrid || ts.frequent_rows <= 0) return 0.0;
  const double rows = static_cast<double>(spec.rows);
  const double unique = expected_unique_rows(spec.distribution, rows, static_cast<double>(global_batch) * spec.pooling);
  return top_rows_access_share(spec.distribution, rows, static_cast<double>(ts.frequent_rows), unique);
}

TableSharding hybrid_sharding(const EmbeddingTableSpec& spec, int world, std::int64_t frequent) {
  TableSharding ts;
  ts.type = ShardingType::kHybrid;
  ts.frequent_rows = std::clamp<std::int64_t>(frequent, 0, std::max<std::int64_t>(0, spec.rows - world));
  const auto parts = even_split(spec.rows - ts.frequent_rows, static_cast<std::size_t>(world));
  std::int64_t off = ts.frequent_rows;
  for (int r = 0; r < world; ++r) {
    ts.ranks.push_back(r);
    ts.shards.push_back(Shard{off, parts[static_cast<std::size_t>(r)], 0, spec.dim, r});
    off += parts[static_cast<std::size_t>(r)];
  }
  return ts;
}

namespace {

int parse_placement(const JsonValue& v, int world_size) {
  const std::string s = v.as_string();
  int rank = -1, local = -1;
  if (std::sscanf(s.c_str(), "rank:%d/cuda:%d", &rank, &local) != 2 || rank < 0) {
    v.fail(fmt::format("expected a placement such as \"rank:3/cuda:3\", got \"{}\"", s));
  }
  if (rank >= world_size) v.fail(fmt::format("rank {} does not exist (the system has {} ranks)", rank, world_size));
  return rank;
}

/// "" when the shards tile the table as a grid: column blocks side by side covering
/// [0, dim), each block's shards contiguous row ranges covering [0, rows) with the
/// block's width; else what is wrong. Shards are sorted in place by (column, row).
std::string tiling_error(std::vector<Shard>& shards, const EmbeddingTableSpec& spec) {
  std::stable_sort(shards.begin(), shards.end(), [](const Shard& a, const Shard& b) {
    return a.col_offset != b.col_offset ? a.col_offset < b.col_offset : a.row_offset < b.row_offset;
  });
  std::int64_t col = 0;
  std::size_t i = 0;
  while (i < shards.size()) {
    const std::int64_t block_col = shards[i].col_offset, width = shards[i].cols;
    if (block_col != col) {
      return fmt::format("columns {}..{} are {}", std::min(col, block_col), std::max(col, block_col) - 1,
                         block_col > col ? "not covered by any shard" : "covered twice");
    }
    std::int64_t row = 0;
    for (; i < shards.size() && shards[i].col_offset == block_col; ++i) {
      if (shards[i].cols != width) {
        return fmt::format("the shards at column offset {} differ in width ({} and {}); shards must form column blocks",
                           block_col, width, shards[i].cols);
      }
      if (shards[i].row_offset != row) {
        return fmt::format("rows {}..{} of columns {}..{} are {}", std::min(row, shards[i].row_offset),
                           std::max(row, shards[i].row_offset) - 1, block_col, block_col + width - 1,
                           shards[i].row_offset > row ? "not covered by any shard" : "covered twice");
      }
      row += shards[i].rows;
    }
    if (row != spec.rows) {
      return fmt::format("the shards of columns {}..{} cover rows 0..{} of the table's {}", block_col, block_col + width - 1,
                         row - 1, spec.rows);
    }
    col += width;
  }
  if (col != spec.dim) return fmt::format("the shards cover columns 0..{} of the table's {}", col - 1, spec.dim);
  return "";
}

/// Column blocks of a tiled table: [first, last) index ranges into the sorted shards.
std::vector<std::pair<std::size_t, std::size_t>> column_blocks(const std::vector<Shard>& shards) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t i = 0; i < shards.size();) {
    std::size_t j = i;
    while (j < shards.size() && shards[j].col_offset == shards[i].col_offset) ++j;
    out.emplace_back(i, j);
    i = j;
  }
  return out;
}

/// "" when the sharding's shape matches its type (after tiling_error passed), else why.
std::string shape_error(const TableSharding& ts, int gpus_per_node) {
  const auto blocks = column_blocks(ts.shards);
  auto one_node = [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i)
      if (ts.shards[i].rank / gpus_per_node != ts.shards[first].rank / gpus_per_node) return false;
    return true;
  };
  auto distinct_ranks = [&](std::size_t first, std::size_t last) {
    std::set<int> seen;
    for (std::size_t i = first; i < last; ++i)
      if (!seen.insert(ts.shards[i].rank).second) return false;
    return true;
  };
  const std::string type(sharding_type_name(ts.type));
  switch (ts.type) {
    case ShardingType::kDataParallel: return "";
    case ShardingType::kTableWise:
      return ts.shards.size() == 1 ? "" : "a table_wise table is one shard";
    case ShardingType::kRowWise:
    case ShardingType::kTableRowWise:
      if (blocks.size() != 1) return type + " shards split rows only (every shard spans all columns)";
      if (!distinct_ranks(0, ts.shards.size())) return type + " shards must be on different ranks";
      if (ts.type == ShardingType::kTableRowWise && !one_node(0, ts.shards.size())) {
        return fmt::format("table_row_wise shards must be on the ranks of one node ({} GPUs per node)", gpus_per_node);
      }
      return "";
    case ShardingType::kColumnWise:
    case ShardingType::kTableColumnWise:
      for (const auto& [first, last] : blocks)
        if (last - first != 1) return type + " shards split columns only (every shard spans all rows)";
      if (ts.type == ShardingType::kTableColumnWise && !one_node(0, ts.shards.size())) {
        return fmt::format("table_column_wise shards must be on the ranks of one node ({} GPUs per node)", gpus_per_node);
      }
      return "";
    case ShardingType::kGrid:
      for (const auto& [first, last] : blocks) {
        if (!one_node(first, last) || !distinct_ranks(first, last)) {
          return fmt::format("the row shards of grid column block {}..{} must be on different ranks of one node ({} GPUs per node)",
                             ts.shards[first].col_offset, ts.shards[first].col_offset + ts.shards[first].cols - 1,
                             gpus_per_node);
        }
      }
      return "";
    case ShardingType::kHybrid: return "";
  }
  return "";
}

}  // namespace

std::string shard_layout_error(TableSharding& ts, const EmbeddingTableSpec& spec, int gpus_per_node) {
  if (ts.type == ShardingType::kHybrid) {
    std::int64_t row = ts.frequent_rows;
    std::set<int> ranks;
    for (const auto& sh : ts.shards) {
      if (sh.row_offset != row || sh.col_offset != 0 || sh.cols != spec.dim) return "hybrid shards split the infrequent rows in order";
      if (!ranks.insert(sh.rank).second) return "hybrid shards must be on different ranks";
      row += sh.rows;
    }
    if (row != spec.rows) return fmt::format("the hybrid shards cover rows {}..{} of the table's {}", ts.frequent_rows, row - 1, spec.rows);
    return "";
  }
  if (ts.type == ShardingType::kDataParallel) {
    std::set<int> placed;
    for (const auto& sh : ts.shards) {
      if (sh.rows != spec.rows || sh.cols != spec.dim) return "a data_parallel shard must cover the whole table";
      placed.insert(sh.rank);
    }
    const std::set<int> ranks(ts.ranks.begin(), ts.ranks.end());
    if (placed != ranks || ts.shards.size() != ranks.size()) return "a data_parallel table needs exactly one shard on each of its ranks";
    return "";
  }
  const std::string tiling = tiling_error(ts.shards, spec);
  if (!tiling.empty()) return fmt::format("the shards do not tile the {} x {} table: {}", spec.rows, spec.dim, tiling);
  return shape_error(ts, gpus_per_node);
}

ShardingPlan parse_plan(const JsonDocument& doc, const DlrmSpec& w, int world_size, int gpus_per_node) {
  if (gpus_per_node <= 0) gpus_per_node = world_size;
  if (is_torchrec_plan(doc)) return parse_torchrec_plan(doc, w, world_size, gpus_per_node);
  const JsonObject root(doc);
  root.require_schema("perfcast.plan", 1);
  ShardingPlan plan;
  plan.source = doc.file;
  if (auto ws = root.find("world_size")) {
    const auto n = ws->as_integer(1, 1 << 20);
    if (n != world_size) ws->fail(fmt::format("the plan is for {} ranks, the system has {}", n, world_size));
  }
  const JsonObject tables = root.object("tables");
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < w.tables.size(); ++i) index[w.tables[i].name] = i;
  plan.tables.resize(w.tables.size());
  std::vector<bool> seen(w.tables.size(), false);
  std::vector<std::string> names;
  for (const auto& t : w.tables) names.push_back(t.name);

  for (const auto& name : tables.keys()) {
    const auto it = index.find(name);
    if (it == index.end()) {
      std::string msg = fmt::format("the workload has no table \"{}\"", name);
      const std::string guess = closest_match(name, names);
      if (!guess.empty()) msg += fmt::format(" (did you mean \"{}\"?)", guess);
      tables.fail(name, msg);
    }
    const EmbeddingTableSpec& spec = w.tables[it->second];
    const JsonObject t = tables.object(name);
    TableSharding ts;
    ts.type = *sharding_type_from_name(t.at("sharding_type").as_enum(
        {"data_parallel", "table_wise", "row_wise", "column_wise", "table_row_wise", "table_column_wise", "grid", "hybrid"}));
    require_sequence_sharding(t, spec, ts.type);
    parse_compute_kernel(t, ts);
    parse_output_dtype(t, ts);
    const JsonArray ranks = t.array("ranks");
    ranks.require_size(1, static_cast<std::size_t>(world_size));
    std::set<int> unique_ranks;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const int r = static_cast<int>(ranks[i].as_integer(0, world_size - 1));
      ts.ranks.push_back(r);
      unique_ranks.insert(r);
    }
    if (ts.type == ShardingType::kTableWise && ts.ranks.size() != 1) ranks.fail("table_wise needs exactly one rank");
    if (ts.type == ShardingType::kHybrid) {
      if (static_cast<int>(unique_ranks.size()) != world_size || unique_ranks.size() != ts.ranks.size())
        ranks.fail(fmt::format("a hybrid table's frequent rows live on every rank; list all {} ranks once", world_size));
      if (t.find("sharding_spec")) t.fail("sharding_spec", "a hybrid table takes no sharding_spec: its infrequent rows are split evenly over its ranks");
      if (spec.rows <= world_size) ranks.fail(fmt::format("{} rows cannot keep an infrequent row on each of {} ranks", spec.rows, world_size));
      const std::int64_t frequent = t.find("frequent_rows") ? t.at("frequent_rows").as_integer(0, spec.rows - world_size)
                                                             : hybrid_frequent_rows(spec, w.batch_size, world_size);
      TableSharding hybrid = hybrid_sharding(spec, world_size, frequent);
      hybrid.storage = ts.storage;
      hybrid.output_dtype = ts.output_dtype;
      hybrid.output_bytes = ts.output_bytes;
      if (ts.storage != EmbeddingStorage::kHbm) t.fail("compute_kernel", "a hybrid table is in HBM (compute_kernel fused)");
      t.finish();
      plan.tables[it->second] = hybrid;
      seen[it->second] = true;
      continue;
    }
    if (t.find("frequent_rows")) t.fail("frequent_rows", "frequent_rows belongs to hybrid tables");
    const bool columns_only = ts.type == ShardingType::kColumnWise || ts.type == ShardingType::kTableColumnWise;
    if (!columns_only && ts.type != ShardingType::kGrid && unique_ranks.size() != ts.ranks.size()) ranks.fail("ranks repeat");

    if (auto spec_v = t.find("sharding_spec")) {
      const JsonArray shards = spec_v->as_array();
      shards.require_size(1, 1 << 16);
      for (std::size_t i = 0; i < shards.size(); ++i) {
        const JsonObject s = shards[i].as_object();
        const JsonArray off = s.array("shard_offsets");
        const JsonArray size = s.array("shard_sizes");
        off.require_size(2, 2);
        size.require_size(2, 2);
        Shard sh;
        sh.row_offset = off[0].as_integer(0, spec.rows - 1);
        sh.col_offset = off[1].as_integer(0, spec.dim - 1);
        sh.rows = size[0].as_integer(1, spec.rows - sh.row_offset);
        sh.cols = size[1].as_integer(1, spec.dim - sh.col_offset);
        sh.rank = parse_placement(s.at("placement"), world_size);
        s.finish();
        ts.shards.push_back(sh);
      }
      for (std::size_t i = 0; i < ts.shards.size(); ++i) {
        if (!unique_ranks.count(ts.shards[i].rank)) {
          shards[i].as_object().fail("placement", fmt::format("rank {} is not among the table's \"ranks\"", ts.shards[i].rank));
        }
      }
      if (const std::string layout = shard_layout_error(ts, spec, gpus_per_node); !layout.empty()) spec_v->fail(layout);
    } else {
      switch (ts.type) {
        case ShardingType::kDataParallel:
        case ShardingType::kTableWise:
          for (int r : ts.ranks) ts.shards.push_back(Shard{0, spec.rows, 0, spec.dim, r});
          break;
        case ShardingType::kGrid:
          t.fail("sharding_spec", "a grid table needs a sharding_spec (its column blocks and their row shards)");
        case ShardingType::kHybrid:  // read above
          break;
        case ShardingType::kRowWise:
        case ShardingType::kTableRowWise: {
          const auto parts = even_split(spec.rows, ts.ranks.size());
          std::int64_t off = 0;
          for (std::size_t i = 0; i < parts.size(); ++i) {
            ts.shards.push_back(Shard{off, parts[i], 0, spec.dim, ts.ranks[i]});
            off += parts[i];
          }
          break;
        }
        case ShardingType::kColumnWise:
        case ShardingType::kTableColumnWise: {
          const auto parts = even_split(spec.dim, ts.ranks.size());
          std::int64_t off = 0;
          for (std::size_t i = 0; i < parts.size(); ++i) {
            ts.shards.push_back(Shard{0, spec.rows, off, parts[i], ts.ranks[i]});
            off += parts[i];
          }
          break;
        }
      }
      if (ts.type == ShardingType::kRowWise || ts.type == ShardingType::kTableRowWise) {
        if (spec.rows < static_cast<std::int64_t>(ts.ranks.size())) {
          ranks.fail(fmt::format("{} rows cannot be split over {} ranks", spec.rows, ts.ranks.size()));
        }
      }
      if (columns_only && spec.dim < static_cast<std::int64_t>(ts.ranks.size())) {
        ranks.fail(fmt::format("{} columns cannot be split over {} ranks", spec.dim, ts.ranks.size()));
      }
      const std::string shape = shape_error(ts, gpus_per_node);
      if (!shape.empty()) ranks.fail(shape);
    }
    if (ts.type == ShardingType::kDataParallel && static_cast<int>(unique_ranks.size()) != world_size) {
      ranks.fail(fmt::format("data_parallel tables live on every rank; list all {} ranks", world_size));
    }
    t.finish();
    plan.tables[it->second] = ts;
    seen[it->second] = true;
  }
  for (std::size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) tables.fail(w.tables[i].name, "missing: every workload table needs a sharding");
  }
  root.finish();
  return plan;
}

}  // namespace perfcast
