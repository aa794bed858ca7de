// CPU reference of one DLRM training step: hand-worked values, finite-difference gradients,
// optimizer rules and learning on a toy problem.
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "core/json_reader.hpp"
#include "validation/batch_generator.hpp"
#include "validation/dlrm_reference.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_validation_dlrm_reference_test {

using namespace perfcast;
using namespace perfcast::validation;

namespace {

/// 1 dense feature -> bottom layer 1x1 -> dot with one table (2 rows, dim 1) -> top 2 -> 1.
DlrmModel tiny_model() {
  DlrmConfig c;
  c.batch_size = 2;
  c.bottom_mlp = {1, 1};
  c.top_mlp = {1};
  c.interaction = Interaction::kDot;
  c.tables = {profiler::TableShape{2, 1}};
  DlrmModel m = init_dlrm_model(c, 7);
  // Hand-set parameters.
  m.bottom[0].weight = {2.0f};
  m.bottom[0].bias = {0.5f};
  m.top[0].weight = {1.0f, -1.0f};  // top input = [x, x*e]
  m.top[0].bias = {0.25f};
  m.embeddings.store(0, 0.5f);
  m.embeddings.store(1, -1.0f);
  return m;
}

DlrmBatch tiny_batch() {
  DlrmBatch b;
  b.dense = {1.0f, -1.0f};
  b.labels = {1.0f, 0.0f};
  b.indices = {0, 1};  // sample 0 -> row 0, sample 1 -> row 1
  b.offsets = {0, 1, 2};
  return b;
}

double bce(double z, double y) { return std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::fabs(z))); }
double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

DlrmConfig small_config(Interaction inter, DenseOptimizer dopt, EmbeddingOptimizer eopt) {
  DlrmConfig c;
  c.batch_size = 6;
  c.bottom_mlp = {5, 7, 4};
  c.top_mlp = {6, 1};
  c.interaction = inter;
  c.tables = {profiler::TableShape{11, 4}, profiler::TableShape{5, 4}, profiler::TableShape{9, 4}};
  c.dense_optimizer = dopt;
  c.embedding_optimizer = eopt;
  return c;
}

std::vector<TableTraffic> traffic(std::size_t n, double pooling) {
  return std::vector<TableTraffic>(n, TableTraffic{pooling, IndexDistribution::uniform()});
}

}  // namespace

TEST_CASE("DLRM reference: 1 table, 2 samples by hand", "[validation]") {
  DlrmModel m = tiny_model();
  const DlrmBatch b = tiny_batch();
  // Sample 0: x = relu(2*1 + 0.5) = 2.5, e = 0.5, dot = 1.25; z = 2.5 - 1.25 + 0.25 = 1.5.
  // Sample 1: x = relu(-2 + 0.5) = 0,  e = -1, dot = 0;    z = 0 - 0 + 0.25 = 0.25.
  const double loss = (bce(1.5, 1) + bce(0.25, 0)) / 2;
  CHECK(dlrm_loss(m, b) == Approx(loss).epsilon(1e-6));

  const DlrmGradients g = dlrm_gradients(m, b);
  REQUIRE(g.logits.size() == 2);
  CHECK(g.logits[0] == Approx(1.5f));
  CHECK(g.logits[1] == Approx(0.25f));
  const double dz0 = (sigmoid(1.5) - 1) / 2, dz1 = sigmoid(0.25) / 2;
  // Top layer: dW = sum_b dz_b * [x_b, dot_b] = dz0 * [2.5, 1.25]; db = dz0 + dz1.
  CHECK(g.top[0].weight[0] == Approx(dz0 * 2.5).epsilon(1e-6));
  CHECK(g.top[0].weight[1] == Approx(dz0 * 1.25).epsilon(1e-6));
  CHECK(g.top[0].bias[0] == Approx(dz0 + dz1).epsilon(1e-6));
  // Interaction: d dot_b = -dz_b; dx_0 = dz0 * 1 + (-dz0) * e_0 = dz0 * 0.5; de_0 = -dz0 * x_0.
  CHECK(g.pooled[0] == Approx(-dz0 * 2.5).epsilon(1e-6));
  CHECK(g.pooled[1] == Approx(-dz1 * 0.0).margin(1e-9));
  // Bottom: sample 1 is cut by the ReLU; dW = dx_0 * 1, db = dx_0.
  CHECK(g.bottom[0].weight[0] == Approx(dz0 * 0.5).epsilon(1e-6));
  CHECK(g.bottom[0].bias[0] == Approx(dz0 * 0.5).epsilon(1e-6));
  CHECK(g.embedding[0] == Approx(-dz0 * 2.5).epsilon(1e-6));
  CHECK(g.embedding[1] == Approx(0.0).margin(1e-9));

  // One SGD step (lr 0.01 on both): w -= lr * g; the loss returned is the one before the update.
  const float w_top0 = m.top[0].weight[0];
  const float emb0 = m.embeddings.load(0);
  CHECK(dlrm_train_step(m, b) == Approx(loss).epsilon(1e-6));
  CHECK(m.top[0].weight[0] == Approx(w_top0 - 0.01 * dz0 * 2.5).epsilon(1e-6));
  CHECK(m.embeddings.load(0) == Approx(emb0 - 0.01 * (-dz0 * 2.5)).epsilon(1e-6));
  CHECK(m.embeddings.load(1) == -1.0f);  // zero gradient: a touched row, moved by 0
}

