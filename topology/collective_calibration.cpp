#include "topology/collective_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include <Eigen/Dense>
#include <fmt/format.h>

#include "core/error_stats.hpp"
#include "core/nnls.hpp"
#include "topology/nccl_tuning.hpp"
#include "core/json_text.hpp"

namespace perfcast {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kKiB = 1024.0;
constexpr Eigen::Index kColumns = 4 + static_cast<Eigen::Index>(kRampTerms);

/// Feature row of a sample: [1, steps, S*F, S*F/n, F*min(S, K_k)...].
Eigen::VectorXd features(CollectiveKind kind, double bytes, int n) {
  const double f = bus_factor(kind, n);
  Eigen::VectorXd x(kColumns);
  x[0] = 1.0;
  x[1] = static_cast<double>(ring_steps(kind, n));
  x[2] = bytes * f;
  x[3] = bytes * f / n;
  for (std::size_t k = 0; k < kRampTerms; ++k) x[4 + static_cast<Eigen::Index>(k)] = f * std::min(bytes, kRampKnots[k]);
  return x;
}

double eval(const ProtocolTerms& p, const Eigen::VectorXd& x) {
  double t = p.a * x[0] + p.b * x[1] + p.c * x[2] + p.d * x[3];
  for (std::size_t k = 0; k < kRampTerms && k < p.ramp.size(); ++k) t += p.ramp[k] * x[4 + static_cast<Eigen::Index>(k)];
  return t;
}

}  // namespace

int ring_steps(CollectiveKind kind, int n) { return kind == CollectiveKind::kAllReduce ? 2 * (n - 1) : n - 1; }

double CollectiveFit::time(double bytes, int n, std::size_t* protocol) const {
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < protocols.size(); ++i) {
    // Below the smallest size it was fitted on, a protocol keeps that size's time: its
    // terms are not extrapolated downwards (continuous, never decreasing).
    const double t = eval(protocols[i], features(kind, std::max(bytes, protocols[i].from_bytes), n));
    if (t < best) {
      best = t;
      if (protocol) *protocol = i;
    }
  }
  return best;
}

std::vector<ProtocolTerms> nccl_initial_protocols(const SystemSpec& s, int nodes) {
  double bus = 0;
  if (nodes <= 1) {
    RankGroup g;
    for (int r = 0; r < std::min(2, s.gpus_per_node); ++r) g.ranks.push_back(r);
    // One GPU per node: the first two ranks span two nodes; a one-GPU system has only rank 0.
    if (g.ranks.size() < 2) g.ranks = s.world_size() >= 2 ? std::vector<int>{0, 1} : std::vector<int>{0};
    SystemSpec one = s;
    one.nodes = std::max(one.nodes, 1);
    bus = AlphaBetaCollectiveModel(one).ring_bus_bandwidth(g);
  } else {
    // Two ranks per node on two nodes: the ring is bound by the NICs they drive.
    SystemSpec two = s;
    two.nodes = std::max(2, s.nodes);
    RankGroup g{{0, 1, s.gpus_per_node, s.gpus_per_node + 1}};
    bus = AlphaBetaCollectiveModel(two).ring_bus_bandwidth(g);
  }
  const double launch = s.host.collective_launch_overhead;
  const double net = nodes > 1 ? 1.0 : 0.0;
  // NCCL constants (docs/collectives.md section 1.3), as in the spec-derived model; across
  // nodes the per-step latency is the network's (2.7 / 4.0 / 14 us).
  return {
      {"LL", launch + 6.6e-6, (0.6 + net * 2.1) * 1e-6, 1.0 / (0.5 * bus), 0},
      {"LL128", launch + 14.0e-6, (1.9 + net * 2.1) * 1e-6, 1.0 / (0.92 * bus), 0},
      {"Simple", launch + 8.4e-6, (3.4 + net * 10.6) * 1e-6, 1.0 / bus, 0},
  };
}

/// Index in kRampKnots of a ramp entry's "below" size; fails on any other size.
std::size_t ramp_knot_index(const JsonObject& ro) {
  const double below = ro.quantity("below", Dimension::kBytes);
  std::size_t k = 0;
  while (k < kRampTerms && std::fabs(kRampKnots[k] - below) > 0.5) ++k;
  if (k == kRampTerms) ro.fail("below", "a ramp knot is one of 1, 4, 16, 64, 256 MiB");
  return k;
}

double geomean_abs(const std::vector<double>& errors) { return errors.empty() ? 0.0 : geomean_abs_error(errors); }

