#include "validation/multi_gpu_layout.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/json_reader.hpp"

namespace perfcast::validation {

std::int64_t RankLayout::pooled_send_cols() const {
  std::int64_t c = 0;
  for (const auto& b : pooled_send) c += b.cols;
  return c;
}

std::vector<std::int64_t> MultiGpuLayout::pooled_backward_bytes() const {
  const auto n = static_cast<std::size_t>(world);
  std::vector<std::int64_t> t(pooled_bytes.size(), 0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) t[j * n + i] = pooled_bytes[i * n + j];
  return t;
}

RankInput split_batch(const MultiGpuLayout& L, const DlrmSpec& w, const DlrmBatch& g, int rank) {
  const std::int64_t B = L.global_batch, b = L.local_batch, F = w.dense_features();
  const auto T = static_cast<std::int64_t>(w.tables.size());
  if (rank < 0 || rank >= L.world) throw std::invalid_argument("split_batch: no such rank");
  if (g.dense.size() != static_cast<std::size_t>(B * F) || g.labels.size() != static_cast<std::size_t>(B) ||
      g.offsets.size() != static_cast<std::size_t>(T * B + 1) || g.offsets.back() != static_cast<std::int64_t>(g.indices.size())) {
    throw std::invalid_argument("split_batch: the batch does not match the workload's sizes");
  }
  const auto bag = [&](std::int64_t t, std::int64_t s) {
    const auto i = static_cast<std::size_t>(t * B + s);
    return std::pair{g.offsets[i], g.offsets[i + 1]};
  };
  RankInput in;
  const std::int64_t first = static_cast<std::int64_t>(rank) * b;
  const auto uf = static_cast<std::size_t>(F);
  in.local.dense.assign(g.dense.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(first) * uf),
                        g.dense.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(first + b) * uf));
  in.local.labels.assign(g.labels.begin() + first, g.labels.begin() + first + b);
  in.local.offsets.push_back(0);
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t s = first; s < first + b; ++s) {
      const auto [lo, hi] = bag(t, s);
      in.local.indices.insert(in.local.indices.end(), g.indices.begin() + lo, g.indices.begin() + hi);
      in.local.offsets.push_back(static_cast<std::int64_t>(in.local.indices.size()));
    }
  }
  const auto& R = L.ranks[static_cast<std::size_t>(rank)];
  const auto fill = [&](const std::vector<std::size_t>& group, GroupInput& out, bool global) {
    out.bags = global ? B : b;
    out.offsets.assign(1, 0);
    for (const std::size_t k : group) {
      const LocalShard& ls = R.shards[k];
      const std::int64_t r0 = ls.shard.row_offset, r1 = ls.shard.row_offset + ls.shard.rows;
      const auto t = static_cast<std::int64_t>(ls.table);
      for (std::int64_t s = global ? 0 : first; s < (global ? B : first + b); ++s) {
        const auto [lo, hi] = bag(t, s);
        for (std::int64_t i = lo; i < hi; ++i) {
          const std::int64_t row = g.indices[static_cast<std::size_t>(i)];
          if (row >= r0 && row < r1) out.indices.push_back(row - r0);
        }
        out.offsets.push_back(static_cast<std::int64_t>(out.indices.size()));
      }
    }
  };
  fill(R.pooled_group, in.pooled, true);
  fill(R.row_wise_group, in.row_wise, true);
  fill(R.data_parallel_group, in.data_parallel, false);
  return in;
}

void place_row_wise_outputs(profiler::EmbeddingBagLayout& layout, const MultiGpuLayout& L, int rank) {
  if (rank < 0 || rank >= L.world) throw std::invalid_argument("place_row_wise_outputs: no such rank");
  const RankLayout& R = L.ranks[static_cast<std::size_t>(rank)];
  if (layout.tables.size() != R.row_wise_group.size()) {
    throw std::invalid_argument("place_row_wise_outputs: the layout is not the rank's row-wise group");
  }
  for (std::size_t k = 0; k < R.row_wise_group.size(); ++k) {
    const LocalShard& ls = R.shards[R.row_wise_group[k]];
    if (layout.tables[k].rows != ls.shard.rows || layout.tables[k].dim != ls.shard.cols ||
        ls.row_wise_col + ls.shard.cols > L.row_wise_dims) {
      throw std::invalid_argument("place_row_wise_outputs: the layout is not the rank's row-wise group");
    }
    layout.tables[k].output_offset = static_cast<std::int32_t>(ls.row_wise_col);
  }
  layout.total_dim = static_cast<std::int32_t>(L.row_wise_dims);
}

