#pragma once
/// \file spec_predictors.hpp
/// v1 predictors derived from the GPU's spec sheet and the named efficiency factors in
/// GpuSpec::efficiency. Each states its formula; calibrated predictors (kernel_calibration.hpp) replace
/// them per GPU.

#include "predictors/embedding_predictor.hpp"
#include "predictors/estimate.hpp"
#include "predictors/kernel_desc.hpp"
#include "topology/gpu_spec.hpp"

namespace perfcast {

/// GEMM: wave- and tile-quantized roofline. Output tiles of kGemmTile x kGemmTile are
/// spread over the SMs in waves; each wave costs one tile's FLOPs at the per-SM rate
/// (peak x efficiency / SMs). When the tiles fill less than one wave and k is long,
/// split-K divides k so that more SMs work (and adds a reduction of the partial sums).
/// time = max(compute, bytes / (HBM x memory efficiency)) + min kernel time.
[[nodiscard]] Estimate predict_gemm(const GemmDesc& g, const GpuSpec& gpu);

/// The GEMM model's work terms at 100% efficiency, shared by the spec-derived and the
/// calibrated predictor: time = overhead + max(compute_at_peak / e_compute,
/// memory_at_peak / e_memory).
struct GemmWork {
  Seconds compute_at_peak = 0;  ///< waves x tile FLOPs at the per-SM peak
  Seconds memory_at_peak = 0;   ///< bytes at the HBM peak
  double flops = 0;
  Bytes bytes = 0;
  int split_k = 1;
};

/// How the GEMM model cuts the output into CTA tiles: each edge is the power of two at or
/// above the matrix edge, clamped to [min, max] (small matrices get small tiles, as
/// cuBLAS-like heuristics pick them). Split-K: when the tiles fill less than one wave and
/// k >= 1024, k is divided over floor(SMs / tiles) slices (at least 512 of k each).
struct GemmTiling {
  double min_m = 16, max_m = 128, min_n = 16, max_n = 128;
  double min_m_fp32 = 16, max_n_fp32 = 128;  ///< FP32 (SIMT) kernels
  bool split_k_traffic = true;  ///< count the fp32 partial sums split-K writes and reduces
  /// Pick the tile as a library's heuristic does instead of the power of two above each edge:
  /// of the power-of-two tiles within the bounds (no edge beyond the matrix's), the one whose
  /// waves of tile FLOPs finish first. Fitted on 6,000 cuBLASLt GEMMs of an H200
  /// (data/gpu-measurements/h200-2026-11-27): a 3080x128x200 fp32 GEMM ran 10.0 us in cuBLAS's
  /// 32x32 SIMT tiles where one wave of 128x128 tiles predicted 18.7 us.
  bool choose_tile = false;
};
/// The spec-derived model's tiles (and v1 calibrations'): 16..128 on both edges.
inline constexpr GemmTiling kSpecGemmTiling{};
/// Hopper kernels (calibrations fitted by `perfcast kernels --fit`, kernel model 2): M tiles
/// 64..128 (a warpgroup MMA covers 64 rows; FP32 SIMT kernels 32..128), N tiles 64..256
/// (CUTLASS 3 / cuBLAS sm90 tile shapes 128x128, 128x256, 64x256 ...; FP32 up to 128), and
/// split-K's partial sums left to the fitted memory term; the tile chosen per shape
/// (choose_tile; FP32 SIMT tiles 64..128 on both edges: allowing 32 fitted the H200's fp32
/// GEMMs of 8-30 us 38% too fast, 64 within 19-23%).
inline constexpr GemmTiling kHopperGemmTiling{64, 128, 64, 256, 64, 128, false, true};

[[nodiscard]] GemmWork gemm_work(const GemmDesc& g, const GpuSpec& gpu, const GemmTiling& tiling = kSpecGemmTiling);

/// Work terms of a fused attention kernel at 100% efficiency, for the calibrated predictor
/// (kernel model 2): time = launches x overhead + max(compute_at_peak / e, memory_at_peak / e_memory).
/// FLOPs as predict_attention counts them, with the mask counted in 128 x 128 score blocks
/// (a causal mask keeps (n + 1) / 2n of n blocks per row, not 1/2; a sliding window keeps the
/// blocks it touches), the last wave of batch x heads x 128-query tiles rounded up to a full
/// wave of SMs, and head dims under 128 slower by sqrt(128 / head_dim) per FLOP
/// (FlashAttention-3, Shah et al. 2024, figs. 5-6 on H100: head dim 64 reaches about 0.65-0.7
/// of head dim 128's FLOP rate in BF16, 0.6 in FP8).
struct AttentionWork {
  Seconds compute_at_peak = 0;  ///< quantized, masked FLOPs at the dtype's tensor peak
  Seconds memory_at_peak = 0;   ///< HBM bytes at the HBM peak
  double flops = 0;             ///< FLOPs as predict_attention reports them (mask counted exactly)
  Bytes bytes = 0;
  double mask_fraction = 1;     ///< share of the 128 x 128 score blocks computed
  int launches = 1;             ///< forward 1; backward 2 (the dO.O preprocessing kernel)
};
[[nodiscard]] AttentionWork attention_work(const AttentionDesc& a, const GpuSpec& gpu);

/// Embedding lookups and their backward: predictors/embedding_predictor.hpp.

/// Streaming kernel: max(FLOPs / FP32 peak, bytes / (HBM x memory efficiency)) + min kernel time.
[[nodiscard]] Estimate predict_elementwise(const ElementwiseDesc& e, const GpuSpec& gpu);

/// Copy: H2D/D2H over PCIe at the GPU's link rate x 0.76 (NCCL's Gen5 model, 48 of 63
/// GB/s, docs/collectives.md section 1.2); D2D reads and writes HBM at the copy efficiency.
[[nodiscard]] Estimate predict_memcpy(const MemcpyDesc& m, const GpuSpec& gpu);

/// Fused attention (FlashAttention-2 style): FLOPs 2 x batch x heads x seq_q x seq_kv x
/// (head_dim + value_dim) forward (QK^T and PV; 4 x ... x head_dim when they are equal),
/// halved under a causal mask; backward 2.5x forward (the
/// scores are recomputed: 5 matmuls instead of 2). HBM bytes: Q, K, V read and O (+ the
/// fp32 log-sum-exp) written forward; Q, K, V, O, dO read and dQ, dK, dV written backward.
/// time = max(FLOPs / (peak x kFlash*Efficiency), bytes / (HBM x memory efficiency))
///        + min kernel time (x2 backward: the dO.O preprocessing kernel).
[[nodiscard]] Estimate predict_attention(const AttentionDesc& a, const GpuSpec& gpu);

/// Share of the tensor-core peak a flash-attention forward / backward kernel reaches.
/// 0.60 / 0.45: assumed from the FlashAttention-2 paper (Dao 2023, figs. 5-6: A100 forward
/// 50-73%, backward 40-63% of the theoretical maximum for head_dim 64-128, seq 512-16k);
/// to be replaced by a profiler sweep (perfcast profile, calibrate kernels).
inline constexpr double kFlashForwardEfficiency = 0.60;
inline constexpr double kFlashBackwardEfficiency = 0.45;

/// Output tile edge of the GEMM model (CUTLASS/cuBLAS Hopper kernels commonly use 128x128
/// or 128x256 CTA tiles; 128 is the conservative choice).
inline constexpr std::int64_t kGemmTile = 128;

}  // namespace perfcast
