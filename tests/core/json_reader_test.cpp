#include <catch2/catch.hpp>

#include "core/json_reader.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_core_json_reader_test {

using namespace perfcast;

namespace {
JsonDocument doc(const char* text) { return JsonDocument{nlohmann::json::parse(text), "test.json"}; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("unknown keys are rejected with a suggestion and their path", "[json]") {
  const auto d = doc(R"({"outer": {"bandwidth": "1GB/s", "latncy": "1us"}})");
  const JsonObject root(d);
  const JsonObject o = root.object("outer");
  (void)o.quantity("bandwidth", Dimension::kBandwidth);
  (void)o.quantity_or("latency", Dimension::kTime, 0);
  const std::string msg = error_of([&] { o.finish(); });
  CHECK_THAT(msg, Catch::StartsWith("test.json: /outer/latncy: unknown key"));
  CHECK_THAT(msg, Catch::Contains("did you mean \"latency\""));
}

TEST_CASE("missing keys and wrong types name the path", "[json]") {
  const auto d = doc(R"({"a": [1, 2.5, "x"], "b": true, "source": "documentation is allowed"})");
  const JsonObject root(d);
  CHECK_THAT(error_of([&] { (void)root.string("name"); }), Catch::Contains("test.json: /name: missing required key"));
  const JsonArray a = root.array("a");
  CHECK(a[0].as_integer(0, 5) == 1);
  CHECK_THAT(error_of([&] { (void)a[1].as_integer(); }), Catch::Contains("/a/1: expected an integer"));
  CHECK_THAT(error_of([&] { (void)a[2].as_number(); }), Catch::Contains("/a/2: expected a number, got string"));
  CHECK_THAT(error_of([&] { (void)a[0].as_integer(2, 5); }), Catch::Contains("expected an integer in [2, 5], got 1"));
  CHECK(root.bool_or("b", false));
  CHECK_NOTHROW(root.finish());  // "source" is documentation
}

TEST_CASE("a misspelt required key is named with the key it should be", "[json]") {
  const auto d = doc(R"({"outer": {"hiden": 1024, "heads": 16}})");
  const JsonObject o = JsonObject(d).object("outer");
  (void)o.integer("heads", 1, 64);
  CHECK(error_of([&] { (void)o.integer("hidden", 1, 1 << 20); }) ==
        "test.json: /outer/hidden: missing required key (the file has \"hiden\" here: did you mean \"hidden\"?)");
  // A key already read is no candidate, nor one far from the name.
  CHECK(error_of([&] { (void)o.integer("head", 1, 64); }) == "test.json: /outer/head: missing required key");
  CHECK(error_of([&] { (void)o.string("layers"); }) == "test.json: /outer/layers: missing required key");
}

TEST_CASE("enums suggest the closest value", "[json]") {
  const auto d = doc(R"({"kind": "unifrom"})");
  const JsonObject root(d);
  CHECK_THAT(error_of([&] { (void)root.at("kind").as_enum({"uniform", "zipf"}); }),
             Catch::Contains("did you mean \"uniform\""));
}

TEST_CASE("schema name and major version are checked", "[json]") {
  const auto d = doc(R"({"schema": "perfcast.system", "schema_version": "2.0"})");
  CHECK_THAT(error_of([&] { JsonObject(d).require_schema("perfcast.system", 1); }), Catch::Contains("version 1.x"));
}

TEST_CASE("overrides edit by dotted path or JSON pointer", "[json]") {
  auto d = doc(R"({"batch": 1, "tables": [{"rows": 5}, {"rows": 6}]})");
  apply_override(d, "batch", "4096");
  apply_override(d, "tables[1].rows", "7");
  apply_override(d, "/tables/0/rows", "8");
  apply_override(d, "name", "big one");  // not JSON: taken as a string
  CHECK(d.root["batch"] == 4096);
  CHECK(d.root["tables"][1]["rows"] == 7);
  CHECK(d.root["tables"][0]["rows"] == 8);
  CHECK(d.root["name"] == "big one");
  CHECK_THAT(error_of([&] { apply_override(d, "tables[5].rows", "1"); }), Catch::Contains("has no /tables/5"));
  CHECK_THAT(error_of([&] { apply_override(d, "missing.key", "1"); }), Catch::Contains("has no /missing"));
  CHECK(to_json_pointer("a.b[2].c") == "/a/b/2/c");
}

TEST_CASE("syntax errors report line and column", "[json]") {
  const std::string path = std::string(PERFCAST_SOURCE_DIR) + "/tests/data/broken.json";
  CHECK_THAT(error_of([&] { (void)load_json_file(path); }), Catch::Contains("invalid JSON at line 3"));
  CHECK_THAT(error_of([&] { (void)load_json_file("/nonexistent/x.json"); }), Catch::Contains("cannot open"));
}

TEST_CASE("a key that appears twice in one object is refused with its path", "[json]") {
  auto error = [](const char* text) {
    try {
      (void)parse_json_text(text, "d.json");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error(R"({"a": 1, "a": 2})") == "d.json: /a: the key appears twice in one object (a reader would silently keep one of them)");
  CHECK_THAT(error(R"({"n": {"x": [0, {"k": 1}, {"k": 2, "k": 3}]}})"), Catch::StartsWith("d.json: /n/x/2/k: the key appears twice"));
  CHECK_THAT(error(R"({"a/b": {"~": 1, "~": 2}})"), Catch::StartsWith("d.json: /a~1b/~0: the key appears twice"));
  // The same key in sibling objects, or at different depths, is fine.
  CHECK(error(R"({"a": {"k": 1}, "b": {"k": 2}, "k": [{"k": 1}, {"k": 2}]})") == "no error");
}

}  // namespace perfcast_test_core_json_reader_test
