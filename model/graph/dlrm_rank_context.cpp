/// \file dlrm_rank_context.cpp
/// What the DLRM rank passes share: the plan queries, the op makers (collectives, linear
/// backward, embedding kernels), the byte matrices of the exchanges, and the DDP buckets.

#include <algorithm>
#include <cmath>
#include <utility>

#include "model/graph/dlrm_rank_passes.hpp"

namespace perfcast::dlrm {

std::string numbered(std::string_view prefix, std::int64_t i, std::string_view suffix) {
  std::string s(prefix);
  s += std::to_string(i);
  s += suffix;
  return s;
}

KernelDesc elementwise(std::string op, double elements, double flops, double bytes) {
  return ElementwiseDesc{std::move(op), static_cast<std::int64_t>(elements), flops, bytes};
}

int CollectiveTable::group(const std::vector<int>& ranks) {
  for (std::size_t i = 0; i < g_.groups.size(); ++i)
    if (g_.groups[i].ranks == ranks) return static_cast<int>(i);
  g_.groups.push_back(RankGroup{ranks});
  return static_cast<int>(g_.groups.size()) - 1;
}

RankContext::RankContext(const DlrmSpec& w_, const ShardingPlan& plan_, int world_, int gpus_per_node_, int rank_,
                         CollectiveTable& colls_, const std::vector<double>& node_output_bytes_,
                         const std::vector<ShardRef>& local_, HostLink host_link_)
    : w(w_),
      plan(plan_),
      world(world_),
      gpus_per_node(gpus_per_node_),
      rank(rank_),
      batch(w_.batch_size / world_),
      colls(colls_),
      node_output_bytes(node_output_bytes_),
      local(local_),
      host_link(host_link_) {}

void collect_rank_shards(const ShardingPlan& plan, int world, std::vector<std::vector<ShardRef>>& by_rank) {
  by_rank.resize(static_cast<std::size_t>(world));
  for (auto& l : by_rank) l.clear();
  for (std::size_t t = 0; t < plan.tables.size(); ++t)
    for (const auto& sh : plan.tables[t].shards)
      if (sh.rank >= 0 && sh.rank < world) by_rank[static_cast<std::size_t>(sh.rank)].push_back({t, &sh, plan.tables[t].type});
}

bool RankContext::has_sparse_tables() const {
  for (const auto& t : plan.tables)
    if (t.type != ShardingType::kDataParallel) return true;
  return false;
}
bool RankContext::has_row_wise() const {
  for (std::size_t t = 0; t < plan.tables.size(); ++t)
    if (plan.tables[t].type == ShardingType::kRowWise && !w.tables[t].sequence) return true;
  return false;
}
bool RankContext::exchanged_by_all_to_all(std::size_t t) const {
  const ShardingType type = plan.tables[t].type;
  return pooled_all_to_all(type) || (w.tables[t].sequence && type == ShardingType::kRowWise);
}
bool RankContext::has_pooled_all_to_all() const {
  for (std::size_t t = 0; t < plan.tables.size(); ++t)
    if (exchanged_by_all_to_all(t)) return true;
  return false;
}
double RankContext::sequence_dims() const {
  double dims = 0;
  for (const auto& t : w.tables)
    if (t.sequence) dims += double(t.dim);
  return dims;
}
double RankContext::sequence_row_dims() const {
  double dims = 0;
  for (const auto& t : w.tables)
    if (t.sequence) dims += t.pooling * double(t.dim);
  return dims;
}
bool RankContext::has_hybrid() const {
  for (const auto& t : plan.tables)
    if (t.type == ShardingType::kHybrid) return true;
  return false;
}
double RankContext::hybrid_dims() const {
  double dims = 0;
  for (std::size_t t = 0; t < plan.tables.size(); ++t)
    if (plan.tables[t].type == ShardingType::kHybrid) dims += double(w.tables[t].dim);
  return dims;
}
bool RankContext::has_node_reduced() const {
  for (const auto& t : plan.tables)
    if (node_reduced(t.type)) return true;
  return false;
}

Op RankContext::coll(std::string name, Phase phase, CollectiveDesc d, std::vector<int> deps) const {
  const int index = colls.get(name, [&] { return std::move(d); });
  return Op{std::move(name), phase, Stream::kComm, {}, index, std::move(deps), false};
}

Op RankContext::coll(std::string name, const std::string& key, Phase phase, CollectiveDesc d, std::vector<int> deps,
                     int group) const {
  const int index = colls.get(key, [&] { return std::move(d); }, group);
  return Op{std::move(name), phase, Stream::kComm, {}, index, std::move(deps), false};
}

int RankContext::node_group() const {
  std::vector<int> ranks;
  for (int l = 0; l < gpus_per_node; ++l) ranks.push_back(rank / gpus_per_node * gpus_per_node + l);
  return colls.group(ranks);
}

Op RankContext::cross_node_op(std::string name, Phase phase, std::vector<int> deps, bool transpose) const {
  const int nodes = world / gpus_per_node, local_index = rank % gpus_per_node;
  std::vector<int> ranks;
  for (int k = 0; k < nodes; ++k) ranks.push_back(k * gpus_per_node + local_index);
  const int group = colls.group(ranks);
  const int index = colls.get(numbered(name + ".local", local_index), [&] {
    const auto un = static_cast<std::size_t>(nodes);
    std::vector<double> pairs(un * un, 0.0);
    for (std::size_t i = 0; i < un; ++i)
      for (std::size_t k = 0; k < un; ++k) {
        if (i == k) continue;
        const double bytes = double(batch) * node_output_bytes[i];
        (transpose ? pairs[k * un + i] : pairs[i * un + k]) = bytes;
      }
    return CollectiveDesc{CollectiveKind::kAllToAllV, 0, std::move(pairs)};
  }, group);
  return Op{std::move(name), phase, Stream::kComm, {}, index, std::move(deps), false};
}

Op RankContext::all_to_all_op(std::string name, Phase phase, void (RankContext::*fill_pairs)(std::vector<double>&) const,
                              std::vector<int> deps, bool transpose) const {
  const int index = colls.get_all_to_allv(name, [&](std::vector<double>& pairs) {
    (this->*fill_pairs)(pairs);
    if (transpose) {  // in place: the matrix is square
      const auto un = static_cast<std::size_t>(world);
      for (std::size_t i = 0; i < un; ++i)
        for (std::size_t j = i + 1; j < un; ++j) std::swap(pairs[i * un + j], pairs[j * un + i]);
    }
  });
  return Op{std::move(name), phase, Stream::kComm, {}, index, std::move(deps), false};
}

double RankContext::shard_pooling(std::size_t table, const Shard& sh) const {
  const auto& t = w.tables[table];
  const auto& ts = plan.tables[table];
  if (ts.type == ShardingType::kHybrid) {
    const double infrequent = 1 - hybrid_frequent_share(t, ts, w.batch_size);
    return t.pooling * infrequent * double(sh.rows) / double(t.rows - ts.frequent_rows);
  }
  if (splits_rows(ts.type)) return t.pooling * double(sh.rows) / double(t.rows);
  return t.pooling;
}

void RankContext::hybrid_pairs(std::vector<double>& m) const {
  const auto un = static_cast<std::size_t>(world);
  std::vector<double> per_src(un, 0.0);
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    if (plan.tables[t].type != ShardingType::kHybrid) continue;
    for (const auto& sh : plan.tables[t].shards)
      per_src[static_cast<std::size_t>(sh.rank)] +=
          double(batch) * -std::expm1(-shard_pooling(t, sh)) * double(sh.cols) * pooled_output_bytes(w, plan.tables[t]);
  }
  m.assign(un * un, 0.0);
  for (std::size_t i = 0; i < un; ++i)
    for (std::size_t j = 0; j < un; ++j)
      if (i != j) m[i * un + j] = per_src[i];
}

