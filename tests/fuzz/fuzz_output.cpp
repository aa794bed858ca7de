// The output writer (core/staged_output.hpp) and the JSON text of every output
// (core/json_text.hpp, model/report/trace_sink.hpp). From the input: a target file name
// (first line, reduced to a safe name in a per-process folder), whether to commit, and the
// content. Findings: an output that is not valid JSON for any byte string, a committed file
// whose content differs, a target changed without a commit, a staging file left behind.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/json_text.hpp"
#include "core/staged_output.hpp"
#include "model/report/trace_sink.hpp"
#include "tests/fuzz/fuzz_common.hpp"

namespace {

namespace fs = std::filesystem;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "finding: %s\n", what);
  std::abort();
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Both JSON writers give valid JSON for any byte string, and agree on ASCII.
void check_json_text(const std::string& bytes) {
  const std::string dumped = perfcast::json_text(nlohmann::json{{"name", bytes}}, 1);
  fmt::memory_buffer b;
  perfcast::append_json_string(b, bytes);
  try {
    const auto a = nlohmann::json::parse(dumped);
    const auto t = nlohmann::json::parse(fmt::to_string(b));
    const bool ascii = std::all_of(bytes.begin(), bytes.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
    if (ascii && (a.at("name") != bytes || t != bytes)) finding("an ASCII string changed");
  } catch (const nlohmann::json::exception&) {
    finding("an output string is not valid JSON");
  }
}

void check_staged_file(const std::string& name, bool commit, const std::string& content) {
  static const fs::path dir = fs::temp_directory_path() / ("perfcast_fuzz_output_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path target = dir / name;
  { std::ofstream(target, std::ios::binary) << "earlier"; }
  try {
    perfcast::StagedFile f(target);
    f.write(content);
    if (commit) f.commit();
  } catch (const perfcast::ConfigError&) {
    return;  // a name the file system refuses: bad input
  }
  if (read_all(target) != (commit ? content : std::string("earlier"))) finding("the target holds the wrong content");
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename() != target.filename()) finding("a staging file was left behind");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = perfcast::fuzz::text_of(data, size);
  check_json_text(text);
  const std::size_t nl = text.find('\n');
  if (nl == std::string::npos || nl == 0) return 0;
  // A name of 1-255 safe bytes ([A-Za-z0-9._-], "." and ".." excepted): the target stays in the folder.
  std::string name;
  for (char c : text.substr(1, std::min<std::size_t>(nl - 1, 255)))
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') name += c;
  if (name.empty() || name == "." || name == "..") return 0;
  check_staged_file(name, (data[0] & 1) != 0, text.substr(nl + 1));
  return 0;
}
