#pragma once
/// \file output_files.hpp
/// Writes results whole or not at all (core/staged_output.hpp: an exclusive staging file
/// with an unpredictable name beside the target, renamed over it; never through a link).
/// "-" means standard output, whose failed writes are errors too.

#include <string>
#include <utility>
#include <vector>

namespace perfcast {

/// Writes every (path, content) pair; all contents must be computed before calling, so
/// bad input never leaves a partial file. Throws OutputError on I/O failure.
void write_outputs(const std::vector<std::pair<std::string, std::string>>& files);

/// The checks write_outputs makes before writing anything, for outputs that are streamed
/// instead of passed as text (the Chrome trace): ConfigError for two outputs on standard
/// output, a directory or other non-regular file, or one file named twice.
void check_output_targets(const std::vector<std::string>& paths);

}  // namespace perfcast
