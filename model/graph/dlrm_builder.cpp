#include "model/graph/dlrm_builder.hpp"

#include <map>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace perfcast {
namespace {

/// Bytes of an activation element of the MLPs (tf32 keeps fp32 storage).
double act_bytes(DType t) { return dtype_bytes(t); }

ElementwiseDesc elementwise(std::string op, double elements, double flops, double bytes) {
  return ElementwiseDesc{std::move(op), static_cast<std::int64_t>(elements), flops, bytes};
}

/// `prefix` + decimal `i` + `suffix` (op and collective names; cheaper than fmt::format in
/// the sharding search's rebuilds).
std::string numbered(std::string_view prefix, std::int64_t i, std::string_view suffix = {}) {
  std::string s(prefix);
  s += std::to_string(i);
  s += suffix;
  return s;
}

struct ShardRef {
  std::size_t table;
  const Shard* shard;
  ShardingType type;
};

/// Collectives are identical on every rank of their group: the first rank that issues one
/// creates it, the others refer to it by key. Groups other than "all ranks" (group 0)
/// are added when first used, so plans without node-local types keep one group.
///
/// Incremental rebuilds (DlrmGraphBuilder) keep the table: `begin_refresh()` makes the
/// first request of each existing key in this build recompute its descriptor and record
/// whether it changed; keys new to the table are appended, so existing indices stay.
class CollectiveTable {
 public:
  explicit CollectiveTable(ExecutionGraph& g) : g_(g) {}
  template <class MakeDesc>
  int get(const std::string& key, MakeDesc make, int group = 0) {
    auto [it, fresh] = index_.try_emplace(key, static_cast<int>(g_.collectives.size()));
    const auto i = static_cast<std::size_t>(it->second);
    if (fresh) {
      g_.collectives.push_back(GraphCollective{make(), group});
      refreshed_.push_back(1);
      changed_.push_back(1);
    } else if (!refreshed_[i]) {
      CollectiveDesc d = make();
      refreshed_[i] = 1;
      if (!(d == g_.collectives[i].desc)) {
        g_.collectives[i].desc = std::move(d);
        changed_[i] = 1;
      }
    }
    return it->second;
  }
  /// Starts an incremental build: every collective counts as not yet refreshed, unchanged.
  void begin_refresh() {
    refreshed_.assign(g_.collectives.size(), 0);
    changed_.assign(g_.collectives.size(), 0);
  }
  void clear() {
    index_.clear();
    refreshed_.clear();
    changed_.clear();
  }
  [[nodiscard]] const std::vector<char>& changed() const { return changed_; }
  /// Index of the group of exactly these ranks (in this order), added when new.
  int group(const std::vector<int>& ranks) {
    for (std::size_t i = 0; i < g_.groups.size(); ++i)
      if (g_.groups[i].ranks == ranks) return static_cast<int>(i);
    g_.groups.push_back(RankGroup{ranks});
    return static_cast<int>(g_.groups.size()) - 1;
  }

 private:
  ExecutionGraph& g_;
  std::map<std::string, int> index_;
  std::vector<char> refreshed_, changed_;  ///< per collective, this build
};

class RankBuilder {
 public:
  /// `node_dims`: per node, the columns of its table_row_wise / grid blocks (node_dims()).
  /// `recycled`: a program whose storage the new one reuses (its ops are discarded).
  RankBuilder(const DlrmSpec& w, const ShardingPlan& plan, int world, int gpus_per_node, int rank, CollectiveTable& colls,
              const std::vector<double>& node_dims, RankProgram recycled = {})
      : w_(w), plan_(plan), n_(world), g_(gpus_per_node), r_(rank), b_(w.batch_size / world), colls_(colls),
        program_(std::move(recycled)), node_dims_(node_dims) {
    program_.ops.clear();
    for (std::size_t t = 0; t < plan.tables.size(); ++t) {
      for (const auto& sh : plan.tables[t].shards) {
        if (sh.rank == r_) local_.push_back({t, &sh, plan.tables[t].type});
      }
    }
  }