/// The held-out check of both fits: every third size is left out (every fourth, fifth or sixth
/// where that leaves fewer than 8 samples to fit), `refit_on` fits the rest, and quality gets
/// its error and the prior's on the left-out sizes (from 64 KiB when any of them reaches it).
void check_held_out_sizes(FitQuality& quality, const std::vector<CollectiveSample>& samples,
                          const std::function<std::function<double(const CollectiveSample&)>(
                              const std::vector<CollectiveSample>&)>& refit_on,
                          const std::function<double(const CollectiveSample&)>& prior) {
  quality.held_out = 0;
  quality.heldout_geomean_abs_error = quality.heldout_prior_geomean_abs_error = 0;
  std::set<double> sizes;
  for (const auto& smp : samples) sizes.insert(smp.bytes);
  std::vector<CollectiveSample> train, test;
  for (std::size_t stride = 3; stride <= 6; ++stride) {
    std::set<double> left_out;
    std::size_t i = 0;
    for (double b : sizes) {
      if (i % stride == 1) left_out.insert(b);
      ++i;
    }
    train.clear();
    test.clear();
    for (const auto& smp : samples) (left_out.count(smp.bytes) ? test : train).push_back(smp);
    if (train.size() >= 8) break;
  }
  if (train.size() < 8 || test.empty()) return;
  const auto refit = refit_on(train);
  bool any_large = false;
  for (const auto& smp : test) any_large = any_large || smp.bytes >= 64 * kKiB;
  std::vector<double> fit_err, prior_err;
  for (const auto& smp : test) {
    if (any_large && smp.bytes < 64 * kKiB) continue;
    fit_err.push_back(refit(smp) / smp.time_s - 1.0);
    prior_err.push_back(prior(smp) / smp.time_s - 1.0);
  }
  quality.held_out = fit_err.size();
  quality.heldout_geomean_abs_error = geomean_abs(fit_err);
  quality.heldout_prior_geomean_abs_error = geomean_abs(prior_err);
}

void check_held_out(FitQuality& quality, const std::vector<CollectiveSample>& samples,
                    const std::vector<ProtocolTerms>& init, const PriorModel& prior) {
  check_held_out_sizes(
      quality, samples,
      [&](const std::vector<CollectiveSample>& train) -> std::function<double(const CollectiveSample&)> {
        auto fit = std::make_shared<const CollectiveFit>(fit_collective(train, init));
        return [fit](const CollectiveSample& smp) { return fit->time(smp.bytes, smp.ranks); };
      },
      [&](const CollectiveSample& smp) { return prior(smp); });
}

CollectiveFit fit_collective(const std::vector<CollectiveSample>& samples, std::vector<ProtocolTerms> init) {
  if (samples.size() < 8) throw std::invalid_argument("fit_collective: at least 8 samples are needed");
  CollectiveFit fit;
  fit.kind = samples.front().kind;
  fit.protocols = std::move(init);
  for (auto& p : fit.protocols) p.ramp.resize(kRampTerms, 0.0);
  fit.min_ranks = fit.max_ranks = samples.front().ranks;
  fit.min_nodes = fit.max_nodes = samples.front().nodes;
  fit.min_bytes = fit.max_bytes = samples.front().bytes;
  for (const auto& s : samples) {
    if (s.kind != fit.kind) throw std::invalid_argument("fit_collective: samples of different collectives");
    // One node and several are different machines for the fit (NVLink only, or the
    // network too): mixing them would bend both.
    if ((s.nodes > 1) != (fit.min_nodes > 1)) {
      throw std::invalid_argument("fit_collective: " + s.source + " spans " + std::to_string(s.nodes) +
                                  " node(s) and other samples " + std::to_string(fit.min_nodes) +
                                  ": fit one-node and multi-node runs separately");
    }
    fit.min_ranks = std::min(fit.min_ranks, s.ranks);
    fit.max_ranks = std::max(fit.max_ranks, s.ranks);
    fit.min_nodes = std::min(fit.min_nodes, s.nodes);
    fit.max_nodes = std::max(fit.max_nodes, s.nodes);
    fit.min_bytes = std::min(fit.min_bytes, s.bytes);
    fit.max_bytes = std::max(fit.max_bytes, s.bytes);
  }
  std::vector<Eigen::VectorXd> x;
  x.reserve(samples.size());
  for (const auto& s : samples) x.push_back(features(s.kind, s.bytes, s.ranks));
  std::vector<std::size_t> assign(samples.size(), 0), previous;
  std::vector<bool> fitted(fit.protocols.size(), false);
  for (int iter = 0; iter < 100; ++iter) {
    for (std::size_t i = 0; i < samples.size(); ++i) (void)fit.time(samples[i].bytes, samples[i].ranks, &assign[i]);
    if (assign == previous) break;
    previous = assign;
    for (std::size_t p = 0; p < fit.protocols.size(); ++p) {
      std::vector<std::size_t> idx;
      for (std::size_t i = 0; i < samples.size(); ++i)
        if (assign[i] == p) idx.push_back(i);
      if (idx.size() < 8) continue;  // too few points: keep the protocol's current terms
      Eigen::MatrixXd A(static_cast<Eigen::Index>(idx.size()), kColumns);
      Eigen::VectorXd y(static_cast<Eigen::Index>(idx.size()));
      for (std::size_t k = 0; k < idx.size(); ++k) {
        const double w = 1.0 / samples[idx[k]].time_s;  // relative error
        A.row(static_cast<Eigen::Index>(k)) = x[idx[k]].transpose() * w;
        y[static_cast<Eigen::Index>(k)] = 1.0;
      }
      const Eigen::VectorXd c = nnls(A, y).x;
      if (c[2] <= 0 && c[3] <= 0) continue;  // no bandwidth term: not a usable protocol fit
      fit.protocols[p].a = c[0];
      fit.protocols[p].b = c[1];
      fit.protocols[p].c = c[2];
      fit.protocols[p].d = c[3];
      for (std::size_t k = 0; k < kRampTerms; ++k) fit.protocols[p].ramp[k] = c[4 + static_cast<Eigen::Index>(k)];
      double from = std::numeric_limits<double>::infinity();
      for (std::size_t i : idx) from = std::min(from, samples[i].bytes);
      fit.protocols[p].from_bytes = from == fit.min_bytes ? 0.0 : from;
      fitted[p] = true;
    }
  }
  // Protocols that no sample chose keep NCCL's starting guesses: drop them, so that the
  // file holds measured terms only. With none fitted (no protocol won 8 samples), one
  // protocol is fitted on every sample.
  std::vector<ProtocolTerms> kept;
  for (std::size_t p = 0; p < fit.protocols.size(); ++p)
    if (fitted[p]) kept.push_back(fit.protocols[p]);
  if (kept.empty()) {
    ProtocolTerms one = fit.protocols.back();
    Eigen::MatrixXd A(static_cast<Eigen::Index>(samples.size()), kColumns);
    const Eigen::VectorXd y = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(samples.size()));
    for (std::size_t i = 0; i < samples.size(); ++i) A.row(static_cast<Eigen::Index>(i)) = x[i].transpose() / samples[i].time_s;
    const Eigen::VectorXd c = nnls(A, y).x;
    one.a = c[0];
    one.b = c[1];
    one.c = c[2];
    one.d = c[3];
    for (std::size_t k = 0; k < kRampTerms; ++k) one.ramp[k] = c[4 + static_cast<Eigen::Index>(k)];
    one.from_bytes = 0;
    if (one.c <= 0 && one.d <= 0) one.c = 1e-18;  // keep a (negligible) bandwidth term: the file needs one
    kept.push_back(one);
  }
  fit.protocols = std::move(kept);
  const ErrorSummary errors = summarize_errors(fit_errors(fit, samples, kMiB));
  fit.quality.max_abs_error = std::max(fit.quality.max_abs_error, errors.max_abs);
  fit.quality.samples = samples.size();
  fit.quality.geomean_abs_error = errors.geomean_abs;
  return fit;
}