void grow_index_capacity(std::array<std::int64_t, 3>& capacity, const RankInput& input) {
  const std::array<const GroupInput*, 3> groups{&input.pooled, &input.row_wise, &input.data_parallel};
  for (std::size_t g = 0; g < groups.size(); ++g) {
    capacity[g] = std::max(capacity[g], static_cast<std::int64_t>(groups[g]->indices.size()));
  }
}

std::vector<GradientBucket> ddp_buckets(const DlrmSpec& w) {
  struct Layer {
    std::int64_t offset = 0, elems = 0;
  };
  std::vector<Layer> layers;  // flat buffer order: bottom, then top
  std::int64_t off = 0;
  const auto push = [&](std::int64_t in, std::int64_t out) {
    layers.push_back({off, in * out + out});
    off += in * out + out;
  };
  for (std::size_t i = 1; i < w.bottom_mlp.size(); ++i) push(w.bottom_mlp[i - 1], w.bottom_mlp[i]);
  std::int64_t in = w.interaction_width();
  for (const auto out : w.top_mlp) {
    push(in, out);
    in = out;
  }
  std::vector<GradientBucket> out;
  GradientBucket open;
  for (std::size_t l = layers.size(); l-- > 0;) {  // autograd order: last layer first
    open.layers.push_back(static_cast<int>(l));
    open.first_elem = layers[l].offset;
    open.elems += layers[l].elems;
    const double cap = out.empty() ? w.first_bucket : w.gradient_bucket;
    if (static_cast<double>(open.bytes()) >= cap) {
      out.push_back(std::move(open));
      open = GradientBucket{};
    }
  }
  if (open.elems > 0) out.push_back(std::move(open));
  return out;
}

namespace {

/// The shards of a table cover every (row, column) of it exactly once: inside the table,
/// pairwise disjoint, areas summing to rows x dim. parse_plan checks this for plan files; a
/// plan built in code gets the same check here (ConfigError naming the table).
void check_exact_cover(const ShardingPlan& plan, std::size_t t, const EmbeddingTableSpec& table,
                       const std::string& where) {
  const auto& shards = plan.tables[t].shards;
  std::int64_t area = 0;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const Shard& a = shards[i];
    if (a.rows < 1 || a.cols < 1 || a.row_offset < 0 || a.col_offset < 0 || a.row_offset + a.rows > table.rows ||
        a.col_offset + a.cols > table.dim) {
      throw ConfigError(plan.source, where + "/sharding_spec",
                        fmt::format("table '{}': shard rows {}+{} cols {}+{} is outside its {} x {}", table.name,
                                    a.row_offset, a.rows, a.col_offset, a.cols, table.rows, table.dim));
    }
    area += a.rows * a.cols;
    for (std::size_t j = 0; j < i; ++j) {
      const Shard& b = shards[j];
      const bool rows_meet = a.row_offset < b.row_offset + b.rows && b.row_offset < a.row_offset + a.rows;
      const bool cols_meet = a.col_offset < b.col_offset + b.cols && b.col_offset < a.col_offset + a.cols;
      if (rows_meet && cols_meet) {
        throw ConfigError(plan.source, where + "/sharding_spec",
                          fmt::format("table '{}': shards {} and {} overlap", table.name, j, i));
      }
    }
  }
  if (area != table.rows * table.dim) {
    throw ConfigError(plan.source, where + "/sharding_spec",
                      fmt::format("table '{}': the shards cover {} of its {} x {} = {} elements", table.name, area,
                                  table.rows, table.dim, table.rows * table.dim));
  }
}

}  // namespace

