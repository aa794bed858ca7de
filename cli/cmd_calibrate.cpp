#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/output_file.hpp"
#include "core/error_stats.hpp"
#include "perfcast/build_info.hpp"
#include "predictors/kernel_calibration.hpp"
#include "predictors/measurement.hpp"
#include "topology/collective_calibration.hpp"
#include "topology/system_spec.hpp"

namespace perfcast::cli {
namespace {
/// fit_collective needs this many samples of one collective (4 terms, each protocol).
constexpr std::size_t kMinFitSamples = 8;
}  // namespace

namespace {

struct CalibrateArgs {
  std::string system;
  std::vector<std::string> logs;
  std::string collective;
  int ranks = 0;
  std::string out;
  std::string json;
  bool leave_one_out = false;
  std::vector<std::string> families;  ///< kernels: write only these families (empty: all fitted)
  std::string note;                   ///< kernels: free-text provenance written into the calibration
};

constexpr double kMiB = 1024.0 * 1024.0;

std::string today() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

}  // namespace

Action add_calibrate(CLI::App& app) {
  auto* cmd = app.add_subcommand("calibrate", "Fit model parameters to measurements");
  cmd->require_subcommand(1);
  auto* comms = cmd->add_subcommand("comms", "Fit the collective model to nccl-tests logs or CSV tables");
  auto a = std::make_shared<CalibrateArgs>();
  comms->add_option("--system", a->system, "system file the measurements come from")->required();
  comms->add_option("--nccl-tests", a->logs, "nccl-tests output or CSV table (repeatable)")->required();
  comms->add_option("--collective", a->collective, "collective, when the files do not say (all_reduce, ...)");
  comms->add_option("--ranks", a->ranks, "rank count, when the files do not say")->check(CLI::Range(2, 1 << 20));
  comms->add_option("--out", a->out, "calibration file to write (default: <system>.comms.json beside the system)");
  comms->add_option("--json", a->json, "write the fit report as JSON to FILE, or - for standard output");
  comms->add_flag("--leave-one-out", a->leave_one_out, "also report errors for each rank count fitted without it");

  auto* kernels = cmd->add_subcommand("kernels", "Fit the kernel predictors to measurement files (perfcast profile output)");
  auto k = std::make_shared<CalibrateArgs>();
  kernels->add_option("--system", k->system, "system whose GPU the measurements are of (its spec gives the peaks)")->required();
  kernels->add_option("--measurements", k->logs, "measurement JSONL files (repeatable)")->required();
  kernels->add_option("--out", k->out, "calibration file (default: configs/calibration/<gpu>.json beside the systems folder)");
  kernels->add_option("--json", k->json, "write the fit report as JSON to FILE, or - for standard output");
  kernels->add_option("--families", k->families,
                      "write only these fitted families (e.g. gemm.fp32,memcpy.h2d); the others stay spec-derived")
      ->delimiter(',');
  kernels->add_option("--note", k->note, "free-text provenance to record in the calibration (data split, left-out families)");
  auto kernels_action = [k]() {
    const SystemSpec s = load_system(k->system);
    std::vector<Measurement> all;
    for (const auto& path : k->logs) {
      auto ms = read_measurements(path);
      all.insert(all.end(), ms.begin(), ms.end());
    }
    KernelCalibration cal;
    try {
      cal = fit_kernel_calibration(all, s.gpu);
    } catch (const std::invalid_argument& e) {
      throw ConfigError(k->logs.front(), "", e.what());
    }
    if (!k->families.empty()) {
      std::vector<std::string> fitted;
      for (const auto& f : cal.fits) fitted.push_back(f.family);
      for (const auto& name : k->families) {
        if (!cal.find(name))
          throw ConfigError("--families", "",
                            fmt::format("\"{}\" was not fitted (fitted: {}); a family needs 10 training measurements",
                                        name, fmt::join(fitted, ", ")));
      }
      std::erase_if(cal.fits, [&](const FamilyFit& f) {
        return std::find(k->families.begin(), k->families.end(), f.family) == k->families.end();
      });
    }
    cal.date = today();
    cal.commit = build_info::kGitCommit;
    cal.measurements = k->logs;
    cal.note = k->note;
    std::string out = k->out;
    if (out.empty()) {
      out = (std::filesystem::path(k->system).parent_path() / ".." / "calibration" / calibration_file_name(s.gpu.name))
                .lexically_normal()
                .string();
    }
    std::string text = fmt::format("kernel calibration for {} from {} measurements of {}\n{:<18} {:>10} {:>10} {:>10} {:>7} {:>7} {:>9} {:>9}\n",
                                   s.gpu.name, all.size(), cal.gpu, "family", "e_compute", "e_memory", "overhead",
                                   "train", "held", "train err", "held err");
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& f : cal.fits) {
      text += fmt::format("{:<18} {:>10.3f} {:>10.3f} {:>8.2f}us {:>7} {:>7} {:>8.2f}% {:>8.2f}%\n", f.family, f.compute_efficiency,
                          f.memory_efficiency, f.overhead * 1e6, f.train_samples, f.heldout_samples,
                          f.train_geomean_abs_error * 100, f.heldout_geomean_abs_error * 100);
      rows.push_back({{"family", f.family}, {"heldout_geomean_abs_error", f.heldout_geomean_abs_error},
                      {"train_geomean_abs_error", f.train_geomean_abs_error}, {"heldout_samples", f.heldout_samples}});
    }
    std::vector<std::pair<std::string, std::string>> files{{out, kernel_calibration_to_json(cal)}};
    if (!k->json.empty()) {
      nlohmann::json j = {{"context", {{"perfcast_version", build_info::kVersion}, {"git_commit", build_info::kGitCommit},
                                       {"system", s.name}, {"gpu", s.gpu.name}, {"measured_gpu", cal.gpu},
                                       {"calibration_file", out}}},
                          {"families", rows}};
      files.emplace_back(k->json, j.dump(2) + "\n");
    }
    write_outputs(files);
    if (k->json != "-") std::cout << text << "wrote " << out << "\n";
    return 0;
  };

