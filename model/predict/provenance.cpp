#include "model/predict/provenance.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "topology/collective_calibration.hpp"

namespace perfcast {
namespace {

/// Kernel predictor families as the headline names them, with the calibration family
/// prefix that covers each (kernel_calibration.hpp: "gemm.fp32", "embedding_forward", ...).
struct KernelFamily {
  const char* label;
  const char* prefix;
};
constexpr KernelFamily kKernelFamilies[] = {
    {"GEMM", "gemm"}, {"attention", "attention"}, {"embedding", "embedding"}, {"elementwise", "elementwise"}, {"memcpy", "memcpy"}};

ProvenanceEntry collectives_entry(const SystemSpec& s, const CommsCalibration* cal, bool multi) {
  ProvenanceEntry e;
  e.what = multi ? "multi-node collectives" : "one-node collectives";
  e.basis = "NCCL tuning constants and the system's link rates";
  if (!cal) return e;
  // NVLink domains of the system: what NCCL counts as nodes.
  const int domains = std::max(1, s.world_size() / s.domain_size());
  std::vector<int> elsewhere;  // node counts of fits that did not see this one
  for (const auto& f : cal->fits) {
    if ((f.min_nodes > 1) != multi) continue;
    e.calibrated = true;
    if (f.quality.held_out > 0) e.heldout_error = std::max(e.heldout_error, f.quality.heldout_geomean_abs_error);
    if (multi && !f.fitted_at(domains)) {
      if (f.node_counts.empty()) elsewhere.push_back(f.min_nodes);
      for (int c : f.node_counts) elsewhere.push_back(c);
    }
  }
  if (e.calibrated) {
    e.source = s.comms_calibration.string();
    e.measured_on = cal->gpu + (cal->sources.empty() ? "" : fmt::format(" ({} source(s))", cal->sources.size()));
    e.basis = "nccl-tests";
    if (!elsewhere.empty()) {
      std::sort(elsewhere.begin(), elsewhere.end());
      elsewhere.erase(std::unique(elsewhere.begin(), elsewhere.end()), elsewhere.end());
      // The fit's per-hop and per-byte terms carry it to the system's node count.
      e.extrapolated = fmt::format("fitted at {} node(s), used at {}", fmt::join(elsewhere, ", "), domains);
    }
  }
  return e;
}

}  // namespace

std::vector<ProvenanceEntry> prediction_provenance(const SystemSpec& system, const std::optional<KernelCalibration>& kernels,
                                                   const std::string& kernel_file, const RuntimeProfile* runtime) {
  std::vector<ProvenanceEntry> out;
  std::optional<CommsCalibration> comms;
  if (!system.comms_calibration.empty()) comms = parse_calibration(load_json_file(system.comms_calibration));
  out.push_back(collectives_entry(system, comms ? &*comms : nullptr, false));
  if (system.world_size() > system.domain_size()) out.push_back(collectives_entry(system, comms ? &*comms : nullptr, true));
  for (const auto& fam : kKernelFamilies) {
    ProvenanceEntry e;
    e.what = fam.label;
    e.basis = "the GPU's spec peaks at fixed efficiencies";
    if (kernels) {
      std::set<std::string> sources;
      for (const auto& f : kernels->fits) {
        if (f.family.rfind(fam.prefix, 0) != 0) continue;
        e.calibrated = true;
        if (f.heldout_samples > 0) e.heldout_error = std::max(e.heldout_error, f.heldout_geomean_abs_error);
        e.rows = std::max(e.rows, f.heldout_samples);
        sources.insert(f.sources.begin(), f.sources.end());
      }
      if (e.calibrated) {
        e.source = kernel_file;
        e.measured_on = kernels->gpu;
        e.public_measurements = kernels->basis == "public measurements";
        e.basis = e.public_measurements ? "public measurements, leave one source out" : "profiler trace";
        e.sources.assign(sources.begin(), sources.end());
      }
    }
    out.push_back(e);
  }
  ProvenanceEntry host;
  host.what = "host";
  host.basis = "the system's host constants (launch and per-op overheads)";
  if (runtime && runtime->fitted()) {
    host.calibrated = true;
    host.basis = runtime->host_scale_basis.empty() ? runtime->name
                                                   : fmt::format("{}, host costs {}", runtime->name, runtime->host_scale_basis);
    host.source = runtime->file;
    host.measured_on = runtime->measured_on;
    host.heldout_error = runtime->heldout_error;
    host.extrapolated = runtime->outside_fit;
  } else if (runtime) {
    host.basis = fmt::format("runtime {} (not fitted): the system's host constants", runtime->name);
  }
  out.push_back(host);
  return out;
}

void mark_host_set_by_override(std::vector<ProvenanceEntry>& entries, const std::string& values) {
  for (auto& e : entries) {
    if (e.what != "host") continue;
    e.set_by_user = true;
    e.calibrated = false;
    e.basis = fmt::format("--set {} over {}", values, e.basis);
    e.heldout_error = -1;
  }
}

std::string provenance_headline(const std::vector<ProvenanceEntry>& entries) {
  std::vector<std::string> calibrated, from_public, spec, user;
  for (const auto& e : entries) {
    if (e.set_by_user) {
      user.push_back(e.what);
      continue;
    }
    if (!e.calibrated) {
      spec.push_back(e.what);
      continue;
    }
    if (!e.extrapolated.empty()) {
      calibrated.push_back(fmt::format("{} ({}, extrapolated beyond its fit: {})", e.what, e.basis, e.extrapolated));
      continue;
    }
    if (e.public_measurements) {
      from_public.push_back(fmt::format("{} ({} rows, sources {}; held-out error {})", e.what, e.rows, fmt::join(e.sources, ", "),
                                        e.heldout_error >= 0 ? fmt::format("{:.1f}%", e.heldout_error * 100) : "not measured"));
      continue;
    }
    calibrated.push_back(e.heldout_error >= 0
                             ? fmt::format("{} ({}, {:.1f}% held-out)", e.what, e.basis, e.heldout_error * 100)
                             : fmt::format("{} ({}, no held-out check)", e.what, e.basis));
  }
  std::string out;
  if (!calibrated.empty()) out += fmt::format("calibrated: {}", fmt::join(calibrated, ", "));
  if (!from_public.empty())
    out += fmt::format("{}calibrated from public measurements: {}", out.empty() ? "" : "; ", fmt::join(from_public, ", "));
  if (!spec.empty()) out += fmt::format("{}spec-derived: {}", out.empty() ? "" : "; ", fmt::join(spec, ", "));
  if (!user.empty()) out += fmt::format("{}set by --set: {}", out.empty() ? "" : "; ", fmt::join(user, ", "));
  return out;
}

}  // namespace perfcast
