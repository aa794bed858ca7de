#pragma once
/// \file log.hpp
/// The one logger of the perfcast command (spdlog, to standard error): warnings, notes
/// and progress go through it, so standard output carries only the command's result.
/// Levels: -q -> errors only; default -> warnings and notes (info); -v -> debug;
/// --log-level NAME (trace, debug, info, warn, error, off) sets it directly.

#include <cstddef>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace perfcast::cli {

/// Creates the "perfcast" logger on standard error at `level` (spdlog level name).
/// Throws std::invalid_argument for an unknown name.
void init_logging(const std::string& level);

/// The logger (init_logging must have run; before it, a default stderr logger).
[[nodiscard]] spdlog::logger& log();

/// Whether progress bars may be drawn: standard error is a terminal and notes are shown.
[[nodiscard]] bool progress_enabled();

/// "[#####.....] 12/40" on standard error, redrawn in place; only when progress_enabled().
void draw_progress(std::size_t done, std::size_t total);

}  // namespace perfcast::cli
