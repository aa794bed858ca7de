#pragma once
#include <cstddef>
#include <cstdint>
/// \file dlrm_reference_ops.hpp
/// The dense operators of the CPU DLRM reference, one function per operator, shared by the
/// single-process step (dlrm_reference.cpp) and the sharded multi-rank step
/// (dlrm_sharded_reference.cpp) so that both compute every sample bit for bit alike.
/// Every function takes its batch size explicitly (the global batch B in one process, the
/// local batch b = B / world on a rank); the loss gradient takes its denominator
/// explicitly (always the global B, so that summing the ranks' gradients gives the
/// single-process gradient).
///
/// Conventions (dlrm_reference.hpp): y = x W^T + b with W row-major [out, in]; activations
/// row-major [batch, width]; fp32 storage; dot products and sums accumulated in double and
/// rounded once to fp32.

#include <cstdint>
#include <vector>

#include "validation/dlrm_reference.hpp"

namespace perfcast::validation::reference_ops {

/// A non-negative count or index as a std::size_t (the reference loops index vectors with it).
inline std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

/// y[batch, out] = x[batch, in] W^T + b, then ReLU (max(v, 0), NaN -> 0) when `relu`.
[[nodiscard]] std::vector<float> linear_forward(const DenseLayer& l, const std::vector<float>& x, std::int64_t batch,
                                                bool relu);

/// Backward of one layer. `g` is dLoss/dy [batch, out]; when `relu` it is first masked by
/// y > 0. Overwrites `grad` with dW (sum over the batch) and db, and returns dLoss/dx
/// [batch, in] (empty when !need_dx).
[[nodiscard]] std::vector<float> linear_backward(const DenseLayer& l, const std::vector<float>& x,
                                                 const std::vector<float>& y, std::vector<float> g, std::int64_t batch,
                                                 bool relu, DenseLayer& grad, bool need_dx);

/// A layer of the same shape with every parameter 0.
[[nodiscard]] DenseLayer zeros_like(const DenseLayer& l);

/// Activations of an MLP: [0] = x, [l+1] = output of layer l. ReLU after every layer, or
/// after all but the last when !relu_last (the top MLP: the last output is the logit).
[[nodiscard]] std::vector<std::vector<float>> mlp_forward(const std::vector<DenseLayer>& layers, std::vector<float> x,
                                                          std::int64_t batch, bool relu_last);

/// Backward through every layer of an MLP, last to first, from dLoss/d(last output) `g`.
/// `acts` is mlp_forward's result; `grads` is resized to the layers and overwritten.
/// Returns dLoss/dx [batch, in of layer 0] when need_input_grad (else empty).
[[nodiscard]] std::vector<float> mlp_backward(const std::vector<DenseLayer>& layers,
                                              const std::vector<std::vector<float>>& acts, std::vector<float> g,
                                              std::int64_t batch, bool relu_last, std::vector<DenseLayer>& grads,
                                              bool need_input_grad);

/// Sum of the table dims of `c`: the width of a pooled row.
[[nodiscard]] std::int64_t pooled_width(const DlrmConfig& c);

/// Interaction output [batch, c.interaction_width()] from the bottom output [batch, d] and
/// the pooled embeddings [batch, pooled_width(c)]: [x, strictly-lower-triangular pairwise
/// dots of (x, e_1..e_T)] for dot, [x, e_1..e_T] for cat.
[[nodiscard]] std::vector<float> interaction_forward(const DlrmConfig& c, std::int64_t batch,
                                                     const std::vector<float>& bottom, const std::vector<float>& pooled);

/// Backward of interaction_forward: from dLoss/d(interaction output) `d_out`, writes
/// dLoss/d(bottom output) [batch, d] and dLoss/d(pooled) [batch, pooled_width(c)] (both
/// overwritten; per sample, the pair terms are accumulated in double).
void interaction_backward(const DlrmConfig& c, std::int64_t batch, const std::vector<float>& bottom,
                          const std::vector<float>& pooled, const std::vector<float>& d_out,
                          std::vector<float>& d_bottom, std::vector<float>& d_pooled);

/// Mean over the given samples of the binary cross-entropy with logits, computed stably:
/// max(z, 0) - z*y + log(1 + exp(-|z|)), summed in double.
[[nodiscard]] double bce_mean(const std::vector<float>& logits, const std::vector<float>& labels);

/// dLoss/dz = (sigmoid(z) - y) / denominator per sample (computed in double, rounded once).
/// The denominator is the number of samples the loss is averaged over: the global batch.
[[nodiscard]] std::vector<float> bce_logit_gradient(const std::vector<float>& logits, const std::vector<float>& labels,
                                                    double denominator);

/// The dense optimizer of `c` (SGD, or torch.optim.Adam without weight decay, bias
/// corrections computed in double) on every MLP parameter, bottom layers then top layers;
/// adam_m / adam_v hold the moments in the same order and adam_step counts Adam steps.
void dense_optimizer_step(const DlrmConfig& c, std::vector<DenseLayer>& bottom, std::vector<DenseLayer>& top,
                          const std::vector<DenseLayer>& grad_bottom, const std::vector<DenseLayer>& grad_top,
                          std::vector<DenseLayer>& adam_m, std::vector<DenseLayer>& adam_v, std::int64_t& adam_step);

}  // namespace perfcast::validation::reference_ops
