#include "predictors/embedding_predictor.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "predictors/lru_cache_model.hpp"

namespace perfcast {
namespace {

/// Warps in flight per SM for FBGEMM's TBE forward: 64 x 0.71 achieved occupancy
/// (docs/reference-paper.md section 4.1).
constexpr double kEmbeddingWarpsPerSm = 45;
/// Share of L2 usable for embedding rows (the reference heuristic's 0.9).
constexpr double kEmbeddingL2Share = 0.9;
/// DRAM sector: rows are fetched in 32-byte sectors.
constexpr double kSectorBytes = 32;
/// Key bits one radix pass sorts (CUB onesweep's 8-bit digits).
constexpr int kRadixBits = 8;
/// Inputs CUB sorts with one single-tile kernel instead of onesweep (DeviceRadixSort's
/// single-tile policy: 256 threads x 19 items for 64-bit keys); seen in the PARAM V100 trace,
/// whose backwards of up to a few thousand indices run one sort kernel.
constexpr double kSingleTileSortItems = 256 * 19;
/// Kernels of FBGEMM's TBE backward besides the sort: linearize, the run-length encoding's
/// two (compact init, reduce by key), the scan's two, find_long_segments, the CTA- and
/// warp-per-row update kernels. Counted in the PARAM V100 trace (FBGEMM 2023): 9 with a
/// single-tile sort, 13 with a 4-pass onesweep sort (data/param-dlrm-v100-8rank).
constexpr int kBackwardBaseKernels = 8;
/// Segments (one unique row's indices) of at least this many indices are reduced by FBGEMM's
/// CTA-per-row kernel, shorter ones by the warp-per-row kernel (FBGEMM's backward host code:
/// max_segment_length_per_warp = 32).
constexpr double kLongSegmentIndices = 32;
/// FBGEMM launches the CTA-per-row kernel with one CTA per 1,024 indices (32 warps of 32
/// threads); each CTA takes the long segments blockIdx, blockIdx + gridDim, ... in turn
/// (embedding_backward_split_template.cu; grid and block seen in the HTA A100 trace:
/// 61 CTAs of 32 x 32 threads for 61,072 indices).
constexpr double kIndicesPerSegmentCta = 1024;
/// CTAs of 1,024 threads resident per SM (2,048 threads per SM on V100, A100 and H100).
constexpr double kSegmentCtasPerSm = 2;
/// Dependent global-memory round trips of one long segment in the CTA-per-row kernel's loop
/// (the segment's run id; its row and run start; the first index's sample; the table's
/// offsets; the gradient rows; after the block's reduction the table's weight offsets; the
/// row's weights and optimizer state), against those of one bag in the forward kernel (the
/// bag's offsets, its indices, its rows), whose wave the fit measures as `wave_time`.
/// Counted in embedding_backward_split_template.cu and the forward template.
constexpr double kSegmentChainLoads = 7;
constexpr double kBagChainLoads = 3;
/// A non-fused optimizer: after the backward writes the unique rows' gradients, coalescing
/// them and the optimizer's update are two more kernels.
constexpr int kUnfusedOptimizerKernels = 2;

/// Share of the link's rate that a TBE forward reaches gathering rows from host memory
/// (fused_uvm): fitted to FBGEMM's pure-UVM forward on one H100 (recsys-examples dynamicemb
/// benchmark_results.json @ 43465ae, TestNoHbm rows of data/public-measurements/
/// embedding_kernel_times_h100.csv; bench/embedding_tier_check, docs/embedding.md).
constexpr double kHostGatherEfficiency = 0.42;
/// Share of the link's rate, per direction, of sorted unique-row reads and writes: the
/// backward's read-modify-write of host rows and the cache prefetch's fills and evictions.
/// Fitted to the same rows' backward (SGD and Adam).
constexpr double kHostUpdateEfficiency = 0.605;
/// Kernels of a cache prefetch (FBGEMM lru_cache_find_uncached, lru_cache_insert).
constexpr int kCachePrefetchKernels = 2;
/// Bytes a cache prefetch handles per looked-up index (linearize and sort the batch's
/// indices to find the misses): as the backward's sort of 64-bit keys and 32-bit values
/// over 4 passes (8 + 12 + 8 + 4 x 24 + 8 B).
constexpr double kPrefetchBytesPerIndex = 132;

double round_up(double v, double to) { return std::ceil(v / to) * to; }

/// Long segments one CTA of the CTA-per-row kernel reduces in turn, times the waves of busy
/// CTAs: the kernel's chain of dependent segment reductions (0 without long segments).
double segment_rounds(double long_segments, double accesses, const GpuSpec& gpu) {
  if (long_segments < 0.5) return 0;
  const double ctas = std::max(1.0, std::ceil(accesses / kIndicesPerSegmentCta));
  const double per_cta = std::ceil(long_segments / ctas);
  const double busy = std::min(std::ceil(long_segments), ctas);
  return per_cta * std::ceil(busy / (gpu.sm_count * kSegmentCtasPerSm));
}

/// Optimizer state bytes per unique row, read and written.
double state_bytes(EmbeddingOptimizer o, double dim) {
  switch (o) {
    case EmbeddingOptimizer::kSgd: return 0;
    case EmbeddingOptimizer::kRowwiseAdagrad: return 2 * 4.0;
    case EmbeddingOptimizer::kAdam: return 2 * 2 * dim * 4.0;
    case EmbeddingOptimizer::kAdagrad: return 2 * dim * 4.0;
    case EmbeddingOptimizer::kNone: return 0;
  }
  return 0;
}

/// (a^p + b^p + c^p)^(1/p); p >= 1000 is the max.
double p_norm(double p, double a, double b, double c = 0) {
  const double m = std::max({a, b, c});
  if (m <= 0) return 0;
  if (p >= 1000) return m;
  return m * std::pow(std::pow(a / m, p) + std::pow(b / m, p) + std::pow(c / m, p), 1.0 / p);
}

}  // namespace

EmbeddingWork embedding_work(const EmbeddingDesc& d, const GpuSpec& gpu) {
  EmbeddingWork w;
  const bool fwd = d.pass == EmbeddingPass::kForward;
  const double elem = dtype_bytes(d.weight_dtype);
  const double out_elem = dtype_bytes(d.output_dtype);
  const double batch = static_cast<double>(d.batch);
  const double n_tables = static_cast<double>(d.tables.size());
  if (d.tables.empty() || d.batch <= 0) return w;
  const double slots = gpu.sm_count * kEmbeddingWarpsPerSm;
  // Tables processed at the same time: bags in flight over bags per table.
  const double concurrent = std::clamp(std::ceil(slots / batch), 1.0, n_tables);

  const double h2d = d.host_to_device > 0 ? d.host_to_device : gpu.pcie_bandwidth;
  const double d2h = d.device_to_host > 0 ? d.device_to_host : gpu.pcie_bandwidth;
  double prefetch_read = 0, prefetch_sort = 0, kernel_host_read = 0, kernel_host_write = 0;
  double cached_accesses = 0, cached_hits = 0;
  double unique_ws_sum = 0, accesses_sum = 0, rows_sum = 0;
  std::vector<double> unique(d.tables.size()), accesses(d.tables.size()), row_bytes(d.tables.size());
  for (std::size_t i = 0; i < d.tables.size(); ++i) {
    const auto& t = d.tables[i];
    accesses[i] = batch * t.pooling;
    unique[i] = expected_unique_rows(t.distribution, static_cast<double>(t.rows), accesses[i]);
    row_bytes[i] = round_up(static_cast<double>(t.dim) * elem, kSectorBytes);
    unique_ws_sum += unique[i] * row_bytes[i];
    accesses_sum += accesses[i];
    rows_sum += static_cast<double>(t.rows);
  }
  const double ws_concurrent = unique_ws_sum / n_tables * concurrent;
  w.l2_hit = ws_concurrent > 0 ? std::min(1.0, kEmbeddingL2Share * gpu.l2_cache / ws_concurrent) : 1.0;

  for (std::size_t i = 0; i < d.tables.size(); ++i) {
    const auto& t = d.tables[i];
    const double dim = static_cast<double>(t.dim);
    const double repeats = accesses[i] - unique[i];
    const bool uvm = t.storage == EmbeddingStorage::kHostUvm;
    const bool cached = t.storage == EmbeddingStorage::kHostUvmCaching;
    const double idx = accesses[i] * d.index_bytes + (batch + 1) * d.index_bytes;  // indices + offsets
    const double out_rows = t.sequence ? accesses[i] : batch;  // one output row per bag, or per index unpooled
    const double grad_row = round_up(dim * out_elem, kSectorBytes);
    w.accesses += accesses[i];
    w.unique_rows += unique[i];
    if (!fwd) w.long_segments += frequent_rows_for(t.distribution, static_cast<double>(t.rows), accesses[i], kLongSegmentIndices);
    if (fwd && cached) {
      // The prefetch looks the batch's indices up in the cache and fills the misses: each
      // miss reads a row from host memory and, once the cache is full, writes back the
      // (updated) row it evicts. Misses of an LRU over the lookup stream, at most the unique rows.
      const double hit = lru_hit_rate(t.distribution, static_cast<double>(t.rows), t.cache_rows, accesses[i]);
      const double misses = std::min(unique[i], accesses[i] * (1 - hit));
      cached_accesses += accesses[i];
      cached_hits += accesses[i] * hit;
      prefetch_read += misses * row_bytes[i];
      prefetch_sort += accesses[i] * kPrefetchBytesPerIndex;
    }
    if (fwd) {
      w.stream_bytes += idx + out_rows * dim * out_elem;
      w.l2_bytes += accesses[i] * row_bytes[i];  // every row request passes through L2, hit or miss
      w.flops += accesses[i] * dim;
      if (uvm) {
        // Host rows pass through L2, which keeps the hot ones: an LRU of this table's share of
        // L2 over the lookup stream (Che's approximation, as for the HBM cache), never fewer
        // fetches than the unique rows.
        const double l2_rows = kEmbeddingL2Share * gpu.l2_cache / row_bytes[i] / concurrent;
        const double l2_hit = lru_hit_rate(t.distribution, static_cast<double>(t.rows), l2_rows, accesses[i]);
        kernel_host_read += std::max(unique[i], accesses[i] * (1 - l2_hit)) * row_bytes[i];
      } else {
        const double rows_read = unique[i] + repeats * (1 - w.l2_hit);
        w.random_rows += rows_read;
        w.random_bytes += rows_read * row_bytes[i];
      }
      continue;
    }
    // Backward. Segments are reduced in (table, row) order: the tables in flight are those
    // whose unique rows fill the warp slots, and their gradient slices (batch x dim) stay in
    // L2 when they fit, so a bag's gradient row is read from HBM once and then hits L2.
    const double in_flight = std::clamp(slots / std::max(unique[i], 1.0), 1.0, n_tables);
    const double slice = batch * dim * out_elem * in_flight;
    const double grad_hit = slice > 0 ? std::min(1.0, kEmbeddingL2Share * gpu.l2_cache / slice) : 1.0;
    const double grad_reads = t.sequence ? accesses[i] : std::min(accesses[i], batch + (accesses[i] - batch) * (1 - grad_hit));
    w.random_rows += grad_reads;
    w.random_bytes += grad_reads * grad_row;
    w.stream_bytes += idx;
    w.l2_bytes += accesses[i] * grad_row;  // every gradient row gathered passes through L2
    w.flops += accesses[i] * dim * 2;
    if (d.weighted) {  // the per-sample weights' gradient: each index's row dotted with its gradient row
      w.random_rows += 2 * accesses[i];
      w.random_bytes += accesses[i] * (row_bytes[i] + grad_row);
    }
    if (d.optimizer == EmbeddingOptimizer::kNone) {  // a dense gradient table: zeroed, then the unique rows written
      w.stream_bytes += static_cast<double>(t.rows) * dim * elem;
      w.random_rows += unique[i];
      w.random_bytes += unique[i] * row_bytes[i];
      continue;
    }
    const double state = state_bytes(d.optimizer, dim);
    // Host-memory rows and (for both host kinds) optimizer state are read and written over
    // the link instead of HBM; the cached rows of fused_uvm_caching are in HBM.
    const double host_bytes = (uvm ? 2 * row_bytes[i] : 0) + (uvm || cached ? state : 0);
    kernel_host_read += unique[i] * host_bytes / 2;
    kernel_host_write += unique[i] * host_bytes / 2;
    const double update = unique[i] * (2 * row_bytes[i] + state) - unique[i] * host_bytes;
    if (update > 0) {
      w.random_rows += 2 * unique[i];
      w.random_bytes += update;
    }
    if (!d.fused_optimizer) {  // the unique rows' gradients written, then read back by the optimizer
      w.random_rows += 2 * unique[i];
      w.random_bytes += 2 * unique[i] * (dim * 4.0 + 8.0);
    }
  }
  if (!fwd) {
    // Linearize (read the index, write a 64-bit key and a 32-bit position), the radix sort
    // (a histogram read of the keys, then per pass one read and one write of key and value),
    // and the run-length encoding (read the sorted keys; write each unique row and its count).
    const int bits = std::max(1, static_cast<int>(std::ceil(std::log2(rows_sum + 1))));
    w.sort_passes = (bits + kRadixBits - 1) / kRadixBits;
    w.sort_bytes = w.accesses * (d.index_bytes + 12.0 + 8.0 + 24.0 * w.sort_passes + 8.0) + w.unique_rows * 16.0;
    const bool single_tile = w.accesses <= kSingleTileSortItems;
    w.segment_rounds = segment_rounds(w.long_segments, w.accesses, gpu);
    w.backward_kernels = kBackwardBaseKernels + (single_tile ? 1 : 2 + w.sort_passes) + (d.weighted ? 1 : 0) +
                         (d.fused_optimizer || d.optimizer == EmbeddingOptimizer::kNone ? 0 : kUnfusedOptimizerKernels);
  }
  w.dram_bytes = w.random_bytes + w.stream_bytes;
  w.dram_at_peak = w.dram_bytes / gpu.memory_bandwidth;
  w.sort_at_peak = w.sort_bytes / gpu.memory_bandwidth;
  w.l2_at_peak = w.l2_bytes / gpu.l2_bandwidth;
  // One warp slot per bag: the kernel runs ceil(bags / slots) waves of bags, each as long
  // as a bag's dependent row fetches; the last wave may be partly empty.
  const double bags = batch * n_tables;
  w.bag_waves = std::ceil(bags / slots);
  w.mean_pooling = accesses_sum / bags;
  w.row_rounds = w.bag_waves * w.mean_pooling;
  w.host_read_bytes = kernel_host_read + prefetch_read;
  w.host_write_bytes = kernel_host_write + prefetch_read;  // each fill evicts one row
  w.host_overlapped = fwd ? kernel_host_read / (kHostGatherEfficiency * h2d)
                          : std::max(kernel_host_read / h2d, kernel_host_write / d2h) / kHostUpdateEfficiency;
  if (prefetch_read > 0 || prefetch_sort > 0) {
    w.prefetch_launches = kCachePrefetchKernels;
    w.host_prefetch = std::max(prefetch_read / h2d, prefetch_read / d2h) / kHostUpdateEfficiency +
                      prefetch_sort / (gpu.memory_bandwidth * kSortEfficiency) +
                      kCachePrefetchKernels * gpu.efficiency.min_kernel_time;
  }
  if (cached_accesses > 0) w.cache_hit = cached_hits / cached_accesses;
  return w;
}

void add_host_memory_time(Estimate& e, const EmbeddingWork& w, const GpuSpec& gpu) {
  const Seconds launch_floor = (e.launches - w.prefetch_launches) * gpu.efficiency.min_kernel_time;
  if (w.host_overlapped > e.time - launch_floor) {
    e.time = w.host_overlapped + launch_floor;
    e.bound = "host_link";
  }
  e.time += w.host_prefetch;
  e.host_link_bytes = w.host_read_bytes + w.host_write_bytes;
}

Seconds unique_row_update_floor(const EmbeddingDesc& d, const GpuSpec& gpu) {
  double bytes = 0;
  for (const auto& t : d.tables) {
    const double accesses = static_cast<double>(d.batch) * t.pooling;
    const double unique = expected_unique_rows(t.distribution, static_cast<double>(t.rows), accesses);
    const double row = round_up(static_cast<double>(t.dim) * dtype_bytes(d.weight_dtype), kSectorBytes);
    bytes += unique * (2 * row + state_bytes(d.optimizer, static_cast<double>(t.dim)));
  }
  return bytes / gpu.memory_bandwidth;
}

Estimate predict_embedding(const EmbeddingDesc& d, const GpuSpec& gpu) { return predict_embedding(d, gpu, kTbeFitted); }

Seconds segment_chain_time(const EmbeddingWork& w, const TbeCoefficients& k) {
  return w.segment_rounds * k.wave_time * kSegmentChainLoads / kBagChainLoads;
}

TbeTime tbe_time(const EmbeddingWork& w, EmbeddingPass pass, const GpuSpec& gpu, const TbeCoefficients& k) {
  TbeTime t;
  const double bw = gpu.memory_bandwidth * gpu.efficiency.memory;
  if (pass == EmbeddingPass::kForward) {
    const Seconds hbm = (w.random_bytes + w.random_rows * k.forward_row_cost + w.stream_bytes) / bw;
    const Seconds l2 = w.l2_at_peak;
    const Seconds loads = w.bag_waves * (k.wave_time + std::max(0.0, w.mean_pooling - 1) * k.row_time);
    t.bound = hbm >= l2 && hbm >= loads ? "memory" : l2 >= loads ? "l2" : "latency";
    t.time = gpu.efficiency.min_kernel_time + p_norm(k.forward_norm, hbm, l2, loads);
    return t;
  }
  const Seconds random = (w.random_bytes + w.random_rows * k.backward_row_cost + w.stream_bytes) / bw;
  const double slots = gpu.sm_count * k.backward_warps_per_sm;
  const Seconds loads = std::ceil(w.accesses / slots) * k.wave_time + segment_chain_time(w, k);
  const Seconds sort = w.sort_bytes / (gpu.memory_bandwidth * kSortEfficiency);
  t.bound = random >= loads ? "memory" : "latency";
  t.time = w.backward_kernels * std::max(k.subkernel_time, gpu.efficiency.min_kernel_time) + sort + p_norm(k.backward_norm, random, loads);
  return t;
}

Estimate predict_embedding(const EmbeddingDesc& d, const GpuSpec& gpu, const TbeCoefficients& k) {
  Estimate e;
  const bool fwd = d.pass == EmbeddingPass::kForward;
  e.predictor = fwd ? "embedding_forward.spec_tbe" : "embedding_backward.spec_tbe";
  if (d.tables.empty() || d.batch <= 0) {
    e.time = gpu.efficiency.min_kernel_time;
    e.bound = "latency";
    return e;
  }
  const EmbeddingWork w = embedding_work(d, gpu);
  const TbeTime t = tbe_time(w, d.pass, gpu, k);
  e.flops = w.flops;
  e.l2_bytes = w.l2_bytes;
  e.dram_bytes = w.dram_bytes + w.sort_bytes;
  e.bound = t.bound;
  e.time = t.time;
  if (!fwd) e.launches = w.backward_kernels;
  e.launches += w.prefetch_launches;
  add_host_memory_time(e, w, gpu);
  return e;
}

}  // namespace perfcast
