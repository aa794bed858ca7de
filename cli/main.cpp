// perfcast: one binary, subcommands. Only this file maps exceptions to exit codes:
// 0 success, 1 the work failed, 2 bad input (the message names file, JSON path and
// what was expected), 3 stopped by --timeout before a result. Compiled twice: as
// `perfcast` (every command, no CUDA library) and, with PERFCAST_GPU_COMMANDS_ONLY, as
// `perfcast-gpu` (the GPU commands, cli/gpu_binary.hpp).

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <new>
#include <string>
#include <system_error>
#include <utility>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include "cli/gpu_binary.hpp"
#include "cli/log.hpp"
#include "cli/time_limit.hpp"
#include "model/sim/simulator.hpp"
#include "perfcast/build_info.hpp"
#include "core/deadline.hpp"
#include "core/json_reader.hpp"
#include "core/staged_output.hpp"
#include "model/commands/command_context.hpp"

namespace {

/// The command line's arguments that name existing files ("a.json, b.json"), for messages
/// that must name the input without knowing which reader failed.
std::string named_input_files(int argc, char** argv) {
  std::string out;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(argv[i], ec) || ec) continue;
    out += (out.empty() ? "" : ", ") + std::string(argv[i]);
  }
  return out.empty() ? "the inputs" : out;
}

/// Memory set aside at start and given back when an allocation fails, so that unwinding
/// (nlohmann::json's destructor allocates its work list) and the error message have room:
/// without it, a bad_alloc while parsing a large input ended in std::terminate (exit 134).
void* g_memory_reserve = nullptr;
constexpr std::size_t kMemoryReserveBytes = 32u << 20;

void on_out_of_memory() {
  if (g_memory_reserve != nullptr) {
    std::free(g_memory_reserve);
    g_memory_reserve = nullptr;
  }
  throw std::bad_alloc();  // caught in main: exit 2 naming the inputs
}

/// The value given to `option` of `sub` ("" when not given).
std::string option_value(const CLI::App& sub, const std::string& option) {
  const CLI::Option* o = sub.get_option_no_throw(option);
  return o != nullptr && o->count() > 0 ? o->results().front() : std::string();
}

/// Adds --timeout, bound to `value`, to every command and nested command (calibrate comms)
/// that does not define its own.
void add_generic_timeout(CLI::App& app, std::string& value) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_option_no_throw("--timeout") == nullptr)
      sub->add_option("--timeout", value,
                      "hard wall-clock limit, e.g. 30s: work still running then stops, exit 3, nothing written");
    add_generic_timeout(*sub, value);
  }
}

/// The command that sets the hard time limit and its option: the innermost chosen command
/// given --timeout, else plan's --budget; {nullptr, ""} for none.
std::pair<const CLI::App*, std::string> time_limit_option(const CLI::App& sub) {
  for (const CLI::App* nested : sub.get_subcommands()) {
    auto inner = time_limit_option(*nested);
    if (inner.first != nullptr) return inner;
  }
  if (!option_value(sub, "--timeout").empty()) return {&sub, "--timeout"};
  if (sub.get_name() == "plan" && !option_value(sub, "--budget").empty()) return {&sub, "--budget"};
  return {nullptr, ""};
}

}  // namespace

int main(int argc, char** argv) {
  g_memory_reserve = std::malloc(kMemoryReserveBytes);
  std::set_new_handler(on_out_of_memory);
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
  actions["convert-plan"] = perfcast::cli::add_convert_plan(app);
  actions["plan"] = perfcast::cli::add_plan(app);
  actions["report"] = perfcast::cli::add_report(app);
  actions["kernels"] = perfcast::cli::add_kernels(app);
#endif
  actions["profile"] = perfcast::cli::add_profile(app);
  actions["run"] = perfcast::cli::add_run(app);
  actions["validate"] = perfcast::cli::add_validate(app);
  // Every command takes --timeout (predict and shard define their own, which stop their
  // grids and searches in time and report what they have; plan's --budget is its limit too).
  std::string generic_timeout;
  add_generic_timeout(app, generic_timeout);
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
      const auto [limited, limit_option] = time_limit_option(*sub);
      const std::string limit_text = limited != nullptr ? option_value(*limited, limit_option) : std::string();
      const double limit_s = limited == nullptr ? 0.0 : perfcast::parse_duration_option(limit_option.c_str(), limit_text);
      // The generic --timeout also stops work cooperatively on this thread (core/deadline.hpp);
      // the commands with their own limit set it where their work allows.
      const perfcast::ScopedDeadline deadline(generic_timeout.empty() ? 0.0 : limit_s, "--timeout " + generic_timeout);
      const perfcast::cli::TimeLimitWatchdog watchdog(limit_s, limit_option + " " + limit_text);
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
  } catch (const perfcast::DeadlineExceeded& e) {
    // --timeout passed before a result: nothing was written (docs/robustness.md, exit 3).
    log.error("{}; nothing written", e.what());
    return 3;
  } catch (const std::bad_alloc&) {
    // Every input is bounded (core/limits.hpp) and the memory a reader needs is linear in
    // its size (docs/robustness.md), so running out of memory means inputs too large for
    // the memory free here.
    log.error("{}: out of memory; expected inputs whose size this machine's free memory can hold "
              "(docs/robustness.md, \"Memory per input byte\")",
              named_input_files(argc, argv));
    return 2;
  } catch (const std::exception& e) {
    log.error("{}", e.what());
    return 1;
  }
  return 0;
}