std::vector<double> fit_errors(const CollectiveFit& fit, const std::vector<CollectiveSample>& samples, double min_bytes) {
  std::vector<double> out;
  for (const auto& s : samples) {
    if (s.bytes < min_bytes) continue;
    out.push_back(fit.time(s.bytes, s.ranks) / s.time_s - 1.0);
  }
  return out;
}

namespace {

/// Structured features of a sample: [1, latency, transfer, transfer x min(S, K_k) / S ...].
Eigen::VectorXd structured_features(const AlphaBetaCollectiveModel::Terms& t, double bytes) {
  Eigen::VectorXd x(3 + static_cast<Eigen::Index>(kRampTerms));
  x[0] = 1.0;
  x[1] = t.latency;
  x[2] = t.transfer;
  for (std::size_t k = 0; k < kRampTerms; ++k)
    x[3 + static_cast<Eigen::Index>(k)] = bytes > 0 ? t.transfer * std::min(bytes, kRampKnots[k]) / bytes : 0.0;
  return x;
}

}  // namespace

SystemSpec system_for_sample(const SystemSpec& s, const CollectiveSample& smp) {
  SystemSpec grown = s;
  const int per_host = std::max(1, smp.ranks / std::max(1, smp.nodes));
  // Enough hosts for the sample, in whole NVLink domains.
  int hosts = std::max(s.nodes, smp.nodes);
  if (per_host > s.gpus_per_node) hosts = std::max(hosts, (smp.ranks + s.gpus_per_node - 1) / s.gpus_per_node);
  const int per_domain = s.nodes_per_domain();
  grown.nodes = (hosts + per_domain - 1) / per_domain * per_domain;
  return grown;
}

RankGroup group_for_sample(const SystemSpec& grown, const CollectiveSample& smp) {
  const int per_host = std::max(1, smp.ranks / std::max(1, smp.nodes));
  RankGroup g;
  if (per_host > grown.gpus_per_node) {  // more ranks per "node" than a host has: fill hosts in order
    for (int r = 0; r < smp.ranks && r < grown.world_size(); ++r) g.ranks.push_back(r);
    return g;
  }
  for (int node = 0; node < smp.nodes && node < grown.nodes; ++node)
    for (int j = 0; j < per_host; ++j) g.ranks.push_back(node * grown.gpus_per_node + j);
  return g;
}

int sample_domains(const SystemSpec& s, const CollectiveSample& smp) {
  const SystemSpec grown = system_for_sample(s, smp);
  std::set<int> domains;
  for (int r : group_for_sample(grown, smp).ranks) domains.insert(grown.domain_of(r));
  return static_cast<int>(domains.size());
}

AlphaBetaCollectiveModel::Terms sample_terms(const SystemSpec& s, const CollectiveSample& smp, const std::string& forced) {
  const SystemSpec grown = system_for_sample(s, smp);
  return AlphaBetaCollectiveModel(grown).terms({smp.kind, smp.bytes, {}}, group_for_sample(grown, smp), forced);
}

double spec_sample_time(const SystemSpec& s, const CollectiveSample& smp, const std::string& forced) {
  const SystemSpec grown = system_for_sample(s, smp);
  return AlphaBetaCollectiveModel(grown).forced({smp.kind, smp.bytes, {}}, group_for_sample(grown, smp), forced).time;
}

