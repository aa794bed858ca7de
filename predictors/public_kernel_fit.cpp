#include "predictors/public_kernel_fit.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include <Eigen/Dense>

#include "core/nnls.hpp"
#include "predictors/registry.hpp"
#include "predictors/spec_predictors.hpp"

namespace perfcast {
namespace {

/// Priors of a family no row constrains: the spec model's shares (topology/gpu_spec.hpp
/// EfficiencyFactors: GEMM 0.77, HBM 0.89, minimum kernel time 2 us; spec_predictors.hpp
/// kFlashForwardEfficiency / kFlashBackwardEfficiency), and the L2 regime at half the L2
/// capacity and the system's L2 rate (assumed).
constexpr double kPriorGemmEfficiency = 0.77;
constexpr double kPriorMemoryEfficiency = 0.89;
constexpr Seconds kPriorOverhead = 2e-6;
constexpr double kPriorL2Share = 0.5;
constexpr double kPriorL2Efficiency = 1.0;

/// One row of the linear model a fit solves for a fixed regime assignment:
/// time ~ fixed + sum coef_j x_j with every x_j >= 0 (x_j: an overhead, or an inverse
/// efficiency less 1).
struct LinearRow {
  std::vector<std::pair<int, double>> coef;
  double fixed = 0;
  double time = 0;
  double weight = 1;
};

double linear_prediction(const LinearRow& r, const std::vector<double>& x) {
  double p = r.fixed;
  for (const auto& [j, c] : r.coef) p += c * x[static_cast<std::size_t>(j)];
  return p;
}

/// Minimises sum weight |prediction / time - 1| over x >= 0: iteratively reweighted least
/// squares (row weight sqrt(weight) / time / sqrt(max(|previous error|, 1%))), each step a
/// non-negative least-squares solve.
std::vector<double> solve_relative_l1(const std::vector<LinearRow>& rows, int params) {
  std::vector<double> x(static_cast<std::size_t>(params), 0.0);
  if (rows.empty() || params == 0) return x;
  for (int iter = 0; iter < 40; ++iter) {
    Eigen::MatrixXd A = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(rows.size()), params);
    Eigen::VectorXd y(static_cast<Eigen::Index>(rows.size()));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      const double err = linear_prediction(r, x) / r.time - 1;
      const double irls = iter == 0 ? 1.0 : 1.0 / std::sqrt(std::max(std::fabs(err), 0.01));
      const double w = std::sqrt(r.weight) * irls / r.time;
      const auto row = static_cast<Eigen::Index>(i);
      for (const auto& [j, c] : r.coef) A(row, j) += c * w;
      y[row] = (r.time - r.fixed) * w;
    }
    const Eigen::VectorXd c = nnls(A, y).x;
    double change = 0;
    for (int j = 0; j < params; ++j) {
      change = std::max(change, std::fabs(c[j] - x[static_cast<std::size_t>(j)]) / (std::fabs(c[j]) + 1e-12));
      x[static_cast<std::size_t>(j)] = c[j];
    }
    if (change < 1e-9) break;
  }
  return x;
}

double weighted_l1(const std::vector<LinearRow>& rows, const std::vector<double>& x) {
  double s = 0;
  for (const auto& r : rows) s += r.weight * std::fabs(linear_prediction(r, x) / r.time - 1);
  return s;
}

/// Weight of the pseudo-row that holds an overhead at its prior: 1e-4 of one source's weight.
/// It decides only where the rows leave the overhead free (every small kernel of the group
/// timed by a harness whose own intercept takes it up), as a weak prior would.
constexpr double kPriorRowWeight = 1e-4;

/// A pseudo-row "overhead (parameter `param`) = kPriorOverhead".
LinearRow overhead_prior(int param) {
  LinearRow r;
  r.coef = {{param, 1.0}};
  r.time = kPriorOverhead;
  r.weight = kPriorRowWeight;
  return r;
}

/// Each row's weight: its caveat weight over its source's row count in the group.
std::vector<double> source_weights(const std::vector<const FitSample*>& group) {
  std::map<std::string, double> rows_of;
  for (const auto* s : group) rows_of[s->row->source] += 1;
  std::vector<double> w;
  for (const auto* s : group) w.push_back(s->row->weight / rows_of[s->row->source]);
  return w;
}

