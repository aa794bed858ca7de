// Hostile input at the core: one JSON parser with a nesting limit and overflow checks,
// bounded file reading, UTF-8 checks, quantity ranges (core/limits.hpp).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "core/input_file.hpp"
#include "core/json_reader.hpp"
#include "core/limits.hpp"
#include "core/units.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_core_input_limits_test {

using namespace perfcast;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("JSON nested beyond the limit is refused before parsing, with its place", "[limits]") {
  // 300,000 levels overflowed the stack of recursive walks before the limit.
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  CHECK(error_of([&] { (void)parse_json_text(deep, "deep.json"); }) ==
        "deep.json: /: arrays and objects nest deeper than 128 levels at line 1, column 129");
  // At the limit it parses; brackets inside strings do not count.
  const std::string ok = std::string(128, '[') + std::string(128, ']');
  CHECK_NOTHROW(parse_json_text(ok, "ok.json"));
  CHECK_NOTHROW(parse_json_text("{\"a\": \"" + std::string(1000, '[') + "\\\"\"}", "s.json"));
  CHECK_THAT(error_of([&] { (void)parse_json_text("{\"a\":\n" + deep + "}", "d.json", "a system"); }),
             Catch::Contains("at line 2, column 128 (expected a system)"));  // the '{' is level 1
}

TEST_CASE("numbers beyond a double are bad input naming the number", "[limits]") {
  CHECK(error_of([] { (void)parse_json_text("{\"sm_count\": 1e400}", "s.json"); }) ==
        "s.json: /: the number 1e400 is out of the range of a double (largest 1.8e308)");
  CHECK(error_of([] { (void)parse_json_text("[-1e999]", "s.json"); }) ==
        "s.json: /: the number -1e999 is out of the range of a double (largest 1.8e308)");
  CHECK_THAT(error_of([] { (void)parse_json_text("{\"a\": [1, 2", "s.json"); }),
             Catch::Contains("s.json: /: invalid JSON at line 1, column"));
}

TEST_CASE("input files: directories, devices and oversized files are refused", "[limits]") {
  const auto dir = std::filesystem::temp_directory_path() / "perfcast_input_limits_test";
  std::filesystem::create_directories(dir);
  CHECK(error_of([&] { (void)read_input_file(dir); }) == dir.string() + ": /: is a directory; expected a file");
  CHECK(error_of([&] { (void)load_json_file(dir); }) == dir.string() + ": /: is a directory; expected a file");
  CHECK_THAT(error_of([] { (void)read_input_file("/dev/zero"); }), Catch::Contains("/dev/zero: /: is a device"));
  const auto file = dir / "ten.txt";
  { std::ofstream(file) << "0123456789"; }
  CHECK(read_input_file(file) == "0123456789");
  CHECK_THAT(error_of([&] { (void)read_input_file(file, 9); }), Catch::Contains("larger than 9 bytes"));
  CHECK_THAT(error_of([&] { (void)read_input_file(dir / "missing"); }), Catch::Contains("cannot open the file"));
  // JSON lines: a deep or overflowing line names its line number.
  const auto jsonl = dir / "r.jsonl";
  { std::ofstream(jsonl) << "{\"a\": 1}\n\n{\"a\": 1e400}\n"; }
  CHECK_THAT(error_of([&] { for_each_json_line(jsonl, "results", [](const JsonDocument&) {}); }),
             Catch::Contains("r.jsonl line 3: /: the number 1e400 is out of the range of a double"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("UTF-8 is checked by RFC 3629", "[limits]") {
  CHECK_FALSE(first_invalid_utf8("plain ASCII, \xc3\xa9t\xc3\xa9, \xe2\x82\xac, \xf0\x9f\x98\x80"));
  CHECK(first_invalid_utf8("ab\xff") == std::optional<std::size_t>(2));
  CHECK(first_invalid_utf8("\xc0\xaf") == std::optional<std::size_t>(0));      // overlong '/'
  CHECK(first_invalid_utf8("\xed\xa0\x80") == std::optional<std::size_t>(0));  // surrogate
  CHECK(first_invalid_utf8("x\xf4\x90\x80\x80") == std::optional<std::size_t>(1));  // above U+10FFFF
  CHECK(first_invalid_utf8("\xe2\x82") == std::optional<std::size_t>(0));      // truncated
  CHECK(error_of([] { require_utf8("ok\nNVIDIA \xfe\n", "log.txt"); }) ==
        "log.txt: line 2: invalid UTF-8 at column 8 (byte 0xfe); expected UTF-8 text");
}

TEST_CASE("quantities outside the stated ranges are refused", "[limits]") {
  // Denormal and tiny bandwidths made times infinite and results NaN.
  CHECK_THROWS_WITH(parse_quantity("5e-324GB/s", Dimension::kBandwidth), Catch::Contains("outside the supported range"));
  CHECK_THROWS_WITH(parse_quantity("1e-300TB/s", Dimension::kBandwidth), Catch::Contains("outside the supported range"));
  CHECK_THROWS_WITH(parse_quantity("0GB/s", Dimension::kBandwidth), Catch::Contains("outside the supported range"));
  CHECK_THROWS_WITH(parse_quantity("1e308TiB", Dimension::kBytes), Catch::Contains("outside the supported range"));
  CHECK_THROWS_WITH(parse_quantity("1e400GB", Dimension::kBytes), Catch::Contains("out of the range of a double"));
  CHECK_THROWS_WITH(parse_quantity("0FLOP/s", Dimension::kFlopRate), Catch::Contains("outside the supported range"));
  // The ends of the ranges and zero where it means "none".
  CHECK(parse_quantity("0us", Dimension::kTime) == 0.0);
  CHECK(parse_quantity("0B", Dimension::kBytes) == 0.0);
  CHECK(parse_quantity("0MHz", Dimension::kFrequency) == 0.0);
  CHECK(parse_quantity("1125899906842624B", Dimension::kBytes) == limits::kMaxBytes);  // 2^50
  CHECK_THROWS(parse_quantity("1125899906842625B", Dimension::kBytes));
  CHECK(parse_quantity("1KB/s", Dimension::kBandwidth) == 1e3);
  CHECK(parse_quantity("10000TB/s", Dimension::kBandwidth) == 1e16);
  CHECK_THROWS(parse_quantity("10001TB/s", Dimension::kBandwidth));
}

TEST_CASE("--set: indices past the end and deep values name the override", "[limits]") {
  JsonDocument d{nlohmann::json::parse(R"({"tables": [{"rows": 1}]})"), "w.json"};
  CHECK_THAT(error_of([&] { apply_override(d, "tables[99999999999999999999999].rows", "5"); }), Catch::Contains("--set: /tables/"));
  CHECK_THAT(error_of([&] { apply_override(d, "tables[1]", "5"); }), Catch::Contains("out of range"));
  CHECK_THAT(error_of([&] { apply_override(d, "tables[0].rows", std::string(1000, '[')); }),
             Catch::Contains("nests deeper than 128 levels"));
}

}  // namespace perfcast_test_core_input_limits_test
