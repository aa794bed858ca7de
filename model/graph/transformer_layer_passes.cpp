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
  const bool causal = w.kind == TransformerKind::kDecoder;
  for (int step = 0; step < w.cp; ++step) {
    std::vector<int> transfer;
    if (step + 1 < w.cp) {
      transfer = d.p2p_batch(fmt::format("{}cp_ring{}", p, step), ph,
                             {{c.cp_to_next, kv_bytes, "send_next"}, {c.cp_from_prev, kv_bytes, "recv_prev"}}, false);
    }
    const std::int64_t kv = step == 0 || !causal ? s : s / 2;
    d.kernels(fmt::format("{}flash_attention.cp{}", p, step), ph,
              {AttentionDesc{b, c.heads, c.kv_heads, s, kv, hd, causal && step == 0, w.activation_dtype(), pass}});
    d.join_next(transfer);
  }
  // Forward: rescale and add the cp partial outputs (read output and statistics, write);
  // backward: sum the key/value gradients that came back around the ring.
  const double elements = double(b) * s * (backward ? 2.0 * c.kv_heads : double(c.heads)) * hd;
  d.kernels(p + (backward ? "cp_kv_grad_sum" : "cp_output_merge"), ph, {ew(backward ? "cp_kv_grad_sum" : "cp_output_merge", elements * (w.cp - 1), 3, 3 * c.e)});
}

/// Scores, softmax, dropout and context of one layer's attention, forward (also the
/// selective recomputation in the backward, prefix `p` + "recompute.").
void add_attention_core_forward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, Phase ph) {
  const auto& w = c.w;
  const std::int64_t b = w.micro_batch, s = w.seq_len, hd = w.head_dim();
  const bool causal = w.kind == TransformerKind::kDecoder;
  if (w.attention == AttentionImpl::kFlash && w.cp > 1) return add_context_parallel_attention(c, d, p, ph, AttentionPass::kForward);
  if (w.attention == AttentionImpl::kFlash) {
    d.kernels(p + "flash_attention", ph,
              {AttentionDesc{b, c.heads, c.kv_heads, s, s, hd, causal, w.activation_dtype(), AttentionPass::kForward}});
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
  k.push_back(c.gemm(s, hd, s, false, b * c.heads));
  d.kernels(p + (c.fused_softmax() ? "core_attention" : "core_attention.context"), ph, std::move(k));
}

/// Core attention backward (prefix `p`): flash, or the recomputation (selective), the
/// context and score GEMMs' gradients and the softmax backward (fused or fp32 fallback).
void add_attention_core_backward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p) {
  const auto& w = c.w;
  const Phase ph = Phase::kBackward;
  const std::int64_t b = w.micro_batch, s = w.seq_len, hd = w.head_dim();
  const bool causal = w.kind == TransformerKind::kDecoder;
  if (w.attention == AttentionImpl::kFlash && w.cp > 1) return add_context_parallel_attention(c, d, p, ph, AttentionPass::kBackward);
  if (w.attention == AttentionImpl::kFlash) {
    d.kernels(p + "flash_attention", ph,
              {AttentionDesc{b, c.heads, c.kv_heads, s, s, hd, causal, w.activation_dtype(), AttentionPass::kBackward}});
    return;
  }
  if (w.recompute == Recompute::kSelective) add_attention_core_forward(c, d, p + "recompute.", ph);
  const double e = c.e;
  const double scores = double(b) * c.heads * s * s;
  std::vector<KernelDesc> k{c.gemm(s, s, hd, false, b * c.heads), c.gemm(s, hd, s, false, b * c.heads)};
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

}  // namespace

void add_layer_forward(const TransformerRankContext& c, TransformerDraft& d, int layer, Phase ph, const std::string& tag) {
  const auto& w = c.w;
  const double e = c.e;
  const std::string p = fmt::format("layer{}.{}", layer, tag);
  d.kernels(p + "input_layernorm", ph, {ew("layernorm", c.hs(), kLayerNormFlops, 2 * e)});
  d.sp_gather(p + "attention.all_gather", ph, true);
  const double T = double(c.tokens);
  d.kernels(p + "qkv", ph, c.linear(T * w.hidden, {c.linear_gemm(c.tokens, c.qkv, w.hidden, true)}));
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
  if (c.w.activation == Activation::kGelu) fc1.push_back(ew(m.bias ? "bias_gelu" : "gelu", inner, kGeluFlops, 2 * e));
  else fc1.push_back(ew("swiglu", inner, 6, 3 * e));
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
  std::vector<KernelDesc> fc1{c.w.activation == Activation::kGelu ? ew(m.bias ? "bias_gelu_backward" : "gelu_backward", inner, kGeluBwdFlops, 3 * e)
                                                                  : ew("swiglu_backward", inner, 8, 5 * e)};
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
  const double e = c.e;
  const std::int64_t T = c.tokens, H = w.hidden;
  d.kernels(p + "mlp.bias_dropout_add", ph, {ew("dropout_add_backward", c.hs(), 2, 5 * e + c.mask)});
  if (w.moe.in_layer(layer)) add_moe_backward(c, d, p);
  else add_mlp_backward(c, d, p, c.dense_mlp());
  d.kernels(p + "post_attention_layernorm", ph, {ew("layernorm_backward", c.hs(), kLayerNormBwdFlops, 4 * e)});
  d.kernels(p + "attention.bias_dropout_add", ph, {ew("dropout_add_backward", c.hs(), 2, 5 * e + c.mask)});
  d.sp_gather(p + "attention.dense.all_gather", ph, true);
  d.kernels(p + "attention.dense", ph, c.linear(double(T) * H, {c.linear_gemm(T, c.attn_out, H), c.linear_gemm(c.attn_out, H, T)}));
  add_attention_core_backward(c, d, p);
  d.sp_gather(p + "qkv.all_gather", ph, true);
  d.kernels(p + "qkv", ph, c.linear(double(T) * c.qkv, {c.linear_gemm(T, H, c.qkv), c.linear_gemm(c.qkv, H, T)}));
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
    const double bucket = (transformer_layer_parameters(c.w, first + l) - experts) * c.e;
    std::vector<int> ops;
    if (c.grad_ranks() > 1)
      ops.push_back(d.param_gather_ahead(fmt::format("layer{}.params.all_gather", first + l), Phase::kForward, c.dp_group, bucket));
    if (c.edp_group >= 0 && experts > 0)
      ops.push_back(d.param_gather_ahead(fmt::format("layer{}.expert_params.all_gather", first + l), Phase::kForward,
                                         c.edp_group, experts * c.e));
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
