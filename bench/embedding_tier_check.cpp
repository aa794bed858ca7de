// FBGEMM table-batched embedding (TBE) times measured on one H100 against perfcast's
// spec-derived embedding predictor, for tables in host memory (fused_uvm) and in HBM.
//
// Data: data/public-measurements/embedding_kernel_times_h100.csv, rows of the
// "TorchRec/FBGEMM" implementation. The host-link efficiencies of
// predictors/spec_predictors.cpp (kHostGatherEfficiency, kHostUpdateEfficiency) were fitted
// on the rows of one source (recsys-examples dynamicemb benchmark_results.json, "fit") and
// are checked here on the other source's rows (the dynamicemb README table, "held-out").
// The "implied" column is the efficiency that would make a host-bound row exact.
//
// Usage: perfcast_embedding_tier_check [--data CSV] [--max-held-out-geomean F] [--json FILE]
// Exit 1 when the held-out geomean |error| of the host-memory rows exceeds F; 2 when the
// data file is missing. --json: the error summaries and every row (bench/accuracy_json.hpp).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench/accuracy_json.hpp"
#include "core/csv_record.hpp"
#include "core/error_stats.hpp"
#include "predictors/spec_predictors.hpp"
#include "topology/system_spec.hpp"

using namespace perfcast;

