#pragma once
/// \file output_file.hpp
/// Writes results whole or not at all: into a temporary file beside the target, then
/// renamed over it. "-" means standard output.

#include <string>
#include <utility>
#include <vector>

namespace perfcast::cli {

/// Writes every (path, content) pair; all contents must be computed before calling, so
/// bad input never leaves a partial file. Throws std::runtime_error on I/O failure.
void write_outputs(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace perfcast::cli