  RankProgram build() {
    const double ab = act_bytes(w_.mlp_dtype);
    // ---- input -------------------------------------------------------------------
    double batch_bytes = b_ * (w_.dense_features() * 4.0 + 4.0);  // dense features + label
    for (const auto& t : w_.tables) batch_bytes += b_ * (t.pooling + 1) * w_.index_bytes;
    const int h2d = add({"batch_h2d", Phase::kInput, Stream::kCopy, {MemcpyDesc{batch_bytes, CopyKind::kHostToDevice}}, {}, {}, false});

    int input_ready = h2d;
    const bool sparse_comm = n_ > 1 && has_sparse_tables();
    if (sparse_comm) {
      add(collective_op("input_dist.lengths", Phase::kForward, [&] { return input_pairs(/*lengths=*/true); }, {h2d}));
      input_ready = add(collective_op("input_dist.indices", Phase::kForward, [&] { return input_pairs(false); }, {h2d}));
    }

    // ---- forward -----------------------------------------------------------------
    std::vector<int> bottom;
    int prev = h2d;
    const bool mixed = w_.mlp_dtype == DType::kFp16 || w_.mlp_dtype == DType::kBf16;
    if (mixed) {  // autocast: the fp32 dense features cast to the GEMMs' half type
      prev = add({"dense_features.cast", Phase::kForward, Stream::kCompute,
                  {elementwise("cast", double(b_) * w_.dense_features(), 0, 4 + ab)}, {}, {h2d}, false});
    }
    for (std::size_t i = 1; i < w_.bottom_mlp.size(); ++i) {
      prev = add({numbered("bottom_mlp.", i - 1), Phase::kForward, Stream::kCompute,
                  {GemmDesc{b_, w_.bottom_mlp[i], w_.bottom_mlp[i - 1], 1, w_.mlp_dtype, true}}, {}, {prev}, false});
      bottom.push_back(prev);
    }
    const int bottom_out = prev;

    int lookup = -1, lookup_dp = -1;
    if (auto e = embedding_desc(EmbeddingPass::kForward, /*dp=*/false)) {
      lookup = add(single_kernel_op("embedding_lookup", Phase::kForward, std::move(*e), {input_ready}));
    }
    if (auto e = embedding_desc(EmbeddingPass::kForward, /*dp=*/true)) {
      lookup_dp = add(single_kernel_op("embedding_lookup.data_parallel", Phase::kForward, std::move(*e), {h2d}));
    }
    std::vector<int> emb_ready;
    int output_dist = -1, rw_rs = -1;
    if (n_ > 1 && has_pooled_all_to_all()) {
      output_dist = add(collective_op("output_dist", Phase::kForward, [&] { return output_pairs(); }, deps_of(lookup)));
      emb_ready.push_back(output_dist);
    }
    if (n_ > 1 && has_type(ShardingType::kRowWise, ShardingType::kRowWise)) {
      CollectiveDesc rs{CollectiveKind::kReduceScatter, rw_bytes(), {}};
      rw_rs = add(coll("output_dist.row_wise", Phase::kForward, rs, deps_of(lookup)));
      emb_ready.push_back(rw_rs);
    }
    // table_row_wise and grid: reduce-scatter of the node's partial sums inside the node,
    // then the pooled all-to-all between the ranks of this local index on every node.
    int node_rs = -1, cross_a2a = -1;
    const bool node_comm = n_ > 1 && has_node_reduced();
    const double my_node_dims = node_dims_[static_cast<std::size_t>(r_ / g_)];
    if (node_comm && my_node_dims > 0) {
      CollectiveDesc rs{CollectiveKind::kReduceScatter, double(w_.batch_size) * my_node_dims * 4.0, {}};
      node_rs = add(coll("output_dist.table_row_wise", numbered("output_dist.table_row_wise.node", r_ / g_), Phase::kForward,
                         rs, deps_of(lookup), node_group()));
      emb_ready.push_back(node_rs);
    }
    if (node_comm && n_ / g_ > 1) {
      cross_a2a = add(cross_node_op("output_dist.table_row_wise.cross_node", Phase::kForward, deps_of(node_rs >= 0 ? node_rs : lookup), false));
      emb_ready.push_back(cross_a2a);
    }
    if (n_ == 1 && lookup >= 0) emb_ready.push_back(lookup);
    if (lookup_dp >= 0) emb_ready.push_back(lookup_dp);

    const double tp = static_cast<double>(w_.tables.size()) + 1;  // interaction features
    const double dim = static_cast<double>(w_.bottom_mlp.back());
    const double width = static_cast<double>(w_.interaction_width());
    std::vector<int> inter_deps = emb_ready;
    inter_deps.push_back(bottom_out);
    Op inter{"interaction", Phase::kForward, Stream::kCompute, {}, {}, inter_deps, false};
    if (w_.interaction == Interaction::kDot) {
      inter.kernels.push_back(elementwise("concat", b_ * tp * dim, 0, 2 * ab));
      inter.kernels.push_back(GemmDesc{static_cast<std::int64_t>(tp), static_cast<std::int64_t>(tp),
                                       static_cast<std::int64_t>(dim), b_, w_.mlp_dtype, false});
      inter.kernels.push_back(elementwise("tril_concat", b_ * width, 0, 2 * ab));
    } else {
      inter.kernels.push_back(elementwise("concat", b_ * width, 0, 2 * ab));
    }
    prev = add(std::move(inter));

    std::vector<std::int64_t> top_in;
    std::int64_t in = w_.interaction_width();
    for (std::size_t i = 0; i < w_.top_mlp.size(); ++i) {
      top_in.push_back(in);
      prev = add({numbered("top_mlp.", i), Phase::kForward, Stream::kCompute,
                  {GemmDesc{b_, w_.top_mlp[i], in, 1, w_.mlp_dtype, true}}, {}, {prev}, false});
      in = w_.top_mlp[i];
    }
    const int loss = add({"loss", Phase::kForward, Stream::kCompute,
                          {elementwise("sigmoid_bce", b_, 11, 12)}, {}, {prev}, false});

    // ---- backward ------------------------------------------------------------------
    prev = add({"loss.backward", Phase::kBackward, Stream::kCompute, {elementwise("bce_backward", b_, 5, 12)}, {}, {loss}, false});
    for (std::size_t i = w_.top_mlp.size(); i-- > 0;) {
      const bool relu_out = i + 1 < w_.top_mlp.size();  // the logit layer has no ReLU
      prev = add(linear_backward(numbered("top_mlp.", i, ".backward"), top_in[i], w_.top_mlp[i], true, relu_out, prev));
      grad_ready(prev, top_in[i], w_.top_mlp[i]);
    }
    Op inter_bwd{"interaction.backward", Phase::kBackward, Stream::kCompute, {}, {}, {prev}, false};
    if (w_.interaction == Interaction::kDot) {
      const auto t = static_cast<std::int64_t>(tp);
      const auto d = static_cast<std::int64_t>(dim);
      inter_bwd.kernels.push_back(elementwise("tril_backward", b_ * tp * tp, 0, 2 * ab));
      inter_bwd.kernels.push_back(GemmDesc{t, d, t, b_, w_.mlp_dtype, false});
      inter_bwd.kernels.push_back(GemmDesc{t, d, t, b_, w_.mlp_dtype, false});
      inter_bwd.kernels.push_back(elementwise("add", b_ * tp * dim, 1, 3 * ab));
    } else {
      inter_bwd.kernels.push_back(elementwise("copy", b_ * width, 0, 2 * ab));
    }
    const int inter_b = add(std::move(inter_bwd));

    std::vector<int> emb_grad_ready;
    if (output_dist >= 0) {
      emb_grad_ready.push_back(add(collective_op("output_dist.backward", Phase::kBackward, [&] { return output_pairs(); }, {inter_b}, true)));
    }
    if (rw_rs >= 0) {
      CollectiveDesc ag{CollectiveKind::kAllGather, rw_bytes(), {}};
      emb_grad_ready.push_back(add(coll("output_dist.row_wise.backward", Phase::kBackward, ag, {inter_b})));
    }
    int node_ready = inter_b;
    if (cross_a2a >= 0) {
      node_ready = add(cross_node_op("output_dist.table_row_wise.cross_node.backward", Phase::kBackward, {inter_b}, true));
      emb_grad_ready.push_back(node_ready);
    }
    if (node_rs >= 0) {
      CollectiveDesc ag{CollectiveKind::kAllGather, double(w_.batch_size) * my_node_dims * 4.0, {}};
      emb_grad_ready.push_back(add(coll("output_dist.table_row_wise.backward",
                                        numbered("output_dist.table_row_wise.backward.node", r_ / g_), Phase::kBackward, ag,
                                        {node_ready}, node_group())));
    }
    if (n_ == 1) emb_grad_ready.push_back(inter_b);

    prev = inter_b;
    for (std::size_t i = bottom.size(); i-- > 0;) {
      const std::int64_t bin = w_.bottom_mlp[i], bout = w_.bottom_mlp[i + 1];
      prev = add(linear_backward(numbered("bottom_mlp.", i, ".backward"), bin, bout, i > 0, true, prev));
      grad_ready(prev, bin, bout);
    }
    flush_bucket(prev);

    if (auto e = embedding_desc(EmbeddingPass::kBackward, false)) {
      add(single_kernel_op("embedding_backward", Phase::kBackward, std::move(*e), emb_grad_ready));
    }
    if (lookup_dp >= 0) add_dp_tables_backward(inter_b);

    // ---- optimizer and sync ------------------------------------------------------------
    const double params = w_.dense_parameters();
    const bool adam = w_.dense_optimizer == DenseOptimizer::kAdam;
    // SGD: read weight and grad, write weight; Adam: also read and write two moments.
    prev = add({adam ? "dense_optimizer.adam" : "dense_optimizer.sgd", Phase::kOptimizer, Stream::kCompute,
                {elementwise(adam ? "adam" : "sgd", params, adam ? 12 : 2, adam ? 28 : 12)}, {}, allreduces_, false});
    if (mixed) {  // the half copy of the fp32 master parameters the next forward reads
      prev = add({"copy_main_params", Phase::kOptimizer, Stream::kCompute,
                  {elementwise("cast", params, 0, 4 + ab)}, {}, {prev}, false});
    }
    if (w_.sync_each_iteration) {
      add({"loss.item", Phase::kOptimizer, Stream::kCompute, {MemcpyDesc{4, CopyKind::kDeviceToHost}}, {}, {loss, prev}, true});
    }
    return std::move(program_);
  }