void RankContext::input_pairs(bool lengths, std::vector<double>& m) const {
  const auto un = static_cast<std::size_t>(world);
  std::vector<double> per_dest(un, 0.0);
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    if (plan.tables[t].type == ShardingType::kDataParallel) continue;
    for (const auto& sh : plan.tables[t].shards) {
      per_dest[static_cast<std::size_t>(sh.rank)] += lengths ? batch * 4.0 : batch * shard_pooling(t, sh) * w.index_bytes;
    }
  }
  m.assign(un * un, 0.0);
  for (std::size_t i = 0; i < un; ++i)
    for (std::size_t j = 0; j < un; ++j) m[i * un + j] = per_dest[j];
}

void RankContext::output_pairs(std::vector<double>& m) const {
  const auto un = static_cast<std::size_t>(world);
  std::vector<double> per_src(un, 0.0);
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    if (!exchanged_by_all_to_all(t)) continue;
    for (const auto& sh : plan.tables[t].shards) {
      const double rows_per_sample = w.tables[t].sequence ? shard_pooling(t, sh) : 1.0;
      per_src[static_cast<std::size_t>(sh.rank)] += batch * rows_per_sample * double(sh.cols) * pooled_output_bytes(w, plan.tables[t]);
    }
  }
  m.assign(un * un, 0.0);
  for (std::size_t i = 0; i < un; ++i)
    for (std::size_t j = 0; j < un; ++j) m[i * un + j] = per_src[i];
}

