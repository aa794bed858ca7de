#include "validation/dlrm_reference.hpp"

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "profiler/embedding_bag_reference.hpp"
#include "core/json_reader.hpp"
#include "validation/counter_rng.hpp"
#include "validation/dlrm_reference_ops.hpp"

namespace perfcast::validation {
namespace {

using profiler::PoolingMode;
namespace ops = reference_ops;

using reference_ops::sz;

DenseLayer make_layer(std::int64_t in, std::int64_t out, std::uint64_t seed, std::uint64_t wstream,
                      std::uint64_t bstream) {
  DenseLayer l;
  l.in = in;
  l.out = out;
  l.weight.resize(sz(in * out));
  l.bias.resize(sz(out));
  const auto a = static_cast<float>(std::sqrt(6.0 / static_cast<double>(in + out)));
  const auto c = static_cast<float>(std::sqrt(3.0 / static_cast<double>(out)));
  for (std::size_t i = 0; i < l.weight.size(); ++i) l.weight[i] = counter_uniform(seed, wstream, i, -a, a);
  for (std::size_t i = 0; i < l.bias.size(); ++i) l.bias[i] = counter_uniform(seed, bstream, i, -c, c);
  return l;
}

/// Everything the forward produces that the backward needs.
struct Forward {
  std::vector<std::vector<float>> bottom_act;  // [0] = dense input, [l+1] = output of layer l
  std::vector<float> pooled;                   // [B, total_dim]
  std::vector<std::vector<float>> top_act;     // [0] = interaction output, [l+1] = output of layer l
  double loss = 0;
};

void check_batch(const DlrmModel& m, const DlrmBatch& batch) {
  const auto& c = m.config;
  if (batch.dense.size() != sz(c.batch_size * c.dense_features())) {
    throw std::invalid_argument(fmt::format("DLRM batch: dense has {} values, expected B*F = {}", batch.dense.size(),
                                            c.batch_size * c.dense_features()));
  }
  if (batch.labels.size() != sz(c.batch_size)) {
    throw std::invalid_argument(
        fmt::format("DLRM batch: labels has {} values, expected B = {}", batch.labels.size(), c.batch_size));
  }
  profiler::validate_embedding_bag_batch(m.layout, batch.indices, batch.offsets);
}

Forward forward(const DlrmModel& m, const DlrmBatch& batch) {
  check_batch(m, batch);
  const auto& c = m.config;
  const std::int64_t B = c.batch_size;
  Forward f;
  f.bottom_act = ops::mlp_forward(m.bottom, batch.dense, B, /*relu_last=*/true);
  f.pooled = profiler::embedding_bag_forward_reference(m.layout, m.embeddings, batch.indices, batch.offsets,
                                                       PoolingMode::kSum);
  f.top_act = ops::mlp_forward(m.top, ops::interaction_forward(c, B, f.bottom_act.back(), f.pooled), B,
                               /*relu_last=*/false);
  f.loss = ops::bce_mean(f.top_act.back(), batch.labels);
  return f;
}

}  // namespace

std::int64_t DlrmConfig::interaction_width() const {
  const std::int64_t d = bottom_mlp.back();
  const auto t = static_cast<std::int64_t>(tables.size());
  if (interaction == Interaction::kDot) return d + (t + 1) * t / 2;
  std::int64_t w = d;
  for (const auto& tb : tables) w += tb.dim;
  return w;
}

void DlrmConfig::validate() const {
  if (batch_size < 1) throw std::invalid_argument("DLRM config: batch_size must be >= 1");
  if (bottom_mlp.size() < 2) throw std::invalid_argument("DLRM config: bottom_mlp needs dense features and >= 1 layer");
  if (top_mlp.empty() || top_mlp.back() != 1) throw std::invalid_argument("DLRM config: top_mlp must end in width 1");
  for (auto w : bottom_mlp) {
    if (w < 1) throw std::invalid_argument("DLRM config: bottom_mlp widths must be >= 1");
  }
  for (auto w : top_mlp) {
    if (w < 1) throw std::invalid_argument("DLRM config: top_mlp widths must be >= 1");
  }
  if (tables.empty()) throw std::invalid_argument("DLRM config: no embedding table");
  for (std::size_t t = 0; t < tables.size(); ++t) {
    if (interaction == Interaction::kDot && tables[t].dim != bottom_mlp.back()) {
      throw std::invalid_argument(fmt::format(
          "DLRM config: dot interaction needs every table dim equal to the bottom MLP output {}, table {} has {}",
          bottom_mlp.back(), t, tables[t].dim));
    }
  }
  if (embedding_optimizer == EmbeddingOptimizer::kAdam || embedding_optimizer == EmbeddingOptimizer::kAdagrad) {
    throw std::invalid_argument(fmt::format("DLRM config: the executor trains embeddings with sgd or rowwise_adagrad; "
                                            "{} is predicted, not run",
                                            optimizer_name(embedding_optimizer)));
  }
}

DlrmConfig dlrm_config_from_spec(const DlrmSpec& spec, std::int64_t batch_size) {
  DlrmConfig c;
  c.batch_size = batch_size;
  c.bottom_mlp = spec.bottom_mlp;
  c.top_mlp = spec.top_mlp;
  c.interaction = spec.interaction;
  for (const auto& t : spec.tables) {
    if (t.sequence) {
      throw ConfigError(spec.file, "/embedding/tables",
                        fmt::format("table {}: sequence (EmbeddingCollection) tables are predicted, not run by the executor", t.name));
    }
    if (t.dim < 1 || t.dim > profiler::kMaxEmbeddingDim) {
      throw ConfigError(spec.file, "/embedding/tables", fmt::format("table {}: dim {} outside 1..{}", t.name, t.dim,
                                                                    profiler::kMaxEmbeddingDim));
    }
    c.tables.push_back(profiler::TableShape{t.rows, static_cast<std::int32_t>(t.dim)});
  }
  switch (spec.embedding_dtype) {
    case DType::kFp32: c.embedding_precision = profiler::WeightPrecision::kFp32; break;
    case DType::kFp16: c.embedding_precision = profiler::WeightPrecision::kFp16; break;
    case DType::kBf16: c.embedding_precision = profiler::WeightPrecision::kBf16; break;
    default: throw ConfigError(spec.file, "/embedding_dtype", "the executor stores embeddings as fp32, fp16 or bf16");
  }
  c.embedding_optimizer = spec.embedding_optimizer;
  c.dense_optimizer = spec.dense_optimizer;
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw ConfigError(spec.file, "", std::string("the executor cannot train this model: ") + e.what());
  }
  return c;
}

