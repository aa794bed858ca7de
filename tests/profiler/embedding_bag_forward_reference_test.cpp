// Forward pass of the CPU reference, on problems small enough to work out by hand.
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "profiler/embedding_bag_reference.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_profiler_embedding_bag_forward_reference_test {

using namespace perfcast::profiler;

namespace {

// Table 0: 3 rows x dim 2, table 1: 2 rows x dim 3, batch of 2.
//   W0 = [1 2; 3 4; 5 6]          W1 = [1 0 -1; 2 2 2]
// Bags: (t0,b0) = {0, 2}, (t0,b1) = {1, 1} (duplicate in a bag),
//       (t1,b0) = {} (empty),  (t1,b1) = {1, 0, 1}.
struct TwoTableExample {
  std::vector<TableShape> shapes = {{3, 2}, {2, 3}};
  EmbeddingBagLayout layout = make_embedding_bag_layout(shapes, 2);
  std::vector<float> values = {1, 2, 3, 4, 5, 6, /* table 1 */ 1, 0, -1, 2, 2, 2};
  std::vector<std::int64_t> indices = {0, 2, 1, 1, 1, 0, 1};
  std::vector<std::int64_t> offsets = {0, 2, 4, 4, 7};
};

}  // namespace

TEST_CASE("forward sum pooling of two tables, fp32", "[profiler][reference][forward]") {
  const TwoTableExample ex;
  const auto weights = HostEmbeddingWeights::from_floats(WeightPrecision::kFp32, ex.values);
  const std::vector<float> out = embedding_bag_forward_reference(ex.layout, weights, ex.indices, ex.offsets,
                                                                 PoolingMode::kSum);
  // Sample 0: [W0[0]+W0[2] | empty] ; sample 1: [2*W0[1] | 2*W1[1]+W1[0]].
  const std::vector<float> expected = {6, 8, 0, 0, 0, /* sample 1 */ 6, 8, 5, 4, 3};
  CHECK(out == expected);
}

TEST_CASE("forward mean pooling divides by bag length, empty bag gives 0", "[profiler][reference][forward]") {
  const TwoTableExample ex;
  const auto weights = HostEmbeddingWeights::from_floats(WeightPrecision::kFp32, ex.values);
  const std::vector<float> out = embedding_bag_forward_reference(ex.layout, weights, ex.indices, ex.offsets,
                                                                 PoolingMode::kMean);
  const float third = 1.0f / 3.0f;  // the contract: sum * (1/len)
  const std::vector<float> expected = {3, 4, 0, 0, 0, /* sample 1 */ 3, 4, 5 * third, 4 * third, 3 * third};
  CHECK(out == expected);
  CHECK(out[7] == Approx(5.0 / 3.0));
}

TEST_CASE("forward overwrites the output span and checks sizes", "[profiler][reference][forward]") {
  const TwoTableExample ex;
  const auto weights = HostEmbeddingWeights::from_floats(WeightPrecision::kFp32, ex.values);
  std::vector<float> out(10, 42.0f);
  embedding_bag_forward_reference(ex.layout, weights, ex.indices, ex.offsets, PoolingMode::kSum, out);
  CHECK(out[2] == 0.0f);  // empty bag
  std::vector<float> short_out(9);
  CHECK_THROWS_AS(
      embedding_bag_forward_reference(ex.layout, weights, ex.indices, ex.offsets, PoolingMode::kSum, short_out),
      std::invalid_argument);
  const auto wrong_size = HostEmbeddingWeights::from_floats(WeightPrecision::kFp32, std::vector<float>(11));
  CHECK_THROWS_AS(embedding_bag_forward_reference(ex.layout, wrong_size, ex.indices, ex.offsets, PoolingMode::kSum),
                  std::invalid_argument);
  const std::vector<std::int64_t> bad_index = {0, 3, 1, 1, 1, 0, 1};  // table 0 has 3 rows
  CHECK_THROWS_AS(embedding_bag_forward_reference(ex.layout, weights, bad_index, ex.offsets, PoolingMode::kSum),
                  std::out_of_range);
}

TEST_CASE("forward with fp16 and bf16 weights sums the rounded values in fp32", "[profiler][reference][forward]") {
  // One table, 2 rows x dim 2, batch 1, bag {0, 0, 1}.
  const std::vector<TableShape> shapes = {{2, 2}};
  const EmbeddingBagLayout layout = make_embedding_bag_layout(shapes, 1);
  const std::vector<float> values = {0.1f, 1.0f / 3.0f, 1000.3f, -3.0f};
  const std::vector<std::int64_t> indices = {0, 0, 1};
  const std::vector<std::int64_t> offsets = {0, 3};

  SECTION("fp16") {
    const auto w = HostEmbeddingWeights::from_floats(WeightPrecision::kFp16, values);
    // Stored: 0.1 -> 0.0999755859375, 1/3 -> 0.333251953125, 1000.3 -> 1000.5 (spacing 0.5), -3 exact.
    CHECK(w.to_floats() == std::vector<float>{0.0999755859375f, 0.333251953125f, 1000.5f, -3.0f});
    const auto out = embedding_bag_forward_reference(layout, w, indices, offsets, PoolingMode::kSum);
    CHECK(out == std::vector<float>{1000.699951171875f, -2.33349609375f});
  }
  SECTION("bf16") {
    const auto w = HostEmbeddingWeights::from_floats(WeightPrecision::kBf16, values);
    // Stored: 0.1 -> 0.10009765625, 1/3 -> 0.333984375, 1000.3 -> 1000 (spacing 4), -3 exact.
    CHECK(w.to_floats() == std::vector<float>{0.10009765625f, 0.333984375f, 1000.0f, -3.0f});
    const auto out = embedding_bag_forward_reference(layout, w, indices, offsets, PoolingMode::kSum);
    CHECK(out == std::vector<float>{1000.2001953125f, -2.33203125f});
  }
}

}  // namespace perfcast_test_profiler_embedding_bag_forward_reference_test
