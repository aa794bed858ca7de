// Backward pass with the fused optimizer step of the CPU reference, worked out by hand.
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "profiler/embedding_bag_reference.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_profiler_embedding_bag_backward_reference_test {

using namespace perfcast::profiler;

TEST_CASE("backward SGD, sum pooling, duplicates within a bag", "[profiler][reference][backward]") {
  // Table 0: W0 = [1 2; 3 4; 5 6], table 1: W1 = [1 0 -1; 2 2 2], batch 2.
  // Bags: (t0,b0) = {0, 2}, (t0,b1) = {1, 1}, (t1,b0) = {}, (t1,b1) = {1, 0, 1}.
  const std::vector<TableShape> shapes = {{3, 2}, {2, 3}};
  const EmbeddingBagLayout layout = make_embedding_bag_layout(shapes, 2);
  auto w = HostEmbeddingWeights::from_floats(WeightPrecision::kFp32,
                                             std::vector<float>{1, 2, 3, 4, 5, 6, 1, 0, -1, 2, 2, 2});
  const std::vector<std::int64_t> indices = {0, 2, 1, 1, 1, 0, 1};
  const std::vector<std::int64_t> offsets = {0, 2, 4, 4, 7};
  const std::vector<float> grad_output = {1, 2, 1, 1, 1, /* sample 1 */ 3, 4, 1, 2, 3};
  const OptimizerConfig sgd{OptimizerKind::kSgd, 0.5f, 0.0f};
  embedding_bag_backward_update_reference(layout, w, {}, indices, offsets, PoolingMode::kSum, grad_output, sgd);
  // t0: g0 = [1 2], g2 = [1 2], g1 = 2*[3 4] = [6 8]  ->  w -= 0.5 g.
  // t1: b0 is empty; g1 = 2*[1 2 3], g0 = [1 2 3].
  const std::vector<float> expected = {0.5f, 1, 0, 0, 4.5f, 5, /* table 1 */ 0.5f, -1, -2.5f, 1, 0, -1};
  CHECK(w.to_floats() == expected);
}

namespace {

// One table, 4 rows x dim 2, all weights 10, batch 2: b0 = {0, 1}, b1 = {1, 2, 2}.
// Row 1 appears in both bags, row 2 twice in one bag, row 3 never.
struct OneTableExample {
  std::vector<TableShape> shapes = {{4, 2}};
  EmbeddingBagLayout layout = make_embedding_bag_layout(shapes, 2);
  std::vector<std::int64_t> indices = {0, 1, 1, 2, 2};
  std::vector<std::int64_t> offsets = {0, 2, 5};
};

}  // namespace

TEST_CASE("backward SGD, mean pooling scales by 1/len", "[profiler][reference][backward]") {
  const OneTableExample ex;
  auto w = HostEmbeddingWeights::from_floats(WeightPrecision::kFp32, std::vector<float>(8, 10.0f));
  // Per occurrence: b0 gives [2 14]/2 = [1 7], b1 gives [3 -3]/3 = [1 -1].
  const std::vector<float> grad_output = {2, 14, 3, -3};
  const OptimizerConfig sgd{OptimizerKind::kSgd, 1.0f, 0.0f};
  embedding_bag_backward_update_reference(ex.layout, w, {}, ex.indices, ex.offsets, PoolingMode::kMean, grad_output,
                                          sgd);
  // g0 = [1 7], g1 = [1 7] + [1 -1] = [2 6], g2 = 2*[1 -1] = [2 -2], row 3 untouched.
  CHECK(w.to_floats() == std::vector<float>{9, 3, 8, 4, 8, 12, 10, 10});
}

TEST_CASE("backward row-wise Adagrad sums duplicate gradients before one update", "[profiler][reference][backward]") {
  const OneTableExample ex;
  auto w = HostEmbeddingWeights::from_floats(WeightPrecision::kFp32, std::vector<float>(8, 10.0f));
  std::vector<float> state = {0, 5, 0, 7};
  const std::vector<float> grad_output = {1, 7, 1, -1};
  const OptimizerConfig adagrad{OptimizerKind::kRowwiseAdagrad, 5.0f, 0.0f};
  embedding_bag_backward_update_reference(ex.layout, w, state, ex.indices, ex.offsets, PoolingMode::kSum,
                                          grad_output, adagrad);
  // row 0: g = [1 7],  mean g^2 = 25, state 0+25 = 25, m = 5/5 = 1   -> w = [9 3]
  // row 1: g = [2 6],  mean g^2 = 20, state 5+20 = 25, m = 1          -> w = [8 4]
  //        (two separate updates would give a different result)
  // row 2: g = [2 -2], mean g^2 = 4,  state 0+4 = 4,   m = 5/2 = 2.5  -> w = [5 15]
  // row 3: untouched.
  CHECK(state == std::vector<float>{25, 25, 4, 7});
  CHECK(w.to_floats() == std::vector<float>{9, 3, 8, 4, 5, 15, 10, 10});
}

