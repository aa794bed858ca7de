#include "predictors/kernel_calibration.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>

#include <Eigen/Dense>
#include <fmt/format.h>

#include "predictors/registry.hpp"
#include "predictors/spec_predictors.hpp"

namespace perfcast {
namespace {

/// PCIe share used for host copies' "memory" term: the link rate (GpuSpec::pcie_bandwidth).
bool is_host_copy(const KernelDesc& k) {
  const auto* m = std::get_if<MemcpyDesc>(&k);
  return m && m->kind != CopyKind::kDeviceToDevice;
}

/// Work terms of a kernel at 100% efficiency: {compute, memory}, seconds.
std::pair<double, double> work_terms(const KernelDesc& k, const GpuSpec& gpu) {
  if (const auto* g = std::get_if<GemmDesc>(&k)) {
    const GemmWork w = gemm_work(*g, gpu);
    return {w.compute_at_peak, w.memory_at_peak};
  }
  if (const auto* e = std::get_if<ElementwiseDesc>(&k)) {
    return {0.0, static_cast<double>(e->elements) * e->bytes_per_element / gpu.memory_bandwidth};
  }
  if (const auto* m = std::get_if<MemcpyDesc>(&k)) {
    if (m->kind == CopyKind::kDeviceToDevice) return {0.0, 2 * m->bytes / gpu.memory_bandwidth};
    return {0.0, m->bytes / gpu.pcie_bandwidth};
  }
  return {0.0, 0.0};
}

/// Deterministic 1-in-5 hold-out by descriptor hash.
bool held_out(const KernelDesc& k) { return hash_value(k) % 5 == 0; }

double geomean_abs(const std::vector<double>& e) {
  if (e.empty()) return 0;
  double s = 0;
  for (double x : e) s += std::log(std::max(std::fabs(x), 1e-9));
  return std::exp(s / static_cast<double>(e.size()));
}

double model_time(const FamilyFit& f, double compute, double memory) {
  double t = 0;
  if (f.compute_efficiency > 0) t = std::max(t, compute / f.compute_efficiency);
  if (f.memory_efficiency > 0) t = std::max(t, memory / f.memory_efficiency);
  return f.overhead + t;
}

/// Non-negative weighted least squares on few columns by an active set.
Eigen::VectorXd nnls(const Eigen::MatrixXd& A, const Eigen::VectorXd& y) {
  std::vector<Eigen::Index> active;
  for (Eigen::Index j = 0; j < A.cols(); ++j) active.push_back(j);
  Eigen::VectorXd out = Eigen::VectorXd::Zero(A.cols());
  for (int round = 0; round <= A.cols() && !active.empty(); ++round) {
    Eigen::MatrixXd sub(A.rows(), static_cast<Eigen::Index>(active.size()));
    for (std::size_t j = 0; j < active.size(); ++j) sub.col(static_cast<Eigen::Index>(j)) = A.col(active[j]);
    const Eigen::VectorXd sol = sub.colPivHouseholderQr().solve(y);
    std::vector<Eigen::Index> keep;
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
    if (!negative) break;
    active = keep;
  }
  return out;
}

struct Sample {
  double compute, memory, time;
};

/// Fits overhead + max(compute * a, memory * b) (a = 1 / e_compute, b = 1 / e_memory).
FamilyFit fit_family(const std::string& family, const std::vector<Sample>& train, bool has_compute) {
  FamilyFit f;
  f.family = family;
  // Start: spec-like efficiencies, 3 us overhead.
  double a = has_compute ? 1.0 / 0.7 : 0.0, b = 1.0 / 0.85, t0 = 3e-6;
  for (int iter = 0; iter < 50; ++iter) {
    Eigen::MatrixXd A(static_cast<Eigen::Index>(train.size()), 3);
    Eigen::VectorXd y = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(train.size()));
    for (std::size_t i = 0; i < train.size(); ++i) {
      const auto& s = train[i];
      const bool compute_bound = has_compute && s.compute * a >= s.memory * b;
      const double w = 1.0 / s.time;  // relative error
      A.row(static_cast<Eigen::Index>(i)) << w, compute_bound ? s.compute * w : 0.0, compute_bound ? 0.0 : s.memory * w;
    }
    const Eigen::VectorXd c = nnls(A, y);
    const double na = has_compute && c[1] > 0 ? c[1] : a, nb = c[2] > 0 ? c[2] : b;
    const bool done = std::fabs(na - a) < 1e-9 * std::fabs(a + 1) && std::fabs(nb - b) < 1e-9 * std::fabs(b + 1) &&
                      std::fabs(c[0] - t0) < 1e-12;
    a = na;
    b = nb;
    t0 = c[0];
    if (done) break;
  }
  f.compute_efficiency = has_compute && a > 0 ? 1.0 / a : 0.0;
  f.memory_efficiency = b > 0 ? 1.0 / b : 0.0;
  f.overhead = t0;
  return f;
}

}  // namespace

const FamilyFit* KernelCalibration::find(const std::string& family) const {
  for (const auto& f : fits)
    if (f.family == family) return &f;
  return nullptr;
}

std::string calibration_family(const KernelDesc& k) {
  if (const auto* g = std::get_if<GemmDesc>(&k)) return "gemm." + std::string(dtype_name(g->dtype));
  if (std::holds_alternative<ElementwiseDesc>(k)) return "elementwise";
  if (const auto* m = std::get_if<MemcpyDesc>(&k)) {
    return m->kind == CopyKind::kHostToDevice ? "memcpy.h2d" : m->kind == CopyKind::kDeviceToHost ? "memcpy.d2h" : "memcpy.d2d";
  }
  return "";
}

