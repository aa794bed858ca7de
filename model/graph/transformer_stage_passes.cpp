/// \file transformer_stage_passes.cpp
/// The passes of a Transformer rank outside its layers: the per-micro-batch batch
/// loading, embedding (first stage), LM head, cross entropy and loss (last stage) and
/// their backwards, and once per iteration the gradient synchronisation and the Adam step.

#include <utility>

#include <fmt/format.h>

#include "model/graph/transformer_builder.hpp"
#include "model/graph/transformer_rank_passes.hpp"

namespace perfcast::transformer {

/// Megatron(-DeepSpeed) pretrain_gpt.forward_step calls get_batch on every pipeline stage
/// for every micro-batch. get_batch -> tensor_parallel.broadcast_data: the key sizes go to
/// the GPU, are broadcast over the TP group and come back with sizes_cuda.cpu() (a host
/// sync), then the int64 tokens (b x (s+1)) are copied to the GPU and broadcast; then
/// get_ltor_masks_and_position_ids builds the causal mask (tril of s x s ones, compared
/// < 0.5), the loss mask and the position ids, and tokens/labels are sliced contiguous.
void add_get_batch(const TransformerRankContext& c, TransformerDraft& d) {
  if (c.w.diffusion()) return add_dit_get_batch(c, d);
  const auto& w = c.w;
  // Interleaved schedule (Megatron-Core): pretrain_gpt.get_batch returns at once unless
  // mpu.is_pipeline_first_stage() or is_pipeline_last_stage(), and both take the virtual rank
  // into account (megatron/core/parallel_state.py: ignore_virtual=False by default, false for
  // any model chunk but the first, resp. the last). So only stage 0's chunk 0 and the last
  // stage's last chunk load a batch; every other chunk gets None at once.
  if (c.chunk >= 0 && !c.first_stage() && !c.last_stage()) return;
  const Phase ph = Phase::kForward;
  const double sizes_bytes = 8.0 * 8;  // MAX_DATA_DIM = 8 int64 per key, one key ("text")
  const double token_bytes = 8.0 * w.micro_batch * (w.seq_len + 1);
  d.kernels("get_batch.sizes_to_gpu", ph, {MemcpyDesc{sizes_bytes, CopyKind::kHostToDevice}});
  if (w.tp > 1) d.collective("get_batch.broadcast_sizes", ph, c.tp_group, {CollectiveKind::kBroadcast, sizes_bytes, {}});
  d.add(Op{d.named("get_batch.sizes_to_cpu"), ph, Stream::kCompute, {MemcpyDesc{sizes_bytes, CopyKind::kDeviceToHost}}, {}, {},
           true});
  d.kernels("get_batch.tokens_to_gpu", ph, {MemcpyDesc{token_bytes, CopyKind::kHostToDevice}});
  if (w.tp > 1) d.collective("get_batch.broadcast_tokens", ph, c.tp_group, {CollectiveKind::kBroadcast, token_bytes, {}});
  const double s = double(w.seq_len), tokens = double(c.tokens);
  d.kernels("get_batch.masks", ph,
            {ew("tokens_labels_contiguous", 2 * tokens, 0, 16), ew("causal_mask_tril", s * s, 1, 4 + 1),
             ew("loss_mask", tokens, 2, 8 + 4), ew("position_ids", tokens, 1, 8)});
}

/// First stage: the vocab-parallel embedding lookup (+ learned positions), its TP
/// reduction, dropout.
void add_embedding_forward(const TransformerRankContext& c, TransformerDraft& d) {
  if (c.w.diffusion()) return add_dit_input_forward(c, d);
  if (!c.first_stage()) return;
  const auto& w = c.w;
  const Phase ph = Phase::kForward;
  const double pos = w.position == PositionEmbedding::kLearned ? c.e : 0.0;
  d.kernels("embedding", ph, {ew("embedding_lookup", double(c.tokens) * w.hidden, 1, 2 * c.e + pos)});
  d.tp_reduce("embedding.tp_reduce", ph);
  if (w.dropout > 0) d.kernels("embedding.dropout", ph, {ew("dropout", c.hs(), 2, 2 * c.e + 1)});
}

/// Last stage: final layer norm, LM head, vocab-parallel cross entropy and the loss
/// averaged over the data-parallel group.
void add_head_and_loss(const TransformerRankContext& c, TransformerDraft& d) {
  if (c.w.diffusion()) return add_dit_output_and_loss(c, d);
  if (!c.last_stage()) return;
  const auto& w = c.w;
  const Phase ph = Phase::kForward;
  d.kernels("final_layernorm", ph, {ew("layernorm", c.hs(), kLayerNormFlops, 2 * c.e)});
  d.sp_gather("lm_head.all_gather", ph);
  d.kernels("lm_head", ph, {c.gemm(c.tokens, c.vocab, w.hidden)});
  // Megatron's vocab-parallel cross entropy on the logits cast to fp32: cast, max,
  // subtract, exp, sum, divide (about 9 fp32 passes); three TP all-reduces of per-token values.
  d.kernels("cross_entropy", ph, {ew("vocab_parallel_cross_entropy", double(c.tokens) * c.vocab, 6, c.e + 36)});
  if (w.tp > 1) {
    for (const char* n : {"max", "target", "sum_exp"}) {
      d.collective(fmt::format("cross_entropy.all_reduce_{}", n), ph, c.tp_group,
                   {CollectiveKind::kAllReduce, double(c.tokens) * 4, {}});
    }
  }
  // pretrain_gpt.loss_func: sum(losses * loss_mask) / loss_mask.sum(), then
  // average_losses_across_data_parallel_group: an all-reduce of one fp32 over the DP group.
  d.kernels("loss", ph, {ew("masked_loss_sum", double(c.tokens), 2, 8)});
  if (c.grad_ranks() > 1) d.collective("loss.dp_all_reduce", ph, c.dp_group, {CollectiveKind::kAllReduce, 4, {}});
}

/// Last stage: cross entropy, LM head (data and weight gradients, TP reduction) and final
/// layer norm backward.
void add_head_backward(const TransformerRankContext& c, TransformerDraft& d) {
  if (c.w.diffusion()) return add_dit_output_backward(c, d);
  if (!c.last_stage()) return;
  const Phase ph = Phase::kBackward;
  const std::int64_t T = c.tokens, H = c.w.hidden;
  d.kernels("cross_entropy.backward", ph, {ew("cross_entropy_backward", double(T) * c.vocab, 2, 12 + c.e)});
  d.kernels("lm_head.backward", ph, {c.gemm(T, H, c.vocab), c.gemm(c.vocab, H, T)});
  d.tp_reduce("lm_head.tp_reduce", ph);
  d.kernels("final_layernorm.backward", ph, {ew("layernorm_backward", c.hs(), kLayerNormBwdFlops, 4 * c.e)});
}

/// First stage: dropout backward and the dense gradient of the vocab shard: zero,
/// scatter-add the tokens' rows, accumulate into the fp32 main gradient.
void add_embedding_backward(const TransformerRankContext& c, TransformerDraft& d) {
  if (c.w.diffusion()) return add_dit_input_backward(c, d);
  if (!c.first_stage()) return;
  const Phase ph = Phase::kBackward;
  const std::int64_t T = c.tokens, H = c.w.hidden;
  if (c.w.dropout > 0) d.kernels("embedding.dropout.backward", ph, {ew("dropout_backward", c.hs(), 1, 2 * c.e + 1)});
  d.sp_gather("embedding.all_gather", ph);
  const double table = double(c.vocab) * H;
  d.kernels("embedding.backward", ph,
            {ew("zero", table, 0, c.e), ew("embedding_scatter_add", double(T) * H, 1, 3 * c.e),
             ew("main_grad_accumulate", table, 1, c.e + 8)});
}

/// The data-parallel gradient all-reduce (reduce-scatter with the distributed optimizer)
/// and the tied-embedding gradient all-reduce between the first and last stage.
void add_gradient_sync(const TransformerRankContext& c, TransformerDraft& d) {
  const auto& w = c.w;
  const Phase ph = Phase::kOptimizer;
  const double params = transformer_rank_parameters(w, c.stage);
  const double experts = transformer_stage_expert_parameters(w, c.stage);
  const double gb = dtype_bytes(w.grad_reduce_dtype);
  const CollectiveKind k = w.distributed_optimizer ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
  const std::string name = w.distributed_optimizer ? "grads.reduce_scatter" : "grads.all_reduce";
  if (w.overlap_grad_reduce) {
    // The layers' buckets went out during the backward; what is left (embedding, final
    // norm, LM head) goes now, and the next op waits for every bucket.
    const double rest = params - transformer_stage_layer_parameters(w, c.stage);
    if (c.grad_ranks() > 1) d.async_collective(name + ".rest", ph, c.dp_group, {k, rest * gb, {}});
    d.join_async();
  } else {
    if (c.grad_ranks() > 1) d.collective(name, ph, c.dp_group, {k, (params - experts) * gb, {}});
    // MoE: the expert gradients over the ranks holding the same experts.
    if (c.edp_group >= 0 && experts > 0) d.collective("expert_" + name, ph, c.edp_group, {k, experts * gb, {}});
  }
  if (c.emb_group >= 0 && w.tied_embeddings && (c.first_stage() || c.last_stage())) {
    d.collective("embedding_grads.all_reduce", ph, c.emb_group, {CollectiveKind::kAllReduce, double(c.vocab) * w.hidden * gb, {}});
  }
}

/// Grad norm (read fp32 grads), fused Adam (read grad, read+write param, m, v in fp32:
/// 28 B), copy of the fp32 main params to the model's low-precision params (mixed only),
/// the parameters' all-gather (distributed optimizer) and zero_grad.
void add_optimizer_step(const TransformerRankContext& c, TransformerDraft& d) {
  const auto& w = c.w;
  const Phase ph = Phase::kOptimizer;
  const double params = transformer_rank_parameters(w, c.stage);
  const double experts = transformer_stage_expert_parameters(w, c.stage);
  // The distributed optimizer shards dense states over dp x cp and expert states over expert DP.
  const double local = w.distributed_optimizer ? (params - experts) / c.grad_ranks() + experts / w.expert_dp() : params;
  const bool mixed = dtype_bytes(w.precision) < 4;
  std::vector<KernelDesc> k{ew("grad_norm", local, 2, 4), ew("adam", local, 12, 28)};
  // fp8_param_gather: the fp32 main parameters are cast straight to the FP8 weights (read 4 B,
  // write 1 B), whose transpose is made once per iteration (read 1 B, write 1 B).
  if (mixed) k.push_back(ew("copy_main_params", local, 0, 4 + (w.fp8_param_gather ? 1.0 : c.e)));
  // Otherwise Transformer Engine casts each linear layer's bf16 weight to FP8 (and its
  // transpose) once per iteration, on the first micro-batch; counted here over all the rank's
  // parameters.
  if (w.fp8_linear_layers()) k.push_back(ew(w.fp8_param_gather ? "fp8_weight_transpose" : "fp8_weight_cast_transpose", params, 0, w.fp8_param_gather ? 2 : 4));
  d.kernels("optimizer.adam", ph, std::move(k));
  const int adam = static_cast<int>(d.program.ops.size()) - 1;
  if (w.distributed_optimizer) {
    if (w.overlap_param_gather) {
      // The layers' buckets are gathered in the next iteration's first forward (after this
      // step: prev_deps); the rest (embedding, final norm, LM head) now.
      for (int g : d.param_gathers) d.program.ops[static_cast<std::size_t>(g)].prev_deps = {adam};
      const double rest = params - transformer_stage_layer_parameters(w, c.stage);
      if (c.grad_ranks() > 1) d.collective("params.all_gather.rest", ph, c.dp_group, {CollectiveKind::kAllGather, rest * c.param_gather_bytes(), {}});
    } else {
      if (c.grad_ranks() > 1) d.collective("params.all_gather", ph, c.dp_group, {CollectiveKind::kAllGather, (params - experts) * c.param_gather_bytes(), {}});
      if (c.edp_group >= 0 && experts > 0) d.collective("expert_params.all_gather", ph, c.edp_group, {CollectiveKind::kAllGather, experts * c.param_gather_bytes(), {}});
    }
  }
  d.kernels("zero_grad", ph, {ew("zero", params, 0, 4)});
}

}  // namespace perfcast::transformer
