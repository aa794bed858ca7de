#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "predictors/index_data.hpp"
#include "predictors/index_stats_file.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_predictors_index_data_test {

using namespace perfcast;
namespace fs = std::filesystem;

namespace {

/// Writes values as raw little-endian int32 or int64 (the test host is little-endian, as
/// every CUDA host is; the reader assembles bytes explicitly).
fs::path write_raw(const std::string& name, const std::vector<std::int64_t>& v, IndexDType t) {
  const fs::path dir = fs::temp_directory_path() / "perfcast_index_data_test";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream out(p, std::ios::binary);
  for (auto x : v) {
    if (t == IndexDType::kInt32) {
      const auto y = static_cast<std::int32_t>(x);
      out.write(reinterpret_cast<const char*>(&y), 4);
    } else {
      out.write(reinterpret_cast<const char*>(&x), 8);
    }
  }
  return p;
}

fs::path write_text(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / "perfcast_index_data_test";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p;
}

// T = 2 tables, B = 3 bags. Table 0 bags: {5, 5, 7}, {5}, {}; table 1: {0, 1}, {1, 1, 1, 1}, {2}.
const std::vector<std::int64_t> kIndices = {5, 5, 7, 5, 0, 1, 1, 1, 1, 1, 2};
const std::vector<std::int64_t> kOffsets = {0, 3, 4, 4, 6, 10, 11};
const std::vector<std::int64_t> kLengths = {3, 1, 0, 2, 4, 1};

IndexData data(std::vector<std::int64_t> idx, std::vector<std::int64_t> bags, BagEncoding enc) {
  IndexData d;
  d.indices = std::move(idx);
  d.bags = std::move(bags);
  d.encoding = enc;
  d.tables = 2;
  d.batch = 3;
  d.indices_file = "idx.bin";
  d.bags_file = enc == BagEncoding::kOffsets ? "off.bin" : "len.bin";
  return d;
}

/// The hand-worked statistics of the tiny batch above.
void check_tiny(const TableBatchStats& t0, const TableBatchStats& t1) {
  // Table 0: 4 accesses, rows 5 (3 times: bin (2,4]) and 7 (once: bin (0,1]).
  CHECK(t0.accesses == 4);
  CHECK(t0.unique_rows == 2);
  CHECK(t0.unique_shares[0] == Approx(0.5));
  CHECK(t0.unique_shares[2] == Approx(0.5));
  CHECK(t0.access_shares[0] == Approx(0.25));
  CHECK(t0.access_shares[2] == Approx(0.75));
  // Bag lengths 3, 1, 0: mean 4/3, variance 10/3 - 16/9 = 14/9.
  CHECK(t0.pooling_mean == Approx(4.0 / 3));
  CHECK(t0.pooling_stddev == Approx(std::sqrt(14.0) / 3));
  CHECK(t0.max_index == 7);
  // Table 1: 7 accesses; row 1 five times (bin (4,8]), rows 0 and 2 once.
  CHECK(t1.accesses == 7);
  CHECK(t1.unique_rows == 3);
  CHECK(t1.unique_shares[0] == Approx(2.0 / 3));
  CHECK(t1.unique_shares[3] == Approx(1.0 / 3));
  CHECK(t1.access_shares[3] == Approx(5.0 / 7));
  CHECK(t1.pooling_mean == Approx(7.0 / 3));
  CHECK(t1.pooling_stddev == Approx(std::sqrt(14.0) / 3));  // lengths 2, 4, 1: 21/3 - 49/9
}

}  // namespace

TEST_CASE("reuse bins and derived shares: hand values", "[index_stats]") {
  CHECK(reuse_bin(1) == 0);
  CHECK(reuse_bin(2) == 1);
  CHECK(reuse_bin(3) == 2);
  CHECK(reuse_bin(4) == 2);
  CHECK(reuse_bin(5) == 3);
  CHECK(reuse_bin(32768) == 15);
  CHECK(reuse_bin(32769) == 16);
  CHECK(reuse_bin_count(2) == Approx(3.5));  // counts 3 and 4
  // Half the accesses in (0,1] and half in (1,2]: unique shares 0.5 : 0.25 -> 2/3, 1/3.
  ReuseHistogram a{};
  a[0] = 0.5;
  a[1] = 0.5;
  const ReuseHistogram u = unique_shares_from_access_shares(a);
  CHECK(u[0] == Approx(2.0 / 3));
  CHECK(u[1] == Approx(1.0 / 3));
}

