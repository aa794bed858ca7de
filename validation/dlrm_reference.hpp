#pragma once
/// \file dlrm_reference.hpp
/// CPU reference of one DLRM training step (Naumov et al., "Deep Learning Recommendation
/// Model for Personalization and Recommendation Systems", 2019; facebookresearch/dlrm
/// dlrm_s_pytorch.py): dense input -> bottom MLP (ReLU after every layer) -> pooled
/// embedding bags (sum) -> dot interaction (pairwise dots of [bottom_out, emb_1..emb_T],
/// strictly lower triangle, appended to bottom_out) or concatenation -> top MLP (ReLU after
/// every layer but the last) -> sigmoid + binary cross-entropy (mean over the batch) -> the
/// full backward -> SGD or Adam on the MLPs, SGD or row-wise Adagrad fused into the
/// embedding backward (profiler's CPU reference). Slow and simple; it defines what the CUDA
/// executor must reproduce. No CUDA.
///
/// Conventions: a layer is y = x W^T + b with W row-major [out, in] (torch.nn.Linear);
/// activations are row-major [B, width]; storage and the values handed between operators are
/// fp32; dot products and sums are accumulated in double and rounded once to fp32.

#include <cstdint>
#include <vector>

#include "model/graph/workload_spec.hpp"
#include "profiler/embedding_bag_layout.hpp"
#include "profiler/embedding_bag_types.hpp"
#include "profiler/host_embedding_weights.hpp"

namespace perfcast::validation {

/// Learning rates and optimizer constants (not part of a workload file). Defaults:
/// dlrm_s_pytorch.py --learning-rate 0.01 for SGD; torch.optim.Adam's lr 1e-3, betas
/// (0.9, 0.999), eps 1e-8; FBGEMM's row-wise Adagrad eps 1e-8.
struct DlrmHyperParams {
  float dense_lr = 0.01f;       ///< SGD step of the MLPs
  float adam_lr = 1e-3f;        ///< Adam step of the MLPs
  float adam_beta1 = 0.9f;
  float adam_beta2 = 0.999f;
  float adam_eps = 1e-8f;
  float embedding_lr = 0.01f;   ///< SGD or row-wise Adagrad step of the embeddings
  float adagrad_eps = 1e-8f;
};

/// Shape of the model one rank trains (one GPU: the whole model; B is the local batch).
struct DlrmConfig {
  std::int64_t batch_size = 0;               ///< samples per step
  std::vector<std::int64_t> bottom_mlp;      ///< [dense features, widths...] (>= 2 entries)
  std::vector<std::int64_t> top_mlp;         ///< [widths...], last is 1
  Interaction interaction = Interaction::kDot;
  std::vector<profiler::TableShape> tables;  ///< >= 1 table
  profiler::WeightPrecision embedding_precision = profiler::WeightPrecision::kFp32;
  EmbeddingOptimizer embedding_optimizer = EmbeddingOptimizer::kSgd;  ///< kSgd or kRowwiseAdagrad
  DenseOptimizer dense_optimizer = DenseOptimizer::kSgd;
  DlrmHyperParams hyper;