TEST_CASE("backward Adagrad uses eps and accumulates state over steps", "[profiler][reference][backward]") {
  const std::vector<TableShape> shapes = {{1, 1}};
  const EmbeddingBagLayout layout = make_embedding_bag_layout(shapes, 1);
  auto w = HostEmbeddingWeights::from_floats(WeightPrecision::kFp32, std::vector<float>{0.0f});
  std::vector<float> state = {0.0f};
  const std::vector<std::int64_t> indices = {0};
  const std::vector<std::int64_t> offsets = {0, 1};
  const OptimizerConfig adagrad{OptimizerKind::kRowwiseAdagrad, 1.0f, 1.0f};
  // Step 1: g = 3: state 9, m = 1/(3+1) = 0.25, w = -0.75.
  embedding_bag_backward_update_reference(layout, w, state, indices, offsets, PoolingMode::kSum,
                                          std::vector<float>{3.0f}, adagrad);
  CHECK(state[0] == 9.0f);
  CHECK(w.load(0) == -0.75f);
  // Step 2: g = 4: state 25, m = 1/(5+1), w = -0.75 - 4/6.
  embedding_bag_backward_update_reference(layout, w, state, indices, offsets, PoolingMode::kSum,
                                          std::vector<float>{4.0f}, adagrad);
  CHECK(state[0] == 25.0f);
  CHECK(w.load(0) == Approx(-0.75 - 4.0 / 6.0).epsilon(1e-6));
}

TEST_CASE("backward update rounds fp16 and bf16 weights to nearest even", "[profiler][reference][backward]") {
  // One row of dim 4 with all weights 1.0, one bag {0}; SGD with lr 1 so w_new = 1 - g.
  const std::vector<TableShape> shapes = {{1, 4}};
  const EmbeddingBagLayout layout = make_embedding_bag_layout(shapes, 1);
  const std::vector<std::int64_t> indices = {0};
  const std::vector<std::int64_t> offsets = {0, 1};
  const OptimizerConfig sgd{OptimizerKind::kSgd, 1.0f, 0.0f};

  SECTION("fp16: spacing 2^-11 below 1, 2^-10 above") {
    auto w = HostEmbeddingWeights::from_floats(WeightPrecision::kFp16, std::vector<float>(4, 1.0f));
    const std::vector<float> g = {0x1p-12f, 3 * 0x1p-12f, 0x1p-13f, -0x1p-11f};
    embedding_bag_backward_update_reference(layout, w, {}, indices, offsets, PoolingMode::kSum, g, sgd);
    // 1-2^-12: tie -> 1.0 (even); 1-3*2^-12: tie -> 1-2^-10 (even); 1-2^-13: nearest 1.0;
    // 1+2^-11: tie -> 1.0 (even).
    CHECK(w.to_floats() == std::vector<float>{1.0f, 0.9990234375f, 1.0f, 1.0f});
  }
  SECTION("bf16: spacing 2^-8 below 1, 2^-7 above") {
    auto w = HostEmbeddingWeights::from_floats(WeightPrecision::kBf16, std::vector<float>(4, 1.0f));
    const std::vector<float> g = {0x1p-9f, 3 * 0x1p-9f, 0x1p-8f, -0x1p-8f};
    embedding_bag_backward_update_reference(layout, w, {}, indices, offsets, PoolingMode::kSum, g, sgd);
    // 1-2^-9: tie -> 1.0; 1-3*2^-9: tie -> 1-2^-7; 1-2^-8 exact; 1+2^-8: tie -> 1.0.
    CHECK(w.to_floats() == std::vector<float>{1.0f, 0.9921875f, 0.99609375f, 1.0f});
  }
}

TEST_CASE("backward checks sizes before changing anything", "[profiler][reference][backward]") {
  const OneTableExample ex;
  auto w = HostEmbeddingWeights::from_floats(WeightPrecision::kFp32, std::vector<float>(8, 10.0f));
  std::vector<float> state(4, 0.0f);
  const OptimizerConfig adagrad{OptimizerKind::kRowwiseAdagrad, 1.0f, 1e-8f};
  const std::vector<float> short_grad = {1, 2, 3};
  CHECK_THROWS_AS(embedding_bag_backward_update_reference(ex.layout, w, state, ex.indices, ex.offsets,
                                                          PoolingMode::kSum, short_grad, adagrad),
                  std::invalid_argument);
  const std::vector<float> grad = {1, 2, 3, 4};
  CHECK_THROWS_AS(embedding_bag_backward_update_reference(ex.layout, w, {}, ex.indices, ex.offsets,
                                                          PoolingMode::kSum, grad, adagrad),
                  std::invalid_argument);
  const std::vector<std::int64_t> bad_index = {0, 1, 1, 4, 2};
  CHECK_THROWS_AS(embedding_bag_backward_update_reference(ex.layout, w, state, bad_index, ex.offsets,
                                                          PoolingMode::kSum, grad, adagrad),
                  std::out_of_range);
  CHECK(w.to_floats() == std::vector<float>(8, 10.0f));
  CHECK(state == std::vector<float>(4, 0.0f));
}

}  // namespace perfcast_test_profiler_embedding_bag_backward_reference_test