float embedding_init_bound(std::int64_t rows) { return static_cast<float>(std::sqrt(1.0 / static_cast<double>(rows))); }

DlrmModel init_dlrm_model(const DlrmConfig& config, std::uint64_t seed, bool draw_embeddings) {
  config.validate();
  DlrmModel m;
  m.config = config;
  for (std::size_t l = 1; l < config.bottom_mlp.size(); ++l) {
    m.bottom.push_back(make_layer(config.bottom_mlp[l - 1], config.bottom_mlp[l], seed, bottom_weight_stream(l - 1),
                                  bottom_bias_stream(l - 1)));
  }
  std::int64_t in = config.interaction_width();
  for (std::size_t l = 0; l < config.top_mlp.size(); ++l) {
    m.top.push_back(make_layer(in, config.top_mlp[l], seed, top_weight_stream(l), top_bias_stream(l)));
    in = config.top_mlp[l];
  }
  m.layout = profiler::make_embedding_bag_layout(config.tables, config.batch_size);
  m.embeddings = profiler::HostEmbeddingWeights(config.embedding_precision,
                                                draw_embeddings ? m.layout.total_weight_elements : 0);
  for (std::size_t t = 0; draw_embeddings && t < m.layout.tables.size(); ++t) {
    const auto& tm = m.layout.tables[t];
    const float a = embedding_init_bound(tm.rows);
    const std::int64_t n = tm.rows * tm.dim;
    for (std::int64_t i = 0; i < n; ++i) {
      m.embeddings.store(tm.weight_offset + i, counter_uniform(seed, embedding_stream(t), static_cast<std::uint64_t>(i), -a, a));
    }
  }
  m.rowwise_state.assign(draw_embeddings ? sz(m.layout.total_rows) : 0, 0.0f);
  if (config.dense_optimizer == DenseOptimizer::kAdam) {
    for (const auto& l : m.bottom) m.adam_m.push_back(ops::zeros_like(l));
    for (const auto& l : m.top) m.adam_m.push_back(ops::zeros_like(l));
    m.adam_v = m.adam_m;
  }
  return m;
}

