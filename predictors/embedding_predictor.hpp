#pragma once
/// \file embedding_predictor.hpp
/// The table-batched embedding (FBGEMM TBE) model: a multi-table lookup or its backward as
/// the kernels it runs, built from what they do (docs/embedding.md, "The embedding model").
///
/// Forward (one kernel): every looked-up row is read once from HBM or L2, indices and
/// offsets are read and the outputs written. Its time is the larger of three limits,
/// combined as a p-norm (both cannot be met at once when they are close):
///  - HBM: rows read at random (unique rows, and the repeats L2 does not keep) cost their
///    sector-rounded bytes plus a fixed per-row cost `forward_row_cost` (a DRAM burst and
///    row activation per scattered row), streamed bytes cost their bytes, all at the GPU's
///    streaming efficiency;
///  - L2: every row request passes through L2;
///  - dependent loads: a warp slot (SMs x 45 warps, FBGEMM's achieved occupancy) serves one
///    bag at a time, loading offsets, indices and rows in turn: waves of bags x
///    (`wave_time` + (pooling - 1) x `row_time`).
/// Backward (8 kernels plus the sort's): linearizing the indices, a radix sort of
/// (row, position) pairs with one pass per 8 key bits (CUB onesweep: a histogram kernel,
/// an exclusive sum and the passes, or one single-tile kernel for small inputs), the
/// run-length encoding of the sorted rows (their unique rows and segment lengths), a scan,
/// the search for long segments, then the segment reduction with the optimizer update
/// (warp- and CTA-per-row kernels): each index gathers its bag's gradient row (from L2 when
/// the gradient slices of the tables in flight fit in it), each unique row's weights and
/// optimizer state are read and written once. Weighted features add the per-sample-weight
/// gradient (each index's row and gradient read once more). A non-fused optimizer writes
/// the unique rows' gradients and reads them back in two more kernels. The optimizer
/// `none` writes a dense gradient table instead (zeroed first). Time = kernels x
/// `subkernel_time` + sort bytes at CUB onesweep's efficiency + the p-norm of the random
/// traffic's HBM time (per-row cost `backward_row_cost`) and the dependent loads of the
/// indices (waves of `backward_warps_per_sm` warps per SM x `wave_time`).
///
/// Host-memory tables (fused_uvm, fused_uvm_caching) add their host-link time
/// (add_host_memory_time), unchanged from docs/embedding.md "Tables in host memory".

#include <string_view>

#include "predictors/estimate.hpp"
#include "predictors/kernel_desc.hpp"
#include "topology/gpu_spec.hpp"

