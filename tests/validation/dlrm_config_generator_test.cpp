#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "model/graph/memory_estimate.hpp"
#include "model/graph/workload_spec.hpp"
#include "topology/system_spec.hpp"
#include "validation/dlrm_config_generator.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_validation_dlrm_config_generator_test {

using namespace perfcast;
using namespace perfcast::validation;

namespace {

const std::filesystem::path kSystems = std::filesystem::path(PERFCAST_SOURCE_DIR) / "configs" / "systems";

SystemSpec system_with_memory(const std::string& file, const std::string& memory) {
  JsonDocument doc = load_json_file(kSystems / file);
  doc.root["gpu"]["memory"] = memory;
  return parse_system(doc);
}

}  // namespace

TEST_CASE("portable random numbers: fixed by the standard's mt19937_64", "[validation]") {
  // The C++ standard fixes mt19937_64's 10000th output for the default seed 5489:
  // 9981545732273789042 ([rand.predef]); uniform() keeps its top 53 bits.
  std::mt19937_64 ref;
  ref.discard(9999);
  CHECK(ref() == 9981545732273789042ULL);
  PortableRandom r(5489);
  const double u = r.uniform();
  std::mt19937_64 first(5489);
  CHECK(u == static_cast<double>(first() >> 11) / 9007199254740992.0);
  for (int i = 0; i < 1000; ++i) {
    const auto x = r.integer(-3, 3);
    CHECK(x >= -3);
    CHECK(x <= 3);
  }
  CHECK(r.integer(7, 7) == 7);
  CHECK_THROWS(r.integer(2, 1));
  CHECK(mix_seed(0) == 0xE220A8397B1DCDAFULL);  // SplitMix64's first output for state 0
}

TEST_CASE("config generator: deterministic per seed and index", "[validation]") {
  const SystemSpec s = load_system(kSystems / "h100_sxm.json");
  const auto a = generate_dlrm_config(s, 7, 3);
  const auto b = generate_dlrm_config(s, 7, 3);
  CHECK(a.workload_json.dump() == b.workload_json.dump());
  CHECK(a.attempts == b.attempts);
  CHECK(generate_dlrm_config(s, 7, 4).workload_json.dump() != a.workload_json.dump());
  CHECK(generate_dlrm_config(s, 8, 3).workload_json.dump() != a.workload_json.dump());
  CHECK_THROWS(generate_dlrm_config(s, 7, -1));
}

TEST_CASE("config generator: the reference generator's ranges", "[validation]") {
  const std::set<std::int64_t> dims{32, 64, 128, 256};
  const std::set<std::int64_t> batches{512, 1024, 2048, 4096};
  const std::set<double> light_pooling{1, 2, 3, 5, 6, 7, 8, 9, 10, 12, 27, 100};  // Criteo multi-hot sizes
  for (const auto& [file, gpus] : {std::pair{"h100_sxm.json", 1}, std::pair{"dgx_h100.json", 8}}) {
    const SystemSpec s = load_system(kSystems / file);
    REQUIRE(s.world_size() == gpus);
    const int configs = gpus == 1 ? 24 : 4;
    int heavy = 0;
    std::set<std::string> kinds;
    for (int i = 0; i < configs; ++i) {
      const auto c = generate_dlrm_config(s, 11, i);
      const auto& w = c.spec;
      CHECK(c.heavy == (i % 2 == 0));
      heavy += c.heavy ? 1 : 0;
      // [0.7, 1.3) x 13 x G tables: 9..16 for one GPU, 72..135 for eight.
      CHECK(static_cast<double>(w.tables.size()) >= std::floor(0.7 * 13 * gpus));
      CHECK(static_cast<double>(w.tables.size()) <= std::floor(1.3 * 13 * gpus));
      CHECK(batches.count(w.batch_size) == 1);
      CHECK(w.batch_size % gpus == 0);
      CHECK(w.bottom_mlp == std::vector<std::int64_t>{512, 1024, 256, 128});
      CHECK(w.top_mlp == std::vector<std::int64_t>{1024, 512, 256, 1});
      CHECK(w.interaction == Interaction::kCat);
      for (const auto& t : w.tables) {
        CHECK(dims.count(t.dim) == 1);
        CHECK(t.rows >= 100);
        CHECK(t.rows <= GeneratorOptions{}.max_rows);
        if (c.heavy) {
          CHECK(t.pooling >= 20);
          CHECK(t.pooling <= 128);
        } else {
          CHECK(light_pooling.count(t.pooling) == 1);
        }
        kinds.insert(t.distribution.describe().substr(0, 3));
      }
    }
    CHECK(heavy == configs / 2);
    if (gpus == 1) CHECK(kinds.size() == 3);  // uniform, Zipf and hot-set all drawn
  }
}

