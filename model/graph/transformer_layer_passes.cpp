/// \file transformer_layer_passes.cpp
/// One Megatron Transformer layer per TP rank, forward and backward: layer norms, the
/// QKV / attention-output / MLP GEMMs (column- then row-parallel), core attention (flash,
/// fused softmax, or the fp32 fallback), bias-dropout-add, and the TP collectives
/// (all-reduce, or all-gather / reduce-scatter under sequence parallelism).

#include <utility>

#include <fmt/format.h>

#include "model/graph/transformer_builder.hpp"
#include "model/graph/transformer_rank_passes.hpp"

namespace perfcast::transformer {
namespace {

/// Context parallelism, Transformer Engine's ring attention (AttnFuncWithCPAndKVP2P) with
/// Megatron's load-balanced causal split (each CP rank holds sequence chunks i and
/// 2cp - 1 - i): cp steps; step 0 is this rank's queries against its own keys (causal),
/// each later step against the keys and values of another rank, of which half the blocks
/// are needed (seq_kv / 2, no mask). While step i runs, the keys and values for step i + 1
/// travel one hop of the CP ring (send to the next rank, receive from the previous); the
/// backward passes the key/value gradients along too (twice the bytes). Then the partial
/// outputs are merged with their softmax statistics (forward) and the gradients summed.
void add_context_parallel_attention(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, Phase ph,
                                    AttentionPass pass) {
  const auto& w = c.w;
  const std::int64_t b = w.micro_batch, s = c.tokens / w.micro_batch, hd = w.head_dim();
  const bool backward = pass == AttentionPass::kBackward;
  const double kv_bytes = 2.0 * double(b) * s * c.kv_heads * hd * c.e * (backward ? 2 : 1);
  const bool causal = w.causal();
  for (int step = 0; step < w.cp; ++step) {
    std::vector<int> transfer;
    if (step + 1 < w.cp) {
      transfer = d.p2p_batch(fmt::format("{}cp_ring{}", p, step), ph,
                             {{c.cp_to_next, kv_bytes, "send_next"}, {c.cp_from_prev, kv_bytes, "recv_prev"}}, false);
    }
    const std::int64_t kv = step == 0 || !causal ? s : s / 2;
    AttentionDesc a{b, c.heads, c.kv_heads, s, kv, hd, causal && step == 0, w.activation_dtype(), pass};
    a.impl = w.attention_kernel;
    d.kernels(fmt::format("{}flash_attention.cp{}", p, step), ph, {a});
    d.join_next(transfer);
  }
  // Forward: rescale and add the cp partial outputs (read output and statistics, write);
  // backward: sum the key/value gradients that came back around the ring.
  const double elements = double(b) * s * (backward ? 2.0 * c.kv_heads : double(c.heads)) * hd;
  d.kernels(p + (backward ? "cp_kv_grad_sum" : "cp_output_merge"), ph, {ew(backward ? "cp_kv_grad_sum" : "cp_output_merge", elements * (w.cp - 1), 3, 3 * c.e)});
}

}  // namespace

/// Scores, softmax, dropout and context of one layer's attention, forward (also the
/// selective recomputation in the backward, prefix `p` + "recompute.").
void add_attention_core_forward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, Phase ph) {
  const auto& w = c.w;
  const std::int64_t b = w.micro_batch, s = w.seq_len, hd = w.qk_dim(), vd = w.v_dim();
  const bool causal = w.causal();
  if (w.attention == AttentionImpl::kFlash && w.cp > 1) return add_context_parallel_attention(c, d, p, ph, AttentionPass::kForward);
  if (w.attention == AttentionImpl::kFlash) {
    AttentionDesc a{b, c.heads, c.kv_heads, s, s, hd, causal, w.activation_dtype(), AttentionPass::kForward, vd};
    a.impl = w.attention_kernel;
    d.kernels(p + "flash_attention", ph, {a});
    return;
  }
  const double e = c.e;
  const double scores = double(b) * c.heads * s * s;
  std::vector<KernelDesc> k{c.gemm(s, s, hd, false, b * c.heads)};
  if (c.fused_softmax()) {
    k.push_back(ew("scale_mask_softmax", scores, kSoftmaxFlops, 2 * e));
  } else {
    // FusedScaleMaskSoftmax.forward_torch_softmax: input.float(), input * scale,
    // masked_fill_(mask, -10000), torch.nn.Softmax, probs.half(): one framework op each.
    const double f = 4;  // fp32 scores, bytes per element
    const bool cast = e < f;
    if (cast) k.push_back(ew("softmax_input_to_fp32", scores, 0, e + f));
    d.kernels(p + "core_attention", ph, std::move(k));
    d.kernels(p + "core_attention.softmax_scale", ph, {ew("softmax_scale", scores, 1, 2 * f)});
    d.kernels(p + "core_attention.softmax_mask_fill", ph, {ew("softmax_mask_fill", scores, 1, 2 * f + 1)});
    d.kernels(p + "core_attention.softmax", ph, {ew("softmax", scores, kSoftmaxFlops, 2 * f)});
    k.clear();
    if (cast) k.push_back(ew("softmax_probs_to_half", scores, 0, f + e));
  }
  if (w.dropout > 0) k.push_back(ew("attention_dropout", scores, 2, 2 * e + 1));
  k.push_back(c.gemm(s, vd, s, false, b * c.heads));  // probabilities x values
  d.kernels(p + (c.fused_softmax() ? "core_attention" : "core_attention.context"), ph, std::move(k));
}