 private:
  const DlrmSpec& w_;
  const ShardingPlan& plan_;
  int n_;
  int g_;  ///< GPUs per node
  int r_;
  std::int64_t b_;
  CollectiveTable& colls_;
  std::vector<ShardRef> local_;
  RankProgram program_;
  const std::vector<double>& node_dims_;  ///< per node: columns of its table_row_wise / grid blocks
  std::vector<int> allreduces_;
  double bucket_bytes_ = 0;
  int buckets_ = 0;

  int add(Op op) {
    program_.ops.push_back(std::move(op));
    return static_cast<int>(program_.ops.size()) - 1;
  }

  /// A compute op of one kernel, moved in (an initializer list would copy it; embedding
  /// descriptors carry a vector of tables).
  static Op single_kernel_op(std::string name, Phase phase, KernelDesc kernel, std::vector<int> deps) {
    Op op{std::move(name), phase, Stream::kCompute, {}, {}, std::move(deps), false};
    op.kernels.push_back(std::move(kernel));
    return op;
  }

  static std::vector<int> deps_of(int op) { return op >= 0 ? std::vector<int>{op} : std::vector<int>{}; }

  Op coll(std::string name, Phase phase, CollectiveDesc d, std::vector<int> deps) const {
    const int index = colls_.get(name, [&] { return std::move(d); });
    return Op{std::move(name), phase, Stream::kComm, {}, index, std::move(deps), false};
  }
  /// A collective of `group` whose graph-wide identity is `key` (one per group).
  Op coll(std::string name, const std::string& key, Phase phase, CollectiveDesc d, std::vector<int> deps, int group) const {
    const int index = colls_.get(key, [&] { return std::move(d); }, group);
    return Op{std::move(name), phase, Stream::kComm, {}, index, std::move(deps), false};
  }

