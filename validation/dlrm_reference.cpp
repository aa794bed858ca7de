#include "validation/dlrm_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "profiler/embedding_bag_reference.hpp"
#include "topology/json_reader.hpp"
#include "validation/counter_rng.hpp"

namespace perfcast::validation {
namespace {

using profiler::PoolingMode;

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

/// y[B, out] = x[B, in] W^T + b, optionally followed by ReLU.
std::vector<float> linear_forward(const DenseLayer& l, const std::vector<float>& x, std::int64_t batch, bool relu) {
  std::vector<float> y(sz(batch * l.out));
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* xb = x.data() + sz(b * l.in);
    for (std::int64_t o = 0; o < l.out; ++o) {
      const float* w = l.weight.data() + sz(o * l.in);
      double acc = l.bias[sz(o)];
      for (std::int64_t i = 0; i < l.in; ++i) acc += static_cast<double>(xb[i]) * w[i];
      float v = static_cast<float>(acc);
      if (relu && !(v > 0.0f)) v = 0.0f;
      y[sz(b * l.out + o)] = v;
    }
  }
  return y;
}

/// Backward of one layer. `g` is dLoss/dy [B, out]; when `relu`, it is first masked by y > 0.
/// Accumulates dW, db into `grad` and returns dLoss/dx [B, in] (skipped when !need_dx).
std::vector<float> linear_backward(const DenseLayer& l, const std::vector<float>& x, const std::vector<float>& y,
                                   std::vector<float> g, std::int64_t batch, bool relu, DenseLayer& grad,
                                   bool need_dx) {
  if (relu) {
    for (std::size_t k = 0; k < g.size(); ++k) {
      if (!(y[k] > 0.0f)) g[k] = 0.0f;
    }
  }
  grad.in = l.in;
  grad.out = l.out;
  grad.weight.assign(l.weight.size(), 0.0f);
  grad.bias.assign(l.bias.size(), 0.0f);
  for (std::int64_t o = 0; o < l.out; ++o) {
    double db = 0;
    for (std::int64_t b = 0; b < batch; ++b) db += g[sz(b * l.out + o)];
    grad.bias[sz(o)] = static_cast<float>(db);
    for (std::int64_t i = 0; i < l.in; ++i) {
      double dw = 0;
      for (std::int64_t b = 0; b < batch; ++b) dw += static_cast<double>(g[sz(b * l.out + o)]) * x[sz(b * l.in + i)];
      grad.weight[sz(o * l.in + i)] = static_cast<float>(dw);
    }
  }
  std::vector<float> dx;
  if (!need_dx) return dx;
  dx.resize(sz(batch * l.in));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t i = 0; i < l.in; ++i) {
      double acc = 0;
      for (std::int64_t o = 0; o < l.out; ++o) {
        acc += static_cast<double>(g[sz(b * l.out + o)]) * l.weight[sz(o * l.in + i)];
      }
      dx[sz(b * l.in + i)] = static_cast<float>(acc);
    }
  }
  return dx;
}

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

