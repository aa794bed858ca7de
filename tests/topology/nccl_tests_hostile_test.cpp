// Hostile nccl-tests logs and CSV tables: bounded scanning (no std::regex recursion),
// finite sizes and times, rank counts within the limits, UTF-8 text.
#include <cmath>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "core/input_file.hpp"
#include "core/json_reader.hpp"
#include "core/limits.hpp"
#include "topology/collective_calibration.hpp"
#include "topology/measurement_table_csv.hpp"
#include "topology/system_spec.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_topology_nccl_tests_hostile_test {

using namespace perfcast;

namespace {
std::string src(const std::string& rel) { return std::string(PERFCAST_SOURCE_DIR) + "/" + rel; }

std::string handwritten() { return read_input_file(src("tests/data/handwritten_all_reduce_perf.txt")); }

/// The hand-written log with its first data row's size replaced.
std::string with_first_size(const std::string& size) {
  std::string t = handwritten();
  const auto p = t.find("     1048576 ");
  t.replace(p, 12, std::string(12 - std::min<std::size_t>(12, size.size()), ' ') + size);
  return t;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("nccl-tests: long lines neither recurse nor pass the line limit", "[nccl-tests][limits]") {
  // A 60,000-character comment line overflowed std::regex's recursion (SIGSEGV); now it is skipped.
  std::string t = handwritten();
  t.insert(t.find("#  Rank  0"), "# " + std::string(60000, '(') + "\n#  Rank" + std::string(60000, ' ') + "x\n");
  const CollectiveLog log = parse_collective_log_text(t, "long.txt");
  CHECK(log.samples.size() == 3);
  CHECK(log.gpu == "NVIDIA H100 80GB HBM3");
  // Beyond limits::kMaxTextLineBytes the line is refused, naming it.
  std::string longer = handwritten() + std::string(limits::kMaxTextLineBytes + 1, 'x') + "\n";
  CHECK_THAT(error_of([&] { (void)parse_collective_log_text(longer, "l.txt"); }),
             Catch::Contains("l.txt: line 19: a line of 65537 bytes"));
}

TEST_CASE("nccl-tests: non-finite, negative or huge sizes and times are refused with the line", "[nccl-tests][limits]") {
  for (const char* bad : {"nan", "-nan", "inf", "-1024", "1e400", "1e300"}) {
    INFO(bad);
    CHECK_THAT(error_of([&] { (void)parse_collective_log_text(with_first_size(bad), "bad.txt"); }),
               Catch::Contains("bad.txt: line 13:"));
  }
  std::string t = handwritten();
  t.replace(t.find("20.00"), 5, "  nan");
  CHECK_THAT(error_of([&] { (void)parse_collective_log_text(t, "t.txt"); }), Catch::Contains("t.txt: line 13:"));
  // CSV: the same rules per row; a GPU count beyond the limits in the name is an error, not std::stoi's.
  const std::string csv = "size(B),count,type,time(ns)\n-8,2,float,1000\n";
  CHECK_THAT(error_of([&] { (void)parse_collective_log_text(csv, "AR_GPU8_x.csv"); }), Catch::Contains("AR_GPU8_x.csv: line 2:"));
  const std::string ok = "size(B),count,type,time(ns)\n8,2,float,1000\n";
  CHECK_THAT(error_of([&] { (void)parse_collective_log_text(ok, "AR_GPU99999999999_x.csv"); }),
             Catch::Contains("handles at most 4096 ranks"));
  CHECK(parse_collective_log_text(ok, "AR_GPU8_x.csv").samples.at(0).ranks == 8);
}

TEST_CASE("nccl-tests: text that is not UTF-8 names the line", "[nccl-tests][limits]") {
  std::string t = handwritten();
  t.replace(t.find("NVIDIA H100"), 6, "NVIDIA\xff");
  CHECK_THAT(error_of([&] { (void)parse_collective_log_text(t, "u.txt"); }), Catch::Contains("u.txt: line 6: invalid UTF-8"));
}

TEST_CASE("measurement tables: a column named twice is refused, not read past the record", "[calibration][limits]") {
  // fuzz_calibrate's finding (docs/robustness.md): the header "...,gpu" repeated made the
  // column map one shorter than the header, so a record of that many fields passed the count
  // check and a lookup read beyond its end.
  const std::string header =
      "source_url,gpu,gpus_per_node,nodes,nccl_version,env,collective,bytes,time_us,notes,inplace_time_us,inplace_busbw_GBps";
  CHECK(parse_measurement_table_csv_text(header + "\nx,h100,8,1,2.18,,all_reduce,1024,10,,,\n", "ok.csv").size() == 1);
  CHECK_THROWS_WITH(parse_measurement_table_csv_text(header + ",gpu\nx,h100,8,1,2.18,,all_reduce,1024,10,,,\n", "twice.csv"),
                    Catch::Contains("twice.csv: line 1") && Catch::Contains("\"gpu\" appears twice"));
}

TEST_CASE("collective fit start values on a one-GPU system stay inside the system", "[calibration][limits]") {
  // Ranks {0, 1} were forced on a one-GPU system: a heap overflow under ASan.
  const SystemSpec one = load_system(src("configs/systems/h100_sxm.json"));
  REQUIRE(one.world_size() == 1);
  const auto protocols = nccl_initial_protocols(one);
  REQUIRE(protocols.size() == 3);
  for (const auto& p : protocols) {
    CHECK(std::isfinite(p.a));
    CHECK(p.c > 0);
    CHECK(std::isfinite(p.c));
  }
}

TEST_CASE("systems beyond the GPU limit are refused before any per-pair structure", "[limits]") {
  JsonDocument d = load_json_file(src("configs/systems/dgx_h100.json"));
  apply_override(d, "nodes", "200000");
  CHECK_THAT(error_of([&] { (void)parse_system(d); }), Catch::Contains("/nodes: 200000 nodes x 8 GPUs = 1600000 GPUs"));
  apply_override(d, "nodes", "131072");  // 1,048,576 GPUs: the limit
  CHECK(parse_system(d).world_size() == limits::kMaxGpus);
  apply_override(d, "nodes", "12500");  // 100,000 GPUs
  CHECK(parse_system(d).world_size() == 100000);
}

TEST_CASE("measurement tables: GPU and node counts are whole numbers perfcast can model", "[calibration][limits]") {
  // fuzz_calibrate's finding (docs/robustness.md): nodes = 3.3e85 was converted to int, which is
  // undefined behaviour; a fraction of a node was truncated silently.
  const std::string header =
      "source_url,gpu,gpus_per_node,nodes,nccl_version,env,collective,bytes,time_us,notes,inplace_time_us,inplace_busbw_GBps";
  auto row = [&](const std::string& per_node, const std::string& nodes) {
    return header + "\nx,h100," + per_node + "," + nodes + ",2.18,,all_reduce,1024,10,,,\n";
  };
  const auto two_nodes = parse_measurement_table_csv_text(row("8", "2"), "ok.csv");
  REQUIRE(two_nodes.size() == 1);
  CHECK(two_nodes[0].log.samples.at(0).ranks == 16);
  CHECK(parse_measurement_table_csv_text(row("8", ""), "blank.csv").at(0).log.samples.at(0).ranks == 8);
  CHECK_THROWS_WITH(parse_measurement_table_csv_text(row("8", "3.3e85"), "huge.csv"),
                    Catch::Contains("huge.csv: line 2") && Catch::Contains("column nodes: expected a whole number"));
  CHECK_THROWS_WITH(parse_measurement_table_csv_text(row("8", "1.5"), "half.csv"), Catch::Contains("column nodes"));
  CHECK_THROWS_WITH(parse_measurement_table_csv_text(row("0", "1"), "zero.csv"), Catch::Contains("column gpus_per_node"));
  CHECK_THROWS_WITH(parse_measurement_table_csv_text(row("2048", "1024"), "many.csv"),
                    Catch::Contains("many.csv: line 2") && Catch::Contains("at most 1048576 GPUs"));
}

}  // namespace perfcast_test_topology_nccl_tests_hostile_test
