/// \file dlrm_backward_passes.cpp
/// The backward and optimizer passes of a DLRM rank, in autograd order: loss and top MLP
/// backward, interaction backward, the embedding gradients' exchange, bottom MLP
/// backward (DDP gradient buckets all-reduced as they fill), embedding backward with the
/// fused optimizer, the dense optimizer step and the host reading the loss.

#include <utility>

#include "model/graph/dlrm_rank_passes.hpp"

namespace perfcast::dlrm {
namespace {

/// Data-parallel tables: dense gradient (zero + scatter-add), all-reduce, SGD update.
void add_data_parallel_tables_backward(const RankContext& c, RankDraft& d, int dep) {
  double elems = 0, looked_up = 0;
  for (const auto& ref : c.local) {
    if (ref.type != ShardingType::kDataParallel) continue;
    elems += double(ref.shard->rows) * ref.shard->cols;
    looked_up += double(c.batch) * c.shard_pooling(ref.table, *ref.shard) * ref.shard->cols;
  }
  for (std::size_t t = 0; t < c.plan.tables.size(); ++t) {  // hybrid tables' frequent rows
    const auto& ts = c.plan.tables[t];
    if (ts.type != ShardingType::kHybrid || ts.frequent_rows <= 0) continue;
    const auto& spec = c.w.tables[t];
    elems += double(ts.frequent_rows) * double(spec.dim);
    looked_up += double(c.batch) * spec.pooling * hybrid_frequent_share(spec, ts, c.w.batch_size) * double(spec.dim);
  }
  const int grad = d.add({"embedding_backward.data_parallel", Phase::kBackward, Stream::kCompute,
                          {elementwise("zero", elems, 0, 4), elementwise("embedding_grad_scatter", looked_up, 1, 12)},
                          {},
                          {dep},
                          false});
  int ready = grad;
  if (c.world > 1) {
    ready = d.add(c.coll("allreduce.data_parallel_tables", Phase::kBackward,
                         CollectiveDesc{CollectiveKind::kAllReduce, elems * c.gradient_bytes(), {}}, {grad}));
  }
  d.add({"embedding_update.data_parallel", Phase::kOptimizer, Stream::kCompute,
         {elementwise("sgd", elems, 2, 2 * dtype_bytes(c.w.embedding_dtype) + 4)}, {}, {ready}, false});
}

/// Keeps a weight-gradient op for add_deferred_weight_gradients; it reads the gradient the
/// data op `data` also reads, so it depends on that op.
void defer_weight_gradient(RankDraft& d, Op weights, int data, double params) {
  weights.deps = {data};
  d.deferred_weight_grads.emplace_back(std::move(weights), params);
}

}  // namespace

/// The loss backward, then each top MLP layer's backward from the last; each layer's
/// gradients join the DDP bucket.
void add_top_mlp_backward(const RankContext& c, RankDraft& d) {
  Op loss_grad{"loss.backward", Phase::kBackward, Stream::kCompute, {elementwise("bce_backward", c.batch, 5, 12)}, {},
               {d.loss}, false};
  // sparse_dist: the backward waits for the next batch's input all-to-all (TorchRec's
  // wait_sparse_data_dist before the backward).
  if (c.pipelined() && d.inputs_ready >= 0 && d.inputs_ready != d.batch_copy) loss_grad.deps.push_back(d.inputs_ready);
  int prev = d.add(std::move(loss_grad));
  for (std::size_t i = c.w.top_mlp.size(); i-- > 0;) {
    const bool relu_out = i + 1 < c.w.top_mlp.size();  // the logit layer has no ReLU
    const std::string name = numbered("top_mlp.", i, ".backward");
    const double params = double(d.top_in[i]) * double(c.w.top_mlp[i]) + double(c.w.top_mlp[i]);
    if (c.w.stack.async_weight_gradients) {
      auto [data, weights] = c.linear_backward_split(name, d.top_in[i], c.w.top_mlp[i], relu_out, prev);
      prev = d.add(std::move(data));
      defer_weight_gradient(d, std::move(weights), prev, params);
      continue;
    }
    prev = d.add(c.linear_backward(name, d.top_in[i], c.w.top_mlp[i], true, relu_out, prev));
    d.params_ready(c, prev, params);
  }
  d.top_grad = prev;
}

/// Dot: the backward of the lower triangle, of the Gram matrix (two GEMMs) and the sum
/// of both feature gradients; cat: one copy; dcn_v2: the cross layers' backward, then the copy;
/// then the sequence tables' sum backward.
void add_interaction_backward(const RankContext& c, RankDraft& d) {
  const double ab = c.act_bytes(), ib = c.interaction_bytes();
  const double tp = static_cast<double>(c.w.tables.size()) + 1;  // interaction features
  const double dim = static_cast<double>(c.w.bottom_mlp.back());
  const double width = static_cast<double>(c.w.interaction_width());
  int grad = d.top_grad;
  if (c.w.interaction == Interaction::kDcnV2) {
    // Each cross layer from the last: the elementwise part (dy = g * x0, dx0 += g * y, the
    // residual), W's gradient (r x width), z's (B x r), V's (width x r), x_l's (B x width),
    // the bias gradient.
    // The stack's fusion (as forward): eager dy = g * x0 and dx0 += g * y as three kernels,
    // one generated kernel, or the input-gradient GEMM's epilogue (g, x0 and y read, dx0
    // accumulated) with the bias gradient in W's weight-gradient GEMM.
    const auto w64 = static_cast<std::int64_t>(width);
    const std::int64_t r = c.w.dcn_rank;
    const Fusion fusion = c.w.stack.dcn_cross;
    for (int l = c.w.dcn_layers; l-- > 0;) {
      const std::string name = numbered("dcn.cross.", l, ".backward");
      Op op{name, Phase::kBackward, Stream::kCompute, {}, {}, {grad}, false};
      if (fusion == Fusion::kNone) {
        op.kernels.push_back(elementwise("dcn_cross_mul_backward", c.batch * width, 1, 3 * ib));
        op.kernels.push_back(elementwise("dcn_cross_mul_backward", c.batch * width, 1, 3 * ib));
        op.kernels.push_back(elementwise("dcn_cross_add_backward", c.batch * width, 1, 3 * ib));
      } else if (fusion == Fusion::kPointwise) {
        op.kernels.push_back(elementwise("dcn_cross_backward", c.batch * width, 3, 6 * ib));
      }
      const bool epilogue = fusion == Fusion::kEpilogue;
      const GemmDesc w_grad{r, w64, c.batch, 1, c.w.mlp_dtype, epilogue};  // W's gradient (+ bias gradient)
      const GemmDesc z_grad{c.batch, r, w64, 1, c.w.mlp_dtype, false};
      const GemmDesc v_grad{w64, r, c.batch, 1, c.w.mlp_dtype, false};
      GemmDesc dx{c.batch, w64, r, 1, c.w.mlp_dtype, false};
      if (epilogue) dx.epilogue_inputs = 3;
      const double params = 2.0 * double(w64) * double(r) + double(w64);  // V, W and W's bias
      if (c.w.stack.async_weight_gradients) {
        // The data chain (elementwise part, z's and x_l's gradients) now; W's and V's
        // gradients and the bias gradient once the embedding gradients are on their way.
        Op weights{name + ".weights", Phase::kBackward, Stream::kCompute, {w_grad, v_grad}, {}, {}, false};
        if (!epilogue) weights.kernels.push_back(elementwise("bias_grad", c.batch * width, 1, ab));
        op.kernels.push_back(z_grad);
        op.kernels.push_back(dx);
        grad = d.add(std::move(op));
        defer_weight_gradient(d, std::move(weights), grad, params);
        continue;
      }
      op.kernels.push_back(w_grad);
      op.kernels.push_back(z_grad);
      op.kernels.push_back(v_grad);
      op.kernels.push_back(dx);
      if (!epilogue) op.kernels.push_back(elementwise("bias_grad", c.batch * width, 1, ab));
      grad = d.add(std::move(op));
      d.params_ready(c, grad, params);
    }
  }
  Op op{"interaction.backward", Phase::kBackward, Stream::kCompute, {}, {}, {grad}, false};
  if (c.w.interaction == Interaction::kDot && c.w.stack.fused_interaction) {
    // One kernel: the triangle's gradient through the Gram matrix into the features' gradient,
    // the bottom output's path added in its epilogue.
    GemmDesc g{static_cast<std::int64_t>(tp), static_cast<std::int64_t>(dim), static_cast<std::int64_t>(tp), c.batch, c.w.mlp_dtype, false};
    g.epilogue_inputs = 1;
    op.kernels.push_back(g);
  } else if (c.w.interaction == Interaction::kDot) {
    const auto t = static_cast<std::int64_t>(tp);
    const auto k = static_cast<std::int64_t>(dim);
    op.kernels.push_back(elementwise("tril_backward", c.batch * tp * tp, 0, 2 * ab));
    op.kernels.push_back(GemmDesc{t, k, t, c.batch, c.w.mlp_dtype, false});
    op.kernels.push_back(GemmDesc{t, k, t, c.batch, c.w.mlp_dtype, false});
    // The cast's backward (half gradient to the concat's type), then the sum of both paths.
    if (c.interaction_cast()) op.kernels.push_back(elementwise("cast_backward", c.batch * tp * dim, 0, ab + ib));
    op.kernels.push_back(elementwise("add", c.batch * tp * dim, 1, 3 * ib));
  } else {
    if (c.interaction_cast()) op.kernels.push_back(elementwise("cast_backward", c.batch * width, 0, ab + ib));
    op.kernels.push_back(elementwise("copy", c.batch * width, 0, 2 * ib));
  }
  // Sequence tables: the summed rows' gradient repeated for each index (reads one row per
  // sample and feature, writes pooling).
  if (const double sd = c.sequence_dims(); sd > 0) {
    const double srd = c.sequence_row_dims();
    op.kernels.push_back(elementwise("sequence_sum_backward", c.batch * srd, 0, 4.0 * (srd + sd) / srd));
  }
  d.interaction_grad = d.add(std::move(op));
}

/// The transposes of the forward exchanges, in the order autograd issues them: pooled
/// all-to-all, row-wise all-gather, across nodes then inside the node.
void add_embedding_exchange_backward(const RankContext& c, RankDraft& d) {
  const int grad = d.interaction_grad;
  if (d.output_dist >= 0) {
    d.embedding_grads_ready.push_back(
        d.add(c.all_to_all_op("output_dist.backward", Phase::kBackward, &RankContext::output_pairs, {grad}, true)));
  }
  if (d.row_wise_rs >= 0) {
    CollectiveDesc ag{CollectiveKind::kAllGather, c.rw_bytes(), {}};
    d.embedding_grads_ready.push_back(d.add(c.coll("output_dist.row_wise.backward", Phase::kBackward, ag, {grad})));
  }
  int node_ready = grad;
  if (d.cross_node_a2a >= 0) {
    node_ready = d.add(c.cross_node_op("output_dist.table_row_wise.cross_node.backward", Phase::kBackward, {grad}, true));
    d.embedding_grads_ready.push_back(node_ready);
  }
  if (d.node_rs >= 0) {
    CollectiveDesc ag{CollectiveKind::kAllGather, double(c.w.batch_size) * c.my_node_output_bytes(), {}};
    d.embedding_grads_ready.push_back(d.add(c.coll("output_dist.table_row_wise.backward",
                                                   numbered("output_dist.table_row_wise.backward.node", c.rank / c.gpus_per_node),
                                                   Phase::kBackward, ag, {node_ready}, c.node_group())));
  }
  if (d.hybrid_dist >= 0) {
    d.embedding_grads_ready.push_back(
        d.add(c.all_to_all_op("output_dist.hybrid.backward", Phase::kBackward, &RankContext::hybrid_pairs, {grad}, true)));
  }
  if (c.world == 1) d.embedding_grads_ready.push_back(grad);
  // Hybrid layout: the bottom output's gradients back to the bottom MLP's rank.
  d.bottom_grad_ready = grad;
  if (c.hybrid_dense() && c.world > 1) {
    d.bottom_grad_ready = d.add(c.all_to_all_op("bottom_mlp.output_dist.backward", Phase::kBackward,
                                                &RankContext::bottom_output_pairs, {grad}, true));
  }
}

/// The weight gradients the top MLP and the cross layers deferred, issued after the
/// embedding gradients' exchange so that they run while it is in flight; each joins the DDP
/// buckets as it is issued.
void add_deferred_weight_gradients(const RankContext& c, RankDraft& d) {
  for (auto& [op, params] : d.deferred_weight_grads) {
    const int id = d.add(std::move(op));
    d.params_ready(c, id, params);
  }
  d.deferred_weight_grads.clear();
}

/// Each bottom MLP layer's backward from the last (the first layer has no data
/// gradient); the last DDP bucket is all-reduced after it.
void add_bottom_mlp_backward(const RankContext& c, RankDraft& d) {
  int prev = d.bottom_grad_ready >= 0 ? d.bottom_grad_ready : d.interaction_grad;
  for (std::size_t i = d.bottom_layers.size(); i-- > 0;) {
    const std::int64_t bin = c.w.bottom_mlp[i], bout = c.w.bottom_mlp[i + 1];
    prev = d.add(c.linear_backward(numbered("bottom_mlp.", i, ".backward"), bin, bout, i > 0, true, prev, c.bottom_batch()));
    if (!c.hybrid_dense()) d.grad_ready(c, prev, bin, bout);  // hybrid: one copy, nothing to all-reduce
  }
  d.flush_bucket(c, prev);
}

/// The sharded tables' backward with the fused optimizer (once their gradients have
/// arrived), then the data-parallel tables' gradients, all-reduce and update.
void add_embedding_backward(const RankContext& c, RankDraft& d) {
  if (auto e = c.embedding_desc(EmbeddingPass::kBackward, false)) {
    Op op{"embedding_backward", Phase::kBackward, Stream::kCompute, {}, {}, d.embedding_grads_ready, false};
    op.kernels.push_back(std::move(*e));
    d.add(std::move(op));
  }
  if (d.lookup_dp >= 0) add_data_parallel_tables_backward(c, d, d.interaction_grad);
}

/// The dense optimizer after every gradient bucket (SGD: read weight and grad, write
/// weight; Adam: also read and write two moments; Adagrad: one accumulator), the half copy of the weights under
/// mixed precision, and the host reading the loss (`sync_each_iteration`).
void add_optimizer_step(const RankContext& c, RankDraft& d) {
  const double params = c.w.dense_parameters() - (c.runs_bottom_mlp() ? 0.0 : c.w.bottom_parameters());
  // FLOPs and bytes per parameter: SGD reads weight and grad, writes weight (12 B); Adam
  // also reads and writes two moments (28 B); Adagrad one accumulator (20 B).
  const DenseOptimizer o = c.w.dense_optimizer;
  const char* name = o == DenseOptimizer::kAdam ? "adam" : o == DenseOptimizer::kAdagrad ? "adagrad" : "sgd";
  const double flops = o == DenseOptimizer::kAdam ? 12 : o == DenseOptimizer::kAdagrad ? 5 : 2;
  const double bytes = o == DenseOptimizer::kAdam ? 28 : o == DenseOptimizer::kAdagrad ? 20 : 12;
  std::vector<int> deps = d.allreduces;
  if (c.w.mlp_dtype == DType::kFp16) {
    // torch.cuda.amp.GradScaler (fp16 only): unscale the fp32 gradients and look for
    // infinities (read and write 4 B per parameter), then GradScaler.step reads the verdict
    // with .item() before stepping an optimizer without AMP support of its own: the host
    // waits for the GPU once per iteration.
    deps = {d.add({"grad_scaler.unscale", Phase::kOptimizer, Stream::kCompute, {elementwise("unscale", params, 2, 8)}, {},
                   std::move(deps), false})};
    deps = {d.add({"grad_scaler.found_inf.item", Phase::kOptimizer, Stream::kCompute, {MemcpyDesc{4, CopyKind::kDeviceToHost}},
                   {}, std::move(deps), true})};
  }
  int prev = d.add({std::string("dense_optimizer.") + name, Phase::kOptimizer, Stream::kCompute,
                    {elementwise(name, params, flops, bytes)}, {}, std::move(deps), false});
  if (c.mixed_precision()) {  // the half copy of the fp32 master parameters the next forward reads
    prev = d.add({"copy_main_params", Phase::kOptimizer, Stream::kCompute,
                  {elementwise("cast", params, 0, 4 + c.act_bytes())}, {}, {prev}, false});
  }
  if (c.w.sync_each_iteration) {
    d.add({"loss.item", Phase::kOptimizer, Stream::kCompute, {MemcpyDesc{4, CopyKind::kDeviceToHost}}, {}, {d.loss, prev}, true});
  }
}

}  // namespace perfcast::dlrm
