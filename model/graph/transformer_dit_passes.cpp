/// \file transformer_dit_passes.cpp
/// A video diffusion transformer's rank passes (DitSpec; NeMo's Megatron-Core DiT and
/// Cosmos's GeneralDIT "FA-CA-MLP"): per layer the adaLN modulation, then self-attention,
/// cross-attention to the text embeddings and the MLP, each behind a LayerNorm with
/// modulation and closed by a gated residual; outside the layers the batch (latent video and
/// text embeddings, precomputed by the data pipeline), the noise, the patch and timestep
/// embeddings, the final layer and the EDM loss. Tensor, sequence, context and pipeline
/// parallelism as for the other Transformers: QKV, the cross-attention query and key /
/// value projections and fc1 are column-parallel, the attention outputs and fc2
/// row-parallel; the adaLN modulations, the patch embedding and the final layer are
/// replicated on every TP rank (NeMo builds them as plain nn.Linear).
///
/// Elementwise kernels count their operands (read + written once each, in units of the
/// activation element size e); assumed, not measured, as in transformer_rank_passes.hpp.

#include <fmt/format.h>

#include "model/graph/transformer_rank_passes.hpp"

namespace perfcast::transformer {
namespace {

// adaLN: x (1 + scale) + shift (one fused kernel: read x, write); x + gate y (read both, write).
inline constexpr double kModulateFlops = 2, kGateFlops = 2;
// Backward: d(modulate) reads the output gradient and the normalised input (for the scale's
// gradient) and writes the input gradient; d(gate) reads the output gradient and y (for the
// gate's gradient) and writes y's gradient.
inline constexpr double kModulateBwdFlops = 4, kGateBwdFlops = 3;
inline constexpr double kSiluFlops = 4, kRotaryFlops = 3;

/// The modulation's GEMMs on the per-sample conditioning (`b` rows): the AdaLN-LoRA pair
/// hidden -> r -> chunks x hidden, or one hidden -> chunks x hidden.
std::vector<KernelDesc> adaln_modulation(const TransformerRankContext& c, std::int64_t chunks) {
  const auto& w = c.w;
  const std::int64_t b = w.micro_batch, h = w.hidden, r = w.dit.adaln_lora_dim;
  std::vector<KernelDesc> k{ew("silu", double(b) * h, kSiluFlops, 2 * c.e)};
  if (r > 0) {
    k.push_back(c.gemm(b, r, h));
    k.push_back(c.gemm(b, chunks * h, r));
  } else {
    k.push_back(c.gemm(b, chunks * h, h));
  }
  return k;
}

/// Its backward: input and weight gradients of each GEMM, the SiLU's.
std::vector<KernelDesc> adaln_modulation_backward(const TransformerRankContext& c, std::int64_t chunks) {
  const auto& w = c.w;
  const std::int64_t b = w.micro_batch, h = w.hidden, r = w.dit.adaln_lora_dim;
  std::vector<KernelDesc> k;
  if (r > 0) {
    k = {c.gemm(b, r, chunks * h), c.gemm(chunks * h, r, b), c.gemm(b, h, r), c.gemm(r, h, b)};
  } else {
    k.push_back(c.gemm(b, h, chunks * h));
    k.push_back(c.gemm(chunks * h, h, b));
  }
  k.push_back(ew("silu_backward", double(b) * h, kSiluFlops, 3 * c.e));
  return k;
}

/// The LayerNorm (no weights) and modulation in front of sub-block `p`, on this rank's
/// hidden states.
void add_norm_modulate(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, Phase ph) {
  d.kernels(p + "layernorm", ph, {ew("layernorm", c.hs(), kLayerNormFlops, 2 * c.e), ew("adaln_modulate", c.hs(), kModulateFlops, 2 * c.e)});
}

void add_norm_modulate_backward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p) {
  d.kernels(p + "layernorm", Phase::kBackward,
            {ew("adaln_modulate_backward", c.hs(), kModulateBwdFlops, 3 * c.e), ew("layernorm_backward", c.hs(), kLayerNormBwdFlops, 4 * c.e)});
}

void add_gate(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, Phase ph) {
  d.kernels(p + "gate_residual", ph, {ew("adaln_gate_residual", c.hs(), kGateFlops, 3 * c.e)});
}

void add_gate_backward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p) {
  d.kernels(p + "gate_residual", Phase::kBackward, {ew("adaln_gate_residual_backward", c.hs(), kGateBwdFlops, 3 * c.e)});
}

