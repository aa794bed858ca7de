#pragma once
/// \file sweep.hpp
/// Microbenchmark sweeps: JSON files (configs/sweeps/*.json, schema "perfcast.sweep" 1.x) that
/// expand, deterministically for a seed, into a list of benchmark cases. CPU-only.
///
/// File layout (strict: unknown keys are errors):
///   {"schema": "perfcast.sweep", "schema_version": "1.0", "name": "gemm", "seed": 1,
///    "warmup": 5, "repetitions": 30, "flush_l2": true,
///    "generators": [ {"type": "gemm_random", ...}, ... ]}
/// Generator types and their keys (ranges are [lo, hi] arrays, inclusive):
///  - gemm_random: count, dims (list of M/N/K values), dtypes (fp32 tf32 fp16 bf16),
///    transposes ("nn" "nt" "tn" "tt"), batch (list; 1 = plain GEMM), max_bytes (A+B+C of
///    all batches, e.g. "4GiB"; shapes over it are redrawn).
///  - elementwise_grid: ops (relu add mul sigmoid bce bias_grad), elements {min, max, factor}
///    (geometric), bias_cols (bias_grad: columns of the [rows, cols] input; default [1024]).
///  - memcpy_grid: kinds (h2d d2h d2d), sizes {min, max, factor} (byte strings), pinned (bool).
///  - embedding_random: count, batch [lo, hi] (log-uniform, rounded to a power of two),
///    tables [lo, hi], rows [lo, hi] (log-uniform), dims (list), pooling [lo, hi]
///    (log-uniform integers), distributions (uniform zipf hot_set), zipf_alpha [lo, hi],
///    hot_rows_fraction [lo, hi], hot_access_fraction [lo, hi], dtypes (fp32 fp16),
///    passes (forward backward), max_weight_bytes, max_indices.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "predictors/kernel_desc.hpp"
#include "core/json_reader.hpp"

namespace perfcast::profiler {

/// One benchmark to run: the perfcast descriptor it measures plus what the descriptor does not
/// say but the benchmark needs.
struct BenchCase {
  KernelDesc kernel;
  bool trans_a = false;          ///< gemm: A is stored transposed (column-major [k x m] view)
  bool trans_b = false;          ///< gemm: B is stored transposed
  std::int64_t bias_cols = 0;    ///< elementwise bias_grad: columns of the reduced [rows, cols] input
  bool pinned = true;            ///< memcpy: host buffer is page-locked
  std::string generator;         ///< generator type that produced it
  bool operator==(const BenchCase&) const = default;
};

/// How each case is timed.
struct SweepSettings {
  int warmup = 5;         ///< untimed runs before timing
  int repetitions = 30;   ///< timed runs (median, p10, p90, cv over these)
  bool flush_l2 = true;   ///< memset a buffer of 2x the L2 size before each timed run
};

struct Sweep {
  std::string file;
  std::string name;
  std::uint64_t seed = 0;
  SweepSettings settings;
  std::vector<BenchCase> cases;
};

/// Parses and expands a sweep document. Throws ConfigError naming the file and JSON path.
[[nodiscard]] Sweep parse_sweep(const JsonDocument& doc);
/// load_json_file + parse_sweep.
[[nodiscard]] Sweep load_sweep(const std::filesystem::path& path);

/// Elementwise op catalog: FP32 operations and bytes (read + written, fp32 data) per element.
/// flops from the reference model (docs/reference-paper.md section 3: relu 1, sigmoid 4,
/// BCE 7); bytes: 4 per operand read or written.
struct ElementwiseOpInfo {
  const char* name;
  double flops_per_element;
  double bytes_per_element;
};
[[nodiscard]] const std::vector<ElementwiseOpInfo>& elementwise_ops();

/// Bytes of A, B and C of a (batched) GEMM in storage precision.
[[nodiscard]] double gemm_bytes(const GemmDesc& g);
/// Weight bytes of an embedding descriptor.
[[nodiscard]] double embedding_weight_bytes(const EmbeddingDesc& e);
/// Indices of one batch: batch * sum over tables of round(pooling).
[[nodiscard]] std::int64_t embedding_index_count(const EmbeddingDesc& e);

/// "gemm 1024x1024x1024 bf16 nt", for progress output and errors.
[[nodiscard]] std::string case_label(const BenchCase& c);

}  // namespace perfcast::profiler