/// Core attention backward (prefix `p`): flash, or the recomputation (selective), the
/// context and score GEMMs' gradients and the softmax backward (fused or fp32 fallback).
void add_attention_core_backward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p) {
  const auto& w = c.w;
  const Phase ph = Phase::kBackward;
  const std::int64_t b = w.micro_batch, s = w.seq_len, hd = w.qk_dim(), vd = w.v_dim();
  const bool causal = w.causal();
  if (w.attention == AttentionImpl::kFlash && w.cp > 1) return add_context_parallel_attention(c, d, p, ph, AttentionPass::kBackward);
  if (w.attention == AttentionImpl::kFlash) {
    AttentionDesc a{b, c.heads, c.kv_heads, s, s, hd, causal, w.activation_dtype(), AttentionPass::kBackward, vd};
    a.impl = w.attention_kernel;
    d.kernels(p + "flash_attention", ph, {a});
    return;
  }
  if (w.recomputes_core_attention()) add_attention_core_forward(c, d, p + "recompute.", ph);
  const double e = c.e;
  const double scores = double(b) * c.heads * s * s;
  // Gradients of the probabilities (dO V^T) and of the values (P^T dO).
  std::vector<KernelDesc> k{c.gemm(s, s, vd, false, b * c.heads), c.gemm(s, vd, s, false, b * c.heads)};
  if (w.dropout > 0) k.push_back(ew("attention_dropout_backward", scores, 1, 2 * e + 1));
  if (c.fused_softmax()) {
    k.push_back(ew("softmax_backward", scores, kSoftmaxBwdFlops, 3 * e));
  } else {
    // Autograd nodes of the fallback, in reverse: half() (ToCopyBackward), softmax,
    // masked_fill_, mul by scale, float() (ToCopyBackward); fp32 gradients.
    const double f = 4;
    const bool cast = e < f;
    if (cast) k.push_back(ew("softmax_grad_to_fp32", scores, 0, e + f));
    d.kernels(p + "core_attention.context", ph, std::move(k));
    d.kernels(p + "core_attention.softmax", ph, {ew("softmax_backward", scores, kSoftmaxBwdFlops, 3 * f)});
    d.kernels(p + "core_attention.softmax_mask_fill", ph, {ew("softmax_mask_fill_backward", scores, 1, 2 * f + 1)});
    d.kernels(p + "core_attention.softmax_scale", ph, {ew("softmax_scale_backward", scores, 1, 2 * f)});
    k.clear();
    if (cast) k.push_back(ew("softmax_grad_to_half", scores, 0, f + e));
  }
  k.push_back(c.gemm(s, hd, s, false, b * c.heads));
  k.push_back(c.gemm(s, hd, s, false, b * c.heads));
  d.kernels(p + "core_attention", ph, std::move(k));
}

