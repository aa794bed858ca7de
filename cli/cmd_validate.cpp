// perfcast validate: parses the options and prints; the library calls
// (validation/commands/validate_command.hpp) re-summarize result files, predict PyTorch
// measurements, or generate, predict and measure random DLRM configs (--dry-run: predict
// only, no GPU needed).

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/gpu_binary.hpp"
#include "cli/log.hpp"
#include "core/output_files.hpp"
#include "profiler/device_info.hpp"
#include "validation/commands/validate_command.hpp"
#include "validation/executor.hpp"

namespace perfcast::cli {
namespace {

struct ValidateArgs {
  validation::ValidateRequest request;
  std::vector<std::string> summarize, compare;
  std::string json, csv;
};

void progress_bar(int done, int total, std::chrono::steady_clock::time_point start) {
  constexpr int kWidth = 30;
  const int filled = total > 0 ? done * kWidth / total : kWidth;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "\r  [%s%s] %d/%d configs, %.0f s  ", std::string(static_cast<std::size_t>(filled), '#').c_str(),
               std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), done, total, elapsed);
  std::fflush(stderr);
}

/// Writes the --json and --csv outputs and prints the text unless an output went to
/// standard output.
int finish(const validation::ValidateOutcome& r, const ValidateArgs& a, bool print_text) {
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!a.json.empty()) outputs.emplace_back(a.json, r.json);
  if (!a.csv.empty()) outputs.emplace_back(a.csv, r.csv);
  write_outputs(outputs);
  if (print_text && a.json != "-" && a.csv != "-") std::cout << r.text;
  return r.exit_code;
}

int run_validate(const ValidateArgs& a) {
  if (!a.summarize.empty()) return finish(validation::summarize_validation(a.summarize), a, true);
  if (!a.compare.empty()) return finish(validation::compare_validation(a.request.system, a.compare), a, true);
  const auto& q = a.request;
  if (q.system.empty()) {
    log().error("--system is required (unless --summarize)");
    return 2;
  }
  // Bad input first (exit 2, nothing written), whatever the machine.
  const std::string header = validation::validate_header(q);
  if (!q.dry_run) {
    if (!profiler::cuda_support_built()) {
      log().error("perfcast validate needs the reference executor: {} (use --dry-run to generate and predict without a GPU)",
                  run_gpu_binary());
      return 1;
    }
    std::string why;
    if (!validation::executor_available(&why)) {
      log().error("perfcast validate needs the reference executor: {} (use --dry-run to generate and predict without a GPU)", why);
      return 1;
    }
  }
  const bool to_stdout = a.json != "-" && a.csv != "-";
  const bool tty = progress_enabled();
  if (to_stdout) {
    std::cout << header;
    std::cout.flush();
  }
  const auto start = std::chrono::steady_clock::now();
  if (tty) progress_bar(0, q.configs, start);
  const auto r = validation::run_validate(q, [&](const std::string& line, int done) {
    if (tty) std::fprintf(stderr, "\r%70s\r", "");
    if (to_stdout) {
      std::cout << line << "\n";
      std::cout.flush();
    }
    if (tty && done < q.configs) progress_bar(done, q.configs, start);
  });
  return finish(r, a, true);
}

}  // namespace

Action add_validate(CLI::App& app) {
  auto* cmd = app.add_subcommand("validate", "Predict and measure random DLRM configs; report the prediction error");
  auto a = std::make_shared<ValidateArgs>();
  auto& q = a->request;
  cmd->add_option("--system", q.system, "system file (the GPUs the executor runs on)");
  cmd->add_option("--configs", q.configs, "random configs to run (default 10)")->check(CLI::Range(1, 100000));
  cmd->add_option("--first", q.first, "index of the first config (default 0): split a long run over several commands")
      ->check(CLI::Range(0, 100000000));
  cmd->add_option("--seed", q.seed, "generator seed: config i of a seed is always the same");
  cmd->add_option("--name", q.name, "result file name (default <system>_seed<S>, plus _<dtype> unless fp32)");
  cmd->add_option("--out-dir", q.out_dir, "results folder; lines go to <dir>/<gpu>/<name>.jsonl (default validation/results)");
  cmd->add_option("--warmup", q.warmup, "executor warm-up iterations per config (default 3)")->check(CLI::Range(0, 100000));
  cmd->add_option("--iterations", q.iterations, "executor timed iterations per config (default 10)")->check(CLI::Range(1, 100000));
  cmd->add_option("--interaction", q.interaction, "cat: D per table (default, as the reference); dot: one D per config")
      ->check(CLI::IsMember({"cat", "dot"}));
  cmd->add_option("--mlp-dtype", q.mlp_dtype,
                  "MLP math of every config: fp32 (default, as the reference), tf32, or bf16 / fp16 mixed precision "
                  "(result file <system>_seed<S>_<dtype>)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}));
  cmd->add_option("--max-rows", q.max_rows, "largest table drawn, rows (default 4000000)")->check(CLI::Range(100, 1 << 30));
  cmd->add_option("--json", a->json, "also write all results and the summary as JSON to FILE, or - for standard output");
  cmd->add_option("--csv", a->csv, "also write one CSV row per result (per file with --summarize) to FILE");
  cmd->add_flag("--dry-run", q.dry_run, "generate and predict only (no executor, no GPU, no result file)");
  cmd->add_option("--summarize", a->summarize, "re-summarize existing result files (JSON lines) and exit")->expected(1, -1);
  cmd->add_option("--compare", a->compare,
                  "predict the runs of PyTorch result files (validation/pytorch/*_bench.py) on --system and report errors")
      ->expected(1, -1);
  return [a]() { return run_validate(*a); };
}

}  // namespace perfcast::cli