/// Index of the intercept of each harness-timed source whose intercept an earlier group has
/// not fitted yet, after `first` parameters.
std::map<std::string, int> harness_params(const std::vector<const FitSample*>& group, int first, const PublicKernelFit& fit) {
  std::map<std::string, int> out;
  for (const auto* s : group)
    if (s->row->harness_overhead && !out.count(s->row->source) && !fit.harness_overhead_by_source.count(s->row->source))
      out[s->row->source] = first + static_cast<int>(out.size());
  return out;
}

/// A harness-timed row's intercept: a parameter of this group's fit, or the constant an
/// earlier group fitted for its source (the same harness times every kernel of a source).
void add_harness(LinearRow& r, const FitSample& s, const std::map<std::string, int>& harness, const PublicKernelFit& fit) {
  if (!s.row->harness_overhead) return;
  if (const auto it = harness.find(s.row->source); it != harness.end()) r.coef.emplace_back(it->second, 1.0);
  else r.fixed += fit.harness_cost(*s.row);
}

void record_harness(const std::map<std::string, int>& harness, const std::vector<double>& x, PublicKernelFit& fit) {
  for (const auto& [source, j] : harness) fit.harness_overhead_by_source[source] = x[static_cast<std::size_t>(j)];
}

std::vector<std::string> sources_of(const std::vector<const FitSample*>& group) {
  std::set<std::string> s;
  for (const auto* g : group) s.insert(g->row->source);
  return {s.begin(), s.end()};
}

// ---- GEMM: per family overhead + max(compute / e_c, memory / e_m) on Hopper tiles ----

void fit_gemm(const std::vector<const FitSample*>& group, PublicKernelFit& fit) {
  if (group.empty()) return;
  struct Term {
    std::string family;
    double compute, memory;
  };
  std::vector<Term> terms;
  std::vector<std::string> families;
  for (const auto* s : group) {
    const auto& g = std::get<GemmDesc>(s->row->kernels.front());
    const GemmWork w = gemm_work(g, s->gpu, kHopperGemmTiling);
    terms.push_back({model2_families(g).front(), w.compute_at_peak, w.memory_at_peak});
    if (std::find(families.begin(), families.end(), terms.back().family) == families.end()) families.push_back(terms.back().family);
  }
  std::sort(families.begin(), families.end());
  const int nf = static_cast<int>(families.size());
  auto index = [&](const std::string& f) { return static_cast<int>(std::find(families.begin(), families.end(), f) - families.begin()); };
  // Parameters: the overhead every GEMM kernel pays, per family [a - 1, b - 1], then the
  // harness intercepts. One overhead: a family of a few large kernels cannot place it.
  const auto harness = harness_params(group, 1 + 2 * nf, fit);
  const int params = 1 + 2 * nf + static_cast<int>(harness.size());
  const std::vector<double> weights = source_weights(group);
  std::vector<double> a(static_cast<std::size_t>(nf), 1 / 0.7), b(static_cast<std::size_t>(nf), 1 / 0.85);
  std::vector<double> x;
  std::vector<int> compute_rows, memory_rows;
  for (int round = 0; round < 20; ++round) {
    std::vector<LinearRow> rows;
    compute_rows.assign(static_cast<std::size_t>(nf), 0);
    memory_rows.assign(static_cast<std::size_t>(nf), 0);
    for (std::size_t i = 0; i < group.size(); ++i) {
      const int f = index(terms[i].family);
      const auto fu = static_cast<std::size_t>(f);
      const bool compute = terms[i].compute * a[fu] >= terms[i].memory * b[fu];
      ++(compute ? compute_rows : memory_rows)[fu];
      LinearRow r;
      r.time = group[i]->row->measured;
      r.weight = weights[i];
      r.fixed = compute ? terms[i].compute : terms[i].memory;
      r.coef = {{0, 1.0}, {1 + 2 * f + (compute ? 0 : 1), r.fixed}};
      add_harness(r, *group[i], harness, fit);
      rows.push_back(r);
    }
    rows.push_back(overhead_prior(0));
    x = solve_relative_l1(rows, params);
    bool same = true;
    for (int f = 0; f < nf; ++f) {
      const auto fu = static_cast<std::size_t>(f);
      const double na = compute_rows[fu] > 0 ? 1 + x[static_cast<std::size_t>(1 + 2 * f)] : a[fu];
      const double nb = memory_rows[fu] > 0 ? 1 + x[static_cast<std::size_t>(2 + 2 * f)] : b[fu];
      same = same && std::fabs(na - a[fu]) < 1e-9 * na && std::fabs(nb - b[fu]) < 1e-9 * nb;
      a[fu] = na;
      b[fu] = nb;
    }
    if (same) break;
  }
  // Families without memory-bound rows take the others' memory efficiency (weighted by rows).
  double log_b = 0, n_b = 0;
  for (int f = 0; f < nf; ++f)
    if (memory_rows[static_cast<std::size_t>(f)] > 0) {
      log_b += memory_rows[static_cast<std::size_t>(f)] * std::log(b[static_cast<std::size_t>(f)]);
      n_b += memory_rows[static_cast<std::size_t>(f)];
    }
  const double pooled_b = n_b > 0 ? std::exp(log_b / n_b) : 1 / kPriorMemoryEfficiency;
  for (int f = 0; f < nf; ++f) {
    const auto fu = static_cast<std::size_t>(f);
    FamilyFit ff;
    ff.family = families[fu];
    ff.compute_efficiency = compute_rows[fu] > 0 ? 1 / a[fu] : kPriorGemmEfficiency;
    ff.memory_efficiency = memory_rows[fu] > 0 ? 1 / b[fu] : 1 / pooled_b;
    ff.overhead = x[0];
    std::vector<const FitSample*> mine;
    for (std::size_t i = 0; i < group.size(); ++i)
      if (terms[i].family == ff.family) mine.push_back(group[i]);
    ff.train_samples = mine.size();
    ff.sources = sources_of(mine);
    fit.families.push_back(ff);
  }
  record_harness(harness, x, fit);
}

