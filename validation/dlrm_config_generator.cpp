#include "validation/dlrm_config_generator.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "model/graph/memory_estimate.hpp"
#include "model/sharding/sharding_baselines.hpp"

namespace perfcast::validation {
namespace {

/// One Criteo-1TB categorical feature: rows = num_embeddings_per_feature (hashed features
/// capped at 40M, as MLPerf does), pooling = MLPerf DLRM-DCNv2 multi_hot_sizes. Source:
/// facebookresearch/dlrm torchrec_dlrm/scripts/materialize_synthetic_multihot_dataset.py,
/// the same numbers as configs/workloads/dlrm_mlperf.json.
struct PoolFeature {
  std::int64_t rows;
  int pooling;
};
constexpr std::array<PoolFeature, 26> kCriteoPool{{
    {40000000, 3}, {39060, 2},   {17295, 1}, {7424, 2},     {20265, 6},    {3, 1},        {7122, 1},
    {1543, 1},     {63, 1},      {40000000, 7}, {3067956, 3}, {405282, 8}, {10, 1},       {2209, 6},
    {11938, 9},    {155, 5},     {4, 1},     {976, 1},      {14, 1},       {40000000, 12}, {40000000, 100},
    {40000000, 27}, {590152, 10}, {12973, 3}, {108, 1},      {36, 1},
}};

constexpr std::array<std::int64_t, 4> kDims{32, 64, 128, 256};      // reference: D in {32, 64, 128, 256}
constexpr std::array<std::int64_t, 4> kBatches{512, 1024, 2048, 4096};  // reference: global batch
constexpr std::int64_t kMinRows = 100;     // reference: E = max index + 1, at least 100
constexpr double kTablesPerGpu = 13;       // reference: [0.7, 1.3) x 13 x G tables
constexpr double kHeavyMinPooling = 20;    // reference: heavy tables have mean L >= 20
constexpr double kHeavyMaxPooling = 128;   // assumed upper end (MLPerf's heaviest feature: 100)
constexpr std::int64_t kHotSetMinRows = 10000;  // hot sets below this would hold < 1 row

double round_to(double x, double step) { return std::round(x / step) * step; }

nlohmann::json distribution_json(PortableRandom& rng, std::int64_t rows) {
  const double u = rng.uniform();
  if (u < 0.5 || (u < 0.75 && rows < kHotSetMinRows)) {
    return {{"kind", "zipf"}, {"alpha", round_to(0.8 + 0.4 * rng.uniform(), 0.01)}};
  }
  if (u < 0.75) {
    // Hot rows 0.1% to 5% of the table (log-uniform), taking 50% to 95% of the accesses.
    const double rows_share = 0.001 * std::pow(50.0, rng.uniform());
    return {{"kind", "hot_set"},
            {"hot_rows", round_to(rows_share, 1e-5)},
            {"hot_accesses", round_to(0.5 + 0.45 * rng.uniform(), 0.01)}};
  }
  return {{"kind", "uniform"}};
}

nlohmann::json draw_workload(PortableRandom& rng, int gpus, bool heavy, std::uint64_t seed, int index,
                             const GeneratorOptions& o) {
  const double u = 0.7 + 0.6 * rng.uniform();
  const auto table_count = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(u * kTablesPerGpu * gpus)));
  std::int64_t batch = kBatches[static_cast<std::size_t>(rng.integer(0, kBatches.size() - 1))];
  if (batch % gpus != 0) batch = (batch / gpus + 1) * gpus;  // the global batch splits evenly over ranks
  const std::int64_t config_dim = kDims[static_cast<std::size_t>(rng.integer(0, kDims.size() - 1))];
  const bool dot = o.interaction == Interaction::kDot;

  nlohmann::json tables = nlohmann::json::array();
  for (std::int64_t t = 0; t < table_count; ++t) {
    const PoolFeature& f = kCriteoPool[static_cast<std::size_t>(rng.integer(0, kCriteoPool.size() - 1))];
    const std::int64_t rows = std::clamp<std::int64_t>(f.rows, kMinRows, std::max(kMinRows, o.max_rows));
    const std::int64_t dim = dot ? config_dim : kDims[static_cast<std::size_t>(rng.integer(0, kDims.size() - 1))];
    double pooling = f.pooling;
    if (heavy) {
      pooling = std::round(kHeavyMinPooling * std::pow(kHeavyMaxPooling / kHeavyMinPooling, rng.uniform()));
    }
    tables.push_back({{"name", fmt::format("t{}", t)},
                      {"rows", rows},
                      {"dim", dim},
                      {"pooling", pooling},
                      {"distribution", distribution_json(rng, rows)}});
  }
  const std::int64_t bottom_out = dot ? config_dim : 128;
  return {
      {"schema", "perfcast.workload"},
      {"schema_version", "1.0"},
      {"name", fmt::format("random DLRM seed {} #{} ({})", seed, index, heavy ? "heavy" : "light")},
      {"model", "dlrm"},
      {"batch_size", batch},
      {"bottom_mlp", {512, 1024, 256, bottom_out}},
      {"top_mlp", {1024, 512, 256, 1}},
      {"interaction", dot ? "dot" : "cat"},
      {"mlp_dtype", std::string(dtype_name(o.mlp_dtype))},
      {"dense_optimizer", "sgd"},
      {"gradient_bucket", "25MB"},
      {"sync_each_iteration", true},
      {"embedding", {{"dtype", "fp32"}, {"index_dtype", "int64"}, {"optimizer", "sgd"}, {"tables", tables}}},
      {"sources",
       {{"generator", "perfcast validate (validation/dlrm_config_generator.hpp): the reference model's random DLRM "
                      "task generator (docs/reference-paper.md section 8) over the Criteo-1TB feature pool"},
        {"seed", std::to_string(seed)},
        {"index", std::to_string(index)}}},
  };
}

}  // namespace

