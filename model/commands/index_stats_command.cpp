#include "model/commands/index_stats_command.hpp"

#include <fmt/format.h>

#include "core/json_reader.hpp"
#include "core/json_text.hpp"
#include "core/limits.hpp"
#include "model/commands/command_context.hpp"
#include "predictors/index_data.hpp"
#include "predictors/index_stats_file.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {
namespace {

/// Refuses what the command line refuses before running: one source, known element types.
void check_request(const IndexStatsRequest& r) {
  const int sources = int(!r.indices.empty()) + int(!r.locality.empty()) + int(!r.stats.empty());
  if (sources != 1)
    throw ConfigError("index-stats", "", "give exactly one of --indices (with --offsets or --lengths), --locality FILE, --stats FILE");
  if (!r.offsets.empty() && !r.lengths.empty()) throw ConfigError("--offsets", "", "give --offsets or --lengths, not both");
  if (r.dtype != "int32" && r.dtype != "int64") throw ConfigError("--dtype", r.dtype, "expected int32 or int64");
  if (r.weight_dtype != "fp32" && r.weight_dtype != "fp16" && r.weight_dtype != "bf16" && r.weight_dtype != "int8")
    throw ConfigError("--weight-dtype", r.weight_dtype, "expected fp32, fp16, bf16 or int8");
  if (r.tables < 0 || r.tables > (1 << 20)) throw ConfigError("--tables", std::to_string(r.tables), "expected [1, 2^20]");
  if (r.batch < 0 || r.batch > (std::int64_t{1} << 40)) throw ConfigError("--batch", std::to_string(r.batch), "expected [1, 2^40]");
  if (r.dim < 0 || r.dim > (1 << 20)) throw ConfigError("--dim", std::to_string(r.dim), "expected [0, 2^20]");
  for (const auto rows : r.rows)  // the Zipf fit loops over rows
    if (rows < 1 || rows > limits::kMaxRows)
      throw ConfigError("--rows", "", fmt::format("rows must be in [1, {}] (core/limits.hpp), got {}", limits::kMaxRows, rows));
}

}  // namespace

IndexStatsOutcome run_index_stats(const IndexStatsRequest& a) {
  check_request(a);
  IndexStatsOptions opt;
  opt.rows = a.rows;
  opt.dim = a.dim;
  opt.row_element_bytes = a.weight_dtype == "fp32" ? 4 : a.weight_dtype == "int8" ? 1 : 2;
  if (!a.system.empty()) opt.l2_cache = load_system(a.system).gpu.l2_cache;

  std::vector<TableIndexSummary> tables;
  std::vector<TableBatchStats> per_batch;
  if (!a.indices.empty()) {
    if (a.offsets.empty() && a.lengths.empty()) throw ConfigError("--indices", "", "needs --offsets FILE or --lengths FILE");
    if (a.tables < 1 || a.batch < 1) throw ConfigError("--indices", "", "needs --tables T and --batch B");
    const IndexDType dt = a.dtype == "int32" ? IndexDType::kInt32 : IndexDType::kInt64;
    IndexData d;
    d.tables = a.tables;
    d.batch = a.batch;
    d.indices_file = a.indices;
    d.indices = read_index_array(a.indices, dt);
    d.encoding = !a.offsets.empty() ? BagEncoding::kOffsets : BagEncoding::kLengths;
    d.bags_file = !a.offsets.empty() ? a.offsets : a.lengths;
    d.bags = read_index_array(d.bags_file, dt);
    per_batch = compute_index_stats(d, opt);
    tables = summarize_index_stats(per_batch, opt);
  } else if (!a.locality.empty()) {
    for (const auto& b : read_locality_stats(a.locality)) {
      TableIndexSummary s = locality_summary(b, tables_from_dataset_name(b.dataset));
      s.table = static_cast<int>(tables.size());
      s.dim = opt.dim;
      complete_summary(s, opt);  // working set; no Zipf fit: the blocks cover all tables at once
      tables.push_back(s);
    }
  } else {
    tables = read_index_stats_file(a.stats, opt);
  }

  IndexStatsOutcome out;
  nlohmann::json j = a.as_distribution ? distributions_to_json(tables, a.histogram) : index_stats_to_json(tables, per_batch, opt.l2_cache);
  // The distributions are pasted into workload files as they are; the stats file gets its provenance.
  if (!a.as_distribution && j.is_object()) {
    std::vector<std::string> inputs;
    for (const std::string* f : {&a.indices, &a.offsets, &a.lengths, &a.locality, &a.stats, &a.system})
      if (!f->empty()) inputs.push_back(*f);
    j["context"] = command_context("index-stats", inputs);
  }
  out.json = json_text(j, 2) + "\n";
  out.text = render_index_stats_text(tables, opt.l2_cache);
  return out;
}

}  // namespace perfcast