/// Elements of the queries and keys this rank normalises and rotates (per-head RMSNorm,
/// NeMo's qk_layernorm_per_head; 3D rotary embedding, apply_rope_fusion): `q_tokens` query
/// rows and `k_tokens` key rows of its heads.
double qk_elements(const TransformerRankContext& c, double q_tokens, double k_tokens) {
  return (q_tokens * double(c.heads) + k_tokens * double(c.kv_heads)) * double(c.w.head_dim());
}

/// The cross-attention core on this rank's heads: its query tokens (the rank's CP share of
/// the video) against all the sample's text tokens, no mask, no ring (every CP rank holds
/// the whole text).
AttentionDesc cross_attention(const TransformerRankContext& c, AttentionPass pass) {
  const auto& w = c.w;
  AttentionDesc a{w.micro_batch, c.heads, c.heads, c.tokens / w.micro_batch, w.dit.text_tokens, w.head_dim(), false,
                  w.activation_dtype(), pass};
  a.impl = w.attention_kernel;
  return a;
}

/// Text-embedding rows of one micro-batch.
std::int64_t text_rows(const TransformerRankContext& c) { return c.w.micro_batch * c.w.dit.text_tokens; }
/// Cross-attention key and value widths on this rank.
std::int64_t text_kv_width(const TransformerRankContext& c) { return 2 * c.heads * c.w.head_dim(); }

}  // namespace

void add_dit_layer_forward(const TransformerRankContext& c, TransformerDraft& d, int layer, Phase ph, const std::string& tag) {
  const auto& w = c.w;
  const std::int64_t T = c.tokens, H = w.hidden, q_width = c.heads * w.head_dim();
  const std::string p = fmt::format("layer{}.{}", layer, tag);
  d.kernels(p + "adaln", ph, adaln_modulation(c, 9));
  // Full self-attention over the video tokens.
  const std::string sa = p + "self_attention.";
  add_norm_modulate(c, d, sa, ph);
  d.sp_gather(sa + "all_gather", ph, true);
  d.kernels(sa + "qkv", ph, c.linear(double(T) * H, {c.linear_gemm(T, c.qkv, H)}));
  d.kernels(sa + "qk_norm_rope", ph, {ew("qk_rmsnorm", qk_elements(c, T, T), kLayerNormFlops, 2 * c.e),
                                      ew("rotary_embedding", qk_elements(c, T, T), kRotaryFlops, 2 * c.e)});
  add_attention_core_forward(c, d, sa, ph);
  d.kernels(sa + "dense", ph, c.linear(double(T) * c.attn_out, {c.linear_gemm(T, H, c.attn_out)}));
  d.tp_reduce(sa + "tp_reduce", ph, true);
  add_gate(c, d, sa, ph);
  // Cross-attention: queries from the video, keys and values from the text embeddings.
  const std::string ca = p + "cross_attention.";
  add_norm_modulate(c, d, ca, ph);
  d.sp_gather(ca + "all_gather", ph, true);
  d.kernels(ca + "q", ph, c.linear(double(T) * H, {c.linear_gemm(T, q_width, H)}));
  d.kernels(ca + "kv", ph, c.linear(double(text_rows(c)) * w.dit.text_dim, {c.linear_gemm(text_rows(c), text_kv_width(c), w.dit.text_dim)}));
  d.kernels(ca + "qk_norm", ph, {ew("qk_rmsnorm", qk_elements(c, T, text_rows(c)), kLayerNormFlops, 2 * c.e)});
  d.kernels(ca + "flash_attention", ph, {cross_attention(c, AttentionPass::kForward)});
  d.kernels(ca + "dense", ph, c.linear(double(T) * q_width, {c.linear_gemm(T, H, q_width)}));
  d.tp_reduce(ca + "tp_reduce", ph, true);
  add_gate(c, d, ca, ph);
  // MLP without biases.
  add_norm_modulate(c, d, p + "mlp.", ph);
  add_mlp_forward(c, d, p, ph, {"mlp.", c.ffn1, c.ffn2, false});
  add_gate(c, d, p + "mlp.", ph);
}

