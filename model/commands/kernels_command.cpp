#include "model/commands/kernels_command.hpp"

#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error_stats.hpp"
#include "core/utc_time.hpp"
#include "model/commands/command_context.hpp"
#include "model/commands/kernel_spec_args.hpp"
#include "model/predict/predict.hpp"
#include "perfcast/build_info.hpp"
#include "predictors/kernel_calibration.hpp"
#include "predictors/kernel_rows.hpp"
#include "predictors/public_kernel_fit.hpp"
#include "topology/system_spec.hpp"
#include "core/json_text.hpp"

namespace perfcast {
namespace {

/// A system given with --system, the calibration its kernels are predicted with, and its
/// GPU class.
struct SystemEntry {
  std::string file;
  SystemSpec system;
  std::optional<KernelCalibration> calibration;
  std::string calibration_file;  ///< "" when spec-derived
  std::string gpu_class;
};

std::vector<SystemEntry> load_systems(const KernelsRequest& req) {
  std::optional<KernelCalibration> named;
  if (!req.spec_derived && !req.calibration.empty()) named = parse_kernel_calibration(load_json_file(req.calibration));
  std::vector<SystemEntry> out;
  for (const auto& file : req.systems) {
    SystemEntry e;
    e.file = file;
    e.system = load_system(file);
    e.gpu_class = gpu_class_of(e.system.gpu.name);
    if (named) {
      e.calibration = named;
      e.calibration_file = req.calibration;
    } else if (!req.spec_derived) {
      e.calibration = load_system_kernel_calibration(e.system, &e.calibration_file);
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::string calibration_phrase(const SystemEntry& e) {
  if (!e.calibration) return "spec-derived (no kernel calibration)";
  const auto& c = *e.calibration;
  return fmt::format("calibrated: {}{}", e.calibration_file, c.basis.empty() ? "" : " (" + c.basis + ")");
}

std::string us(Seconds s) { return fmt::format("{:.2f}", s * 1e6); }

std::string labels(const std::vector<KernelDesc>& kernels) {
  std::string out;
  for (const auto& k : kernels) out += (out.empty() ? "" : " + ") + kernel_label(k);
  return out;
}

// ---- single kernels ----

KernelsOutcome run_single_kernels(const KernelsRequest& req, const std::vector<SystemEntry>& systems) {
  std::vector<KernelSpecArg> args;
  for (const auto& t : req.gemm) args.push_back(parse_gemm_arg(t));
  for (const auto& t : req.attention) args.push_back(parse_attention_arg(t));
  for (const auto& t : req.memory_bound) args.push_back(parse_memory_bound_arg(t));
  for (const auto& t : req.embedding) args.push_back(parse_embedding_arg(t));
  const SystemEntry& sys = systems.front();
  const KernelCalibration* cal = sys.calibration ? &*sys.calibration : nullptr;
  KernelsOutcome out;
  out.text = fmt::format("perfcast kernels: {} kernel(s) on {} ({}; {})\n{:<60} {:>12} {:>10} {:>10} {:>8}  {}\n", args.size(), sys.system.name,
                         sys.system.gpu.name, calibration_phrase(sys), "kernel", "time", "TFLOP/s", "GB/s", "bound", "predictor");
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& a : args) {
    Seconds time = 0;
    double flops = 0, bytes = 0;
    std::vector<std::string> predictors, bounds;
    bool calibrated = true;
    for (const auto& k : a.kernels) {
      const Estimate e = predict_with_calibration(k, sys.system.gpu, cal);
      time += e.time;
      flops += e.flops;
      bytes += e.dram_bytes;
      predictors.emplace_back(e.predictor);
      bounds.emplace_back(e.bound);
      calibrated = calibrated && e.calibrated;
    }
    const std::string label = labels(a.kernels);
    out.text += fmt::format("{:<60} {:>12} {:>10.1f} {:>10.1f} {:>8}  {}{}\n", label, format_time(time), flops / time / 1e12,
                            bytes / time / 1e9, fmt::join(bounds, "+"), fmt::join(predictors, " + "), calibrated ? "" : " (spec-derived)");
    rows.push_back({{"option", a.option}, {"spec", a.text}, {"kernel", label}, {"time_us", time * 1e6}, {"flops", flops},
                    {"dram_bytes", bytes}, {"bound", fmt::format("{}", fmt::join(bounds, "+"))},
                    {"predictor", fmt::format("{}", fmt::join(predictors, " + "))}, {"calibrated", calibrated}});
  }
  nlohmann::json j = {{"context", command_context("kernels", req.systems)},
                      {"system", sys.system.name},
                      {"gpu", sys.system.gpu.name},
                      {"calibration", sys.calibration_file},
                      {"kernels", rows}};
  out.json = json_text(j, 2) + "\n";
  out.csv = json_rows_to_csv(rows, {"option", "spec", "kernel", "time_us", "flops", "dram_bytes", "bound", "predictor", "calibrated"});
  return out;
}

// ---- measured rows ----

/// One row of the report: a measured row with its prediction (or why there is none).
struct ReportRow {
  const KernelRow* row = nullptr;
  const SystemEntry* system = nullptr;
  std::string not_expressible;
  Seconds predicted = 0;
  std::string predictor;
  bool calibrated = false;
  double error = 0;
  Seconds heldout = 0;       ///< leave-one-source-out prediction (when computed), its harness cost included
  double heldout_error = 0;
  Seconds heldout_harness = 0;     ///< the harness-timed source's own per-call cost in `heldout` (0: none)
  double heldout_kernel_error = 0;  ///< the error of the held-out kernels' time alone (without heldout_harness)
};

struct Summary {
  ErrorSummary stats;
  std::set<std::string> caveats;
};

/// Which error of a row a summary is of.
enum class ErrorOf { kPrinted, kHeldOut, kHeldOutKernels };

/// Per family and per (family, source) error statistics of the predicted rows.
std::pair<std::map<std::string, Summary>, std::map<std::pair<std::string, std::string>, Summary>> summarize(
    const std::vector<ReportRow>& rows, ErrorOf which) {
  std::map<std::string, std::vector<double>> fam;
  std::map<std::pair<std::string, std::string>, std::vector<double>> src;
  std::map<std::pair<std::string, std::string>, std::set<std::string>> caveats;
  for (const auto& r : rows) {
    if (!r.not_expressible.empty()) continue;
    const double e = which == ErrorOf::kPrinted ? r.error : which == ErrorOf::kHeldOut ? r.heldout_error : r.heldout_kernel_error;
    fam[r.row->table].push_back(e);
    src[{r.row->table, r.row->source}].push_back(e);
    for (const auto& c : r.row->caveats) caveats[{r.row->table, r.row->source}].insert(c);
  }
  std::map<std::string, Summary> by_family;
  std::map<std::pair<std::string, std::string>, Summary> by_source;
  for (const auto& [k, v] : fam) by_family[k].stats = summarize_errors(v);
  for (const auto& [k, v] : src) by_source[k] = {summarize_errors(v), caveats[k]};
  return {by_family, by_source};
}

/// Each family's geometric mean over its sources of the sources' geomean |error|: every
/// source counts once, however many rows it has.
std::map<std::string, double> per_source_geomean(const std::map<std::pair<std::string, std::string>, Summary>& by_source) {
  std::map<std::string, std::pair<double, int>> acc;
  for (const auto& [k, s] : by_source) {
    acc[k.first].first += std::log(std::max(s.stats.geomean_abs, kErrorFloor));
    acc[k.first].second += 1;
  }
  std::map<std::string, double> out;
  for (const auto& [f, a] : acc) out[f] = std::exp(a.first / a.second);
  return out;
}

nlohmann::json stats_json(const ErrorSummary& s) {
  return {{"rows", s.count}, {"geomean_abs_error", s.geomean_abs}, {"bias", s.mean_signed}, {"max_abs_error", s.max_abs}};
}

std::string calibration_path(const KernelsRequest& req, const SystemEntry& e) {
  const std::string name = calibration_file_name(e.system.gpu.name);
  if (!req.fit_dir.empty()) return (std::filesystem::path(req.fit_dir) / name).string();
  return (std::filesystem::path(e.file).parent_path() / ".." / "calibration" / name).lexically_normal().string();
}

/// The calibrations of the --fit systems from `fit`: each family records the in-sample
/// (fitted) and the leave-one-source-out (held-out) error of its group, each the per-source
/// geomean, and the row count of the group.
std::vector<std::pair<std::string, std::string>> fitted_calibrations(const KernelsRequest& req, const PublicKernelFit& fit,
                                                                     const std::vector<FitSample>& samples,
                                                                     const std::map<std::string, double>& fitted,
                                                                     const std::map<std::string, double>& heldout,
                                                                     const std::map<std::string, std::size_t>& rows,
                                                                     nlohmann::json& report) {
  std::set<std::string> all_sources;
  for (const auto& s : samples)
    if (!fit_group(*s.row).empty()) all_sources.insert(s.row->source);
  std::vector<std::pair<std::string, std::string>> files;
  report["harness_overhead_us"] = nlohmann::json::object();
  for (const auto& [source, t] : fit.harness_overhead_by_source) report["harness_overhead_us"][source] = t * 1e6;
  report["memory_efficiency_by_gpu_class"] = fit.memory_efficiency_by_class;
  report["calibrations"] = nlohmann::json::array();
  for (const auto& file : req.fit_systems) {
    const SystemSpec s = load_system(file);
    SystemEntry e{file, s, std::nullopt, "", gpu_class_of(s.gpu.name)};
    KernelCalibration cal = fit.calibration_for(e.gpu_class);
    cal.gpu = s.gpu.name;
    cal.date = utc_today();
    cal.commit = build_info::kGitCommit;
    cal.measurements = req.measurements;
    cal.sources.assign(all_sources.begin(), all_sources.end());
    cal.note = req.note;
    for (auto& f : cal.fits) {
      const std::string group = f.family.rfind("gemm", 0) == 0 ? "gemm" : f.family.rfind("attention", 0) == 0 ? "attention" : "memory_bound";
      if (!heldout.count(group)) continue;
      f.train_geomean_abs_error = fitted.at(group);
      f.heldout_geomean_abs_error = heldout.at(group);
      f.heldout_samples = rows.at(group);
    }
    const std::string path = calibration_path(req, e);
    files.emplace_back(path, kernel_calibration_to_json(cal));
    report["calibrations"].push_back({{"system", file}, {"gpu", s.gpu.name}, {"file", path}});
  }
  return files;
}

std::vector<ReportRow> match_rows(const std::vector<KernelRow>& rows, const std::vector<SystemEntry>& systems) {
  std::vector<std::string> classes;
  for (const auto& s : systems) classes.push_back(s.gpu_class);
  std::vector<ReportRow> out;
  for (const auto& r : rows) {
    ReportRow rr;
    rr.row = &r;
    for (const auto& s : systems)
      if (s.gpu_class == r.gpu_class) {
        rr.system = &s;
        break;
      }
    if (!r.not_expressible.empty()) rr.not_expressible = r.not_expressible;
    else if (!rr.system)
      rr.not_expressible = fmt::format("no --system with a {} GPU (given: {})", r.gpu_class, fmt::join(classes, ", "));
    out.push_back(rr);
  }
  return out;
}

std::string caveat_list(const std::set<std::string>& c) { return c.empty() ? "" : fmt::format("{}", fmt::join(c, ", ")); }

KernelsOutcome run_measured_rows(const KernelsRequest& req, const std::vector<SystemEntry>& systems) {
  std::vector<KernelRow> rows;
  for (const auto& f : req.measurements) {
    auto r = read_kernel_rows(f);
    rows.insert(rows.end(), std::make_move_iterator(r.begin()), std::make_move_iterator(r.end()));
  }
  std::vector<ReportRow> report = match_rows(rows, systems);
  std::vector<FitSample> samples;
  std::vector<std::size_t> sample_row;
  for (std::size_t i = 0; i < report.size(); ++i) {
    if (!report[i].not_expressible.empty()) continue;
    FitSample s{report[i].row, report[i].system->system.gpu};
    if (report[i].row->memory_bandwidth > 0) s.gpu.memory_bandwidth = report[i].row->memory_bandwidth;
    samples.push_back(s);
    sample_row.push_back(i);
  }
  const bool fitting = !req.fit_systems.empty();
  const HeldOutPredictions held = req.leave_one_source_out || fitting ? leave_one_source_out(samples) : HeldOutPredictions{};
  const bool any_heldout = !held.kernel.empty();
  std::optional<PublicKernelFit> fit;
  if (fitting) fit = fit_public_kernels(samples);
  std::map<std::string, KernelCalibration> fitted_by_class;
  for (std::size_t j = 0; j < samples.size(); ++j) {
    ReportRow& r = report[sample_row[j]];
    const KernelCalibration* cal = r.system->calibration ? &*r.system->calibration : nullptr;
    if (fit) {
      const std::string& cls = r.row->gpu_class;
      if (!fitted_by_class.count(cls)) fitted_by_class[cls] = fit->calibration_for(cls);
      cal = &fitted_by_class[cls];
    }
    const Estimate first = predict_with_calibration(r.row->kernels.front(), samples[j].gpu, cal);
    // Fitted: a harness-timed row's source's fitted per-call cost is part of what was measured.
    r.predicted = req.leave_one_source_out && !fit ? held.kernel[j] + held.harness[j]
                                                   : predict_sample(samples[j], cal) + (fit ? fit->harness_cost(*r.row) : 0.0);
    r.predictor = req.leave_one_source_out && !fit ? "held out" : std::string(first.predictor);
    r.calibrated = !(req.leave_one_source_out && !fit) && first.calibrated;
    r.error = relative_error(r.predicted, r.row->measured);
    if (any_heldout) {
      r.heldout = held.kernel[j] + held.harness[j];
      r.heldout_harness = held.harness[j];
      r.heldout_error = relative_error(r.heldout, r.row->measured);
      r.heldout_kernel_error = relative_error(held.kernel[j], r.row->measured);
    }
  }
  const auto [by_family, by_source] = summarize(report, ErrorOf::kPrinted);
  const auto source_mean = per_source_geomean(by_source);
  std::map<std::string, Summary> held_family, kernel_family;
  std::map<std::pair<std::string, std::string>, Summary> held_source, kernel_source;
  if (any_heldout) {
    std::tie(held_family, held_source) = summarize(report, ErrorOf::kHeldOut);
    std::tie(kernel_family, kernel_source) = summarize(report, ErrorOf::kHeldOutKernels);
  }
  const auto held_mean = per_source_geomean(held_source);
  const auto kernel_mean = per_source_geomean(kernel_source);
  const bool two = fitting;  // fitted and held-out columns side by side

  KernelsOutcome out;
  nlohmann::json fit_report = nlohmann::json::object();
  if (fit) {
    std::map<std::string, std::size_t> held_rows;
    for (const auto& [f, s] : held_family) held_rows[f] = s.stats.count;
    out.calibrations = fitted_calibrations(req, *fit, samples, source_mean, held_mean, held_rows, fit_report);
  }

  // ---- text ----
  const std::size_t predicted = samples.size();
  std::string& t = out.text;
  t = fmt::format("perfcast kernels: {} rows from {} file(s); {} predicted, {} not expressible\n", report.size(), req.measurements.size(),
                  predicted, report.size() - predicted);
  if (fit) {
    t += "  predicted: kernel model 2 fitted on every row (each row on its GPU class); held out: each source's rows by the fit on the "
         "other sources' rows\n";
    t += "  harness-timed sources (do_bench, CUDA events): fitted and held out with a per-call cost of their own, never a kernel's\n";
  } else {
    for (const auto& s : systems) t += fmt::format("  {} ({}): {}\n", s.gpu_class, s.file, calibration_phrase(s));
    if (req.leave_one_source_out)
      t += "  predictions held out: each source's rows predicted by the fit (kernel model 2) on the other sources' rows; a harness-timed "
           "source's with a per-call cost of its own\n";
  }
  t += fmt::format("\n{:<24} {:<34} {:<9} {:<58} {:>11} {:>12} {:>8}{}\n", "row", "source", "gpu", "kernel", "measured us",
                   fit ? "fitted us" : "predicted us", "error", two ? fmt::format(" {:>12} {:>8}", "held-out us", "error") : "");
  for (const auto& r : report) {
    if (!r.not_expressible.empty()) continue;
    t += fmt::format("{:<24} {:<34} {:<9} {:<58} {:>11} {:>12} {:>+7.1f}%{}\n", r.row->row_id, r.row->source, r.row->gpu_class,
                     labels(r.row->kernels), us(r.row->measured), us(r.predicted), 100 * r.error,
                     two ? fmt::format(" {:>12} {:>+7.1f}%", us(r.heldout), 100 * r.heldout_error) : "");
  }
  auto stats = [](const ErrorSummary& e) {
    return fmt::format("{:>13.1f}% {:>+7.1f}% {:>7.1f}%", 100 * e.geomean_abs, 100 * e.mean_signed, 100 * e.max_abs);
  };
  const bool per_source_column = req.leave_one_source_out || two;
  t += fmt::format("\n{:<14} {:>6} {:>14} {:>8} {:>8}{}{}\n", "family", "rows", "geomean |err|", "bias", "max",
                   per_source_column ? "  per-source geomean" : "",
                   two ? fmt::format("   held out: {:>14} {:>8} {:>8}  per-source geomean", "geomean |err|", "bias", "max") : "");
  for (const auto& [f, s] : by_family)
    t += fmt::format("{:<14} {:>6} {}{}{}\n", f, s.stats.count, stats(s.stats),
                     per_source_column ? fmt::format("  {:>18.1f}%", 100 * source_mean.at(f)) : "",
                     two ? fmt::format("             {}  {:>18.1f}%", stats(held_family.at(f).stats), 100 * held_mean.at(f)) : "");
  if (any_heldout) {
    t += "held out, the kernels' time alone (harness-timed sources without their own per-call cost), per-source geomean:";
    for (const auto& [f, m] : kernel_mean) t += fmt::format(" {} {:.1f}%;", f, 100 * m);
    t += "\n";
  }
  t += fmt::format("\n{:<14} {:<36} {:>6} {:>14} {:>8} {:>8}{}  {}\n", "family", "source", "rows", "geomean |err|", "bias", "max",
                   two ? fmt::format("   held out: {:>14} {:>8} {:>8}", "geomean |err|", "bias", "max") : "", "caveats");
  for (const auto& [k, s] : by_source)
    t += fmt::format("{:<14} {:<36} {:>6} {}{}  {}\n", k.first, k.second, s.stats.count, stats(s.stats),
                     two ? fmt::format("             {}", stats(held_source.at(k).stats)) : "", caveat_list(s.caveats));
  std::map<std::string, std::vector<std::string>> reasons;
  for (const auto& r : report)
    if (!r.not_expressible.empty()) reasons[r.not_expressible].push_back(r.row->row_id);
  if (!reasons.empty()) {
    t += fmt::format("\nnot expressible ({} rows; --json and --csv list every one):\n", report.size() - predicted);
    for (const auto& [why, ids] : reasons) {
      const std::size_t shown = std::min<std::size_t>(ids.size(), 6);
      t += fmt::format("  {:>5}  {}: {}{}\n", ids.size(), why, fmt::join(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                       ids.size() > shown ? ", ..." : "");
    }
  }
  if (fit) {
    t += "\nharness intercepts fitted per source (never used to predict a kernel):";
    for (const auto& [source, v] : fit->harness_overhead_by_source) t += fmt::format(" {} {:.2f} us;", source, v * 1e6);
    t += "\nmemory-bound HBM share per GPU class:";
    for (const auto& [cls, e] : fit->memory_efficiency_by_class) t += fmt::format(" {} {:.3f};", cls, e);
    t += "\n";
  }
  for (const auto& [path, content] : out.calibrations) t += fmt::format("fitted calibration: {}\n", path);

  // ---- JSON and CSV ----
  nlohmann::json rows_json = nlohmann::json::array();
  for (const auto& r : report) {
    nlohmann::json j = {{"file", r.row->file},        {"row", r.row->where},       {"row_id", r.row->row_id},
                        {"source", r.row->source},    {"family", r.row->table},    {"gpu", r.row->gpu},
                        {"gpu_class", r.row->gpu_class}, {"implementation", r.row->implementation}, {"op", r.row->op},
                        {"measured_us", r.row->measured * 1e6}, {"weight", r.row->weight}, {"caveats", r.row->caveats}};
    if (r.not_expressible.empty()) {
      j["kernel"] = labels(r.row->kernels);
      j["predicted_us"] = r.predicted * 1e6;
      j["error"] = r.error;
      j["predictor"] = r.predictor;
      j["calibrated"] = r.calibrated;
      j["system"] = r.system->file;
      if (any_heldout) {
        j["heldout_predicted_us"] = r.heldout * 1e6;
        j["heldout_error"] = r.heldout_error;
        if (r.heldout_harness > 0) {
          j["heldout_harness_us"] = r.heldout_harness * 1e6;
          j["heldout_kernel_error"] = r.heldout_kernel_error;
        }
      }
    } else {
      j["not_expressible"] = r.not_expressible;
    }
    rows_json.push_back(j);
  }
  nlohmann::json families = nlohmann::json::array(), sources = nlohmann::json::array(), unexpressed = nlohmann::json::array();
  for (const auto& [f, s] : by_family) {
    nlohmann::json j = stats_json(s.stats);
    j["family"] = f;
    j["per_source_geomean_abs_error"] = source_mean.at(f);
    if (two) {
      j["held_out"] = stats_json(held_family.at(f).stats);
      j["held_out"]["per_source_geomean_abs_error"] = held_mean.at(f);
      j["held_out"]["kernels_alone_per_source_geomean_abs_error"] = kernel_mean.at(f);
    } else if (any_heldout) {  // the printed predictions are the held-out ones
      j["kernels_alone_per_source_geomean_abs_error"] = kernel_mean.at(f);
    }
    families.push_back(j);
  }
  for (const auto& [k, s] : by_source) {
    nlohmann::json j = stats_json(s.stats);
    j["family"] = k.first;
    j["source"] = k.second;
    j["caveats"] = s.caveats;
    if (two) {
      j["held_out"] = stats_json(held_source.at(k).stats);
      j["held_out"]["kernels_alone"] = stats_json(kernel_source.at(k).stats);
    } else if (any_heldout) {
      j["kernels_alone"] = stats_json(kernel_source.at(k).stats);
    }
    sources.push_back(j);
  }
  for (const auto& [why, ids] : reasons) unexpressed.push_back({{"reason", why}, {"count", ids.size()}, {"rows", ids}});
  nlohmann::json j = {{"context", command_context("kernels", [&] {
                         auto in = req.systems;
                         in.insert(in.end(), req.measurements.begin(), req.measurements.end());
                         return in;
                       }())},
                      {"predictions", fit ? "fitted" : req.leave_one_source_out ? "held out" : "calibrations of the systems"},
                      {"rows", rows_json},
                      {"summary", {{"by_family", families}, {"by_source", sources}}},
                      {"not_expressible", unexpressed}};
  if (!req.fit_systems.empty()) j["fit"] = fit_report;
  out.json = json_text(j, 2) + "\n";
  out.csv = json_rows_to_csv(rows_json, {"file", "row", "row_id", "source", "family", "gpu", "gpu_class", "implementation", "op", "kernel",
                                         "measured_us", "predicted_us", "error", "heldout_predicted_us", "heldout_error", "heldout_harness_us", "predictor",
                                         "calibrated", "weight", "not_expressible"});
  return out;
}

}  // namespace

KernelsOutcome run_kernels(const KernelsRequest& req) {
  const bool single = !req.gemm.empty() || !req.attention.empty() || !req.memory_bound.empty() || !req.embedding.empty();
  if (req.systems.empty()) throw ConfigError("--system", "", "give at least one system file");
  if (single && !req.measurements.empty())
    throw ConfigError("--measurements", "", "give single kernels (--gemm, --attention, ...) or measurement files, not both");
  if (!single && req.measurements.empty())
    throw ConfigError("--measurements", "", "nothing to predict: give --gemm, --attention, --memory-bound, --embedding or --measurements");
  if (req.spec_derived && !req.calibration.empty()) throw ConfigError("--calibration", "", "--spec-derived uses no calibration");
  if ((req.leave_one_source_out || !req.fit_systems.empty()) && req.measurements.empty())
    throw ConfigError("--fit", "", "fitting and leaving sources out need --measurements");
  if (!req.fit_dir.empty() && !std::filesystem::is_directory(req.fit_dir))
    throw ConfigError("--fit-dir", "", fmt::format("expected an existing folder, got \"{}\"", req.fit_dir));
  const std::vector<SystemEntry> systems = load_systems(req);
  return single ? run_single_kernels(req, systems) : run_measured_rows(req, systems);
}

}  // namespace perfcast
