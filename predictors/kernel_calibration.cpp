#include "predictors/kernel_calibration.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>

#include <Eigen/Dense>
#include <fmt/format.h>

#include "core/error_stats.hpp"
#include "core/nnls.hpp"

#include "predictors/registry.hpp"
#include "predictors/spec_predictors.hpp"
#include "core/json_text.hpp"

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

double model_time(const FamilyFit& f, double compute, double memory) {
  double t = 0;
  if (f.compute_efficiency > 0) t = std::max(t, compute / f.compute_efficiency);
  if (f.memory_efficiency > 0) t = std::max(t, memory / f.memory_efficiency);
  return f.overhead + t;
}

struct Sample {
  double compute, memory, time;
};

/// Fits overhead + max(compute * a, memory * b) (a = 1 / e_compute, b = 1 / e_memory) with
/// a, b >= 1: no efficiency above the spec peak. Kernels of a few microseconds (profiler
/// traces of small batches) barely constrain the work terms, and an unconstrained fit can
/// trade overhead against "efficiencies" of 1.8x peak that would then mispredict large
/// kernels; with the bound, large kernels are predicted at most at the peak. Solved as
/// NNLS in (t0, a - 1, b - 1). Objective: sum of |relative error|, by IRLS (each row
/// weighted by 1 / sqrt(max(|previous residual|, 1%))); the first pass is least squares.
FamilyFit fit_family(const std::string& family, const std::vector<Sample>& train, bool has_compute) {
  FamilyFit f;
  f.family = family;
  // Start: spec-like efficiencies, 3 us overhead.
  double a = has_compute ? 1.0 / 0.7 : 0.0, b = 1.0 / 0.85, t0 = 3e-6;
  for (int iter = 0; iter < 50; ++iter) {
    Eigen::MatrixXd A(static_cast<Eigen::Index>(train.size()), 3);
    Eigen::VectorXd y = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(train.size()));
    bool any_compute = false, any_memory = false;
    for (std::size_t i = 0; i < train.size(); ++i) {
      const auto& s = train[i];
      const bool compute_bound = has_compute && s.compute * a >= s.memory * b;
      (compute_bound ? any_compute : any_memory) = true;
      const double r = (t0 + std::max(s.compute * a, s.memory * b)) / s.time - 1;
      const double irls = iter == 0 ? 1.0 : 1.0 / std::sqrt(std::max(std::fabs(r), 0.01));
      const double w = irls / s.time;  // relative error, IRLS L1
      const auto row = static_cast<Eigen::Index>(i);
      A.row(row) << w, compute_bound ? s.compute * w : 0.0, compute_bound ? 0.0 : s.memory * w;
      y[row] = irls - (compute_bound ? s.compute * w : s.memory * w);  // the fixed 1 x work of a, b = 1 + (>= 0)
    }
    const Eigen::VectorXd c = nnls(A, y).x;
    const double na = has_compute && any_compute ? 1 + c[1] : a, nb = any_memory ? 1 + c[2] : b;
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

/// Embedding work terms at 100% efficiency: the max-terms {dram, l2, row_rounds} and the
/// additive sort term (seconds, seconds, rounds, seconds).
struct EmbeddingSample {
  std::array<double, 3> max_terms{};
  double sort = 0;
  double time = 0;
};

EmbeddingSample embedding_terms(const EmbeddingDesc& d, const GpuSpec& gpu) {
  const EmbeddingWork w = embedding_work(d, gpu);
  EmbeddingSample s;
  s.max_terms = {w.dram_bytes / gpu.memory_bandwidth, w.l2_at_peak, w.row_rounds};
  s.sort = w.sort_at_peak;
  return s;
}

double embedding_model_time(const FamilyFit& f, const EmbeddingSample& s) {
  double t = 0;
  if (f.memory_efficiency > 0) t = std::max(t, s.max_terms[0] / f.memory_efficiency);
  if (f.l2_efficiency > 0) t = std::max(t, s.max_terms[1] / f.l2_efficiency);
  t = std::max(t, s.max_terms[2] * f.row_round_time);
  if (f.sort_efficiency > 0) t += s.sort / f.sort_efficiency;
  return f.overhead + t;
}

/// Fits overhead + max(k0 dram, k1 l2, k2 rounds) + k3 sort by minimising squared relative
/// error: alternate between assigning each sample to its largest max-term and a
/// non-negative least-squares solve of all coefficients (a regime no sample falls in keeps
/// its coefficient). Starts from spec-like values: 85% of HBM, 70% of L2, 0.1 us a round.
FamilyFit fit_embedding_family(const std::string& family, const std::vector<EmbeddingSample>& train) {
  const bool backward = family == "embedding_backward";
  std::array<double, 3> k = {1.0 / 0.85, 1.0 / 0.7, 1e-7};
  double sort_k = backward ? 1.0 / 0.85 : 0.0, t0 = 3e-6;
  const Eigen::Index cols = backward ? 5 : 4;
  for (int iter = 0; iter < 100; ++iter) {
    Eigen::MatrixXd A = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(train.size()), cols);
    const Eigen::VectorXd y = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(train.size()));
    std::array<bool, 3> used{};
    for (std::size_t i = 0; i < train.size(); ++i) {
      const auto& s = train[i];
      std::size_t r = 0;
      for (std::size_t j = 1; j < 3; ++j)
        if (s.max_terms[j] * k[j] > s.max_terms[r] * k[r]) r = j;
      used[r] = true;
      const double w = 1.0 / s.time;  // relative error
      const auto row = static_cast<Eigen::Index>(i);
      A(row, 0) = w;
      A(row, static_cast<Eigen::Index>(1 + r)) = s.max_terms[r] * w;
      if (backward) A(row, 4) = s.sort * w;
    }
    const Eigen::VectorXd c = nnls(A, y).x;
    bool done = std::fabs(c[0] - t0) < 1e-12;
    for (std::size_t j = 0; j < 3; ++j) {
      const double nk = used[j] && c[static_cast<Eigen::Index>(1 + j)] > 0 ? c[static_cast<Eigen::Index>(1 + j)] : k[j];
      done = done && std::fabs(nk - k[j]) < 1e-9 * std::fabs(k[j] + 1e-9);
      k[j] = nk;
    }
    if (backward) {
      const double ns = c[4];  // 0 when the sort adds nothing measurable
      done = done && std::fabs(ns - sort_k) < 1e-9 * std::fabs(sort_k + 1e-9);
      sort_k = ns;
    }
    t0 = c[0];
    if (done) break;
  }
  FamilyFit f;
  f.family = family;
  f.memory_efficiency = 1.0 / k[0];
  f.l2_efficiency = 1.0 / k[1];
  f.row_round_time = k[2];
  f.sort_efficiency = sort_k > 0 ? 1.0 / sort_k : 0.0;
  f.overhead = t0;
  return f;
}