TEST_CASE("Zipf fit reproduces the exponent that made the unique count", "[index_stats]") {
  for (double alpha : {0.5, 0.9, 1.2}) {
    const double u = expected_unique_rows(IndexDistribution::zipf(alpha), 1e6, 2e5);
    CHECK(fit_zipf_alpha(1e6, 2e5, u) == Approx(alpha).epsilon(1e-3));
  }
  // As many unique rows as uniform draws give: no skew.
  CHECK(fit_zipf_alpha(1e6, 2e5, expected_unique_rows(IndexDistribution::uniform(), 1e6, 2e5)) == 0.0);
}

TEST_CASE("raw index data: offsets, bag starts and lengths give the hand-worked stats", "[index_stats]") {
  for (auto t : {IndexDType::kInt32, IndexDType::kInt64}) {
    const auto pi = write_raw("idx.bin", kIndices, t);
    const auto po = write_raw("off.bin", kOffsets, t);
    IndexData d = data(read_index_array(pi, t), read_index_array(po, t), BagEncoding::kOffsets);
    const auto s = compute_index_stats(d, {});
    REQUIRE(s.size() == 2);
    check_tiny(s[0], s[1]);
  }
  // Bag starts (T*B entries, the last bag ends at the array's end) and lengths.
  const auto starts = compute_index_stats(data(kIndices, {0, 3, 4, 4, 6, 10}, BagEncoding::kOffsets), {});
  REQUIRE(starts.size() == 2);
  check_tiny(starts[0], starts[1]);
  const auto lens = compute_index_stats(data(kIndices, kLengths, BagEncoding::kLengths), {});
  REQUIRE(lens.size() == 2);
  check_tiny(lens[0], lens[1]);

  // Two batches: batch-relative CSR offsets and absolute ones agree.
  std::vector<std::int64_t> idx2 = kIndices;
  idx2.insert(idx2.end(), kIndices.begin(), kIndices.end());
  std::vector<std::int64_t> rel = kOffsets, abs = kOffsets;
  rel.insert(rel.end(), kOffsets.begin(), kOffsets.end());
  for (auto o : kOffsets) abs.push_back(o + 11);
  for (const auto& off : {rel, abs}) {
    const auto s = compute_index_stats(data(idx2, off, BagEncoding::kOffsets), {});
    REQUIRE(s.size() == 4);
    CHECK(s[2].batch_index == 1);
    check_tiny(s[2], s[3]);
  }

  // Summary with rows and dim: working set and L2 share; rows declared -> a Zipf fit.
  IndexStatsOptions opt;
  opt.rows = {8, 3};
  opt.dim = 4;
  opt.l2_cache = 64;
  const auto sum = summarize_index_stats(compute_index_stats(data(kIndices, kOffsets, BagEncoding::kOffsets), opt), opt);
  REQUIRE(sum.size() == 2);
  CHECK(sum[0].working_set_bytes == Approx(2 * 4 * 4.0));
  CHECK(sum[0].working_set_over_l2 == Approx(0.5));
  CHECK(sum[0].mean_reuse_measured() == Approx(2.0));
  REQUIRE(sum[0].zipf_alpha.has_value());
  CHECK(*sum[0].zipf_alpha > 0);  // 2 unique of 4 draws over 8 rows: fewer than uniform's 3.3
  // Without --rows only the largest index + 1 is known, and nothing is fitted.
  const auto bare = summarize_index_stats(compute_index_stats(data(kIndices, kOffsets, BagEncoding::kOffsets), {}), {});
  CHECK(bare[0].rows == 8);
  CHECK_FALSE(bare[0].rows_declared);
  CHECK_FALSE(bare[0].zipf_alpha.has_value());
  CHECK(summary_distribution(bare[0], false).kind == IndexDistribution::Kind::kReuseHistogram);
}

