// TorchRec-shaped plans (module path -> table -> ParameterSharding): reading, writing,
// round trips through both plan formats for every sharding type, and the refusals.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model/graph/torchrec_plan.hpp"
#include "model/sharding/plan_shapes.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_torchrec_plan_test {

using namespace perfcast;

namespace {

std::string src(const std::string& rel) { return std::string(PERFCAST_SOURCE_DIR) + "/" + rel; }

/// Seven tables of 1000 rows x 16 columns (one per sharding type).
DlrmSpec seven_tables() {
  DlrmSpec w = load_workload(src("configs/workloads/dlrm_default.json"));
  w.tables.clear();
  for (int t = 0; t < 7; ++t) w.tables.push_back({"t" + std::to_string(t), 1000, 16, 10, IndexDistribution::uniform()});
  return w;
}

nlohmann::json shard(std::int64_t row, std::int64_t col, std::int64_t rows, std::int64_t cols, int rank, int local) {
  return {{"shard_offsets", {row, col}}, {"shard_sizes", {rows, cols}},
          {"placement", "rank:" + std::to_string(rank) + "/cuda:" + std::to_string(local)}};
}

/// `shards` as a vector: a braced list of one json would otherwise be taken as that json itself
/// by some compilers (clang), not as an array of one.
nlohmann::json sharded(const std::string& type, std::vector<int> ranks, const std::vector<nlohmann::json>& shards) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : shards) list.push_back(s);
  return {{"sharding_type", type}, {"compute_kernel", "fused"}, {"ranks", ranks}, {"sharding_spec", {{"shards", list}}}};
}

/// Hand-written, 4 ranks on 2 nodes of 2 GPUs, every TorchRec sharding type; t1 is
/// fused_uvm_caching (load factor 0.35) and t3 fused_uvm.
nlohmann::json every_type_plan() {
  nlohmann::json tables = {
      {"t0", {{"sharding_type", "data_parallel"}, {"compute_kernel", "dense"}, {"ranks", {0, 1, 2, 3}}, {"sharding_spec", nullptr}}},
      {"t1", sharded("table_wise", {3}, {shard(0, 0, 1000, 16, 3, 1)})},
      {"t2", sharded("row_wise", {0, 1, 2, 3},
                     {shard(0, 0, 250, 16, 0, 0), shard(250, 0, 250, 16, 1, 1), shard(500, 0, 250, 16, 2, 0),
                      shard(750, 0, 250, 16, 3, 1)})},
      {"t3", sharded("column_wise", {1, 2}, {shard(0, 0, 1000, 8, 1, 1), shard(0, 8, 1000, 8, 2, 0)})},
      {"t4", sharded("table_row_wise", {2, 3}, {shard(0, 0, 600, 16, 2, 0), shard(600, 0, 400, 16, 3, 1)})},
      {"t5", sharded("table_column_wise", {0, 1}, {shard(0, 0, 1000, 4, 0, 0), shard(0, 4, 1000, 12, 1, 1)})},
      {"t6", sharded("grid_shard", {0, 1, 2, 3},
                     {shard(0, 0, 400, 8, 0, 0), shard(400, 0, 600, 8, 1, 1), shard(0, 8, 500, 8, 2, 0),
                      shard(500, 8, 500, 8, 3, 1)})}};
  tables["t1"]["compute_kernel"] = "fused_uvm_caching";
  tables["t1"]["cache_params"] = {{"algorithm", "CacheAlgorithm.LRU"}, {"load_factor", 0.35}, {"reserved_memory", nullptr}};
  tables["t3"]["compute_kernel"] = "fused_uvm";
  return {{"sparse_arch.embedding_bag_collection", tables}};
}

void require_same(const ShardingPlan& a, const ShardingPlan& b) {
  REQUIRE(a.tables.size() == b.tables.size());
  for (std::size_t t = 0; t < a.tables.size(); ++t) {
    INFO("table " << t);
    REQUIRE(a.tables[t].type == b.tables[t].type);
    REQUIRE(table_sharding_hash(a.tables[t]) == table_sharding_hash(b.tables[t]));
  }
}

}  // namespace