KernelCalibration fit_kernel_calibration(const std::vector<Measurement>& ms, const GpuSpec& gpu) {
  KernelCalibration cal;
  std::map<std::string, std::vector<std::pair<Sample, bool>>> by_family;
  for (const auto& m : ms) {
    const std::string fam = calibration_family(m.kernel);
    if (fam.empty()) continue;
    const auto [c, mem] = work_terms(m.kernel, gpu);
    by_family[fam].push_back({Sample{c, mem, m.timing.median}, held_out(m.kernel)});
    if (cal.gpu.empty()) {
      cal.gpu = m.device.name;
      cal.driver = m.device.driver;
      cal.cuda_runtime = m.device.cuda_runtime;
      cal.cublas = m.device.cublas;
    }
  }
  for (const auto& [fam, samples] : by_family) {
    std::vector<Sample> train, test;
    for (const auto& [s, out] : samples) (out ? test : train).push_back(s);
    if (train.size() < 10) continue;
    FamilyFit f = fit_family(fam, train, fam.rfind("gemm.", 0) == 0);
    std::vector<double> tr, te;
    for (const auto& s : train) tr.push_back(model_time(f, s.compute, s.memory) / s.time - 1);
    for (const auto& s : test) te.push_back(model_time(f, s.compute, s.memory) / s.time - 1);
    f.train_samples = train.size();
    f.heldout_samples = test.size();
    f.train_geomean_abs_error = geomean_abs(tr);
    f.heldout_geomean_abs_error = geomean_abs(te);
    cal.fits.push_back(f);
  }
  if (cal.fits.empty()) throw std::invalid_argument("no kernel family has the 10 measurements a fit needs");
  return cal;
}

Estimate predict_with_calibration(const KernelDesc& k, const GpuSpec& gpu, const KernelCalibration* cal) {
  Estimate e = predict_kernel(k, gpu);
  if (!cal) return e;
  const FamilyFit* f = cal->find(calibration_family(k));
  if (!f) return e;
  const auto [c, m] = work_terms(k, gpu);
  e.time = model_time(*f, c, m);
  e.calibrated = true;
  e.predictor = std::holds_alternative<GemmDesc>(k)          ? "gemm.calibrated"
                : std::holds_alternative<ElementwiseDesc>(k) ? "elementwise.calibrated"
                                                             : "memcpy.calibrated";
  e.bound = f->compute_efficiency > 0 && c / f->compute_efficiency >= m / f->memory_efficiency ? "compute"
            : is_host_copy(k)                                                                    ? "pcie"
                                                                                                 : "memory";
  return e;
}

std::string kernel_calibration_to_json(const KernelCalibration& c) {
  nlohmann::json fits = nlohmann::json::array();
  for (const auto& f : c.fits) {
    nlohmann::json j = {{"family", f.family},
                        {"memory_efficiency", f.memory_efficiency},
                        {"overhead", fmt::format("{:.4f}us", f.overhead * 1e6)},
                        {"train_samples", f.train_samples},
                        {"heldout_samples", f.heldout_samples},
                        {"train_geomean_abs_error", f.train_geomean_abs_error},
                        {"heldout_geomean_abs_error", f.heldout_geomean_abs_error}};
    if (f.compute_efficiency > 0) j["compute_efficiency"] = f.compute_efficiency;
    fits.push_back(j);
  }
  nlohmann::json j = {{"schema", "perfcast.kernel_calibration"}, {"schema_version", "1.0"}, {"gpu", c.gpu},
                      {"driver", c.driver}, {"cuda_runtime", c.cuda_runtime}, {"cublas", c.cublas},
                      {"date", c.date}, {"perfcast_commit", c.commit}, {"measurements", c.measurements}, {"families", fits}};
  return j.dump(2) + "\n";
}

KernelCalibration parse_kernel_calibration(const JsonDocument& doc) {
  const JsonObject root(doc);
  root.require_schema("perfcast.kernel_calibration", 1);
  KernelCalibration c;
  c.gpu = root.string("gpu");
  c.driver = root.string_or("driver", "");
  c.cuda_runtime = root.string_or("cuda_runtime", "");
  c.cublas = root.string_or("cublas", "");
  c.date = root.string_or("date", "");
  c.commit = root.string_or("perfcast_commit", "");
  if (auto m = root.find("measurements")) {
    const JsonArray a = m->as_array();
    for (std::size_t i = 0; i < a.size(); ++i) c.measurements.push_back(a[i].as_string());
  }
  const JsonArray fams = root.array("families");
  for (std::size_t i = 0; i < fams.size(); ++i) {
    const JsonObject o = fams[i].as_object();
    FamilyFit f;
    f.family = o.string("family");
    f.compute_efficiency = o.number_or("compute_efficiency", 0, 10, 0);
    f.memory_efficiency = o.at("memory_efficiency").as_number_in(0, 10);
    f.overhead = o.quantity("overhead", Dimension::kTime);
    f.train_samples = static_cast<std::size_t>(o.integer_or("train_samples", 0, 1LL << 40, 0));
    f.heldout_samples = static_cast<std::size_t>(o.integer_or("heldout_samples", 0, 1LL << 40, 0));
    f.train_geomean_abs_error = o.number_or("train_geomean_abs_error", 0, 1e6, 0);
    f.heldout_geomean_abs_error = o.number_or("heldout_geomean_abs_error", 0, 1e6, 0);
    o.finish();
    c.fits.push_back(f);
  }
  root.finish();
  return c;
}

std::string calibration_file_name(const std::string& gpu_name) {
  std::string out;
  for (char ch : gpu_name) {
    const auto u = static_cast<unsigned char>(ch);
    out += std::isalnum(u) ? static_cast<char>(std::tolower(u)) : '_';
  }
  return out + ".json";
}

}  // namespace perfcast