namespace {

struct Row {
  std::string source, placement, optimizer;
  double tables = 0, rows = 0, dim = 0, batch = 0, pooling = 1, alpha = 0, stated_unique = 0;
  double fwd_ms = 0, bwd_ms = 0;
  bool host = false, fit = false;
};

double number_after(const std::string& text, const std::string& key) {
  const std::regex re(key + R"(\s*=?\s*([0-9.]+))");
  std::smatch m;
  return std::regex_search(text, m, re) ? std::stod(m[1]) : 0.0;
}

std::vector<Row> read_rows(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  const auto header = split_csv_record(line);
  std::map<std::string, std::size_t> col;
  for (std::size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    const auto f = split_csv_record(line);
    if (f.size() < header.size() || f[col["implementation"]].rfind("TorchRec/FBGEMM", 0) != 0) continue;
    Row r;
    r.source = f[col["source"]];
    r.fit = r.source.find("benchmark_results.json") != std::string::npos;
    r.placement = f[col["placement"]];
    r.host = r.placement.find("UVM") != std::string::npos;
    if (!r.host && r.placement.find("full table in HBM") == std::string::npos) continue;
    r.optimizer = f[col["optimizer"]];
    r.tables = std::stod(f[col["num_tables"]]);
    r.rows = std::stod(f[col["rows_per_table"]]);
    r.dim = std::stod(f[col["embedding_dim"]]);
    r.batch = std::stod(f[col["batch_size"]]);
    const std::string hot = f[col["hotness_or_L"]];
    const double total = number_after(hot, "avg total lookups/iter");
    r.pooling = total > 0 ? total / (r.batch * r.tables) : std::stod(hot);
    r.stated_unique = number_after(hot, "avg unique");
    r.alpha = number_after(f[col["index_distribution"]], "pow-law[ -]?(?:alpha)?");
    if (r.alpha == 0) r.alpha = number_after(f[col["index_distribution"]], "alpha");
    r.fwd_ms = std::stod(f[col["fwd_ms"]]);
    r.bwd_ms = std::stod(f[col["bwd_ms"]]);
    rows.push_back(r);
  }
  return rows;
}

EmbeddingDesc desc_of(const Row& r, EmbeddingPass pass) {
  EmbeddingDesc d;
  d.batch = static_cast<std::int64_t>(r.batch);
  d.weight_dtype = DType::kFp32;
  d.pass = pass;
  d.optimizer = r.optimizer == "adam" ? EmbeddingOptimizer::kAdam : EmbeddingOptimizer::kSgd;
  for (int t = 0; t < static_cast<int>(r.tables); ++t) {
    EmbeddingTableDesc td;
    td.rows = static_cast<std::int64_t>(r.rows);
    td.dim = static_cast<std::int64_t>(r.dim);
    td.pooling = r.pooling;
    td.distribution = r.alpha > 0 ? IndexDistribution::zipf(r.alpha) : IndexDistribution::uniform();
    td.storage = r.host ? EmbeddingStorage::kHostUvm : EmbeddingStorage::kHbm;
    d.tables.push_back(td);
  }
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"FBGEMM embedding times on one H100 (host memory and HBM) against perfcast's predictor"};
  std::string data = std::string(PERFCAST_SOURCE_DIR) + "/data/public-measurements/embedding_kernel_times_h100.csv";
  double max_geomean = 0;
  std::string json_out;
  app.add_option("--data", data, "embedding_kernel_times_h100.csv");
  app.add_option("--max-held-out-geomean", max_geomean, "fail when the held-out host-memory geomean |error| exceeds this");
  app.add_option("--json", json_out, "write the error summaries and rows as JSON to FILE (- for standard output)");
  CLI11_PARSE(app, argc, argv);
  if (!std::ifstream(data)) {
    std::fprintf(stderr, "no data file %s\n", data.c_str());
    return 2;
  }
  const SystemSpec sys = load_system(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/h100_sxm.json");
  const auto rows = read_rows(data);
  std::map<std::string, std::vector<double>> errors;  // "host fit", "host held-out", "hbm ..."
  nlohmann::json row_values = nlohmann::json::array();
  std::printf("%-9s %-5s %3s %9s %8s %5s %-5s %4s %9s %9s %8s %7s %10s\n", "set", "where", "T", "rows", "batch", "L",
              "opt", "pass", "meas ms", "pred ms", "error", "implied", "unique");
  for (const auto& r : rows) {
    for (const auto pass : {EmbeddingPass::kForward, EmbeddingPass::kBackward}) {
      const EmbeddingDesc d = desc_of(r, pass);
      const Estimate e = predict_embedding(d, sys.gpu);
      const EmbeddingWork w = embedding_work(d, sys.gpu);
      const bool fwd = pass == EmbeddingPass::kForward;
      const double measured = (fwd ? r.fwd_ms : r.bwd_ms) * 1e-3;
      const double err = e.time / measured - 1;
      const std::string set = !r.host ? "-" : r.fit ? "fit" : "held-out";
      errors[r.host ? "host " + set : std::string("hbm (nothing fitted)")].push_back(err);
      row_values.push_back({{"set", set}, {"where", r.host ? "host" : "hbm"}, {"optimizer", r.optimizer},
                            {"pass", fwd ? "forward" : "backward"}, {"measured_s", measured}, {"predicted_s", e.time},
                            {"error", err}});
      std::string implied = "";
      if (r.host && w.host_overlapped > 0) {
        // The efficiency that would make this row exact: the link time scales as 1/efficiency.
        const double floor = e.launches * sys.gpu.efficiency.min_kernel_time;
        const double ratio = w.host_overlapped / std::max(1e-9, measured - floor);
        implied = fmt::format("x{:.3f}", ratio);
      }
      const std::string unique = r.stated_unique > 0 ? fmt::format("{:.0f}/{:.0f}", w.unique_rows, r.stated_unique) : "";
      std::printf("%-9s %-5s %3.0f %9.0f %8.0f %5.2f %-5s %4s %9.4f %9.4f %+7.1f%% %7s %10s\n", set.c_str(),
                  r.host ? "host" : "hbm", r.tables, r.rows, r.batch, r.pooling, r.optimizer.c_str(), fwd ? "fwd" : "bwd",
                  measured * 1e3, e.time * 1e3, 100 * err, implied.c_str(), unique.c_str());
    }
  }
  std::printf("\ngeomean |error| (rows):\n");
  for (const auto& [name, errs] : errors) {
    std::printf("  %-14s %6.2f%% (%zu)\n", name.c_str(), 100 * geomean_abs_error(errs), errs.size());
  }
  std::printf("implied: host-link efficiency that makes the row exact, as a multiple of the shipped one\n");
  std::printf("unique: perfcast's expected unique rows / the source's stated average (all tables)\n");
  bench::write_accuracy_json(json_out, "embedding_h100_fbgemm", errors, {{"rows", row_values}});
  const auto held = errors.find("host held-out");
  if (max_geomean > 0 && held != errors.end() && geomean_abs_error(held->second) > max_geomean) {
    std::fprintf(stderr, "held-out host-memory geomean %.2f%% exceeds %.2f%%\n", 100 * geomean_abs_error(held->second), 100 * max_geomean);
    return 1;
  }
  return 0;
}
