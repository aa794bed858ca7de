#include "topology/collective_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <Eigen/Dense>
#include <fmt/format.h>

#include "core/error_stats.hpp"

namespace perfcast {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

/// Feature row of a sample: [1, steps, S*F, S*F/n].
Eigen::Vector4d features(const CollectiveSample& s) {
  const double bus = s.bytes * bus_factor(s.kind, s.ranks);
  return {1.0, static_cast<double>(ring_steps(s.kind, s.ranks)), bus, bus / s.ranks};
}

double eval(const ProtocolTerms& p, const Eigen::Vector4d& x) { return p.a * x[0] + p.b * x[1] + p.c * x[2] + p.d * x[3]; }

/// Weighted non-negative least squares by active set: solve, drop negative coefficients,
/// re-solve on the rest.
Eigen::Vector4d nnls(const Eigen::MatrixXd& A, const Eigen::VectorXd& y) {
  std::vector<int> active = {0, 1, 2, 3};
  Eigen::Vector4d out = Eigen::Vector4d::Zero();
  for (int round = 0; round < 4 && !active.empty(); ++round) {
    Eigen::MatrixXd sub(A.rows(), static_cast<Eigen::Index>(active.size()));
    for (std::size_t j = 0; j < active.size(); ++j) sub.col(static_cast<Eigen::Index>(j)) = A.col(active[j]);
    const Eigen::VectorXd sol = sub.colPivHouseholderQr().solve(y);
    std::vector<int> keep;
    out.setZero();
    bool negative = false;
    for (std::size_t j = 0; j < active.size(); ++j) {
      if (sol[static_cast<Eigen::Index>(j)] < 0) {
        negative = true;
      } else {
        keep.push_back(active[j]);
        out[active[j]] = sol[static_cast<Eigen::Index>(j)];
      }
    }
    if (!negative) return out;
    active = keep;
  }
  return out;
}

}  // namespace

int ring_steps(CollectiveKind kind, int n) { return kind == CollectiveKind::kAllReduce ? 2 * (n - 1) : n - 1; }

double CollectiveFit::time(double bytes, int n, std::size_t* protocol) const {
  CollectiveSample s{kind, n, 1, bytes, 0, ""};
  const Eigen::Vector4d x = features(s);
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < protocols.size(); ++i) {
    const double t = eval(protocols[i], x);
    if (t < best) {
      best = t;
      if (protocol) *protocol = i;
    }
  }
  return best;
}

std::vector<ProtocolTerms> nccl_initial_protocols(const SystemSpec& s) {
  const AlphaBetaCollectiveModel v1(s);
  RankGroup g;
  for (int r = 0; r < std::min(2, s.gpus_per_node); ++r) g.ranks.push_back(r);
  // One GPU per node: the first two ranks span two nodes; a one-GPU system has only rank 0.
  if (g.ranks.size() < 2) g.ranks = s.world_size() >= 2 ? std::vector<int>{0, 1} : std::vector<int>{0};
  const double bus = v1.ring_bus_bandwidth(g);
  const double launch = s.host.collective_launch_overhead;
  // NCCL constants (docs/collectives.md section 1.3), as in the v1 model.
  return {
      {"LL", launch + 6.6e-6, 0.6e-6, 1.0 / (0.5 * bus), 0},
      {"LL128", launch + 14.0e-6, 1.9e-6, 1.0 / (0.92 * bus), 0},
      {"Simple", launch + 8.4e-6, 3.4e-6, 1.0 / bus, 0},
  };
}