  /// The ranks of this rank's node.
  int node_group() const {
    std::vector<int> ranks;
    for (int l = 0; l < g_; ++l) ranks.push_back(r_ / g_ * g_ + l);
    return colls_.group(ranks);
  }

  /// Pooled all-to-all of table_row_wise / grid outputs across nodes, between the ranks
  /// of this rank's local index: after the intra-node reduce-scatter the member on node i
  /// holds the reduced rows of the local batches of its peers, and sends node k's member
  /// b x (node i's block columns) x 4 B. `transpose`: the backward (gradients back).
  Op cross_node_op(std::string name, Phase phase, std::vector<int> deps, bool transpose) const {
    const int nodes = n_ / g_, local = r_ % g_;
    std::vector<int> ranks;
    for (int k = 0; k < nodes; ++k) ranks.push_back(k * g_ + local);
    const int group = colls_.group(ranks);
    const int index = colls_.get(numbered(name + ".local", local), [&] {
      const auto un = static_cast<std::size_t>(nodes);
      std::vector<double> pairs(un * un, 0.0);
      for (std::size_t i = 0; i < un; ++i)
        for (std::size_t k = 0; k < un; ++k) {
          if (i == k) continue;
          const double bytes = double(b_) * node_dims_[i] * 4.0;
          (transpose ? pairs[k * un + i] : pairs[i * un + k]) = bytes;
        }
      return CollectiveDesc{CollectiveKind::kAllToAllV, 0, std::move(pairs)};
    }, group);
    return Op{std::move(name), phase, Stream::kComm, {}, index, std::move(deps), false};
  }

