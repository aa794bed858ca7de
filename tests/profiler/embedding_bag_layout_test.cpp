#include <cstdint>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "profiler/embedding_bag_layout.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_profiler_embedding_bag_layout_test {

using namespace perfcast::profiler;

TEST_CASE("layout packs tables and derives offsets", "[profiler][layout]") {
  const std::vector<TableShape> shapes = {{3, 2}, {5, 7}, {1, 4}};
  const EmbeddingBagLayout layout = make_embedding_bag_layout(shapes, 4);
  REQUIRE(layout.num_tables() == 3);
  CHECK(layout.batch_size == 4);
  CHECK(layout.num_bags() == 12);
  CHECK(layout.total_rows == 9);
  CHECK(layout.total_dim == 13);
  CHECK(layout.max_dim == 7);
  CHECK(layout.total_weight_elements == 3 * 2 + 5 * 7 + 1 * 4);

  CHECK(layout.tables[0].row_offset == 0);
  CHECK(layout.tables[1].row_offset == 3);
  CHECK(layout.tables[2].row_offset == 8);
  CHECK(layout.tables[0].weight_offset == 0);
  CHECK(layout.tables[1].weight_offset == 6);
  CHECK(layout.tables[2].weight_offset == 41);
  CHECK(layout.tables[0].output_offset == 0);
  CHECK(layout.tables[1].output_offset == 2);
  CHECK(layout.tables[2].output_offset == 9);
  CHECK(layout.tables[1].dim == 7);
  CHECK(layout.tables[1].rows == 5);
}

TEST_CASE("layout rejects bad shapes", "[profiler][layout]") {
  const std::vector<TableShape> none;
  CHECK_THROWS_AS(make_embedding_bag_layout(none, 1), std::invalid_argument);
  const std::vector<TableShape> ok = {{2, 4}};
  CHECK_THROWS_AS(make_embedding_bag_layout(ok, 0), std::invalid_argument);
  const std::vector<TableShape> zero_dim = {{2, 0}};
  CHECK_THROWS_AS(make_embedding_bag_layout(zero_dim, 1), std::invalid_argument);
  const std::vector<TableShape> big_dim = {{2, 1025}};
  CHECK_THROWS_AS(make_embedding_bag_layout(big_dim, 1), std::invalid_argument);
  const std::vector<TableShape> no_rows = {{0, 4}};
  CHECK_THROWS_AS(make_embedding_bag_layout(no_rows, 1), std::invalid_argument);
  const std::vector<TableShape> max_dim = {{2, 1024}};
  CHECK_NOTHROW(make_embedding_bag_layout(max_dim, 1));
}

TEST_CASE("batch validation checks offsets and indices", "[profiler][layout]") {
  const std::vector<TableShape> shapes = {{3, 2}, {2, 1}};
  const EmbeddingBagLayout layout = make_embedding_bag_layout(shapes, 2);
  const std::vector<std::int64_t> indices = {0, 2, 1, 1, 0};
  CHECK_NOTHROW(validate_embedding_bag_batch(layout, indices, std::vector<std::int64_t>{0, 2, 3, 3, 5}));
  // Wrong length, non-zero start, decreasing, wrong end.
  CHECK_THROWS_AS(validate_embedding_bag_batch(layout, indices, std::vector<std::int64_t>{0, 2, 3, 5}),
                  std::invalid_argument);
  CHECK_THROWS_AS(validate_embedding_bag_batch(layout, indices, std::vector<std::int64_t>{1, 2, 3, 3, 5}),
                  std::invalid_argument);
  CHECK_THROWS_AS(validate_embedding_bag_batch(layout, indices, std::vector<std::int64_t>{0, 3, 2, 3, 5}),
                  std::invalid_argument);
  CHECK_THROWS_AS(validate_embedding_bag_batch(layout, indices, std::vector<std::int64_t>{0, 2, 3, 3, 4}),
                  std::invalid_argument);
  // Index 2 is valid in table 0 (3 rows) but not in table 1 (2 rows); negative never is.
  const std::vector<std::int64_t> bad_t1 = {0, 2, 1, 2, 0};
  CHECK_THROWS_AS(validate_embedding_bag_batch(layout, bad_t1, std::vector<std::int64_t>{0, 2, 3, 3, 5}),
                  std::out_of_range);
  const std::vector<std::int64_t> negative = {0, -1, 1, 1, 0};
  CHECK_THROWS_AS(validate_embedding_bag_batch(layout, negative, std::vector<std::int64_t>{0, 2, 3, 3, 5}),
                  std::out_of_range);
}

}  // namespace perfcast_test_profiler_embedding_bag_layout_test
