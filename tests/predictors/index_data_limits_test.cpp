// Index files from elsewhere: offsets and lengths whose sums would overflow int64, table
// counts and batch sizes whose product would, and row counts beyond limits::kMaxRows
// (the Zipf sums stopped advancing at 2^53 rows and never returned).
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/json_reader.hpp"
#include "core/limits.hpp"
#include "predictors/index_data.hpp"
#include "predictors/index_stats_file.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_predictors_index_data_limits_test {

using namespace perfcast;

namespace {
IndexData two_tables(std::vector<std::int64_t> bags, BagEncoding enc, std::int64_t batch = 1) {
  IndexData d;
  d.indices = {0, 1, 2, 3};
  d.bags = std::move(bags);
  d.encoding = enc;
  d.tables = 2;
  d.batch = batch;
  d.indices_file = "idx.bin";
  d.bags_file = enc == BagEncoding::kOffsets ? "off.bin" : "len.bin";
  return d;
}

std::string error_of(const IndexData& d, const IndexStatsOptions& opt = {}) {
  try {
    (void)compute_index_stats(d, opt);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
}  // namespace

TEST_CASE("index data: offsets and lengths near int64 overflow are errors", "[index][limits]") {
  // Batch-relative CSR offsets: the second batch's are added to the first batch's end.
  CHECK(error_of(two_tables({0, 1, 2, 0, 1, kMax}, BagEncoding::kOffsets)) ==
        "off.bin: entry 5: offset 9223372036854775807 lies outside the 4 indices of idx.bin");
  CHECK(error_of(two_tables({2, kMax}, BagEncoding::kLengths)) ==
        "len.bin: entry 1: the lengths up to here add up to more than 2^63 (the file holds 4 indices)");
  CHECK(error_of(two_tables({2, 2}, BagEncoding::kLengths, kMax)) ==
        "len.bin: /: 2 tables x batch 9223372036854775807 is more than 281474976710656 bags (core/limits.hpp)");
  // Valid data still gives its statistics.
  const auto s = compute_index_stats(two_tables({2, 2}, BagEncoding::kLengths), {});
  REQUIRE(s.size() == 2);
  CHECK(s[1].accesses == 2);
}

TEST_CASE("index data: rows beyond the limit are refused", "[index][limits]") {
  IndexStatsOptions opt;
  opt.rows = {std::int64_t{1} << 53};
  CHECK(error_of(two_tables({2, 2}, BagEncoding::kLengths), opt) ==
        "--rows: /: rows must be in [1, 281474976710656] (core/limits.hpp), got 9007199254740992");
  opt.rows = {limits::kMaxRows};
  const auto stats = compute_index_stats(two_tables({2, 2}, BagEncoding::kLengths), opt);
  const auto summary = summarize_index_stats(stats, opt);
  REQUIRE(summary.size() == 2);
  CHECK(summary[0].zipf_alpha.has_value());  // the Zipf fit at 2^48 rows returns
}

TEST_CASE("index data: without --rows an index is bounded by the rows perfcast reads", "[index][limits]") {
  // 2^63 - 1 used to pass and overflow when the table's rows were taken as the largest index + 1.
  IndexData d = two_tables({2, 2}, BagEncoding::kLengths);
  d.indices[3] = kMax;
  CHECK(error_of(d) == "idx.bin: entry 3: index 9223372036854775807 in table 1 (batch 0) is beyond the 281474976710656 "
                       "rows perfcast reads (core/limits.hpp)");
  d.indices[3] = limits::kMaxRows - 1;
  CHECK(error_of(d) == "no error");
}

TEST_CASE("locality stats: a header line cut after \"processing\" is bad input (found by fuzz_index)", "[index_stats][limits]") {
  const auto path = std::filesystem::temp_directory_path() / "perfcast_locality_cut.txt";
  { std::ofstream(path) << "fbgemm_t856_bs65536.pt\nLocality stats after processing \n"; }
  std::string what = "no error";
  try {
    (void)read_locality_stats(path);
  } catch (const ConfigError& e) {
    what = e.what();
  }
  CHECK_THAT(what, Catch::Contains("perfcast_locality_cut.txt: line 2: expected \"Locality stats after processing N batches"));
  // Batch counts beyond the limits, and the name's table count beyond int.
  { std::ofstream(path) << "fbgemm_t856_bs65536.pt\nLocality stats after processing 99999999999999999999 batches of size 8\n"; }
  CHECK_THROWS_AS(read_locality_stats(path), ConfigError);
  CHECK(tables_from_dataset_name("fbgemm_t99999999999999999999_bs1.pt") == 0);
  CHECK(tables_from_dataset_name("fbgemm_t856_bs65536_15.pt") == 856);
  std::filesystem::remove(path);
}

}  // namespace perfcast_test_predictors_index_data_limits_test