TEST_CASE("DLRM reference: cat interaction by hand", "[validation]") {
  DlrmConfig c;
  c.batch_size = 1;
  c.bottom_mlp = {1, 1};
  c.top_mlp = {1};
  c.interaction = Interaction::kCat;
  c.tables = {profiler::TableShape{3, 2}};
  CHECK(c.interaction_width() == 3);
  DlrmModel m = init_dlrm_model(c, 1);
  m.bottom[0].weight = {1.0f};
  m.bottom[0].bias = {0.0f};
  m.top[0].weight = {1.0f, 2.0f, 3.0f};
  m.top[0].bias = {0.0f};
  for (int i = 0; i < 6; ++i) m.embeddings.store(i, static_cast<float>(i) * 0.1f);
  DlrmBatch b{{0.5f}, {1.0f}, {1, 2}, {0, 2}};  // bag = rows 1 and 2: e = [0.2+0.4, 0.3+0.5]
  const double z = 0.5 + 2 * 0.6 + 3 * 0.8;
  CHECK(dlrm_loss(m, b) == Approx(bce(z, 1)).epsilon(1e-6));
}

TEST_CASE("DLRM reference: gradients match finite differences", "[validation]") {
  for (auto inter : {Interaction::kDot, Interaction::kCat}) {
    const DlrmConfig c = small_config(inter, DenseOptimizer::kSgd, EmbeddingOptimizer::kSgd);
    DlrmModel m = init_dlrm_model(c, 3);
    const DlrmBatch b = generate_dlrm_batch(c, traffic(3, 2.5), 3, 0);
    const DlrmGradients g = dlrm_gradients(m, b);
    const double h = 1e-2;
    // Central difference of the loss w.r.t. one float parameter.
    const auto fd = [&](float& p) {
      const float keep = p;
      p = keep + static_cast<float>(h);
      const double up = dlrm_loss(m, b);
      p = keep - static_cast<float>(h);
      const double down = dlrm_loss(m, b);
      p = keep;
      return (up - down) / (2 * h);
    };
    for (std::size_t i : {0u, 5u, 13u}) CHECK(fd(m.bottom[0].weight[i]) == Approx(g.bottom[0].weight[i]).margin(2e-4));
    CHECK(fd(m.bottom[1].bias[2]) == Approx(g.bottom[1].bias[2]).margin(2e-4));
    for (std::size_t i : {0u, 7u, 20u}) CHECK(fd(m.top[0].weight[i]) == Approx(g.top[0].weight[i]).margin(2e-4));
    CHECK(fd(m.top[1].bias[0]) == Approx(g.top[1].bias[0]).margin(2e-4));
    // Embedding weights: perturb through the storage (fp32).
    // First index (table 0's first bag) and last index (table 2's last bag).
    for (auto [table, row] : {std::pair{std::size_t{0}, b.indices.front()}, std::pair{std::size_t{2}, b.indices.back()}}) {
      const std::int64_t e = m.layout.tables[table].weight_offset + row * 4 + 1;
      const float keep = m.embeddings.load(e);
      m.embeddings.store(e, keep + static_cast<float>(h));
      const double up = dlrm_loss(m, b);
      m.embeddings.store(e, keep - static_cast<float>(h));
      const double down = dlrm_loss(m, b);
      m.embeddings.store(e, keep);
      CHECK((up - down) / (2 * h) == Approx(g.embedding[static_cast<std::size_t>(e)]).margin(2e-4));
    }
  }
}

