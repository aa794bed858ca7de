#include "predictors/registry.hpp"

#include "predictors/spec_predictors.hpp"

namespace perfcast {

const std::vector<RegistryEntry>& builtin_registry() {
  static const std::vector<RegistryEntry> entries = {
      {"gemm.spec_roofline", "gemm",
       "wave- and tile-quantized roofline with split-K for short, wide problems",
       "GPU spec peaks x gemm efficiency 0.77 (A100 FP32 measured 15027/19500 GFLOP/s, docs/reference-paper.md s.3)"},
      {"gemm.calibrated", "gemm",
       "overhead + max(waves x tile FLOPs / e_compute, bytes / e_memory) per family (dtype; kernel model 2: dtype, fp8 scaling "
       "and library on Hopper tiles 64..128 x 64..256)",
       "fitted per GPU: `perfcast calibrate kernels` (configs/calibration/<gpu>.json), or `perfcast kernels --fit` on public "
       "Hopper measurements (data/public-measurements/hopper-kernels, docs/calibration.md)"},
      {"attention_forward.calibrated", "attention_forward",
       "launches x overhead + max(masked 128x128-block FLOPs x wave and head-dim factors / e, bytes / e_memory) per implementation "
       "(flash2, flash3, cudnn, triton, tilelang) and dtype",
       "fitted by `perfcast kernels --fit` on public Hopper measurements (docs/calibration.md); head-dim factor sqrt(128 / d) "
       "from FlashAttention-3 (Shah et al. 2024, figs. 5-6)"},
      {"attention_backward.calibrated", "attention_backward", "the forward's terms for 2.5x the forward FLOPs, two launches",
       "fitted by `perfcast kernels --fit` on public Hopper measurements (docs/calibration.md)"},
      {"elementwise.calibrated", "elementwise",
       "overhead + bytes / (HBM x e_memory); kernel model 2: warm working sets up to twice an L2-resident share served at the L2 rate",
       "fitted per GPU: `perfcast calibrate kernels`, or `perfcast kernels --fit` on public Hopper measurements (docs/calibration.md)"},
      {"memcpy.calibrated", "memcpy", "overhead + bytes / (link or HBM rate x e) by copy direction",
       "fitted per GPU by `perfcast calibrate kernels` (configs/calibration/<gpu>.json)"},
      {"embedding_forward.spec_tbe", "embedding_forward",
       "FBGEMM TBE forward: p-norm of HBM (scattered rows with a per-row cost, streamed indices and outputs), L2 (every "
       "row request) and dependent loads (waves of bags x (wave time + extra rows x row time)); host-memory tables "
       "(fused_uvm): rows missing an LRU share of L2 over the host link; fused_uvm_caching: an LRU cache prefetch first",
       "45 warps/SM, 0.9 of L2 (docs/reference-paper.md s.4.1); wave 2.0 us, row 0.9 us, the max of the limits, fitted on 4 public "
       "sources, each left out in turn (build/bench/perfcast_embedding_check, docs/embedding.md); host link 0.42 / 0.605 "
       "of its rate (FBGEMM UVM timings on H100)"},
      {"embedding_backward.spec_tbe", "embedding_backward",
       "FBGEMM TBE backward: 8 kernels + the radix sort's (8 key bits a pass) at >= 9 us each, linearize/sort/run-length "
       "bytes at CUB onesweep's 0.68 of HBM, then the larger of the segment reduction's scattered traffic (gradient rows, "
       "unique rows' weights and optimizer state, per-row cost 288 B) and its dependent loads (40 warps/SM x 2.0 us "
       "waves); fused or separate optimizer; over the host link for host-memory rows and state",
       "fitted on the HTA A100 and PARAM V100 traces, FBGEMM on H100 (recsys-examples) and batch_index_select_dim0 on "
       "H100 (TorchRec PR 4688), each left out in turn (docs/embedding.md); onesweep rate: Adinets and Merrill 2022"},
      {"embedding_forward.calibrated", "embedding_forward",
       "overhead + max(HBM bytes / e_memory, L2 bytes / e_l2, bag waves x pooling x round time), one kernel for all tables",
       "fitted per GPU by `perfcast calibrate kernels` (configs/calibration/<gpu>.json) from configs/sweeps/embedding.json"},
      {"embedding_backward.calibrated", "embedding_backward",
       "the forward's terms for the backward's bytes + index-sort bytes / e_sort",
       "fitted per GPU by `perfcast calibrate kernels` (configs/calibration/<gpu>.json) from configs/sweeps/embedding.json"},
      {"elementwise.spec_roofline", "elementwise", "max(FLOPs / FP32 peak, bytes / HBM bandwidth)",
       "memory efficiency 0.89 (A100 measured 1391/1555 GB/s), concat/copy 0.79 (reference concat model)"},
      {"memcpy.spec", "memcpy", "PCIe copies at 0.76 of the link rate; device copies read + write HBM",
       "NCCL's Gen5 x16 model 48/63 GB/s (docs/collectives.md s.1.2)"},
      {"measured", "measured", "a kernel duration read from a profiler trace (perfcast replay)",
       "the PyTorch profiler (Kineto) trace being replayed"},
      {"attention_forward.spec_flash", "attention_forward",
       "fused attention: 4*b*h*sq*skv*d FLOPs (halved when causal) at a share of the tensor peak, or Q/K/V/O bytes",
       "tensor-core share 0.60 assumed from FlashAttention-2 (Dao 2023) A100 forward 50-73%"},
      {"attention_backward.spec_flash", "attention_backward",
       "fused attention backward: 2.5x the forward FLOPs (scores recomputed), Q/K/V/O/dO read, dQ/dK/dV written",
       "tensor-core share 0.45 assumed from FlashAttention-2 (Dao 2023) A100 backward 40-63%"},
      {"nccl-alpha-beta-v4", "collective",
       "NCCL's tuning model (ring, tree, NVLS, NVLS tree, CollNet Direct/Chain, PAT x LL/LL128/Simple by node count, size and "
       "topology; NCCL's channel scale-down by size); across NVLink domains NCCL's latency and bandwidth plus fabric tiers, "
       "oversubscription and SHARP; all-to-all with PXN and a per-message NIC cost",
       "NCCL's tuning constants (NVIDIA/nccl src/graph/tuning.cc; docs/collectives-and-runtimes.md); the system file's fabric (its sources: `perfcast list`)"},
      {"calibrated+nccl-alpha-beta-v4", "collective",
       "fitted per collective and node class from nccl-tests tables (one node: latency, per-step latency, bus bandwidth, size "
       "ramp; across nodes: per-protocol scales of NCCL's latency and bandwidth, carried to other node counts as extrapolated); "
       "the spec-derived model elsewhere",
       "the system's collective_calibration file (its measurements, node counts, date and held-out error)"},
  };
  return entries;
}

Estimate predict_kernel(const KernelDesc& k, const GpuSpec& gpu) {
  if (const auto* g = std::get_if<GemmDesc>(&k)) return predict_gemm(*g, gpu);
  if (const auto* e = std::get_if<EmbeddingDesc>(&k)) return predict_embedding(*e, gpu);
  if (const auto* w = std::get_if<ElementwiseDesc>(&k)) return predict_elementwise(*w, gpu);
  if (const auto* a = std::get_if<AttentionDesc>(&k)) return predict_attention(*a, gpu);
  if (const auto* m = std::get_if<MeasuredKernelDesc>(&k)) {
    Estimate e;
    e.time = m->duration;
    e.predictor = "measured";
    e.calibrated = true;  // a measurement, not a spec-derived number
    e.bound = "measured";
    return e;
  }
  return predict_memcpy(std::get<MemcpyDesc>(k), gpu);
}

}  // namespace perfcast
