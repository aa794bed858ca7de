// One rank of a multi-GPU run (DeviceDlrm's second constructor, device_dlrm.hpp): the shard
// groups, the exchange buffer and its column map, and the NCCL collectives of the forward and
// backward. The step itself (device_dlrm.cpp) calls exchange_forward, exchange_backward and
// ddp_bucket_done at the points of the iteration where TorchRec / DDP run them.
#include <algorithm>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "profiler/cuda_check.hpp"
#include "validation/device_dlrm_impl.hpp"
#include "validation/executor_kernels.hpp"
#include "validation/multi_gpu_layout.hpp"
#if PERFCAST_HAVE_NCCL
#include "validation/nccl_comm.hpp"
#endif

namespace perfcast::validation {

#if PERFCAST_HAVE_NCCL

/// The communication stream waits for the work enqueued so far on the compute stream.
void DeviceDlrm::Impl::to_comm() {
  PERFCAST_CUDA_CHECK(cudaEventRecord(ev_to_comm, compute));
  PERFCAST_CUDA_CHECK(cudaStreamWaitEvent(comm_stream, ev_to_comm, 0));
}

/// The compute stream waits for the collectives enqueued so far.
void DeviceDlrm::Impl::from_comm() {
  PERFCAST_CUDA_CHECK(cudaEventRecord(ev_from_comm, comm_stream));
  PERFCAST_CUDA_CHECK(cudaStreamWaitEvent(compute, ev_from_comm, 0));
}

/// A rank's three lookup groups and the exchange layout (see multi_gpu_layout.hpp):
///  exch = [all-to-all receive: source i's [B, C_i] block, sources in rank order]
///         [reduce-scatter output [B, row_wise_dims]] [data-parallel lookup [B, C_dp]]
/// and the column map that assembles pooled [B, total_dim] from it (every pooled column
/// comes from exactly one place; checked).
void DeviceDlrm::Impl::plan_groups_sharded(const DeviceDlrmShard& shard) {
  const MultiGpuLayout& L = *shard.layout;
  const RankLayout& R = L.ranks[sz(rank)];
  const std::array<const std::vector<std::size_t>*, 3> members{&R.pooled_group, &R.row_wise_group,
                                                               &R.data_parallel_group};
  const std::array<std::int64_t, 3> bags{L.global_batch, L.global_batch, L.local_batch};
  for (std::size_t g = 0; g < 3; ++g) {
    auto& grp = groups[g];
    if (members[g]->empty()) continue;
    std::vector<profiler::TableShape> shapes;
    for (const std::size_t k : *members[g]) {
      const LocalShard& ls = R.shards[k];
      shapes.push_back({ls.shard.rows, static_cast<std::int32_t>(ls.shard.cols)});
      grp.origins.push_back({ls.table, ls.shard.row_offset, ls.shard.col_offset});
    }
    grp.used = true;
    grp.layout = profiler::make_embedding_bag_layout(shapes, bags[g]);
    if (g == 1) place_row_wise_outputs(grp.layout, L, rank);  // straight into the [B, row_wise_dims] partial sums
    grp.capacity = shard.max_indices[g];
  }
  // Forward all-to-allv: to every rank j, rows [j b, (j+1) b) of this rank's [B_global, C_r]
  // lookup output; from every source i, its [b, C_i].
  const auto world = static_cast<std::size_t>(L.world);
  const std::int64_t b = L.local_batch, Cr = R.pooled_send_cols();
  a2a_send_counts.assign(world, b * Cr);
  a2a_send_displs.resize(world);
  a2a_recv_counts.resize(world);
  a2a_recv_displs.resize(world);
  std::vector<std::int64_t> base(sz(total_dim), -1);
  std::vector<std::int32_t> stride(sz(total_dim), 0);
  const auto map = [&](std::int64_t pooled_col, std::int64_t at, std::int64_t row_stride) {
    if (pooled_col < 0 || pooled_col >= total_dim || base[sz(pooled_col)] >= 0) {
      throw std::logic_error(fmt::format("DeviceDlrm: pooled column {} mapped twice or out of range", pooled_col));
    }
    base[sz(pooled_col)] = at;
    stride[sz(pooled_col)] = static_cast<std::int32_t>(row_stride);
  };
  std::int64_t at = 0;
  for (std::size_t i = 0; i < world; ++i) {
    a2a_send_displs[i] = static_cast<std::int64_t>(i) * b * Cr;
    const RankLayout& src = L.ranks[i];
    const std::int64_t Ci = src.pooled_send_cols();
    a2a_recv_counts[i] = b * Ci;
    a2a_recv_displs[i] = at;
    any_pooled = any_pooled || Ci > 0;
    std::int64_t c0 = 0;
    for (const PooledBlock& blk : src.pooled_send) {
      for (std::int64_t q = 0; q < blk.cols; ++q) map(blk.pooled_col + q, at + c0 + q, Ci);
      c0 += blk.cols;
    }
    at += b * Ci;
  }
  rs_at = at;
  row_wise_dims = L.row_wise_dims;
  for (const RowWiseBlock& blk : L.row_wise_blocks) {  // every block, held here or not
    for (std::int64_t q = 0; q < blk.cols; ++q) map(blk.pooled_col + q, rs_at + blk.row_wise_col + q, row_wise_dims);
  }
  dp_at = rs_at + b * row_wise_dims;
  std::int64_t c_dp = 0;
  for (const std::size_t k : R.data_parallel_group) c_dp += R.shards[k].shard.cols;
  std::int64_t c0 = 0;
  for (const std::size_t k : R.data_parallel_group) {
    const LocalShard& ls = R.shards[k];
    for (std::int64_t q = 0; q < ls.shard.cols; ++q) map(ls.pooled_col + q, dp_at + c0 + q, c_dp);
    c0 += ls.shard.cols;
  }
  for (std::int64_t k = 0; k < total_dim; ++k) {
    if (base[sz(k)] < 0) throw std::logic_error(fmt::format("DeviceDlrm: pooled column {} has no source", k));
  }
  if (dp_at + b * c_dp != b * total_dim) throw std::logic_error("DeviceDlrm: exchange buffer size mismatch");
  exch = alloc_f(B * total_dim);
  dexch = alloc_f(B * total_dim);
  map_base = static_cast<std::int64_t*>(alloc(sz(total_dim) * sizeof(std::int64_t)));
  map_stride = static_cast<std::int32_t*>(alloc(sz(total_dim) * sizeof(std::int32_t)));
  PERFCAST_CUDA_CHECK(cudaMemcpy(map_base, base.data(), base.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice));
  PERFCAST_CUDA_CHECK(cudaMemcpy(map_stride, stride.data(), stride.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
}

DeviceDlrm::DeviceDlrm(const DlrmModel& model, const DeviceDlrmOptions& options, const DeviceDlrmShard& shard)
    : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  if (!shard.layout || !shard.comm) throw std::invalid_argument("DeviceDlrm: a rank needs its layout and communicator");
  const MultiGpuLayout& L = *shard.layout;
  if (shard.rank < 0 || shard.rank >= L.world || shard.comm->world() != L.world || shard.comm->rank() != shard.rank) {
    throw std::invalid_argument("DeviceDlrm: rank, layout and communicator disagree");
  }
  if (model.config.batch_size != L.local_batch || model.embeddings.size() != 0) {
    throw std::invalid_argument("DeviceDlrm: a rank's model has the local batch and no embeddings");
  }
  s.init_common(model, options);
  if (s.total_dim != L.total_dim) throw std::invalid_argument("DeviceDlrm: the model's tables do not match the layout");
  s.ml = shard.layout;
  s.comm = shard.comm;
  s.rank = shard.rank;
  s.grad_denominator = L.global_batch;
  PERFCAST_CUDA_CHECK(cudaStreamCreateWithFlags(&s.comm_stream, cudaStreamNonBlocking));
  PERFCAST_CUDA_CHECK(cudaEventCreateWithFlags(&s.ev_to_comm, cudaEventDisableTiming));
  PERFCAST_CUDA_CHECK(cudaEventCreateWithFlags(&s.ev_from_comm, cudaEventDisableTiming));
  s.plan_groups_sharded(shard);
  s.allocate_batch_and_groups();
  s.pooled = s.alloc_f(s.B * s.total_dim);
  s.dpooled = s.alloc_f(s.B * s.total_dim);
  const std::int64_t Bg = L.global_batch;
  if (s.groups[0].used) {  // lookup output [B_global, C_r] is the all-to-all's send buffer
    s.groups[0].out = s.alloc_f(Bg * s.groups[0].layout.total_dim);
    s.groups[0].dout = s.alloc_f(Bg * s.groups[0].layout.total_dim);
  }
  if (s.row_wise_dims > 0) {
    // Partial sums [B_global, row_wise_dims], reduce-scattered; the lookup (when this rank
    // holds row ranges) writes only its blocks' columns, the others stay zero from here on.
    s.groups[1].out = s.alloc_f(Bg * s.row_wise_dims);
    s.groups[1].dout = s.alloc_f(Bg * s.row_wise_dims);
    PERFCAST_CUDA_CHECK(cudaMemset(s.groups[1].out, 0, sz(Bg * s.row_wise_dims) * sizeof(float)));
  }
  if (s.groups[2].used) {  // straight into the exchange buffer; dense gradient for the all-reduce
    s.groups[2].out = s.exch + s.dp_at;
    s.groups[2].dout = s.dexch + s.dp_at;
    s.groups[2].dense_grad = s.alloc_f(s.groups[2].layout.total_weight_elements);
  }
  // DDP buckets: the layer whose backward completes a bucket launches its all-reduce.
  s.bucket_closed_by.assign(model.bottom.size() + model.top.size(), -1);
  for (std::size_t k = 0; k < L.buckets.size(); ++k) {
    const auto& layers = L.buckets[k].layers;
    if (layers.empty() || static_cast<std::size_t>(layers.back()) >= s.bucket_closed_by.size()) {
      throw std::invalid_argument("DeviceDlrm: DDP buckets do not match the model's layers");
    }
    s.bucket_closed_by[sz(layers.back())] = static_cast<int>(k);
  }
  s.build_layers(model, reinterpret_cast<float*>(s.batch_dev + s.dense_at));
  s.upload(model);
}

int DeviceDlrm::add_batch(const RankInput& input) {
  auto& s = *impl_;
  if (!s.sharded()) throw std::logic_error("DeviceDlrm::add_batch: a single-GPU model takes a DlrmBatch");
  if (input.local.dense.size() != sz(s.B * s.cfg.dense_features()) || input.local.labels.size() != sz(s.B)) {
    throw std::invalid_argument("DeviceDlrm::add_batch: dense or label count does not match the local batch");
  }
  return s.stage(input.local.dense.data(), input.local.labels.data(),
                 {&input.pooled, &input.row_wise, &input.data_parallel});
}

/// DDP: the layer whose backward completes a bucket launches the bucket's all-reduce (sum:
/// the logit gradient is already divided by the global batch) on the communication stream.
void DeviceDlrm::Impl::ddp_bucket_done(int layer_index) {
  const int k = bucket_closed_by[sz(layer_index)];
  if (k < 0) return;
  const GradientBucket& bucket = ml->buckets[sz(k)];
  to_comm();
  comm->all_reduce(grads + bucket.first_elem, bucket.elems, comm_stream);
}

/// After the lookups: the pooled all-to-allv and the row-wise reduce-scatter into the exchange
/// buffer, then the column map assembles pooled [B, total_dim].
void DeviceDlrm::Impl::exchange_forward() {
  cudaStream_t cs = compute;
  if (any_pooled || row_wise_dims > 0) {
    to_comm();
    if (any_pooled) {
      comm->all_to_all_v(groups[0].out, a2a_send_counts, a2a_send_displs, exch, a2a_recv_counts, a2a_recv_displs,
                         comm_stream);
    }
    if (row_wise_dims > 0) comm->reduce_scatter(groups[1].out, exch + rs_at, B * row_wise_dims, comm_stream);
    from_comm();
  }
  kernels::launch_column_map(pooled, total_dim, exch, map_base, map_stride, B, /*to_pooled=*/true, cs);
}

/// After the interaction backward (dpooled ready): the gradients go back through the
/// transposed all-to-allv and the all-gather, the data-parallel tables' dense gradient is
/// all-reduced, the bottom MLP's backward (and its DDP buckets) overlaps them; then the shard
/// groups' fused backward updates and the data-parallel tables' dense update.
void DeviceDlrm::Impl::exchange_backward(const Staged& st,
                                         const std::array<profiler::kernels::EmbeddingBagDeviceBatch, 3>& eb,
                                         const profiler::OptimizerConfig& eo, void* ws) {
  cudaStream_t cs = compute;
  kernels::launch_column_map(dpooled, total_dim, dexch, map_base, map_stride, B, /*to_pooled=*/false, cs);
  auto& dp = groups[2];
  if (dp.used) {
    // Dense gradient of the data-parallel tables: the fused backward with SGD at rate -1 on a
    // zeroed fp32 buffer leaves exactly the summed gradient of every row there.
    PERFCAST_CUDA_CHECK(cudaMemsetAsync(dp.dense_grad, 0, sz(dp.layout.total_weight_elements) * 4, cs));
    profiler::OptimizerConfig extract;
    extract.kind = profiler::OptimizerKind::kSgd;
    extract.learning_rate = -1.0f;
    const auto eb32 = device_batch(2, st, profiler::WeightPrecision::kFp32);
    profiler::kernels::launch_embedding_bag_backward_update(eb32, dp.dense_grad, nullptr, dp.dout, extract,
                                                            emb_workspace, emb_workspace_bytes, cs);
  }
  to_comm();
  if (any_pooled) {  // transposed: the gradients of the blocks go back to their sources
    comm->all_to_all_v(dexch, a2a_recv_counts, a2a_recv_displs, groups[0].used ? groups[0].dout : nullptr,
                       a2a_send_counts, a2a_send_displs, comm_stream);
  }
  if (row_wise_dims > 0) comm->all_gather(dexch + rs_at, groups[1].dout, B * row_wise_dims, comm_stream);
  if (dp.used) comm->all_reduce(dp.dense_grad, dp.layout.total_weight_elements, comm_stream);
  for (std::size_t l = bottom.size(); l-- > 0;) {
    layer_backward(bottom[l], bottom_act[l + 1], dbottom_act[l + 1], static_cast<int>(l), ws);
  }
  from_comm();  // embedding gradients arrived, every DDP bucket reduced
  for (std::size_t g = 0; g < 2; ++g) {
    if (!groups[g].used) continue;
    profiler::kernels::launch_embedding_bag_backward_update(eb[g], groups[g].weights, groups[g].rowwise_state,
                                                            groups[g].dout, eo, emb_workspace, emb_workspace_bytes, cs);
  }
  if (dp.used) {
    const auto wbytes = static_cast<std::size_t>(profiler::weight_bytes(cfg.embedding_precision));
    for (const auto& tm : dp.layout.tables) {
      kernels::launch_dense_embedding_update(static_cast<unsigned char*>(dp.weights) + sz(tm.weight_offset) * wbytes,
                                             cfg.embedding_precision, dp.dense_grad + tm.weight_offset,
                                             dp.rowwise_state ? dp.rowwise_state + tm.row_offset : nullptr, tm.rows,
                                             tm.dim, eo, cs);
    }
  }
}

#else  // no NCCL: a rank cannot be built

DeviceDlrm::DeviceDlrm(const DlrmModel& /*model*/, const DeviceDlrmOptions& /*options*/,
                       const DeviceDlrmShard& /*shard*/)
    : impl_(std::make_unique<Impl>()) {
  throw std::logic_error("DeviceDlrm: this build has no NCCL, a multi-GPU rank cannot be built");
}

int DeviceDlrm::add_batch(const RankInput& /*input*/) {
  throw std::logic_error("DeviceDlrm::add_batch: this build has no NCCL");
}

void DeviceDlrm::Impl::ddp_bucket_done(int /*layer_index*/) {}
void DeviceDlrm::Impl::exchange_forward() {}
void DeviceDlrm::Impl::exchange_backward(const Staged&, const std::array<profiler::kernels::EmbeddingBagDeviceBatch, 3>&,
                                         const profiler::OptimizerConfig&, void*) {}

#endif

}  // namespace perfcast::validation