CollectiveFit fit_collective(const std::vector<CollectiveSample>& samples, std::vector<ProtocolTerms> init) {
  if (samples.size() < 8) throw std::invalid_argument("fit_collective: at least 8 samples are needed");
  CollectiveFit fit;
  fit.kind = samples.front().kind;
  fit.protocols = std::move(init);
  fit.min_ranks = fit.max_ranks = samples.front().ranks;
  fit.min_bytes = fit.max_bytes = samples.front().bytes;
  for (const auto& s : samples) {
    if (s.kind != fit.kind) throw std::invalid_argument("fit_collective: samples of different collectives");
    // The calibrated model covers one node (multi-node groups use the spec-derived model):
    // mixing in multi-node runs would bend the one-node fit.
    if (s.nodes > 1) {
      throw std::invalid_argument("fit_collective: " + s.source + " spans " + std::to_string(s.nodes) +
                                  " nodes; only single-node runs are fitted (multi-node collectives use the spec-derived model)");
    }
    fit.min_ranks = std::min(fit.min_ranks, s.ranks);
    fit.max_ranks = std::max(fit.max_ranks, s.ranks);
    fit.min_bytes = std::min(fit.min_bytes, s.bytes);
    fit.max_bytes = std::max(fit.max_bytes, s.bytes);
  }
  std::vector<Eigen::Vector4d> x;
  x.reserve(samples.size());
  for (const auto& s : samples) x.push_back(features(s));
  std::vector<std::size_t> assign(samples.size(), 0), previous;
  for (int iter = 0; iter < 100; ++iter) {
    for (std::size_t i = 0; i < samples.size(); ++i) (void)fit.time(samples[i].bytes, samples[i].ranks, &assign[i]);
    if (assign == previous) break;
    previous = assign;
    for (std::size_t p = 0; p < fit.protocols.size(); ++p) {
      std::vector<std::size_t> idx;
      for (std::size_t i = 0; i < samples.size(); ++i)
        if (assign[i] == p) idx.push_back(i);
      if (idx.size() < 8) continue;  // too few points: keep the protocol's current terms
      Eigen::MatrixXd A(static_cast<Eigen::Index>(idx.size()), 4);
      Eigen::VectorXd y(static_cast<Eigen::Index>(idx.size()));
      for (std::size_t k = 0; k < idx.size(); ++k) {
        const double w = 1.0 / samples[idx[k]].time_s;  // relative error
        A.row(static_cast<Eigen::Index>(k)) = x[idx[k]].transpose() * w;
        y[static_cast<Eigen::Index>(k)] = 1.0;
      }
      const Eigen::Vector4d c = nnls(A, y);
      if (c[2] <= 0 && c[3] <= 0) continue;  // no bandwidth term: not a usable protocol fit
      fit.protocols[p].a = c[0];
      fit.protocols[p].b = c[1];
      fit.protocols[p].c = c[2];
      fit.protocols[p].d = c[3];
    }
  }
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

const CollectiveFit* CommsCalibration::find(CollectiveKind kind) const {
  for (const auto& f : fits)
    if (f.kind == kind) return &f;
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
      protocols.push_back(j);
    }
    fits.push_back({{"collective", collective_name(f.kind)},
                    {"ranks", {f.min_ranks, f.max_ranks}},
                    {"bytes", {fmt::format("{:.0f}B", f.min_bytes), fmt::format("{:.0f}B", f.max_bytes)}},
                    {"protocols", protocols},
                    {"fit", {{"samples", f.quality.samples},
                             {"geomean_abs_error_from_1MiB", f.quality.geomean_abs_error},
                             {"max_abs_error_from_1MiB", f.quality.max_abs_error}}}});
  }
  nlohmann::json j = {{"schema", "perfcast.comms_calibration"},
                      {"schema_version", "1.0"},
                      {"fabric", c.fabric},
                      {"gpu", c.gpu},
                      {"nccl_version", c.nccl_version},
                      {"date", c.date},
                      {"perfcast_commit", c.commit},
                      {"measurements", c.sources},
                      {"collectives", fits}};
  return j.dump(2) + "\n";
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
    const JsonArray ranks = o.array("ranks");
    ranks.require_size(2, 2);
    f.min_ranks = static_cast<int>(ranks[0].as_integer(1, 1 << 20));
    f.max_ranks = static_cast<int>(ranks[1].as_integer(f.min_ranks, 1 << 20));
    const JsonArray bytes = o.array("bytes");
    bytes.require_size(2, 2);
    f.min_bytes = bytes[0].as_quantity(Dimension::kBytes);
    f.max_bytes = bytes[1].as_quantity(Dimension::kBytes);
    const JsonArray protocols = o.array("protocols");
    protocols.require_size(1, 8);
    for (std::size_t p = 0; p < protocols.size(); ++p) {
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
      po.finish();
      f.protocols.push_back(t);
    }
    if (auto q = o.find("fit")) {
      const JsonObject qo = q->as_object();
      f.quality.samples = static_cast<std::size_t>(qo.integer_or("samples", 0, 1LL << 40, 0));
      f.quality.geomean_abs_error = qo.number_or("geomean_abs_error_from_1MiB", 0, 1e6, 0);
      f.quality.max_abs_error = qo.number_or("max_abs_error_from_1MiB", 0, 1e6, 0);
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

CollectiveEstimate CalibratedCollectiveModel::estimate(const CollectiveDesc& d, const RankGroup& g) const {
  const CollectiveFit* fit = calibration_.find(d.kind);
  bool one_node = true;
  for (int r : g.ranks) one_node = one_node && system_->node_of(r) == system_->node_of(g.ranks.front());
  if (!fit || !one_node || g.size() < 2 || d.kind == CollectiveKind::kAllToAllV) return fallback_.estimate(d, g);
  CollectiveEstimate e;
  std::size_t p = 0;
  e.time = fit->time(d.bytes, g.size(), &p);
  const bool inside = d.bytes >= fit->min_bytes && d.bytes <= fit->max_bytes && g.size() >= fit->min_ranks &&
                      g.size() <= fit->max_ranks;
  e.algorithm = inside ? "ring (calibrated)" : "ring (calibrated, extrapolated)";
  e.protocol = fit->protocols[p].name;
  e.bottleneck = system_->fabric == IntraFabric::kPcie ? "pcie" : "nvlink";
  e.bus_bandwidth = e.time > 0 ? d.bytes * bus_factor(d.kind, g.size()) / e.time : 0;
  return e;
}

std::unique_ptr<CollectiveModel> make_collective_model(const SystemSpec& system) {
  if (system.comms_calibration.empty()) return std::make_unique<AlphaBetaCollectiveModel>(system);
  return std::make_unique<CalibratedCollectiveModel>(system, parse_calibration(load_json_file(system.comms_calibration)));
}

}  // namespace perfcast
