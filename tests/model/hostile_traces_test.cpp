// Execution traces from elsewhere: long parent chains in linear-time passes, shape
// products that would overflow int64, tensors with impossible sizes, rank numbers in
// file names beyond int.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "core/json_reader.hpp"
#include "model/traces/execution_trace.hpp"

using namespace perfcast;

namespace {
std::string et_error(const std::string& text) {
  try {
    (void)parse_execution_trace(text, "et.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

/// Two interleaved chains of nested ops (odd ids nest in odd ids, even in even), node k
/// reading the tensor node k-1 of the other chain wrote. The writer is no ancestor of the
/// reader, so the dependency pass checked ancestry up the whole chain at every level it
/// lifted the writer: up to 1,024 x 1,024 steps per node.
std::string two_chains(int n) {
  std::string nodes;
  for (int k = 1; k <= n; ++k) {
    if (k > 1) nodes += ",";
    nodes += fmt::format(R"({{"id": {}, "name": "op{}", "parent": {}, "inputs": [[{}, 1, 0, 4, 4, "cuda:0"]],)"
                         R"( "outputs": [[{}, 1, 0, 4, 4, "cuda:0"]]}})",
                         k, k, std::max(0, k - 2), k - 1, k);
  }
  return R"({"schema": "1.0.1", "nodes": [)" + nodes + "]}";
}
}  // namespace

TEST_CASE("execution trace: long parent chains are linear work per level", "[execution_trace][limits]") {
  // 6 nodes, worked by hand: node 6 (chain 2-4-6) reads what node 5 (chain 1-3-5) wrote;
  // the writer is lifted to its outermost ancestor that does not enclose the reader: node 1.
  const ExecutionTrace small = parse_execution_trace(two_chains(6), "small.json");
  CHECK(small.nodes[5].data_deps == std::vector<int>{0});
  CHECK(small.nodes[4].data_deps == std::vector<int>{1});  // node 5 reads node 4's, lifted to node 2
  // 20,000 nodes (10,000 levels each chain): minutes before, now well under a second.
  const ExecutionTrace et = parse_execution_trace(two_chains(20000), "chains.json");
  REQUIRE(et.nodes.size() == 20000);
  CHECK(et.nodes[19999].data_deps.size() == 1);
}

TEST_CASE("execution trace: shape products and tensor sizes beyond int64 are errors", "[execution_trace][limits]") {
  const std::string shapes = R"({"schema": "1.0.1", "nodes": [{"id": 1, "name": "a", "input_shapes": [[[4294967296, 4294967296, 4]]]}]})";
  CHECK(et_error(shapes) == "et.json: /nodes/0/input_shapes: a tensor with more than 9007199254740991 elements");
  const std::string big = R"({"schema": "1.0.1", "nodes": [{"id": 1, "name": "a", "input_shapes": [[18446744073709551615]]}]})";
  CHECK(et_error(big) == "et.json: /nodes/0/input_shapes: a size larger than 9007199254740991: 18446744073709551615");
  const std::string tensor = R"({"schema": "1.0.1", "nodes": [{"id": 1, "name": "a", "inputs": [[1, 1, 0, -4, 4, "cuda:0"]]}]})";
  CHECK_THAT(et_error(tensor), Catch::Contains("et.json: /nodes/0/inputs: a tensor [id, storage, offset, numel"));
  const std::string deep = R"({"schema": "1.0.1", "nodes": )" + std::string(1000, '[') + std::string(1000, ']') + "}";
  CHECK_THAT(et_error(deep), Catch::Contains("nest deeper than 128 levels"));
}

TEST_CASE("execution trace pairing: rank numbers beyond int in file names are not ranks", "[execution_trace][limits]") {
  const std::string text = R"({"schema": "1.0.1", "nodes": [{"id": 1, "name": "a"}]})";
  ExecutionTrace a = parse_execution_trace(text, "rank_99999999999999999999.json");
  a.pid = -1;
  KinetoTrace t;
  t.file = "worker_99999999999999999999.json";
  CHECK(pair_execution_traces({a}, {t}) == std::vector<int>{0});  // falls back to order; std::stoi threw
}