MultiGpuLayout multi_gpu_layout(const DlrmSpec& w, const ShardingPlan& plan, int world) {
  if (world < 1) throw ConfigError(plan.source, "", fmt::format("world size {} (must be >= 1)", world));
  if (plan.tables.size() != w.tables.size()) {
    throw ConfigError(plan.source, "/tables",
                      fmt::format("the plan shards {} tables, the workload has {}", plan.tables.size(), w.tables.size()));
  }
  if (w.batch_size <= 0 || w.batch_size % world != 0) {
    throw ConfigError(w.file, "/batch_size", fmt::format("{} is not divisible by the {} GPUs", w.batch_size, world));
  }
  MultiGpuLayout L;
  L.world = world;
  L.global_batch = w.batch_size;
  L.local_batch = w.batch_size / world;
  L.ranks.resize(static_cast<std::size_t>(world));
  std::vector<std::int64_t> table_col(w.tables.size(), 0);
  for (std::size_t t = 0; t < w.tables.size(); ++t) {
    table_col[t] = L.total_dim;
    L.total_dim += w.tables[t].dim;
    const ShardingType type = plan.tables[t].type;
    const std::string where = "/tables/" + w.tables[t].name;
    if (!pooled_all_to_all(type) && !splits_rows(type) && type != ShardingType::kDataParallel) {
      throw ConfigError(plan.source, where + "/sharding_type",
                        fmt::format("table '{}' is sharded {}: the executor does not implement it", w.tables[t].name,
                                    sharding_type_name(type)));
    }
    if (type != ShardingType::kDataParallel) check_exact_cover(plan, t, w.tables[t], where);
    // Row-split tables: their column blocks (one for row_wise / table_row_wise, the grid's
    // blocks), each with its columns in the row-wise partial sums.
    std::map<std::int64_t, std::int64_t> block_rw_col;  // block's col_offset -> row-wise column
    if (splits_rows(type)) {
      std::map<std::int64_t, std::int64_t> block_cols;
      for (const auto& sh : plan.tables[t].shards) {
        if (type != ShardingType::kGrid && (sh.col_offset != 0 || sh.cols != w.tables[t].dim)) {
          throw ConfigError(plan.source, where + "/sharding_spec",
                            fmt::format("{} table '{}' has a shard of {} of its {} columns", sharding_type_name(type),
                                        w.tables[t].name, sh.cols, w.tables[t].dim));
        }
        const auto [it, added] = block_cols.emplace(sh.col_offset, sh.cols);
        if (!added && it->second != sh.cols) {
          throw ConfigError(plan.source, where + "/sharding_spec",
                            fmt::format("grid table '{}': the shards at column {} have {} and {} columns: a grid's "
                                        "shards must form column blocks",
                                        w.tables[t].name, sh.col_offset, it->second, sh.cols));
        }
      }
      for (const auto& [col, cols] : block_cols) {
        block_rw_col[col] = L.row_wise_dims;
        L.row_wise_blocks.push_back({t, table_col[t] + col, L.row_wise_dims, cols});
        L.row_wise_dims += cols;
        // One partial sum per rank and block: at most one row range of a block on a rank.
        std::vector<int> per_rank(static_cast<std::size_t>(world), 0);
        for (const auto& sh : plan.tables[t].shards) {
          if (sh.col_offset != col || sh.rank < 0 || sh.rank >= world) continue;
          if (++per_rank[static_cast<std::size_t>(sh.rank)] > 1) {
            throw ConfigError(plan.source, where + "/ranks",
                              fmt::format("{} table '{}' has two row ranges of columns {}..{} on rank {}: the executor "
                                          "needs at most one per rank",
                                          sharding_type_name(type), w.tables[t].name, col, col + cols - 1, sh.rank));
          }
        }
      }
    }
    for (const auto& sh : plan.tables[t].shards) {
      if (sh.rank < 0 || sh.rank >= world) {
        throw ConfigError(plan.source, where + "/ranks",
                          fmt::format("table '{}' has a shard on rank {}, the run has {} GPUs", w.tables[t].name,
                                      sh.rank, world));
      }
      LocalShard ls;
      ls.table = t;
      ls.type = type;
      ls.shard = sh;
      ls.pooled_col = table_col[t] + sh.col_offset;
      if (splits_rows(type)) ls.row_wise_col = block_rw_col.at(sh.col_offset);
      auto& rank = L.ranks[static_cast<std::size_t>(sh.rank)];
      rank.shards.push_back(ls);
      if (pooled_all_to_all(type)) {
        rank.pooled_send.push_back({t, ls.pooled_col, sh.cols});
        rank.pooled_group.push_back(rank.shards.size() - 1);
      } else if (splits_rows(type)) {
        rank.row_wise_group.push_back(rank.shards.size() - 1);
      } else {
        rank.data_parallel_group.push_back(rank.shards.size() - 1);
      }
    }
    if (type == ShardingType::kDataParallel) {
      // Every rank must hold the full table (parse_plan gives one full shard per rank).
      for (int r = 0; r < world; ++r) {
        bool full = false;
        for (const auto& sh : plan.tables[t].shards) {
          full = full || (sh.rank == r && sh.rows == w.tables[t].rows && sh.cols == w.tables[t].dim);
        }
        if (!full) {
          throw ConfigError(plan.source, where + "/ranks",
                            fmt::format("data_parallel table '{}' has no full copy on rank {}", w.tables[t].name, r));
        }
      }
      L.data_parallel_bytes += w.tables[t].rows * w.tables[t].dim * 4;
    }
  }
  const auto n = static_cast<std::size_t>(world);
  L.pooled_bytes.assign(n * n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t bytes = L.local_batch * L.ranks[i].pooled_send_cols() * 4;
    for (std::size_t j = 0; j < n; ++j) L.pooled_bytes[i * n + j] = bytes;
  }
  L.row_wise_bytes = L.global_batch * L.row_wise_dims * 4;
  L.buckets = ddp_buckets(w);
  return L;
}

}  // namespace perfcast::validation
