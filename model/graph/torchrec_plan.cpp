#include "model/graph/torchrec_plan.hpp"
#include "core/json_text.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace perfcast {
namespace {

/// TorchRec's ShardingType value of `t` (grid is "grid_shard" there).
std::string torchrec_type_name(ShardingType t) {
  return t == ShardingType::kGrid ? "grid_shard" : std::string(sharding_type_name(t));
}

/// "rank:R/cuda:L" -> R, checking R < world_size and L = R mod gpus_per_node.
int parse_torchrec_placement(const JsonValue& v, int world_size, int gpus_per_node) {
  const std::string s = v.as_string();
  int rank = -1, local = -1;
  char tail = 0;
  if (std::sscanf(s.c_str(), "rank:%d/cuda:%d%c", &rank, &local, &tail) != 2 || rank < 0 || local < 0) {
    v.fail(fmt::format("expected a placement such as \"rank:3/cuda:3\", got \"{}\"", s));
  }
  if (rank >= world_size) v.fail(fmt::format("rank {} does not exist (the system has {} ranks)", rank, world_size));
  if (local != rank % gpus_per_node) {
    v.fail(fmt::format("rank {} is cuda:{} of its node ({} GPUs per node), not cuda:{}", rank, rank % gpus_per_node,
                       gpus_per_node, local));
  }
  return rank;
}

/// `v` as one of TorchRec's enum members, written as the member's name ("WARNING"), its
/// value where that differs (an IntEnum's integer, a string enum's value) or Python's
/// str() of it ("BoundsCheckMode.WARNING"); fails naming the members.
void check_enum(const JsonValue& v, const std::string& enum_name, const std::vector<std::string>& members) {
  if (v.raw().is_number_integer()) {
    (void)v.as_integer(0, static_cast<std::int64_t>(members.size()) - 1);
    return;
  }
  std::string name = v.as_string();
  if (name.rfind(enum_name + ".", 0) == 0) name = name.substr(enum_name.size() + 1);
  if (std::find(members.begin(), members.end(), name) == members.end())
    v.fail(fmt::format("expected a {} ({}), got \"{}\"", enum_name, fmt::join(members, ", "), v.as_string()));
}

/// ParameterSharding fields that change neither time nor memory in perfcast's model, or
/// that it does not model (the storage of key-value tables): checked (types and TorchRec's
/// enum members) and recorded in `recorded`. Enum members: FBGEMM's BoundsCheckMode (an
/// IntEnum, 0-6). output_dtype is modelled (parse_output_dtype, sharding_plan.hpp).
void check_recorded_fields(const JsonObject& t, std::set<std::string>& recorded) {
  const auto present = [&](const char* key) -> std::optional<JsonValue> {
    auto v = t.find(key);
    if (v && v->raw().is_null()) return std::nullopt;
    if (v) recorded.insert(key);
    return v;
  };
  if (auto v = present("enforce_hbm")) (void)v->as_bool();
  if (auto v = present("stochastic_rounding")) (void)v->as_bool();
  if (auto v = present("bounds_check_mode"))
    check_enum(*v, "BoundsCheckMode", {"FATAL", "WARNING", "IGNORE", "NONE", "V2_IGNORE", "V2_WARNING", "V2_FATAL"});
  if (auto v = present("key_value_params")) (void)v->as_object();
}

/// The shards of a table entry: TorchRec's _serialize() writes them as "shards" beside the
/// other fields, ParameterSharding (and dataclasses.asdict) as "sharding_spec": {"shards"}.
/// Returns the array and the value that errors about the layout name; nullopt for none.
std::optional<std::pair<JsonArray, JsonValue>> table_shards(const JsonObject& t) {
  std::optional<JsonValue> flat = t.find("shards");
  if (flat && flat->raw().is_null()) flat.reset();
  std::optional<JsonValue> spec = t.find("sharding_spec");
  if (spec && spec->raw().is_null()) spec.reset();
  if (flat && spec) flat->fail("give the shards once: as \"shards\" (ShardingPlan._serialize) or in \"sharding_spec\"");
  if (flat) return std::make_pair(flat->as_array(), *flat);
  if (!spec) return std::nullopt;
  const JsonObject spec_o = spec->as_object();
  JsonArray shards = spec_o.array("shards");
  spec_o.finish();
  return std::make_pair(shards, *spec);
}

/// ParameterSharding's fields that perfcast models (written from the model on the way back).
bool modelled_field(const std::string& key) {
  return key == "sharding_type" || key == "compute_kernel" || key == "ranks" || key == "shards" || key == "sharding_spec";
}

/// The entry's fields perfcast does not model, as given (so that the plan can be written
/// back unchanged), and "ranks" / "sharding_spec" where they are null. `entry` is the raw
/// object (its keys were checked by the parser).
nlohmann::json unmodelled_fields(const nlohmann::json& entry) {
  nlohmann::json kept = nlohmann::json::object();
  for (const auto& [key, value] : entry.items())
    if (!modelled_field(key) || value.is_null()) kept[key] = value;
  return kept;
}

/// ShardMetadata's fields beyond offsets, sizes and placement (torch.distributed._shard.
/// metadata.ShardMetadata: bucket_id_offset and num_buckets, for bucket-wise sharding,
/// None otherwise): non-negative integers or null, recorded; perfcast does not model buckets.
nlohmann::json shard_extra_fields(const JsonObject& s, std::set<std::string>& recorded) {
  nlohmann::json extra = nlohmann::json::object();
  for (const char* key : {"bucket_id_offset", "num_buckets"}) {
    auto v = s.find(key);
    if (!v) continue;
    if (!v->raw().is_null()) {
      (void)v->as_integer(0, std::int64_t{1} << 40);
      recorded.insert(std::string("shards/") + key);
    }
    extra[key] = v->raw();
  }
  return extra;
}

TableSharding parse_table(const JsonObject& t, const EmbeddingTableSpec& spec, int world_size, int gpus_per_node,
                          std::set<std::string>& recorded, std::vector<nlohmann::json>& shard_extras) {
  TableSharding ts;
  const JsonValue type_v = t.at("sharding_type");
  ts.type = *sharding_type_from_name(type_v.as_enum(
      {"data_parallel", "table_wise", "row_wise", "column_wise", "table_row_wise", "table_column_wise", "grid_shard"}));
  const bool dp = ts.type == ShardingType::kDataParallel;
  require_sequence_sharding(t, spec, ts.type);
  parse_compute_kernel(t, ts);
  check_recorded_fields(t, recorded);
  parse_output_dtype(t, ts);
  std::optional<JsonValue> ranks_v = t.find("ranks");
  if (ranks_v && ranks_v->raw().is_null()) ranks_v.reset();
  if (ranks_v) {
    const JsonArray ranks = ranks_v->as_array();
    ranks.require_size(1, 1 << 20);
    for (std::size_t i = 0; i < ranks.size(); ++i) ts.ranks.push_back(static_cast<int>(ranks[i].as_integer(0, world_size - 1)));
  }
  const auto shards_v = table_shards(t);
  if (dp) {
    if (shards_v) shards_v->second.fail("a data_parallel table has no shards in TorchRec (no sharding_spec)");
    if (ts.ranks.empty()) {
      for (int r = 0; r < world_size; ++r) ts.ranks.push_back(r);
    }
    const std::set<int> unique(ts.ranks.begin(), ts.ranks.end());
    if (static_cast<int>(unique.size()) != world_size || ts.ranks.size() != unique.size()) {
      ranks_v->fail(fmt::format("data_parallel tables live on every rank; list each of the {} ranks once", world_size));
    }
    for (int r : ts.ranks) ts.shards.push_back(Shard{0, spec.rows, 0, spec.dim, r});
    return ts;
  }
  if (!shards_v)
    t.fail("sharding_spec", fmt::format("a {} table needs its shards: \"shards\": [...] (ShardingPlan._serialize) or "
                                        "\"sharding_spec\": {{\"shards\": [...]}}",
                                        torchrec_type_name(ts.type)));
  const JsonArray& shards = shards_v->first;
  const JsonValue& spec_v = shards_v->second;
  shards.require_size(1, 1 << 16);
  std::vector<int> placed;
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
    sh.rank = parse_torchrec_placement(s.at("placement"), world_size, gpus_per_node);
    shard_extras.push_back(shard_extra_fields(s, recorded));
    s.finish();
    ts.shards.push_back(sh);
    placed.push_back(sh.rank);
  }
  // TorchRec's planner writes the shards' ranks in shard order; any order is accepted here.
  if (ts.ranks.empty()) {
    ts.ranks = placed;
  } else {
    std::vector<int> a = ts.ranks, b = placed;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) ranks_v->fail(fmt::format("\"ranks\" must list the shards' placement ranks ({})", fmt::join(placed, ", ")));
  }
  if (const std::string layout = shard_layout_error(ts, spec, gpus_per_node); !layout.empty()) spec_v.fail(layout);
  return ts;
}

}  // namespace