void fit_embedding(const std::string& fam, const std::vector<std::pair<EmbeddingSample, bool>>& samples, KernelCalibration& cal) {
  std::vector<EmbeddingSample> train, test;
  for (const auto& [s, out] : samples) (out ? test : train).push_back(s);
  if (train.size() < 10) return;
  FamilyFit f = fit_embedding_family(fam, train);
  std::vector<double> tr, te;
  for (const auto& s : train) tr.push_back(embedding_model_time(f, s) / s.time - 1);
  for (const auto& s : test) te.push_back(embedding_model_time(f, s) / s.time - 1);
  f.train_samples = train.size();
  f.heldout_samples = test.size();
  f.train_geomean_abs_error = geomean_abs_error(tr);
  f.heldout_geomean_abs_error = geomean_abs_error(te);
  cal.fits.push_back(f);
}

}  // namespace

const FamilyFit* KernelCalibration::find(const std::string& family) const {
  for (const auto& f : fits)
    if (f.family == family) return &f;
  return nullptr;
}

const FamilyFit* KernelCalibration::find_first(const std::vector<std::string>& candidates) const {
  for (const auto& c : candidates)
    if (const FamilyFit* f = find(c)) return f;
  return nullptr;
}

std::vector<std::string> model2_families(const KernelDesc& k) {
  if (const auto* g = std::get_if<GemmDesc>(&k)) {
    const std::string type = g->block_scaled                                        ? "fp8_block"
                             : g->dtype == DType::kFp16 || g->dtype == DType::kBf16 ? "bf16"
                                                                                    : std::string(dtype_name(g->dtype));
    const std::string base = "gemm." + type;
    if (g->impl == GemmImpl::kCublas) return {base};
    return {base + "." + std::string(gemm_impl_name(g->impl)), base};
  }
  if (const auto* a = std::get_if<AttentionDesc>(&k)) {
    const std::string pass = a->pass == AttentionPass::kForward ? "attention_forward" : "attention_backward";
    const std::string dtype(dtype_name(a->dtype));
    const std::string impl = pass + "." + std::string(attention_kernel_name(a->impl));
    // fp16 runs at bf16's tensor-core rate (H100/H200 datasheets): an fp16 kernel without a
    // family of its own takes its implementation's bf16 family, and pools with bf16.
    if (a->dtype == DType::kFp16) return {impl + ".fp16", impl + ".bf16", pass + ".bf16"};
    return {impl + "." + dtype, pass + "." + dtype};
  }
  if (std::holds_alternative<ElementwiseDesc>(k)) return {"elementwise"};
  return {};
}