const StructuredScales* CollectiveFit::scales_for(const std::string& protocol) const {
  for (const auto& sc : scales)
    if (sc.protocol == protocol) return &sc;
  for (const auto& sc : scales)
    if (sc.protocol == "*") return &sc;
  return nullptr;
}

double CollectiveFit::structured_time(const AlphaBetaCollectiveModel::Terms& t, double bytes) const {
  const StructuredScales* sc = scales_for(t.protocol);
  if (!sc) return t.launch + t.latency + t.transfer;  // a protocol the fit never saw: spec-derived
  const Eigen::VectorXd x = structured_features(t, bytes);
  double v = sc->fixed * x[0] + sc->latency * x[1] + sc->transfer * x[2];
  for (std::size_t k = 0; k < kRampTerms && k < sc->ramp.size(); ++k) v += sc->ramp[k] * x[3 + static_cast<Eigen::Index>(k)];
  return v;
}

namespace {

/// NNLS of the structured scales on samples (relative error). With one node count the
/// fixed time and NCCL's latency cannot be told apart (the latency is the same for every
/// sample): the fixed time is then the launch overhead and the rest goes to the latency
/// scale, which carries to other node counts as per-hop latency.
StructuredScales fit_scales(const std::vector<CollectiveSample>& samples, const std::vector<AlphaBetaCollectiveModel::Terms>& terms,
                            const std::vector<std::size_t>& idx, const std::string& protocol) {
  std::set<int> counts;
  for (std::size_t i : idx) counts.insert(terms[i].domains);
  const bool one_count = counts.size() < 2;
  const Eigen::Index cols = 3 + static_cast<Eigen::Index>(kRampTerms);
  Eigen::MatrixXd A(static_cast<Eigen::Index>(idx.size()), cols);
  Eigen::VectorXd y = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(idx.size()));
  for (std::size_t k = 0; k < idx.size(); ++k) {
    const auto& s = samples[idx[k]];
    A.row(static_cast<Eigen::Index>(k)) = structured_features(terms[idx[k]], s.bytes).transpose() / s.time_s;
    if (one_count) {
      A(static_cast<Eigen::Index>(k), 0) = 0;  // the fixed time is given, not fitted
      y[static_cast<Eigen::Index>(k)] = 1.0 - terms[idx[k]].launch / s.time_s;
    }
  }
  const Eigen::VectorXd c = nnls(A, y).x;
  StructuredScales sc;
  sc.protocol = protocol;
  sc.fixed = one_count ? terms[idx.front()].launch : c[0];
  sc.latency = c[1];
  sc.transfer = c[2];
  for (std::size_t k = 0; k < kRampTerms; ++k) sc.ramp[k] = c[3 + static_cast<Eigen::Index>(k)];
  if (sc.transfer <= 0 && std::all_of(sc.ramp.begin(), sc.ramp.end(), [](double v) { return v <= 0; }))
    sc.transfer = 1e-9;  // keep a (negligible) bandwidth term: time must grow with size
  return sc;
}

}  // namespace

bool CollectiveFit::fitted_at(int nodes) const {
  if (node_counts.empty()) return nodes >= min_nodes && nodes <= max_nodes;
  return std::find(node_counts.begin(), node_counts.end(), nodes) != node_counts.end();
}

CollectiveFit fit_structured(const std::vector<CollectiveSample>& samples, const TermsOf& terms_of) {
  if (samples.size() < 8) throw std::invalid_argument("fit_structured: at least 8 samples are needed");
  CollectiveFit fit;
  fit.kind = samples.front().kind;
  fit.model = "nccl-structured";
  fit.min_ranks = fit.max_ranks = samples.front().ranks;
  fit.min_nodes = fit.max_nodes = samples.front().nodes;
  fit.min_bytes = fit.max_bytes = samples.front().bytes;
  std::set<int> counts;
  std::vector<AlphaBetaCollectiveModel::Terms> terms;
  terms.reserve(samples.size());
  std::map<std::string, std::vector<std::size_t>> by_protocol;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    if (s.kind != fit.kind) throw std::invalid_argument("fit_structured: samples of different collectives");
    if (s.nodes < 2) throw std::invalid_argument("fit_structured: " + s.source + " spans one node: a structured fit is of multi-node runs");
    fit.min_ranks = std::min(fit.min_ranks, s.ranks);
    fit.max_ranks = std::max(fit.max_ranks, s.ranks);
    fit.min_nodes = std::min(fit.min_nodes, s.nodes);
    fit.max_nodes = std::max(fit.max_nodes, s.nodes);
    fit.min_bytes = std::min(fit.min_bytes, s.bytes);
    fit.max_bytes = std::max(fit.max_bytes, s.bytes);
    terms.push_back(terms_of(s));
    counts.insert(terms.back().multi_domain ? terms.back().domains : s.nodes);
    by_protocol[terms.back().protocol].push_back(i);
  }
  // One set of scales per protocol of NCCL's choice with enough samples (the latency-bound
  // LL / LL128 sizes and the bandwidth-bound Simple sizes differ); when none has, one set
  // for every protocol.
  for (const auto& [protocol, idx] : by_protocol)
    if (idx.size() >= 8) fit.scales.push_back(fit_scales(samples, terms, idx, protocol));
  if (fit.scales.empty()) {
    std::vector<std::size_t> all(samples.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    fit.scales.push_back(fit_scales(samples, terms, all, "*"));
  }
  fit.node_counts.assign(counts.begin(), counts.end());
  std::vector<double> errors;
  for (const auto& s : samples)
    if (s.bytes >= kMiB) errors.push_back(fit.structured_time(terms_of(s), s.bytes) / s.time_s - 1.0);
  const ErrorSummary sum = summarize_errors(errors);
  fit.quality.samples = samples.size();
  fit.quality.geomean_abs_error = sum.geomean_abs;
  fit.quality.max_abs_error = sum.max_abs;
  return fit;
}