  auto comms_action = [a]() {
    const SystemSpec s = load_system(a->system);
    LogHints hints;
    if (!a->collective.empty()) {
      hints.kind = collective_from_name(a->collective);
      if (!hints.kind) throw ConfigError("--collective", "", fmt::format("unknown collective \"{}\"", a->collective));
    }
    if (a->ranks > 0) hints.ranks = a->ranks;
    CommsCalibration cal;
    cal.fabric = std::string(fabric_name(s.fabric));
    cal.date = today();
    cal.commit = build_info::kGitCommit;
    std::map<CollectiveKind, std::vector<CollectiveSample>> by_kind;
    std::set<std::string> gpus, versions;
    for (const auto& path : a->logs) {
      const CollectiveLog log = parse_collective_log(path, hints);
      cal.sources.push_back(path);
      if (!log.gpu.empty()) gpus.insert(log.gpu);
      if (!log.nccl_version.empty()) versions.insert(log.nccl_version);
      for (const auto& smp : log.samples) {
        if (smp.ranks > s.gpus_per_node || smp.nodes > 1) {
          throw ConfigError(path, "", fmt::format("{} ranks on {} node(s) do not fit in one node of {} ({} GPUs); multi-node "
                                                  "calibration is not supported yet: give logs of runs inside one node "
                                                  "(at most {} ranks), or leave \"comms_calibration\" out of the system file (the "
                                                  "spec-derived model)", smp.ranks, smp.nodes, s.name, s.gpus_per_node,
                                                  s.gpus_per_node));
        }
        by_kind[smp.kind].push_back(smp);
      }
    }
    cal.gpu = gpus.empty() ? "not stated in the measurements; system says " + s.gpu.name : fmt::format("{}", fmt::join(gpus, "; "));
    cal.nccl_version = versions.empty() ? "not stated in the measurements" : fmt::format("{}", fmt::join(versions, "; "));

    const AlphaBetaCollectiveModel v1(s);
    nlohmann::json report = nlohmann::json::array();
    std::string text;
    for (auto& [kind, samples] : by_kind) {
      if (samples.size() < kMinFitSamples) {
        throw ConfigError(fmt::format("{}", fmt::join(a->logs, ", ")), "",
                          fmt::format("{} {} sample(s); fitting needs at least {} message sizes per collective: run "
                                      "nccl-tests over a range of sizes (e.g. -b 8 -e 8G -f 2 gives 31)",
                                      samples.size(), collective_name(kind), kMinFitSamples));
      }
      CollectiveFit fit = fit_collective(samples, nccl_initial_protocols(s));
      for (const auto& p : fit.protocols) {
        if (!std::isfinite(p.a) || !std::isfinite(p.b) || !std::isfinite(p.c) || !std::isfinite(p.d))
          throw ConfigError(fmt::format("{}", fmt::join(a->logs, ", ")), "",
                            fmt::format("the {} fit of protocol {} is not finite; the measurements cannot be fitted",
                                        collective_name(kind), p.name));
      }
      text += fmt::format("{}: {} samples, ranks {}-{}, {} to {}\n", collective_name(kind), samples.size(), fit.min_ranks,
                          fit.max_ranks, format_bytes(fit.min_bytes), format_bytes(fit.max_bytes));
      for (const auto& p : fit.protocols) {
        text += fmt::format("  {:<7} latency {:>8.2f} us  per step {:>6.2f} us  busBw {:>8.1f} GB/s{}\n", p.name, p.a * 1e6,
                            p.b * 1e6, p.c > 0 ? 1e-9 / p.c : 0.0,
                            p.d > 0 ? fmt::format("  small-group {:.1f} GB/s", 1e-9 / p.d) : "");
      }
      std::set<int> counts;
      for (const auto& smp : samples) counts.insert(smp.ranks);
      text += fmt::format("  geomean |error| for sizes >= 1 MiB, per rank count:\n  {:>6} {:>10} {:>14}{}\n", "ranks",
                          "fitted", "spec-derived v1", a->leave_one_out ? "  leave-one-out" : "");
      std::vector<double> all_loo, all_fit, all_v1;
      nlohmann::json rows = nlohmann::json::array();
      for (int n : counts) {
        std::vector<CollectiveSample> mine, others;
        for (const auto& smp : samples) (smp.ranks == n ? mine : others).push_back(smp);
        const auto fitted = fit_errors(fit, mine, kMiB);
        std::vector<double> base;
        RankGroup g;
        for (int r = 0; r < n; ++r) g.ranks.push_back(r);
        for (const auto& smp : mine)
          if (smp.bytes >= kMiB) base.push_back(v1.estimate(CollectiveDesc{kind, smp.bytes, {}}, g).time / smp.time_s - 1);
        all_fit.insert(all_fit.end(), fitted.begin(), fitted.end());
        all_v1.insert(all_v1.end(), base.begin(), base.end());
        nlohmann::json row = {{"ranks", n}, {"fitted", geomean_abs_error(fitted)}, {"spec_derived_v1", geomean_abs_error(base)}};
        std::string loo_text;
        if (a->leave_one_out && others.size() >= 8) {
          const CollectiveFit held = fit_collective(others, nccl_initial_protocols(s));
          const auto loo = fit_errors(held, mine, kMiB);
          all_loo.insert(all_loo.end(), loo.begin(), loo.end());
          row["leave_one_out"] = geomean_abs_error(loo);
          loo_text = fmt::format("  {:>12.2f}%", geomean_abs_error(loo) * 100);
        }
        rows.push_back(row);
        text += fmt::format("  {:>6} {:>9.2f}% {:>13.2f}%{}\n", n, geomean_abs_error(fitted) * 100, geomean_abs_error(base) * 100, loo_text);
      }
      text += fmt::format("  {:>6} {:>9.2f}% {:>13.2f}%{}\n", "all", geomean_abs_error(all_fit) * 100, geomean_abs_error(all_v1) * 100,
                          a->leave_one_out ? fmt::format("  {:>12.2f}%", geomean_abs_error(all_loo) * 100) : "");
      report.push_back({{"collective", collective_name(kind)}, {"per_rank_count", rows},
                        {"geomean_abs_error_fitted", geomean_abs_error(all_fit)},
                        {"geomean_abs_error_spec_derived_v1", geomean_abs_error(all_v1)},
                        {"geomean_abs_error_leave_one_out", a->leave_one_out ? nlohmann::json(geomean_abs_error(all_loo)) : nlohmann::json()}});
      cal.fits.push_back(std::move(fit));
    }
    std::string out = a->out;
    if (out.empty()) {
      const std::filesystem::path sp(a->system);
      out = (sp.parent_path() / (sp.stem().string() + ".comms.json")).string();
    }
    std::vector<std::pair<std::string, std::string>> files{{out, calibration_to_json(cal)}};
    if (!a->json.empty()) {
      nlohmann::json j = {{"context", {{"perfcast_version", build_info::kVersion}, {"git_commit", build_info::kGitCommit},
                                       {"system", s.name}, {"measurements", cal.sources}, {"calibration_file", out}}},
                          {"collectives", report}};
      files.emplace_back(a->json, j.dump(2) + "\n");
    }
    write_outputs(files);
    if (a->json != "-") std::cout << text << "wrote " << out << "\n";
    return 0;
  };
  return [comms, comms_action, kernels_action]() { return comms->parsed() ? comms_action() : kernels_action(); };
}

}  // namespace perfcast::cli
