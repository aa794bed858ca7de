#include "model/graph/memory_estimate.hpp"

#include <fmt/format.h>

namespace perfcast {

std::vector<RankMemory> estimate_memory(const DlrmSpec& w, const ShardingPlan& plan, const SystemSpec& s,
                                        const MemoryOptions& options) {
  const int n = s.world_size();
  const double global = static_cast<double>(w.batch_size);
  const double b = global / n;
  const double elem = dtype_bytes(w.embedding_dtype);
  const double act = dtype_bytes(w.mlp_dtype);
  std::vector<RankMemory> out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto& m = out[static_cast<std::size_t>(r)];
    m.rank = r;
    m.capacity = s.gpu.memory;
    m.reserved = s.gpu.memory * options.reserved_share;
  }
  double pooled_dims = 0;
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    const auto& spec = w.tables[t];
    const bool dp = plan.tables[t].type == ShardingType::kDataParallel;
    // Row-split shards (row_wise, table_row_wise, grid) see their share of the lookups.
    const bool rw = splits_rows(plan.tables[t].type);
    pooled_dims += static_cast<double>(spec.dim);
    for (const auto& sh : plan.tables[t].shards) {
      auto& m = out[static_cast<std::size_t>(sh.rank)];
      const double rows = static_cast<double>(sh.rows), cols = static_cast<double>(sh.cols);
      double state = 0;
      switch (w.embedding_optimizer) {
        case EmbeddingOptimizer::kSgd: state = 0; break;
        case EmbeddingOptimizer::kRowwiseAdagrad: state = rows * 4; break;
        case EmbeddingOptimizer::kAdam: state = 2 * rows * cols * 4; break;
      }
      m.embedding += rows * cols * elem + state;
      // Inputs (indices + offsets) and pooled fp32 outputs of this shard.
      const double batch = dp ? b : global;
      const double share = rw ? rows / static_cast<double>(spec.rows) : 1.0;
      m.io += options.pipeline_depth * batch * (spec.pooling * share + 1) * w.index_bytes + batch * cols * 4;
      if (dp) m.embedding += rows * cols * 4;  // DP tables also hold a dense gradient
    }
  }
  const double params = w.dense_parameters();
  const double dense_states = w.dense_optimizer == DenseOptimizer::kAdam ? 2 : 0;
  const double dense = params * 4 * (3 + dense_states);  // weights + grads + DDP buckets + state
  double saved = 0;
  for (auto width : w.bottom_mlp) saved += b * static_cast<double>(width) * act;
  for (auto width : w.top_mlp) saved += b * static_cast<double>(width) * act;
  saved += b * static_cast<double>(w.interaction_width()) * act;
  const double received = b * pooled_dims * 4;  // the local batch's pooled rows from every table
  for (auto& m : out) {
    m.dense = dense;
    m.activations = 2 * saved;  // activations and their gradients
    m.io += 2 * received;       // pooled rows and their gradients
  }
  return out;
}

std::string memory_verdict(const std::vector<RankMemory>& m) {
  const RankMemory* worst = nullptr;
  int over = 0;
  for (const auto& r : m) {
    if (r.fits()) continue;
    ++over;
    if (!worst || r.total() - r.capacity > worst->total() - worst->capacity) worst = &r;
  }
  if (!worst) return "";
  return fmt::format("rank {} needs {} of {} (embedding {}, dense {}, io {}, activations {}, reserved {}){}", worst->rank,
                     format_bytes(worst->total()), format_bytes(worst->capacity), format_bytes(worst->embedding),
                     format_bytes(worst->dense), format_bytes(worst->io), format_bytes(worst->activations),
                     format_bytes(worst->reserved), over > 1 ? fmt::format("; {} ranks do not fit", over) : "");
}

}  // namespace perfcast