void check_held_out_structured(FitQuality& quality, const std::vector<CollectiveSample>& samples, const TermsOf& terms_of,
                               const std::function<double(const CollectiveSample&)>& prior) {
  check_held_out_sizes(
      quality, samples,
      [&](const std::vector<CollectiveSample>& train) -> std::function<double(const CollectiveSample&)> {
        auto fit = std::make_shared<const CollectiveFit>(fit_structured(train, terms_of));
        return [fit, &terms_of](const CollectiveSample& smp) { return fit->structured_time(terms_of(smp), smp.bytes); };
      },
      prior);
}

const CollectiveFit* CommsCalibration::find(CollectiveKind kind, int nodes, const std::string& algorithm) const {
  for (const auto& f : fits)
    if (f.kind == kind && (f.min_nodes > 1) == (nodes > 1) && f.algorithm == algorithm) return &f;
  return nullptr;
}

std::string calibration_to_json(const CommsCalibration& c) {
  nlohmann::json fits = nlohmann::json::array();
  for (const auto& f : c.fits) {
    nlohmann::json protocols = nlohmann::json::array();
    for (const auto& p : f.protocols) {
      nlohmann::json j = {{"name", p.name}, {"latency", fmt::format("{:.4f}us", p.a * 1e6)},
                          {"per_step_latency", fmt::format("{:.4f}us", p.b * 1e6)}};
      if (p.c > 0) j["bus_bandwidth"] = fmt::format("{:.4f}GB/s", 1e-9 / p.c);
      if (p.d > 0) j["small_group_bandwidth"] = fmt::format("{:.4f}GB/s", 1e-9 / p.d);
      nlohmann::json ramp = nlohmann::json::array();
      for (std::size_t k = 0; k < p.ramp.size() && k < kRampTerms; ++k) {
        if (p.ramp[k] > 0)
          ramp.push_back({{"below", fmt::format("{:.0f}B", kRampKnots[k])}, {"bus_bandwidth", fmt::format("{:.6g}GB/s", 1e-9 / p.ramp[k])}});
      }
      if (!ramp.empty()) j["ramp"] = ramp;
      if (p.from_bytes > 0) j["fitted_from"] = fmt::format("{:.0f}B", p.from_bytes);
      protocols.push_back(j);
    }
    nlohmann::json quality = {{"samples", f.quality.samples},
                               {"geomean_abs_error_from_1MiB", f.quality.geomean_abs_error},
                               {"max_abs_error_from_1MiB", f.quality.max_abs_error}};
    if (f.quality.held_out > 0) {
      quality["held_out_samples"] = f.quality.held_out;
      quality["heldout_geomean_abs_error"] = f.quality.heldout_geomean_abs_error;
      quality["heldout_prior_geomean_abs_error"] = f.quality.heldout_prior_geomean_abs_error;
    }
    nlohmann::json fj = {{"collective", collective_name(f.kind)},
                         {"algorithm", f.algorithm.empty() ? "nccl-choice" : f.algorithm},
                         {"ranks", {f.min_ranks, f.max_ranks}},
                         {"nodes", {f.min_nodes, f.max_nodes}},
                         {"bytes", {fmt::format("{:.0f}B", f.min_bytes), fmt::format("{:.0f}B", f.max_bytes)}}};
    if (!f.node_counts.empty()) fj["nodes_fitted"] = f.node_counts;
    if (f.structured()) {
      nlohmann::json scales = nlohmann::json::array();
      for (const auto& sc : f.scales) {
        nlohmann::json ramp = nlohmann::json::array();
        for (std::size_t k = 0; k < sc.ramp.size() && k < kRampTerms; ++k)
          if (sc.ramp[k] > 0) ramp.push_back({{"below", fmt::format("{:.0f}B", kRampKnots[k])}, {"scale", sc.ramp[k]}});
        scales.push_back({{"protocol", sc.protocol}, {"fixed", fmt::format("{:.4f}us", sc.fixed * 1e6)}, {"latency", sc.latency},
                          {"transfer", sc.transfer}, {"ramp", ramp}});
      }
      fj["model"] = f.model;
      fj["scales"] = scales;
    } else {
      fj["protocols"] = protocols;
    }
    fj["fit"] = quality;
    fits.push_back(fj);
  }
  nlohmann::json j = {{"schema", "perfcast.comms_calibration"},
                      {"schema_version", "1.2"},
                      {"fabric", c.fabric},
                      {"gpu", c.gpu},
                      {"nccl_version", c.nccl_version},
                      {"date", c.date},
                      {"perfcast_commit", c.commit},
                      {"measurements", c.sources},
                      {"collectives", fits}};
  return json_text(j, 2) + "\n";
}