std::string calibration_family(const KernelDesc& k) {
  if (const auto* g = std::get_if<GemmDesc>(&k)) return "gemm." + std::string(dtype_name(g->dtype));
  if (std::holds_alternative<ElementwiseDesc>(k)) return "elementwise";
  if (const auto* m = std::get_if<MemcpyDesc>(&k)) {
    return m->kind == CopyKind::kHostToDevice ? "memcpy.h2d" : m->kind == CopyKind::kDeviceToHost ? "memcpy.d2h" : "memcpy.d2d";
  }
  if (const auto* e = std::get_if<EmbeddingDesc>(&k)) {
    return e->pass == EmbeddingPass::kForward ? "embedding_forward" : "embedding_backward";
  }
  return "";
}

KernelCalibration fit_kernel_calibration(const std::vector<Measurement>& ms, const GpuSpec& gpu) {
  KernelCalibration cal;
  std::map<std::string, std::vector<std::pair<Sample, bool>>> by_family;
  std::map<std::string, std::vector<std::pair<EmbeddingSample, bool>>> embedding;
  for (const auto& m : ms) {
    const std::string fam = calibration_family(m.kernel);
    if (fam.empty()) continue;
    if (const auto* e = std::get_if<EmbeddingDesc>(&m.kernel)) {
      EmbeddingSample s = embedding_terms(*e, gpu);
      s.time = m.timing.median;
      embedding[fam].push_back({s, held_out(m.kernel)});
    } else {
      const auto [c, mem] = work_terms(m.kernel, gpu);
      by_family[fam].push_back({Sample{c, mem, m.timing.median}, held_out(m.kernel)});
    }
    if (!m.source.empty() && std::find(cal.sources.begin(), cal.sources.end(), m.source) == cal.sources.end())
      cal.sources.push_back(m.source);
    if (!m.date.empty() && std::find(cal.measured_dates.begin(), cal.measured_dates.end(), m.date) == cal.measured_dates.end())
      cal.measured_dates.push_back(m.date);
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
    f.train_geomean_abs_error = geomean_abs_error(tr);
    f.heldout_geomean_abs_error = geomean_abs_error(te);
    cal.fits.push_back(f);
  }
  for (const auto& [fam, samples] : embedding) fit_embedding(fam, samples, cal);
  std::sort(cal.measured_dates.begin(), cal.measured_dates.end());
  if (cal.fits.empty()) throw std::invalid_argument("no kernel family has the 10 measurements a fit needs");
  return cal;
}

