#include "predictors/spec_predictors.hpp"

#include <algorithm>
#include <cmath>

namespace perfcast {
namespace {

double ceil_div(double a, double b) { return std::ceil(a / b); }

/// Tile edge that cuBLAS-like heuristics pick for a matrix edge: the next power of two at
/// or above it, between 16 and kGemmTile (small matrices get small tiles).
double tile_edge(std::int64_t extent) {
  double t = 16;
  while (t < static_cast<double>(extent) && t < static_cast<double>(kGemmTile)) t *= 2;
  return t;
}

}  // namespace

GemmWork gemm_work(const GemmDesc& g, const GpuSpec& gpu) {
  GemmWork w;
  const double elem = dtype_bytes(g.dtype);
  const double sms = gpu.sm_count;
  const double per_sm = gpu.peak(g.dtype) / sms;
  const double tm = tile_edge(g.m), tn = tile_edge(g.n);
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
  if (split > 1) bytes += split * double(g.m) * g.n * 4.0 * 2.0;  // partial sums written and reduced
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
  const double causal = a.causal ? 0.5 : 1.0;
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
