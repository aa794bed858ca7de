#include "profiler/embedding_bag_reference.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

namespace perfcast::profiler {
namespace {

void check_weights(const EmbeddingBagLayout& layout, const HostEmbeddingWeights& weights) {
  if (weights.size() != layout.total_weight_elements) {
    throw std::invalid_argument("embedding-bag reference: weights hold " + std::to_string(weights.size()) +
                                " elements, layout needs " + std::to_string(layout.total_weight_elements));
  }
}

void check_dense(const char* what, std::size_t got, std::int64_t want) {
  if (static_cast<std::int64_t>(got) != want) {
    throw std::invalid_argument(std::string("embedding-bag reference: ") + what + " holds " + std::to_string(got) +
                                " elements, expected " + std::to_string(want));
  }
}

/// 1/len for mean pooling (0 for an empty bag), 1 for sum pooling.
float bag_scale(PoolingMode pooling, std::int64_t len) {
  if (pooling == PoolingMode::kSum) return 1.0f;
  return len > 0 ? 1.0f / static_cast<float>(len) : 0.0f;
}

}  // namespace

void embedding_bag_forward_reference(const EmbeddingBagLayout& layout, const HostEmbeddingWeights& weights,
                                     std::span<const std::int64_t> indices, std::span<const std::int64_t> offsets,
                                     PoolingMode pooling, std::span<float> output) {
  check_weights(layout, weights);
  validate_embedding_bag_batch(layout, indices, offsets);
  check_dense("output", output.size(), layout.batch_size * layout.total_dim);

  const std::int64_t B = layout.batch_size;
  std::vector<float> acc(static_cast<std::size_t>(layout.max_dim));
  for (std::int64_t t = 0; t < layout.num_tables(); ++t) {
    const EmbeddingTableMeta& table = layout.tables[static_cast<std::size_t>(t)];
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t begin = offsets[static_cast<std::size_t>(t * B + b)];
      const std::int64_t end = offsets[static_cast<std::size_t>(t * B + b + 1)];
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t p = begin; p < end; ++p) {
        const std::int64_t row_start = table.weight_offset + indices[static_cast<std::size_t>(p)] * table.dim;
        for (std::int32_t c = 0; c < table.dim; ++c) {
          acc[static_cast<std::size_t>(c)] += weights.load(row_start + c);
        }
      }
      const float scale = bag_scale(pooling, end - begin);
      float* out = output.data() + b * layout.total_dim + table.output_offset;
      for (std::int32_t c = 0; c < table.dim; ++c) {
        out[c] = acc[static_cast<std::size_t>(c)] * scale;  // exact for sum (scale 1)
      }
    }
  }
}

std::vector<float> embedding_bag_forward_reference(const EmbeddingBagLayout& layout,
                                                   const HostEmbeddingWeights& weights,
                                                   std::span<const std::int64_t> indices,
                                                   std::span<const std::int64_t> offsets, PoolingMode pooling) {
  std::vector<float> output(static_cast<std::size_t>(layout.batch_size * layout.total_dim));
  embedding_bag_forward_reference(layout, weights, indices, offsets, pooling, output);
  return output;
}

void embedding_bag_backward_update_reference(const EmbeddingBagLayout& layout, HostEmbeddingWeights& weights,
                                             std::span<float> rowwise_state, std::span<const std::int64_t> indices,
                                             std::span<const std::int64_t> offsets, PoolingMode pooling,
                                             std::span<const float> grad_output, const OptimizerConfig& optimizer) {
  check_weights(layout, weights);
  validate_embedding_bag_batch(layout, indices, offsets);
  check_dense("grad_output", grad_output.size(), layout.batch_size * layout.total_dim);
  const bool adagrad = optimizer.kind == OptimizerKind::kRowwiseAdagrad;
  if (adagrad) check_dense("rowwise_state", rowwise_state.size(), layout.total_rows);

  const std::int64_t B = layout.batch_size;
  for (std::int64_t t = 0; t < layout.num_tables(); ++t) {
    const EmbeddingTableMeta& table = layout.tables[static_cast<std::size_t>(t)];
    const auto dim = static_cast<std::size_t>(table.dim);
    // Gradient of every touched row, summed over all its occurrences in position order.
    std::map<std::int64_t, std::vector<float>> row_grads;
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t begin = offsets[static_cast<std::size_t>(t * B + b)];
      const std::int64_t end = offsets[static_cast<std::size_t>(t * B + b + 1)];
      const float scale = bag_scale(pooling, end - begin);
      const float* go = grad_output.data() + b * layout.total_dim + table.output_offset;
      for (std::int64_t p = begin; p < end; ++p) {
        std::vector<float>& g = row_grads[indices[static_cast<std::size_t>(p)]];
        g.resize(dim, 0.0f);
        for (std::size_t c = 0; c < dim; ++c) {
          g[c] += go[c] * scale;
        }
      }
    }
    for (const auto& [row, g] : row_grads) {
      const std::int64_t row_start = table.weight_offset + row * table.dim;
      float multiplier = optimizer.learning_rate;
      if (adagrad) {
        float sum_squares = 0.0f;
        for (const float v : g) sum_squares += v * v;
        float& state = rowwise_state[static_cast<std::size_t>(table.row_offset + row)];
        state += sum_squares / static_cast<float>(table.dim);
        multiplier = optimizer.learning_rate / (std::sqrt(state) + optimizer.eps);
      }
      for (std::size_t c = 0; c < dim; ++c) {
        const std::int64_t e = row_start + static_cast<std::int64_t>(c);
        weights.store(e, weights.load(e) - multiplier * g[c]);
      }
    }
  }
}

}  // namespace perfcast::profiler
