#include "cli/output_file.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include <unistd.h>

namespace perfcast::cli {

void write_outputs(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> staged;
  try {
    for (const auto& [path, content] : files) {
      if (path == "-") continue;
      const std::filesystem::path target(path);
      std::filesystem::path tmp = target;
      tmp += ".tmp" + std::to_string(::getpid());
      std::ofstream out(tmp, std::ios::binary);
      if (!out) throw std::runtime_error("cannot write " + path);
      out << content;
      out.close();
      if (!out) throw std::runtime_error("cannot write " + path);
      staged.emplace_back(tmp, target);
    }
  } catch (...) {
    for (const auto& [tmp, _] : staged) std::filesystem::remove(tmp);
    throw;
  }
  for (const auto& [tmp, target] : staged) std::filesystem::rename(tmp, target);
  for (const auto& [path, content] : files) {
    if (path == "-") std::cout << content << std::flush;
  }
}

}  // namespace perfcast::cli
