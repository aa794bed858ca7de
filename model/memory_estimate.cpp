#include "model/memory_estimate.hpp"

namespace perfcast {

std::vector<RankMemory> estimate_memory(const DlrmSpec& w, const ShardingPlan& plan, const SystemSpec& s) {
  const int n = s.world_size();
  const double b = static_cast<double>(w.batch_size) / n;
  const double elem = dtype_bytes(w.embedding_dtype);
  const double act = dtype_bytes(w.mlp_dtype);
  std::vector<RankMemory> out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    out[static_cast<std::size_t>(r)].rank = r;
    out[static_cast<std::size_t>(r)].capacity = s.gpu.memory;
    out[static_cast<std::size_t>(r)].reserved = kDeviceReserve;
  }
  double pooled_dims = 0;
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    pooled_dims += static_cast<double>(w.tables[t].dim);
    for (const auto& sh : plan.tables[t].shards) {
      const double rows = static_cast<double>(sh.rows), cols = static_cast<double>(sh.cols);
      double state = 0;
      switch (w.embedding_optimizer) {
        case EmbeddingOptimizer::kSgd: state = 0; break;
        case EmbeddingOptimizer::kRowwiseAdagrad: state = rows * 4; break;
        case EmbeddingOptimizer::kAdam: state = 2 * rows * cols * 4; break;
      }
      out[static_cast<std::size_t>(sh.rank)].embedding += rows * cols * elem + state;
    }
  }
  const double params = w.dense_parameters();
  const double dense_states = w.dense_optimizer == DenseOptimizer::kAdam ? 2 : 0;
  // weights + gradients + DDP bucket copies + optimizer state, fp32.
  const double dense = params * 4 * (3 + dense_states);
  double saved = 0;
  for (auto width : w.bottom_mlp) saved += b * static_cast<double>(width) * act;
  for (auto width : w.top_mlp) saved += b * static_cast<double>(width) * act;
  saved += b * static_cast<double>(w.interaction_width()) * act;
  // Pooled embeddings: the rank's lookups for the global batch plus the received local
  // batch, and their gradients (x2).
  saved += 2 * (static_cast<double>(w.batch_size) + b) * pooled_dims * 4 / n;
  for (auto& m : out) {
    m.dense = dense;
    m.activations = saved * 2;  // activations and their gradients
  }
  return out;
}

}  // namespace perfcast