PortableRandom::PortableRandom(std::uint64_t seed) : engine_(seed) {}

double PortableRandom::uniform() {
  return static_cast<double>(engine_() >> 11) * 0x1.0p-53;  // top 53 bits -> [0, 1)
}

std::int64_t PortableRandom::integer(std::int64_t lo, std::int64_t hi) {
  if (hi < lo) throw std::invalid_argument("PortableRandom::integer: empty range");
  const std::uint64_t range = static_cast<std::uint64_t>(hi - lo) + 1;  // 0 means all 2^64 values
  if (range == 0) return static_cast<std::int64_t>(engine_());
  // Reject the top partial block so every residue is equally likely.
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % range;
  std::uint64_t x = engine_();
  while (x >= limit) x = engine_();
  return lo + static_cast<std::int64_t>(x % range);
}

std::uint64_t mix_seed(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

GeneratedConfig generate_dlrm_config(const SystemSpec& system, std::uint64_t seed, int index, const GeneratorOptions& o) {
  if (index < 0) throw std::invalid_argument("generate_dlrm_config: negative index");
  const int gpus = system.world_size();
  PortableRandom rng(mix_seed(mix_seed(seed) ^ static_cast<std::uint64_t>(index)));
  GeneratedConfig c;
  c.seed = seed;
  c.index = index;
  c.heavy = index % 2 == 0;  // half heavy, half light, as in the reference
  const double table_cap = o.table_memory_share * system.gpu.memory * gpus;
  for (int attempt = 1; attempt <= o.max_attempts; ++attempt) {
    nlohmann::json doc = draw_workload(rng, gpus, c.heavy, seed, index, o);
    DlrmSpec spec = parse_workload(JsonDocument{doc, "<generated>"});
    double bytes = 0;
    for (const auto& t : spec.tables) bytes += static_cast<double>(t.rows) * static_cast<double>(t.dim) * dtype_bytes(spec.embedding_dtype);
    if (bytes > table_cap) continue;
    ShardingPlan plan;
    for (auto& p : baseline_plans(spec, system, seed)) {
      if (p.name == c.plan_name) plan = std::move(p.plan);
    }
    if (plan.tables.size() != spec.tables.size()) throw std::logic_error("generate_dlrm_config: no size_lookup_greedy baseline");
    const auto memory = estimate_memory(spec, plan, system);
    if (!memory_verdict(memory).empty()) continue;
    c.attempts = attempt;
    c.workload_json = std::move(doc);
    c.spec = std::move(spec);
    c.plan = std::move(plan);
    c.plan.source = c.plan_name;
    c.table_bytes = bytes;
    for (const auto& m : memory) c.peak_rank_memory = std::max(c.peak_rank_memory, m.total());
    return c;
  }
  throw std::runtime_error(fmt::format("no random DLRM config #{} (seed {}) fits {} ({} GPUs of {}) in {} draws", index, seed,
                                       system.name, gpus, format_bytes(system.gpu.memory), o.max_attempts));
}

std::string describe_config(const GeneratedConfig& c) {
  const auto& w = c.spec;
  std::int64_t dmin = std::numeric_limits<std::int64_t>::max(), dmax = 0;
  double lmin = std::numeric_limits<double>::max(), lmax = 0, lsum = 0;
  for (const auto& t : w.tables) {
    dmin = std::min(dmin, t.dim);
    dmax = std::max(dmax, t.dim);
    lmin = std::min(lmin, t.pooling);
    lmax = std::max(lmax, t.pooling);
    lsum += t.pooling;
  }
  const std::string d = dmin == dmax ? fmt::format("D {}", dmin) : fmt::format("D {}-{}", dmin, dmax);
  return fmt::format("{}, {} tables, B {}, {}, L {:g}-{:g} (mean {:.1f}), {} of tables", c.heavy ? "heavy" : "light",
                     w.tables.size(), w.batch_size, d, lmin, lmax, lsum / static_cast<double>(w.tables.size()),
                     format_bytes(c.table_bytes));
}

}  // namespace perfcast::validation