TEST_CASE("a hand-written TorchRec plan of every sharding type is read", "[plan][torchrec]") {
  const DlrmSpec w = seven_tables();
  const JsonDocument doc{every_type_plan(), "torchrec_plan.json"};
  REQUIRE(is_torchrec_plan(doc));
  const ShardingPlan p = parse_plan(doc, w, 4, 2);
  REQUIRE(p.tables[0].type == ShardingType::kDataParallel);
  REQUIRE(p.tables[0].shards.size() == 4);
  REQUIRE(p.tables[1].type == ShardingType::kTableWise);
  REQUIRE(p.tables[1].shards[0].rank == 3);
  REQUIRE(p.tables[1].storage == EmbeddingStorage::kHostUvmCaching);
  REQUIRE(p.tables[1].cache_load_factor == 0.35);
  REQUIRE(p.tables[3].storage == EmbeddingStorage::kHostUvm);
  REQUIRE(p.tables[2].storage == EmbeddingStorage::kHbm);
  REQUIRE(p.tables[2].type == ShardingType::kRowWise);
  REQUIRE(p.tables[2].shards[3].row_offset == 750);
  REQUIRE(p.tables[3].type == ShardingType::kColumnWise);
  REQUIRE(p.tables[3].shards[1].col_offset == 8);
  REQUIRE(p.tables[4].type == ShardingType::kTableRowWise);
  REQUIRE(p.tables[4].shards[1].rows == 400);
  REQUIRE(p.tables[5].type == ShardingType::kTableColumnWise);
  REQUIRE(p.tables[5].shards[1].cols == 12);
  REQUIRE(p.tables[6].type == ShardingType::kGrid);
  REQUIRE(p.tables[6].shards.size() == 4);
  REQUIRE(p.tables[6].shards[2].col_offset == 8);
  REQUIRE(p.tables[6].shards[2].rows == 500);
}

TEST_CASE("plans round-trip through TorchRec's shape and perfcast's flat format", "[plan][torchrec]") {
  const DlrmSpec w = seven_tables();
  const ShardingPlan original = parse_plan(JsonDocument{every_type_plan(), "torchrec_plan.json"}, w, 4, 2);

  const std::string torchrec_text = plan_to_torchrec_json(original, w, 2);
  const nlohmann::json written = nlohmann::json::parse(torchrec_text);
  REQUIRE(written.contains("sparse_arch.embedding_bag_collection"));
  const auto& t6 = written["sparse_arch.embedding_bag_collection"]["t6"];
  REQUIRE(t6["sharding_type"] == "grid_shard");
  REQUIRE(t6["sharding_spec"]["shards"].size() == 4);
  const auto& t0 = written["sparse_arch.embedding_bag_collection"]["t0"];
  REQUIRE(t0["compute_kernel"] == "dense");
  REQUIRE(t0["sharding_spec"].is_null());
  REQUIRE(written["sparse_arch.embedding_bag_collection"]["t1"]["sharding_spec"]["shards"][0]["placement"] == "rank:3/cuda:1");
  REQUIRE(written["sparse_arch.embedding_bag_collection"]["t1"]["compute_kernel"] == "fused_uvm_caching");
  REQUIRE(written["sparse_arch.embedding_bag_collection"]["t1"]["cache_params"]["load_factor"] == 0.35);
  REQUIRE(written["sparse_arch.embedding_bag_collection"]["t3"]["compute_kernel"] == "fused_uvm");
  require_same(original, parse_plan(JsonDocument{written, "written.json"}, w, 4, 2));

  // perfcast's flat format stays readable and carries the same plan.
  const nlohmann::json flat = nlohmann::json::parse(plan_to_json(original, w, 4, 2));
  REQUIRE(flat["schema"] == "perfcast.plan");
  REQUIRE_FALSE(is_torchrec_plan(JsonDocument{flat, "flat.json"}));
  const ShardingPlan from_flat = parse_plan(JsonDocument{flat, "flat.json"}, w, 4, 2);
  require_same(original, from_flat);
  require_same(original, parse_plan(JsonDocument{nlohmann::json::parse(plan_to_torchrec_json(from_flat, w, 2, "ebc")), "x"}, w, 4, 2));
}