namespace {

/// Multi-latent attention's projections (MLASelfAttention.get_query_key_value_tensors),
/// forward: the query down-projection, its RMSNorm and up-projection (or one full query
/// projection without q_lora_rank), the key/value down-projection to the latent and the
/// shared rotary key, the latent's RMSNorm and up-projection to keys and values, then the
/// rotary embedding of the query and key rotary parts. Up-projections are column-parallel
/// (heads split over TP); the down-projections are duplicated on every TP rank and, in
/// perfcast, run on the all-gathered sequence like the QKV projection they replace (an
/// upper bound under sequence parallelism: Megatron-Core may project the local shard and
/// gather the smaller latent).
void add_mla_projections_forward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, Phase ph) {
  const auto& w = c.w;
  const auto& m = w.mla;
  const std::int64_t T = c.tokens, H = w.hidden;
  const double e = c.e;
  if (m.q_lora_rank > 0) {
    d.kernels(p + "q_down", ph, c.linear(double(T) * H, {c.linear_gemm(T, m.q_lora_rank, H)}));
    d.kernels(p + "q_layernorm", ph, {ew("rmsnorm", double(T) * m.q_lora_rank, kLayerNormFlops, 2 * e)});
    d.kernels(p + "q_up", ph, c.linear(double(T) * m.q_lora_rank, {c.linear_gemm(T, c.mla_q_up, m.q_lora_rank)}));
  } else {
    d.kernels(p + "q_proj", ph, c.linear(double(T) * H, {c.linear_gemm(T, c.mla_q_up, H)}));
  }
  d.kernels(p + "kv_down", ph, c.linear(double(T) * H, {c.linear_gemm(T, c.mla_kv_down, H)}));
  d.kernels(p + "kv_layernorm", ph, {ew("rmsnorm", double(T) * m.kv_lora_rank, kLayerNormFlops, 2 * e)});
  d.kernels(p + "kv_up", ph, c.linear(double(T) * m.kv_lora_rank, {c.linear_gemm(T, c.mla_kv_up, m.kv_lora_rank)}));
  // Rotary parts of this rank's query heads and the shared key, rotated in place.
  const double rope = double(T) * (c.heads + 1) * m.qk_rope_head_dim;
  d.kernels(p + "mla_rotary", ph, {ew("rotary_embedding", rope, 3, 2 * e)});
}

/// The same, backward: each projection's input-gradient and weight-gradient GEMMs, the
/// norms' backward, in reverse order.
void add_mla_projections_backward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p) {
  const auto& w = c.w;
  const auto& m = w.mla;
  const Phase ph = Phase::kBackward;
  const std::int64_t T = c.tokens, H = w.hidden;
  const double e = c.e;
  const double rope = double(T) * (c.heads + 1) * m.qk_rope_head_dim;
  d.kernels(p + "mla_rotary", ph, {ew("rotary_embedding_backward", rope, 3, 2 * e)});
  auto pair = [&](std::int64_t in, std::int64_t out) {  // dX = dY W, dW = dY^T X
    return c.linear(double(T) * out, {c.linear_gemm(T, in, out), c.linear_gemm(out, in, T)});
  };
  d.kernels(p + "kv_up", ph, pair(m.kv_lora_rank, c.mla_kv_up));
  d.kernels(p + "kv_layernorm", ph, {ew("rmsnorm_backward", double(T) * m.kv_lora_rank, kLayerNormBwdFlops, 4 * e)});
  d.kernels(p + "kv_down", ph, pair(H, c.mla_kv_down));
  if (m.q_lora_rank > 0) {
    d.kernels(p + "q_up", ph, pair(m.q_lora_rank, c.mla_q_up));
    d.kernels(p + "q_layernorm", ph, {ew("rmsnorm_backward", double(T) * m.q_lora_rank, kLayerNormBwdFlops, 4 * e)});
    d.kernels(p + "q_down", ph, pair(H, m.q_lora_rank));
  } else {
    d.kernels(p + "q_proj", ph, pair(H, c.mla_q_up));
  }
}

}  // namespace

