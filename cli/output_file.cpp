#include "cli/output_file.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <system_error>

#include <unistd.h>

#include "core/json_reader.hpp"

namespace perfcast::cli {
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
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> staged;
  auto remove_staged = [&] {
    std::error_code ec;
    for (const auto& [tmp, _] : staged) std::filesystem::remove(tmp, ec);
  };
  try {
    for (const auto& [path, content] : files) {
      if (path == "-") continue;
      const std::filesystem::path target(path);
      std::filesystem::path tmp = target;
      tmp += ".tmp" + std::to_string(::getpid());
      staged.emplace_back(tmp, target);
      std::ofstream out(tmp, std::ios::binary);
      if (!out) throw std::runtime_error("cannot write " + path);
      out << content;
      out.close();
      if (!out) throw std::runtime_error("cannot write " + path);
    }
  } catch (...) {
    remove_staged();
    throw;
  }
  // Renames cannot fail for checked regular-file targets in writable directories;
  // should one fail, the temporary files still staged are removed.
  for (std::size_t i = 0; i < staged.size(); ++i) {
    std::error_code ec;
    std::filesystem::rename(staged[i].first, staged[i].second, ec);
    if (ec) {
      std::error_code ignore;
      for (std::size_t k = i; k < staged.size(); ++k) std::filesystem::remove(staged[k].first, ignore);
      throw std::runtime_error("cannot write " + staged[i].second.string() + ": " + ec.message());
    }
  }
  for (const auto& [path, content] : files) {
    if (path == "-") std::cout << content << std::flush;
  }
}

}  // namespace perfcast::cli