  /// All-to-allv whose byte matrix `make_pairs()` is computed once for all ranks;
  /// `transpose` swaps senders and receivers (the backward of a forward exchange).
  template <class MakePairs>
  Op collective_op(std::string name, Phase phase, MakePairs make_pairs, std::vector<int> deps, bool transpose = false) const {
    const int index = colls_.get(name, [&] {
      std::vector<double> pairs = make_pairs();
      if (transpose) {
        const auto un = static_cast<std::size_t>(n_);
        std::vector<double> t(pairs.size());
        for (std::size_t i = 0; i < un; ++i)
          for (std::size_t j = 0; j < un; ++j) t[j * un + i] = pairs[i * un + j];
        pairs = std::move(t);
      }
      return CollectiveDesc{CollectiveKind::kAllToAllV, 0, std::move(pairs)};
    });
    return Op{std::move(name), phase, Stream::kComm, {}, index, std::move(deps), false};
  }

  bool has_sparse_tables() const {
    for (const auto& t : plan_.tables)
      if (t.type != ShardingType::kDataParallel) return true;
    return false;
  }
  bool has_type(ShardingType a, ShardingType b) const {
    for (const auto& t : plan_.tables)
      if (t.type == a || t.type == b) return true;
    return false;
  }
  bool has_pooled_all_to_all() const {
    for (const auto& t : plan_.tables)
      if (pooled_all_to_all(t.type)) return true;
    return false;
  }
  bool has_node_reduced() const {
    for (const auto& t : plan_.tables)
      if (node_reduced(t.type)) return true;
    return false;
  }

  /// Indices of a shard per sample: row-wise shards see their share of the rows' lookups.
  double shard_pooling(std::size_t table, const Shard& sh) const {
    const auto& t = w_.tables[table];
    if (splits_rows(plan_.tables[table].type)) return t.pooling * double(sh.rows) / double(t.rows);
    return t.pooling;
  }

  /// Input all-to-all: rank i sends rank j the lengths (4 B per bag) or indices of its
  /// local batch for the sparse shards j holds.
  std::vector<double> input_pairs(bool lengths) const {
    const auto un = static_cast<std::size_t>(n_);
    std::vector<double> per_dest(un, 0.0);
    for (std::size_t t = 0; t < plan_.tables.size(); ++t) {
      if (plan_.tables[t].type == ShardingType::kDataParallel) continue;
      for (const auto& sh : plan_.tables[t].shards) {
        per_dest[static_cast<std::size_t>(sh.rank)] +=
            lengths ? b_ * 4.0 : b_ * shard_pooling(t, sh) * w_.index_bytes;
      }
    }
    std::vector<double> m(un * un, 0.0);
    for (std::size_t i = 0; i < un; ++i)
      for (std::size_t j = 0; j < un; ++j) m[i * un + j] = per_dest[j];
    return m;
  }

  /// Pooled all-to-all: rank i sends rank j the fp32 pooled rows of j's samples for the
  /// table-, column- and table-column-wise shards i holds.
  std::vector<double> output_pairs() const {
    const auto un = static_cast<std::size_t>(n_);
    std::vector<double> per_src(un, 0.0);
    for (const auto& t : plan_.tables) {
      if (!pooled_all_to_all(t.type)) continue;
      for (const auto& sh : t.shards) per_src[static_cast<std::size_t>(sh.rank)] += b_ * double(sh.cols) * 4.0;
    }
    std::vector<double> m(un * un, 0.0);
    for (std::size_t i = 0; i < un; ++i)
      for (std::size_t j = 0; j < un; ++j) m[i * un + j] = per_src[i];
    return m;
  }

