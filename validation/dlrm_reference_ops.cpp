#include "validation/dlrm_reference_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

namespace perfcast::validation::reference_ops {

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

DenseLayer zeros_like(const DenseLayer& l) {
  DenseLayer z;
  z.in = l.in;
  z.out = l.out;
  z.weight.assign(l.weight.size(), 0.0f);
  z.bias.assign(l.bias.size(), 0.0f);
  return z;
}

std::vector<std::vector<float>> mlp_forward(const std::vector<DenseLayer>& layers, std::vector<float> x,
                                            std::int64_t batch, bool relu_last) {
  std::vector<std::vector<float>> acts;
  acts.push_back(std::move(x));
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const bool relu = relu_last || l + 1 < layers.size();
    acts.push_back(linear_forward(layers[l], acts.back(), batch, relu));
  }
  return acts;
}

std::vector<float> mlp_backward(const std::vector<DenseLayer>& layers, const std::vector<std::vector<float>>& acts,
                                std::vector<float> g, std::int64_t batch, bool relu_last,
                                std::vector<DenseLayer>& grads, bool need_input_grad) {
  grads.resize(layers.size());
  for (std::size_t l = layers.size(); l-- > 0;) {
    const bool relu = relu_last || l + 1 < layers.size();
    g = linear_backward(layers[l], acts[l], acts[l + 1], std::move(g), batch, relu, grads[l],
                        /*need_dx=*/l > 0 || need_input_grad);
  }
  return g;
}

std::int64_t pooled_width(const DlrmConfig& c) {
  std::int64_t w = 0;
  for (const auto& t : c.tables) w += t.dim;
  return w;
}

std::vector<float> interaction_forward(const DlrmConfig& c, std::int64_t batch, const std::vector<float>& bottom,
                                       const std::vector<float>& pooled) {
  const std::int64_t d = c.bottom_mlp.back(), W = c.interaction_width(), td = pooled_width(c);
  const auto T = static_cast<std::int64_t>(c.tables.size());
  std::vector<float> out(sz(batch * W));
  for (std::int64_t b = 0; b < batch; ++b) {
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

void interaction_backward(const DlrmConfig& c, std::int64_t batch, const std::vector<float>& bottom,
                          const std::vector<float>& pooled, const std::vector<float>& d_out,
                          std::vector<float>& d_bottom, std::vector<float>& d_pooled) {
  const std::int64_t d = c.bottom_mlp.back(), W = c.interaction_width(), td = pooled_width(c);
  const auto T = static_cast<std::int64_t>(c.tables.size());
  d_bottom.assign(sz(batch * d), 0.0f);
  d_pooled.assign(sz(batch * td), 0.0f);
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* go = d_out.data() + sz(b * W);
    for (std::int64_t k = 0; k < d; ++k) d_bottom[sz(b * d + k)] = go[k];
    float* ge = d_pooled.data() + sz(b * td);
    if (c.interaction == Interaction::kCat) {
      for (std::int64_t k = 0; k < td; ++k) ge[k] = go[d + k];
      continue;
    }
    const float* x = bottom.data() + sz(b * d);
    const float* e = pooled.data() + sz(b * td);
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
    for (std::int64_t q = 0; q < d; ++q) d_bottom[sz(b * d + q)] = static_cast<float>(go[q] + df[sz(q)]);
    for (std::int64_t q = 0; q < T * d; ++q) ge[q] = static_cast<float>(df[sz(d + q)]);
  }
}

double bce_mean(const std::vector<float>& logits, const std::vector<float>& labels) {
  double loss = 0;
  for (std::size_t b = 0; b < logits.size(); ++b) {
    const double z = logits[b], y = labels[b];
    loss += std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::fabs(z)));
  }
  return loss / static_cast<double>(logits.size());
}

std::vector<float> bce_logit_gradient(const std::vector<float>& logits, const std::vector<float>& labels,
                                      double denominator) {
  std::vector<float> grad(logits.size());
  for (std::size_t b = 0; b < logits.size(); ++b) {
    const double z = logits[b];
    const double s = z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z));
    grad[b] = static_cast<float>((s - labels[b]) / denominator);
  }
  return grad;
}

void dense_optimizer_step(const DlrmConfig& c, std::vector<DenseLayer>& bottom, std::vector<DenseLayer>& top,
                          const std::vector<DenseLayer>& grad_bottom, const std::vector<DenseLayer>& grad_top,
                          std::vector<DenseLayer>& adam_m, std::vector<DenseLayer>& adam_v, std::int64_t& adam_step) {
  const auto& h = c.hyper;
  std::vector<DenseLayer*> params;
  std::vector<const DenseLayer*> grads;
  for (std::size_t l = 0; l < bottom.size(); ++l) {
    params.push_back(&bottom[l]);
    grads.push_back(&grad_bottom[l]);
  }
  for (std::size_t l = 0; l < top.size(); ++l) {
    params.push_back(&top[l]);
    grads.push_back(&grad_top[l]);
  }
  if (c.dense_optimizer == DenseOptimizer::kSgd) {
    for (std::size_t p = 0; p < params.size(); ++p) {
      for (std::size_t i = 0; i < params[p]->weight.size(); ++i) params[p]->weight[i] -= h.dense_lr * grads[p]->weight[i];
      for (std::size_t i = 0; i < params[p]->bias.size(); ++i) params[p]->bias[i] -= h.dense_lr * grads[p]->bias[i];
    }
    return;
  }
  // torch.optim.Adam (no weight decay): bias corrections 1/(1 - beta^t) computed in double.
  adam_step += 1;
  const auto t = static_cast<double>(adam_step);
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
    update(params[p]->weight, grads[p]->weight, adam_m[p].weight, adam_v[p].weight);
    update(params[p]->bias, grads[p]->bias, adam_m[p].bias, adam_v[p].bias);
  }
}

}  // namespace perfcast::validation::reference_ops
