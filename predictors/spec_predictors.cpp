#include "predictors/spec_predictors.hpp"

#include <algorithm>
#include <cmath>

namespace perfcast {
namespace {

double ceil_div(double a, double b) { return std::ceil(a / b); }

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

struct Tile {
  double m, n;
};

/// The tile a library heuristic would run (GemmTiling::choose_tile): among power-of-two
/// tiles within the bounds, no edge above the power of two at or above the matrix edge, the
/// one whose waves of tile FLOPs take least (fewer, larger tiles for large matrices; smaller
/// tiles that occupy more SMs for small ones); a tie keeps the larger tile.
Tile chosen_tile(const GemmDesc& g, const GpuSpec& gpu, const GemmTiling& tiling, bool simt) {
  const double sms = gpu.sm_count;
  const double lo_m = simt ? tiling.min_m_fp32 : tiling.min_m, lo_n = simt ? tiling.min_m_fp32 : tiling.min_n;
  const double hi_m = tile_edge(g.m, lo_m, tiling.max_m);
  const double hi_n = tile_edge(g.n, lo_n, simt ? tiling.max_n_fp32 : tiling.max_n);
  Tile best{hi_m, hi_n};
  double best_time = INFINITY;
  for (double tm = hi_m; tm >= lo_m; tm /= 2) {
    for (double tn = hi_n; tn >= lo_n; tn /= 2) {
      const double waves = ceil_div(ceil_div(g.m, tm) * ceil_div(g.n, tn) * g.batch, sms);
      const double t = waves * tm * tn;  // x 2k / per-SM rate, the same for every tile
      if (t < best_time * (1 - 1e-12)) {
        best_time = t;
        best = {tm, tn};
      }
    }
  }
  return best;
}

}  // namespace

GemmWork gemm_work(const GemmDesc& g, const GpuSpec& gpu, const GemmTiling& tiling) {
  GemmWork w;
  const double elem = dtype_bytes(g.dtype);
  const double sms = gpu.sm_count;
  const double per_sm = gpu.peak(g.dtype) / sms;
  const bool simt = g.dtype == DType::kFp32;
  const Tile chosen = tiling.choose_tile ? chosen_tile(g, gpu, tiling, simt)
                                         : Tile{tile_edge(g.m, simt ? tiling.min_m_fp32 : tiling.min_m, tiling.max_m),
                                                tile_edge(g.n, tiling.min_n, simt ? tiling.max_n_fp32 : tiling.max_n)};
  const double tm = chosen.m, tn = chosen.n;
  const double tiles = ceil_div(g.m, tm) * ceil_div(g.n, tn) * g.batch;
  double split = 1;
  if (tiles < sms && g.k >= 1024) split = std::max(1.0, std::min(std::floor(sms / tiles), std::floor(g.k / 512.0)));
  const double waves = ceil_div(tiles * split, sms);
  const double k_per_split = ceil_div(g.k, split);
  w.compute_at_peak = waves * 2.0 * tm * tn * k_per_split / per_sm;
  const double out_elem = (g.dtype == DType::kFp32 || g.dtype == DType::kTf32) ? 4.0 : 2.0;
  double bytes = g.batch * ((double(g.m) * g.k + double(g.k) * g.n) * elem + double(g.m) * g.n * out_elem);
  if (g.bias_epilogue) bytes += g.batch * double(g.n) * out_elem;
  bytes += g.batch * double(g.epilogue_inputs) * double(g.m) * g.n * out_elem;  // operands of a fused epilogue
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
