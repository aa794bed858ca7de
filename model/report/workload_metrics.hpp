#pragma once
/// \file workload_metrics.hpp
/// Throughput figures derived from a prediction: samples/s for every workload, tokens/s
/// and model FLOPs utilisation (MFU) for Transformers, per-table embedding lookup bandwidth
/// for DLRM, and the split of the critical rank's iteration into compute, exposed
/// communication per group, exposed copies, host-bound idle and the remaining idle time
/// (pipeline bubble for pipelined Transformers, waiting for other ranks otherwise).

#include <string>
#include <vector>

#include "model/predict/predict.hpp"

namespace perfcast {

struct TableLookupRate {
  std::string name;
  double bytes_per_iteration = 0;  ///< batch x pooling x dim x embedding dtype bytes
  double bandwidth_GBps = 0;       ///< bytes_per_iteration / iteration time / 1e9
};

struct BreakdownPart {
  std::string name;   ///< "compute", "exposed tp communication", ..., "pipeline bubble"
  Seconds time = 0;
};

struct WorkloadMetrics {
  double samples_per_s = 0;
  double tokens_per_s = 0;           ///< Transformers: global_batch x seq_len / iteration time
  double model_flops_per_iteration = 0;  ///< Transformers: see model_flops_formula
  double peak_flops_per_gpu = 0;     ///< dense tensor-core peak of the GPU for the workload dtype
  double mfu = 0;                    ///< model FLOPs / (iteration time x GPUs x peak), 0..1
  std::vector<TableLookupRate> tables;  ///< DLRM
  int breakdown_rank = 0;            ///< the rank on the critical path
  std::vector<BreakdownPart> breakdown;  ///< sums to that rank's period
};

/// Model FLOPs per token of a Transformer, stated as used (PaLM, Chowdhery et al. 2022,
/// appendix B): 6 N + 12 L h s, N = parameters, L = layers, h = hidden, s = sequence length.
/// Recomputation is not counted (model FLOPs, not hardware FLOPs).
inline constexpr const char* kModelFlopsFormula = "6 N + 12 L h s FLOPs per token (PaLM appendix B), no recomputation";
/// The same with multi-latent attention, whose heads are not h / n wide: 6 L s n (d_qk + d_v)
/// for the attention scores and values (12 L h s when n d_qk = n d_v = h).
inline constexpr const char* kModelFlopsFormulaMla =
    "6 N + 6 L s n (d_qk + d_v) FLOPs per token (PaLM appendix B with MLA's head widths), no recomputation";
/// The same where "head_dim" makes heads x head_dim differ from h (Qwen3, Gemma): 12 L s n d.
inline constexpr const char* kModelFlopsFormulaHeadDim =
    "6 N + 12 L s n d FLOPs per token (PaLM appendix B with n heads of d elements), no recomputation";
/// Diffusion transformers (dit_model_flops_per_sample over the video tokens): the parameters
/// a token meets, the text keys and values and the per-sample conditioning, each counted where
/// it applies, and the attention scores and values of self- and cross-attention.
inline constexpr const char* kModelFlopsFormulaDit =
    "(6 (N_token s + N_text s_text + N_sample) + 12 L h s (s + s_text)) / s FLOPs per video token (PaLM appendix B per "
    "sample, text keys / values and adaLN counted where they apply), no recomputation";
/// The formula that applies to `w`.
[[nodiscard]] inline const char* model_flops_formula(const TransformerSpec& w) {
  if (w.diffusion()) return kModelFlopsFormulaDit;
  if (w.mla.enabled()) return kModelFlopsFormulaMla;
  return w.attention_width() == w.hidden ? kModelFlopsFormula : kModelFlopsFormulaHeadDim;
}

[[nodiscard]] WorkloadMetrics workload_metrics(const Prediction& p);

}  // namespace perfcast
