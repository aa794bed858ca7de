// JSON text for outputs (core/json_text.hpp, model/report/trace_sink.hpp): a string that is
// not valid UTF-8 (a file name, a log line) never makes an output fail or invalid.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "core/json_text.hpp"
#include "model/report/trace_sink.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_core_json_text_test {

using namespace perfcast;

namespace {

std::string trace_string(std::string_view s) {
  fmt::memory_buffer b;
  append_json_string(b, s);
  return fmt::to_string(b);
}

}  // namespace

TEST_CASE("json text: bytes that are not UTF-8 become U+FFFD, the rest is kept") {
  // A Latin-1 file name (0xFE), a lone continuation byte, a truncated 3-byte sequence, an
  // overlong '/', a surrogate: each was nlohmann's type_error.316 (exit 1) before.
  for (const std::string& bad : {std::string("sys\xfe.json"), std::string("a\x80z"), std::string("\xe2\x82"),
                                std::string("\xc0\xaf"), std::string("\xed\xa0\x80")}) {
    const nlohmann::json j = {{"file", bad}};
    std::string text;
    REQUIRE_NOTHROW(text = json_text(j, 2));
    const auto back = nlohmann::json::parse(text);
    REQUIRE(back.at("file").get<std::string>().find("\xef\xbf\xbd") != std::string::npos);
  }
  REQUIRE(json_text(nlohmann::json{{"name", "H100 \xe2\x80\x93 SXM"}}) == "{\"name\":\"H100 \xe2\x80\x93 SXM\"}");
  REQUIRE(json_text(nlohmann::json::array({1, 2}), 1) == "[\n 1,\n 2\n]");
}

TEST_CASE("trace strings: every byte string gives a valid JSON string") {
  // All single bytes, then every pair of bytes after a lead byte of each class.
  for (int c = 0; c < 256; ++c) {
    const std::string s(1, static_cast<char>(c));
    const auto v = nlohmann::json::parse(trace_string(s));
    if (c < 0x80) REQUIRE(v.get<std::string>() == s);
    else REQUIRE(v.get<std::string>() == "\xef\xbf\xbd");
  }
  for (int lead : {0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5})
    for (int next = 0; next < 256; ++next) {
      const std::string s = {static_cast<char>(lead), static_cast<char>(next), '\x80', '\x80'};
      REQUIRE_NOTHROW(nlohmann::json::parse(trace_string(s)));
    }
  // Well-formed sequences pass unchanged: 2, 3 and 4 bytes.
  for (const std::string& ok : {std::string("\xc3\xa9"), std::string("\xe2\x82\xac"), std::string("\xf0\x9f\x98\x80")})
    REQUIRE(nlohmann::json::parse(trace_string(ok)).get<std::string>() == ok);
  REQUIRE(trace_string("a\"b\\c\n") == "\"a\\\"b\\\\c\\n\"");
}

}  // namespace perfcast_test_core_json_text_test