TEST_CASE("tables may be spread over several TorchRec modules", "[plan][torchrec]") {
  const DlrmSpec w = seven_tables();
  nlohmann::json j = every_type_plan();
  nlohmann::json& tables = j["sparse_arch.embedding_bag_collection"];
  j["other.ebc"] = {{"t6", tables["t6"]}};
  tables.erase("t6");
  const ShardingPlan p = parse_plan(JsonDocument{j, "two_modules.json"}, w, 4, 2);
  REQUIRE(p.tables[6].type == ShardingType::kGrid);
}

TEST_CASE("TorchRec plans perfcast cannot honour are refused with the JSON path", "[plan][torchrec]") {
  const DlrmSpec w = seven_tables();
  auto error_of = [&](const nlohmann::json& j) {
    try {
      (void)parse_plan(JsonDocument{j, "bad.json"}, w, 4, 2);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string m = "/sparse_arch.embedding_bag_collection";
  nlohmann::json j = every_type_plan();
  j["sparse_arch.embedding_bag_collection"]["t1"]["compute_kernel"] = "quant_uvm_caching";
  CHECK_THAT(error_of(j), Catch::Contains(m + "/t1/compute_kernel") && Catch::Contains("not modelled"));
  j = every_type_plan();
  j["sparse_arch.embedding_bag_collection"]["t0"]["compute_kernel"] = "fused_uvm";
  CHECK_THAT(error_of(j), Catch::Contains(m + "/t0/compute_kernel") && Catch::Contains("data_parallel"));

  j = every_type_plan();
  j["sparse_arch.embedding_bag_collection"]["t1"]["sharding_spec"]["shards"][0]["placement"] = "rank:3/cuda:3";
  CHECK_THAT(error_of(j), Catch::Contains("placement") && Catch::Contains("cuda:1"));

  j = every_type_plan();
  j["sparse_arch.embedding_bag_collection"]["t4"]["sharding_spec"]["shards"][1]["placement"] = "rank:0/cuda:0";
  j["sparse_arch.embedding_bag_collection"]["t4"]["ranks"] = {2, 0};
  CHECK_THAT(error_of(j), Catch::Contains(m + "/t4/sharding_spec") && Catch::Contains("one node"));

  j = every_type_plan();
  j["sparse_arch.embedding_bag_collection"]["t2"]["sharding_spec"]["shards"][3]["shard_sizes"] = {200, 16};
  CHECK_THAT(error_of(j), Catch::Contains("do not tile"));

  j = every_type_plan();
  j["sparse_arch.embedding_bag_collection"]["t0"]["ranks"] = {0, 1};
  CHECK_THAT(error_of(j), Catch::Contains(m + "/t0/ranks"));

  j = every_type_plan();
  j["sparse_arch.embedding_bag_collection"]["t1"]["cache_params"] = {{"algorithm", "LFU"}};
  CHECK_THAT(error_of(j), Catch::Contains(m + "/t1/cache_params/algorithm") && Catch::Contains("not modelled"));
  j["sparse_arch.embedding_bag_collection"]["t1"]["cache_params"] = {{"reserved_memory", 2.0}};
  CHECK(error_of(j) == "no error");  // recorded, not modelled
  j["sparse_arch.embedding_bag_collection"]["t1"]["cache_params"] = {{"reserved_memory", 2.0}, {"hit_rate", 0.9}};
  CHECK_THAT(error_of(j), Catch::Contains(m + "/t1/cache_params/hit_rate") && Catch::Contains("not a TorchRec CacheParams field"));
  j["sparse_arch.embedding_bag_collection"]["t1"]["cache_params"] = {{"load_factor", 1.5}};
  CHECK_THAT(error_of(j), Catch::Contains(m + "/t1/cache_params/load_factor"));

  j = every_type_plan();
  j["sparse_arch.embedding_bag_collection"]["t1"]["cache_params"] = nullptr;
  CHECK(error_of(j) == "no error");

  j = every_type_plan();
  j["sparse_arch.embedding_bag_collection"].erase("t5");
  CHECK_THAT(error_of(j), Catch::Contains("\"t5\" is missing"));

  j = every_type_plan();
  j["other.ebc"] = {{"t1", j["sparse_arch.embedding_bag_collection"]["t1"]}};
  // Modules are read in key order (nlohmann::json sorts them): the second t1 is the error.
  CHECK_THAT(error_of(j), Catch::Contains(m + "/t1: table \"t1\" is also sharded under module \"other.ebc\""));
}

TEST_CASE("perfcast's flat format reads the host-memory kernels and refuses those it does not model", "[plan]") {
  const DlrmSpec w = seven_tables();
  nlohmann::json tables = nlohmann::json::object();
  for (int t = 0; t < 7; ++t) tables["t" + std::to_string(t)] = {{"sharding_type", "table_wise"}, {"ranks", {t % 4}}};
  tables["t1"]["compute_kernel"] = "fused_uvm_caching";  // no cache_params: FBGEMM's default load factor
  tables["t3"]["compute_kernel"] = "fused_uvm";
  const ShardingPlan tiers = parse_plan(JsonDocument{{{"schema", "perfcast.plan"}, {"schema_version", "1.0"}, {"tables", tables}}, "f.json"}, w, 4, 2);
  CHECK(tiers.tables[1].storage == EmbeddingStorage::kHostUvmCaching);
  CHECK(tiers.tables[1].cache_load_factor == kDefaultCacheLoadFactor);
  CHECK(tiers.tables[3].storage == EmbeddingStorage::kHostUvm);
  CHECK(tiers.tables[3].cache_load_factor == 0);
  tables["t2"]["compute_kernel"] = "key_value";
  const nlohmann::json j = {{"schema", "perfcast.plan"}, {"schema_version", "1.0"}, {"tables", tables}};
  try {
    (void)parse_plan(JsonDocument{j, "flat.json"}, w, 4, 2);
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("/tables/t2/compute_kernel") && Catch::Contains("not modelled"));
  }
  tables["t2"]["compute_kernel"] = "fused";
  CHECK(parse_plan(JsonDocument{{{"schema", "perfcast.plan"}, {"schema_version", "1.0"}, {"tables", tables}}, "flat.json"}, w, 4, 2)
            .tables[2].type == ShardingType::kTableWise);
}

TEST_CASE("ShardingPlan._serialize()'s output is read, and the fields perfcast does not model are recorded",
          "[plan][torchrec]") {
  // Written as TorchRec's ShardingPlan._serialize() writes it (torchrec/distributed/types.py,
  // pytorch/torchrec @ a48cef79): {"plan": {module: {table: {sharding_type, compute_kernel,
  // ranks, shards}}}}, shards beside the other fields, no spec for data_parallel. A 100 x 64
  // table row-wise over 2 ranks and a 10 x 8 table data-parallel.
  DlrmSpec w = load_workload(src("configs/workloads/dlrm_default.json"));
  w.tables = {{"t_rw", 100, 64, 10, IndexDistribution::uniform()}, {"t_dp", 10, 8, 10, IndexDistribution::uniform()}};
  const nlohmann::json serialized = nlohmann::json::parse(R"({"plan": {"sparse_arch.embedding_bag_collection": {
    "t_rw": {"sharding_type": "row_wise", "compute_kernel": "fused", "ranks": [0, 1],
             "shards": [{"shard_offsets": [0, 0], "shard_sizes": [50, 64], "placement": "rank:0/cuda:0"},
                        {"shard_offsets": [50, 0], "shard_sizes": [50, 64], "placement": "rank:1/cuda:1"}]},
    "t_dp": {"sharding_type": "data_parallel", "compute_kernel": "dense", "ranks": [0, 1]}}}})");
  const ShardingPlan p = parse_plan(JsonDocument{serialized, "serialized.json"}, w, 2, 2);
  REQUIRE(p.tables[0].type == ShardingType::kRowWise);
  REQUIRE(p.tables[0].shards.size() == 2);
  CHECK(p.tables[0].shards[1].row_offset == 50);
  CHECK(p.tables[0].shards[1].rank == 1);
  CHECK(p.tables[1].type == ShardingType::kDataParallel);
  CHECK(p.tables[1].shards.size() == 2);
  CHECK_THAT(p.source, Catch::Contains("ShardingPlan._serialize()"));

  auto error_of = [&](const nlohmann::json& j) {
    try {
      const ShardingPlan q = parse_plan(JsonDocument{j, "bad.json"}, w, 2, 2);
      return "no error; source " + q.source;
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
  };
  // The fields TorchRec's planner copies into every ParameterSharding, as TorchRec's and
  // FBGEMM's enums come out of json.dumps (an IntEnum as its integer) or str() of them.
  nlohmann::json j = serialized;
  auto& t = j["plan"]["sparse_arch.embedding_bag_collection"]["t_rw"];
  t["enforce_hbm"] = true;
  t["stochastic_rounding"] = false;
  t["bounds_check_mode"] = 1;
  t["output_dtype"] = "DataType.FP16";
  t["key_value_params"] = nlohmann::json::object();
  CHECK_THAT(error_of(j), Catch::StartsWith("no error") &&
                              Catch::Contains("recorded, not modelled: bounds_check_mode, enforce_hbm, key_value_params, "
                                              "stochastic_rounding"));
  // output_dtype is modelled: the pooled output's bytes per element (FP32 when not given).
  CHECK(parse_plan(JsonDocument{j, "o.json"}, w, 2, 2).tables[0].output_bytes == 2);
  CHECK(p.tables[0].output_bytes == 4);
  t["output_dtype"] = "BF16";
  CHECK(parse_plan(JsonDocument{j, "o.json"}, w, 2, 2).tables[0].output_bytes == 2);
  t["output_dtype"] = "DataType.FP32";
  CHECK(parse_plan(JsonDocument{j, "o.json"}, w, 2, 2).tables[0].output_bytes == 4);
  t["bounds_check_mode"] = "BoundsCheckMode.LOUD";
  CHECK_THAT(error_of(j), Catch::Contains("/plan/sparse_arch.embedding_bag_collection/t_rw/bounds_check_mode") &&
                              Catch::Contains("FATAL, WARNING, IGNORE"));
  t["bounds_check_mode"] = 7;
  CHECK_THAT(error_of(j), Catch::Contains("t_rw/bounds_check_mode"));
  t["bounds_check_mode"] = "WARNING";
  t["output_dtype"] = "FP12";
  CHECK_THAT(error_of(j), Catch::Contains("t_rw/output_dtype") && Catch::Contains("NFP8"));
  t["output_dtype"] = nullptr;
  t["sharding_spec"] = {{"shards", t["shards"]}};
  CHECK_THAT(error_of(j), Catch::Contains("t_rw/shards") && Catch::Contains("give the shards once"));
  t.erase("sharding_spec");
  j["plan"]["sparse_arch.embedding_bag_collection"]["t_dp"]["shards"] = t["shards"];
  CHECK_THAT(error_of(j), Catch::Contains("t_dp/shards") && Catch::Contains("data_parallel"));

  // A module literally named "plan" is still a module (its tables hold strings, not objects).
  nlohmann::json module_named_plan = {{"plan", serialized["plan"]["sparse_arch.embedding_bag_collection"]}};
  const ShardingPlan q = parse_plan(JsonDocument{module_named_plan, "m.json"}, w, 2, 2);
  CHECK(q.tables[0].type == ShardingType::kRowWise);
  CHECK_THAT(q.source, !Catch::Contains("_serialize"));
}