TEST_CASE("DLRM reference: loss decreases on a learnable toy problem", "[validation]") {
  for (auto dopt : {DenseOptimizer::kSgd, DenseOptimizer::kAdam}) {
    for (auto eopt : {EmbeddingOptimizer::kSgd, EmbeddingOptimizer::kRowwiseAdagrad}) {
      DlrmConfig c = small_config(Interaction::kDot, dopt, eopt);
      c.hyper.dense_lr = 0.5f;
      c.hyper.adam_lr = 0.02f;
      c.hyper.embedding_lr = 0.2f;
      DlrmModel m = init_dlrm_model(c, 5);
      DlrmBatch b = generate_dlrm_batch(c, traffic(3, 2), 5, 0);
      // Learnable: the label is whether the first dense feature exceeds 1/2.
      for (std::int64_t s = 0; s < c.batch_size; ++s) {
        b.labels[static_cast<std::size_t>(s)] = b.dense[static_cast<std::size_t>(s * 5)] > 0.5f ? 1.0f : 0.0f;
      }
      const double first = dlrm_train_step(m, b);
      double last = first;
      for (int step = 0; step < 60; ++step) last = dlrm_train_step(m, b);
      CHECK(last < 0.5 * first);
      if (eopt == EmbeddingOptimizer::kRowwiseAdagrad) {
        CHECK(m.rowwise_state[static_cast<std::size_t>(b.indices[0])] > 0.0f);
      }
    }
  }
}

TEST_CASE("DLRM reference: init is a pure function of the seed", "[validation]") {
  const DlrmConfig c = small_config(Interaction::kDot, DenseOptimizer::kSgd, EmbeddingOptimizer::kSgd);
  const DlrmModel a = init_dlrm_model(c, 9), b = init_dlrm_model(c, 9), d = init_dlrm_model(c, 10);
  CHECK(a.bottom[0].weight == b.bottom[0].weight);
  CHECK(a.embeddings.to_floats() == b.embeddings.to_floats());
  CHECK(a.bottom[0].weight != d.bottom[0].weight);
  // Bounds of the init: |w| <= sqrt(6 / (in + out)), |e| <= sqrt(1 / rows).
  for (float w : a.bottom[0].weight) CHECK(std::fabs(w) <= std::sqrt(6.0f / 12.0f));
  for (float e : a.embeddings.to_floats()) CHECK(std::fabs(e) <= std::sqrt(1.0f / 5.0f));
}

TEST_CASE("DLRM reference: configs it cannot train are rejected", "[validation]") {
  DlrmConfig c = small_config(Interaction::kDot, DenseOptimizer::kSgd, EmbeddingOptimizer::kSgd);
  c.tables[1].dim = 8;
  CHECK_THROWS_AS(c.validate(), std::invalid_argument);
  c.interaction = Interaction::kCat;
  CHECK_NOTHROW(c.validate());
  CHECK(c.interaction_width() == 4 + 4 + 8 + 4);
  c.top_mlp = {6, 2};
  CHECK_THROWS_AS(c.validate(), std::invalid_argument);
  // Embedding optimizers the executor does not run are refused by name.
  for (auto eopt : {EmbeddingOptimizer::kAdam, EmbeddingOptimizer::kAdagrad}) {
    DlrmConfig o = small_config(Interaction::kDot, DenseOptimizer::kSgd, eopt);
    CHECK_THROWS_WITH(o.validate(), Catch::Contains(std::string(optimizer_name(eopt)) + " is predicted, not run"));
  }
  const DlrmConfig ok = small_config(Interaction::kDot, DenseOptimizer::kSgd, EmbeddingOptimizer::kSgd);
  const DlrmModel m = init_dlrm_model(ok, 1);
  DlrmBatch b = generate_dlrm_batch(ok, traffic(3, 1), 1, 0);
  b.labels.pop_back();
  CHECK_THROWS_AS(dlrm_loss(m, b), std::invalid_argument);
}