  /// Row-wise pooled partial sums, nccl-tests bytes of the whole array: global batch x dims x 4.
  double rw_bytes() const {
    double dims = 0;
    for (std::size_t t = 0; t < plan_.tables.size(); ++t)
      if (plan_.tables[t].type == ShardingType::kRowWise) dims += double(w_.tables[t].dim);
    return double(w_.batch_size) * dims * 4.0;
  }

  std::optional<EmbeddingDesc> embedding_desc(EmbeddingPass pass, bool dp) const {
    EmbeddingDesc e;
    e.batch = dp ? b_ : w_.batch_size;
    e.weight_dtype = w_.embedding_dtype;
    e.pass = pass;
    e.optimizer = w_.embedding_optimizer;
    e.index_bytes = w_.index_bytes;
    e.tables.reserve(local_.size());
    for (const auto& ref : local_) {
      if ((ref.type == ShardingType::kDataParallel) != dp) continue;
      const auto& spec = w_.tables[ref.table];
      e.tables.push_back(EmbeddingTableDesc{ref.shard->rows, ref.shard->cols, shard_pooling(ref.table, *ref.shard), spec.distribution});
    }
    if (e.tables.empty()) return std::nullopt;
    if (dp && pass == EmbeddingPass::kBackward) return std::nullopt;  // see add_dp_tables_backward
    return e;
  }

  Op linear_backward(std::string name, std::int64_t in, std::int64_t out, bool dgrad, bool relu_out, int dep) const {
    const double ab = act_bytes(w_.mlp_dtype);
    Op op{std::move(name), Phase::kBackward, Stream::kCompute, {}, {}, {dep}, false};
    op.kernels.reserve(4);
    if (relu_out) op.kernels.emplace_back(elementwise("relu_backward", double(b_) * out, 1, 3 * ab));
    if (dgrad) op.kernels.emplace_back(GemmDesc{b_, in, out, 1, w_.mlp_dtype, false});
    op.kernels.emplace_back(GemmDesc{out, in, b_, 1, w_.mlp_dtype, false});
    op.kernels.emplace_back(elementwise("bias_grad", double(b_) * out, 1, ab));
    return op;
  }

  /// DDP: a layer's gradients join the open bucket; a full bucket is all-reduced at once.
  void grad_ready(int op, std::int64_t in, std::int64_t out) {
    if (n_ == 1) return;
    bucket_bytes_ += (double(in) * out + out) * 4.0;
    const double cap = buckets_ == 0 ? w_.first_bucket : w_.gradient_bucket;
    if (bucket_bytes_ >= cap) flush_bucket(op);
  }

  void flush_bucket(int op) {
    if (n_ == 1 || bucket_bytes_ <= 0) return;
    CollectiveDesc d{CollectiveKind::kAllReduce, bucket_bytes_, {}};
    allreduces_.push_back(add(coll(numbered("allreduce.bucket", buckets_), Phase::kBackward, d, {op})));
    ++buckets_;
    bucket_bytes_ = 0;
  }

  /// Data-parallel tables: dense gradient (zero + scatter-add), all-reduce, SGD update.
  void add_dp_tables_backward(int dep) {
    double elems = 0, looked_up = 0;
    for (const auto& ref : local_) {
      if (ref.type != ShardingType::kDataParallel) continue;
      elems += double(ref.shard->rows) * ref.shard->cols;
      looked_up += double(b_) * shard_pooling(ref.table, *ref.shard) * ref.shard->cols;
    }
    const int grad = add({"embedding_backward.data_parallel", Phase::kBackward, Stream::kCompute,
                          {elementwise("zero", elems, 0, 4), elementwise("embedding_grad_scatter", looked_up, 1, 12)},
                          {},
                          {dep},
                          false});
    int ready = grad;
    if (n_ > 1) {
      ready = add(coll("allreduce.data_parallel_tables", Phase::kBackward,
                       CollectiveDesc{CollectiveKind::kAllReduce, elems * 4.0, {}}, {grad}));
    }
    add({"embedding_update.data_parallel", Phase::kOptimizer, Stream::kCompute,
         {elementwise("sgd", elems, 2, 2 * dtype_bytes(w_.embedding_dtype) + 4)}, {}, {ready}, false});
  }
};

std::vector<double> node_dims(const ShardingPlan& plan, int nodes, int gpus_per_node) {
  std::vector<double> out(static_cast<std::size_t>(nodes), 0.0);
  for (const auto& t : plan.tables) {
    if (!node_reduced(t.type)) continue;
    // One column block per shard at row 0; a block's shards share one node.
    for (const auto& sh : t.shards)
      if (sh.row_offset == 0) out[static_cast<std::size_t>(sh.rank / gpus_per_node)] += static_cast<double>(sh.cols);
  }
  return out;
}

}  // namespace

