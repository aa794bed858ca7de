#pragma once
/// \file commands.hpp
/// One function per subcommand: each adds its CLI11 subcommand and returns the action
/// to run when it was chosen. Actions return the process exit code; exceptions are
/// mapped to exit codes in main.cpp only.

#include <functional>

#include <CLI/CLI.hpp>

namespace perfcast::cli {

using Action = std::function<int()>;

Action add_predict(CLI::App& app);
Action add_comm(CLI::App& app);
Action add_list(CLI::App& app);
Action add_calibrate(CLI::App& app);
Action add_trace_stats(CLI::App& app);
Action add_index_stats(CLI::App& app);
Action add_replay(CLI::App& app);
Action add_import(CLI::App& app);
Action add_shard(CLI::App& app);
Action add_convert_plan(CLI::App& app);
Action add_plan(CLI::App& app);
Action add_report(CLI::App& app);
Action add_profile(CLI::App& app);
Action add_run(CLI::App& app);
Action add_validate(CLI::App& app);
Action add_kernels(CLI::App& app);

}  // namespace perfcast::cli