// ---- attention: launches x overhead + compute / e per pass, implementation and dtype ----

/// Fits one inverse efficiency per key (key_of a kernel); every launch costs `overhead`.
void fit_attention_keys(const std::vector<const FitSample*>& group, const std::function<std::string(const AttentionDesc&)>& key_of,
                        Seconds overhead, PublicKernelFit& fit, bool record) {
  std::vector<std::string> keys;
  for (const auto* s : group)
    for (const auto& k : s->row->kernels) {
      const std::string key = key_of(std::get<AttentionDesc>(k));
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    }
  std::sort(keys.begin(), keys.end());
  const int nk = static_cast<int>(keys.size());
  auto index = [&](const std::string& k) { return static_cast<int>(std::find(keys.begin(), keys.end(), k) - keys.begin()); };
  // Parameters: [a - 1 per key...]; then the harness intercepts.
  const auto harness = harness_params(group, nk, fit);
  const std::vector<double> weights = source_weights(group);
  std::vector<LinearRow> rows;
  for (std::size_t i = 0; i < group.size(); ++i) {
    LinearRow r;
    r.time = group[i]->row->measured;
    r.weight = weights[i];
    for (const auto& k : group[i]->row->kernels) {
      const auto& a = std::get<AttentionDesc>(k);
      const AttentionWork w = attention_work(a, group[i]->gpu);
      r.fixed += w.compute_at_peak + w.launches * overhead;
      r.coef.emplace_back(index(key_of(a)), w.compute_at_peak);
    }
    add_harness(r, *group[i], harness, fit);
    rows.push_back(r);
  }
  const std::vector<double> x = solve_relative_l1(rows, nk + static_cast<int>(harness.size()));
  for (int k = 0; k < nk; ++k) {
    FamilyFit ff;
    ff.family = keys[static_cast<std::size_t>(k)];
    ff.compute_efficiency = 1 / (1 + x[static_cast<std::size_t>(k)]);
    ff.overhead = overhead;
    std::vector<const FitSample*> mine;
    for (const auto* s : group)
      for (const auto& kd : s->row->kernels)
        if (key_of(std::get<AttentionDesc>(kd)) == ff.family) {
          mine.push_back(s);
          break;
        }
    ff.train_samples = mine.size();
    ff.sources = sources_of(mine);
    fit.families.push_back(ff);
  }
  if (record) record_harness(harness, x, fit);
}

/// The attention rows are all long kernels (hundreds of microseconds and more), which leave
/// a launch's fixed cost to the GEMM rows' fitted overhead (the spec's 2 us without them).
void fit_attention(const std::vector<const FitSample*>& group, PublicKernelFit& fit) {
  if (group.empty()) return;
  Seconds overhead = kPriorOverhead;
  for (const auto& f : fit.families)
    if (f.family.rfind("gemm", 0) == 0) overhead = f.overhead;
  fit_attention_keys(group, [](const AttentionDesc& a) { return model2_families(a).front(); }, overhead, fit, true);
  fit_attention_keys(group, [](const AttentionDesc& a) { return model2_families(a).back(); }, overhead, fit, false);
}

