#include "model/graph/memory_estimate.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace perfcast {

Bytes embedding_weight_and_state_bytes(const DlrmSpec& w, double rows, double cols) {
  double state = 0;
  switch (w.embedding_optimizer) {
    case EmbeddingOptimizer::kSgd: state = 0; break;
    case EmbeddingOptimizer::kRowwiseAdagrad: state = rows * 4; break;
    case EmbeddingOptimizer::kAdam: state = 2 * rows * cols * 4; break;
    case EmbeddingOptimizer::kAdagrad: state = rows * cols * 4; break;
    case EmbeddingOptimizer::kNone: state = 0; break;
  }
  return rows * cols * dtype_bytes(w.embedding_dtype) + state;
}

ShardFootprint shard_footprint(const DlrmSpec& w, const TableSharding& ts, const Shard& sh) {
  const double rows = static_cast<double>(sh.rows), cols = static_cast<double>(sh.cols);
  const double weights = rows * cols * dtype_bytes(w.embedding_dtype);
  const double stored = embedding_weight_and_state_bytes(w, rows, cols);
  ShardFootprint f;
  if (ts.type == ShardingType::kDataParallel) {
    f.device = stored + rows * cols * 4;  // DP tables also hold a dense gradient
  } else if (ts.storage == EmbeddingStorage::kHbm) {
    f.device = stored;
  } else {
    f.host = stored;
    if (ts.storage == EmbeddingStorage::kHostUvmCaching) {
      const double lf = ts.cache_load_factor;
      f.device = lf * weights + rows * (4 + 16 * lf);
    }
  }
  return f;
}

std::vector<RankMemory> estimate_memory(const DlrmSpec& w, const ShardingPlan& plan, const SystemSpec& s,
                                        const MemoryOptions& options) {
  const int n = s.world_size();
  const double global = static_cast<double>(w.batch_size);
  const double b = global / n;
  const double act = dtype_bytes(w.mlp_dtype);
  // TorchRec's sparse_dist pipeline holds two batches' inputs (its TRAIN_SPARSE_DIST
  // storage estimate, docs/sharding-planners.md section 2.5).
  const double depth = std::max(options.pipeline_depth, w.pipeline == TrainPipeline::kSparseDist ? 2 : 1);
  std::vector<RankMemory> out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto& m = out[static_cast<std::size_t>(r)];
    m.rank = r;
    m.capacity = s.gpu.memory;
    m.reserved = s.gpu.memory * options.reserved_share;
    m.host_capacity = s.host_memory.per_rank(s.gpus_per_node);
  }
  double pooled_bytes = 0;  // per sample, in each table's output dtype
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    const auto& spec = w.tables[t];
    const bool dp = plan.tables[t].type == ShardingType::kDataParallel;
    // Row-split shards (row_wise, table_row_wise, grid) see their share of the lookups.
    const bool rw = splits_rows(plan.tables[t].type);
    pooled_bytes += static_cast<double>(spec.dim) * (spec.sequence ? spec.pooling : 1.0) * pooled_output_bytes(w, plan.tables[t]);  // sequence: every row
    for (const auto& sh : plan.tables[t].shards) {
      auto& m = out[static_cast<std::size_t>(sh.rank)];
      const double cols = static_cast<double>(sh.cols), rows = static_cast<double>(sh.rows);
      const ShardFootprint f = shard_footprint(w, plan.tables[t], sh);
      m.embedding += f.device;
      m.host += f.host;
      // Inputs (indices + offsets) and outputs (in its output dtype) of this shard: one row per bag, or per
      // index for a sequence table.
      const double batch = dp ? b : global;
      const bool hybrid = plan.tables[t].type == ShardingType::kHybrid;
      const double infrequent = hybrid ? 1 - hybrid_frequent_share(spec, plan.tables[t], w.batch_size) : 1.0;
      const double share = rw ? rows / static_cast<double>(spec.rows)
                           : hybrid ? infrequent * rows / static_cast<double>(spec.rows - plan.tables[t].frequent_rows)
                                    : 1.0;
      const double out_rows = spec.sequence ? batch * spec.pooling * share : batch;
      m.io += depth * batch * (spec.pooling * share + 1) * w.index_bytes + out_rows * cols * pooled_output_bytes(w, plan.tables[t]);
    }
  }
  // Hybrid tables' frequent rows: on every rank, with their optimizer state, a dense gradient
  // (as a data-parallel table) and the local batch's lookups of them.
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    const auto& ts = plan.tables[t];
    if (ts.type != ShardingType::kHybrid || ts.frequent_rows <= 0) continue;
    const auto& spec = w.tables[t];
    const double rows = static_cast<double>(ts.frequent_rows), cols = static_cast<double>(spec.dim);
    const double lookups = b * spec.pooling * hybrid_frequent_share(spec, ts, w.batch_size);
    for (auto& m : out) {
      m.embedding += embedding_weight_and_state_bytes(w, rows, cols) + rows * cols * 4;
      m.io += depth * (lookups + b) * w.index_bytes + b * cols * pooled_output_bytes(w, ts);
    }
  }
  const double params = w.dense_parameters();
  const double bottom_params = w.bottom_parameters();
  const double dense_states = w.dense_optimizer == DenseOptimizer::kAdam ? 2 : w.dense_optimizer == DenseOptimizer::kAdagrad ? 1 : 0;
  const double per_param = 4 * (3 + dense_states);  // weights + grads + DDP buckets + state, fp32
  double saved = 0;
  double bottom_saved = 0;  // the bottom MLP's activations: its rank's samples (the global batch on the hybrid layout's rank)
  for (auto width : w.bottom_mlp) bottom_saved += b * static_cast<double>(width) * act;
  for (auto width : w.top_mlp) saved += b * static_cast<double>(width) * act;
  saved += b * static_cast<double>(w.interaction_width()) * act;
  // DCNv2: each cross layer keeps its input (width), V x (rank) and W V x + b (width).
  if (w.interaction == Interaction::kDcnV2)
    saved += w.dcn_layers * b * (2.0 * static_cast<double>(w.interaction_width()) + static_cast<double>(w.dcn_rank)) * act;
  const double received = b * pooled_bytes;  // the local batch's pooled (sequence: all) rows from every table
  const bool hybrid = w.bottom_mlp_rank >= 0;
  for (auto& m : out) {
    const bool bottom_here = !hybrid || m.rank == w.bottom_mlp_rank;
    // Hybrid layout: the bottom MLP lives on its rank only (one copy, no DDP bucket), for the global batch.
    m.dense = (params - bottom_params) * per_param + (bottom_here ? bottom_params * (hybrid ? per_param - 4 : per_param) : 0.0);
    m.activations = 2 * (saved + (bottom_here ? bottom_saved * (hybrid ? n : 1) : 0.0));  // activations and their gradients
    m.io += (w.pipeline == TrainPipeline::kSemiSync ? 3 : 2) * received;  // pooled rows (semi_sync: two batches') and their gradients
  }
  return out;
}