/// True when `root` is ShardingPlan._serialize()'s {"plan": {module: {table: {...}}}}: one
/// key "plan" whose value maps names to objects of objects (a module named "plan" maps
/// table names to ParameterSharding fields, some of which are strings).
bool is_serialized_plan(const nlohmann::json& root) {
  if (!root.is_object() || root.size() != 1 || !root.contains("plan") || !root["plan"].is_object()) return false;
  for (const auto& [module, tables] : root["plan"].items()) {
    if (!tables.is_object()) return false;
    for (const auto& [table, entry] : tables.items())
      if (!entry.is_object()) return false;
  }
  return true;
}

bool is_torchrec_plan(const JsonDocument& doc) {
  return doc.root.is_object() && !doc.root.contains("schema") && !doc.root.contains("tables");
}

ShardingPlan parse_torchrec_plan(const JsonDocument& doc, const DlrmSpec& w, int world_size, int gpus_per_node) {
  if (gpus_per_node <= 0) gpus_per_node = world_size;
  const JsonObject top(doc);
  const bool serialized = is_serialized_plan(doc.root);
  const JsonObject root = serialized ? top.object("plan") : top;
  ShardingPlan plan;
  std::set<std::string> recorded;
  std::map<std::string, std::size_t> index;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < w.tables.size(); ++i) {
    index[w.tables[i].name] = i;
    names.push_back(w.tables[i].name);
  }
  plan.tables.resize(w.tables.size());
  std::vector<std::string> seen_in(w.tables.size());
  TorchrecOrigin origin;
  origin.serialized = serialized;
  origin.recorded.resize(w.tables.size());
  origin.shard_extras.resize(w.tables.size());
  const auto modules = root.keys();
  if (modules.empty()) {
    root.fail("", "expected a TorchRec plan: module paths (e.g. \"sparse_arch.embedding_bag_collection\") mapping table names "
                  "to ParameterSharding fields, or perfcast's own plan (\"schema\": \"perfcast.plan\")");
  }
  for (const auto& module : modules) {
    const JsonObject tables = root.object(module);
    for (const auto& name : tables.keys()) {
      const auto it = index.find(name);
      if (it == index.end()) {
        std::string msg = fmt::format("the workload has no table \"{}\"", name);
        const std::string guess = closest_match(name, names);
        if (!guess.empty()) msg += fmt::format(" (did you mean \"{}\"?)", guess);
        tables.fail(name, msg);
      }
      if (!seen_in[it->second].empty()) {
        tables.fail(name, fmt::format("table \"{}\" is also sharded under module \"{}\"", name, seen_in[it->second]));
      }
      const JsonObject t = tables.object(name);
      std::vector<nlohmann::json> shard_extras;
      plan.tables[it->second] = parse_table(t, w.tables[it->second], world_size, gpus_per_node, recorded, shard_extras);
      t.finish();
      seen_in[it->second] = module;
      origin.recorded[it->second] = unmodelled_fields(tables.at(name).raw());
      origin.shard_extras[it->second] = std::move(shard_extras);
    }
    tables.finish();
  }
  for (std::size_t i = 0; i < seen_in.size(); ++i) {
    if (seen_in[i].empty()) {
      root.fail(modules.front(), fmt::format("table \"{}\" is missing: every workload table needs a sharding", w.tables[i].name));
    }
  }
  root.finish();
  if (serialized) top.finish();  // else root is top, finished above
  origin.modules = seen_in;
  plan.torchrec = std::move(origin);
  plan.source = fmt::format("{} (TorchRec plan{}{})", doc.file, serialized ? ", ShardingPlan._serialize()" : "",
                            recorded.empty() ? "" : fmt::format("; recorded, not modelled: {}", fmt::join(recorded, ", ")));
  return plan;
}

