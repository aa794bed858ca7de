#include "model/graph/workload_spec.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

namespace perfcast {

std::string_view fusion_name(Fusion f) {
  switch (f) {
    case Fusion::kNone: return "none";
    case Fusion::kPointwise: return "pointwise";
    case Fusion::kEpilogue: return "gemm_epilogue";
  }
  return "none";
}

namespace {

constexpr std::int64_t kMaxDim = 1 << 20;
constexpr std::int64_t kMaxRows = std::int64_t{1} << 40;

std::vector<std::int64_t> parse_widths(const JsonObject& o, std::string_view key, std::size_t min_size) {
  const JsonArray a = o.array(key);
  a.require_size(min_size, 256);
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(a[i].as_integer(1, kMaxDim));
  return out;
}

DType parse_dtype(const JsonObject& o, std::string_view key, const std::vector<std::string>& allowed, DType def) {
  const std::string s = o.enum_or(key, allowed, std::string(dtype_name(def)));
  return *dtype_from_name(s);
}

}  // namespace

std::size_t DlrmSpec::sequence_tables() const {
  return static_cast<std::size_t>(std::count_if(tables.begin(), tables.end(), [](const EmbeddingTableSpec& t) { return t.sequence; }));
}

std::int64_t DlrmSpec::interaction_width() const {
  const std::int64_t d = bottom_mlp.back();
  const auto t = static_cast<std::int64_t>(tables.size());
  if (interaction == Interaction::kDot) return d + (t + 1) * t / 2;  // dense + strictly lower triangle
  std::int64_t w = d;  // cat and dcn_v2: the concatenation (DCN keeps its width)
  for (const auto& tb : tables) w += tb.dim;
  return w;
}

double DlrmSpec::bottom_parameters() const {
  double p = 0;
  for (std::size_t i = 1; i < bottom_mlp.size(); ++i) p += double(bottom_mlp[i - 1]) * bottom_mlp[i] + bottom_mlp[i];
  return p;
}

double DlrmSpec::dense_parameters() const {
  double p = 0;
  for (std::size_t i = 1; i < bottom_mlp.size(); ++i) p += double(bottom_mlp[i - 1]) * bottom_mlp[i] + bottom_mlp[i];
  double in = static_cast<double>(interaction_width());
  // DCNv2: per cross layer V (width x r, no bias), W (r x width) and its bias (width).
  if (interaction == Interaction::kDcnV2) p += dcn_layers * (2.0 * in * double(dcn_rank) + in);
  for (auto w : top_mlp) {
    p += in * w + w;
    in = static_cast<double>(w);
  }
  return p;
}

IndexDistribution parse_index_distribution(const JsonObject& o) {
  const std::string kind = o.at("kind").as_enum({"uniform", "zipf", "hot_set", "reuse_histogram"});
  IndexDistribution d;
  if (kind == "zipf") {
    d = IndexDistribution::zipf(o.at("alpha").as_number_in(0.01, 10.0));
  } else if (kind == "hot_set") {
    const double rows = o.at("hot_rows").as_number_in(1e-9, 1.0);
    const double acc = o.at("hot_accesses").as_number_in(0.0, 1.0);
    if (rows >= 1.0) o.fail("hot_rows", "must be below 1 (a share of the rows)");
    d = IndexDistribution::hot_set(rows, acc);
  } else if (kind == "reuse_histogram") {
    const JsonArray a = o.array("shares");
    a.require_size(kReuseBins, kReuseBins);
    ReuseHistogram h{};
    double sum = 0;
    for (std::size_t i = 0; i < kReuseBins; ++i) {
      h[i] = a[i].as_number_in(0.0, 1.0);
      sum += h[i];
    }
    if (std::fabs(sum - 1.0) > 0.01) a.fail(fmt::format("shares must sum to 1 (they sum to {:.4f})", sum));
    d = IndexDistribution::histogram(h);
  }
  o.finish();
  return d;
}

DlrmSpec parse_workload(const JsonDocument& doc) {
  const JsonObject root(doc);
  root.require_schema("perfcast.workload", 1);
  DlrmSpec w;
  w.file = doc.file;
  w.name = root.string("name");
  if (root.at("model").as_enum({"dlrm", "transformer"}) == "transformer") {
    throw ConfigError(doc.file, "/model", "a transformer workload where a DLRM is expected (perfcast shard and the "
                                          "sharding tools handle DLRM workloads only)");
  }
  w.batch_size = root.integer("batch_size", 1, std::int64_t{1} << 31);
  w.bottom_mlp = parse_widths(root, "bottom_mlp", 2);
  w.top_mlp = parse_widths(root, "top_mlp", 1);
  const std::string interaction = root.enum_or("interaction", {"dot", "cat", "dcn_v2"}, "dot");
  w.interaction = interaction == "dot" ? Interaction::kDot : interaction == "cat" ? Interaction::kCat : Interaction::kDcnV2;
  if (w.interaction == Interaction::kDcnV2) {
    const JsonObject dcn = root.object("dcn");
    w.dcn_layers = static_cast<int>(dcn.integer("layers", 1, 64));
    w.dcn_rank = dcn.integer("rank", 1, 1 << 20);
    dcn.finish();
  } else if (root.find("dcn")) {
    root.fail("dcn", "\"dcn\" (cross layers) applies to \"interaction\": \"dcn_v2\" only");
  }
  w.mlp_dtype = parse_dtype(root, "mlp_dtype", {"fp32", "tf32", "bf16", "fp16"}, DType::kFp32);
  const std::string dense_opt = root.enum_or("dense_optimizer", {"sgd", "adam", "adagrad"}, "sgd");
  w.dense_optimizer = dense_opt == "sgd" ? DenseOptimizer::kSgd : dense_opt == "adam" ? DenseOptimizer::kAdam : DenseOptimizer::kAdagrad;
  w.gradient_bucket = root.quantity_or("gradient_bucket", Dimension::kBytes, w.gradient_bucket);
  if (w.gradient_bucket <= 0) root.fail("gradient_bucket", "must be positive");
  w.first_bucket = root.quantity_or("first_bucket", Dimension::kBytes, w.first_bucket);
  w.sync_each_iteration = root.bool_or("sync_each_iteration", true);
  w.bottom_mlp_rank = static_cast<int>(root.integer_or("bottom_mlp_rank", 0, 1 << 20, -1));
  if (auto pipe = root.find("pipeline")) {
    const std::string p = pipe->as_enum({"none", "sparse_dist", "semi_sync"});
    w.pipeline = p == "sparse_dist" ? TrainPipeline::kSparseDist : p == "semi_sync" ? TrainPipeline::kSemiSync : TrainPipeline::kNone;
  }

  const JsonObject emb = root.object("embedding");
  w.embedding_dtype = parse_dtype(emb, "dtype", {"fp32", "fp16", "bf16"}, DType::kFp32);
  w.index_bytes = emb.enum_or("index_dtype", {"int64", "int32"}, "int64") == "int64" ? 8 : 4;
  w.embedding_optimizer = embedding_optimizer_from_name(emb.enum_or("optimizer", {"sgd", "rowwise_adagrad", "adam", "adagrad"}, "sgd"));
  const JsonArray tables = emb.array("tables");
  tables.require_size(1, 100000);
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const JsonObject t = tables[i].as_object();
    EmbeddingTableSpec spec;
    spec.name = t.string("name");
    spec.rows = t.integer("rows", 1, kMaxRows);
    spec.dim = t.integer("dim", 1, kMaxDim);
    spec.pooling = t.at("pooling").as_number_in(0.0, 1e6);
    spec.distribution = parse_index_distribution(t.object("distribution"));
    spec.sequence = t.bool_or("sequence", false);
    const auto repeat = t.integer_or("repeat", 1, 100000, 1);
    t.finish();
    if (repeat == 1) {
      w.tables.push_back(spec);
    } else {
      for (std::int64_t r = 0; r < repeat; ++r) {
        EmbeddingTableSpec copy = spec;
        copy.name = fmt::format("{}_{}", spec.name, r);
        w.tables.push_back(copy);
      }
    }
  }
  emb.finish();
  root.finish();

  if (w.interaction == Interaction::kDot) {
    for (std::size_t i = 0; i < w.tables.size(); ++i) {
      if (w.tables[i].dim != w.bottom_mlp.back()) {
        throw ConfigError(doc.file, "/embedding/tables",
                          fmt::format("dot interaction needs every table's dim to equal the bottom MLP's output "
                                      "width {}; table \"{}\" has dim {}",
                                      w.bottom_mlp.back(), w.tables[i].name, w.tables[i].dim));
      }
    }
  }
  if (w.top_mlp.back() != 1) {
    throw ConfigError(doc.file, "/top_mlp", fmt::format("the last top MLP layer must have width 1 (the click logit), got {}", w.top_mlp.back()));
  }
  return w;
}

DlrmSpec load_workload(const std::filesystem::path& path) { return parse_workload(load_json_file(path)); }

}  // namespace perfcast