namespace perfcast {

/// The fitted constants of the TBE model (embedding_predictor.hpp file comment). Fitted by
/// build/bench/perfcast_embedding_check --fit (docs/embedding.md, "Leave one source out"): the
/// forward's on the forward rows, then the backward's on the backward and forward+backward
/// rows of the same sources with the forward fixed; each source's rows weigh equally.
struct TbeCoefficients {
  // forward
  double forward_norm = 1000;        ///< p of the p-norm of the HBM, L2 and dependent-load limits (>= 1000: their max)
  Bytes forward_row_cost = 0;        ///< bytes-equivalent cost of one scattered row read, on top of its bytes
  Seconds wave_time = 2.0e-6;        ///< one wave of dependent loads (a bag, or a backward index), s;
                                     ///< a long segment of the backward's CTA-per-row kernel takes 7/3 of it
  Seconds row_time = 0.9e-6;         ///< each further row of a bag in a wave, s
  // backward
  double backward_warps_per_sm = 45; ///< warp slots per SM of the segment-reduction kernels
  double backward_norm = 1000;       ///< p of the p-norm of the random traffic and dependent loads (>= 1000: their max)
  Bytes backward_row_cost = 256;     ///< bytes-equivalent cost of one scattered row read or write
  Seconds subkernel_time = 9e-6;     ///< each backward sub-kernel takes at least this, s
  bool operator==(const TbeCoefficients&) const = default;
};

/// The shipped coefficients: fitted on all four sources of docs/embedding.md (the HTA A100
/// trace, the PARAM V100 trace, FBGEMM on one H100 from recsys-examples, TorchRec's
/// batch_index_select_dim0 on a 2.40 TB/s H100); each source's held-out error is there.
inline constexpr TbeCoefficients kTbeFitted{};

/// Share of the HBM peak CUB's onesweep radix sort reaches: 29.4 G 32-bit keys/s on an A100
/// (Adinets and Merrill, "Onesweep: A Faster Least Significant Digit Radix Sort for GPUs",
/// 2022), 4 passes of one read and one write plus the histogram read, 36 B a key = 1.06 TB/s
/// of the A100 40GB's 1,555 GB/s.
inline constexpr double kSortEfficiency = 0.68;

/// Batched embedding lookup or backward (see the file comment), with kTbeFitted.
[[nodiscard]] Estimate predict_embedding(const EmbeddingDesc& e, const GpuSpec& gpu);
/// The same with other coefficients (the fit and its leave-one-source-out check).
[[nodiscard]] Estimate predict_embedding(const EmbeddingDesc& e, const GpuSpec& gpu, const TbeCoefficients& k);

/// The embedding model's work terms, shared by the spec-derived and the calibrated
/// predictor (kernel_calibration.hpp). The whole multi-table op is one kernel (forward) or
/// one kernel sequence (backward): the terms are of all tables together.
struct EmbeddingWork {
  Bytes dram_bytes = 0;    ///< HBM bytes besides the sort: random_bytes + stream_bytes
  Bytes random_bytes = 0;  ///< rows read or written at scattered addresses (sector-rounded)
  double random_rows = 0;  ///< how many such rows (each costs a per-row overhead)
  Bytes stream_bytes = 0;  ///< read or written in order: indices, offsets, outputs, a dense gradient table
  Bytes sort_bytes = 0;    ///< backward only: linearize, radix sort, run-length encoding
  int sort_passes = 0;     ///< backward only: radix passes (8 key bits each)
  int backward_kernels = 0;  ///< backward only: kernels of the sequence (the update's included)
  double long_segments = 0;  ///< backward only: unique rows of >= 32 indices (FBGEMM's CTA-per-row segments)
  double segment_rounds = 0; ///< backward only: long segments one CTA reduces in turn x waves of busy CTAs
  Bytes l2_bytes = 0;      ///< L2: every row request (forward), every gradient row gathered (backward)
  double flops = 0;
  double accesses = 0;     ///< row lookups, all tables
  double unique_rows = 0;  ///< expected distinct rows, all tables
  double l2_hit = 1;       ///< share of repeated row requests served by L2 (forward)
  Seconds dram_at_peak = 0;  ///< dram_bytes / HBM peak
  Seconds sort_at_peak = 0;  ///< sort_bytes / HBM peak
  Seconds l2_at_peak = 0;    ///< l2_bytes / L2 peak
  double bag_waves = 0;      ///< ceil(bags / (SMs x 45 warps))
  double mean_pooling = 0;   ///< indices per bag, over the tables
  double row_rounds = 0;     ///< bag_waves x mean pooling (the calibrated model's latency term)
  // Host-memory tables (fused_uvm, fused_uvm_caching), docs/embedding.md:
  Bytes host_read_bytes = 0;   ///< host -> device over the host link, this kernel and its cache prefetch
  Bytes host_write_bytes = 0;  ///< device -> host (updated rows, evicted cache rows, optimizer state)
  Seconds host_overlapped = 0; ///< link time of the rows the kernel itself reads or writes in host memory
  Seconds host_prefetch = 0;   ///< forward of cached tables: the prefetch that fills the cache, before the lookup
  int prefetch_launches = 0;   ///< kernels of that prefetch (counted in the estimate's launches)
  double cache_hit = 1;        ///< lookup-weighted LRU hit rate of the cached tables (1: none)
};
[[nodiscard]] EmbeddingWork embedding_work(const EmbeddingDesc& e, const GpuSpec& gpu);

/// The backward's chain of long-segment reductions in FBGEMM's CTA-per-row kernel, s: the
/// segment rounds of `w` times one segment's dependent loads (7/3 of `k.wave_time`, which
/// covers a forward bag's 3). Zero when no row is looked up 32 times or more. The backward
/// adds it to its dependent-load limit, so skew or fewer rows can make a backward slower
/// (the HTA A100 trace: a 1,000-row table looked up 61,072 times spends 68 us in that kernel).
[[nodiscard]] Seconds segment_chain_time(const EmbeddingWork& w, const TbeCoefficients& k);

/// The TBE model's time for work `w` with coefficients `k`, before any host-link time (the
/// file comment's formulas; predict_embedding is this plus the host link). Its limiting term:
/// "memory", "l2" or "latency" (static strings).
struct TbeTime {
  Seconds time = 0;
  std::string_view bound;
};
[[nodiscard]] TbeTime tbe_time(const EmbeddingWork& w, EmbeddingPass pass, const GpuSpec& gpu, const TbeCoefficients& k);

/// Host-memory tables: the kernel's streaming time (e.time less its launches' floor) becomes
/// at least the link time of the rows it reads or writes in host memory (bound
/// "host_link"), and a forward of cached tables adds its prefetch (and its launches) in
/// front. Applied after the HBM-side estimate, spec-derived or calibrated.
void add_host_memory_time(Estimate& e, const EmbeddingWork& w, const GpuSpec& gpu);

/// HBM time of the unique rows' read-modify-write at the GPU's peak, s: the floor no
/// backward goes below (weights and optimizer state of every unique row read and written).
[[nodiscard]] Seconds unique_row_update_floor(const EmbeddingDesc& e, const GpuSpec& gpu);

}  // namespace perfcast