void add_layer_forward(const TransformerRankContext& c, TransformerDraft& d, int layer, Phase ph, const std::string& tag) {
  const auto& w = c.w;
  if (w.diffusion()) return add_dit_layer_forward(c, d, layer, ph, tag);
  const double e = c.e;
  const std::string p = fmt::format("layer{}.{}", layer, tag);
  d.kernels(p + "input_layernorm", ph, {ew("layernorm", c.hs(), kLayerNormFlops, 2 * e)});
  d.sp_gather(p + "attention.all_gather", ph, true);
  const double T = double(c.tokens);
  if (w.mla.enabled()) add_mla_projections_forward(c, d, p, ph);
  else d.kernels(p + "qkv", ph, c.linear(T * w.hidden, {c.linear_gemm(c.tokens, c.qkv, w.hidden, true)}));
  add_attention_core_forward(c, d, p, ph);
  d.kernels(p + "attention.dense", ph, c.linear(T * c.attn_out, {c.linear_gemm(c.tokens, w.hidden, c.attn_out)}));
  d.tp_reduce(p + "attention.tp_reduce", ph, true);
  d.kernels(p + "attention.bias_dropout_add", ph, {ew("bias_dropout_add", c.hs(), 3, 3 * e + c.mask)});
  d.kernels(p + "post_attention_layernorm", ph, {ew("layernorm", c.hs(), kLayerNormFlops, 2 * e)});
  if (w.moe.in_layer(layer)) {
    add_moe_forward(c, d, p, ph);
  } else {
    add_mlp_forward(c, d, p, ph, c.dense_mlp());
  }
  d.kernels(p + "mlp.bias_dropout_add", ph, {ew("bias_dropout_add", c.hs(), 3, 3 * e + c.mask)});
}

void add_mlp_forward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, Phase ph, const MlpShape& m) {
  const double e = c.e, T = double(c.tokens), inner = T * double(m.ffn2);
  const std::int64_t H = c.w.hidden;
  d.sp_gather(p + m.prefix + "all_gather", ph, true);
  std::vector<KernelDesc> fc1 = c.linear(T * double(H), {c.linear_gemm(c.tokens, m.ffn1, H)});
  for (auto& k : activation_kernels(c.w.activation, inner, m.bias, e)) fc1.push_back(std::move(k));
  d.kernels(p + m.prefix + "fc1", ph, std::move(fc1));
  d.kernels(p + m.prefix + "fc2", ph, c.linear(T * double(m.ffn2), {c.linear_gemm(c.tokens, H, m.ffn2)}));
  d.tp_reduce(p + m.prefix + "tp_reduce", ph, true);
}

void add_mlp_backward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, const MlpShape& m) {
  const Phase ph = Phase::kBackward;
  const std::int64_t T = c.tokens, H = c.w.hidden;
  const double e = c.e, inner = double(T) * double(m.ffn2);
  d.sp_gather(p + m.prefix + "fc2.all_gather", ph, true);
  d.kernels(p + m.prefix + "fc2", ph, c.linear(double(T) * H, {c.linear_gemm(T, m.ffn2, H), c.linear_gemm(m.ffn2, H, T)}));
  std::vector<KernelDesc> fc1 = activation_backward_kernels(c.w.activation, inner, m.bias, e);
  for (auto& k : c.linear(double(T) * double(m.ffn1), {c.linear_gemm(T, H, m.ffn1), c.linear_gemm(m.ffn1, H, T)})) fc1.push_back(std::move(k));
  d.kernels(p + m.prefix + "fc1", ph, std::move(fc1));
  d.tp_reduce(p + m.prefix + "tp_reduce", ph, true);
}

namespace {

/// --overlap-grad-reduce: the layer's gradient buckets, reduced over the data-parallel
/// ranks (dense parameters) and the expert data-parallel ranks (expert parameters).
void add_layer_grad_buckets(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, int layer) {
  const auto& w = c.w;
  const CollectiveKind k = w.distributed_optimizer ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
  const double gb = dtype_bytes(w.grad_reduce_dtype), experts = transformer_layer_expert_parameters(w, layer);
  if (c.grad_ranks() > 1) d.async_collective(p + "grads.bucket", Phase::kBackward, c.dp_group, {k, (transformer_layer_parameters(w, layer) - experts) * gb, {}});
  if (c.edp_group >= 0 && experts > 0) d.async_collective(p + "expert_grads.bucket", Phase::kBackward, c.edp_group, {k, experts * gb, {}});
}

}  // namespace

