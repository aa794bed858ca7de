#include "validation/dlrm_sharded_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "profiler/embedding_bag_reference.hpp"
#include "validation/dlrm_reference_ops.hpp"

namespace perfcast::validation {
namespace {

using profiler::PoolingMode;
namespace ops = reference_ops;

using reference_ops::sz;

/// One group of rank `R`: the shards `group` (indices into R.shards) sliced out of `full`,
/// looked up on `batch` bags per shard.
ShardGroup make_group(const DlrmModel& full, const RankLayout& R, const std::vector<std::size_t>& group,
                      std::int64_t batch) {
  ShardGroup g;
  g.shards = group;
  if (group.empty()) return g;
  std::vector<profiler::TableShape> shapes;
  for (const std::size_t k : group) {
    const LocalShard& ls = R.shards[k];
    if (ls.table >= full.layout.tables.size()) {
      throw std::invalid_argument(fmt::format("sharded DLRM: a shard of table {}, the model has {} tables", ls.table,
                                              full.layout.tables.size()));
    }
    // Bounds were checked by init_sharded_dlrm's tiling check.
    shapes.push_back(profiler::TableShape{ls.shard.rows, static_cast<std::int32_t>(ls.shard.cols)});
  }
  g.layout = profiler::make_embedding_bag_layout(shapes, batch);
  g.weights = profiler::HostEmbeddingWeights(full.embeddings.precision(), g.layout.total_weight_elements);
  g.rowwise_state.assign(sz(g.layout.total_rows), 0.0f);
  for (std::size_t k = 0; k < group.size(); ++k) {
    const LocalShard& ls = R.shards[group[k]];
    const auto& tm = full.layout.tables[ls.table];
    const auto& gm = g.layout.tables[k];
    for (std::int64_t r = 0; r < gm.rows; ++r) {
      const std::int64_t full_row = ls.shard.row_offset + r;
      for (std::int64_t c = 0; c < gm.dim; ++c) {
        const float v = full.embeddings.load(tm.weight_offset + full_row * tm.dim + ls.shard.col_offset + c);
        g.weights.store(gm.weight_offset + r * gm.dim + c, v);  // same precision: exact
      }
      if (!full.rowwise_state.empty()) {
        g.rowwise_state[sz(gm.row_offset + r)] = full.rowwise_state[sz(tm.row_offset + full_row)];
      }
    }
  }
  return g;
}

/// Step 2-4: the sum lookup of one group (empty output for an empty group).
std::vector<float> group_lookup(const ShardGroup& g, const GroupInput& in) {
  if (g.empty()) return {};
  if (in.bags != g.layout.batch_size) {
    throw std::invalid_argument(
        fmt::format("sharded DLRM: group input has {} bags per shard, the group {}", in.bags, g.layout.batch_size));
  }
  return profiler::embedding_bag_forward_reference(g.layout, g.weights, in.indices, in.offsets, PoolingMode::kSum);
}

/// Step 2: the forward pooled all-to-all. Sender i's lookup output [B, cols_i] is W
/// contiguous messages (rows [j*b, (j+1)*b) for rank j); receiver j copies each of i's
/// PooledBlocks (message columns in pooled_send order) to its pooled column.
void pooled_all_to_all_forward(const MultiGpuLayout& L, const std::vector<std::vector<float>>& lookup,
                               std::vector<std::vector<float>>& pooled) {
  const std::int64_t b = L.local_batch, td = L.total_dim;
  for (std::size_t j = 0; j < L.ranks.size(); ++j) {
    for (std::size_t i = 0; i < L.ranks.size(); ++i) {
      const std::int64_t cols = L.ranks[i].pooled_send_cols();
      const float* message = lookup[i].data() + sz(static_cast<std::int64_t>(j) * b * cols);  // [b, cols]
      std::int64_t msg_col = 0;
      for (const PooledBlock& blk : L.ranks[i].pooled_send) {
        for (std::int64_t s = 0; s < b; ++s) {
          for (std::int64_t q = 0; q < blk.cols; ++q) {
            pooled[j][sz(s * td + blk.pooled_col + q)] = message[sz(s * cols + msg_col + q)];
          }
        }
        msg_col += blk.cols;
      }
    }
  }
}

/// Step 3: reduce-scatter of the row-wise partial sums [B, row_wise_dims]: rank j receives
/// the fp32 sum, in rank order, of rows [j*b, (j+1)*b) of every rank's partials.
std::vector<std::vector<float>> row_wise_reduce_scatter(const MultiGpuLayout& L,
                                                        const std::vector<std::vector<float>>& partial) {
  const std::int64_t b = L.local_batch, n = b * L.row_wise_dims;
  std::vector<std::vector<float>> out(L.ranks.size());
  for (std::size_t j = 0; j < L.ranks.size(); ++j) {
    const std::size_t first = sz(static_cast<std::int64_t>(j) * n);
    out[j].assign(partial[0].begin() + static_cast<std::ptrdiff_t>(first),
                  partial[0].begin() + static_cast<std::ptrdiff_t>(first + sz(n)));
    for (std::size_t i = 1; i < L.ranks.size(); ++i) {
      for (std::size_t e = 0; e < sz(n); ++e) out[j][e] += partial[i][first + e];
    }
  }
  return out;
}

/// Copies `cols` columns of `src` [b, src_width] starting at src_col into `dst` [b, dst_width]
/// at dst_col.
void copy_columns(const std::vector<float>& src, std::int64_t src_width, std::int64_t src_col, std::vector<float>& dst,
                  std::int64_t dst_width, std::int64_t dst_col, std::int64_t cols, std::int64_t rows) {
  for (std::int64_t s = 0; s < rows; ++s) {
    for (std::int64_t q = 0; q < cols; ++q) dst[sz(s * dst_width + dst_col + q)] = src[sz(s * src_width + src_col + q)];
  }
}

/// Step 6: the MLP gradients summed over ranks (fp32, rank order): the DDP all-reduce.
std::vector<DenseLayer> all_reduce_layers(const std::vector<std::vector<DenseLayer>>& per_rank) {
  std::vector<DenseLayer> sum = per_rank[0];
  for (std::size_t r = 1; r < per_rank.size(); ++r) {
    for (std::size_t l = 0; l < sum.size(); ++l) {
      for (std::size_t i = 0; i < sum[l].weight.size(); ++i) sum[l].weight[i] += per_rank[r][l].weight[i];
      for (std::size_t i = 0; i < sum[l].bias.size(); ++i) sum[l].bias[i] += per_rank[r][l].bias[i];
    }
  }
  return sum;
}

/// Step 9: dense fp32 gradient [total_weight_elements] of a data_parallel group from the
/// local batch: every occurrence of a row adds its bag's gradient, in position order.
std::vector<float> data_parallel_gradient(const RankLayout& R, const ShardGroup& g, const GroupInput& in,
                                          const std::vector<float>& d_pooled, std::int64_t td) {
  std::vector<float> grad(sz(g.layout.total_weight_elements), 0.0f);
  const std::int64_t b = g.layout.batch_size;
  for (std::size_t k = 0; k < g.shards.size(); ++k) {
    const auto& tm = g.layout.tables[k];
    const std::int64_t col = R.shards[g.shards[k]].pooled_col;
    for (std::int64_t s = 0; s < b; ++s) {
      const std::int64_t bag = static_cast<std::int64_t>(k) * b + s;
      for (std::int64_t p = in.offsets[sz(bag)]; p < in.offsets[sz(bag + 1)]; ++p) {
        const std::int64_t row = in.indices[sz(p)];
        for (std::int64_t q = 0; q < tm.dim; ++q) {
          grad[sz(tm.weight_offset + row * tm.dim + q)] += d_pooled[sz(s * td + col + q)];
        }
      }
    }
  }
  return grad;
}

/// Step 9: the optimizer on a data_parallel group from its all-reduced dense gradient, row by
/// row, with the fp32 arithmetic of embedding_bag_backward_update_reference; rows whose
/// gradient is all zero are skipped.
void data_parallel_update(ShardGroup& g, const std::vector<float>& grad, const profiler::OptimizerConfig& opt) {
  const bool adagrad = opt.kind == profiler::OptimizerKind::kRowwiseAdagrad;
  for (const auto& tm : g.layout.tables) {
    for (std::int64_t row = 0; row < tm.rows; ++row) {
      const float* gr = grad.data() + sz(tm.weight_offset + row * tm.dim);
      bool zero = true;
      for (std::int32_t c = 0; c < tm.dim; ++c) zero = zero && gr[c] == 0.0f;
      if (zero) continue;
      float multiplier = opt.learning_rate;
      if (adagrad) {
        float sum_squares = 0.0f;
        for (std::int32_t c = 0; c < tm.dim; ++c) sum_squares += gr[c] * gr[c];
        float& state = g.rowwise_state[sz(tm.row_offset + row)];
        state += sum_squares / static_cast<float>(tm.dim);
        multiplier = opt.learning_rate / (std::sqrt(state) + opt.eps);
      }
      for (std::int32_t c = 0; c < tm.dim; ++c) {
        const std::int64_t e = tm.weight_offset + row * tm.dim + c;
        g.weights.store(e, g.weights.load(e) - multiplier * gr[c]);
      }
    }
  }
}

}  // namespace

ShardedDlrmState init_sharded_dlrm(const DlrmModel& full, const MultiGpuLayout& L) {
  if (full.config.batch_size != L.global_batch) {
    throw std::invalid_argument(fmt::format("sharded DLRM: the model's batch is {}, the layout's global batch {}",
                                            full.config.batch_size, L.global_batch));
  }
  if (full.layout.total_dim != L.total_dim || full.layout.batch_size != L.global_batch) {
    throw std::invalid_argument("sharded DLRM: the model's tables do not match the layout's pooled width");
  }
  if (full.embeddings.size() != full.layout.total_weight_elements) {
    throw std::invalid_argument("sharded DLRM: the model's embeddings were not drawn (draw_embeddings = false)");
  }
  if (L.world < 1 || L.ranks.size() != static_cast<std::size_t>(L.world) || L.local_batch * L.world != L.global_batch) {
    throw std::invalid_argument("sharded DLRM: inconsistent layout (world, ranks, batches)");
  }
  // Every table must be covered exactly once by its shards (data_parallel: once per rank),
  // or the gathered model would hold stale elements.
  for (std::size_t t = 0; t < full.layout.tables.size(); ++t) {
    const auto& tm = full.layout.tables[t];
    std::vector<int> covered(sz(tm.rows * tm.dim), 0);
    ShardingType type = ShardingType::kTableWise;
    for (const RankLayout& R : L.ranks) {
      for (const LocalShard& ls : R.shards) {
        if (ls.table != t) continue;
        type = ls.type;
        const Shard& s = ls.shard;
        if (s.row_offset < 0 || s.rows < 1 || s.row_offset + s.rows > tm.rows || s.col_offset < 0 || s.cols < 1 ||
            s.col_offset + s.cols > tm.dim) {
          throw std::invalid_argument(fmt::format("sharded DLRM: shard rows {}+{} cols {}+{} outside table {} ({} x {})",
                                                  s.row_offset, s.rows, s.col_offset, s.cols, t, tm.rows, tm.dim));
        }
        for (std::int64_t r = s.row_offset; r < s.row_offset + s.rows; ++r) {
          for (std::int64_t c = s.col_offset; c < s.col_offset + s.cols; ++c) ++covered[sz(r * tm.dim + c)];
        }
      }
    }
    const int want = type == ShardingType::kDataParallel ? L.world : 1;
    for (const int n : covered) {
      if (n != want) {
        throw std::invalid_argument(fmt::format(
            "sharded DLRM: the shards of table {} do not tile it (an element is held {} times, expected {})", t, n, want));
      }
    }
  }
  ShardedDlrmState st;
  st.config = full.config;
  for (const RankLayout& R : L.ranks) {
    RankState rs;
    rs.bottom = full.bottom;
    rs.top = full.top;
    rs.adam_m = full.adam_m;
    rs.adam_v = full.adam_v;
    rs.adam_step = full.adam_step;
    rs.pooled = make_group(full, R, R.pooled_group, L.global_batch);
    rs.row_wise = make_group(full, R, R.row_wise_group, L.global_batch);
    rs.data_parallel = make_group(full, R, R.data_parallel_group, L.local_batch);
    // The row-wise lookup writes its partial sums straight at its blocks' columns of the
    // [B, row_wise_dims] buffer (zeros in the blocks this rank holds no rows of).
    if (!rs.row_wise.empty()) place_row_wise_outputs(rs.row_wise.layout, L, static_cast<int>(st.ranks.size()));
    if (rs.pooled.layout.total_dim != R.pooled_send_cols()) {
      throw std::invalid_argument("sharded DLRM: the pooled group does not match the rank's pooled_send blocks");
    }
    st.ranks.push_back(std::move(rs));
  }
  return st;
}

double sharded_train_step(ShardedDlrmState& st, const MultiGpuLayout& L, const DlrmSpec& spec, const DlrmBatch& global,
                          ShardedStepTrace* trace) {
  const DlrmConfig& c = st.config;
  const std::size_t W = L.ranks.size();
  const std::int64_t B = L.global_batch, b = L.local_batch, td = L.total_dim, rwd = L.row_wise_dims;
  if (st.ranks.size() != W || c.batch_size != B) {
    throw std::invalid_argument("sharded DLRM: the state was not made for this layout");
  }
  std::vector<RankInput> in;
  for (std::size_t r = 0; r < W; ++r) in.push_back(split_batch(L, spec, global, static_cast<int>(r)));
  for (std::size_t r = 0; r < W; ++r) {
    if (in[r].local.dense.size() != sz(b * c.dense_features())) {
      throw std::invalid_argument("sharded DLRM: the workload's dense width differs from the model's");
    }
  }

  // ---- Forward ----
  // 1. Bottom MLP on the local batch.
  std::vector<std::vector<std::vector<float>>> bottom_act(W);
  for (std::size_t r = 0; r < W; ++r) {
    bottom_act[r] = ops::mlp_forward(st.ranks[r].bottom, in[r].local.dense, b, /*relu_last=*/true);
  }
  // 2-4. The three lookups (before any exchange; all read the pre-update weights).
  std::vector<std::vector<float>> pooled_lookup(W), row_wise_partial(W), dp_lookup(W);
  for (std::size_t r = 0; r < W; ++r) {
    pooled_lookup[r] = group_lookup(st.ranks[r].pooled, in[r].pooled);
    row_wise_partial[r] = group_lookup(st.ranks[r].row_wise, in[r].row_wise);
    if (row_wise_partial[r].empty()) row_wise_partial[r].assign(sz(B * rwd), 0.0f);
    dp_lookup[r] = group_lookup(st.ranks[r].data_parallel, in[r].data_parallel);
  }
  std::vector<std::vector<float>> pooled(W, std::vector<float>(sz(b * td), 0.0f));
  // 2. Pooled all-to-all.
  pooled_all_to_all_forward(L, pooled_lookup, pooled);
  // 3. Row-wise reduce-scatter, each table's columns placed at its pooled column.
  if (rwd > 0) {
    const auto rs = row_wise_reduce_scatter(L, row_wise_partial);
    for (std::size_t j = 0; j < W; ++j) {
      for (const RowWiseBlock& blk : L.row_wise_blocks) {
        copy_columns(rs[j], rwd, blk.row_wise_col, pooled[j], td, blk.pooled_col, blk.cols, b);
      }
    }
  }
  // 4. Data-parallel lookups placed at their pooled columns.
  for (std::size_t r = 0; r < W; ++r) {
    const ShardGroup& g = st.ranks[r].data_parallel;
    for (std::size_t k = 0; k < g.shards.size(); ++k) {
      const LocalShard& ls = L.ranks[r].shards[g.shards[k]];
      copy_columns(dp_lookup[r], g.layout.total_dim, g.layout.tables[k].output_offset, pooled[r], td, ls.pooled_col,
                   ls.shard.cols, b);
    }
  }
  // 5. Interaction, top MLP, loss on the local batch.
  std::vector<std::vector<std::vector<float>>> top_act(W);
  std::vector<double> loss(W);
  for (std::size_t r = 0; r < W; ++r) {
    top_act[r] = ops::mlp_forward(st.ranks[r].top, ops::interaction_forward(c, b, bottom_act[r].back(), pooled[r]), b,
                                  /*relu_last=*/false);
    loss[r] = ops::bce_mean(top_act[r].back(), in[r].local.labels);
  }

  // ---- Backward ----
  // 6. Local MLP and interaction backward; dLoss/dz uses the GLOBAL batch.
  std::vector<std::vector<DenseLayer>> grad_bottom(W), grad_top(W);
  std::vector<std::vector<float>> d_pooled(W);
  for (std::size_t r = 0; r < W; ++r) {
    std::vector<float> g = ops::bce_logit_gradient(top_act[r].back(), in[r].local.labels, static_cast<double>(B));
    g = ops::mlp_backward(st.ranks[r].top, top_act[r], std::move(g), b, /*relu_last=*/false, grad_top[r],
                          /*need_input_grad=*/true);
    std::vector<float> d_bottom;
    ops::interaction_backward(c, b, bottom_act[r].back(), pooled[r], g, d_bottom, d_pooled[r]);
    (void)ops::mlp_backward(st.ranks[r].bottom, bottom_act[r], std::move(d_bottom), b, /*relu_last=*/true,
                            grad_bottom[r], /*need_input_grad=*/false);
  }
  // 6. DDP all-reduce, then the same dense optimizer step on every rank.
  const std::vector<DenseLayer> sum_bottom = all_reduce_layers(grad_bottom), sum_top = all_reduce_layers(grad_top);
  for (auto& R : st.ranks) {
    ops::dense_optimizer_step(c, R.bottom, R.top, sum_bottom, sum_top, R.adam_m, R.adam_v, R.adam_step);
  }
  const profiler::OptimizerConfig opt = embedding_optimizer_config(c);
  // 7. Pooled backward all-to-all (transpose) and fused backward + update on each source.
  for (std::size_t i = 0; i < W; ++i) {
    ShardGroup& g = st.ranks[i].pooled;
    if (g.empty()) continue;
    const std::int64_t cols = L.ranks[i].pooled_send_cols();
    std::vector<float> grad(sz(B * cols));  // [B, cols]: rank j's message at rows [j*b, (j+1)*b)
    for (std::size_t j = 0; j < W; ++j) {
      std::vector<float> message(sz(b * cols));  // what rank j sends back to i, [b, cols]
      std::int64_t msg_col = 0;
      for (const PooledBlock& blk : L.ranks[i].pooled_send) {
        copy_columns(d_pooled[j], td, blk.pooled_col, message, cols, msg_col, blk.cols, b);
        msg_col += blk.cols;
      }
      std::copy(message.begin(), message.end(), grad.begin() + static_cast<std::ptrdiff_t>(j * sz(b * cols)));
    }
    profiler::embedding_bag_backward_update_reference(g.layout, g.weights, g.rowwise_state, in[i].pooled.indices,
                                                      in[i].pooled.offsets, PoolingMode::kSum, grad, opt);
  }
  // 8. Row-wise: gather each rank's [b, row_wise_dims] gradient, all-gather, update.
  if (rwd > 0) {
    std::vector<float> gathered(sz(B * rwd), 0.0f);  // [B, row_wise_dims], rank j at rows [j*b, (j+1)*b)
    for (std::size_t j = 0; j < W; ++j) {
      std::vector<float> local(sz(b * rwd), 0.0f);
      for (const RowWiseBlock& blk : L.row_wise_blocks) {
        copy_columns(d_pooled[j], td, blk.pooled_col, local, rwd, blk.row_wise_col, blk.cols, b);
      }
      std::copy(local.begin(), local.end(), gathered.begin() + static_cast<std::ptrdiff_t>(j * sz(b * rwd)));
    }
    for (std::size_t i = 0; i < W; ++i) {
      ShardGroup& g = st.ranks[i].row_wise;
      if (g.empty()) continue;
      profiler::embedding_bag_backward_update_reference(g.layout, g.weights, g.rowwise_state, in[i].row_wise.indices,
                                                        in[i].row_wise.offsets, PoolingMode::kSum, gathered, opt);
    }
  }
  // 9. Data-parallel: local dense gradients, all-reduce (fp32, rank order), update every copy.
  if (!st.ranks[0].data_parallel.empty()) {
    std::vector<float> sum;
    for (std::size_t r = 0; r < W; ++r) {
      const std::vector<float> g = data_parallel_gradient(L.ranks[r], st.ranks[r].data_parallel,
                                                          in[r].data_parallel, d_pooled[r], td);
      if (sum.empty()) {
        sum = g;
      } else {
        if (g.size() != sum.size()) throw std::invalid_argument("sharded DLRM: ranks hold different data_parallel tables");
        for (std::size_t e = 0; e < sum.size(); ++e) sum[e] += g[e];
      }
    }
    for (auto& R : st.ranks) data_parallel_update(R.data_parallel, sum, opt);
  }

  double total = 0;
  for (const double l : loss) total += l;
  if (trace != nullptr) {
    trace->pooled = std::move(pooled);
    trace->logits.clear();
    for (auto& a : top_act) trace->logits.push_back(a.back());
    trace->loss = loss;
  }
  return total / static_cast<double>(W);
}

DlrmModel gather_sharded(const ShardedDlrmState& st, const MultiGpuLayout& L) {
  if (st.ranks.size() != L.ranks.size() || st.ranks.empty()) {
    throw std::invalid_argument("sharded DLRM: the state was not made for this layout");
  }
  DlrmModel m;
  m.config = st.config;
  const RankState& r0 = st.ranks[0];
  m.bottom = r0.bottom;
  m.top = r0.top;
  m.adam_m = r0.adam_m;
  m.adam_v = r0.adam_v;
  m.adam_step = r0.adam_step;
  m.layout = profiler::make_embedding_bag_layout(st.config.tables, st.config.batch_size);
  m.embeddings = profiler::HostEmbeddingWeights(st.config.embedding_precision, m.layout.total_weight_elements);
  m.rowwise_state.assign(sz(m.layout.total_rows), 0.0f);
  const auto put = [&](const RankLayout& R, const ShardGroup& g) {
    for (std::size_t k = 0; k < g.shards.size(); ++k) {
      const LocalShard& ls = R.shards[g.shards[k]];
      const auto& tm = m.layout.tables[ls.table];
      const auto& gm = g.layout.tables[k];
      for (std::int64_t r = 0; r < gm.rows; ++r) {
        const std::int64_t full_row = ls.shard.row_offset + r;
        for (std::int64_t c = 0; c < gm.dim; ++c) {
          m.embeddings.store(tm.weight_offset + full_row * tm.dim + ls.shard.col_offset + c,
                             g.weights.load(gm.weight_offset + r * gm.dim + c));
        }
        float& state = m.rowwise_state[sz(tm.row_offset + full_row)];
        const float G = g.rowwise_state[sz(gm.row_offset + r)];
        if (ls.shard.cols != tm.dim) {  // column_wise, table_column_wise, grid: one accumulator per shard row
          state += static_cast<float>(gm.dim) * G / static_cast<float>(tm.dim);
        } else {
          state = G;
        }
      }
    }
  };
  for (std::size_t r = 0; r < L.ranks.size(); ++r) {
    put(L.ranks[r], st.ranks[r].pooled);
    put(L.ranks[r], st.ranks[r].row_wise);
  }
  put(L.ranks[0], r0.data_parallel);
  return m;
}

}  // namespace perfcast::validation
