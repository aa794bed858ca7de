#include "model/sharding_plan.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

namespace perfcast {

std::string_view sharding_type_name(ShardingType t) {
  switch (t) {
    case ShardingType::kDataParallel: return "data_parallel";
    case ShardingType::kTableWise: return "table_wise";
    case ShardingType::kRowWise: return "row_wise";
    case ShardingType::kColumnWise: return "column_wise";
  }
  return "?";
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

namespace {

/// Even split of `total` into `parts` (the first ones one larger).
std::vector<std::int64_t> even_split(std::int64_t total, std::size_t parts) {
  std::vector<std::int64_t> out(parts, total / static_cast<std::int64_t>(parts));
  for (std::size_t i = 0; i < static_cast<std::size_t>(total % static_cast<std::int64_t>(parts)); ++i) out[i]++;
  return out;
}

int parse_placement(const JsonValue& v, int world_size) {
  const std::string s = v.as_string();
  int rank = -1, local = -1;
  if (std::sscanf(s.c_str(), "rank:%d/cuda:%d", &rank, &local) != 2 || rank < 0) {
    v.fail(fmt::format("expected a placement such as \"rank:3/cuda:3\", got \"{}\"", s));
  }
  if (rank >= world_size) v.fail(fmt::format("rank {} does not exist (the system has {} ranks)", rank, world_size));
  return rank;
}

}  // namespace

ShardingPlan parse_plan(const JsonDocument& doc, const DlrmSpec& w, int world_size) {
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
    const std::string type = t.at("sharding_type").as_enum(
        {"data_parallel", "table_wise", "row_wise", "column_wise", "table_row_wise", "table_column_wise", "grid"});
    if (type == "table_row_wise" || type == "table_column_wise" || type == "grid") {
      t.fail("sharding_type", fmt::format("\"{}\" is read but not simulated yet; use data_parallel, table_wise, "
                                          "row_wise or column_wise", type));
    }
    ts.type = type == "data_parallel" ? ShardingType::kDataParallel
              : type == "table_wise"  ? ShardingType::kTableWise
              : type == "row_wise"    ? ShardingType::kRowWise
                                      : ShardingType::kColumnWise;
    [[maybe_unused]] const std::string kernel = t.enum_or("compute_kernel", {"fused", "dense", "fused_uvm_caching", "quant"}, "fused");
    const JsonArray ranks = t.array("ranks");
    ranks.require_size(1, static_cast<std::size_t>(world_size));
    std::set<int> unique_ranks;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const int r = static_cast<int>(ranks[i].as_integer(0, world_size - 1));
      ts.ranks.push_back(r);
      unique_ranks.insert(r);
    }
    if (ts.type == ShardingType::kTableWise && ts.ranks.size() != 1) ranks.fail("table_wise needs exactly one rank");
    if (ts.type != ShardingType::kColumnWise && unique_ranks.size() != ts.ranks.size()) ranks.fail("ranks repeat");

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
      if (ts.type == ShardingType::kDataParallel) {
        // Every rank holds the whole table: one full shard per listed rank.
        std::set<int> placed;
        for (const auto& sh : ts.shards) {
          if (sh.rows != spec.rows || sh.cols != spec.dim) {
            spec_v->fail("a data_parallel shard must cover the whole table");
          }
          placed.insert(sh.rank);
        }
        if (placed != unique_ranks || ts.shards.size() != unique_ranks.size()) {
          spec_v->fail("a data_parallel table needs exactly one shard on each of its ranks");
        }
      }
      double area = 0;
      for (const auto& sh : ts.shards) area += double(sh.rows) * sh.cols;
      const double full = double(spec.rows) * spec.dim;
      if (ts.type != ShardingType::kDataParallel && area != full) {
        spec_v->fail(fmt::format("the shards cover {} of the table's {} x {} = {} elements", area, spec.rows, spec.dim, full));
      }
    } else {
      switch (ts.type) {
        case ShardingType::kDataParallel:
        case ShardingType::kTableWise:
          for (int r : ts.ranks) ts.shards.push_back(Shard{0, spec.rows, 0, spec.dim, r});
          break;
        case ShardingType::kRowWise: {
          const auto parts = even_split(spec.rows, ts.ranks.size());
          std::int64_t off = 0;
          for (std::size_t i = 0; i < parts.size(); ++i) {
            ts.shards.push_back(Shard{off, parts[i], 0, spec.dim, ts.ranks[i]});
            off += parts[i];
          }
          break;
        }
        case ShardingType::kColumnWise: {
          const auto parts = even_split(spec.dim, ts.ranks.size());
          std::int64_t off = 0;
          for (std::size_t i = 0; i < parts.size(); ++i) {
            ts.shards.push_back(Shard{0, spec.rows, off, parts[i], ts.ranks[i]});
            off += parts[i];
          }
          break;
        }
      }
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
