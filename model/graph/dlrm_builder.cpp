/// \file dlrm_builder.cpp
/// DlrmGraphBuilder: one program per rank from the rank passes (dlrm_rank_passes.hpp),
/// rebuilding only the ranks a new plan changes.

#include "model/graph/dlrm_builder.hpp"

#include "core/limits.hpp"

#include <algorithm>
#include <functional>
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
  std::vector<std::vector<dlrm::ShardRef>> local;  ///< per rank: its shards in the plan being built
  dlrm::CollectiveTable colls;
};

DlrmGraphBuilder::DlrmGraphBuilder(const DlrmSpec& w, int world_size, int gpus_per_node, HostLink link, bool symmetric)
    : w_(&w), world_(world_size), gpus_per_node_(gpus_per_node <= 0 ? world_size : gpus_per_node), link_(link),
      symmetric_(symmetric) {
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

namespace {

/// A hash of one rank's key (its shards), to compare ranks' keys cheaply before equality.
template <class Entry>
std::size_t key_hash(const std::vector<Entry>& key) {
  std::size_t h = key.size();
  auto mix = [&h](std::size_t v) { h = (h ^ v) * 0x9e3779b97f4a7c15ULL; };
  for (const Entry& e : key) {
    mix(e.table);
    mix(static_cast<std::size_t>(e.type));
    mix(static_cast<std::size_t>(e.rows));
    mix(static_cast<std::size_t>(e.cols));
    mix(static_cast<std::size_t>(e.storage));
    mix(std::hash<double>{}(e.cache_load_factor));
  }
  return h;
}

}  // namespace

void DlrmGraphBuilder::find_mirrors(const std::vector<std::vector<RankKeyEntry>>& keys, bool node_groups,
                                    std::vector<int>& mirror) const {
  const int n = world_;
  mirror.resize(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) mirror[static_cast<std::size_t>(r)] = r;
  if (!symmetric_ || n == 1) return;
  std::vector<std::size_t> hash(static_cast<std::size_t>(n));
  for (std::size_t r = 0; r < hash.size(); ++r) hash[r] = key_hash(keys[r]);
  // The hybrid layout's bottom-MLP rank runs a program of its own (-1: no such rank).
  const int bottom = w_->bottom_mlp_rank;
  auto same = [&](int a, int b) {
    const auto ua = static_cast<std::size_t>(a), ub = static_cast<std::size_t>(b);
    return a != bottom && b != bottom && hash[ua] == hash[ub] && keys[ua] == keys[ub];
  };
  if (node_groups) {
    // Whole local-index columns: (m, i) mirrors (m, j) on every node m, or on none.
    const int g = gpus_per_node_, nodes = n / g;
    std::vector<int> local_rep(static_cast<std::size_t>(g));
    for (int i = 0; i < g; ++i) {
      local_rep[static_cast<std::size_t>(i)] = i;
      for (int j = 0; j < i; ++j) {
        if (local_rep[static_cast<std::size_t>(j)] != j) continue;
        bool all = true;
        for (int m = 0; m < nodes && all; ++m) all = same(m * g + i, m * g + j);
        if (all) {
          local_rep[static_cast<std::size_t>(i)] = j;
          break;
        }
      }
    }
    for (int r = 0; r < n; ++r) mirror[static_cast<std::size_t>(r)] = r / g * g + local_rep[static_cast<std::size_t>(r % g)];
    return;
  }
  // One collective group of all ranks: the lowest rank of each distinct key stands for the
  // others. Ranks sorted by (hash, rank); within a run of one hash, each rank is compared
  // with the run's representatives (one, but for a hash collision).
  std::vector<int> order(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) order[static_cast<std::size_t>(r)] = r;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const auto ha = hash[static_cast<std::size_t>(a)], hb = hash[static_cast<std::size_t>(b)];
    return ha != hb ? ha < hb : a < b;
  });
  std::vector<int> reps;
  for (std::size_t begin = 0; begin < order.size();) {
    std::size_t end = begin + 1;
    while (end < order.size() && hash[static_cast<std::size_t>(order[end])] == hash[static_cast<std::size_t>(order[begin])]) ++end;
    reps.clear();
    for (std::size_t k = begin; k < end; ++k) {
      const int r = order[k];
      const auto it = std::find_if(reps.begin(), reps.end(), [&](int rep) { return same(r, rep); });
      if (it == reps.end()) reps.push_back(r);
      else mirror[static_cast<std::size_t>(r)] = *it;
    }
    begin = end;
  }
}