double dlrm_loss(const DlrmModel& model, const DlrmBatch& batch) { return forward(model, batch).loss; }

DlrmGradients dlrm_gradients(const DlrmModel& m, const DlrmBatch& batch) {
  const auto& c = m.config;
  const std::int64_t B = c.batch_size, td = m.layout.total_dim;
  const auto T = static_cast<std::int64_t>(c.tables.size());
  const Forward f = forward(m, batch);
  DlrmGradients g;
  g.loss = f.loss;
  g.logits = f.top_act.back();

  // BCE with logits, mean over the batch: dLoss/dz = (sigmoid(z) - y) / B.
  std::vector<float> grad = ops::bce_logit_gradient(g.logits, batch.labels, static_cast<double>(B));
  grad = ops::mlp_backward(m.top, f.top_act, std::move(grad), B, /*relu_last=*/false, g.top, /*need_input_grad=*/true);
  // grad is dLoss/d(interaction output) [B, W].
  std::vector<float> dbottom;
  ops::interaction_backward(c, B, f.bottom_act.back(), f.pooled, grad, dbottom, g.pooled);
  (void)ops::mlp_backward(m.bottom, f.bottom_act, std::move(dbottom), B, /*relu_last=*/true, g.bottom,
                          /*need_input_grad=*/false);
  // Dense embedding gradient (sum pooling: every occurrence of a row adds its bag's gradient).
  std::vector<double> ge(sz(m.layout.total_weight_elements), 0.0);
  for (std::int64_t t = 0; t < T; ++t) {
    const auto& tm = m.layout.tables[sz(t)];
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t bag = t * B + b;
      for (std::int64_t p = batch.offsets[sz(bag)]; p < batch.offsets[sz(bag + 1)]; ++p) {
        const std::int64_t row = batch.indices[sz(p)];
        for (std::int64_t q = 0; q < tm.dim; ++q) {
          ge[sz(tm.weight_offset + row * tm.dim + q)] += g.pooled[sz(b * td + tm.output_offset + q)];
        }
      }
    }
  }
  g.embedding.assign(ge.begin(), ge.end());
  return g;
}

profiler::OptimizerConfig embedding_optimizer_config(const DlrmConfig& c) {
  profiler::OptimizerConfig opt;
  opt.kind = c.embedding_optimizer == EmbeddingOptimizer::kRowwiseAdagrad ? profiler::OptimizerKind::kRowwiseAdagrad
                                                                           : profiler::OptimizerKind::kSgd;
  opt.learning_rate = c.hyper.embedding_lr;
  opt.eps = c.hyper.adagrad_eps;
  return opt;
}

double dlrm_train_step(DlrmModel& m, const DlrmBatch& batch) {
  const DlrmGradients g = dlrm_gradients(m, batch);
  ops::dense_optimizer_step(m.config, m.bottom, m.top, g.bottom, g.top, m.adam_m, m.adam_v, m.adam_step);
  profiler::embedding_bag_backward_update_reference(m.layout, m.embeddings, m.rowwise_state, batch.indices,
                                                    batch.offsets, PoolingMode::kSum, g.pooled,
                                                    embedding_optimizer_config(m.config));
  return g.loss;
}

}  // namespace perfcast::validation