void add_dit_layer_backward(const TransformerRankContext& c, TransformerDraft& d, int layer) {
  const auto& w = c.w;
  const Phase ph = Phase::kBackward;
  const std::int64_t T = c.tokens, H = w.hidden, q_width = c.heads * w.head_dim();
  const std::string p = fmt::format("layer{}.backward.", layer);
  auto pair = [&](std::int64_t rows, std::int64_t in, std::int64_t out) {  // dX = dY W, dW = dY^T X
    return c.linear(double(rows) * double(out), {c.linear_gemm(rows, in, out), c.linear_gemm(out, in, rows)});
  };
  add_gate_backward(c, d, p + "mlp.");
  add_mlp_backward(c, d, p, {"mlp.", c.ffn1, c.ffn2, false});
  add_norm_modulate_backward(c, d, p + "mlp.");
  const std::string ca = p + "cross_attention.";
  add_gate_backward(c, d, ca);
  d.sp_gather(ca + "dense.all_gather", ph, true);
  d.kernels(ca + "dense", ph, pair(T, q_width, H));
  d.kernels(ca + "flash_attention", ph, {cross_attention(c, AttentionPass::kBackward)});
  d.kernels(ca + "qk_norm", ph, {ew("qk_rmsnorm_backward", qk_elements(c, T, text_rows(c)), kLayerNormBwdFlops, 4 * c.e)});
  // The text embeddings are inputs (a frozen encoder's, precomputed): only the weight gradient.
  d.kernels(ca + "kv", ph, c.linear(double(text_rows(c)) * text_kv_width(c), {c.linear_gemm(text_kv_width(c), w.dit.text_dim, text_rows(c))}));
  d.sp_gather(ca + "q.all_gather", ph, true, true);
  d.kernels(ca + "q", ph, pair(T, H, q_width));
  d.tp_reduce(ca + "tp_reduce", ph, true);
  add_norm_modulate_backward(c, d, ca);
  const std::string sa = p + "self_attention.";
  add_gate_backward(c, d, sa);
  d.sp_gather(sa + "dense.all_gather", ph, true);
  d.kernels(sa + "dense", ph, pair(T, c.attn_out, H));
  add_attention_core_backward(c, d, sa);
  d.kernels(sa + "qk_norm_rope", ph, {ew("rotary_embedding_backward", qk_elements(c, T, T), kRotaryFlops, 2 * c.e),
                                      ew("qk_rmsnorm_backward", qk_elements(c, T, T), kLayerNormBwdFlops, 4 * c.e)});
  d.sp_gather(sa + "qkv.all_gather", ph, true, true);
  d.kernels(sa + "qkv", ph, pair(T, H, c.qkv));
  d.tp_reduce(sa + "tp_reduce", ph, true);
  add_norm_modulate_backward(c, d, sa);
  d.kernels(p + "adaln", ph, adaln_modulation_backward(c, 9));
}

void add_dit_get_batch(const TransformerRankContext& c, TransformerDraft& d) {
  const auto& w = c.w;
  if (c.chunk >= 0 && c.stage != 0 && c.stage + 1 != w.pp) return;  // as add_get_batch
  const Phase ph = Phase::kForward;
  const double b = double(w.micro_batch), latent = b * w.dit.latent_elements();
  d.kernels("get_batch.latent_to_gpu", ph, {MemcpyDesc{latent * c.e, CopyKind::kHostToDevice}});
  d.kernels("get_batch.text_to_gpu", ph, {MemcpyDesc{double(text_rows(c)) * w.dit.text_dim * c.e, CopyKind::kHostToDevice}});
  // EDM training noise: sigma per sample, n ~ N(0, 1) over the latent, x + sigma n.
  d.kernels("get_batch.noise", ph, {ew("randn", latent, 4, c.e), ew("add_noise", latent, 2, 3 * c.e)});
}