TEST_CASE("raw index data: bad input names the file and the problem", "[index_stats]") {
  using Catch::Contains;
  CHECK_THROWS_WITH(compute_index_stats(data(kIndices, {0, 3, 2, 4, 6, 10, 11}, BagEncoding::kOffsets), {}),
                    Contains("off.bin: entry 2") && Contains("must not decrease"));
  CHECK_THROWS_WITH(compute_index_stats(data(kIndices, {0, 3, 4, 4, 6}, BagEncoding::kOffsets), {}),
                    Contains("off.bin") && Contains("expected a multiple of T*B+1 = 7"));
  CHECK_THROWS_WITH(compute_index_stats(data(kIndices, {0, 3, 4, 4, 6, 10, 12}, BagEncoding::kOffsets), {}),
                    Contains("off.bin: entry 6") && Contains("outside the 11 indices of idx.bin"));
  CHECK_THROWS_WITH(compute_index_stats(data(kIndices, {0, 3, 4, 4, 6, 10, 10}, BagEncoding::kOffsets), {}),
                    Contains("the offsets end at 10 but idx.bin holds 11"));
  CHECK_THROWS_WITH(compute_index_stats(data(kIndices, {3, 1, 0, 2, 4, 2}, BagEncoding::kLengths), {}),
                    Contains("len.bin") && Contains("add up to 12"));
  CHECK_THROWS_WITH(compute_index_stats(data(kIndices, {3, -1, 2, 2, 4, 1}, BagEncoding::kLengths), {}),
                    Contains("len.bin: entry 1: negative bag length"));
  IndexStatsOptions opt;
  opt.rows = {6};
  CHECK_THROWS_WITH(compute_index_stats(data(kIndices, kOffsets, BagEncoding::kOffsets), opt),
                    Contains("idx.bin: entry 2: index 7 of table 0 (batch 0) is outside [0, 6)"));
  auto neg = kIndices;
  neg[5] = -1;
  CHECK_THROWS_WITH(compute_index_stats(data(neg, kOffsets, BagEncoding::kOffsets), {}), Contains("entry 5: negative index -1"));
  opt.rows = {6, 6, 6};
  CHECK_THROWS_WITH(compute_index_stats(data(kIndices, kOffsets, BagEncoding::kOffsets), opt), Contains("one per table (2)"));
  // A file whose size is not whole values.
  const auto odd = write_text("odd.bin", "12345");
  CHECK_THROWS_WITH(read_index_array(odd, IndexDType::kInt32), Contains("odd.bin") && Contains("5 bytes is not a whole number"));
  CHECK_THROWS_WITH(read_index_array("/nonexistent/idx.bin", IndexDType::kInt64), Contains("cannot open"));
}

TEST_CASE("stats files: our JSON round-trips, CSV reads, errors name file and line", "[index_stats]") {
  IndexStatsOptions opt;
  opt.rows = {100000};
  opt.dim = 64;
  // A Zipf-like stats row: 40000 draws over 100000 rows with 12000 unique.
  const auto csv = write_text("stats.csv", "table,rows,batch,accesses,unique_rows,pooling_mean\nads_0,100000,2000,40000,12000,20\n");
  const auto from_csv = read_index_stats_file(csv, opt);
  REQUIRE(from_csv.size() == 1);
  CHECK(from_csv[0].name == "ads_0");
  CHECK(from_csv[0].working_set_bytes == Approx(12000 * 64 * 4.0));
  REQUIRE(from_csv[0].zipf_alpha.has_value());
  const double alpha = *from_csv[0].zipf_alpha;
  CHECK(expected_unique_rows(IndexDistribution::zipf(alpha), 100000, 40000) == Approx(12000).epsilon(1e-3));

  const auto json_path = write_text("stats.json", index_stats_to_json(from_csv, {}, 50e6).dump(2));
  const auto back = read_index_stats_file(json_path, opt);
  REQUIRE(back.size() == 1);
  CHECK(back[0].name == "ads_0");
  CHECK(back[0].accesses == Approx(40000));
  CHECK(back[0].unique_rows == Approx(12000));
  CHECK(*back[0].zipf_alpha == Approx(alpha).epsilon(1e-6));
  const auto dist = distributions_to_json(back, false);
  CHECK(dist[0]["distribution"]["kind"] == "zipf");

  using Catch::Contains;
  const auto bad_col = write_text("bad_col.csv", "table,rows,batch,accesses\nx,1,1,1\n");
  CHECK_THROWS_WITH(read_index_stats_file(bad_col, opt), Contains("bad_col.csv: line 1") && Contains("unique_rows"));
  // A column named twice (found by fuzz_calibrate in the measurement tables, which share the
  // header rule): refused, not read past the record's end.
  const auto twice = write_text("twice.csv", "table,rows,batch,accesses,unique_rows,rows\nx,1,1,1,1,1\n");
  CHECK_THROWS_WITH(read_index_stats_file(twice, opt), Contains("twice.csv: line 1") && Contains("\"rows\" appears twice"));
  const auto bad_num = write_text("bad_num.csv", "table,rows,batch,accesses,unique_rows\nx,100,10,50,abc\n");
  CHECK_THROWS_WITH(read_index_stats_file(bad_num, opt), Contains("bad_num.csv: line 2: column unique_rows"));
  const auto too_many = write_text("too_many.json",
                                   R"({"schema": "perfcast.index_stats", "schema_version": "1.0", "tables": [{"rows": 10, "batch": 1, "accesses": 5, "unique_rows": 6}]})");
  CHECK_THROWS_WITH(read_index_stats_file(too_many, opt), Contains("too_many.json: /tables/0/unique_rows"));
}

