// perfcast: one binary, subcommands. Only this file maps exceptions to exit codes:
// 0 success, 1 the work failed, 2 bad input (the message names file, JSON path and
// what was expected). Compiled twice: as `perfcast` (every command, no CUDA library) and,
// with PERFCAST_GPU_COMMANDS_ONLY, as `perfcast-gpu` (the GPU commands, cli/gpu_binary.hpp).

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "cli/gpu_binary.hpp"
#include "cli/log.hpp"
#include "model/sim/simulator.hpp"
#include "perfcast/build_info.hpp"
#include "core/json_reader.hpp"
#include "core/staged_output.hpp"

int main(int argc, char** argv) {
  perfcast::cli::remember_command_line(argc, argv);
  CLI::App app{"perfcast: predict multi-GPU ML training iteration time and pick embedding sharding plans"};
  app.set_version_flag("--version", std::string(perfcast::build_info::kVersion) + " (" + perfcast::build_info::kGitCommit + ")");
  app.require_subcommand(1);
  // One logger for warnings, notes and progress, on standard error (cli/log.hpp).
  std::string log_level = "info";
  auto* verbose = app.add_flag("-v,--verbose")->description("show debug messages on standard error");
  auto* quiet = app.add_flag("-q,--quiet")->description("show only errors on standard error");
  auto* level_opt = app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off (default info)")
                        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  verbose->excludes(quiet);
  level_opt->excludes(verbose)->excludes(quiet);
  std::map<std::string, perfcast::cli::Action> actions;
#if !PERFCAST_GPU_COMMANDS_ONLY
  actions["predict"] = perfcast::cli::add_predict(app);
  actions["comm"] = perfcast::cli::add_comm(app);
  actions["list"] = perfcast::cli::add_list(app);
  actions["calibrate"] = perfcast::cli::add_calibrate(app);
  actions["trace-stats"] = perfcast::cli::add_trace_stats(app);
  actions["index-stats"] = perfcast::cli::add_index_stats(app);
  actions["replay"] = perfcast::cli::add_replay(app);
  actions["import"] = perfcast::cli::add_import(app);
  actions["shard"] = perfcast::cli::add_shard(app);
  actions["plan"] = perfcast::cli::add_plan(app);
  actions["report"] = perfcast::cli::add_report(app);
  actions["kernels"] = perfcast::cli::add_kernels(app);
#endif
  actions["profile"] = perfcast::cli::add_profile(app);
  actions["run"] = perfcast::cli::add_run(app);
  actions["validate"] = perfcast::cli::add_validate(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  perfcast::cli::init_logging(verbose->count() > 0 ? "debug" : quiet->count() > 0 ? "error" : log_level);
  auto& log = perfcast::cli::log();
  try {
    for (const auto* sub : app.get_subcommands()) {
      const int code = actions.at(sub->get_name())();
      // A result that did not reach standard output (a full disk, a closed pipe) is a failure.
      if (!perfcast::flush_stdout()) {
        log.error("cannot write standard output: {}", std::strerror(errno));
        return 1;
      }
      return code;
    }
  } catch (const perfcast::ConfigError& e) {
    log.error("{}", e.what());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // Every path perfcast looks up is one the user named (an input, an output, a profile).
    log.error("{}: {}; expected a path this system can open", e.path1().string(), e.code().message());
    return 2;
  } catch (const perfcast::SimulationError& e) {
    log.error("simulation failed: {}", e.what());
    return 1;
  } catch (const std::exception& e) {
    log.error("{}", e.what());
    return 1;
  }
  return 0;
}