TEST_CASE("TorchRec plans are written with CacheAlgorithm's member name and the module path asked for", "[plan][torchrec]") {
  const DlrmSpec w = seven_tables();
  ShardingPlan p = parse_plan(JsonDocument{every_type_plan(), "every.json"}, w, 4, 2);
  p.torchrec.reset();  // a plan perfcast made (one read from TorchRec keeps its own spelling)
  const nlohmann::json out = nlohmann::json::parse(plan_to_torchrec_json(p, w, 2, "model.sparse.ebc"));
  REQUIRE(out.contains("model.sparse.ebc"));
  CHECK(out["model.sparse.ebc"]["t1"]["cache_params"]["algorithm"] == "LRU");
  CHECK(out["model.sparse.ebc"]["t1"]["cache_params"]["load_factor"] == Approx(0.35));
}

namespace {

/// every_type_plan() as dataclasses.asdict(ParameterSharding) gives it with TorchRec @ a48cef79
/// (torchrec/distributed/types.py: every field, None as null; CacheParams' seven fields;
/// ShardMetadata's bucket_id_offset and num_buckets; enums as json.dumps(default=str) writes
/// them), split over two modules, with some of the planner's fields set.
nlohmann::json asdict_fixture() {
  const nlohmann::json every = every_type_plan()["sparse_arch.embedding_bag_collection"];
  nlohmann::json modules = nlohmann::json::object();
  for (const auto& [name, given] : every.items()) {
    nlohmann::json t = given;
    for (const char* key : {"cache_params", "enforce_hbm", "stochastic_rounding", "bounds_check_mode", "output_dtype", "key_value_params"})
      if (!t.contains(key)) t[key] = nullptr;
    if (t["sharding_spec"].is_object())
      for (auto& sh : t["sharding_spec"]["shards"]) sh.update({{"bucket_id_offset", nullptr}, {"num_buckets", nullptr}});
    const bool first = name < "t4";
    modules[first ? "model.sparse.ebc_a" : "model.sparse.ebc_b"][name] = t;
  }
  auto& t1 = modules["model.sparse.ebc_a"]["t1"];
  t1["cache_params"] = {{"algorithm", "CacheAlgorithm.LRU"}, {"load_factor", 0.35}, {"reserved_memory", nullptr},
                        {"precision", "DataType.FP32"}, {"prefetch_pipeline", false}, {"stats", nullptr},
                        {"multipass_prefetch_config", nullptr}};
  auto& t2 = modules["model.sparse.ebc_a"]["t2"];
  t2["enforce_hbm"] = true;
  t2["bounds_check_mode"] = 1;
  t2["output_dtype"] = "DataType.FP16";
  t2["stochastic_rounding"] = false;
  return modules;
}

/// The same plan as ShardingPlan._serialize() gives it (torchrec/distributed/types.py: per
/// table sharding_type, compute_kernel, ranks, and "shards" (asdict of each ShardMetadata,
/// placement as str) when there is an EnumerableShardingSpec; nothing else).
nlohmann::json serialized_fixture() {
  nlohmann::json modules = asdict_fixture();
  for (auto& [module, tables] : modules.items()) {
    for (auto& [name, t] : tables.items()) {
      nlohmann::json out = {{"sharding_type", t["sharding_type"]}, {"compute_kernel", t["compute_kernel"]}, {"ranks", t["ranks"]}};
      if (t["sharding_spec"].is_object()) out["shards"] = t["sharding_spec"]["shards"];
      t = out;
    }
  }
  return {{"plan", modules}};
}

nlohmann::json written(const ShardingPlan& p, const DlrmSpec& w, TorchrecShape shape, const std::string& module = "") {
  TorchrecWriteOptions o;
  o.shape = shape;
  o.module_path = module;
  return nlohmann::json::parse(plan_to_torchrec_json(p, w, 2, o));
}

}  // namespace