CommsCalibration parse_calibration(const JsonDocument& doc) {
  const JsonObject root(doc);
  root.require_schema("perfcast.comms_calibration", 1);
  CommsCalibration c;
  c.fabric = root.string("fabric");
  c.gpu = root.string_or("gpu", "");
  c.nccl_version = root.string_or("nccl_version", "");
  c.date = root.string_or("date", "");
  c.commit = root.string_or("perfcast_commit", "");
  if (auto m = root.find("measurements")) {
    const JsonArray a = m->as_array();
    for (std::size_t i = 0; i < a.size(); ++i) c.sources.push_back(a[i].as_string());
  }
  const JsonArray fits = root.array("collectives");
  for (std::size_t i = 0; i < fits.size(); ++i) {
    const JsonObject o = fits[i].as_object();
    CollectiveFit f;
    const JsonValue kind = o.at("collective");
    const auto k = collective_from_name(kind.as_string());
    if (!k) kind.fail("unknown collective");
    f.kind = *k;
    f.algorithm = o.string_or("algorithm", "nccl-choice");
    if (f.algorithm == "nccl-choice") f.algorithm.clear();
    else if (NcclAlgo a{}; !nccl_algo_from_name(f.algorithm, &a))
      o.at("algorithm").fail("expected nccl-choice, ring, tree, nvls, nvls_tree, collnet_direct, collnet_chain or pat");
    const JsonArray ranks = o.array("ranks");
    ranks.require_size(2, 2);
    f.min_ranks = static_cast<int>(ranks[0].as_integer(1, 1 << 20));
    f.max_ranks = static_cast<int>(ranks[1].as_integer(f.min_ranks, 1 << 20));
    if (auto nodes_value = o.find("nodes")) {
      const JsonArray nodes = nodes_value->as_array();
      nodes.require_size(2, 2);
      f.min_nodes = static_cast<int>(nodes[0].as_integer(1, 1 << 20));
      f.max_nodes = static_cast<int>(nodes[1].as_integer(f.min_nodes, 1 << 20));
      if ((f.min_nodes > 1) != (f.max_nodes > 1)) nodes[1].fail("one-node and multi-node runs are separate fits");
    }
    const JsonArray bytes = o.array("bytes");
    bytes.require_size(2, 2);
    f.min_bytes = bytes[0].as_quantity(Dimension::kBytes);
    f.max_bytes = bytes[1].as_quantity(Dimension::kBytes);
    if (auto fitted = o.find("nodes_fitted")) {
      const JsonArray a = fitted->as_array();
      a.require_size(1, 64);
      for (std::size_t k = 0; k < a.size(); ++k) {
        const int v = static_cast<int>(a[k].as_integer(f.min_nodes, f.max_nodes));
        if (!f.node_counts.empty() && v <= f.node_counts.back()) a[k].fail("expected node counts in increasing order");
        f.node_counts.push_back(v);
      }
    }
    f.model = o.string_or("model", "");
    if (!f.model.empty() && f.model != "nccl-structured") o.at("model").fail("expected nccl-structured");
    if (f.structured()) {
      if (f.min_nodes < 2) o.at("model").fail("a structured fit is of runs across nodes: \"nodes\" must start at 2 or more");
      const JsonArray all = o.array("scales");
      all.require_size(1, 4);
      for (std::size_t i = 0; i < all.size(); ++i) {
        const JsonObject so = all[i].as_object();
        StructuredScales sc;
        sc.protocol = so.at("protocol").as_enum({"LL", "LL128", "Simple", "*"});
        sc.fixed = so.quantity("fixed", Dimension::kTime);
        sc.latency = so.at("latency").as_number_in(0, 1e6);
        sc.transfer = so.at("transfer").as_number_in(0, 1e6);
        const JsonArray ramp = so.array("ramp");
        ramp.require_size(0, kRampTerms);
        for (std::size_t r = 0; r < ramp.size(); ++r) {
          const JsonObject ro = ramp[r].as_object();
          const std::size_t k = ramp_knot_index(ro);
          sc.ramp[k] = ro.at("scale").as_number_in(0, 1e6);
          ro.finish();
        }
        if (sc.transfer <= 0 && std::all_of(sc.ramp.begin(), sc.ramp.end(), [](double v) { return v <= 0; }))
          so.fail("transfer", "a fit needs a transfer (per-byte) scale above 0");
        for (const auto& other : f.scales)
          if (other.protocol == sc.protocol) so.fail("protocol", "scales for this protocol are given twice");
        so.finish();
        f.scales.push_back(sc);
      }
    }
    if (f.structured() && o.find("protocols")) o.at("protocols").fail("a structured fit has \"scales\", not protocols");
    const std::size_t n_protocols = f.structured() ? 0 : o.array("protocols").size();
    if (!f.structured()) o.array("protocols").require_size(1, 8);
    for (std::size_t p = 0; p < n_protocols; ++p) {
      const JsonArray protocols = o.array("protocols");
      const JsonObject po = protocols[p].as_object();
      ProtocolTerms t;
      t.name = po.string("name");
      t.a = po.quantity("latency", Dimension::kTime);
      t.b = po.quantity("per_step_latency", Dimension::kTime);
      const double bw = po.quantity_or("bus_bandwidth", Dimension::kBandwidth, 0);
      const double small = po.quantity_or("small_group_bandwidth", Dimension::kBandwidth, 0);
      t.c = bw > 0 ? 1.0 / bw : 0;
      t.d = small > 0 ? 1.0 / small : 0;
      if (t.c <= 0 && t.d <= 0) po.fail("bus_bandwidth", "a protocol needs a bus_bandwidth");
      t.from_bytes = po.quantity_or("fitted_from", Dimension::kBytes, 0);
      if (auto ramp_value = po.find("ramp")) {
        const JsonArray ramp = ramp_value->as_array();
        ramp.require_size(0, kRampTerms);
        for (std::size_t r = 0; r < ramp.size(); ++r) {
          const JsonObject ro = ramp[r].as_object();
          const std::size_t k = ramp_knot_index(ro);
          t.ramp[k] = 1.0 / ro.quantity("bus_bandwidth", Dimension::kBandwidth);
          ro.finish();
        }
      }
      po.finish();
      f.protocols.push_back(t);
    }
    if (auto q = o.find("fit")) {
      const JsonObject qo = q->as_object();
      f.quality.samples = static_cast<std::size_t>(qo.integer_or("samples", 0, 1LL << 40, 0));
      f.quality.geomean_abs_error = qo.number_or("geomean_abs_error_from_1MiB", 0, 1e6, 0);
      f.quality.max_abs_error = qo.number_or("max_abs_error_from_1MiB", 0, 1e6, 0);
      f.quality.held_out = static_cast<std::size_t>(qo.integer_or("held_out_samples", 0, 1LL << 40, 0));
      f.quality.heldout_geomean_abs_error = qo.number_or("heldout_geomean_abs_error", 0, 1e6, 0);
      f.quality.heldout_prior_geomean_abs_error = qo.number_or("heldout_prior_geomean_abs_error", 0, 1e6, 0);
      qo.finish();
    }
    o.finish();
    c.fits.push_back(f);
  }
  root.finish();
  return c;
}