TEST_CASE("Meta locality stats: a small file and errors by line", "[index_stats]") {
  std::string block = "fbgemm_t4_bs8_0.pt\nLocality stats after processing 1 batches of size 8\nAvg # of indices: 100\n"
                      "Avg # of unique cols: 40\nAvg col size: 2.5\nHistogram of col sizes:\n(0, 1]: 0.500\n(1, 2]: 0.500\n";
  for (int i = 2; i < 16; ++i) block += fmt::format("({}, {}]: 0.000\n", 1 << (i - 1), 1 << i);
  block += "(32768+: 0.000\n[0, 1, 2]\n['0.000', '0.500']\nRatio of index distribution at different column sizes:\n(0, 1]: 0.333\n(1, 2]: 0.667\n";
  for (int i = 2; i < 16; ++i) block += fmt::format("({}, {}]: 0.000\n", 1 << (i - 1), 1 << i);
  block += "(32768+: 0.000\n";
  const auto good = write_text("loc.txt", block + "\n" + block);
  const auto blocks = read_locality_stats(good);
  REQUIRE(blocks.size() == 2);
  CHECK(blocks[1].line == 45);  // 43 lines a block, one blank line between
  CHECK(blocks[0].batch_size == 8);
  CHECK(blocks[0].indices == 100);
  CHECK(blocks[0].access_shares[1] == Approx(0.667));
  const TableIndexSummary s = locality_summary(blocks[0], tables_from_dataset_name(blocks[0].dataset));
  CHECK(s.pooling_mean == Approx(100.0 / (8 * 4)));
  // Reconstructed unique shares: 0.333 / 1 : 0.667 / 2 -> 0.5 : 0.5.
  CHECK(s.unique_shares[0] == Approx(0.5).epsilon(1e-3));
  CHECK(tables_from_dataset_name("fbgemm_t856_bs65536_15.pt") == 856);
  // Our JSON keeps what the locality block gives (no rows, no pooling spread) and reads back.
  const auto json_path = write_text("loc_stats.json", index_stats_to_json({s}, {}, 0).dump(2));
  const auto back = read_index_stats_file(json_path, {});
  REQUIRE(back.size() == 1);
  CHECK(back[0].rows == 0);
  CHECK_FALSE(back[0].rows_declared);
  CHECK_FALSE(back[0].pooling_stddev_known);
  CHECK(back[0].unique_shares[1] == Approx(s.unique_shares[1]).epsilon(1e-5));
  CHECK(summary_distribution(back[0], false).kind == IndexDistribution::Kind::kReuseHistogram);

  using Catch::Contains;
  std::string broken = block;
  broken.replace(broken.find("(1, 2]: 0.500"), 13, "(1, 2]: x");
  CHECK_THROWS_WITH(read_locality_stats(write_text("broken.txt", broken)), Contains("broken.txt: line 8"));
  CHECK_THROWS_WITH(read_locality_stats(write_text("junk.txt", "hello\n")), Contains("junk.txt: line 1: expected a dataset name"));
}

TEST_CASE("Meta locality stats of the public DLRM datasets", "[index_stats][data]") {
  const fs::path dir = fs::path(PERFCAST_SOURCE_DIR) / "data" / "dlrm-datasets-locality";
  const fs::path f2021 = dir / "locality_stats_2021_t856_bs65536.txt";
  const fs::path f2022 = dir / "locality_stats_2022_t788_bs131072.txt";
  REQUIRE(fs::exists(f2021));
  REQUIRE(fs::exists(f2022));
  const auto b21 = read_locality_stats(f2021);
  const auto b22 = read_locality_stats(f2022);
  CHECK(b21.size() == 17);
  CHECK(b22.size() == 16);
  CHECK(b21[0].dataset == "fbgemm_t856_bs65536.pt");
  CHECK(b21[0].batch_size == 65536);
  CHECK(b21[0].indices == 887017990);
  CHECK(b21[0].unique == 128435723);
  CHECK(b21[0].unique_shares[0] == Approx(0.473));
  CHECK(b21[0].access_shares[16] == Approx(0.019));
  CHECK(b22[0].access_shares[16] == Approx(0.076));
  for (const auto* blocks : {&b21, &b22}) {
    for (const auto& b : *blocks) {
      const TableIndexSummary s = locality_summary(b, tables_from_dataset_name(b.dataset));
      INFO(b.dataset);
      // The histogram reconstructed from access shares implies the measured mean reuse
      // (indices / unique) to within the 3-decimal rounding and bin-midpoint error.
      CHECK(mean_reuse(s.unique_shares) == Approx(b.indices / b.unique).epsilon(0.15));
      // The printed unique shares lose the heavy bins and under-state the reuse.
      CHECK(mean_reuse(b.unique_shares) < mean_reuse(s.unique_shares));
    }
  }
}

}  // namespace perfcast_test_predictors_index_data_test