std::string memory_verdict(const std::vector<RankMemory>& m) {
  const RankMemory* worst = nullptr;
  const RankMemory* worst_host = nullptr;
  int over = 0;
  for (const auto& r : m) {
    if (r.fits()) continue;
    ++over;
    if (!r.fits_device() && (!worst || r.total() - r.capacity > worst->total() - worst->capacity)) worst = &r;
    if (!r.fits_host() && (!worst_host || r.host - r.host_capacity > worst_host->host - worst_host->host_capacity)) worst_host = &r;
  }
  if (over == 0) return "";
  std::string out;
  if (worst) {
    out = fmt::format("rank {} needs {} of {} (embedding {}, dense {}, io {}, activations {}, reserved {})", worst->rank,
                      format_bytes(worst->total()), format_bytes(worst->capacity), format_bytes(worst->embedding),
                      format_bytes(worst->dense), format_bytes(worst->io), format_bytes(worst->activations),
                      format_bytes(worst->reserved));
  }
  if (worst_host) {
    if (!out.empty()) out += "; ";
    out += worst_host->host_capacity > 0
               ? fmt::format("rank {} needs {} of host memory for its fused_uvm / fused_uvm_caching tables, {} available "
                             "(its share of the node's host_memory)",
                             worst_host->rank, format_bytes(worst_host->host), format_bytes(worst_host->host_capacity))
               : fmt::format("rank {} keeps {} of tables in host memory, but the system declares no host_memory (add "
                             "host_memory.capacity to the system file)",
                             worst_host->rank, format_bytes(worst_host->host));
  }
  if (over > 1) out += fmt::format("; {} ranks do not fit", over);
  return out;
}

}  // namespace perfcast
