#include "predictors/kernel_rows.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <regex>

#include <fmt/format.h>

#include "core/csv_record.hpp"
#include "core/input_file.hpp"
#include "core/json_reader.hpp"
#include "core/limits.hpp"
#include "predictors/measurement.hpp"

namespace perfcast {
namespace {

/// Longest attention sequence a row may have (its mask is counted block by block), and the most
/// tables of an embedding row.
constexpr double kMaxSequence = double(1LL << 24);
constexpr double kMaxTables = 100000;

bool contains(const std::string& text, std::string_view what) { return text.find(what) != std::string::npos; }

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// A number that is the whole (trimmed) field, or nullopt ("1024-4096", "mixed", "").
std::optional<double> number_of(const std::string& field) {
  const std::string t = trim_blanks(field);
  if (t.empty()) return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

/// One table's header and the row being read, with the row's place for error messages.
struct CsvTable {
  std::string file;
  std::map<std::string, std::size_t> columns;
  std::vector<std::string> fields;
  std::size_t line = 0;
  std::string row_id;

  [[nodiscard]] bool has(const std::string& column) const { return columns.count(column) > 0; }
  [[nodiscard]] std::string where() const {
    return row_id.empty() ? fmt::format("line {}", line) : fmt::format("line {} ({})", line, row_id);
  }
  [[noreturn]] void fail(const std::string& message) const { throw ConfigError(file, where(), message); }
  [[nodiscard]] std::string text(const std::string& column) const {
    const auto it = columns.find(column);
    return it == columns.end() ? std::string() : trim_blanks(fields[it->second]);
  }
  /// A required positive number.
  [[nodiscard]] double positive(const std::string& column) const {
    const auto v = number_of(text(column));
    if (!v || *v <= 0) fail(fmt::format("column {}: expected a positive number, got \"{}\"", column, text(column)));
    return *v;
  }
  /// A required positive whole number.
  [[nodiscard]] std::int64_t count(const std::string& column) const {
    const double v = positive(column);
    if (v != std::floor(v) || v > 1e15) fail(fmt::format("column {}: expected a positive whole number, got \"{}\"", column, text(column)));
    return static_cast<std::int64_t>(v);
  }
};

/// The GPU class of a table's gpu_class column, with the HBM rate it states (TB/s) if any.
void set_gpu(KernelRow& r, const CsvTable& t) {
  r.gpu = t.text("gpu");
  const std::string cls = t.has("gpu_class") ? t.text("gpu_class") : r.gpu;
  r.gpu_class = gpu_class_of(cls);
  static const std::regex rate(R"(([0-9]+(?:\.[0-9]+)?)\s*TB/s)");
  std::smatch m;
  if (std::regex_search(cls, m, rate)) r.memory_bandwidth = std::stod(m[1]) * 1e12;
  if (contains(cls, "variant not stated") || contains(r.gpu, "INFERRED")) {
    r.caveats.push_back("gpu inferred");
    r.weight *= kCaveatWeight;
  }
}

/// Caveats that the row's measurement, notes and transcription columns state.
void set_caveats(KernelRow& r, const CsvTable& t) {
  const std::string measurement = t.text("measurement"), notes = t.text("notes");
  if (contains(measurement, "best shape of a sweep") || contains(notes, "max over swept")) {
    r.caveats.push_back("sweep maximum");
    r.weight *= kCaveatWeight;
  }
  if (contains(measurement, "profiled inside") || contains(notes, "in-situ")) {
    r.caveats.push_back("in situ");
    r.weight *= kCaveatWeight;
  }
  // A Python call per timing (Triton's do_bench), one event pair around a loop of calls
  // (the gaps between launches and, for short kernels, the host's launch rate are in each
  // call's share), or one event pair around each launch or eager call (the stream's work
  // between the start event and the kernel, and the end event: microseconds that a kernel
  // duration under CUPTI does not have): a per-call cost the source does not state.
  if (contains(measurement, "do_bench") || contains(measurement, "launch loop") || contains(measurement, "events around each launch") ||
      contains(measurement, "events around one eager")) {
    r.caveats.push_back("harness overhead");
    r.harness_overhead = true;
  }
  if (contains(measurement, "CUDA graph")) r.caveats.push_back("graph launch stream");
  if (t.text("transcription").rfind("hand", 0) == 0) r.caveats.push_back("hand transcribed");
}

void gemm_row(KernelRow& r, const CsvTable& t) {
  r.table = "gemm";
  // The GEMM tables name their op gemm, gemv, batched_gemm or grouped_gemm...; another op
  // with M, N and K (a convolution, say) is not a GEMM the model may stand for.
  const std::string op = lower(r.op);
  if (!op.empty() && !contains(op, "gemm") && !contains(op, "gemv")) {
    r.not_expressible = fmt::format("op \"{}\" is not a GEMM (the GEMM model predicts gemm, gemv, batched and grouped GEMMs)", r.op);
    return;
  }
  GemmDesc g;
  g.m = t.count("M");
  g.n = t.count("N");
  g.k = t.count("K");
  const std::string groups = t.text("batch_or_groups");
  g.batch = groups.empty() ? 1 : t.count("batch_or_groups");
  const std::string dtype = lower(t.text("dtype"));
  const std::string impl = lower(r.implementation);
  if (dtype == "fp32") {
    g.dtype = DType::kFp32;
  } else if (dtype == "tf32") {
    g.dtype = DType::kTf32;
  } else if (dtype == "fp16") {
    g.dtype = DType::kFp16;
  } else if (dtype == "bf16") {
    g.dtype = DType::kBf16;
  } else if (contains(dtype, "fp8") || contains(dtype, "float8")) {
    g.dtype = DType::kFp8;
    g.block_scaled = contains(dtype, "block");
  } else {
    r.not_expressible = fmt::format("dtype \"{}\" has no GEMM model", t.text("dtype"));
    return;
  }
  g.impl = contains(impl, "deepgemm") ? GemmImpl::kDeepGemm : contains(impl, "triton") ? GemmImpl::kTriton : GemmImpl::kCublas;
  r.kernels.push_back(g);
}

void attention_row(KernelRow& r, const CsvTable& t) {
  r.table = "attention";
  AttentionDesc a;
  a.batch = t.count("batch");
  a.seq_q = t.count("seqlen_q");
  a.seq_kv = t.count("seqlen_kv");
  a.heads = t.count("heads_q");
  a.kv_heads = t.count("heads_kv");
  a.head_dim = t.count("head_dim_qk");
  const std::int64_t dv = t.count("head_dim_v");
  if (double(a.seq_q) > kMaxSequence || double(a.seq_kv) > kMaxSequence) t.fail("sequence longer than 2^24 tokens");
  if (a.head_dim > 65536 || dv > 65536) t.fail("head dim above 65536");
  if (a.heads % a.kv_heads != 0) t.fail("heads_kv must divide heads_q");
  if (dv != a.head_dim) a.v_head_dim = dv;
  a.causal = lower(t.text("causal")).rfind("causal", 0) == 0;
  const std::string dtype = lower(t.text("dtype"));
  if (dtype == "fp8" || contains(dtype, "float8")) {
    a.dtype = DType::kFp8;
  } else if (dtype == "fp16") {
    a.dtype = DType::kFp16;
  } else if (dtype == "bf16") {
    a.dtype = DType::kBf16;
  } else if (contains(dtype, "bf16")) {
    a.dtype = DType::kBf16;  // "not stated (bf16/fp16)": the same tensor-core rate either way
    r.caveats.push_back("dtype assumed");
  } else {
    r.not_expressible = fmt::format("dtype \"{}\" has no attention model", t.text("dtype"));
    return;
  }
  const std::string impl = lower(r.implementation);
  if (contains(impl, "cudnn")) a.impl = AttentionKernel::kCudnn;
  else if (contains(impl, "flashattention-3")) a.impl = AttentionKernel::kFlash3;
  else if (contains(impl, "pytorch sdpa") || contains(impl, "flashattention-2")) a.impl = AttentionKernel::kFlash2;
  else if (contains(impl, "tilelang")) a.impl = AttentionKernel::kTileLang;
  else if (contains(impl, "triton")) a.impl = AttentionKernel::kTriton;
  else {
    r.not_expressible = fmt::format("attention implementation \"{}\" is not one perfcast models", r.implementation);
    return;
  }
  const std::string direction = lower(t.text("direction"));
  if (contains(direction, "assumed")) r.caveats.push_back("direction assumed");
  const bool fwd = direction.rfind("fwd", 0) == 0, bwd = contains(direction, "bwd");
  if (!fwd && !bwd) t.fail(fmt::format("column direction: expected fwd, bwd or fwd+bwd, got \"{}\"", t.text("direction")));
  if (fwd) r.kernels.push_back(a);
  if (bwd) {
    a.pass = AttentionPass::kBackward;
    r.kernels.push_back(a);
  }
}

void memory_bound_row(KernelRow& r, const CsvTable& t) {
  r.table = "memory_bound";
  const std::string measurement = t.text("measurement");
  const std::string hint = t.text("kernel_count_hint");
  // Liger's tables time its fused kernel ("liger", "liger_<op>", "liger_in_place") beside
  // reference providers that run several kernels (eager PyTorch, Hugging Face, Megatron, and
  // "liger_rms_norm" under fused_add_rms_norm: an unfused add before Liger's norm).
  const std::string& impl = r.implementation;
  const bool liger_fused = impl == "liger" || impl == "liger_in_place" || impl == "liger_" + r.op;
  const bool single = hint.rfind('1', 0) == 0 || (hint.rfind("liger:", 0) == 0 && liger_fused);
  if (contains(measurement, "plain stream launches")) {
    r.not_expressible = "per-kernel time of a plain launch stream: bounded by the host's launch rate, which `perfcast kernels` "
                        "does not predict (the simulator adds launches)";
    return;
  }
  if (!single) {
    r.not_expressible = "composite eager op: several kernels whose traffic the row does not state";
    return;
  }
  if (t.text("bytes_moved").empty()) {
    r.not_expressible = fmt::format("no bytes moved stated ({} row)", t.text("direction"));
    return;
  }
  const double bytes = t.positive("bytes_moved");
  ElementwiseDesc e;
  e.op = r.op;
  const auto numel = number_of(t.text("numel"));
  if (bytes > limits::kMaxBytes || (numel && *numel > limits::kMaxBytes))
    t.fail(fmt::format("bytes_moved and numel: expected at most {:.0f}", limits::kMaxBytes));
  e.elements = numel && *numel >= 1 ? static_cast<std::int64_t>(*numel) : std::max<std::int64_t>(1, static_cast<std::int64_t>(bytes));
  e.bytes_per_element = bytes / static_cast<double>(e.elements);
  e.flops_per_element = 1;
  // Triton's do_bench flushes L2 before every call; KernelBench's newer harness thrashes it.
  e.cold_l2 = contains(measurement, "do_bench") || contains(measurement, "L2 thrashed");
  e.thread_per_element = contains(measurement, "one thread per element");
  r.kernels.push_back(e);
}

/// Bounds on the table count, rows, width and batch size a row may state, so that the
/// conversions to integers below are defined (limits::kMaxRows; widths as in workload files).
constexpr double kMaxEmbeddingDim = 1 << 20;
bool embedding_sizes_in_range(double tables, double rows, double dim, double batch) {
  return tables >= 1 && tables <= kMaxTables && rows >= 1 && rows <= static_cast<double>(limits::kMaxRows) && dim >= 1 &&
         dim <= kMaxEmbeddingDim && batch >= 1 && batch <= static_cast<double>(limits::kMaxRows);
}
std::string embedding_sizes_message() {
  return fmt::format("tables (1 to {}), rows and batch (1 to 2^48) and dim (1 to 2^20) must be in range", kMaxTables);
}

/// TorchRec's batch_index_select_dim0 rows (unpooled multi-table gather, fp16).
void hopper_embedding_row(KernelRow& r, const CsvTable& t) {
  r.table = "embedding";
  const auto tables = number_of(t.text("num_tables")), rows = number_of(t.text("rows_per_table")),
             dim = number_of(t.text("embedding_dim")), batch = number_of(t.text("batch_size"));
  if (contains(lower(r.implementation), "native pytorch")) {
    r.not_expressible = "composite eager op (native PyTorch gather): several kernels";
    return;
  }
  if (!tables || !rows || !dim || !batch) {
    r.not_expressible = fmt::format("table sizes or dimensions given as ranges or \"mixed\" (rows {}, dim {})",
                                    t.text("rows_per_table"), t.text("embedding_dim"));
    return;
  }
  if (contains(t.text("direction"), "bwd")) {
    r.not_expressible = "backward of an unpooled gather without an optimizer (gradient only): the TBE backward model includes "
                        "the update";
    return;
  }
  if (!embedding_sizes_in_range(*tables, *rows, *dim, *batch)) t.fail(embedding_sizes_message());
  EmbeddingDesc d;
  d.batch = static_cast<std::int64_t>(*batch);
  d.weight_dtype = lower(t.text("dtype")) == "fp16" ? DType::kFp16 : DType::kFp32;
  d.pass = EmbeddingPass::kForward;
  EmbeddingTableDesc td;
  td.rows = static_cast<std::int64_t>(*rows);
  td.dim = static_cast<std::int64_t>(*dim);
  td.pooling = number_of(t.text("pooling_factor")).value_or(1);
  td.sequence = true;
  if (contains(t.text("index_distribution"), "not stated")) r.caveats.push_back("index distribution assumed uniform");
  d.tables.assign(static_cast<std::size_t>(*tables), td);
  r.kernels.push_back(d);
}

double number_after(const std::string& text, const std::string& key) {
  const std::regex re(key + R"(\s*=?\s*([0-9.]+))");
  std::smatch m;
  return std::regex_search(text, m, re) ? std::stod(m[1]) : 0.0;
}

/// One row of embedding_kernel_times_h100.csv: up to two measured kernels (forward,
/// backward), appended to `out`. Its rows are selected as bench/embedding_tier_check
/// selects them: FBGEMM tables fully in HBM or in host memory (UVM).
void embedding_times_row(const KernelRow& base, const CsvTable& t, std::vector<KernelRow>& out) {
  KernelRow r = base;
  r.table = "embedding";
  r.source = t.text("source");
  r.gpu = t.text("gpu");
  r.gpu_class = gpu_class_of(r.gpu);
  r.implementation = t.text("implementation");
  const std::string placement = t.text("placement");
  const bool host = contains(placement, "UVM"), hbm = contains(placement, "full table in HBM");
  std::string why;
  if (r.implementation.rfind("TorchRec/FBGEMM", 0) != 0) why = fmt::format("implementation \"{}\" is not FBGEMM's TBE", r.implementation);
  else if (!host && !hbm) why = fmt::format("placement \"{}\" is not modelled as stated", placement);
  const std::string hot = t.text("hotness_or_L");
  const auto tables = number_of(t.text("num_tables")), rows = number_of(t.text("rows_per_table")),
             dim = number_of(t.text("embedding_dim")), batch = number_of(t.text("batch_size"));
  if (why.empty() && (!tables || !rows || !dim || !batch)) why = "tables, rows, dim or batch not a single number";
  if (why.empty() && !embedding_sizes_in_range(*tables, *rows, *dim, *batch)) t.fail(embedding_sizes_message());
  for (const auto pass : {EmbeddingPass::kForward, EmbeddingPass::kBackward}) {
    const bool fwd = pass == EmbeddingPass::kForward;
    const std::string column = fwd ? "fwd_ms" : "bwd_ms";
    if (t.text(column).empty()) continue;
    KernelRow k = r;
    k.row_id = fmt::format("line {} {}", t.line, fwd ? "fwd" : "bwd");
    k.where = fmt::format("line {} ({})", t.line, column);
    k.op = fwd ? "embedding_forward" : "embedding_backward";
    k.measured = t.positive(column) * 1e-3;
    if (!why.empty()) {
      k.not_expressible = why;
      out.push_back(std::move(k));
      continue;
    }
    const double total = number_after(hot, "avg total lookups/iter");
    const double pooling = total > 0 ? total / (*batch * *tables) : number_of(hot).value_or(1);
    double alpha = number_after(t.text("index_distribution"), "pow-law[ -]?(?:alpha)?");
    if (alpha == 0) alpha = number_after(t.text("index_distribution"), "alpha");
    EmbeddingDesc d;
    d.batch = static_cast<std::int64_t>(*batch);
    d.weight_dtype = DType::kFp32;
    d.pass = pass;
    d.optimizer = t.text("optimizer") == "adam" ? EmbeddingOptimizer::kAdam : EmbeddingOptimizer::kSgd;
    EmbeddingTableDesc td;
    td.rows = static_cast<std::int64_t>(*rows);
    td.dim = static_cast<std::int64_t>(*dim);
    td.pooling = pooling;
    td.distribution = alpha > 0 ? IndexDistribution::zipf(alpha) : IndexDistribution::uniform();
    td.storage = host ? EmbeddingStorage::kHostUvm : EmbeddingStorage::kHbm;
    d.tables.assign(static_cast<std::size_t>(*tables), td);
    k.kernels.push_back(d);
    out.push_back(std::move(k));
  }
}

enum class TableKind { kGemm, kAttention, kMemoryBound, kHopperEmbedding, kEmbeddingTimes };

std::optional<TableKind> table_kind(const CsvTable& t) {
  if (t.has("fwd_ms") && t.has("bwd_ms") && t.has("placement")) return TableKind::kEmbeddingTimes;
  if (!t.has("row_id") || !t.has("source_id") || !t.has("time_us")) return std::nullopt;
  if (t.has("M") && t.has("N") && t.has("K")) return TableKind::kGemm;
  if (t.has("seqlen_q") && t.has("head_dim_qk")) return TableKind::kAttention;
  if (t.has("num_tables") && t.has("rows_per_table")) return TableKind::kHopperEmbedding;
  if (t.has("bytes_moved") && t.has("op")) return TableKind::kMemoryBound;
  return std::nullopt;
}

std::vector<KernelRow> read_csv_rows(const std::filesystem::path& path, const std::string& text) {
  CsvTable t;
  t.file = path.string();
  std::vector<KernelRow> out;
  std::size_t pos = 0;
  std::vector<std::string> header;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++t.line;
    if (trim_blanks(line).empty()) {
      if (end >= text.size()) break;
      continue;
    }
    if (header.empty()) {
      header = split_csv_record(line);
      for (const auto& [column, i] : csv_header_columns(header, t.file)) t.columns[column] = i;
      if (!table_kind(t))
        throw ConfigError(t.file, "line 1",
                          "not a measurement table: expected the columns of data/public-measurements/hopper-kernels/*.csv "
                          "(row_id, source_id, time_us, ...) or of embedding_kernel_times_h100.csv (fwd_ms, bwd_ms, placement)");
      continue;
    }
    t.row_id.clear();
    t.fields = split_csv_record(line);
    if (t.has("row_id") && t.columns["row_id"] < t.fields.size()) t.row_id = trim_blanks(t.fields[t.columns["row_id"]]);
    if (t.fields.size() != header.size()) t.fail(fmt::format("expected {} fields, got {}", header.size(), t.fields.size()));
    const TableKind kind = *table_kind(t);
    KernelRow r;
    r.file = t.file;
    if (kind == TableKind::kEmbeddingTimes) {
      embedding_times_row(r, t, out);
      continue;
    }
    t.row_id = t.text("row_id");
    if (t.row_id.empty()) t.fail("column row_id is empty");
    r.row_id = t.row_id;
    r.where = t.where();
    r.source = t.text("source_id");
    if (r.source.empty()) t.fail("column source_id is empty");
    r.implementation = t.text("implementation");
    r.op = t.text("op");
    r.measured = t.positive("time_us") * 1e-6;
    set_gpu(r, t);
    set_caveats(r, t);
    switch (kind) {
      case TableKind::kGemm: gemm_row(r, t); break;
      case TableKind::kAttention: attention_row(r, t); break;
      case TableKind::kMemoryBound: memory_bound_row(r, t); break;
      case TableKind::kHopperEmbedding: hopper_embedding_row(r, t); break;
      case TableKind::kEmbeddingTimes: break;
    }
    if (r.kernels.empty() && r.not_expressible.empty()) r.not_expressible = "no kernel model";
    out.push_back(std::move(r));
  }
  if (header.empty()) throw ConfigError(t.file, "", "empty file: expected a header line and rows");
  return out;
}

std::string table_of(const KernelDesc& k) {
  if (std::holds_alternative<GemmDesc>(k)) return "gemm";
  if (std::holds_alternative<AttentionDesc>(k)) return "attention";
  if (std::holds_alternative<EmbeddingDesc>(k)) return "embedding";
  if (std::holds_alternative<MemcpyDesc>(k)) return "memcpy";
  return "memory_bound";
}

/// The source of a `perfcast profile` line (no "source" of its own): the measuring program,
/// GPU class and day, e.g. "perfcast_profile_h200_2026-11-27", so that the sweeps of one
/// machine and day form one source however many files they fill; the file name when the
/// line has no date.
std::string profile_source(const Measurement& m, const std::filesystem::path& path) {
  if (m.date.size() < 10) return path.filename().string();
  std::string gpu = lower(gpu_class_of(m.device.name));
  std::replace(gpu.begin(), gpu.end(), ' ', '_');
  return fmt::format("perfcast_profile_{}_{}", gpu, m.date.substr(0, 10));
}

std::vector<KernelRow> read_jsonl_rows(const std::filesystem::path& path) {
  std::vector<KernelRow> out;
  std::size_t line = 0;
  for (auto& m : read_measurements(path)) {
    ++line;
    KernelRow r;
    r.file = path.string();
    r.row_id = fmt::format("line {}", line);
    r.where = r.row_id;
    r.source = m.source.empty() ? profile_source(m, path) : m.source;
    r.table = table_of(m.kernel);
    r.gpu = m.device.name;
    r.gpu_class = gpu_class_of(m.device.name);
    r.implementation = m.kernel_name;
    r.op = kernel_family(m.kernel);
    r.measured = m.timing.median;
    if (std::holds_alternative<MeasuredKernelDesc>(m.kernel)) r.not_expressible = "a measured-only kernel (no shape to predict from)";
    else r.kernels.push_back(m.kernel);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::string gpu_class_of(const std::string& gpu_name) {
  const std::string n = lower(gpu_name);
  if (contains(n, "gh200")) return "GH200";
  if (contains(n, "h800")) return "H800";
  if (contains(n, "h200")) return "H200";
  if (contains(n, "h100")) {
    if (contains(n, "pcie")) return "H100 PCIe";
    if (contains(n, "nvl")) return "H100 NVL";
    return "H100 SXM";
  }
  if (contains(n, "a100")) {
    const bool pcie = contains(n, "pcie");
    const bool gb40 = contains(n, "40gb") || contains(n, "pg509");  // A100-PG509-200: the 40 GB SXM4 board
    return std::string("A100 ") + (pcie ? "PCIe" : "SXM") + (gb40 ? " 40GB" : " 80GB");
  }
  if (contains(n, "v100")) return contains(n, "pcie") ? "V100 PCIe" : "V100 SXM";
  return gpu_name;
}

std::vector<KernelRow> read_kernel_rows(const std::filesystem::path& file) {
  if (file.extension() == ".jsonl") return read_jsonl_rows(file);
  const std::string text = read_input_file(file);
  require_utf8(text, file.string());
  return read_csv_rows(file, text);
}

}  // namespace perfcast
