#pragma once
// Test helpers shared by the validation tests: shards and small DLRM table lists built in code.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"

namespace perfcast::test {

/// A shard covering rows [row_off, row_off + rows) x columns [col_off, col_off + cols) on `rank`.
inline Shard shard(std::int64_t row_off, std::int64_t rows, std::int64_t col_off, std::int64_t cols, int rank) {
  Shard s;
  s.row_offset = row_off, s.rows = rows, s.col_offset = col_off, s.cols = cols, s.rank = rank;
  return s;
}

/// Appends one table per (name, rows) pair, all of width `dim` and mean pooling `pooling`.
inline void add_tables(DlrmSpec& w, std::initializer_list<std::pair<const char*, std::int64_t>> tables,
                       std::int32_t dim, double pooling) {
  for (const auto& [name, rows] : tables) {
    EmbeddingTableSpec t;
    t.name = name;
    t.rows = rows;
    t.dim = dim;
    t.pooling = pooling;
    w.tables.push_back(t);
  }
}

}  // namespace perfcast::test
