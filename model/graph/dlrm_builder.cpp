/// \file dlrm_builder.cpp
/// DlrmGraphBuilder: one program per rank from the rank passes (dlrm_rank_passes.hpp),
/// rebuilding only the ranks a new plan changes.

#include "model/graph/dlrm_builder.hpp"

#include "core/limits.hpp"

#include <string>
#include <utility>

#include <fmt/format.h>

#include "model/graph/dlrm_rank_passes.hpp"

namespace perfcast {
namespace dlrm {

RankProgram build_dlrm_rank_program(const RankContext& c, RankProgram recycled) {
  RankDraft d;
  d.program = std::move(recycled);
  d.program.ops.clear();
  for (const NamedRankPass& pass : kDlrmRankPasses) pass.run(c, d);
  if (c.w.stack.compiled_dense) mark_compiled_regions(d.program);
  if (c.cuda_graphs()) capture_in_graph(d.program);
  return std::move(d.program);
}

namespace {
/// Ops of the dense part by name: the bottom MLP (and its input's cast), the interaction, the
/// cross layers, the top MLP and the loss, forward and backward.
bool dense_op(std::string_view name) {
  for (std::string_view p : {"dense_features.cast", "bottom_mlp.", "interaction", "dcn.cross.", "top_mlp.", "loss"})
    if (name.substr(0, p.size()) == p) return name != "loss.item";
  return false;
}
}  // namespace

void mark_compiled_regions(RankProgram& p) {
  bool in_region = false;
  for (Op& op : p.ops) {
    if (op.stream == Stream::kComm) continue;  // DDP's hooks and collectives do not break a region
    const bool dense = dense_op(op.name);
    op.same_call = dense && in_region;
    in_region = dense;
  }
}

void capture_in_graph(RankProgram& p) {
  bool after_launch = false;
  for (Op& op : p.ops) {
    if (op.graph_launch) {
      after_launch = true;
      continue;
    }
    // The host's own waits (reading the loss) happen outside the graph.
    op.captured = after_launch && !op.host_waits;
  }
}

}  // namespace dlrm

namespace {

/// Per node, the pooled-output bytes per sample of its table_row_wise / grid blocks.
std::vector<double> node_output_bytes(const DlrmSpec& w, const ShardingPlan& plan, int nodes, int gpus_per_node) {
  std::vector<double> out(static_cast<std::size_t>(nodes), 0.0);
  for (const auto& t : plan.tables) {
    if (!node_reduced(t.type)) continue;
    // One column block per shard at row 0; a block's shards share one node.
    for (const auto& sh : t.shards)
      if (sh.row_offset == 0) out[static_cast<std::size_t>(sh.rank / gpus_per_node)] += static_cast<double>(sh.cols) * pooled_output_bytes(w, t);
  }
  return out;
}

}  // namespace

struct DlrmGraphBuilder::State {
  explicit State(ExecutionGraph& g) : colls(g) {}
  dlrm::CollectiveTable colls;
};

DlrmGraphBuilder::DlrmGraphBuilder(const DlrmSpec& w, int world_size, int gpus_per_node, HostLink link)
    : w_(&w), world_(world_size), gpus_per_node_(gpus_per_node <= 0 ? world_size : gpus_per_node), link_(link) {
  if (world_size < 1) throw ConfigError(w.file, "", "the system has no GPUs");
  if (world_size > limits::kMaxPairwiseRanks)
    throw ConfigError(w.file, "", fmt::format("a DLRM on {} GPUs: its all-to-all byte matrices grow as GPUs squared, so perfcast "
                                              "models DLRMs on at most {} GPUs (core/limits.hpp)", world_size, limits::kMaxPairwiseRanks));
  if (world_ % gpus_per_node_ != 0) {
    throw ConfigError(w.file, "", fmt::format("{} ranks do not form nodes of {} GPUs", world_, gpus_per_node_));
  }
  if (w.bottom_mlp_rank >= world_size) {
    throw ConfigError(w.file, "/bottom_mlp_rank",
                      fmt::format("rank {} does not exist (the system has {} ranks)", w.bottom_mlp_rank, world_size));
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
  shape.node_output_bytes = node_output_bytes(*w_, plan, world_ / gpus_per_node_, gpus_per_node_);
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    const auto type = plan.tables[t].type;
    shape.sparse = shape.sparse || type != ShardingType::kDataParallel;
    shape.pooled = shape.pooled || pooled_all_to_all(type);
    shape.row_wise = shape.row_wise || type == ShardingType::kRowWise;
    shape.node = shape.node || node_reduced(type);
    shape.hybrid = shape.hybrid || type == ShardingType::kHybrid;
    const auto& ts = plan.tables[t];
    for (const auto& sh : ts.shards)
      keys[static_cast<std::size_t>(sh.rank)].push_back(
          RankKeyEntry{t, static_cast<int>(type), sh.rows, sh.cols, static_cast<int>(ts.storage), ts.cache_load_factor});
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
    const dlrm::RankContext context(*w_, plan, world_, gpus_per_node_, static_cast<int>(r), state_->colls, shape.node_output_bytes, link_);
    graph_.ranks[r] = dlrm::build_dlrm_rank_program(context, std::move(recycled));
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

ExecutionGraph build_dlrm_graph(const DlrmSpec& w, const ShardingPlan& plan, int world_size, int gpus_per_node, HostLink link) {
  DlrmGraphBuilder b(w, world_size, gpus_per_node, link);
  b.build(plan);
  return b.take();
}

}  // namespace perfcast