void add_dit_input_forward(const TransformerRankContext& c, TransformerDraft& d) {
  if (!c.first_stage()) return;
  const auto& w = c.w;
  const Phase ph = Phase::kForward;
  const std::int64_t b = w.micro_batch, h = w.hidden, lora = w.dit.adaln_lora_dim > 0 ? 3 * h : h;
  d.kernels("timestep_embedding", ph, {ew("sinusoidal_embedding", double(b) * h, 4, c.e), c.gemm(b, h, h),
                                       ew("silu", double(b) * h, kSiluFlops, 2 * c.e), c.gemm(b, lora, h),
                                       ew("rmsnorm", double(b) * h, kLayerNormFlops, 2 * c.e)});
  // This rank's CP share of the patches, embedded on every TP rank, then kept as its shard.
  const double patches = double(c.tokens) * double(w.dit.patch_inputs());
  d.kernels("patch_embedding", ph, {ew("patchify", patches, 0, 2 * c.e), c.gemm(c.tokens, h, w.dit.patch_inputs())});
}

void add_dit_output_and_loss(const TransformerRankContext& c, TransformerDraft& d) {
  if (!c.last_stage()) return;
  const auto& w = c.w;
  const Phase ph = Phase::kForward;
  const std::int64_t out = w.dit.patch_outputs();
  d.kernels("final_layer.adaln", ph, adaln_modulation(c, 2));
  add_norm_modulate(c, d, "final_layer.", ph);
  // The final projection on the rank's tokens (its sequence-parallel shard), then the EDM
  // denoiser (c_skip x + c_out F) and the weighted squared error on those latent elements.
  const double elements = double(c.tokens_sp) * double(out);
  d.kernels("final_layer.linear", ph, {c.gemm(c.tokens_sp, out, w.hidden)});
  d.kernels("edm_loss", ph, {ew("edm_denoise_loss", elements, 8, 4 * c.e)});
  if (c.grad_ranks() > 1) d.collective("loss.dp_all_reduce", ph, c.dp_group, {CollectiveKind::kAllReduce, 4, {}});
}

void add_dit_output_backward(const TransformerRankContext& c, TransformerDraft& d) {
  if (!c.last_stage()) return;
  const auto& w = c.w;
  const Phase ph = Phase::kBackward;
  const std::int64_t out = w.dit.patch_outputs(), T = c.tokens_sp;
  d.kernels("edm_loss.backward", ph, {ew("edm_denoise_loss_backward", double(T) * double(out), 3, 3 * c.e)});
  d.kernels("final_layer.linear.backward", ph, {c.gemm(T, w.hidden, out), c.gemm(out, w.hidden, T)});
  add_norm_modulate_backward(c, d, "final_layer.backward.");
  d.kernels("final_layer.adaln.backward", ph, adaln_modulation_backward(c, 2));
}

void add_dit_input_backward(const TransformerRankContext& c, TransformerDraft& d) {
  if (!c.first_stage()) return;
  const auto& w = c.w;
  const Phase ph = Phase::kBackward;
  const std::int64_t b = w.micro_batch, h = w.hidden, lora = w.dit.adaln_lora_dim > 0 ? 3 * h : h;
  // The patch embedding's weight gradient over the rank's shard (its input is data), and the
  // timestep embedding's, which collects every layer's adaLN input gradient.
  d.kernels("patch_embedding.backward", ph, {c.gemm(w.dit.patch_inputs(), h, c.tokens_sp)});
  d.kernels("timestep_embedding.backward", ph, {ew("rmsnorm_backward", double(b) * h, kLayerNormBwdFlops, 4 * c.e), c.gemm(b, h, lora),
                                                c.gemm(lora, h, b), ew("silu_backward", double(b) * h, kSiluFlops, 3 * c.e), c.gemm(h, h, b)});
}

}  // namespace perfcast::transformer