namespace {

/// Kernel model 2 (see kernel_calibration.hpp): GEMM on Hopper tiles, attention, and
/// memory-bound kernels with an L2-resident regime. False when no family covers `k` (the
/// estimate stays spec-derived).
bool predict_model2(const KernelDesc& k, const GpuSpec& gpu, const KernelCalibration& cal, Estimate& e) {
  const FamilyFit* f = cal.find_first(model2_families(k));
  if (!f) return false;
  auto limited = [](double work, double efficiency) { return efficiency > 0 ? work / efficiency : 0.0; };
  if (const auto* g = std::get_if<GemmDesc>(&k)) {
    const GemmWork w = gemm_work(*g, gpu, kHopperGemmTiling);
    const double compute = limited(w.compute_at_peak, f->compute_efficiency), memory = limited(w.memory_at_peak, f->memory_efficiency);
    e.time = f->overhead + std::max(compute, memory);
    e.bound = compute >= memory ? "compute" : "memory";
    e.split_k = w.split_k;
    e.predictor = "gemm.calibrated";
  } else if (const auto* a = std::get_if<AttentionDesc>(&k)) {
    const AttentionWork w = attention_work(*a, gpu);
    const double compute = limited(w.compute_at_peak, f->compute_efficiency), memory = limited(w.memory_at_peak, f->memory_efficiency);
    e.time = w.launches * f->overhead + std::max(compute, memory);
    e.bound = compute >= memory ? "compute" : "memory";
    e.launches = w.launches;
    e.predictor = a->pass == AttentionPass::kForward ? "attention_forward.calibrated" : "attention_backward.calibrated";
  } else {
    const auto& d = std::get<ElementwiseDesc>(k);
    const double bytes = static_cast<double>(d.elements) * d.bytes_per_element;
    const double capacity = f->l2_resident_share * gpu.l2_cache;
    const double h = d.cold_l2 || capacity <= 0 || f->l2_efficiency <= 0 ? 0.0 : std::clamp((2 * capacity - bytes) / capacity, 0.0, 1.0);
    e.time = f->overhead + limited(bytes * (1 - h) / gpu.memory_bandwidth, f->memory_efficiency) +
             limited(bytes * h / gpu.l2_bandwidth, f->l2_efficiency) + thread_waves(d, gpu) * f->wave_time;
    e.bound = h > 0.5 ? "l2" : "memory";
    e.predictor = "elementwise.calibrated";
  }
  e.calibrated = true;
  return true;
}

}  // namespace

