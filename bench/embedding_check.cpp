// The TBE (table-batched embedding) model against every public TBE timing perfcast keeps,
// per source, with the shipped coefficients, the coefficients fitted on all sources, and
// each source left out of the fit in turn (docs/embedding.md, "Leave one source out").
//
// Sources (each row names its file and line or trace step):
//  - hta: the TBE forward and backward ops of the HTA A100 DLRM trace, rank 3, steps
//    1009-1014 (data/hta-a100-dlrm-rank3), on configs/systems/hgx_a100_40gb.json;
//  - param: the TBE ops of PARAM's 8-rank V100 TorchRec trace (data/param-dlrm-v100-8rank),
//    on configs/systems/dgx1_v100.json;
//  - h100_fbgemm: FBGEMM's TBE on one H100 with the tables in HBM (recsys-examples dynamicemb
//    benchmark_results.json @ 43465ae, data/public-measurements/embedding_kernel_times_h100.csv),
//    on configs/systems/h100_sxm.json, the unique rows the source states;
//  - hopper_bis: FBGEMM's batch_index_select_dim0 (unpooled gather, fp16, gradient only) on an
//    H100 whose HBM the source states as 2.40 TB/s (TorchRec pull request 4688,
//    data/public-measurements/hopper-kernels/embedding.csv): h100_sxm.json at 2.40 TB/s;
//    forward rows and forward + backward rows (predicted as the sum of both).
//
// The fit (--fit): the forward's coefficients on the forward rows, then the backward's on
// the backward and forward + backward rows with the forward fixed (they share wave_time),
// each by a grid search minimising the mean over sources of each source's mean
// |log(predicted / measured)|. Exit 1 when --max-held-out-backward is given and a source's
// held-out backward geomean |error| exceeds it; 2 when a data file is missing.
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/csv_record.hpp"
#include "core/error_stats.hpp"
#include "model/traces/execution_trace.hpp"
#include "model/traces/kineto_trace.hpp"
#include "model/traces/trace_measurements.hpp"
#include "model/traces/trace_replay.hpp"
#include "predictors/embedding_predictor.hpp"
#include "topology/system_spec.hpp"

using namespace perfcast;

