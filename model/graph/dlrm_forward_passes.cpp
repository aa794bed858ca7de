/// \file dlrm_forward_passes.cpp
/// The forward passes of a DLRM rank, in host order: batch copy, input all-to-all,
/// bottom MLP, embedding lookups, the exchange of pooled embeddings, interaction, top
/// MLP and loss.

#include <utility>

#include "model/graph/dlrm_rank_passes.hpp"

namespace perfcast::dlrm {
namespace {

std::vector<int> deps_of(int op) { return op >= 0 ? std::vector<int>{op} : std::vector<int>{}; }

/// A compute op of one kernel, moved in (an initializer list would copy it; embedding
/// descriptors carry a vector of tables).
Op single_kernel_op(std::string name, Phase phase, KernelDesc kernel, std::vector<int> deps) {
  Op op{std::move(name), phase, Stream::kCompute, {}, {}, std::move(deps), false};
  op.kernels.push_back(std::move(kernel));
  return op;
}

}  // namespace

/// The host-to-device copy of the local batch: fp32 dense features and label, and each
/// table's indices plus one offset per bag.
void add_batch_copy(const RankContext& c, RankDraft& d) {
  // Dense features (only to the bottom MLP's rank, for its samples) and labels.
  const double dense_rows = c.runs_bottom_mlp() ? double(c.bottom_batch()) : 0.0;
  double batch_bytes = dense_rows * c.w.dense_features() * 4.0 + c.batch * 4.0;
  for (const auto& t : c.w.tables) batch_bytes += c.batch * (t.pooling + 1) * c.w.index_bytes;
  Op copy{"batch_h2d", Phase::kInput, Stream::kCopy, {MemcpyDesc{batch_bytes, CopyKind::kHostToDevice}}, {}, {}, false};
  // Without an overlapped reader the training thread assembles the batch itself.
  if (!c.w.stack.overlapped_reader) copy.host_samples = double(c.batch);
  d.batch_copy = d.add(std::move(copy));
  d.inputs_ready = d.batch_copy;
  // CUDA graphs: one launch replays the rest of the iteration (the reader's copy stays outside).
  if (c.cuda_graphs()) {
    Op launch{"cuda_graph.launch", Phase::kForward, Stream::kCompute, {}, {}, {}, false};
    launch.graph_launch = true;
    d.add(std::move(launch));
  }
}

namespace {
/// `op` reads the indices its lookup needs: the input all-to-all's, or the batch copy's.
void reads_indices(const RankContext& c, const RankDraft& d, Op& op) {
  if (d.inputs_ready == d.batch_copy) {
    c.reads_batch(op, d.batch_copy);
  } else {
    c.reads_input(op, d.inputs_ready);
  }
}
/// Tables whose inputs the framework splits and permutes one by one for this rank's sparse
/// lookups (TorchRec's KeyedJaggedTensor): its shards.
int sparse_tables(const RankContext& c) {
  int n = 0;
  for (const auto& ref : c.local) n += ref.type != ShardingType::kDataParallel ? 1 : 0;
  return n;
}
}  // namespace

/// Several ranks with sparse tables: the all-to-all of lengths, then of indices, to the
/// ranks that hold the shards (TorchRec input_dist). Under the sparse_dist pipeline it is
/// the next batch's, whose copy the previous iteration issued.
void add_input_distribution(const RankContext& c, RankDraft& d) {
  if (c.world <= 1 || !c.has_sparse_tables()) return;
  Op lengths = c.all_to_all_op("input_dist.lengths", Phase::kForward, &RankContext::input_length_pairs, {});
  c.reads_batch(lengths, d.batch_copy);
  // TorchRec splits the batch's KeyedJaggedTensor by feature and destination.
  for (const auto& t : c.plan.tables) lengths.host_tables += t.type != ShardingType::kDataParallel ? 1 : 0;
  d.add(std::move(lengths));
  Op indices = c.all_to_all_op("input_dist.indices", Phase::kForward, &RankContext::input_index_pairs, {});
  c.reads_batch(indices, d.batch_copy);
  d.inputs_ready = d.add(std::move(indices));
}

/// Mixed precision: the cast of the dense features; then one GEMM (+bias, ReLU) per layer.
void add_bottom_mlp(const RankContext& c, RankDraft& d) {
  if (!c.runs_bottom_mlp()) return;  // hybrid layout: another rank runs it
  const std::int64_t rows = c.bottom_batch();
  int prev = -1;  // the dense features: the batch copy (an input), then each layer
  if (c.mixed_precision()) {  // autocast: the fp32 dense features cast to the GEMMs' half type
    Op cast{"dense_features.cast", Phase::kForward, Stream::kCompute,
            {elementwise("cast", double(rows) * c.w.dense_features(), 0, 4 + c.act_bytes())}, {}, {}, false};
    c.reads_batch(cast, d.batch_copy);
    prev = d.add(std::move(cast));
  }
  const auto& mlp = c.w.bottom_mlp;
  for (std::size_t i = 1; i < mlp.size(); ++i) {
    Op layer{numbered("bottom_mlp.", i - 1), Phase::kForward, Stream::kCompute,
             {GemmDesc{rows, mlp[i], mlp[i - 1], 1, c.w.mlp_dtype, true}}, {}, {}, false};
    if (prev >= 0) {
      layer.deps.push_back(prev);
    } else {
      c.reads_batch(layer, d.batch_copy);
    }
    prev = d.add(std::move(layer));
    d.bottom_layers.push_back(prev);
  }
  if (prev < 0) prev = d.batch_copy;
  d.bottom_out = prev;
}

/// The fused lookup of the rank's sharded tables (global batch: after the input
/// all-to-all) and of its data-parallel tables (local batch).
void add_embedding_lookups(const RankContext& c, RankDraft& d) {
  if (auto e = c.embedding_desc(EmbeddingPass::kForward, /*dp=*/false)) {
    Op op = single_kernel_op("embedding_lookup", Phase::kForward, std::move(*e), {});
    if (c.semi_sync() && d.inputs_ready != d.batch_copy) {
      op.deps.push_back(d.inputs_ready);  // the next batch's indices, distributed this iteration
    } else {
      reads_indices(c, d, op);
    }
    op.host_tables = sparse_tables(c);
    d.lookup = d.add(std::move(op));
  }
  if (auto e = c.embedding_desc(EmbeddingPass::kForward, /*dp=*/true)) {
    Op op = single_kernel_op("embedding_lookup.data_parallel", Phase::kForward, std::move(*e), {});
    c.reads_batch(op, d.batch_copy);
    d.lookup_dp = d.add(std::move(op));
  }
}

/// Pooled embeddings back to the ranks of their samples: the pooled all-to-all
/// (table/column-wise), the row-wise reduce-scatter, and for table_row_wise / grid the
/// reduce-scatter inside the node then the all-to-all across nodes.
void add_embedding_exchange(const RankContext& c, RankDraft& d) {
  if (c.world > 1 && c.has_pooled_all_to_all()) {
    d.output_dist = d.add(c.all_to_all_op("output_dist", Phase::kForward, &RankContext::output_pairs, deps_of(d.lookup)));
    d.embeddings_ready.push_back(d.output_dist);
  }
  if (c.world > 1 && c.has_row_wise()) {
    CollectiveDesc rs{CollectiveKind::kReduceScatter, c.rw_bytes(), {}};
    d.row_wise_rs = d.add(c.coll("output_dist.row_wise", Phase::kForward, rs, deps_of(d.lookup)));
    d.embeddings_ready.push_back(d.row_wise_rs);
  }
  const bool node_comm = c.world > 1 && c.has_node_reduced();
  const int node = c.rank / c.gpus_per_node;
  if (node_comm && c.my_node_output_bytes() > 0) {
    CollectiveDesc rs{CollectiveKind::kReduceScatter, double(c.w.batch_size) * c.my_node_output_bytes(), {}};
    d.node_rs = d.add(c.coll("output_dist.table_row_wise", numbered("output_dist.table_row_wise.node", node), Phase::kForward,
                             rs, deps_of(d.lookup), c.node_group()));
    d.embeddings_ready.push_back(d.node_rs);
  }
  if (node_comm && c.world / c.gpus_per_node > 1) {
    d.cross_node_a2a = d.add(c.cross_node_op("output_dist.table_row_wise.cross_node", Phase::kForward,
                                             deps_of(d.node_rs >= 0 ? d.node_rs : d.lookup), false));
    d.embeddings_ready.push_back(d.cross_node_a2a);
  }
  if (c.world > 1 && c.has_hybrid()) {
    d.hybrid_dist = d.add(c.all_to_all_op("output_dist.hybrid", Phase::kForward, &RankContext::hybrid_pairs, deps_of(d.lookup)));
    d.embeddings_ready.push_back(d.hybrid_dist);
  }
  if (c.world == 1 && d.lookup >= 0) d.embeddings_ready.push_back(d.lookup);
  if (d.lookup_dp >= 0) d.embeddings_ready.push_back(d.lookup_dp);
  // Hybrid layout: the bottom MLP's rank sends each rank its samples' output.
  d.bottom_ready = d.bottom_out;
  if (c.hybrid_dense() && c.world > 1) {
    d.bottom_ready = d.add(c.all_to_all_op("bottom_mlp.output_dist", Phase::kForward, &RankContext::bottom_output_pairs,
                                           deps_of(d.bottom_out)));
  }
}

/// Sequence tables' sum, then: dot interaction: concat, the batched Gram matrix of the features, the lower triangle
/// concatenated with the bottom output; cat interaction: one concat; dcn_v2: the concat,
/// then one op per cross layer.
void add_interaction(const RankContext& c, RankDraft& d) {
  const double ab = c.act_bytes();
  const double tp = static_cast<double>(c.w.tables.size()) + 1;  // interaction features
  const double dim = static_cast<double>(c.w.bottom_mlp.back());
  const double width = static_cast<double>(c.w.interaction_width());
  std::vector<int> deps;
  if (d.bottom_ready >= 0) deps.push_back(d.bottom_ready);
  Op inter{"interaction", Phase::kForward, Stream::kCompute, {}, {}, std::move(deps), false};
  // semi_sync: this batch's embeddings were looked up and exchanged one iteration earlier.
  for (int e : d.embeddings_ready) (c.semi_sync() ? inter.prev_deps : inter.deps).push_back(e);
  const double ib = c.interaction_bytes();
  // Sequence tables arrive unpooled (one fp32 row per index): each sample's rows are summed
  // first (reads pooling rows, writes one, per sequence feature).
  if (const double sd = c.sequence_dims(); sd > 0) {
    const double srd = c.sequence_row_dims();
    inter.kernels.push_back(elementwise("sequence_sum", c.batch * sd, srd / sd, 4.0 * (srd + sd) / sd));
  }
  // Hybrid tables: the infrequent rows' partial sums added to the frequent rows' (fp32).
  if (const double hd = c.hybrid_dims(); hd > 0) inter.kernels.push_back(elementwise("hybrid_combine", c.batch * hd, 1, 12));
  if (c.w.interaction == Interaction::kDot && c.w.stack.fused_interaction) {
    // One kernel reads the features and writes the lower triangle beside the bottom output
    // (NVIDIA's fused dot interaction): the Gram matrix's GEMM with its operands' traffic.
    inter.kernels.push_back(GemmDesc{static_cast<std::int64_t>(tp), static_cast<std::int64_t>(tp),
                                     static_cast<std::int64_t>(dim), c.batch, c.w.mlp_dtype, false});
  } else if (c.w.interaction == Interaction::kDot) {
    inter.kernels.push_back(elementwise("concat", c.batch * tp * dim, 0, 2 * ib));
    if (c.interaction_cast()) inter.kernels.push_back(elementwise("cast", c.batch * tp * dim, 0, ib + ab));  // bmm's input
    inter.kernels.push_back(GemmDesc{static_cast<std::int64_t>(tp), static_cast<std::int64_t>(tp),
                                     static_cast<std::int64_t>(dim), c.batch, c.w.mlp_dtype, false});
    inter.kernels.push_back(elementwise("tril_concat", c.batch * width, 0, 2 * ab));
  } else {
    inter.kernels.push_back(elementwise("concat", c.batch * width, 0, 2 * ib));
    // The first top MLP layer (cat) or cross layer (dcn_v2) casts its input to half.
    if (c.interaction_cast()) inter.kernels.push_back(elementwise("cast", c.batch * width, 0, ib + ab));
  }
  d.interaction = d.add(std::move(inter));
  if (c.w.interaction != Interaction::kDcnV2) return;
  // DCNv2 cross layers: z = x_l V (B x width . width x r), y = z W + b (r x width, bias
  // epilogue), x_{l+1} = x0 * y + x_l (reads three, writes one; in the concat's type:
  // autocast promotes the half y to x0's type).
  // How the stack runs the elementwise tail: eager a multiply then an add (each reads two,
  // writes one), one generated kernel (reads three, writes one), or W's GEMM epilogue
  // reading x0 and x_l.
  const auto w64 = static_cast<std::int64_t>(width);
  const Fusion fusion = c.w.stack.dcn_cross;
  for (int l = 0; l < c.w.dcn_layers; ++l) {
    Op layer{numbered("dcn.cross.", l), Phase::kForward, Stream::kCompute, {}, {}, {d.interaction}, false};
    layer.kernels.push_back(GemmDesc{c.batch, c.w.dcn_rank, w64, 1, c.w.mlp_dtype, false});
    GemmDesc up{c.batch, w64, c.w.dcn_rank, 1, c.w.mlp_dtype, true};
    if (fusion == Fusion::kEpilogue) up.epilogue_inputs = 2;
    layer.kernels.push_back(up);
    if (fusion == Fusion::kNone) {
      layer.kernels.push_back(elementwise("dcn_cross_mul", c.batch * width, 1, 3 * ib));
      layer.kernels.push_back(elementwise("dcn_cross_add", c.batch * width, 1, 3 * ib));
    } else if (fusion == Fusion::kPointwise) {
      layer.kernels.push_back(elementwise("dcn_cross", c.batch * width, 2, 4 * ib));
    }
    d.interaction = d.add(std::move(layer));
  }
}

/// One GEMM (+bias, ReLU) per top MLP layer, then the sigmoid + binary cross-entropy loss.
void add_top_mlp_and_loss(const RankContext& c, RankDraft& d) {
  int prev = d.interaction;
  std::int64_t in = c.w.interaction_width();
  for (std::size_t i = 0; i < c.w.top_mlp.size(); ++i) {
    d.top_in.push_back(in);
    prev = d.add({numbered("top_mlp.", i), Phase::kForward, Stream::kCompute,
                  {GemmDesc{c.batch, c.w.top_mlp[i], in, 1, c.w.mlp_dtype, true}}, {}, {prev}, false});
    in = c.w.top_mlp[i];
  }
  d.loss = d.add({"loss", Phase::kForward, Stream::kCompute, {elementwise("sigmoid_bce", c.batch, 11, 12)}, {}, {prev}, false});
}

}  // namespace perfcast::dlrm
