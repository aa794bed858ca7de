#pragma once
/// \file gpu_binary.hpp
/// The GPU commands' executable. `perfcast` links no CUDA library, so that every command that
/// predicts starts in milliseconds; the commands that measure on a GPU (profile, run,
/// validate without --dry-run) run in `perfcast-gpu`, which a build with CUDA puts beside
/// `perfcast` (cli/CMakeLists.txt). `perfcast` checks the inputs of such a command itself
/// (bad input is exit 2 without loading CUDA), then replaces its process with `perfcast-gpu`
/// and the same command line.

#include <string>

namespace perfcast::cli {

/// Remembers the command line (main() calls it first) for run_gpu_binary().
void remember_command_line(int argc, char** argv);

/// The path of `perfcast-gpu` beside the running executable, or "" when there is none (a
/// build without CUDA, or this is perfcast-gpu itself).
[[nodiscard]] std::string gpu_binary_path();

/// Replaces this process with `perfcast-gpu` and the remembered command line. Returns only
/// when there is no such executable or it cannot be started; the returned text says why.
[[nodiscard]] std::string run_gpu_binary();

}  // namespace perfcast::cli