void add_layer_backward(const TransformerRankContext& c, TransformerDraft& d, int layer) {
  const auto& w = c.w;
  const Phase ph = Phase::kBackward;
  if (w.recompute == Recompute::kFull) add_layer_forward(c, d, layer, ph, "recompute.");
  const std::string p = fmt::format("layer{}.backward.", layer);
  if (w.diffusion()) {
    add_dit_layer_backward(c, d, layer);
    if (w.overlap_grad_reduce && d.last_micro_batch()) add_layer_grad_buckets(c, d, p, layer);
    return;
  }
  const double e = c.e;
  const std::int64_t T = c.tokens, H = w.hidden;
  d.kernels(p + "mlp.bias_dropout_add", ph, {ew("dropout_add_backward", c.hs(), 2, 5 * e + c.mask)});
  // --recompute-modules layernorm: the norm's output, discarded after the forward, is
  // recomputed before the backward that reads it (the MLP's, then the QKV projection's).
  if (w.recomputes_norms()) d.kernels(p + "recompute.post_attention_layernorm", ph, {ew("layernorm", c.hs(), kLayerNormFlops, 2 * e)});
  if (w.moe.in_layer(layer)) add_moe_backward(c, d, p);
  else add_mlp_backward(c, d, p, c.dense_mlp());
  d.kernels(p + "post_attention_layernorm", ph, {ew("layernorm_backward", c.hs(), kLayerNormBwdFlops, 4 * e)});
  d.kernels(p + "attention.bias_dropout_add", ph, {ew("dropout_add_backward", c.hs(), 2, 5 * e + c.mask)});
  d.sp_gather(p + "attention.dense.all_gather", ph, true);
  d.kernels(p + "attention.dense", ph, c.linear(double(T) * H, {c.linear_gemm(T, c.attn_out, H), c.linear_gemm(c.attn_out, H, T)}));
  add_attention_core_backward(c, d, p);
  if (w.recomputes_norms()) d.kernels(p + "recompute.input_layernorm", ph, {ew("layernorm", c.hs(), kLayerNormFlops, 2 * e)});
  d.sp_gather(p + "qkv.all_gather", ph, true, true);
  if (w.mla.enabled()) add_mla_projections_backward(c, d, p);
  else d.kernels(p + "qkv", ph, c.linear(double(T) * c.qkv, {c.linear_gemm(T, H, c.qkv), c.linear_gemm(c.qkv, H, T)}));
  d.tp_reduce(p + "qkv.tp_reduce", ph, true);
  d.kernels(p + "input_layernorm", ph, {ew("layernorm_backward", c.hs(), kLayerNormBwdFlops, 4 * e)});
  // --overlap-grad-reduce: this layer's gradients are complete after the last micro-batch's
  // backward of it; their DP reduction starts now, beside the rest of the backward.
  if (w.overlap_grad_reduce && d.last_micro_batch()) add_layer_grad_buckets(c, d, p, layer);
}

/// The stage's layers in order.
void add_layers_forward(const TransformerRankContext& c, TransformerDraft& d) {
  const std::int64_t first = c.first_layer(), n = c.chunk_layers();
  // overlap_param_gather: in the iteration's first forward, each layer's parameter bucket is
  // all-gathered one layer ahead (Megatron's forward pre-hooks dispatch the next bucket and
  // wait for the current one); the layer's first op waits for its own bucket.
  // MoE: the expert parameters' bucket over the expert data-parallel ranks beside it.
  const bool gather = c.w.overlap_param_gather && d.first_micro_batch();
  auto gather_layer = [&](std::int64_t l) {
    const double experts = transformer_layer_expert_parameters(c.w, first + l);
    const double bucket = (transformer_layer_parameters(c.w, first + l) - experts) * c.param_gather_bytes();
    std::vector<int> ops;
    if (c.grad_ranks() > 1)
      ops.push_back(d.param_gather_ahead(fmt::format("layer{}.params.all_gather", first + l), Phase::kForward, c.dp_group, bucket));
    if (c.edp_group >= 0 && experts > 0)
      ops.push_back(d.param_gather_ahead(fmt::format("layer{}.expert_params.all_gather", first + l), Phase::kForward,
                                         c.edp_group, experts * c.param_gather_bytes()));
    return ops;
  };
  std::vector<int> pending = gather ? gather_layer(0) : std::vector<int>{};
  for (std::int64_t l = 0; l < n; ++l) {
    std::vector<int> next = gather && l + 1 < n ? gather_layer(l + 1) : std::vector<int>{};
    d.join_next(pending);
    add_layer_forward(c, d, static_cast<int>(first + l), Phase::kForward, "");
    pending = std::move(next);
  }
}

/// The stage's layers from the last.
void add_layers_backward(const TransformerRankContext& c, TransformerDraft& d) {
  const std::int64_t first = c.first_layer();
  for (std::int64_t l = c.chunk_layers(); l-- > 0;) add_layer_backward(c, d, static_cast<int>(first + l));
}

}  // namespace perfcast::transformer
