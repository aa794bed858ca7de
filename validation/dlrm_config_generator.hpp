#pragma once
/// \file dlrm_config_generator.hpp
/// Random DLRM training configs for `perfcast validate`, after the reference model's task
/// generator (docs/reference-paper.md section 8, `generate_random_dlrm_tasks.py`, adapted
/// from DreamShard's `gen_tasks.py`):
///  - table count uniform in [0.7, 1.3) x 13 x G (G = the system's GPUs);
///  - half the configs "heavy" (every table's pooling L >= 20), half "light";
///  - per table D in {32, 64, 128, 256} (one D for the whole config under dot interaction);
///  - bottom MLP 512-1024-256-128 (512 dense features), top MLP 1024-512-256-1, BCE loss,
///    fp32 weights with fused SGD on the embeddings, SGD on the MLPs, 25 MB DDP buckets;
///  - global batch in {512, 1024, 2048, 4096};
///  - tables placed by the size_lookup_greedy sharder (the reference's accuracy runs);
///  - rejected (and redrawn) when the tables exceed 0.8 x HBM x G (the reference's rule) or
///    when any rank does not fit by perfcast's memory model (model/graph/memory_estimate.hpp).
///
/// The reference draws its tables from Meta's synthetic production-like datasets, whose
/// per-table sizes are not public in this repository. The pool here uses the 26 real
/// Criteo-1TB features instead (cardinalities and MLPerf DLRM-DCNv2 multi-hot sizes, as in
/// configs/workloads/dlrm_mlperf.json): a table is one pool feature's row count (at least
/// 100 rows as in the reference, at most `max_rows`) and, in light configs, its multi-hot
/// size as pooling; heavy configs draw L log-uniformly in [20, 128] (the MLPerf pool's heavy
/// features have L 27 and 100). Index distributions (assumed, the executor generates all
/// three): Zipf with alpha in [0.8, 1.2] (half the tables), hot-set (a quarter) and uniform.
///
/// Deterministic: config `index` of seed `seed` is the same on every platform and for any
/// config count (its own std::mt19937_64 stream; no std::uniform_*_distribution, whose
/// output differs across standard libraries).

#include <cstdint>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
#include "topology/system_spec.hpp"

namespace perfcast::validation {

struct GeneratorOptions {
  /// Largest table drawn, rows. 4M rows x 256 x 4 B = 4 GiB: keeps a single-GPU config
  /// (10 to 16 tables) mostly within an 80 GB GPU, so few draws are rejected.
  std::int64_t max_rows = 4'000'000;
  /// kCat (default): D drawn per table, as the reference does; kDot: one D per config (dot
  /// interaction needs every table's D to equal the bottom MLP's output).
  Interaction interaction = Interaction::kCat;
  /// The MLPs' math (DlrmSpec::mlp_dtype): fp32 (the reference's runs), tf32, or fp16 / bf16
  /// mixed precision. Draws nothing: config i of a seed has the same shapes in every dtype.
  DType mlp_dtype = DType::kFp32;
  /// Share of HBM x G the tables may use (the reference's rejection rule).
  double table_memory_share = 0.8;
  /// Redraws before giving up on a config (std::runtime_error naming the system).
  int max_attempts = 200;
};

struct GeneratedConfig {
  std::uint64_t seed = 0;
  int index = 0;
  bool heavy = false;
  int attempts = 1;              ///< draws until one fit (1 = the first)
  nlohmann::json workload_json;  ///< schema "perfcast.workload", parse_workload reads it
  DlrmSpec spec;                 ///< parse_workload(workload_json)
  ShardingPlan plan;             ///< size_lookup_greedy, every rank fits
  std::string plan_name = "size_lookup_greedy";
  double table_bytes = 0;        ///< weights of all tables, bytes
  double peak_rank_memory = 0;   ///< largest rank total by the memory model, bytes
};

/// Config `index` (0-based) of `seed` for `system`. Throws std::runtime_error when no draw
/// fits within `max_attempts` (a system whose GPUs are too small for the model).
[[nodiscard]] GeneratedConfig generate_dlrm_config(const SystemSpec& system, std::uint64_t seed, int index,
                                                   const GeneratorOptions& options = {});

/// One line: "heavy, 12 tables, B 2048, D 32-256, L 20-118 (mean 61.2), 9.8 GiB of tables".
[[nodiscard]] std::string describe_config(const GeneratedConfig& c);

/// Deterministic random numbers from std::mt19937_64 with portable conversions.
class PortableRandom {
 public:
  explicit PortableRandom(std::uint64_t seed);
  /// Uniform in [0, 1), 53 random bits.
  [[nodiscard]] double uniform();
  /// Uniform integer in [lo, hi] (inclusive), unbiased (rejection sampling).
  [[nodiscard]] std::int64_t integer(std::int64_t lo, std::int64_t hi);

 private:
  std::mt19937_64 engine_;  ///< its output sequence is fixed by the C++ standard
};

/// SplitMix64 finalizer (Steele et al. 2014), used to derive per-config seeds.
[[nodiscard]] std::uint64_t mix_seed(std::uint64_t x);

}  // namespace perfcast::validation