struct DlrmGraphBuilder::State {
  explicit State(ExecutionGraph& g) : colls(g) {}
  CollectiveTable colls;
};

DlrmGraphBuilder::DlrmGraphBuilder(const DlrmSpec& w, int world_size, int gpus_per_node)
    : w_(&w), world_(world_size), gpus_per_node_(gpus_per_node <= 0 ? world_size : gpus_per_node) {
  if (world_size < 1) throw ConfigError(w.file, "", "the system has no GPUs");
  if (world_ % gpus_per_node_ != 0) {
    throw ConfigError(w.file, "", fmt::format("{} ranks do not form nodes of {} GPUs", world_, gpus_per_node_));
  }
  if (w.batch_size % world_size != 0) {
    throw ConfigError(w.file, "/batch_size",
                      fmt::format("the global batch {} does not divide over the system's {} ranks", w.batch_size, world_size));
  }
  state_ = std::make_unique<State>(graph_);
}

DlrmGraphBuilder::~DlrmGraphBuilder() = default;

const ExecutionGraph& DlrmGraphBuilder::build(const ShardingPlan& plan, GraphChanges* changes) {
  const auto n = static_cast<std::size_t>(world_);
  // What a rank's program depends on besides the plan-wide shape: its shards' tables,
  // types and sizes, in table order.
  std::vector<std::vector<RankKeyEntry>>& keys = next_keys_;  // reused: no allocation per plan
  keys.resize(n);
  for (auto& k : keys) k.clear();
  Shape shape;
  shape.node_dims = node_dims(plan, world_ / gpus_per_node_, gpus_per_node_);
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    const auto type = plan.tables[t].type;
    shape.sparse = shape.sparse || type != ShardingType::kDataParallel;
    shape.pooled = shape.pooled || pooled_all_to_all(type);
    shape.row_wise = shape.row_wise || type == ShardingType::kRowWise;
    shape.node = shape.node || node_reduced(type);
    for (const auto& sh : plan.tables[t].shards)
      keys[static_cast<std::size_t>(sh.rank)].push_back(RankKeyEntry{t, static_cast<int>(type), sh.rows, sh.cols});
  }
  const bool full = !built_ || !(shape == shape_) || plan.tables.size() != w_->tables.size();
  std::vector<char> rank_changed(n, 1);
  previous_.resize(n);
  if (full) {
    for (std::size_t r = 0; r < n; ++r) {
      if (r < graph_.ranks.size()) {
        previous_[r] = std::move(graph_.ranks[r]);
      } else {
        previous_[r].ops.clear();
      }
    }
    graph_ = ExecutionGraph{};
    state_ = std::make_unique<State>(graph_);
    RankGroup all;
    for (int r = 0; r < world_; ++r) all.ranks.push_back(r);
    graph_.groups.push_back(all);
    graph_.ranks.resize(n);
  } else {
    state_->colls.begin_refresh();
    for (std::size_t r = 0; r < n; ++r) rank_changed[r] = keys[r] == keys_[r] ? 0 : 1;
  }
  for (std::size_t r = 0; r < n; ++r) {
    if (!rank_changed[r]) {
      previous_[r].ops.clear();
      continue;
    }
    // The rank's current program becomes previous_[r]; the older one lends its storage.
    RankProgram recycled;
    if (!full) recycled = std::exchange(previous_[r], std::move(graph_.ranks[r]));
    graph_.ranks[r] = RankBuilder(*w_, plan, world_, gpus_per_node_, static_cast<int>(r), state_->colls, shape.node_dims,
                                  std::move(recycled))
                          .build();
  }
  if (changes) {
    changes->all = full;
    changes->ranks = rank_changed;
    changes->collectives = state_->colls.changed();
  }
  std::swap(keys_, next_keys_);
  shape_ = std::move(shape);
  built_ = true;
  return graph_;
}

ExecutionGraph build_dlrm_graph(const DlrmSpec& w, const ShardingPlan& plan, int world_size, int gpus_per_node) {
  DlrmGraphBuilder b(w, world_size, gpus_per_node);
  b.build(plan);
  return b.take();
}

}  // namespace perfcast