namespace {

/// The cache_params a read plan gave, with load_factor set to the model's where it differs
/// (a default of 0.2 for an absent load_factor counts as the same).
nlohmann::json cache_params_back(const nlohmann::json& given, const TableSharding& ts) {
  nlohmann::json out = given;
  if (ts.storage != EmbeddingStorage::kHostUvmCaching) return out;
  if (!out.is_object()) return {{"algorithm", "LRU"}, {"load_factor", ts.cache_load_factor}};
  const auto lf = out.find("load_factor");
  const double given_lf = lf != out.end() && lf->is_number() ? lf->get<double>() : kDefaultCacheLoadFactor;
  if (given_lf != ts.cache_load_factor) out["load_factor"] = ts.cache_load_factor;
  return out;
}

/// What a read plan recorded for one table (null pointers: a plan perfcast made).
struct RecordedTable {
  const nlohmann::json* fields = nullptr;                     ///< TorchrecOrigin::recorded[t]
  const std::vector<nlohmann::json>* shard_extras = nullptr;  ///< TorchrecOrigin::shard_extras[t]
  bool read_serialized = false;                               ///< the plan was _serialize() output
};

/// One table's ParameterSharding in TorchRec's shape (`serialized`: _serialize()'s, shards
/// beside sharding_type, compute_kernel and ranks; else dataclasses.asdict's, with
/// sharding_spec), with what a read plan recorded written back unchanged. _serialize() keeps
/// no other field; perfcast adds cache_params to a caching table in that shape too (its load
/// factor changes the prediction) unless a read plan had none and the default is in force.
/// Fields recorded from an asdict plan are not written in _serialize()'s shape.
nlohmann::json torchrec_entry(const TableSharding& ts, const std::string& table, int gpus_per_node, bool serialized,
                              const RecordedTable& rec) {
  if (ts.type == ShardingType::kHybrid)
    throw ConfigError("--plan-format", "torchrec",
                      fmt::format("table \"{}\" is sharded hybrid (frequent rows data-parallel, the others model-parallel), "
                                  "which TorchRec's ParameterSharding cannot express; write the perfcast plan format",
                                  table));
  nlohmann::json entry = {{"sharding_type", torchrec_type_name(ts.type)}};
  const bool keep_extras = rec.shard_extras && rec.shard_extras->size() == ts.shards.size();
  if (ts.type == ShardingType::kDataParallel) {
    entry["compute_kernel"] = "dense";
    entry["ranks"] = ts.ranks;
    if (!serialized) entry["sharding_spec"] = nullptr;
  } else {
    nlohmann::json shards = nlohmann::json::array();
    std::vector<int> ranks;
    for (std::size_t k = 0; k < ts.shards.size(); ++k) {
      const Shard& sh = ts.shards[k];
      nlohmann::json one = {{"shard_offsets", {sh.row_offset, sh.col_offset}},
                            {"shard_sizes", {sh.rows, sh.cols}},
                            {"placement", fmt::format("rank:{}/cuda:{}", sh.rank, sh.rank % gpus_per_node)}};
      if (keep_extras) one.update((*rec.shard_extras)[k]);
      shards.push_back(std::move(one));
      ranks.push_back(sh.rank);
    }
    entry["compute_kernel"] = compute_kernel_name(ts);
    const bool caching = ts.storage == EmbeddingStorage::kHostUvmCaching;
    const bool given_default = rec.fields && !rec.fields->contains("cache_params") && ts.cache_load_factor == kDefaultCacheLoadFactor;
    // CacheAlgorithm's member name, which CacheAlgorithm["LRU"] reads back.
    if (caching && !given_default) entry["cache_params"] = {{"algorithm", "LRU"}, {"load_factor", ts.cache_load_factor}};
    entry["ranks"] = ranks;
    if (serialized) entry["shards"] = shards;
    else entry["sharding_spec"] = {{"shards", shards}};
  }
  if (rec.fields && (!serialized || rec.read_serialized)) {
    for (const auto& [key, value] : rec.fields->items()) {
      if (key == "cache_params") entry[key] = cache_params_back(value, ts);
      else if (key == "sharding_spec" && serialized) continue;  // _serialize() writes no spec
      else entry[key] = value;                                  // "ranks" / "sharding_spec" given as null too
    }
  } else if (rec.fields && rec.fields->contains("cache_params") && ts.storage == EmbeddingStorage::kHostUvmCaching) {
    entry["cache_params"] = cache_params_back((*rec.fields)["cache_params"], ts);
  }
  return entry;
}

}  // namespace

