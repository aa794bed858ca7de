#include <catch2/catch.hpp>

#include "core/file_kind.hpp"
#include "core/json_reader.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_core_file_kind_test {

using namespace perfcast;

namespace {
std::string schema_error(const char* text) {
  const JsonDocument d{nlohmann::json::parse(text), "x.json"};
  try {
    JsonObject(d).require_schema("perfcast.workload", 1);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}
std::string parse_error(std::string_view text) {
  try {
    (void)parse_json_text(text, "x.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("documents of another kind are named with the command that takes them", "[json][file_kind]") {
  CHECK_THAT(describe_json_kind(nlohmann::json::parse(R"({"traceEvents": [], "deviceProperties": []})")),
             Catch::StartsWith("this is a PyTorch profiler (Kineto) trace: `perfcast import --kineto FILE"));
  CHECK_THAT(describe_json_kind(nlohmann::json::parse(R"({"schema": "perfcast.system", "schema_version": "1.0"})")),
             Catch::Contains("system file: give it with --system"));
  CHECK_THAT(describe_json_kind(nlohmann::json::parse(R"({"context": {"command": "predict"}, "iteration_time_s": 1})")),
             Catch::Contains("this is a perfcast result (written by `perfcast predict --json`)"));
  CHECK_THAT(describe_json_kind(nlohmann::json::parse(R"({"plan": {"sparse_arch.ebc": {"t0": {"sharding_type": "table_wise"}}}})")),
             Catch::Contains("TorchRec sharding plan"));
  CHECK(describe_json_kind(nlohmann::json::parse(R"({"a": 1})")).empty());
  CHECK(describe_json_kind(nlohmann::json::parse("[1, 2]")).empty());

  CHECK_THAT(describe_text_kind("size,count,type,time\n1,2,float,3\n"), Catch::Contains("CSV table (header \"size,count,type,time\")"));
  CHECK_THAT(describe_text_kind("# nccl-tests version 2.13.9\n#  Rank  0 ..."), Catch::Contains("nccl-tests log"));
  CHECK_THAT(describe_text_kind(std::string("\x1f\x8b\x08\x00", 4)), Catch::Contains("gzip-compressed"));
  CHECK(describe_text_kind("hello world\n").empty());
}

TEST_CASE("a wrong file's schema error says what it is", "[json][file_kind]") {
  // A Kineto trace given as a workload: no schema key.
  CHECK(schema_error(R"({"traceEvents": []})") ==
        "x.json: /schema: missing required key (a perfcast.workload file has \"schema\": \"perfcast.workload\"); "
        "this is a PyTorch profiler (Kineto) trace: `perfcast import --kineto FILE --out workload.json` makes a workload "
        "of it, `perfcast replay --kineto FILE` re-simulates it, `perfcast trace-stats FILE` summarises it");
  // A system file given as a workload.
  CHECK_THAT(schema_error(R"({"schema": "perfcast.system", "schema_version": "1.0"})"),
             Catch::StartsWith("x.json: /schema: expected schema \"perfcast.workload\", got \"perfcast.system\"; this is a "
                               "perfcast system file"));
  // Nothing recognisable: the plain message.
  CHECK(schema_error(R"({"a": 1})") ==
        "x.json: /schema: missing required key (a perfcast.workload file has \"schema\": \"perfcast.workload\")");
  // A CSV where JSON belongs.
  CHECK_THAT(parse_error("bytes,time_us,busbw\n1024,5.0,0.2\n"),
             Catch::StartsWith("x.json: /: invalid JSON at line 1, column 1; this looks like a CSV table"));
}

}  // namespace perfcast_test_core_file_kind_test