// ---- memory-bound: overhead + HBM bytes / (HBM x e_class) + L2 bytes / (L2 x e_l2) ----

struct MemoryTerm {
  double bytes;
  bool cold;
  std::string gpu_class;
  const GpuSpec* gpu;
  double waves;  ///< thread_waves(): 0 unless the kernel launches one thread per element
};

double l2_hit(const MemoryTerm& t, double share) {
  const double capacity = share * t.gpu->l2_cache;
  return t.cold || capacity <= 0 ? 0.0 : std::clamp((2 * capacity - t.bytes) / capacity, 0.0, 1.0);
}

void fit_memory_bound(const std::vector<const FitSample*>& group, PublicKernelFit& fit) {
  if (group.empty()) return;
  std::vector<MemoryTerm> terms;
  std::vector<std::string> classes;
  for (const auto* s : group) {
    const auto& e = std::get<ElementwiseDesc>(s->row->kernels.front());
    terms.push_back({static_cast<double>(e.elements) * e.bytes_per_element, e.cold_l2, s->row->gpu_class, &s->gpu,
                     thread_waves(e, s->gpu)});
    if (std::find(classes.begin(), classes.end(), s->row->gpu_class) == classes.end()) classes.push_back(s->row->gpu_class);
  }
  std::sort(classes.begin(), classes.end());
  const int nc = static_cast<int>(classes.size());
  auto index = [&](const std::string& c) { return static_cast<int>(std::find(classes.begin(), classes.end(), c) - classes.begin()); };
  // Parameters: [overhead, l - 1, b - 1 per class..., wave time]; then the harness intercepts.
  const int wave_param = 2 + nc;
  const auto harness = harness_params(group, 3 + nc, fit);
  const int params = 3 + nc + static_cast<int>(harness.size());
  const std::vector<double> weights = source_weights(group);
  auto rows_for = [&](double share, bool& any_l2) {
    std::vector<LinearRow> rows;
    any_l2 = false;
    for (std::size_t i = 0; i < group.size(); ++i) {
      const auto& t = terms[i];
      const double h = l2_hit(t, share);
      any_l2 = any_l2 || h > 0;
      LinearRow r;
      r.time = group[i]->row->measured;
      r.weight = weights[i];
      const double hbm = t.bytes * (1 - h) / t.gpu->memory_bandwidth, l2 = t.bytes * h / t.gpu->l2_bandwidth;
      r.fixed = hbm + l2;
      r.coef = {{0, 1.0}, {1, l2}, {2 + index(t.gpu_class), hbm}};
      if (t.waves > 0) r.coef.push_back({wave_param, t.waves});
      add_harness(r, *group[i], harness, fit);
      rows.push_back(r);
    }
    rows.push_back(overhead_prior(0));
    return rows;
  };
  double best_share = kPriorL2Share, best_loss = INFINITY;
  std::vector<double> best_x;
  bool any_l2_best = false;
  for (int step = 0; step <= 12; ++step) {
    const double share = 0.30 + 0.05 * step;
    bool any_l2 = false;
    const auto rows = rows_for(share, any_l2);
    const auto x = solve_relative_l1(rows, params);
    const double loss = weighted_l1(rows, x);
    if (loss < best_loss - 1e-12) {
      best_loss = loss;
      best_share = share;
      best_x = x;
      any_l2_best = any_l2;
    }
  }
  FamilyFit& ff = fit.elementwise;
  ff.family = "elementwise";
  ff.overhead = best_x[0];
  ff.l2_efficiency = any_l2_best ? 1 / (1 + best_x[1]) : kPriorL2Efficiency;
  ff.l2_resident_share = any_l2_best ? best_share : kPriorL2Share;
  ff.wave_time = best_x[static_cast<std::size_t>(wave_param)];
  double log_sum = 0;
  for (int c = 0; c < nc; ++c) {
    const double e = 1 / (1 + best_x[static_cast<std::size_t>(2 + c)]);
    fit.memory_efficiency_by_class[classes[static_cast<std::size_t>(c)]] = e;
    log_sum += std::log(e);
  }
  ff.memory_efficiency = std::exp(log_sum / nc);
  ff.train_samples = group.size();
  ff.sources = sources_of(group);
  record_harness(harness, best_x, fit);
}