std::string plan_to_torchrec_json(const ShardingPlan& p, const DlrmSpec& w, int gpus_per_node, const TorchrecWriteOptions& options) {
  const TorchrecOrigin* origin = p.torchrec && p.torchrec->recorded.size() == p.tables.size() ? &*p.torchrec : nullptr;
  const bool serialized = options.shape == TorchrecShape::kSerialize ||
                          (options.shape == TorchrecShape::kAsRead && origin && origin->serialized);
  nlohmann::json modules = nlohmann::json::object();
  for (std::size_t i = 0; i < p.tables.size(); ++i) {
    const std::string module = !options.module_path.empty() ? options.module_path
                               : origin                     ? origin->modules[i]
                                                            : std::string(kTorchrecDlrmModule);
    RecordedTable rec;
    if (origin) rec = RecordedTable{&origin->recorded[i], &origin->shard_extras[i], origin->serialized};
    modules[module][w.tables[i].name] = torchrec_entry(p.tables[i], w.tables[i].name, gpus_per_node, serialized, rec);
  }
  const nlohmann::json j = serialized ? nlohmann::json{{"plan", modules}} : modules;
  return json_text(j, 2) + "\n";
}

std::string plan_to_torchrec_json(const ShardingPlan& p, const DlrmSpec& w, int gpus_per_node, const std::string& module_path) {
  TorchrecWriteOptions options;
  options.module_path = module_path;
  options.shape = TorchrecShape::kAsdict;
  return plan_to_torchrec_json(p, w, gpus_per_node, options);
}

}  // namespace perfcast
