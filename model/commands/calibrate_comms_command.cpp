#include "model/commands/calibrate_command.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error_stats.hpp"
#include "core/json_text.hpp"
#include "core/limits.hpp"
#include "core/run_context.hpp"
#include "core/utc_time.hpp"
#include "perfcast/build_info.hpp"
#include "topology/collective_calibration.hpp"
#include "topology/measurement_table_csv.hpp"
#include "topology/source_spread.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {
namespace {

/// fit_collective needs this many samples of one collective (4 terms, each protocol).
constexpr std::size_t kMinFitSamples = 8;

/// One source of samples: a file, or one source of a measurement table.
struct CommsSource {
  std::string name;                ///< file, or "file#lineN (source url)"
  /// What leave-one-source-out leaves out together: a table's source, or a plain file's
  /// folder (the vTrain tables of 2..8 GPUs are one source).
  std::string group;
  std::string forced_algorithm;    ///< NCCL_ALGO the run forced, as the spec-derived model names it
  std::vector<CollectiveSample> samples;
};

/// The model a calibration replaces, on a sample: the spec-derived model over a system
/// grown to the sample's node count (ranks spread evenly over its nodes), with the
/// algorithm the run forced where NCCL could run it there.
double prior_time(const SystemSpec& s, const CollectiveSample& smp, const std::string& forced) {
  return spec_sample_time(s, smp, forced);
}

/// A fit's predicted time of one of its samples.
double fit_time(const SystemSpec& s, const CollectiveFit& fit, const CollectiveSample& smp) {
  return fit.structured() ? fit.structured_time(sample_terms(s, smp, fit.algorithm), smp.bytes) : fit.time(smp.bytes, smp.ranks);
}

bool keep_source(const SourcedLog& l, const std::vector<std::string>& only) {
  if (only.empty()) return true;
  for (const auto& t : only)
    if (l.log.gpu.find(t) != std::string::npos || l.source_url.find(t) != std::string::npos || l.env.find(t) != std::string::npos)
      return true;
  return false;
}

std::vector<CommsSource> read_comms_sources(const CalibrateCommsRequest& a, const LogHints& hints, CommsCalibration& cal) {
  std::vector<CommsSource> sources;
  std::set<std::string> gpus, versions;
  for (const auto& path : a.logs) {
    if (is_measurement_table_csv(path)) {
      for (auto& l : parse_measurement_table_csv(path)) {
        if (!keep_source(l, a.only)) continue;
        const std::string name = fmt::format("{} ({}{}{}, {}, {} node(s){}{})", l.log.file, l.source_url,
                                             l.log.gpu.empty() ? "" : ", ", l.log.gpu, l.time_basis,
                                             l.log.samples.front().nodes, l.nodes_assumed ? " assumed" : "",
                                             l.suspect ? ", notes say suspect" : "");
        for (auto& smp : l.log.samples) smp.source = name;
        if (!l.log.gpu.empty()) gpus.insert(l.log.gpu);
        if (!l.log.nccl_version.empty()) versions.insert(l.log.nccl_version);
        cal.sources.push_back(name + (l.forced_algorithm.empty() ? "" : "; NCCL_ALGO forced: " + l.forced_algorithm));
        sources.push_back({name, name, l.forced_algorithm, std::move(l.log.samples)});
      }
      continue;
    }
    const CollectiveLog log = parse_collective_log(path, hints);
    cal.sources.push_back(path);
    if (!log.gpu.empty()) gpus.insert(log.gpu);
    if (!log.nccl_version.empty()) versions.insert(log.nccl_version);
    const std::string folder = std::filesystem::path(path).parent_path().lexically_normal().string();
    sources.push_back({path, folder.empty() ? "." : folder + "/", "", log.samples});
  }
  if (sources.empty()) throw ConfigError("--only", "", "no source of the measurement tables matches");
  cal.gpu = gpus.empty() ? "not stated in the measurements" : fmt::format("{}", fmt::join(gpus, "; "));
  cal.nccl_version = versions.empty() ? "not stated in the measurements" : fmt::format("{}", fmt::join(versions, "; "));
  return sources;
}

/// Per power-of-two size bin from 64 KiB: geomean |error| of the fit and of the prior.
std::string per_size_table(const SystemSpec& s, const CollectiveFit& fit, const std::vector<CollectiveSample>& samples,
                           const std::function<double(const CollectiveSample&)>& prior) {
  std::map<int, std::pair<std::vector<double>, std::vector<double>>> bins;
  for (const auto& smp : samples) {
    if (smp.bytes < 64 * 1024.0) continue;
    auto& b = bins[static_cast<int>(std::floor(std::log2(smp.bytes)))];
    b.first.push_back(fit_time(s, fit, smp) / smp.time_s - 1);
    b.second.push_back(prior(smp) / smp.time_s - 1);
  }
  std::string text = fmt::format("  per size (geomean |error|, in-sample):\n  {:>10} {:>7} {:>8} {:>8}\n", "size", "samples", "fitted", "prior");
  for (const auto& [log2, b] : bins) {
    text += fmt::format("  {:>10} {:>7} {:>7.2f}% {:>7.2f}%\n", format_bytes(std::ldexp(1.0, log2)), b.first.size(),
                        geomean_abs(b.first) * 100, geomean_abs(b.second) * 100);
  }
  return text;
}

std::size_t distinct_sizes(const std::vector<CollectiveSample>& samples) {
  std::set<double> sizes;
  for (const auto& smp : samples) sizes.insert(smp.bytes);
  return sizes.size();
}

/// What one fit covers: collective, more than one node, the algorithm the runs forced.
using FitKey = std::tuple<CollectiveKind, bool, std::string>;

std::string fit_label(const FitKey& key) {
  const auto& [kind, multi, algorithm] = key;
  return fmt::format("{} ({}{})", collective_name(kind), multi ? "multi-node" : "one node",
                     algorithm.empty() ? "" : ", NCCL_ALGO forced: " + algorithm);
}

/// One fit of the samples of a group: per-protocol terms inside one NVLink domain, the
/// structured model across domains; node counts recorded in NVLink domains.
CollectiveFit fit_group(const SystemSpec& s, const FitKey& key, const std::vector<CollectiveSample>& samples) {
  const std::string& algorithm = std::get<2>(key);  // named: clang 14 lambdas cannot capture structured bindings
  CollectiveFit fit = std::get<1>(key)
                          ? fit_structured(samples, [&](const CollectiveSample& smp) { return sample_terms(s, smp, algorithm); })
                          : fit_collective(samples, nccl_initial_protocols(s, 1));
  std::set<int> domains;
  for (const auto& smp : samples) domains.insert(sample_domains(s, smp));
  fit.min_nodes = *domains.begin();
  fit.max_nodes = *domains.rbegin();
  fit.node_counts.assign(domains.begin(), domains.end());
  fit.algorithm = algorithm;
  return fit;
}

/// The held-out check of a group's fit against the prior.
void check_group(const SystemSpec& s, const FitKey& key, const std::vector<CollectiveSample>& samples, CollectiveFit& fit,
                 const std::function<double(const CollectiveSample&)>& prior) {
  const std::string& algorithm = std::get<2>(key);
  if (std::get<1>(key)) {
    check_held_out_structured(fit.quality, samples, [&](const CollectiveSample& smp) { return sample_terms(s, smp, algorithm); }, prior);
  } else {
    check_held_out(fit.quality, samples, nccl_initial_protocols(s, 1), prior);
  }
}

/// For each source: fits on all the other sources (per collective, node class and forced
/// algorithm), the calibrated model made of them predicts the source's samples (with the
/// algorithm the source forced, where it forced one); errors against the prior's.
nlohmann::json leave_one_source_out(const SystemSpec& s, const std::map<FitKey, std::vector<CollectiveSample>>& groups,
                                    std::map<std::string, std::string>& group_of, std::map<std::string, std::string>& forced,
                                    std::string& text) {
  std::set<std::string> names;
  for (const auto& [key, samples] : groups)
    for (const auto& smp : samples) names.insert(group_of[smp.source]);
  nlohmann::json rows = nlohmann::json::array();
  text += "leave one source out: geomean |error| >= 1 MiB, max |error| >= 64 KiB (calibrated from the other sources, fits that\n"
          "pass the held-out check only; prior)\n";
  for (const auto& name : names) {
    CommsCalibration cal;
    std::vector<CollectiveSample> mine;
    for (const auto& [key, samples] : groups) {
      std::vector<CollectiveSample> others;
      for (const auto& smp : samples) (group_of[smp.source] == name ? mine : others).push_back(smp);
      if (others.size() < 8) continue;
      // As calibrate would write it: only a fit that passes the held-out check.
      CollectiveFit fit = fit_group(s, key, others);
      const std::string& algorithm = std::get<2>(key);  // a named reference: lambdas may not capture structured bindings before C++20 in clang 14
      check_group(s, key, others, fit, [&](const CollectiveSample& smp) { return prior_time(s, smp, algorithm); });
      if (fit.quality.held_out == 0 || fit.quality.heldout_geomean_abs_error > fit.quality.heldout_prior_geomean_abs_error) continue;
      cal.fits.push_back(std::move(fit));
    }
    std::vector<double> fit_mib, prior_mib;
    double fit_max = 0, prior_max = 0;
    bool scored = false;
    std::string basis = "spec-derived (no fit applies)";
    int domains = 0;
    for (const auto& smp : mine) {
      if (smp.bytes < 64 * 1024.0) continue;
      const SystemSpec grown = system_for_sample(s, smp);
      const CalibratedCollectiveModel model(grown, cal);
      const RankGroup g = group_for_sample(grown, smp);
      const CollectiveDesc d{smp.kind, smp.bytes, {}};
      const std::string& algo = forced[smp.source];
      const CollectiveEstimate e = model.forced_estimate(d, g, algo);
      const double t = e.time;
      domains = sample_domains(s, smp);
      if (smp.bytes >= 1024.0 * 1024.0 && e.basis != "spec-derived") basis = e.basis;
      scored = true;
      const double ef = t / smp.time_s - 1, ep = prior_time(s, smp, algo) / smp.time_s - 1;
      fit_max = std::max(fit_max, std::fabs(ef));
      prior_max = std::max(prior_max, std::fabs(ep));
      if (smp.bytes >= 1024.0 * 1024.0) {
        fit_mib.push_back(ef);
        prior_mib.push_back(ep);
      }
    }
    if (!scored) {
      text += fmt::format("  {}: not scored (no sample of 64 KiB or more)\n", name);
      continue;
    }
    text += fmt::format("  {}\n    {} node(s); {} samples >= 1 MiB: calibrated {:.2f}% (max {:.2f}% >= 64 KiB; {}); prior {:.2f}% (max {:.2f}%)\n",
                        name, domains, fit_mib.size(), geomean_abs(fit_mib) * 100, fit_max * 100, basis, geomean_abs(prior_mib) * 100,
                        prior_max * 100);
    nlohmann::json row = {{"source", name}, {"nodes", domains}, {"basis", basis}, {"samples_from_1MiB", fit_mib.size()},
                          {"calibrated_geomean_abs_error_from_1MiB", geomean_abs(fit_mib)}, {"calibrated_max_abs_error_from_64KiB", fit_max},
                          {"prior_geomean_abs_error_from_1MiB", geomean_abs(prior_mib)}, {"prior_max_abs_error_from_64KiB", prior_max},
                          {"spread", nullptr}};
    std::vector<CollectiveSample> others_all;
    for (const auto& [key, samples] : groups)
      for (const auto& smp : samples)
        if (group_of[smp.source] != name) others_all.push_back(smp);
    const SourceSpread spread = source_spread(mine, others_all);
    if (spread.shared_sizes > 0) {
      text += fmt::format("    the other sources measured {} of its sizes >= 64 KiB ({} >= 1 MiB): copied exactly they are off by "
                          "{:.2f}% (max {:.2f}%); one model of both is off on one of them by at least {:.2f}% (geomean; {:.2f}% at the worst "
                          "size)\n",
                          spread.shared_sizes, spread.shared_from_1MiB, spread.geomean_from_1MiB * 100, spread.max_from_64KiB * 100,
                          spread.minimax_geomean_from_1MiB * 100, spread.minimax_max_from_64KiB * 100);
      row["spread"] = {{"shared_sizes_from_64KiB", spread.shared_sizes},
                       {"shared_sizes_from_1MiB", spread.shared_from_1MiB},
                       {"copy_geomean_abs_error_from_1MiB", spread.geomean_from_1MiB},
                       {"copy_max_abs_error_from_64KiB", spread.max_from_64KiB},
                       {"minimax_geomean_from_1MiB", spread.minimax_geomean_from_1MiB},
                       {"minimax_max_from_64KiB", spread.minimax_max_from_64KiB}};
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

CalibrateOutcome calibrate_comms(const CalibrateCommsRequest& a) {
  const SystemSpec s = load_system(a.system);
  LogHints hints;
  if (!a.collective.empty()) {
    hints.kind = collective_from_name(a.collective);
    if (!hints.kind) throw ConfigError("--collective", "", fmt::format("unknown collective \"{}\"", a.collective));
  }
  if (a.ranks > 0) hints.ranks = a.ranks;
  CommsCalibration cal;
  cal.fabric = std::string(fabric_name(s.fabric));
  cal.date = utc_today();
  cal.commit = build_info::kGitCommit;
  std::vector<CommsSource> sources = read_comms_sources(a, hints, cal);
  std::string text;
  std::map<std::string, std::string> forced;    // sample source -> forced algorithm
  std::map<std::string, std::string> group_of;  // sample source -> leave-one-source-out group
  // Fits per collective, node class (one node: false, several: true) and forced algorithm.
  std::map<FitKey, std::vector<CollectiveSample>> groups;
  for (auto& src : sources) {
    // A forced algorithm the system cannot run (NVLS without NVSwitch SHARP) was not what
    // ran: the run is taken as NCCL's own choice, and the output says so.
    if (!src.forced_algorithm.empty() && !src.samples.empty()) {
      const CollectiveSample& first = src.samples.front();
      const SystemSpec grown = system_for_sample(s, first);
      bool available = false;
      for (const auto& c : AlphaBetaCollectiveModel(grown).candidates({first.kind, first.bytes, {}}, group_for_sample(grown, first)))
        available = available || c.algorithm == src.forced_algorithm;
      if (!available) {
        text += fmt::format("note: {} forces NCCL_ALGO={}, which {} cannot run: taken as NCCL's own choice\n", src.name,
                            src.forced_algorithm, s.name);
        src.forced_algorithm.clear();
      }
    }
    forced[src.name] = src.forced_algorithm;
    group_of[src.name] = src.group;
    for (auto smp : src.samples) {
      smp.source = src.name;
      if (smp.ranks / std::max(1, smp.nodes) > s.gpus_per_node) {
        throw ConfigError(src.name, "", fmt::format("{} ranks on {} node(s) do not fit nodes of {} ({} GPUs each)", smp.ranks,
                                                    smp.nodes, s.name, s.gpus_per_node));
      }
      if (static_cast<long long>(smp.ranks) > limits::kMaxGpus) {
        throw ConfigError(src.name, "", fmt::format("{} ranks: perfcast models at most {} GPUs", smp.ranks, limits::kMaxGpus));
      }
      // One node class per NVLink domain count: a GB200 NVL72 rack is one "node" for NCCL.
      groups[{smp.kind, sample_domains(s, smp) > 1, src.forced_algorithm}].push_back(smp);
    }
  }
  auto prior = [&](const CollectiveSample& smp) { return prior_time(s, smp, forced[smp.source]); };

  nlohmann::json report = nlohmann::json::array();
  std::vector<std::string> refused;
  for (auto& [key, samples] : groups) {
    const auto& [kind, multi, algorithm] = key;
    const std::string label = fit_label(key);
    if (samples.size() < kMinFitSamples && a.leave_one_source_out) {
      // Scored in the leave-one-source-out check; too few sizes to fit (and write) on their own.
      text += fmt::format("{}: {} sample(s), too few to fit (at least {}); scored below only\n", label, samples.size(), kMinFitSamples);
      continue;
    }
    if (samples.size() < kMinFitSamples) {
      throw ConfigError(samples.front().source, "",
                        fmt::format("{}: {} sample(s); fitting needs at least {} message sizes per collective: run "
                                    "nccl-tests over a range of sizes (e.g. -b 8 -e 8G -f 2 gives 31)",
                                    label, samples.size(), kMinFitSamples));
    }
    CollectiveFit fit = fit_group(s, key, samples);
    for (const auto& p : fit.protocols) {
      if (!std::isfinite(p.a) || !std::isfinite(p.b) || !std::isfinite(p.c) || !std::isfinite(p.d))
        throw ConfigError(samples.front().source, "",
                          fmt::format("{}: the fit of protocol {} is not finite; the measurements cannot be fitted", label, p.name));
    }
    for (const auto& sc : fit.scales)
      if (!std::isfinite(sc.fixed) || !std::isfinite(sc.latency) || !std::isfinite(sc.transfer))
        throw ConfigError(samples.front().source, "", fmt::format("{}: the fit is not finite; the measurements cannot be fitted", label));
    check_group(s, key, samples, fit, prior);
    std::vector<std::string> counts;
    for (int c : fit.node_counts) counts.push_back(std::to_string(c));
    text += fmt::format("{}: {} samples, ranks {}-{}, nodes {}, {} to {}\n", label, samples.size(), fit.min_ranks, fit.max_ranks,
                        fmt::join(counts, ", "), format_bytes(fit.min_bytes), format_bytes(fit.max_bytes));
    for (const auto& sc : fit.scales) {
      std::string ramp;
      for (std::size_t k = 0; k < sc.ramp.size(); ++k)
        if (sc.ramp[k] > 0) ramp += fmt::format(" <{}:x{:.3f}", format_bytes(kRampKnots[k]), sc.ramp[k]);
      text += fmt::format("  NCCL-structured, {} sizes: fixed {:.2f} us, latency x{:.3f}, transfer x{:.3f}{}\n",
                          sc.protocol == "*" ? "all" : sc.protocol, sc.fixed * 1e6, sc.latency, sc.transfer,
                          ramp.empty() ? "" : ", ramp" + ramp);
    }
    for (const auto& p : fit.protocols) {
      std::string ramp;
      for (std::size_t k = 0; k < p.ramp.size(); ++k)
        if (p.ramp[k] > 0) ramp += fmt::format(" <{}:{:.0f}GB/s", format_bytes(kRampKnots[k]), 1e-9 / p.ramp[k]);
      text += fmt::format("  {:<7} latency {:>8.2f} us  per step {:>6.2f} us  busBw {:>8.1f} GB/s{}{}\n", p.name, p.a * 1e6,
                          p.b * 1e6, p.c > 0 ? 1e-9 / p.c : 0.0,
                          p.d > 0 ? fmt::format("  small-group {:.1f} GB/s", 1e-9 / p.d) : "",
                          ramp.empty() ? "" : "  ramp" + ramp);
    }
    text += per_size_table(s, fit, samples, prior);
    nlohmann::json entry = {{"collective", collective_name(kind)}, {"multi_node", multi},
                            {"algorithm", algorithm.empty() ? "nccl-choice" : algorithm}, {"samples", samples.size()},
                            {"geomean_abs_error_fitted_from_1MiB", fit.quality.geomean_abs_error}};
    if (fit.quality.held_out > 0) {
      text += fmt::format("  held out (every third size or so, {} samples >= 64 KiB): fitted {:.2f}%, prior {:.2f}%\n",
                          fit.quality.held_out, fit.quality.heldout_geomean_abs_error * 100,
                          fit.quality.heldout_prior_geomean_abs_error * 100);
      entry["held_out"] = {{"samples", fit.quality.held_out}, {"fitted", fit.quality.heldout_geomean_abs_error},
                           {"prior", fit.quality.heldout_prior_geomean_abs_error}};
      if (fit.quality.heldout_geomean_abs_error > fit.quality.heldout_prior_geomean_abs_error) {
        refused.push_back(fmt::format("{}: held-out geomean |error| {:.2f}% after fitting against {:.2f}% for the prior "
                                      "(spec-derived) model on the same {} samples",
                                      label,
                                      fit.quality.heldout_geomean_abs_error * 100,
                                      fit.quality.heldout_prior_geomean_abs_error * 100, fit.quality.held_out));
      }
    } else {
      text += "  held out: too few sizes to leave a third out\n";
      refused.push_back(fmt::format("{}: no held-out check is possible ({} distinct sizes; a fit that cannot be checked "
                                    "against the prior is not written)", label, distinct_sizes(samples)));
    }
    if (a.leave_one_out && !fit.structured()) {
      std::set<int> counts;
      for (const auto& smp : samples) counts.insert(smp.ranks);
      nlohmann::json rows = nlohmann::json::array();
      text += fmt::format("  leave one rank count out (geomean |error| >= 1 MiB):\n");
      for (int n : counts) {
        std::vector<CollectiveSample> mine, others;
        for (const auto& smp : samples) (smp.ranks == n ? mine : others).push_back(smp);
        if (others.size() < 8) continue;
        const auto loo = fit_errors(fit_collective(others, nccl_initial_protocols(s, 1)), mine, 1024.0 * 1024.0);
        if (loo.empty()) continue;
        text += fmt::format("  {:>6} ranks {:>8.2f}%\n", n, geomean_abs(loo) * 100);
        rows.push_back({{"ranks", n}, {"geomean_abs_error", geomean_abs(loo)}});
      }
      entry["leave_one_rank_count_out"] = rows;
    }
    report.push_back(entry);
    cal.fits.push_back(std::move(fit));
  }
  nlohmann::json loso;
  if (a.leave_one_source_out) loso = leave_one_source_out(s, groups, group_of, forced, text);
  std::string out = a.out;
  if (out.empty()) {
    const std::filesystem::path sp(a.system);
    out = (sp.parent_path() / (sp.stem().string() + ".comms.json")).string();
  }
  CalibrateOutcome outcome;
  outcome.out = out;
  const bool written = refused.empty() || a.force;
  if (written) {
    outcome.content = calibration_to_json(cal);
    for (const auto& r : refused) text += "warning: written with --force although " + r + "\n";
  } else {
    for (const auto& r : refused) outcome.errors.push_back("perfcast calibrate comms: refused: " + r);
    outcome.errors.push_back("nothing written (--force writes it anyway)");
  }
  std::vector<std::string> inputs{a.system};
  inputs.insert(inputs.end(), a.logs.begin(), a.logs.end());
  nlohmann::json context = command_context("calibrate comms", inputs);
  context.update({{"system", s.name}, {"measurements", cal.sources}, {"calibration_file", out}});
  nlohmann::json j = {{"context", context},
                      {"collectives", report},
                      {"refused", refused},
                      {"written", written ? nlohmann::json(out) : nlohmann::json()}};
  if (a.leave_one_source_out) j["leave_one_source_out"] = loso;
  outcome.json = json_text(j, 2) + "\n";
  outcome.text = std::move(text);
  return outcome;
}

}  // namespace perfcast