/// Weighted median of the gaps of (gap, weight) pairs (at least one pair; weights > 0).
double weighted_median(std::vector<std::pair<double, double>> gap_weight) {
  std::sort(gap_weight.begin(), gap_weight.end());
  double total = 0;
  for (const auto& gw : gap_weight) total += gw.second;
  double seen = 0;
  for (const auto& [gap, w] : gap_weight) {
    seen += w;
    if (seen >= total / 2) return gap;
  }
  return gap_weight.back().first;
}

/// HeldOutPredictions::harness for the held-out `source`'s harness-timed rows of the fitted
/// groups.
void own_harness_cost(const std::vector<FitSample>& samples, const std::string& source, const std::vector<Seconds>& kernel,
                      std::vector<Seconds>& harness) {
  std::vector<std::size_t> rows;
  std::vector<std::pair<double, double>> gap_weight;  // (measured - predicted, 1 / measured): relative L1
  for (std::size_t i = 0; i < samples.size(); ++i)
    if (samples[i].row->source == source && samples[i].row->harness_overhead && !fit_group(*samples[i].row).empty()) {
      rows.push_back(i);
      gap_weight.emplace_back(samples[i].row->measured - kernel[i], 1 / samples[i].row->measured);
    }
  if (rows.empty()) return;
  const double c = std::max(0.0, weighted_median(gap_weight));
  for (std::size_t i : rows) harness[i] = c;
}

}  // namespace

std::string fit_group(const KernelRow& row) {
  if (row.kernels.empty()) return "";
  const KernelDesc& k = row.kernels.front();
  if (std::holds_alternative<GemmDesc>(k)) return "gemm";
  if (std::holds_alternative<AttentionDesc>(k)) return "attention";
  if (std::holds_alternative<ElementwiseDesc>(k)) return "memory_bound";
  return "";
}

KernelCalibration PublicKernelFit::calibration_for(const std::string& gpu_class) const {
  KernelCalibration c;
  c.kernel_model = 2;
  c.basis = "public measurements";
  const auto it = memory_efficiency_by_class.find(gpu_class);
  const double memory = it != memory_efficiency_by_class.end()      ? it->second
                        : !elementwise.family.empty()               ? elementwise.memory_efficiency
                                                                    : kPriorMemoryEfficiency;
  for (FamilyFit f : families) {
    if (f.family.rfind("attention", 0) == 0) f.memory_efficiency = memory;
    c.fits.push_back(f);
  }
  if (!elementwise.family.empty()) {
    FamilyFit e = elementwise;
    e.memory_efficiency = memory;
    c.fits.push_back(e);
  }
  return c;
}

PublicKernelFit fit_public_kernels(const std::vector<FitSample>& samples) {
  std::map<std::string, std::vector<const FitSample*>> groups;
  for (const auto& s : samples) {
    const std::string g = fit_group(*s.row);
    if (!g.empty()) groups[g].push_back(&s);
  }
  PublicKernelFit fit;
  fit_gemm(groups["gemm"], fit);
  fit_attention(groups["attention"], fit);
  fit_memory_bound(groups["memory_bound"], fit);
  return fit;
}

Seconds predict_sample(const FitSample& s, const KernelCalibration* cal) {
  Seconds t = 0;
  for (const auto& k : s.row->kernels) t += predict_with_calibration(k, s.gpu, cal).time;
  return t;
}

Seconds PublicKernelFit::harness_cost(const KernelRow& row) const {
  if (!row.harness_overhead) return 0.0;
  const auto it = harness_overhead_by_source.find(row.source);
  return it == harness_overhead_by_source.end() ? 0.0 : it->second;
}

HeldOutPredictions leave_one_source_out(const std::vector<FitSample>& samples) {
  HeldOutPredictions held{std::vector<Seconds>(samples.size(), 0.0), std::vector<Seconds>(samples.size(), 0.0)};
  std::vector<Seconds>& out = held.kernel;
  std::set<std::string> sources;
  for (const auto& s : samples) sources.insert(s.row->source);
  for (const auto& source : sources) {
    std::vector<FitSample> train;
    for (const auto& s : samples)
      if (s.row->source != source) train.push_back(s);
    const PublicKernelFit fit = fit_public_kernels(train);
    std::map<std::string, KernelCalibration> by_class;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      if (samples[i].row->source != source) continue;
      const std::string& cls = samples[i].row->gpu_class;
      if (!by_class.count(cls)) by_class[cls] = fit.calibration_for(cls);
      out[i] = predict_sample(samples[i], &by_class[cls]);
    }
    own_harness_cost(samples, source, out, held.harness);
  }
  return held;
}

}  // namespace perfcast