TEST_CASE("TorchRec plans round-trip to the same JSON in both of TorchRec's shapes, modules kept or chosen", "[plan][torchrec]") {
  const DlrmSpec w = seven_tables();
  const nlohmann::json asdict = asdict_fixture();
  const nlohmann::json serialized = serialized_fixture();
  const ShardingPlan a = parse_plan(JsonDocument{asdict, "asdict.json"}, w, 4, 2);
  const ShardingPlan s = parse_plan(JsonDocument{serialized, "serialized.json"}, w, 4, 2);
  REQUIRE(a.torchrec);
  CHECK_FALSE(a.torchrec->serialized);
  CHECK(a.torchrec->modules[0] == "model.sparse.ebc_a");
  CHECK(a.torchrec->modules[6] == "model.sparse.ebc_b");
  CHECK(a.tables[1].cache_load_factor == Approx(0.35));
  CHECK(s.tables[1].cache_load_factor == Approx(kDefaultCacheLoadFactor));  // _serialize() drops cache_params

  // Read and written back in the shape read: the same JSON value.
  CHECK(written(a, w, TorchrecShape::kAsRead) == asdict);
  CHECK(written(s, w, TorchrecShape::kAsRead) == serialized);
  // Across shapes: asdict -> _serialize() is what TorchRec's _serialize() gives for the plan,
  // except that the caching table keeps its cache_params (its load factor changes the time).
  nlohmann::json expected = serialized;
  expected["plan"]["model.sparse.ebc_a"]["t1"]["cache_params"] = asdict["model.sparse.ebc_a"]["t1"]["cache_params"];
  CHECK(written(a, w, TorchrecShape::kSerialize) == expected);
  // ... and _serialize() -> asdict reads back to the same plan.
  const nlohmann::json back = written(s, w, TorchrecShape::kAsdict);
  require_same(parse_plan(JsonDocument{back, "back.json"}, w, 4, 2), s);

  // A module path of the user's choice: every table under it, the fields unchanged.
  const nlohmann::json moved = written(a, w, TorchrecShape::kAsRead, "my_model.sparse.ebc");
  REQUIRE(moved.size() == 1);
  nlohmann::json merged = asdict["model.sparse.ebc_a"];
  merged.update(asdict["model.sparse.ebc_b"]);
  CHECK(moved["my_model.sparse.ebc"] == merged);

  // Bucket-wise shards (bucket_id_offset, num_buckets set) are recorded and written back.
  nlohmann::json buckets = asdict;
  buckets["model.sparse.ebc_a"]["t2"]["sharding_spec"]["shards"][1].update({{"bucket_id_offset", 4}, {"num_buckets", 4}});
  const ShardingPlan b = parse_plan(JsonDocument{buckets, "b.json"}, w, 4, 2);
  CHECK_THAT(b.source, Catch::Contains("shards/bucket_id_offset") && Catch::Contains("shards/num_buckets"));
  CHECK(written(b, w, TorchrecShape::kAsRead) == buckets);
  buckets["model.sparse.ebc_a"]["t2"]["sharding_spec"]["shards"][1]["num_buckets"] = -1;
  CHECK_THROWS_WITH(parse_plan(JsonDocument{buckets, "b.json"}, w, 4, 2), Catch::Contains("shards/1/num_buckets"));

  // A load factor the model changed is written; the rest of cache_params stays as given.
  ShardingPlan changed = a;
  changed.tables[1].cache_load_factor = 0.5;
  const nlohmann::json c = written(changed, w, TorchrecShape::kAsRead);
  CHECK(c["model.sparse.ebc_a"]["t1"]["cache_params"]["load_factor"] == Approx(0.5));
  CHECK(c["model.sparse.ebc_a"]["t1"]["cache_params"]["precision"] == "DataType.FP32");
}

}  // namespace perfcast_test_model_torchrec_plan_test