DenseLayer zeros_like(const DenseLayer& l) {
  DenseLayer z;
  z.in = l.in;
  z.out = l.out;
  z.weight.assign(l.weight.size(), 0.0f);
  z.bias.assign(l.bias.size(), 0.0f);
  return z;
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

/// Interaction output [B, W] from the bottom output [B, d] and pooled embeddings [B, total_dim].
std::vector<float> interact(const DlrmModel& m, const std::vector<float>& bottom, const std::vector<float>& pooled) {
  const auto& c = m.config;
  const std::int64_t B = c.batch_size, d = c.bottom_mlp.back(), W = c.interaction_width();
  const std::int64_t td = m.layout.total_dim;
  const auto T = static_cast<std::int64_t>(c.tables.size());
  std::vector<float> out(sz(B * W));
  for (std::int64_t b = 0; b < B; ++b) {
    float* o = out.data() + sz(b * W);
    const float* x = bottom.data() + sz(b * d);
    const float* e = pooled.data() + sz(b * td);
    for (std::int64_t k = 0; k < d; ++k) o[k] = x[k];
    if (c.interaction == Interaction::kCat) {
      for (std::int64_t k = 0; k < td; ++k) o[d + k] = e[k];
      continue;
    }
    // Feature f: 0 = bottom output, t+1 = table t (all of width d, checked by validate()).
    const auto feature = [&](std::int64_t f) { return f == 0 ? x : e + (f - 1) * d; };
    std::int64_t k = d;
    for (std::int64_t i = 1; i <= T; ++i) {
      for (std::int64_t j = 0; j < i; ++j) {
        const float* fi = feature(i);
        const float* fj = feature(j);
        double acc = 0;
        for (std::int64_t q = 0; q < d; ++q) acc += static_cast<double>(fi[q]) * fj[q];
        o[k++] = static_cast<float>(acc);
      }
    }
  }
  return out;
}

Forward forward(const DlrmModel& m, const DlrmBatch& batch) {
  check_batch(m, batch);
  const auto& c = m.config;
  const std::int64_t B = c.batch_size;
  Forward f;
  f.bottom_act.push_back(batch.dense);
  for (const auto& l : m.bottom) f.bottom_act.push_back(linear_forward(l, f.bottom_act.back(), B, /*relu=*/true));
  f.pooled = profiler::embedding_bag_forward_reference(m.layout, m.embeddings, batch.indices, batch.offsets,
                                                       PoolingMode::kSum);
  f.top_act.push_back(interact(m, f.bottom_act.back(), f.pooled));
  for (std::size_t l = 0; l < m.top.size(); ++l) {
    f.top_act.push_back(linear_forward(m.top[l], f.top_act.back(), B, /*relu=*/l + 1 < m.top.size()));
  }
  double loss = 0;
  const auto& z = f.top_act.back();
  for (std::int64_t b = 0; b < B; ++b) {
    const double zb = z[sz(b)], y = batch.labels[sz(b)];
    loss += std::max(zb, 0.0) - zb * y + std::log1p(std::exp(-std::fabs(zb)));
  }
  f.loss = loss / static_cast<double>(B);
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
  if (embedding_optimizer == EmbeddingOptimizer::kAdam) {
    throw std::invalid_argument("DLRM config: embedding optimizer adam is not implemented (sgd, rowwise_adagrad)");
  }
}

DlrmConfig dlrm_config_from_spec(const DlrmSpec& spec, std::int64_t batch_size) {
  DlrmConfig c;
  c.batch_size = batch_size;
  c.bottom_mlp = spec.bottom_mlp;
  c.top_mlp = spec.top_mlp;
  c.interaction = spec.interaction;
  for (const auto& t : spec.tables) {
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
    for (const auto& l : m.bottom) m.adam_m.push_back(zeros_like(l));
    for (const auto& l : m.top) m.adam_m.push_back(zeros_like(l));
    m.adam_v = m.adam_m;
  }
  return m;
}

double dlrm_loss(const DlrmModel& model, const DlrmBatch& batch) { return forward(model, batch).loss; }

DlrmGradients dlrm_gradients(const DlrmModel& m, const DlrmBatch& batch) {
  const auto& c = m.config;
  const std::int64_t B = c.batch_size, d = c.bottom_mlp.back(), W = c.interaction_width();
  const std::int64_t td = m.layout.total_dim;
  const auto T = static_cast<std::int64_t>(c.tables.size());
  const Forward f = forward(m, batch);
  DlrmGradients g;
  g.loss = f.loss;
  g.logits = f.top_act.back();

  // BCE with logits, mean over the batch: dLoss/dz = (sigmoid(z) - y) / B.
  std::vector<float> grad(sz(B));
  for (std::int64_t b = 0; b < B; ++b) {
    const double z = g.logits[sz(b)];
    const double s = z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z));
    grad[sz(b)] = static_cast<float>((s - batch.labels[sz(b)]) / static_cast<double>(B));
  }
  g.top.resize(m.top.size());
  for (std::size_t l = m.top.size(); l-- > 0;) {
    grad = linear_backward(m.top[l], f.top_act[l], f.top_act[l + 1], std::move(grad), B, l + 1 < m.top.size(),
                           g.top[l], /*need_dx=*/true);
  }
  // grad is dLoss/d(interaction output) [B, W].
  std::vector<float> dbottom(sz(B * d));
  g.pooled.assign(sz(B * td), 0.0f);
  const auto& x_all = f.bottom_act.back();
  for (std::int64_t b = 0; b < B; ++b) {
    const float* go = grad.data() + sz(b * W);
    for (std::int64_t k = 0; k < d; ++k) dbottom[sz(b * d + k)] = go[k];
    float* ge = g.pooled.data() + sz(b * td);
    if (c.interaction == Interaction::kCat) {
      for (std::int64_t k = 0; k < td; ++k) ge[k] = go[d + k];
      continue;
    }
    const float* x = x_all.data() + sz(b * d);
    const float* e = f.pooled.data() + sz(b * td);
    const auto feature = [&](std::int64_t i) { return i == 0 ? x : e + (i - 1) * d; };
    // d feature_i = sum over pairs (i, j) of dz_ij * f_j (and symmetrically), accumulated in double.
    std::vector<double> df(sz((T + 1) * d), 0.0);
    std::int64_t k = d;
    for (std::int64_t i = 1; i <= T; ++i) {
      for (std::int64_t j = 0; j < i; ++j) {
        const double dz = go[k++];
        const float* fi = feature(i);
        const float* fj = feature(j);
        for (std::int64_t q = 0; q < d; ++q) {
          df[sz(i * d + q)] += dz * fj[q];
          df[sz(j * d + q)] += dz * fi[q];
        }
      }
    }
    for (std::int64_t q = 0; q < d; ++q) dbottom[sz(b * d + q)] = static_cast<float>(go[q] + df[sz(q)]);
    for (std::int64_t q = 0; q < T * d; ++q) ge[q] = static_cast<float>(df[sz(d + q)]);
  }
  g.bottom.resize(m.bottom.size());
  grad = std::move(dbottom);
  for (std::size_t l = m.bottom.size(); l-- > 0;) {
    grad = linear_backward(m.bottom[l], f.bottom_act[l], f.bottom_act[l + 1], std::move(grad), B, /*relu=*/true,
                           g.bottom[l], /*need_dx=*/l > 0);
  }
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

