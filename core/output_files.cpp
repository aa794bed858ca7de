#include "core/output_files.hpp"

#include <filesystem>
#include <memory>
#include <system_error>

#include "core/json_reader.hpp"
#include "core/staged_output.hpp"

namespace perfcast {
namespace {

/// Refuses outputs that could only be written in part: two documents on standard
/// output, a target that is a directory, the same file named twice.
void check_targets(const std::vector<std::pair<std::string, std::string>>& files) {
  int to_stdout = 0;
  std::vector<std::filesystem::path> seen;
  for (const auto& [path, content] : files) {
    if (path == "-") {
      if (++to_stdout > 1)
        throw ConfigError("-", "", "two outputs are written to standard output; give at most one of them as \"-\"");
      continue;
    }
    if (path.empty()) throw ConfigError("(empty path)", "", "expected an output file name");
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (std::filesystem::is_directory(status)) throw ConfigError(path, "", "is a directory; expected an output file name");
    if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
      throw ConfigError(path, "", "is not a regular file; expected an output file name");
    const auto abs = std::filesystem::absolute(path, ec).lexically_normal();
    for (const auto& s : seen)
      if (s == abs) throw ConfigError(path, "", "is named for two outputs; give each output its own file");
    seen.push_back(abs);
  }
}

}  // namespace

void check_output_targets(const std::vector<std::string>& paths) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& p : paths) files.emplace_back(p, std::string());
  check_targets(files);
}

void write_outputs(const std::vector<std::pair<std::string, std::string>>& files) {
  check_targets(files);
  // Every file is staged (core/staged_output.hpp) before any is renamed: an error while
  // writing one leaves none of them, and the staging files are removed.
  std::vector<std::unique_ptr<StagedFile>> staged;
  for (const auto& [path, content] : files) {
    if (path == "-") continue;
    staged.push_back(std::make_unique<StagedFile>(path));
    staged.back()->write(content);
  }
  for (auto& f : staged) f->commit();
  for (const auto& [path, content] : files) {
    if (path == "-") write_stdout(content);
  }
}

}  // namespace perfcast