  [[nodiscard]] std::int64_t dense_features() const { return bottom_mlp.front(); }
  /// Width of the interaction output (the top MLP's input): d + (T+1)T/2 for dot, d + sum dims for cat.
  [[nodiscard]] std::int64_t interaction_width() const;
  /// Throws std::invalid_argument naming the first problem: batch < 1, an MLP with fewer
  /// layers than needed or a width < 1, top MLP not ending in 1, no table, dot interaction
  /// with a table dim different from the bottom MLP's output width, Adam embeddings.
  void validate() const;
};

/// The DlrmConfig of `spec` at `batch_size` samples per step. Throws ConfigError (naming
/// spec.file) for what the executor cannot train: embedding Adam, an embedding dtype other
/// than fp32/fp16/bf16, dot interaction with table dims unequal to the bottom MLP's output.
[[nodiscard]] DlrmConfig dlrm_config_from_spec(const DlrmSpec& spec, std::int64_t batch_size);

/// The embedding optimizer of `config` as the embedding-bag kernels and their CPU reference
/// take it (kind, embedding_lr, adagrad_eps).
[[nodiscard]] profiler::OptimizerConfig embedding_optimizer_config(const DlrmConfig& config);

/// One fully connected layer, y = x W^T + b.
struct DenseLayer {
  std::int64_t in = 0, out = 0;
  std::vector<float> weight;  ///< [out, in]
  std::vector<float> bias;    ///< [out]
};

/// Parameters and optimizer state.
struct DlrmModel {
  DlrmConfig config;
  std::vector<DenseLayer> bottom, top;
  profiler::EmbeddingBagLayout layout;  ///< tables packed in order, batch = config.batch_size
  profiler::HostEmbeddingWeights embeddings;
  std::vector<float> rowwise_state;     ///< [total_rows], row-wise Adagrad accumulators (zeros)
  std::vector<DenseLayer> adam_m, adam_v;  ///< Adam moments, bottom layers then top layers
  std::int64_t adam_step = 0;
};

/// Initial parameters, a pure function of (config, seed) through counter_rng.hpp:
/// layer weights U(-sqrt(6/(in+out)), +) and biases U(-sqrt(3/out), +) (the variances of
/// dlrm_s_pytorch.py's normal init, 2/(in+out) and 1/out); embedding table t
/// U(-sqrt(1/rows_t), +sqrt(1/rows_t)) (dlrm_s_pytorch.py). Element i of a buffer is
/// counter_uniform(seed, stream, i) with the streams of counter_rng.hpp.
/// Half-width of table t's init range, sqrt(1 / rows) rounded to fp32 (shared with the executor).
[[nodiscard]] float embedding_init_bound(std::int64_t rows);
/// With draw_embeddings = false the embedding weights are left empty (size 0): the CUDA
/// executor then draws the same values on the device (tables too large for host memory).
[[nodiscard]] DlrmModel init_dlrm_model(const DlrmConfig& config, std::uint64_t seed, bool draw_embeddings = true);

/// One mini-batch: dense features [B, F], labels [B] in {0, 1} (any value in [0, 1] is a
/// valid BCE target), and the sparse features in the CSR layout of embedding_bag_layout.hpp.
struct DlrmBatch {
  std::vector<float> dense;
  std::vector<float> labels;
  std::vector<std::int64_t> indices;
  std::vector<std::int64_t> offsets;
};

/// Gradients of the mean BCE loss.
struct DlrmGradients {
  double loss = 0;
  std::vector<DenseLayer> bottom, top;  ///< dLoss/dW and dLoss/db, shaped as the model's layers
  std::vector<float> pooled;            ///< dLoss/d(pooled embedding output), [B, total_dim]
  std::vector<float> embedding;         ///< dLoss/d(embedding weights), [total_weight_elements]
  std::vector<float> logits;            ///< forward output before the sigmoid, [B]
};

/// Mean binary cross-entropy of `batch` under `model` (forward only), computed stably from
/// the logits z: max(z, 0) - z*y + log(1 + exp(-|z|)). Throws std::invalid_argument when the
/// batch does not match the config.
[[nodiscard]] double dlrm_loss(const DlrmModel& model, const DlrmBatch& batch);

/// Forward and backward, no update.
[[nodiscard]] DlrmGradients dlrm_gradients(const DlrmModel& model, const DlrmBatch& batch);

/// One training step: gradients, then the dense optimizer on every MLP parameter and the
/// embedding backward with the fused optimizer (embedding_bag_backward_update_reference).
/// Returns the loss before the update.
double dlrm_train_step(DlrmModel& model, const DlrmBatch& batch);

}  // namespace perfcast::validation