CalibratedCollectiveModel::CalibratedCollectiveModel(const SystemSpec& system, CommsCalibration calibration)
    : system_(&system), fallback_(system), calibration_(std::move(calibration)) {}

namespace {

/// All-to-allv as the all-to-all of the most loaded rank: the larger of its bytes sent to
/// and received from the others, times n / (n - 1) (the all-to-all buffer counts the
/// rank's own share, which never crosses a link).
double all_to_allv_equivalent_bytes(const CollectiveDesc& d, int n) {
  const auto un = static_cast<std::size_t>(n);
  double most = 0;
  for (std::size_t i = 0; i < un; ++i) {
    double sent = 0, received = 0;
    for (std::size_t j = 0; j < un; ++j) {
      if (i == j) continue;
      sent += d.pair_bytes[i * un + j];
      received += d.pair_bytes[j * un + i];
    }
    most = std::max({most, sent, received});
  }
  return most * n / (n - 1);
}

}  // namespace

namespace {

/// "calibrated", or "calibrated at 2, 4 node(s), extrapolated" where the group or size is
/// outside what the fit saw.
std::string basis_of(const CollectiveFit& fit, double bytes, int ranks, int nodes) {
  const bool sizes = bytes >= fit.min_bytes && bytes <= fit.max_bytes;
  const bool shape = fit.fitted_at(nodes) && (fit.structured() || (ranks >= fit.min_ranks && ranks <= fit.max_ranks));
  if (sizes && shape) return "calibrated";
  if (fit.fitted_at(nodes) || fit.node_counts.empty()) return "calibrated, extrapolated";
  std::vector<std::string> counts;
  for (int c : fit.node_counts) counts.push_back(std::to_string(c));
  return fmt::format("calibrated at {} node(s), extrapolated", fmt::join(counts, ", "));
}

/// NCCL's model picked a protocol the fit has no scales for (fewer than 8 of its samples ran
/// it): `e` takes the fastest of the fitted protocols on the same algorithm, each timed with
/// its fitted scales, so that a fit's calibrated times are never mixed with spec-derived ones
/// (which are faster across networks: a node count whose choice the fit never saw would look
/// faster than one it saw). False when no fitted protocol can run the algorithm.
bool fastest_fitted_protocol(const CollectiveFit& fit, const AlphaBetaCollectiveModel& spec, const CollectiveDesc& d,
                             const RankGroup& g, CollectiveEstimate& e) {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& sc : fit.scales) {
    const AlphaBetaCollectiveModel::Terms t = spec.terms(d, g, e.algorithm, sc.protocol);
    if (t.protocol != sc.protocol || t.algorithm != e.algorithm) continue;  // the algorithm cannot run this protocol
    const double time = fit.structured_time(t, d.bytes);
    if (!(time > 0) || time >= best) continue;
    best = time;
    e.protocol = sc.protocol;
    e.bottleneck = t.bottleneck;
  }
  if (!std::isfinite(best)) return false;
  e.time = best;
  return true;
}

}  // namespace

