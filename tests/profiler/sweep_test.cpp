// Sweep files: expansion counts, determinism for a seed, memory caps and strict errors.
#include <catch2/catch.hpp>

#include <set>

#include "profiler/sweep.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_profiler_sweep_test {

using namespace perfcast;
using namespace perfcast::profiler;

namespace {

std::string src(const std::string& rel) { return std::string(PERFCAST_SOURCE_DIR) + "/" + rel; }

JsonDocument doc(const std::string& text) { return JsonDocument{nlohmann::json::parse(text), "test.json"}; }

std::string error_of(const std::string& text) {
  try {
    (void)parse_sweep(doc(text));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

const char* kHeader = R"("schema": "perfcast.sweep", "schema_version": "1.0", "name": "t", )";

}  // namespace

TEST_CASE("the shipped GEMM sweep has >= 5000 shapes from the 33-value list, all dtypes", "[profiler][sweep]") {
  const Sweep s = load_sweep(src("configs/sweeps/gemm.json"));
  CHECK(s.name == "gemm");
  REQUIRE(s.cases.size() >= 5000);
  std::set<std::int64_t> dims;
  std::set<DType> dtypes;
  std::set<std::pair<bool, bool>> transposes;
  std::size_t batched = 0;
  for (const auto& c : s.cases) {
    const auto& g = std::get<GemmDesc>(c.kernel);
    dims.insert(g.m);
    dims.insert(g.n);
    dims.insert(g.k);
    dtypes.insert(g.dtype);
    transposes.insert({c.trans_a, c.trans_b});
    if (g.batch > 1) {
      ++batched;
      CHECK(gemm_bytes(g) <= 2.0 * (1ull << 30));
    } else {
      CHECK(gemm_bytes(g) <= 4.0 * (1ull << 30));
    }
  }
  CHECK(dims.size() == 33);
  CHECK(*dims.begin() == 32);
  CHECK(*dims.rbegin() == 4104);
  CHECK(dims.contains(1024));
  CHECK(dims.contains(1032));
  CHECK(dtypes.size() == 4);
  CHECK(transposes.size() == 4);
  CHECK(batched == 1000);
}

TEST_CASE("sweep expansion is deterministic for a seed and changes with it", "[profiler][sweep]") {
  auto d = load_json_file(src("configs/sweeps/gemm.json"));
  const Sweep a = parse_sweep(d);
  const Sweep b = parse_sweep(d);
  CHECK(a.cases == b.cases);
  d.root["seed"] = 7;
  const Sweep c = parse_sweep(d);
  CHECK(c.cases.size() == a.cases.size());
  CHECK_FALSE(c.cases == a.cases);
  // A fixed point of the sequence: a change to the generator shows up here.
  CHECK(case_label(a.cases[0]) == case_label(parse_sweep(load_json_file(src("configs/sweeps/gemm.json"))).cases[0]));
}

TEST_CASE("the shipped embedding sweep: >= 1000 configurations within the documented ranges", "[profiler][sweep]") {
  const Sweep s = load_sweep(src("configs/sweeps/embedding.json"));
  REQUIRE(s.cases.size() >= 1000);
  std::set<IndexDistribution::Kind> kinds;
  std::set<DType> dtypes;
  std::set<EmbeddingPass> passes;
  std::int64_t max_rows = 0;
  for (const auto& c : s.cases) {
    const auto& e = std::get<EmbeddingDesc>(c.kernel);
    CHECK(e.batch >= 256);
    CHECK(e.batch <= 65536);
    CHECK((e.batch & (e.batch - 1)) == 0);
    CHECK(e.tables.size() >= 1);
    CHECK(e.tables.size() <= 64);
    CHECK(embedding_weight_bytes(e) <= 40.0 * (1ull << 30));
    CHECK(embedding_index_count(e) <= 268435456);
    for (const auto& t : e.tables) {
      CHECK(t.rows >= 1000);
      CHECK(t.rows <= 100000000);
      CHECK(t.dim >= 16);
      CHECK(t.dim <= 512);
      CHECK(t.pooling >= 1);
      CHECK(t.pooling <= 128);
      if (t.distribution.kind == IndexDistribution::Kind::kZipf) {
        CHECK(t.distribution.alpha >= 0.6);
        CHECK(t.distribution.alpha <= 1.2);
      }
      max_rows = std::max(max_rows, t.rows);
      kinds.insert(t.distribution.kind);
    }
    dtypes.insert(e.weight_dtype);
    passes.insert(e.pass);
  }
  CHECK(kinds.size() == 3);
  CHECK(dtypes.size() == 2);
  CHECK(passes.size() == 2);
  CHECK(max_rows > 10000000);
}

TEST_CASE("the shipped elementwise and memcpy sweeps expand to their grids", "[profiler][sweep]") {
  const Sweep e = load_sweep(src("configs/sweeps/elementwise.json"));
  // 19 sizes (2^10 .. 2^28) x (5 ops + bias_grad at 2 column counts).
  CHECK(e.cases.size() == 19 * 7);
  for (const auto& c : e.cases) {
    const auto& d = std::get<ElementwiseDesc>(c.kernel);
    CHECK(d.cold_l2 == e.settings.flush_l2);  // timed after the L2 flush: operands come from HBM
    // One thread per element up to 256 x 65,536 = 2^24 elements (bench_kernels.hpp); the
    // bias-gradient reduction never.
    CHECK(d.thread_per_element == (d.op != "bias_grad" && d.elements <= (std::int64_t{1} << 24)));
    if (d.op == "bias_grad") {
      REQUIRE(c.bias_cols > 0);
      CHECK(d.elements % c.bias_cols == 0);
    }
  }
  const Sweep m = load_sweep(src("configs/sweeps/memcpy.json"));
  CHECK(m.cases.size() == 3 * 30);  // 8 B .. 4 GiB
  CHECK(std::get<MemcpyDesc>(m.cases.front().kernel).bytes == 8);
  CHECK(std::get<MemcpyDesc>(m.cases.back().kernel).bytes == 4.0 * (1ull << 30));
  CHECK(std::get<MemcpyDesc>(m.cases.back().kernel).kind == CopyKind::kDeviceToDevice);
  CHECK_FALSE(m.settings.flush_l2);
}

TEST_CASE("sweep file errors name the JSON path", "[profiler][sweep]") {
  CHECK_THAT(error_of(R"({"schema": "perfcast.sweep", "schema_version": "2.0", "name": "t", "generators": []})"),
             Catch::Contains("schema_version"));
  CHECK_THAT(error_of(std::string("{") + kHeader + R"("generators": [{"type": "conv"}]})"),
             Catch::Contains("/generators/0/type"));
  CHECK_THAT(error_of(std::string("{") + kHeader +
                      R"("generators": [{"type": "gemm_random", "count": 2, "dims": [64], "dtypes": ["fp64"]}]})"),
             Catch::Contains("/generators/0/dtypes/0"));
  CHECK_THAT(error_of(std::string("{") + kHeader +
                      R"("generators": [{"type": "gemm_random", "count": 2, "dims": [64], "dtypes": ["fp32"], "dimz": 1}]})"),
             Catch::Contains("dimz"));
  CHECK_THAT(error_of(std::string("{") + kHeader + R"("repetitions": 0, "generators": [{"type": "memcpy_grid", "kinds": ["h2d"], "sizes": {"min": "1KiB", "max": "1MiB"}}]})"),
             Catch::Contains("/repetitions"));
  CHECK_THAT(error_of(std::string("{") + kHeader + R"("generators": [{"type": "memcpy_grid", "kinds": ["h2d"], "sizes": {"min": "1Kb", "max": "1MiB"}}]})"),
             Catch::Contains("/generators/0/sizes/min"));
  CHECK_THAT(error_of(std::string("{") + kHeader + R"("generators": [{"type": "gemm_random", "count": 2, "dims": [4096], "dtypes": ["fp32"], "max_bytes": "1MiB"}]})"),
             Catch::Contains("max_bytes"));
  CHECK_THAT(error_of(std::string("{") + kHeader + R"("generators": [{"type": "embedding_random", "count": 1, "batch": [512, 256], "tables": [1, 2], "rows": [10, 100], "dims": [16], "pooling": [1, 2], "distributions": ["uniform"], "dtypes": ["fp32"], "passes": ["forward"]}]})"),
             Catch::Contains("/generators/0/batch"));
  CHECK_THROWS_AS(load_sweep(src("configs/sweeps/does_not_exist.json")), ConfigError);
}

TEST_CASE("generator memory caps shrink embedding configurations", "[profiler][sweep]") {
  const Sweep s = parse_sweep(doc(std::string("{") + kHeader + R"("seed": 3, "generators": [{"type": "embedding_random", "count": 50,
      "batch": [65536, 65536], "tables": [8, 8], "rows": [1e6, 1e8], "dims": [128], "pooling": [100, 128],
      "distributions": ["zipf"], "dtypes": ["fp32"], "passes": ["backward"], "max_weight_bytes": "8GiB", "max_indices": 1000000}]})"));
  REQUIRE(s.cases.size() == 50);
  for (const auto& c : s.cases) {
    const auto& e = std::get<EmbeddingDesc>(c.kernel);
    CHECK(embedding_weight_bytes(e) <= 8.0 * (1ull << 30));
    CHECK(embedding_index_count(e) <= 1000000);
    CHECK(e.tables[0].distribution.alpha == Approx(1.05));  // the default when no range is given
  }
  // Tables that cannot shrink enough are an error naming the cap.
  CHECK_THAT(error_of(std::string("{") + kHeader + R"("generators": [{"type": "embedding_random", "count": 1,
      "batch": [256, 256], "tables": [8, 8], "rows": [1e8, 1e8], "dims": [512], "pooling": [1, 1],
      "distributions": ["uniform"], "dtypes": ["fp32"], "passes": ["forward"], "max_weight_bytes": "8GiB"}]})"),
             Catch::Contains("/generators/0/max_weight_bytes"));
}

}  // namespace perfcast_test_profiler_sweep_test
