// Execution traces from elsewhere: long parent chains in linear-time passes, shape
// products that would overflow int64, tensors with impossible sizes, rank numbers in
// file names beyond int.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

#include <fmt/format.h>
#include <zlib.h>

#include "core/json_reader.hpp"
#include "model/traces/execution_trace.hpp"
#include "model/traces/trace_input.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_hostile_traces_test {

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

namespace {
/// `text` as one gzip member (zlib's deflate with the gzip wrapper).
std::string gzip_member(const std::string& text) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, text.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  return out;
}
std::string error_of_gunzip(const std::string& bytes, std::uint64_t* budget = nullptr) {
  try {
    (void)gunzip(bytes, "t.gz", budget);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("gzip: every member of a multi-member file, nothing after it, one budget for all", "[trace_input][limits]") {
  // cat a.gz b.gz (and bgzip) used to give only the first member's text.
  const std::string two = gzip_member(R"({"traceEvents": [)") + gzip_member(R"(]})");
  CHECK(gunzip(two, "t.gz") == R"({"traceEvents": []})");
  CHECK(error_of_gunzip(gzip_member("{}") + "junk") == "t.gz: /: 4 bytes after the end of the gzip data are not a gzip member");
  // The budget is shared: 3 members of 1,000 bytes under a budget of 2,500 stop at the third.
  const std::string kb(1000, 'x');
  std::uint64_t budget = 2500;
  CHECK(gunzip(gzip_member(kb), "a", &budget).size() == 1000);
  CHECK(gunzip(gzip_member(kb), "b", &budget).size() == 1000);
  CHECK(budget == 500);
  CHECK_THAT(error_of_gunzip(gzip_member(kb), &budget), Catch::StartsWith("t.gz: /:"));
}

}  // namespace perfcast_test_model_hostile_traces_test