TEST_CASE("config generator: dot interaction uses one D per config", "[validation]") {
  const SystemSpec s = load_system(kSystems / "h100_sxm.json");
  GeneratorOptions o;
  o.interaction = Interaction::kDot;
  for (int i = 0; i < 6; ++i) {
    const auto c = generate_dlrm_config(s, 5, i, o);
    CHECK(c.spec.interaction == Interaction::kDot);
    for (const auto& t : c.spec.tables) CHECK(t.dim == c.spec.bottom_mlp.back());
  }
}

TEST_CASE("config generator: the MLP dtype changes nothing but the dtype", "[validation]") {
  const SystemSpec s = load_system(kSystems / "h100_sxm.json");
  GeneratorOptions bf16;
  bf16.mlp_dtype = DType::kBf16;
  for (int i = 0; i < 3; ++i) {
    const auto a = generate_dlrm_config(s, 9, i);
    const auto b = generate_dlrm_config(s, 9, i, bf16);
    CHECK(a.spec.mlp_dtype == DType::kFp32);
    CHECK(b.spec.mlp_dtype == DType::kBf16);
    CHECK(b.workload_json.at("mlp_dtype") == "bf16");
    nlohmann::json ja = a.workload_json, jb = b.workload_json;
    ja.erase("mlp_dtype");
    jb.erase("mlp_dtype");
    CHECK(ja == jb);  // same tables, batch, MLPs, plan input
  }
}

TEST_CASE("config generator: every workload round-trips through parse_workload", "[validation]") {
  const SystemSpec s = load_system(kSystems / "h100_sxm.json");
  const auto dir = std::filesystem::temp_directory_path() / "perfcast_generator_test";
  std::filesystem::create_directories(dir);
  for (int i = 0; i < 8; ++i) {
    const auto c = generate_dlrm_config(s, 3, i);
    const auto path = dir / ("config_" + std::to_string(i) + ".json");
    std::ofstream(path) << c.workload_json.dump(2) << "\n";
    const DlrmSpec back = load_workload(path);
    CHECK(back.name == c.spec.name);
    CHECK(back.batch_size == c.spec.batch_size);
    CHECK(back.bottom_mlp == c.spec.bottom_mlp);
    CHECK(back.top_mlp == c.spec.top_mlp);
    REQUIRE(back.tables.size() == c.spec.tables.size());
    for (std::size_t t = 0; t < back.tables.size(); ++t) {
      CHECK(back.tables[t].name == c.spec.tables[t].name);
      CHECK(back.tables[t].rows == c.spec.tables[t].rows);
      CHECK(back.tables[t].dim == c.spec.tables[t].dim);
      CHECK(back.tables[t].pooling == c.spec.tables[t].pooling);
      CHECK(back.tables[t].distribution == c.spec.tables[t].distribution);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("config generator: the memory cap holds", "[validation]") {
  for (const std::string memory : {"80GB", "8GB", "2GB"}) {
    const SystemSpec s = system_with_memory("h100_sxm.json", memory);
    for (int i = 0; i < 6; ++i) {
      const auto c = generate_dlrm_config(s, 2, i);
      CHECK(c.table_bytes <= 0.8 * s.gpu.memory);
      const auto m = estimate_memory(c.spec, c.plan, s);
      for (const auto& r : m) CHECK(r.fits());
      CHECK(memory_verdict(m).empty());
      CHECK(c.peak_rank_memory <= s.gpu.memory);
      if (memory == "2GB") CHECK(c.table_bytes < 2e9);
    }
  }
  // A GPU too small for the dense model and activations: no draw fits, and it says so.
  GeneratorOptions few;
  few.max_attempts = 5;
  const SystemSpec tiny = system_with_memory("h100_sxm.json", "64MB");
  CHECK_THROWS_WITH(generate_dlrm_config(tiny, 1, 0, few), Catch::Contains("fits") && Catch::Contains("5 draws"));
}

}  // namespace perfcast_test_validation_dlrm_config_generator_test
