// perfcast index-stats: embedding-lookup index statistics from raw index data (the layout
// of the public DLRM datasets), from Meta's locality stats, or from a stats file of ours.

#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "core/limits.hpp"
#include "model/commands/command_context.hpp"
#include "cli/output_file.hpp"
#include "predictors/index_data.hpp"
#include "predictors/index_stats_file.hpp"
#include "core/json_reader.hpp"
#include "topology/system_spec.hpp"
#include "core/json_text.hpp"

namespace perfcast::cli {
namespace {

struct IndexStatsArgs {
  std::string indices, offsets, lengths, locality, stats;
  int tables = 0;
  std::int64_t batch = 0;
  std::vector<std::int64_t> rows;
  std::string dtype = "int64";
  std::int64_t dim = 0;
  std::string weight_dtype = "fp32";
  std::string system;
  std::string json;
  bool as_distribution = false;
  bool histogram = false;
};

}  // namespace

Action add_index_stats(CLI::App& app) {
  auto* cmd = app.add_subcommand("index-stats",
                                 "Embedding index statistics (unique rows, reuse histogram, pooling, working set vs L2, "
                                 "fitted distribution) from raw index/offset arrays, Meta locality stats or a stats file");
  auto a = std::make_shared<IndexStatsArgs>();
  auto* indices = cmd->add_option("--indices", a->indices, "raw little-endian index array (all tables, table-major per batch)");
  auto* offsets = cmd->add_option("--offsets", a->offsets, "raw CSR offsets: T*B+1 (or T*B bag starts) per batch");
  auto* lengths = cmd->add_option("--lengths", a->lengths, "raw bag lengths: T*B per batch");
  auto* locality = cmd->add_option("--locality", a->locality, "Meta dlrm_datasets locality_stats.txt");
  auto* stats = cmd->add_option("--stats", a->stats, "per-table stats file of ours (.json as --json writes, or .csv)");
  cmd->add_option("--tables", a->tables, "tables T in the index data")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--batch", a->batch, "bags per table per batch B")->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40));
  cmd->add_option("--rows", a->rows, "rows per table: one value for all or one per table (bounds check, Zipf fit)");
  cmd->add_option("--dtype", a->dtype, "element type of the index and offset files")->check(CLI::IsMember({"int32", "int64"}));
  cmd->add_option("--dim", a->dim, "embedding dimension, for the working set")->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 20));
  cmd->add_option("--weight-dtype", a->weight_dtype, "weight element type, for the working set")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "int8"}));
  cmd->add_option("--system", a->system, "system or GPU file: the working set is compared with its L2");
  cmd->add_option("--json", a->json, "write the result as JSON to FILE, or - for standard output");
  cmd->add_flag("--as-distribution", a->as_distribution,
                "with --json: write the per-table \"distribution\" objects a workload table accepts");
  cmd->add_flag("--histogram", a->histogram, "distributions as the measured reuse histogram instead of the fitted Zipf");
  offsets->excludes(lengths);
  indices->excludes(locality)->excludes(stats);
  locality->excludes(stats);
  return [a, indices, offsets, lengths, locality, stats]() {
    IndexStatsOptions opt;
    opt.rows = a->rows;
    for (const auto r : opt.rows)  // checked here for every mode (the Zipf fit loops over rows)
      if (r < 1 || r > limits::kMaxRows)
        throw ConfigError("--rows", "", fmt::format("rows must be in [1, {}] (core/limits.hpp), got {}", limits::kMaxRows, r));
    opt.dim = a->dim;
    opt.row_element_bytes = a->weight_dtype == "fp32" ? 4 : a->weight_dtype == "int8" ? 1 : 2;
    if (!a->system.empty()) opt.l2_cache = load_system(a->system).gpu.l2_cache;

    std::vector<TableIndexSummary> tables;
    std::vector<TableBatchStats> per_batch;
    if (*indices) {
      if (!*offsets && !*lengths) throw ConfigError("--indices", "", "needs --offsets FILE or --lengths FILE");
      if (a->tables < 1 || a->batch < 1) throw ConfigError("--indices", "", "needs --tables T and --batch B");
      const IndexDType dt = a->dtype == "int32" ? IndexDType::kInt32 : IndexDType::kInt64;
      IndexData d;
      d.tables = a->tables;
      d.batch = a->batch;
      d.indices_file = a->indices;
      d.indices = read_index_array(a->indices, dt);
      d.encoding = *offsets ? BagEncoding::kOffsets : BagEncoding::kLengths;
      d.bags_file = *offsets ? a->offsets : a->lengths;
      d.bags = read_index_array(d.bags_file, dt);
      per_batch = compute_index_stats(d, opt);
      tables = summarize_index_stats(per_batch, opt);
    } else if (*locality) {
      for (const auto& b : read_locality_stats(a->locality)) {
        TableIndexSummary s = locality_summary(b, tables_from_dataset_name(b.dataset));
        s.table = static_cast<int>(tables.size());
        s.dim = opt.dim;
        complete_summary(s, opt);  // working set; no Zipf fit: the blocks cover all tables at once
        tables.push_back(s);
      }
    } else if (*stats) {
      tables = read_index_stats_file(a->stats, opt);
    } else {
      throw ConfigError("index-stats", "", "give --indices with --offsets or --lengths, or --locality FILE, or --stats FILE");
    }
    if (a->as_distribution && a->json.empty()) throw ConfigError("--as-distribution", "", "needs --json FILE or --json -");

    std::vector<std::pair<std::string, std::string>> outputs;
    if (!a->json.empty()) {
      nlohmann::json j = a->as_distribution ? distributions_to_json(tables, a->histogram)
                                            : index_stats_to_json(tables, per_batch, opt.l2_cache);
      // The distributions are pasted into workload files as they are; the stats file gets
      // its provenance.
      if (!a->as_distribution && j.is_object()) {
        std::vector<std::string> inputs;
        for (const std::string* f : {&a->indices, &a->offsets, &a->lengths, &a->locality, &a->stats, &a->system})
          if (!f->empty()) inputs.push_back(*f);
        j["context"] = command_context("index-stats", inputs);
      }
      outputs.emplace_back(a->json, json_text(j, 2) + "\n");
    }
    const std::string text = render_index_stats_text(tables, opt.l2_cache);
    write_outputs(outputs);
    if (a->json != "-") std::cout << text;
    return 0;
  };
}

}  // namespace perfcast::cli