double RankContext::rw_bytes() const {
  double per_sample = 0;
  for (std::size_t t = 0; t < plan.tables.size(); ++t)
    if (plan.tables[t].type == ShardingType::kRowWise && !w.tables[t].sequence)
      per_sample += double(w.tables[t].dim) * pooled_output_bytes(w, plan.tables[t]);
  return double(w.batch_size) * per_sample;
}

void RankContext::bottom_output_pairs(std::vector<double>& pairs) const {
  pairs.assign(static_cast<std::size_t>(world) * static_cast<std::size_t>(world), 0.0);
  const auto from = static_cast<std::size_t>(w.bottom_mlp_rank);
  const double bytes = double(batch) * double(w.bottom_mlp.back()) * act_bytes();
  for (std::size_t j = 0; j < static_cast<std::size_t>(world); ++j)
    if (j != from) pairs[from * static_cast<std::size_t>(world) + j] = bytes;
}

DType RankContext::lookup_output_dtype(bool dp) const {
  // The kernel model depends on the output's bytes per element only: 2-byte outputs (FP16,
  // BF16) as fp16, 1-byte ones as fp8; FP32 otherwise, and where the tables differ.
  double bytes = 0;
  for (const auto& ref : local) {
    if ((ref.type == ShardingType::kDataParallel) != dp) continue;
    const double b = pooled_output_bytes(w, plan.tables[ref.table]);
    if (bytes != 0 && b != bytes) return DType::kFp32;
    bytes = b;
  }
  return bytes == 2 ? DType::kFp16 : bytes == 1 ? DType::kFp8 : DType::kFp32;
}

std::optional<EmbeddingDesc> RankContext::embedding_desc(EmbeddingPass pass, bool dp) const {
  EmbeddingDesc e;
  e.batch = dp ? batch : w.batch_size;
  e.weight_dtype = w.embedding_dtype;
  e.pass = pass;
  e.optimizer = w.embedding_optimizer;
  e.index_bytes = w.index_bytes;
  e.fused_optimizer = w.stack.fused_embedding_optimizer;
  e.tables.reserve(local.size());
  bool host_tables = false;
  for (const auto& ref : local) {
    if ((ref.type == ShardingType::kDataParallel) != dp) continue;
    const auto& spec = w.tables[ref.table];
    const auto& ts = plan.tables[ref.table];
    const double cache_rows = ts.storage == EmbeddingStorage::kHostUvmCaching
                                  ? std::max(1.0, std::floor(ts.cache_load_factor * static_cast<double>(ref.shard->rows)))
                                  : 0.0;
    const IndexDistribution dist = ts.type == ShardingType::kHybrid
                                       ? split_distribution(spec.distribution, double(spec.rows), double(ts.frequent_rows), false)
                                       : spec.distribution;
    e.tables.push_back(EmbeddingTableDesc{ref.shard->rows, ref.shard->cols, shard_pooling(ref.table, *ref.shard), dist, ts.storage,
                                          cache_rows, spec.sequence});
    host_tables = host_tables || ts.storage != EmbeddingStorage::kHbm;
  }
  if (dp) {  // hybrid tables' frequent rows: a copy on every rank, looked up for the local batch
    for (std::size_t t = 0; t < plan.tables.size(); ++t) {
      const auto& ts = plan.tables[t];
      if (ts.type != ShardingType::kHybrid || ts.frequent_rows <= 0) continue;
      const auto& spec = w.tables[t];
      const double share = hybrid_frequent_share(spec, ts, w.batch_size);
      e.tables.push_back(EmbeddingTableDesc{ts.frequent_rows, spec.dim, spec.pooling * share,
                                            split_distribution(spec.distribution, double(spec.rows), double(ts.frequent_rows), true),
                                            EmbeddingStorage::kHbm, 0.0, spec.sequence});
    }
  }
  e.output_dtype = lookup_output_dtype(dp);
  if (host_tables) {  // only then: HBM-only kernels keep one descriptor whatever the system's host link
    e.host_to_device = host_link.host_to_device;
    e.device_to_host = host_link.device_to_host;
  }
  if (e.tables.empty()) return std::nullopt;
  if (dp && pass == EmbeddingPass::kBackward) return std::nullopt;  // see add_embedding_backward
  return e;
}