double dlrm_train_step(DlrmModel& m, const DlrmBatch& batch) {
  const DlrmGradients g = dlrm_gradients(m, batch);
  const auto& h = m.config.hyper;
  std::vector<DenseLayer*> params;
  std::vector<const DenseLayer*> grads;
  for (std::size_t l = 0; l < m.bottom.size(); ++l) {
    params.push_back(&m.bottom[l]);
    grads.push_back(&g.bottom[l]);
  }
  for (std::size_t l = 0; l < m.top.size(); ++l) {
    params.push_back(&m.top[l]);
    grads.push_back(&g.top[l]);
  }
  if (m.config.dense_optimizer == DenseOptimizer::kSgd) {
    for (std::size_t p = 0; p < params.size(); ++p) {
      for (std::size_t i = 0; i < params[p]->weight.size(); ++i) params[p]->weight[i] -= h.dense_lr * grads[p]->weight[i];
      for (std::size_t i = 0; i < params[p]->bias.size(); ++i) params[p]->bias[i] -= h.dense_lr * grads[p]->bias[i];
    }
  } else {
    // torch.optim.Adam (no weight decay): bias corrections 1/(1 - beta^t) computed in double.
    m.adam_step += 1;
    const auto t = static_cast<double>(m.adam_step);
    const auto c1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(h.adam_beta1), t)));
    const auto c2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(h.adam_beta2), t)));
    const auto update = [&](std::vector<float>& w, const std::vector<float>& gr, std::vector<float>& mm,
                            std::vector<float>& vv) {
      for (std::size_t i = 0; i < w.size(); ++i) {
        mm[i] = h.adam_beta1 * mm[i] + (1.0f - h.adam_beta1) * gr[i];
        vv[i] = h.adam_beta2 * vv[i] + (1.0f - h.adam_beta2) * gr[i] * gr[i];
        w[i] -= h.adam_lr * (mm[i] * c1) / (std::sqrt(vv[i] * c2) + h.adam_eps);
      }
    };
    for (std::size_t p = 0; p < params.size(); ++p) {
      update(params[p]->weight, grads[p]->weight, m.adam_m[p].weight, m.adam_v[p].weight);
      update(params[p]->bias, grads[p]->bias, m.adam_m[p].bias, m.adam_v[p].bias);
    }
  }
  profiler::OptimizerConfig opt;
  opt.kind = m.config.embedding_optimizer == EmbeddingOptimizer::kRowwiseAdagrad ? profiler::OptimizerKind::kRowwiseAdagrad
                                                                                  : profiler::OptimizerKind::kSgd;
  opt.learning_rate = h.embedding_lr;
  opt.eps = h.adagrad_eps;
  profiler::embedding_bag_backward_update_reference(m.layout, m.embeddings, m.rowwise_state, batch.indices,
                                                    batch.offsets, PoolingMode::kSum, g.pooled, opt);
  return g.loss;
}

}  // namespace perfcast::validation
