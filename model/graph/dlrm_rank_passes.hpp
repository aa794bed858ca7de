#pragma once
/// \file dlrm_rank_passes.hpp
/// The passes that build one rank's DLRM training iteration (internal to dlrm_builder.cpp
/// and its pass files; not part of the graph library's interface).
///
/// A rank's program is a value produced by a pipeline: build_dlrm_rank_program() starts an
/// empty RankDraft and runs kDlrmRankPasses in order. Each pass appends its ops in host
/// order and records the op indices later passes depend on (the handles of RankDraft).
/// The pass order is the host order of a PyTorch/TorchRec training step, so ops keep the
/// same indices whatever pass files they come from.
///
/// To add an op: put it in the pass whose part of the step issues it (or add a pass at
/// its place in kDlrmRankPasses), take its dependencies from RankDraft's handles, and
/// record a handle if a later pass waits on it.

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/graph/dlrm_builder.hpp"
#include "model/graph/execution_graph.hpp"
#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"

namespace perfcast::dlrm {

/// `prefix` + decimal `i` + `suffix` (op and collective names; cheaper than fmt::format in
/// the sharding search's rebuilds).
std::string numbered(std::string_view prefix, std::int64_t i, std::string_view suffix = {});

/// An elementwise kernel: `elements`, FLOPs and bytes moved per element.
KernelDesc elementwise(std::string op, double elements, double flops, double bytes);

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
  /// An all-to-allv whose byte matrix `fill(out)` writes into `out` (n x n, row: sender):
  /// as get(), but a refresh writes into a buffer the table keeps and swaps it in only when
  /// the matrix changed, so that a search's incremental builds allocate no matrix.
  template <class Fill>
  int get_all_to_allv(const std::string& key, Fill fill, int group = 0) {
    auto [it, fresh] = index_.try_emplace(key, static_cast<int>(g_.collectives.size()));
    const auto i = static_cast<std::size_t>(it->second);
    if (fresh) {
      CollectiveDesc d{CollectiveKind::kAllToAllV, 0, {}};
      fill(d.pair_bytes);
      g_.collectives.push_back(GraphCollective{std::move(d), group});
      refreshed_.push_back(1);
      changed_.push_back(1);
    } else if (!refreshed_[i]) {
      fill(scratch_pairs_);
      refreshed_[i] = 1;
      CollectiveDesc& old = g_.collectives[i].desc;
      if (old.kind != CollectiveKind::kAllToAllV || old.bytes != 0 || !(old.pair_bytes == scratch_pairs_)) {
        old.kind = CollectiveKind::kAllToAllV;
        old.bytes = 0;
        std::swap(old.pair_bytes, scratch_pairs_);  // the old matrix's storage is the next buffer
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
  [[nodiscard]] const std::vector<char>& changed() const { return changed_; }
  /// Index of the group of exactly these ranks (in this order), added when new.
  int group(const std::vector<int>& ranks);

 private:
  ExecutionGraph& g_;
  std::map<std::string, int> index_;
  std::vector<char> refreshed_, changed_;  ///< per collective, this build
  std::vector<double> scratch_pairs_;      ///< get_all_to_allv's buffer, reused across builds
};

/// A shard held by the rank being built.
struct ShardRef {
  std::size_t table;
  const Shard* shard;
  ShardingType type;
};

/// Every rank's shards, in table order: `by_rank[r]` for rank r of `world`, in one pass over
/// the plan's shards (a context per rank searching all of them cost O(ranks x shards) a
/// build); `by_rank`'s storage is reused.
void collect_rank_shards(const ShardingPlan& plan, int world, std::vector<std::vector<ShardRef>>& by_rank);

/// What every pass of one rank reads: the workload, the plan, where the rank sits, and
/// the graph-wide collective table (shared by all ranks of one build).
class RankContext {
 public:
  /// `node_output_bytes`: per node, the pooled-output bytes per sample of its table_row_wise /
  /// grid blocks (dlrm_builder.cpp node_output_bytes()).
  /// `local`: the rank's shards in table order (collect_rank_shards(...)[rank]); it must
  /// outlive the context.
  RankContext(const DlrmSpec& w, const ShardingPlan& plan, int world, int gpus_per_node, int rank, CollectiveTable& colls,
              const std::vector<double>& node_output_bytes, const std::vector<ShardRef>& local, HostLink host_link = {});

  const DlrmSpec& w;
  const ShardingPlan& plan;
  int world;           ///< ranks
  int gpus_per_node;
  int rank;
  std::int64_t batch;  ///< local batch: global batch / ranks
  CollectiveTable& colls;
  const std::vector<double>& node_output_bytes;  ///< per node: pooled-output bytes per sample of its table_row_wise / grid blocks
  const std::vector<ShardRef>& local;    ///< this rank's shards, in table order
  HostLink host_link;                    ///< to host memory (tables stored there)

  /// TorchRec's sparse_dist pipeline: the batch's inputs were copied and distributed in the
  /// previous iteration.
  [[nodiscard]] bool pipelined() const { return w.pipeline != TrainPipeline::kNone; }
  /// TorchRec's semi_sync pipeline: this iteration looks up the next batch's embeddings;
  /// the interaction reads those the previous iteration exchanged.
  [[nodiscard]] bool semi_sync() const { return w.pipeline == TrainPipeline::kSemiSync; }
  /// `op` reads `input` (the input all-to-all, -1: none): this iteration's, or under the
  /// pipeline the previous iteration's.
  void reads_input(Op& op, int input) const {
    if (input >= 0) (pipelined() ? op.prev_deps : op.deps).push_back(input);
  }
  /// `op` reads the batch copy `copy`: this iteration's, or the previous iteration's under a
  /// training pipeline or an overlapped reader (the copy of the next batch runs during this one).
  void reads_batch(Op& op, int copy) const {
    if (copy >= 0) (pipelined() || w.stack.overlapped_reader ? op.prev_deps : op.deps).push_back(copy);
  }
  /// The stack captures the iteration in a CUDA graph.
  [[nodiscard]] bool cuda_graphs() const { return w.stack.cuda_graphs; }
  /// NVIDIA's hybrid-parallel layout: one rank runs the bottom MLP for the global batch.
  [[nodiscard]] bool hybrid_dense() const { return w.bottom_mlp_rank >= 0; }
  /// This rank runs the bottom MLP (every rank when it is data-parallel).
  [[nodiscard]] bool runs_bottom_mlp() const { return !hybrid_dense() || rank == w.bottom_mlp_rank; }
  /// Samples the bottom MLP of this rank processes: the global batch on the hybrid layout's rank.
  [[nodiscard]] std::int64_t bottom_batch() const { return hybrid_dense() ? w.batch_size : batch; }
  /// Bytes of an activation element of the MLPs (tf32 keeps fp32 storage).
  [[nodiscard]] double act_bytes() const { return dtype_bytes(w.mlp_dtype); }
  /// fp16 / bf16 MLPs: autocast casts, and the optimizer writes a half copy of the weights.
  [[nodiscard]] bool mixed_precision() const { return w.mlp_dtype == DType::kFp16 || w.mlp_dtype == DType::kBf16; }
  /// Bytes of an element of the interaction's concatenated features. Autocast runs torch.cat
  /// in the widest input type (its "promote" list), so the half bottom output concatenated
  /// with fp32 embeddings comes out fp32; only the GEMMs after it (bmm, Linear) cast to half.
  /// A stack whose embeddings output a type of their own (DlrmStack::embedding_output;
  /// HugeCTR's half outputs under mixed precision) concatenates in the wider of it and the MLPs'.
  [[nodiscard]] double interaction_bytes() const {
    const DType emb = w.stack.embedding_output ? *w.stack.embedding_output : w.embedding_dtype;
    return std::max(act_bytes(), dtype_bytes(emb));
  }
  /// The concatenated features are wider than the GEMMs' type: autocast casts them first.
  [[nodiscard]] bool interaction_cast() const { return interaction_bytes() > act_bytes(); }
  /// Columns of the table_row_wise / grid blocks of this rank's node.
  [[nodiscard]] double my_node_output_bytes() const { return node_output_bytes[static_cast<std::size_t>(rank / gpus_per_node)]; }

  // ---- what the plan holds ----
  [[nodiscard]] bool has_sparse_tables() const;
  /// Row-wise pooled tables (reduce-scattered).
  [[nodiscard]] bool has_row_wise() const;
  /// Tables whose rows go back by the output all-to-all (exchanged_by_all_to_all).
  [[nodiscard]] bool has_pooled_all_to_all() const;
  /// Table `t` goes back to its samples' ranks by the output all-to-all: pooled table-,
  /// column- and table-column-wise shards, and sequence row-wise shards.
  [[nodiscard]] bool exchanged_by_all_to_all(std::size_t t) const;
  /// Sequence tables, summed before the interaction: sum of dim, and of pooling x dim.
  [[nodiscard]] double sequence_dims() const;
  [[nodiscard]] double sequence_row_dims() const;
  [[nodiscard]] bool has_node_reduced() const;
  /// Hybrid tables (frequent rows data-parallel, the others model-parallel).
  [[nodiscard]] bool has_hybrid() const;
  /// Columns of the hybrid tables (their partial sums are added to the frequent rows' result).
  [[nodiscard]] double hybrid_dims() const;

  // ---- op makers ----
  /// A collective op of all ranks, identified graph-wide by `name`.
  [[nodiscard]] Op coll(std::string name, Phase phase, CollectiveDesc d, std::vector<int> deps) const;
  /// A collective of `group` whose graph-wide identity is `key` (one per group).
  [[nodiscard]] Op coll(std::string name, const std::string& key, Phase phase, CollectiveDesc d, std::vector<int> deps,
                        int group) const;
  /// The group of the ranks of this rank's node.
  [[nodiscard]] int node_group() const;
  /// Pooled all-to-all of table_row_wise / grid outputs across nodes, between the ranks
  /// of this rank's local index: after the intra-node reduce-scatter the member on node i
  /// holds the reduced rows of the local batches of its peers, and sends node k's member
  /// b x (node i's block output bytes per sample). `transpose`: the backward (gradients back).
  [[nodiscard]] Op cross_node_op(std::string name, Phase phase, std::vector<int> deps, bool transpose) const;
  /// All-to-allv of all ranks with byte matrix `pairs` (row: sender), computed once per
  /// graph; `transpose` swaps senders and receivers (the backward of a forward exchange).
  [[nodiscard]] Op all_to_all_op(std::string name, Phase phase, void (RankContext::*pairs)(std::vector<double>&) const,
                                 std::vector<int> deps, bool transpose = false) const;

  // ---- byte matrices and sizes (nccl-tests conventions); a matrix is written into `out` ----
  /// Input all-to-all: rank i sends rank j the lengths (4 B per bag) of its local batch
  /// for the sparse shards j holds.
  void input_length_pairs(std::vector<double>& out) const { input_pairs(true, out); }
  /// ... and the indices (index_bytes each).
  void input_index_pairs(std::vector<double>& out) const { input_pairs(false, out); }
  /// Output all-to-all: rank i sends rank j the fp32 pooled rows of j's samples for the
  /// table-, column- and table-column-wise shards i holds; of a sequence table, every
  /// looked-up row (j's samples x the shard's indices per sample x its columns x 4 B).
  void output_pairs(std::vector<double>& out) const;
  /// Hybrid dense layout: the bottom MLP's rank sends rank j its local batch's bottom output
  /// (local batch x width x activation bytes).
  void bottom_output_pairs(std::vector<double>& out) const;
  /// Hybrid tables' infrequent rows: rank i sends rank j the fp32 pooled partial sums of j's
  /// samples whose bag touched i's infrequent rows: local batch x (1 - exp(-L_i)) x dim x 4,
  /// L_i the indices per sample that fall on i's shard (a Poisson count, as the indices of a
  /// bag are drawn independently); nothing to itself.
  void hybrid_pairs(std::vector<double>& out) const;
  /// Row-wise pooled partial sums, nccl-tests bytes of the whole array: global batch x dims x
  /// each table's output bytes (pooled tables only).
  /// The dtype the local lookups (data-parallel ones when `dp`) write their pooled output in,
  /// from their tables' output_bytes (TorchRec's output_dtype).
  [[nodiscard]] DType lookup_output_dtype(bool dp) const;
  /// Bytes per element of the gradients the data-parallel all-reduces move (DlrmStack::gradient_dtype; FP32 unset).
  [[nodiscard]] double gradient_bytes() const { return w.stack.gradient_dtype ? dtype_bytes(*w.stack.gradient_dtype) : 4.0; }
  [[nodiscard]] double rw_bytes() const;
  /// Indices of a shard per sample: row-wise shards see their share of the rows' lookups,
  /// hybrid shards their share of the infrequent rows' lookups.
  [[nodiscard]] double shard_pooling(std::size_t table, const Shard& sh) const;
  /// The fused embedding kernel of this rank's sharded (`dp` false) or data-parallel
  /// tables; none when the rank holds no such table (and for the data-parallel backward,
  /// which add_embedding_backward builds from elementwise kernels).
  [[nodiscard]] std::optional<EmbeddingDesc> embedding_desc(EmbeddingPass pass, bool dp) const;
  /// The backward of a linear layer `in` -> `out` (+ ReLU when `relu_out`): ReLU backward,
  /// data gradient (`dgrad`), weight gradient, bias gradient. `weight_part`, when given,
  /// receives per kernel whether it computes a weight or bias gradient only.
  [[nodiscard]] Op linear_backward(std::string name, std::int64_t in, std::int64_t out, bool dgrad, bool relu_out,
                                   int dep, std::int64_t rows = 0, std::vector<bool>* weight_part = nullptr) const;
  /// The same kernels as two ops, for stacks that defer weight gradients
  /// (DlrmStack::async_weight_gradients): `data` (ReLU backward, data gradient, and a fused
  /// kernel that also reduces the bias gradient; depends on `dep`) and `weights` (weight and
  /// bias gradients, named NAME.weights; its dependency is the data op, set by the caller once
  /// that op has an index).
  struct SplitBackward {
    Op data, weights;
  };
  [[nodiscard]] SplitBackward linear_backward_split(std::string name, std::int64_t in, std::int64_t out, bool relu_out,
                                                    int dep) const;

 private:
  void input_pairs(bool lengths, std::vector<double>& out) const;
};

/// One rank's program under construction, and the ops later passes depend on. -1: the
/// op does not exist in this plan.
struct RankDraft {
  RankProgram program;

  // forward
  int batch_copy = -1;         ///< batch_h2d
  int inputs_ready = -1;       ///< indices on the ranks that look them up (the input all-to-all, or the copy)
  std::vector<int> bottom_layers;  ///< bottom_mlp.i
  int bottom_out = -1;         ///< the bottom MLP's output (or the cast / copy before it); -1: not on this rank
  int bottom_ready = -1;       ///< the bottom output of this rank's samples (hybrid layout: after its all-to-all)
  int lookup = -1;             ///< embedding_lookup (sharded tables)
  int lookup_dp = -1;          ///< embedding_lookup.data_parallel
  int output_dist = -1;        ///< pooled all-to-all
  int row_wise_rs = -1;        ///< row-wise reduce-scatter
  int node_rs = -1;            ///< table_row_wise / grid reduce-scatter inside the node
  int cross_node_a2a = -1;     ///< table_row_wise / grid all-to-all across nodes
  int hybrid_dist = -1;        ///< hybrid tables' partial sums all-to-all
  std::vector<int> embeddings_ready;  ///< what the interaction waits on besides the bottom MLP
  int interaction = -1;
  std::vector<std::int64_t> top_in;  ///< input width of each top_mlp layer
  int loss = -1;

  // backward
  int top_grad = -1;          ///< the last top_mlp backward
  int interaction_grad = -1;  ///< interaction.backward
  int bottom_grad_ready = -1; ///< the bottom output's gradient on the bottom MLP's rank(s)
  std::vector<int> embedding_grads_ready;  ///< what the embedding backward waits on
  std::vector<int> allreduces;             ///< DDP gradient buckets (the dense optimizer waits on them)
  double bucket_bytes = 0;                 ///< gradients in the open bucket
  int buckets = 0;                         ///< buckets issued
  /// Weight-gradient ops deferred until the embedding gradients' exchange is issued
  /// (DlrmStack::async_weight_gradients), each with its fp32 parameter count for the buckets.
  std::vector<std::pair<Op, double>> deferred_weight_grads;

  /// Appends `op`; returns its index.
  int add(Op op) {
    program.ops.push_back(std::move(op));
    return static_cast<int>(program.ops.size()) - 1;
  }
  /// DDP: a layer's gradients join the open bucket; a full bucket is all-reduced at once
  /// (first bucket `first_bucket`, then `gradient_bucket` bytes).
  void grad_ready(const RankContext& c, int op, std::int64_t in, std::int64_t out);
  /// The same for `params` fp32 parameters of any shape.
  void params_ready(const RankContext& c, int op, double params);
  /// All-reduces the open bucket after `op`.
  void flush_bucket(const RankContext& c, int op);
};

using RankPass = void (*)(const RankContext&, RankDraft&);
struct NamedRankPass {
  std::string_view name;
  RankPass run;
};

// ---- forward (dlrm_forward_passes.cpp) ----
void add_batch_copy(const RankContext& c, RankDraft& d);
void add_input_distribution(const RankContext& c, RankDraft& d);
void add_bottom_mlp(const RankContext& c, RankDraft& d);
void add_embedding_lookups(const RankContext& c, RankDraft& d);
void add_embedding_exchange(const RankContext& c, RankDraft& d);
void add_interaction(const RankContext& c, RankDraft& d);
void add_top_mlp_and_loss(const RankContext& c, RankDraft& d);
// ---- backward and optimizer (dlrm_backward_passes.cpp) ----
void add_top_mlp_backward(const RankContext& c, RankDraft& d);
void add_interaction_backward(const RankContext& c, RankDraft& d);
void add_embedding_exchange_backward(const RankContext& c, RankDraft& d);
void add_deferred_weight_gradients(const RankContext& c, RankDraft& d);
void add_bottom_mlp_backward(const RankContext& c, RankDraft& d);
void add_embedding_backward(const RankContext& c, RankDraft& d);
void add_optimizer_step(const RankContext& c, RankDraft& d);

/// The passes in host order.
inline constexpr std::array<NamedRankPass, 14> kDlrmRankPasses{{
    {"batch_copy", add_batch_copy},
    {"input_distribution", add_input_distribution},
    {"bottom_mlp", add_bottom_mlp},
    {"embedding_lookups", add_embedding_lookups},
    {"embedding_exchange", add_embedding_exchange},
    {"interaction", add_interaction},
    {"top_mlp_and_loss", add_top_mlp_and_loss},
    {"top_mlp_backward", add_top_mlp_backward},
    {"interaction_backward", add_interaction_backward},
    {"embedding_exchange_backward", add_embedding_exchange_backward},
    {"deferred_weight_gradients", add_deferred_weight_gradients},
    {"bottom_mlp_backward", add_bottom_mlp_backward},
    {"embedding_backward", add_embedding_backward},
    {"optimizer_step", add_optimizer_step},
}};

/// torch.compile'd dense part: in each run of consecutive dense ops (collectives aside), all
/// but the first are later parts of one compiled call (Op::same_call: no op host cost).
void mark_compiled_regions(RankProgram& p);

/// Marks the ops after the program's "cuda_graph.launch" op as captured in the CUDA graph it
/// replays, but for ops the host waits on (they run outside the graph).
void capture_in_graph(RankProgram& p);

/// One rank's program: kDlrmRankPasses run on an empty draft. `recycled`: a program whose
/// storage the new one reuses (its ops are discarded).
[[nodiscard]] RankProgram build_dlrm_rank_program(const RankContext& c, RankProgram recycled = {});

}  // namespace perfcast::dlrm
