#include "predictors/registry.hpp"

#include "predictors/spec_predictors.hpp"

namespace perfcast {

const std::vector<RegistryEntry>& builtin_registry() {
  static const std::vector<RegistryEntry> entries = {
      {"gemm.spec_roofline", "gemm",
       "wave- and tile-quantized roofline with split-K for short, wide problems",
       "GPU spec peaks x gemm efficiency 0.77 (A100 FP32 measured 15027/19500 GFLOP/s, docs/reference-paper.md s.3)"},
      {"embedding_forward.spec_l2", "embedding_forward",
       "HBM bytes of expected unique rows + L2 hits of repeats within the concurrent tables' working set; host-memory "
       "tables (fused_uvm): rows missing an LRU share of L2 over the host link; fused_uvm_caching: an LRU cache prefetch first",
       "HiPC heuristic (docs/reference-paper.md s.4.1): 45 warps/SM, 0.9 of L2, f(D) 1.55/1.1; host link at 0.42 (gather) / "
       "0.605 (update) of its rate, fitted to FBGEMM UVM timings on H100 (docs/embedding.md)"},
      {"embedding_backward.spec_l2", "embedding_backward",
       "index sort + per-unique-row read-modify-write of weights and optimizer state (over the host link for host-memory rows and state)",
       "same as forward; sort cost 96 B/index assumed (4 radix passes of 12-byte pairs)"},
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
