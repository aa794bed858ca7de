#include "predictors/spec_predictors.hpp"

#include <algorithm>
#include <cmath>

#include "predictors/lru_cache_model.hpp"

namespace perfcast {
namespace {

double ceil_div(double a, double b) { return std::ceil(a / b); }
double round_up(double v, double to) { return std::ceil(v / to) * to; }

/// Tile edge for a matrix edge: the next power of two at or above it, within [lo, hi].
double tile_edge(std::int64_t extent, double lo, double hi) {
  double t = lo;
  while (t < static_cast<double>(extent) && t < hi) t *= 2;
  return t;
}

/// Share of the 128 x 128 score blocks of a seq_q x seq_kv attention that a causal mask
/// (bottom-right aligned when seq_kv > seq_q, as FlashAttention aligns it) and a sliding
/// window of `window` keys (0: none) leave to compute.
double attention_mask_fraction(const AttentionDesc& a) {
  if (!a.causal && a.window <= 0) return 1.0;
  constexpr double kBlock = 128;
  const double nq = std::ceil(double(a.seq_q) / kBlock), nk = std::ceil(double(a.seq_kv) / kBlock);
  const double offset = double(a.seq_kv) - double(a.seq_q);  // keys before the first query
  double blocks = 0;
  for (double i = 0; i < nq; ++i) {
    const double q_first = i * kBlock, q_last = std::min(double(a.seq_q), (i + 1) * kBlock) - 1;
    double k_first = 0, k_last = double(a.seq_kv) - 1;
    if (a.causal) k_last = std::min(k_last, q_last + offset);
    if (a.window > 0) {
      k_first = std::max(0.0, q_first + offset - double(a.window) + 1);
      if (!a.causal) k_last = std::min(k_last, q_last + offset + double(a.window) - 1);
    }
    if (k_last < k_first) continue;
    blocks += std::floor(k_last / kBlock) - std::floor(k_first / kBlock) + 1;
  }
  return std::clamp(blocks / (nq * nk), 0.0, 1.0);
}

/// Warps in flight per SM for FBGEMM's TBE forward: 64 x 0.71 achieved occupancy
/// (docs/reference-paper.md section 4.1).
constexpr double kEmbeddingWarpsPerSm = 45;
/// Share of L2 usable for embedding rows (the reference heuristic's 0.9).
constexpr double kEmbeddingL2Share = 0.9;
/// DRAM sector: rows are fetched in 32-byte sectors.
constexpr double kSectorBytes = 32;
/// The backward's work per index besides the rows, as HBM bytes: linearizing the indices,
/// the radix sort of (index, position) pairs, run-length encoding and the segment
/// bookkeeping of FBGEMM's TBE backward (also the cache prefetch's sort). 800 B, fitted on
/// the large TBE backward of the HTA A100 trace, steps 1009-1011 (time-weighted, 28.60 vs
/// 28.64 ms measured); checked on steps 1012-1014 and on the H100 FBGEMM rows of the
/// public-measurements table (docs/embedding.md). It replaces 96 B (4 passes x 2 x 12 B,
/// assumed from CUB's onesweep), with which these backwards came out 44-80% too fast.
constexpr double kSortBytesPerIndex = 800;
/// Sub-kernels of FBGEMM's TBE backward besides the update kernel, each costing at least the
/// minimum kernel time and one launch: linearize, the CUB radix sort (3-4 kernels), fills,
/// run-length encoding and its scan, the exclusive scan of the offsets, find_long_segments,
/// the cta- and warp-per-row kernels. Counted in the traces: 15 kernels per backward in the
/// PARAM V100 trace (FBGEMM 2023, adagrad and dense), 17 in the HTA A100 trace (2022,
/// row-wise Adagrad unweighted; 21 weighted). Was 3 (assumed).
constexpr int kEmbeddingBackwardExtraKernels = 14;

/// Share of the host link's rate that a TBE forward reaches gathering rows from host memory
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

/// The reference model's small-dimension slowdown f(D): 1.55 for D <= 32, 1.1 for D <= 64
/// (docs/reference-paper.md summary item 6).
double small_dim_factor(double mean_dim) {
  if (mean_dim <= 32) return 1.55;
  if (mean_dim <= 64) return 1.1;
  return 1.0;
}

}  // namespace

GemmWork gemm_work(const GemmDesc& g, const GpuSpec& gpu, const GemmTiling& tiling) {
  GemmWork w;
  const double elem = dtype_bytes(g.dtype);
  const double sms = gpu.sm_count;
  const double per_sm = gpu.peak(g.dtype) / sms;
  const bool simt = g.dtype == DType::kFp32;
  const double tm = tile_edge(g.m, simt ? tiling.min_m_fp32 : tiling.min_m, tiling.max_m);
  const double tn = tile_edge(g.n, tiling.min_n, simt ? tiling.max_n_fp32 : tiling.max_n);
  const double tiles = ceil_div(g.m, tm) * ceil_div(g.n, tn) * g.batch;
  double split = 1;
  if (tiles < sms && g.k >= 1024) split = std::max(1.0, std::min(std::floor(sms / tiles), std::floor(g.k / 512.0)));
  const double waves = ceil_div(tiles * split, sms);
  const double k_per_split = ceil_div(g.k, split);
  w.compute_at_peak = waves * 2.0 * tm * tn * k_per_split / per_sm;
  const double out_elem = (g.dtype == DType::kFp32 || g.dtype == DType::kTf32) ? 4.0 : 2.0;
  double bytes = g.batch * ((double(g.m) * g.k + double(g.k) * g.n) * elem + double(g.m) * g.n * out_elem);
  if (g.bias_epilogue) bytes += g.batch * double(g.n) * out_elem;
  if (split > 1 && tiling.split_k_traffic) bytes += split * double(g.m) * g.n * 4.0 * 2.0;  // partial sums written and reduced
  w.bytes = bytes;
  w.memory_at_peak = bytes / gpu.memory_bandwidth;
  w.flops = 2.0 * g.m * g.n * g.k * g.batch;
  w.split_k = static_cast<int>(split);
  return w;
}

Estimate predict_gemm(const GemmDesc& g, const GpuSpec& gpu) {
  Estimate e;
  e.predictor = "gemm.spec_roofline";
  const GemmWork w = gemm_work(g, gpu);
  const double compute = w.compute_at_peak / gpu.efficiency.gemm;
  const double memory = w.memory_at_peak / gpu.efficiency.memory;
  e.flops = w.flops;
  e.dram_bytes = w.bytes;
  e.bound = compute >= memory ? "compute" : "memory";
  e.time = std::max(compute, memory) + gpu.efficiency.min_kernel_time;
  e.split_k = w.split_k;
  return e;
}

EmbeddingWork embedding_work(const EmbeddingDesc& d, const GpuSpec& gpu) {
  EmbeddingWork w;
  const bool fwd = d.pass == EmbeddingPass::kForward;
  const double elem = dtype_bytes(d.weight_dtype);
  const double batch = static_cast<double>(d.batch);
  const double n_tables = static_cast<double>(d.tables.size());
  if (d.tables.empty() || d.batch <= 0) return w;
  // Tables processed at the same time: bags in flight over bags per table.
  const double slots = gpu.sm_count * kEmbeddingWarpsPerSm;
  const double concurrent = std::clamp(std::ceil(slots / batch), 1.0, n_tables);

  const double h2d = d.host_to_device > 0 ? d.host_to_device : gpu.pcie_bandwidth;
  const double d2h = d.device_to_host > 0 ? d.device_to_host : gpu.pcie_bandwidth;
  double prefetch_read = 0, prefetch_sort = 0, kernel_host_read = 0, kernel_host_write = 0;
  double cached_accesses = 0, cached_hits = 0;
  double unique_ws_sum = 0, dim_sum = 0, accesses_sum = 0;
  std::vector<double> unique(d.tables.size()), accesses(d.tables.size()), row_bytes(d.tables.size());
  for (std::size_t i = 0; i < d.tables.size(); ++i) {
    const auto& t = d.tables[i];
    accesses[i] = batch * t.pooling;
    unique[i] = expected_unique_rows(t.distribution, static_cast<double>(t.rows), accesses[i]);
    row_bytes[i] = round_up(t.dim * elem, kSectorBytes);
    unique_ws_sum += unique[i] * row_bytes[i];
    dim_sum += static_cast<double>(t.dim);
    accesses_sum += accesses[i];
  }
  const double ws_concurrent = unique_ws_sum / n_tables * concurrent;
  w.l2_hit = ws_concurrent > 0 ? std::min(1.0, kEmbeddingL2Share * gpu.l2_cache / ws_concurrent) : 1.0;

  for (std::size_t i = 0; i < d.tables.size(); ++i) {
    const auto& t = d.tables[i];
    const double repeats = accesses[i] - unique[i];
    const bool uvm = t.storage == EmbeddingStorage::kHostUvm;
    const bool cached = t.storage == EmbeddingStorage::kHostUvmCaching;
    const double idx = accesses[i] * d.index_bytes + (batch + 1) * d.index_bytes;  // indices + offsets
    const double grad_or_out = (t.sequence ? accesses[i] : batch) * t.dim * 4.0;       // fp32 rows: one per bag, or per index unpooled
    w.accesses += accesses[i];
    w.unique_rows += unique[i];
    if (fwd && cached) {
      // The prefetch looks the batch's indices up in the cache and fills the misses: each
      // miss reads a row from host memory and, once the cache is full, writes back the
      // (updated) row it evicts. Misses of an LRU over the lookup stream, at most the unique rows.
      const double hit = lru_hit_rate(t.distribution, static_cast<double>(t.rows), t.cache_rows, accesses[i]);
      const double misses = std::min(unique[i], accesses[i] * (1 - hit));
      cached_accesses += accesses[i];
      cached_hits += accesses[i] * hit;
      prefetch_read += misses * row_bytes[i];
      prefetch_sort += accesses[i] * kSortBytesPerIndex;
    }
    if (fwd && uvm) {
      // Host rows pass through L2, which keeps the hot ones: an LRU of this table's share of
      // L2 over the lookup stream (Che's approximation, as for the HBM cache), never fewer
      // fetches than the unique rows.
      const double l2_rows = kEmbeddingL2Share * gpu.l2_cache / row_bytes[i] / concurrent;
      const double l2_hit = lru_hit_rate(t.distribution, static_cast<double>(t.rows), l2_rows, accesses[i]);
      kernel_host_read += std::max(unique[i], accesses[i] * (1 - l2_hit)) * row_bytes[i];
      w.dram_bytes += idx + grad_or_out;
      w.l2_bytes += accesses[i] * row_bytes[i];
      w.flops += accesses[i] * t.dim;
    } else if (fwd) {
      w.dram_bytes += idx + unique[i] * row_bytes[i] + repeats * (1 - w.l2_hit) * row_bytes[i] + grad_or_out;
      w.l2_bytes += accesses[i] * row_bytes[i];  // every row request passes through L2, hit or miss
      w.flops += accesses[i] * t.dim;
    } else {
      double state = 0;  // optimizer state bytes per unique row, read and written
      switch (d.optimizer) {
        case EmbeddingOptimizer::kSgd: state = 0; break;
        case EmbeddingOptimizer::kRowwiseAdagrad: state = 2 * 4.0; break;
        case EmbeddingOptimizer::kAdam: state = 2 * 2 * t.dim * 4.0; break;
        case EmbeddingOptimizer::kAdagrad: state = 2 * t.dim * 4.0; break;
      }
      // Host-memory rows and (for both host kinds) optimizer state are read and written
      // over the link instead of HBM; the cached rows of fused_uvm_caching are in HBM.
      const double host_bytes = (uvm ? 2 * row_bytes[i] : 0) + (uvm || cached ? state : 0);
      kernel_host_read += unique[i] * host_bytes / 2;
      kernel_host_write += unique[i] * host_bytes / 2;
      w.dram_bytes += idx + grad_or_out + unique[i] * (2 * row_bytes[i] + state) - unique[i] * host_bytes;
      w.sort_bytes += accesses[i] * kSortBytesPerIndex;
      w.l2_bytes += accesses[i] * t.dim * 4.0;  // gradient rows gathered per access, mostly from L2
      w.flops += accesses[i] * t.dim * 2;
    }
  }
  w.dim_factor = small_dim_factor(dim_sum / n_tables);
  w.dram_at_peak = w.dram_bytes / gpu.memory_bandwidth * w.dim_factor;
  w.sort_at_peak = w.sort_bytes / gpu.memory_bandwidth;
  w.l2_at_peak = w.l2_bytes / gpu.l2_bandwidth;
  // One warp slot per bag: the kernel runs ceil(bags / slots) waves of bags, each as long
  // as a bag's dependent row fetches (mean pooling); the last wave may be partly empty.
  const double bags = batch * n_tables;
  w.bag_waves = std::ceil(bags / slots);
  w.row_rounds = w.bag_waves * accesses_sum / bags;
  w.host_read_bytes = kernel_host_read + prefetch_read;
  w.host_write_bytes = kernel_host_write + prefetch_read;  // each fill evicts one row
  w.host_overlapped = fwd ? kernel_host_read / (kHostGatherEfficiency * h2d)
                          : std::max(kernel_host_read / h2d, kernel_host_write / d2h) / kHostUpdateEfficiency;
  if (prefetch_read > 0 || prefetch_sort > 0) {
    w.prefetch_launches = kCachePrefetchKernels;
    w.host_prefetch = std::max(prefetch_read / h2d, prefetch_read / d2h) / kHostUpdateEfficiency + prefetch_sort / (gpu.memory_bandwidth * gpu.efficiency.memory) +
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

Estimate predict_embedding(const EmbeddingDesc& d, const GpuSpec& gpu) {
  Estimate e;
  const bool fwd = d.pass == EmbeddingPass::kForward;
  e.predictor = fwd ? "embedding_forward.spec_l2" : "embedding_backward.spec_l2";
  if (d.tables.empty() || d.batch <= 0) {
    e.time = gpu.efficiency.min_kernel_time;
    e.bound = "latency";
    return e;
  }
  const EmbeddingWork w = embedding_work(d, gpu);
  // The sort traffic is HBM traffic of the same kernel sequence. It is per index, so the
  // small-dimension factor of the row traffic does not apply to it (with it, a wider row
  // would make the backward faster).
  const double dram_time = (w.dram_at_peak + w.sort_at_peak) / gpu.efficiency.memory;
  const double l2_time = w.l2_at_peak;
  e.flops = w.flops;
  e.dram_bytes = w.dram_bytes + w.sort_bytes;
  e.l2_bytes = w.l2_bytes;
  e.bound = dram_time >= l2_time ? "memory" : "l2";
  e.time = std::max(dram_time, l2_time) + gpu.efficiency.min_kernel_time;
  if (!fwd) {
    e.time += kEmbeddingBackwardExtraKernels * gpu.efficiency.min_kernel_time;
    e.launches = 1 + kEmbeddingBackwardExtraKernels;
  }
  e.launches += w.prefetch_launches;
  add_host_memory_time(e, w, gpu);
  return e;
}

Estimate predict_elementwise(const ElementwiseDesc& d, const GpuSpec& gpu) {
  Estimate e;
  e.predictor = "elementwise.spec_roofline";
  const double n = static_cast<double>(d.elements);
  e.flops = n * d.flops_per_element;
  e.dram_bytes = n * d.bytes_per_element;
  const double eff = d.op == "concat" || d.op == "copy" ? gpu.efficiency.copy : gpu.efficiency.memory;
  const double compute = e.flops / gpu.peak_fp32;
  const double memory = e.dram_bytes / (gpu.memory_bandwidth * eff);
  e.bound = compute > memory ? "compute" : "memory";
  e.time = std::max(compute, memory) + gpu.efficiency.min_kernel_time;
  return e;
}

Estimate predict_attention(const AttentionDesc& a, const GpuSpec& gpu) {
  Estimate e;
  const bool fwd = a.pass == AttentionPass::kForward;
  e.predictor = fwd ? "attention_forward.spec_flash" : "attention_backward.spec_flash";
  const double bh = double(a.batch) * double(a.heads);
  // A causal mask halves the work; a sliding window keeps its share of the score blocks.
  const double causal = a.window > 0 ? attention_mask_fraction(a) : a.causal ? 0.5 : 1.0;
  // QK^T over head_dim, PV over the value dimension: 2 FLOPs per multiply-add each.
  const double dims = double(a.head_dim) + double(a.value_dim());
  const double fwd_flops = 2.0 * bh * double(a.seq_q) * double(a.seq_kv) * dims * causal;
  e.flops = fwd ? fwd_flops : 2.5 * fwd_flops;
  const double elem = dtype_bytes(a.dtype);
  const double qo = double(a.batch) * a.heads * a.seq_q * dims * elem;     // Q and O (backward: dQ and dO too)
  const double kv = double(a.batch) * a.kv_heads * a.seq_kv * dims * elem;  // K and V (backward: dK and dV too)
  const double lse = double(a.batch) * a.heads * a.seq_q * 4.0;
  e.dram_bytes = fwd ? qo + kv + lse : 2 * qo + 2 * kv + 2 * lse;
  const double compute = e.flops / (gpu.peak(a.dtype) * (fwd ? kFlashForwardEfficiency : kFlashBackwardEfficiency));
  const double memory = e.dram_bytes / (gpu.memory_bandwidth * gpu.efficiency.memory);
  e.bound = compute >= memory ? "compute" : "memory";
  e.launches = fwd ? 1 : 2;
  e.time = std::max(compute, memory) + e.launches * gpu.efficiency.min_kernel_time;
  return e;
}

AttentionWork attention_work(const AttentionDesc& a, const GpuSpec& gpu) {
  AttentionWork w;
  const bool fwd = a.pass == AttentionPass::kForward;
  const double dims = double(a.head_dim) + double(a.value_dim());
  w.mask_fraction = attention_mask_fraction(a);
  const double fwd_flops = 2.0 * double(a.batch) * double(a.heads) * double(a.seq_q) * double(a.seq_kv) * dims * w.mask_fraction;
  w.flops = fwd ? fwd_flops : 2.5 * fwd_flops;
  // One CTA per 128 queries of one head: the last wave is as long as a full one.
  const double tiles = double(a.batch) * double(a.heads) * std::ceil(double(a.seq_q) / 128.0);
  const double sms = std::max(1, gpu.sm_count);
  const double wave_factor = std::ceil(tiles / sms) / (tiles / sms);
  const double head_dim_factor = std::sqrt(128.0 / double(std::clamp<std::int64_t>(a.head_dim, 1, 128)));
  w.compute_at_peak = w.flops * wave_factor * head_dim_factor / gpu.peak(a.dtype);
  const double elem = dtype_bytes(a.dtype);
  const double qo = double(a.batch) * a.heads * a.seq_q * dims * elem;
  const double kv = double(a.batch) * a.kv_heads * a.seq_kv * dims * elem;
  const double lse = double(a.batch) * a.heads * a.seq_q * 4.0;
  w.bytes = fwd ? qo + kv + lse : 2 * qo + 2 * kv + 2 * lse;
  w.memory_at_peak = w.bytes / gpu.memory_bandwidth;
  w.launches = fwd ? 1 : 2;
  return w;
}

Estimate predict_memcpy(const MemcpyDesc& m, const GpuSpec& gpu) {
  constexpr double kPcieEfficiency = 0.76;
  Estimate e;
  e.predictor = "memcpy.spec";
  e.dram_bytes = m.bytes;
  if (m.kind == CopyKind::kDeviceToDevice) {
    e.bound = "memory";
    e.time = 2 * m.bytes / (gpu.memory_bandwidth * gpu.efficiency.copy) + gpu.efficiency.min_kernel_time;
  } else {
    e.bound = "pcie";
    e.time = m.bytes / (gpu.pcie_bandwidth * kPcieEfficiency) + gpu.efficiency.min_kernel_time;
  }
  return e;
}

}  // namespace perfcast