const ExecutionGraph& DlrmGraphBuilder::build(const ShardingPlan& plan, GraphChanges* changes) {
  const auto n = static_cast<std::size_t>(world_);
  // What a rank's program depends on besides the plan-wide shape: its shards' tables,
  // types and sizes, in table order.
  std::vector<std::vector<RankKeyEntry>>& keys = next_keys_;  // reused: no allocation per plan
  keys.resize(n);
  for (auto& k : keys) k.clear();
  Shape shape;
  const int nodes = world_ / gpus_per_node_;
  std::vector<double>& node_bytes = next_node_bytes_;
  node_bytes = node_output_bytes(*w_, plan, nodes, gpus_per_node_);
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
  std::vector<int>& mirror = next_mirror_;  // reused
  find_mirrors(keys, shape.node, mirror);
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
    // A mirrored rank's program is empty whatever its shards; a simulated one changes
    // with its shards, or when it was mirrored before. Collective descriptors are refreshed
    // by the ranks rebuilt (CollectiveTable::get), so every changed descriptor needs one
    // that requests it.
    std::fill(rank_changed.begin(), rank_changed.end(), 0);
    for (std::size_t r = 0; r < n; ++r) {
      const bool simulated = mirror[r] == static_cast<int>(r), was_simulated = mirror_[r] == static_cast<int>(r);
      const bool key_changed = !(keys[r] == keys_[r]);
      if (simulated != was_simulated || (simulated && key_changed)) rank_changed[r] = 1;
      // A rank whose shards changed but which another stands for: its representative (same
      // shards; same node where collectives run per node) requests the collectives its
      // program would.
      if (key_changed || simulated != was_simulated) rank_changed[static_cast<std::size_t>(mirror[r])] = 1;
    }
    // table_row_wise / grid blocks: a node whose block output changed rebuilds its ranks.
    // Their node reduce-scatter comes or goes with the output and they refresh its
    // descriptor; and as every local-index column has a rank on that node, they also
    // refresh every simulated column's cross-node all-to-all (whose bytes are every
    // node's output).
    for (int k = 0; k < nodes; ++k) {
      if (node_bytes[static_cast<std::size_t>(k)] == node_bytes_[static_cast<std::size_t>(k)]) continue;
      for (int l = 0; l < gpus_per_node_; ++l) rank_changed[static_cast<std::size_t>(k * gpus_per_node_ + l)] = 1;
    }
  }
  dlrm::collect_rank_shards(plan, world_, state_->local);
  for (std::size_t r = 0; r < n; ++r) {
    if (!rank_changed[r]) {
      previous_[r].ops.clear();
      continue;
    }
    // The rank's current program becomes previous_[r]; the older one lends its storage.
    RankProgram recycled;
    if (!full) recycled = std::exchange(previous_[r], std::move(graph_.ranks[r]));
    if (mirror[r] != static_cast<int>(r)) {  // its representative's program stands for it
      recycled.ops.clear();
      graph_.ranks[r] = std::move(recycled);
      continue;
    }
    const dlrm::RankContext context(*w_, plan, world_, gpus_per_node_, static_cast<int>(r), state_->colls, node_bytes,
                                    state_->local[r], link_);
    graph_.ranks[r] = dlrm::build_dlrm_rank_program(context, std::move(recycled));
  }
  if (changes) {
    changes->all = full;
    changes->ranks = rank_changed;
    changes->collectives = state_->colls.changed();
  }
  bool mirrored = false;
  for (std::size_t r = 0; r < n && !mirrored; ++r) mirrored = mirror[r] != static_cast<int>(r);
  if (mirrored) graph_.mirror_of.assign(mirror.begin(), mirror.end());
  else graph_.mirror_of.clear();
  std::swap(keys_, next_keys_);
  std::swap(mirror_, next_mirror_);
  std::swap(node_bytes_, next_node_bytes_);
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