TEST_CASE("batch generator: deterministic, shapes and distributions", "[validation]") {
  const DlrmConfig c = small_config(Interaction::kDot, DenseOptimizer::kSgd, EmbeddingOptimizer::kSgd);
  const auto t = traffic(3, 2.5);
  const DlrmBatch a = generate_dlrm_batch(c, t, 4, 1), b = generate_dlrm_batch(c, t, 4, 1);
  const DlrmBatch d = generate_dlrm_batch(c, t, 4, 2);
  CHECK(a.indices == b.indices);
  CHECK(a.dense == b.dense);
  CHECK(a.dense != d.dense);
  REQUIRE(a.offsets.size() == 3 * 6 + 1);
  for (std::size_t k = 1; k < a.offsets.size(); ++k) {
    const auto len = a.offsets[k] - a.offsets[k - 1];
    CHECK((len == 2 || len == 3));
  }
  for (float y : a.labels) CHECK((y == 0.0f || y == 1.0f));

  // Samplers: uniform maps [0,1) onto the rows; Zipf puts more mass on low ranks; hot set
  // sends a share g of u to the H hot rows.
  const RowSampler u(IndexDistribution::uniform(), 10);
  CHECK(u.draw(0.0) == 0);
  CHECK(u.draw(0.95) == 9);
  CHECK(u.draw(0.999999) == 9);
  const RowSampler z(IndexDistribution::zipf(1.2), 1000);
  CHECK(z.draw(0.0) == 0);
  CHECK(z.draw(0.5) < 50);
  CHECK(z.draw(0.9999999) <= 999);
  const RowSampler h(IndexDistribution::hot_set(0.1, 0.8), 100);  // 10 hot rows take 80%
  CHECK(h.draw(0.79) < 10);
  CHECK(h.draw(0.81) >= 10);
  CHECK(h.draw(0.999) <= 99);
  ReuseHistogram shares{};
  shares[0] = 1.0;
  CHECK_THROWS_AS(RowSampler(IndexDistribution::histogram(shares), 10), std::invalid_argument);
  // A histogram is sampled through the Zipf law with the same expected distinct rows: all
  // accesses in bin 0 (no reuse) is uniform; heavy reuse gives a Zipf law.
  CHECK(sampled_distribution(IndexDistribution::histogram(shares), 1000000, 1000).kind ==
        IndexDistribution::Kind::kUniform);
  ReuseHistogram heavy{};
  heavy[6] = 1.0;  // every distinct index seen 33..64 times
  const IndexDistribution fitted = sampled_distribution(IndexDistribution::histogram(heavy), 100000, 100000);
  REQUIRE(fitted.kind == IndexDistribution::Kind::kZipf);
  CHECK(expected_unique_rows(fitted, 100000, 100000) ==
        Approx(expected_unique_rows(IndexDistribution::histogram(heavy), 100000, 100000)).epsilon(0.01));
  CHECK(sampled_distribution(IndexDistribution::zipf(1.05), 10, 10) == IndexDistribution::zipf(1.05));
}

TEST_CASE("DLRM reference: shipped workloads map onto trainable configs", "[validation]") {
  for (const char* name : {"dlrm_default.json", "dlrm_ddp.json"}) {
    INFO(name);
    const DlrmSpec spec = load_workload(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/" + name);
    const DlrmConfig c = dlrm_config_from_spec(spec, 4);
    CHECK(c.interaction_width() == spec.interaction_width());
    CHECK(c.tables.size() == spec.tables.size());
    // A small batch of the declared traffic: mean bag length is the declared pooling.
    const DlrmBatch b = generate_dlrm_batch(c, table_traffic(spec), 1, 0);
    CHECK(static_cast<double>(b.indices.size()) == Approx(4.0 * spec.tables.size() * spec.tables[0].pooling));
  }
  DlrmSpec spec = load_workload(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/dlrm_default.json");
  spec.tables[0].dim = 32;  // dot interaction needs every dim equal to the bottom MLP output (64)
  CHECK_THROWS_AS(dlrm_config_from_spec(spec, 4), ConfigError);
  spec.tables[0].dim = 64;
  spec.tables[0].sequence = true;  // EmbeddingCollection tables are predicted only
  CHECK_THROWS_WITH(dlrm_config_from_spec(spec, 4), Catch::Contains("sequence (EmbeddingCollection) tables are predicted"));
}

}  // namespace perfcast_test_validation_dlrm_reference_test
