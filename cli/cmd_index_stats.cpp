// perfcast index-stats: embedding-lookup index statistics from raw index data (the layout
// of the public DLRM datasets), from Meta's locality stats, or from a stats file of ours.

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "core/output_files.hpp"
#include "core/json_reader.hpp"
#include "model/commands/index_stats_command.hpp"

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
  return [a]() {
    if (a->as_distribution && a->json.empty()) throw ConfigError("--as-distribution", "", "needs --json FILE or --json -");
    IndexStatsRequest req;
    req.indices = a->indices;
    req.offsets = a->offsets;
    req.lengths = a->lengths;
    req.locality = a->locality;
    req.stats = a->stats;
    req.tables = a->tables;
    req.batch = a->batch;
    req.rows = a->rows;
    req.dtype = a->dtype;
    req.dim = a->dim;
    req.weight_dtype = a->weight_dtype;
    req.system = a->system;
    req.as_distribution = a->as_distribution;
    req.histogram = a->histogram;
    const IndexStatsOutcome r = run_index_stats(req);
    std::vector<std::pair<std::string, std::string>> outputs;
    if (!a->json.empty()) outputs.emplace_back(a->json, r.json);
    write_outputs(outputs);
    if (a->json != "-") std::cout << r.text;
    return 0;
  };
}

}  // namespace perfcast::cli