Estimate predict_with_calibration(const KernelDesc& k, const GpuSpec& gpu, const KernelCalibration* cal) {
  Estimate e = predict_kernel(k, gpu);
  if (!cal) return e;
  if (cal->kernel_model >= 2) {
    predict_model2(k, gpu, *cal, e);
    return e;
  }
  const FamilyFit* f = cal->find(calibration_family(k));
  if (!f) return e;
  if (const auto* d = std::get_if<EmbeddingDesc>(&k)) {
    if (d->tables.empty() || d->batch <= 0) return e;
    const EmbeddingSample s = embedding_terms(*d, gpu);
    e.time = embedding_model_time(*f, s);
    // The backward's extra sub-kernels (sort, run-length encode) are inside the fitted
    // overhead and sort term; launches stay as the spec model counts them.
    e.calibrated = true;
    e.predictor = d->pass == EmbeddingPass::kForward ? "embedding_forward.calibrated" : "embedding_backward.calibrated";
    const double dram = f->memory_efficiency > 0 ? s.max_terms[0] / f->memory_efficiency : 0.0;
    const double l2 = f->l2_efficiency > 0 ? s.max_terms[1] / f->l2_efficiency : 0.0;
    const double rounds = s.max_terms[2] * f->row_round_time;
    e.bound = rounds > std::max(dram, l2) ? "latency" : l2 > dram ? "l2" : "memory";
    add_host_memory_time(e, embedding_work(*d, gpu), gpu);  // a calibration fits HBM-resident tables only
    return e;
  }
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

double thread_waves(const ElementwiseDesc& d, const GpuSpec& gpu) {
  if (!d.thread_per_element || gpu.sm_count <= 0) return 0.0;
  return static_cast<double>(d.elements) / (gpu.sm_count * kResidentThreadsPerSm);
}

std::string kernel_calibration_to_json(const KernelCalibration& c) {
  nlohmann::json fits = nlohmann::json::array();
  for (const auto& f : c.fits) {
    nlohmann::json j = {{"family", f.family},
                        {"memory_efficiency", f.memory_efficiency},
                        {"overhead", fmt::format("{:.4f}us", f.overhead * 1e6)},
                        {"train_samples", f.train_samples},
                        {"heldout_samples", f.heldout_samples},
                        {"train_geomean_abs_error", f.train_geomean_abs_error}};
    // No held-out samples, no held-out error (a 0 would read as a perfect score).
    if (f.heldout_samples > 0) j["heldout_geomean_abs_error"] = f.heldout_geomean_abs_error;
    if (f.compute_efficiency > 0) j["compute_efficiency"] = f.compute_efficiency;
    if (f.l2_efficiency > 0) j["l2_efficiency"] = f.l2_efficiency;
    if (f.row_round_time > 0) j["row_round_time"] = fmt::format("{:.6f}us", f.row_round_time * 1e6);
    if (f.sort_efficiency > 0) j["sort_efficiency"] = f.sort_efficiency;
    if (f.l2_resident_share > 0) j["l2_resident_share"] = f.l2_resident_share;
    if (f.wave_time > 0) j["wave_time"] = fmt::format("{:.6f}us", f.wave_time * 1e6);
    if (!f.sources.empty()) j["sources"] = f.sources;
    fits.push_back(j);
  }
  nlohmann::json j = {{"schema", "perfcast.kernel_calibration"}, {"schema_version", "1.0"}, {"gpu", c.gpu},
                      {"driver", c.driver}, {"cuda_runtime", c.cuda_runtime}, {"cublas", c.cublas},
                      {"date", c.date}, {"perfcast_commit", c.commit}, {"measurements", c.measurements}, {"families", fits}};
  if (!c.sources.empty()) j["sources"] = c.sources;
  if (!c.measured_dates.empty()) j["measured_dates"] = c.measured_dates;
  if (!c.note.empty()) j["note"] = c.note;
  if (c.kernel_model != 1) {
    j["schema_version"] = "1.1";
    j["kernel_model"] = c.kernel_model;
  }
  if (!c.basis.empty()) j["basis"] = c.basis;
  return json_text(j, 2) + "\n";
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
  c.note = root.string_or("note", "");
  c.kernel_model = static_cast<int>(root.integer_or("kernel_model", 1, 2, 1));
  c.basis = root.enum_or("basis", {"", "public measurements"}, "");
  if (auto m = root.find("measurements")) {
    const JsonArray a = m->as_array();
    for (std::size_t i = 0; i < a.size(); ++i) c.measurements.push_back(a[i].as_string());
  }
  for (const auto& [key, list] : {std::pair<const char*, std::vector<std::string>*>{"sources", &c.sources},
                                  std::pair<const char*, std::vector<std::string>*>{"measured_dates", &c.measured_dates}}) {
    if (auto v = root.find(key)) {
      const JsonArray a = v->as_array();
      for (std::size_t i = 0; i < a.size(); ++i) list->push_back(a[i].as_string());
    }
  }
  const JsonArray fams = root.array("families");
  for (std::size_t i = 0; i < fams.size(); ++i) {
    const JsonObject o = fams[i].as_object();
    FamilyFit f;
    f.family = o.string("family");
    f.compute_efficiency = o.number_or("compute_efficiency", 0, 10, 0);
    f.memory_efficiency = o.at("memory_efficiency").as_number_in(0, 10);
    f.overhead = o.quantity("overhead", Dimension::kTime);
    f.l2_efficiency = o.number_or("l2_efficiency", 0, 10, 0);
    f.row_round_time = o.quantity_or("row_round_time", Dimension::kTime, 0);
    f.sort_efficiency = o.number_or("sort_efficiency", 0, 10, 0);
    f.l2_resident_share = o.number_or("l2_resident_share", 0, 1, 0);
    f.wave_time = o.quantity_or("wave_time", Dimension::kTime, 0);
    if (auto v = o.find("sources")) {
      const JsonArray a = v->as_array();
      for (std::size_t k = 0; k < a.size(); ++k) f.sources.push_back(a[k].as_string());
    }
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