Op RankContext::linear_backward(std::string name, std::int64_t in, std::int64_t out, bool dgrad, bool relu_out,
                                int dep, std::int64_t rows, std::vector<bool>* weight_part) const {
  const double ab = act_bytes();
  const std::int64_t batch = rows > 0 ? rows : this->batch;
  Op op{std::move(name), Phase::kBackward, Stream::kCompute, {}, {}, {dep}, false};
  op.kernels.reserve(4);
  // Each kernel, and whether it belongs to the weight half (weight and bias gradients only).
  auto push = [&](KernelDesc k, bool weights) {
    op.kernels.push_back(std::move(k));
    if (weight_part) weight_part->push_back(weights);
  };
  const Fusion fusion = w.stack.mlp_backward;
  if (fusion == Fusion::kEpilogue) {
    // cuBLASLt epilogues: the ReLU backward in the data-gradient GEMM (it reads the
    // activation), the bias gradient in the weight-gradient GEMM.
    GemmDesc dg{batch, in, out, 1, w.mlp_dtype, false};
    dg.epilogue_inputs = relu_out ? 1 : 0;
    if (dgrad) push(dg, false);
    push(GemmDesc{out, in, batch, 1, w.mlp_dtype, true}, true);
    if (!dgrad && relu_out) push(elementwise("relu_backward", double(batch) * out, 1, 3 * ab), false);
    return op;
  }
  if (fusion == Fusion::kPointwise) {  // ReLU backward and the bias gradient's reduction in one generated kernel
    push(elementwise(relu_out ? "relu_bias_backward" : "bias_grad", double(batch) * out, relu_out ? 2 : 1, relu_out ? 3 * ab : ab),
         !relu_out);
  } else if (relu_out) {
    push(elementwise("relu_backward", double(batch) * out, 1, 3 * ab), false);
  }
  if (dgrad) push(GemmDesc{batch, in, out, 1, w.mlp_dtype, false}, false);
  push(GemmDesc{out, in, batch, 1, w.mlp_dtype, false}, true);
  if (fusion == Fusion::kNone) push(elementwise("bias_grad", double(batch) * out, 1, ab), true);
  return op;
}

RankContext::SplitBackward RankContext::linear_backward_split(std::string name, std::int64_t in, std::int64_t out,
                                                              bool relu_out, int dep) const {
  std::vector<bool> weight_part;
  Op whole = linear_backward(name, in, out, /*dgrad=*/true, relu_out, dep, 0, &weight_part);
  SplitBackward s{whole, whole};
  s.data.kernels.clear();
  s.weights.kernels.clear();
  for (std::size_t i = 0; i < whole.kernels.size(); ++i) (weight_part[i] ? s.weights : s.data).kernels.push_back(whole.kernels[i]);
  s.weights.name = std::move(name) + ".weights";
  s.weights.deps.clear();
  return s;
}

void RankDraft::grad_ready(const RankContext& c, int op, std::int64_t in, std::int64_t out) {
  params_ready(c, op, double(in) * double(out) + double(out));
}

void RankDraft::params_ready(const RankContext& c, int op, double params) {
  if (c.world == 1) return;
  bucket_bytes += params * c.gradient_bytes();
  if (c.w.stack.grouped_allreduce) return;  // one all-reduce after the last layer (flush_bucket)
  const double cap = buckets == 0 ? c.w.first_bucket : c.w.gradient_bucket;
  if (bucket_bytes >= cap) flush_bucket(c, op);
}

void RankDraft::flush_bucket(const RankContext& c, int op) {
  if (c.world == 1 || bucket_bytes <= 0) return;
  CollectiveDesc d{CollectiveKind::kAllReduce, bucket_bytes, {}};
  allreduces.push_back(add(c.coll(numbered("allreduce.bucket", buckets), Phase::kBackward, d, {op})));
  ++buckets;
  bucket_bytes = 0;
}

}  // namespace perfcast::dlrm