namespace {

enum class Pass { kForward, kBackward, kBoth };
const char* pass_name(Pass p) { return p == Pass::kForward ? "fwd" : p == Pass::kBackward ? "bwd" : "fwd+bwd"; }

struct Row {
  std::string source;  ///< hta, param, h100_fbgemm, hopper_bis
  std::string label;   ///< where the row comes from
  Pass pass = Pass::kForward;
  EmbeddingDesc desc;  ///< the forward's (kBoth: the backward is the same with pass kBackward)
  const GpuSpec* gpu = nullptr;
  Seconds measured = 0;
  EmbeddingWork fwd_work, bwd_work;  ///< computed once; the coefficients only enter tbe_time
};

std::string src(const std::string& rel) { return std::string(PERFCAST_SOURCE_DIR) + "/" + rel; }

Seconds predict(const Row& r, const TbeCoefficients& k) {
  Seconds t = 0;
  if (r.pass != Pass::kBackward) t += tbe_time(r.fwd_work, EmbeddingPass::kForward, *r.gpu, k).time;
  if (r.pass != Pass::kForward) t += tbe_time(r.bwd_work, EmbeddingPass::kBackward, *r.gpu, k).time;
  return t;
}

void compute_work(Row& r) {
  EmbeddingDesc d = r.desc;
  d.pass = EmbeddingPass::kForward;
  r.fwd_work = embedding_work(d, *r.gpu);
  d.pass = EmbeddingPass::kBackward;
  r.bwd_work = embedding_work(d, *r.gpu);
}

/// TBE forward and backward measurements of profiler traces (what `replay --measurements-out`
/// writes for them).
std::vector<Row> trace_rows(const std::string& source, const std::vector<std::string>& kineto, const std::vector<std::string>& et,
                            const GpuSpec& gpu) {
  std::vector<Row> rows;
  const auto traces = load_kineto_traces(kineto);
  std::vector<ExecutionTrace> ets;
  std::vector<const ExecutionTrace*> linked;
  if (!et.empty()) {
    ets = load_execution_traces(et);
    linked = link_execution_traces(ets, traces);
  }
  for (std::size_t i = 0; i < traces.size(); ++i) {
    for (const auto& m : trace_measurements(traces[i], replay_rank(traces, i), linked.empty() ? nullptr : linked[i], {})) {
      const auto* e = std::get_if<EmbeddingDesc>(&m.kernel);
      if (!e) continue;
      Row r;
      r.source = source;
      r.label = m.source.substr(m.source.find_last_of('/') + 1);
      r.pass = e->pass == EmbeddingPass::kForward ? Pass::kForward : Pass::kBackward;
      r.desc = *e;
      r.gpu = &gpu;
      r.measured = m.timing.median;
      rows.push_back(r);
    }
  }
  return rows;
}

double number_after(const std::string& text, const std::string& key) {
  const std::regex re(key + R"(\s*=?\s*([0-9.]+))");
  std::smatch m;
  return std::regex_search(text, m, re) ? std::stod(m[1]) : 0.0;
}

struct Csv {
  std::vector<std::string> header;
  std::vector<std::pair<int, std::vector<std::string>>> records;  ///< (line, fields)
  [[nodiscard]] std::size_t col(const std::string& name) const {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return i;
    throw std::runtime_error("no column " + name);
  }
};

Csv read_csv(const std::string& path) {
  std::ifstream in(path);
  Csv c;
  std::string line;
  std::getline(in, line);
  c.header = split_csv_record(line);
  int n = 1;
  while (std::getline(in, line)) {
    ++n;
    auto f = split_csv_record(line);
    if (f.size() >= c.header.size()) c.records.emplace_back(n, std::move(f));
  }
  return c;
}

/// FBGEMM's TBE rows with the tables in HBM: equal tables, the source's average unique rows
/// per iteration (its "avg unique"), as a hot set that reproduces that count.
std::vector<Row> h100_fbgemm_rows(const std::string& path, const GpuSpec& gpu) {
  std::vector<Row> rows;
  const Csv c = read_csv(path);
  for (const auto& [line, f] : c.records) {
    if (f[c.col("implementation")].rfind("TorchRec/FBGEMM", 0) != 0) continue;
    if (f[c.col("placement")].find("full table in HBM") == std::string::npos) continue;
    const double tables = std::stod(f[c.col("num_tables")]), rows_per = std::stod(f[c.col("rows_per_table")]);
    const double batch = std::stod(f[c.col("batch_size")]);
    const std::string hot = f[c.col("hotness_or_L")];
    const double total = number_after(hot, "avg total lookups/iter");
    const double alpha = number_after(f[c.col("index_distribution")], "alpha");
    EmbeddingDesc d;
    d.batch = static_cast<std::int64_t>(batch);
    d.optimizer = embedding_optimizer_from_name(f[c.col("optimizer")]);
    EmbeddingTableDesc t;
    t.rows = static_cast<std::int64_t>(rows_per);
    t.dim = std::stoll(f[c.col("embedding_dim")]);
    t.pooling = total / (batch * tables);
    t.distribution = IndexDistribution::zipf(alpha);
    d.tables.assign(static_cast<std::size_t>(tables), t);
    for (const Pass p : {Pass::kForward, Pass::kBackward}) {
      Row r;
      r.source = "h100_fbgemm";
      r.label = fmt::format("embedding_kernel_times_h100.csv line {} {}", line, f[c.col("optimizer")]);
      r.pass = p;
      r.desc = d;
      r.gpu = &gpu;
      r.measured = std::stod(f[c.col(p == Pass::kForward ? "fwd_ms" : "bwd_ms")]) * 1e-3;
      rows.push_back(r);
    }
  }
  return rows;
}

/// FBGEMM's batch_index_select_dim0 rows: T tables of the mean of the stated row range, one
/// index per sample (B per table), fp16 rows and outputs, the mean dimension from the stated
/// useful bytes (T x B x D x 2 B, read and written; twice for forward + backward), uniform
/// indices (the source states none).
std::vector<Row> hopper_rows(const std::string& path, const GpuSpec& gpu) {
  std::vector<Row> rows;
  const Csv c = read_csv(path);
  for (const auto& [line, f] : c.records) {
    if (f[c.col("implementation")].rfind("FBGEMM", 0) != 0) continue;
    const std::string dir = f[c.col("direction")];
    const double tables = std::stod(f[c.col("num_tables")]), batch = std::stod(f[c.col("batch_size")]);
    const std::string range = f[c.col("rows_per_table")];
    const auto dash = range.find('-');
    const double rows_mean =
        dash == std::string::npos ? std::stod(range) : (std::stod(range.substr(0, dash)) + std::stod(range.substr(dash + 1))) / 2;
    const double flows = dir == "fwd" ? 1 : 2;
    const double dim = std::stod(f[c.col("bytes_moved")]) / (tables * batch * 2 * 2 * flows);
    EmbeddingDesc d;
    d.batch = static_cast<std::int64_t>(batch);
    d.weight_dtype = DType::kFp16;
    d.output_dtype = DType::kFp16;
    d.optimizer = EmbeddingOptimizer::kNone;
    EmbeddingTableDesc t;
    t.rows = static_cast<std::int64_t>(rows_mean);
    t.dim = std::max<std::int64_t>(1, std::llround(dim));
    t.pooling = 1;
    t.sequence = true;
    d.tables.assign(static_cast<std::size_t>(tables), t);
    Row r;
    r.source = "hopper_bis";
    r.label = fmt::format("hopper-kernels/embedding.csv {} ({})", f[c.col("row_id")], dir);
    r.pass = dir == "fwd" ? Pass::kForward : Pass::kBoth;
    r.desc = d;
    r.gpu = &gpu;
    r.measured = std::stod(f[c.col("time_us")]) * 1e-6;
    rows.push_back(r);
  }
  return rows;
}

const std::vector<std::string> kSources = {"hta", "param", "h100_fbgemm", "hopper_bis"};

/// Mean over `sources` of each source's mean |log(pred / measured)| over its rows of `passes`.
double loss(const std::vector<Row>& rows, const std::vector<std::string>& sources, const std::vector<Pass>& passes,
            const TbeCoefficients& k) {
  double total = 0;
  int n = 0;
  for (const auto& s : sources) {
    double sum = 0;
    int m = 0;
    for (const auto& r : rows) {
      if (r.source != s || std::find(passes.begin(), passes.end(), r.pass) == passes.end()) continue;
      sum += std::fabs(std::log(predict(r, k) / r.measured));
      ++m;
    }
    if (m == 0) continue;
    total += sum / m;
    ++n;
  }
  return n ? total / n : 0;
}

TbeCoefficients fit(const std::vector<Row>& rows, const std::vector<std::string>& sources) {
  const std::array<double, 5> norms = {2, 3, 4, 6, 1000};
  TbeCoefficients best = kTbeFitted;
  double best_loss = 1e300;
  for (double p : norms)
    for (double c = 0; c <= 512; c += 64)
      for (double wave = 1.6e-6; wave <= 2.15e-6; wave += 0.1e-6)
        for (double row : {0.3e-6, 0.5e-6, 0.7e-6, 0.9e-6}) {
          TbeCoefficients k = best;
          k.forward_norm = p;
          k.forward_row_cost = c;
          k.wave_time = wave;
          k.row_time = row;
          const double l = loss(rows, sources, {Pass::kForward}, k);
          if (l < best_loss) best_loss = l, best = k;
        }
  best_loss = 1e300;
  const TbeCoefficients fwd = best;
  for (double warps : {28.0, 32.0, 36.0, 40.0, 45.0})
    for (double p : norms)
      for (double c = 128; c <= 512; c += 32)
        for (double sub = 5e-6; sub <= 11.05e-6; sub += 1e-6) {
          TbeCoefficients k = fwd;
          k.backward_warps_per_sm = warps;
          k.backward_norm = p;
          k.backward_row_cost = c;
          k.subkernel_time = sub;
          const double l = loss(rows, sources, {Pass::kBackward, Pass::kBoth}, k);
          if (l < best_loss) best_loss = l, best = k;
        }
  return best;
}

std::string describe(const TbeCoefficients& k) {
  return fmt::format("forward: norm {:g}, row cost {:g} B, wave {:.2f} us, row {:.2f} us; backward: {:g} warps/SM, norm {:g}, "
                     "row cost {:g} B, sub-kernel {:.1f} us",
                     k.forward_norm, k.forward_row_cost, k.wave_time * 1e6, k.row_time * 1e6, k.backward_warps_per_sm,
                     k.backward_norm, k.backward_row_cost, k.subkernel_time * 1e6);
}

struct Summary {
  double geomean = 0, mean = 0, bias = 0, max = 0;
  std::size_t n = 0;
};

Summary summarize(const std::vector<Row>& rows, const std::string& source, Pass pass, const TbeCoefficients& k) {
  std::vector<double> errs;
  for (const auto& r : rows)
    if (r.source == source && r.pass == pass) errs.push_back(predict(r, k) / r.measured - 1);
  Summary s;
  s.n = errs.size();
  if (errs.empty()) return s;
  s.geomean = geomean_abs_error(errs);
  for (double e : errs) {
    s.mean += std::fabs(e) / errs.size();
    s.bias += e / errs.size();
    s.max = std::max(s.max, std::fabs(e));
  }
  return s;
}

void print_summary(const std::vector<Row>& rows, const std::string& source, const TbeCoefficients& k, const char* what) {
  for (const Pass p : {Pass::kForward, Pass::kBackward, Pass::kBoth}) {
    const Summary s = summarize(rows, source, p, k);
    if (s.n == 0) continue;
    std::printf("  %-12s %-8s %-10s %3zu rows  geomean %6.1f%%  mean %6.1f%%  bias %+6.1f%%  max %6.1f%%\n", source.c_str(),
                pass_name(p), what, s.n, 100 * s.geomean, 100 * s.mean, 100 * s.bias, 100 * s.max);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"TBE forward and backward times of four public sources against perfcast's embedding model"};
  bool do_fit = false, rows_out = false;
  double max_heldout_backward = 0;
  app.add_flag("--fit", do_fit, "fit the coefficients on all sources and on each leave-one-source-out split");
  app.add_flag("--rows", rows_out, "print every row with the shipped coefficients");
  app.add_option("--max-held-out-backward", max_heldout_backward,
                 "with --fit: fail when a source's held-out backward (or forward + backward) geomean |error| exceeds this");
  CLI11_PARSE(app, argc, argv);
  for (const char* f : {"data/hta-a100-dlrm-rank3/control.json.gz", "data/param-dlrm-v100-8rank/dlrm_kineto.tar.gz",
                        "data/public-measurements/embedding_kernel_times_h100.csv", "data/public-measurements/hopper-kernels/embedding.csv"}) {
    if (!std::ifstream(src(f))) {
      std::fprintf(stderr, "no data file %s\n", src(f).c_str());
      return 2;
    }
  }
  const GpuSpec a100 = load_system(src("configs/systems/hgx_a100_40gb.json")).gpu;
  const GpuSpec v100 = load_system(src("configs/systems/dgx1_v100.json")).gpu;
  const GpuSpec h100 = load_system(src("configs/systems/h100_sxm.json")).gpu;
  GpuSpec h100_slow = h100;
  h100_slow.memory_bandwidth = 2.40e12;  // the source's stated HBM peak
  std::vector<Row> rows = trace_rows("hta", {src("data/hta-a100-dlrm-rank3/control.json.gz")}, {}, a100);
  for (auto& r : trace_rows("param", {src("data/param-dlrm-v100-8rank/dlrm_kineto.tar.gz")},
                            {src("data/param-dlrm-v100-8rank/dlrm_pytorch_et.tar.gz")}, v100))
    rows.push_back(r);
  for (auto& r : h100_fbgemm_rows(src("data/public-measurements/embedding_kernel_times_h100.csv"), h100)) rows.push_back(r);
  for (auto& r : hopper_rows(src("data/public-measurements/hopper-kernels/embedding.csv"), h100_slow)) rows.push_back(r);
  for (auto& r : rows) compute_work(r);

  if (rows_out) {
    std::printf("%-12s %-8s %-60s %10s %10s %8s\n", "source", "pass", "row", "meas us", "pred us", "error");
    for (const auto& r : rows) {
      const double p = predict(r, kTbeFitted);
      std::printf("%-12s %-8s %-60s %10.1f %10.1f %+7.1f%%\n", r.source.c_str(), pass_name(r.pass), r.label.c_str(),
                  r.measured * 1e6, p * 1e6, 100 * (p / r.measured - 1));
    }
    std::printf("\n");
  }
  std::printf("shipped coefficients (kTbeFitted): %s\n", describe(kTbeFitted).c_str());
  for (const auto& s : kSources) print_summary(rows, s, kTbeFitted, "shipped");
  if (!do_fit) return 0;
  const TbeCoefficients all = fit(rows, kSources);
  std::printf("\nfitted on all sources: %s\n", describe(all).c_str());
  for (const auto& s : kSources) print_summary(rows, s, all, "fit");
  std::printf("\nleave one source out (fitted on the other three, error on the one left out):\n");
  int failed = 0;
  for (const auto& s : kSources) {
    std::vector<std::string> others;
    for (const auto& o : kSources)
      if (o != s) others.push_back(o);
    const TbeCoefficients k = fit(rows, others);
    std::printf(" without %s: %s\n", s.c_str(), describe(k).c_str());
    print_summary(rows, s, k, "held out");
    for (const Pass p : {Pass::kBackward, Pass::kBoth}) {
      const Summary sum = summarize(rows, s, p, k);
      if (max_heldout_backward > 0 && sum.n > 0 && sum.geomean > max_heldout_backward) ++failed;
    }
  }
  if (failed) {
    std::fprintf(stderr, "%d held-out backward geomean(s) above %.1f%%\n", failed, 100 * max_heldout_backward);
    return 1;
  }
  return 0;
}
