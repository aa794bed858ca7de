#pragma once
// Helpers of the DLRM graph tests: source paths and the ops of a rank by name.
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include "model/graph/execution_graph.hpp"

namespace perfcast::test {

/// A file of the source tree (PERFCAST_SOURCE_DIR is set by tests/CMakeLists.txt).
inline std::string src(const std::string& rel) { return std::string(PERFCAST_SOURCE_DIR) + "/" + rel; }

/// The op `name` of `rank`; fails the test when there is none.
inline const Op& op_named(const ExecutionGraph& g, int rank, const std::string& name) {
  for (const auto& op : g.ranks[static_cast<std::size_t>(rank)].ops)
    if (op.name == name) return op;
  FAIL("no op " << name << " on rank " << rank);
  throw std::logic_error("unreachable");
}

inline bool has_op(const ExecutionGraph& g, int rank, const std::string& name) {
  for (const auto& op : g.ranks[static_cast<std::size_t>(rank)].ops)
    if (op.name == name) return true;
  return false;
}

}  // namespace perfcast::test