CollectiveEstimate CalibratedCollectiveModel::calibrated(const CollectiveDesc& d, const RankGroup& g, int algo, int proto,
                                                         const std::string& forced) const {
  CollectiveEstimate e = fallback_.timed(d, g, algo, proto);
  std::set<int> domains;
  for (int r : g.ranks) domains.insert(system_->domain_of(r));
  const int nodes = static_cast<int>(domains.size());
  // The fit of runs that forced the algorithm that runs, else the fit of NCCL's own choice.
  const CollectiveFit* fit = calibration_.find(d.kind, nodes, e.algorithm);
  if (!fit && forced.empty()) fit = calibration_.find(d.kind, nodes, "");
  if (!fit) return e;
  if (fit->structured()) {
    const AlphaBetaCollectiveModel::Terms t = fallback_.terms(d, g, e.algorithm, e.protocol);
    if (!t.multi_domain) return e;
    if (fit->scales_for(t.protocol)) {
      e.time = fit->structured_time(t, d.bytes);
    } else if (!fastest_fitted_protocol(*fit, fallback_, d, g, e)) {
      return e;  // no fitted protocol can run the algorithm: spec-derived
    }
  } else {
    e.time = fit->time(d.bytes, g.size());
  }
  e.basis = basis_of(*fit, d.bytes, g.size(), nodes);
  e.bus_bandwidth = e.time > 0 ? d.bytes * bus_factor(d.kind, g.size()) / e.time : 0;
  return e;
}

CollectiveEstimate CalibratedCollectiveModel::choose(const CollectiveDesc& d, const RankGroup& g, const std::string& forced) const {
  const CollectiveEstimate spec = fallback_.forced(d, g, forced);
  NcclAlgo a{};
  if (!nccl_algo_from_name(spec.algorithm, &a)) return spec;
  int p = 0;
  while (p < kNcclProtos && nccl_proto_name(static_cast<NcclProto>(p)) != spec.protocol) ++p;
  CollectiveEstimate e = calibrated(d, g, static_cast<int>(a), p, forced);
  // Never faster than a smaller size across NCCL's switches (as the spec-derived model).
  for (const auto& [bytes, before] : fallback_.switches(g, d.kind, forced)) {
    if (bytes > d.bytes) break;
    e.time = std::max(e.time, calibrated({d.kind, bytes, {}}, g, before.first, before.second, forced).time);
  }
  // Spread over several NVLink domains, never faster than the same ranks inside one.
  if (const auto inside = one_domain_group(*system_, g)) e.time = std::max(e.time, choose(d, *inside, forced).time);
  // Never faster than the links at their line rates (a fit made on whole nodes applied to
  // a group of one GPU a node can otherwise beat its NICs).
  const Seconds floor = system_->host.collective_launch_overhead + line_rate_floor(*system_, g, d.kind, d.bytes);
  if (e.time < floor) {
    e.time = floor;
    e.bus_bandwidth = d.bytes * bus_factor(d.kind, g.size()) / e.time;
  }
  return e;
}

std::vector<CollectiveEstimate> CalibratedCollectiveModel::candidates(const CollectiveDesc& d, const RankGroup& g) const {
  std::vector<CollectiveEstimate> out;
  if (g.size() < 2) return out;
  if (d.kind == CollectiveKind::kAllToAll || d.kind == CollectiveKind::kAllToAllV) return {estimate(d, g)};
  for (const auto& c : fallback_.candidates(d, g)) out.push_back(choose(d, g, c.algorithm));
  return out;
}

CollectiveEstimate CalibratedCollectiveModel::forced_estimate(const CollectiveDesc& d, const RankGroup& g,
                                                              const std::string& algorithm) const {
  if (g.size() < 2 || d.kind == CollectiveKind::kAllToAll || d.kind == CollectiveKind::kAllToAllV) return estimate(d, g);
  return choose(d, g, algorithm);
}

CollectiveEstimate CalibratedCollectiveModel::estimate(const CollectiveDesc& d, const RankGroup& g) const {
  if (g.size() < 2) return fallback_.estimate(d, g);
  if (d.kind != CollectiveKind::kAllToAll && d.kind != CollectiveKind::kAllToAllV) return choose(d, g, "");
  // All-to-all(v): the all-to-all fit of the node class, at the most loaded rank's bytes.
  CollectiveEstimate e = fallback_.estimate(d, g);
  std::set<int> domains;
  for (int r : g.ranks) domains.insert(system_->domain_of(r));
  const int nodes = static_cast<int>(domains.size());
  const CollectiveFit* fit = calibration_.find(CollectiveKind::kAllToAll, nodes, "");
  if (!fit || fit->structured()) return e;
  const double bytes = d.kind == CollectiveKind::kAllToAllV ? all_to_allv_equivalent_bytes(d, g.size()) : d.bytes;
  std::size_t p = 0;
  e.time = fit->time(bytes, g.size(), &p);
  e.protocol = fit->protocols[p].name;
  e.basis = basis_of(*fit, bytes, g.size(), nodes);
  e.bus_bandwidth = e.time > 0 ? bytes * bus_factor(CollectiveKind::kAllToAll, g.size()) / e.time : 0;
  return e;
}

std::unique_ptr<CollectiveModel> make_collective_model(const SystemSpec& system) {
  if (system.comms_calibration.empty()) return std::make_unique<AlphaBetaCollectiveModel>(system);
  return std::make_unique<CalibratedCollectiveModel>(system, parse_calibration(load_json_file(system.comms_calibration)));
}

}  // namespace perfcast
