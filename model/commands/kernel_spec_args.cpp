#include "model/commands/kernel_spec_args.hpp"

#include <charconv>
#include <cmath>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "core/json_reader.hpp"
#include "core/units.hpp"

namespace perfcast {
namespace {

/// Longest sequence an attention may have (tokens): its mask is counted block by block.
constexpr std::int64_t kMaxSequence = 1LL << 24;
/// Most tables one embedding lookup may have.
constexpr std::int64_t kMaxTables = 100000;

/// The KEY=VALUE pairs of one option, checked against the keys it accepts.
class SpecArgs {
 public:
  SpecArgs(std::string option, const std::string& text, const std::vector<std::string>& keys) : option_(std::move(option)) {
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
      if (item.empty()) continue;
      const auto eq = item.find('=');
      if (eq == std::string::npos || eq == 0)
        throw ConfigError(option_, "", fmt::format("expected KEY=VALUE, got \"{}\"", item));
      const std::string key = item.substr(0, eq);
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        std::string msg = fmt::format("unknown key \"{}\"", key);
        const std::string guess = closest_match(key, keys);
        if (!guess.empty()) msg += fmt::format(" (did you mean \"{}\"?)", guess);
        throw ConfigError(option_, key, msg + fmt::format("; keys: {}", fmt::join(keys, ", ")));
      }
      if (values_.count(key)) throw ConfigError(option_, key, "given twice");
      values_[key] = item.substr(eq + 1);
    }
  }

  [[nodiscard]] bool has(const std::string& key) const { return values_.count(key) > 0; }

  [[nodiscard]] std::int64_t count(const std::string& key, std::int64_t lo = 1, std::int64_t hi = 1LL << 40) const {
    const auto it = values_.find(key);
    if (it == values_.end()) throw ConfigError(option_, key, fmt::format("missing key \"{}\"", key));
    std::int64_t v = 0;
    const auto& s = it->second;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi)
      throw ConfigError(option_, key, fmt::format("expected a whole number from {} to {}, got \"{}\"", lo, hi, s));
    return v;
  }
  [[nodiscard]] std::int64_t count_or(const std::string& key, std::int64_t def, std::int64_t lo = 1, std::int64_t hi = 1LL << 40) const {
    return has(key) ? count(key, lo, hi) : def;
  }

  [[nodiscard]] double number_or(const std::string& key, double def, double lo, double hi) const {
    if (!has(key)) return def;
    const auto& s = values_.at(key);
    double v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < lo || v > hi)
      throw ConfigError(option_, key, fmt::format("expected a number in [{}, {}], got \"{}\"", lo, hi, s));
    return v;
  }

  [[nodiscard]] bool flag(const std::string& key) const {
    if (!has(key)) return false;
    const auto& s = values_.at(key);
    if (s == "1" || s == "true" || s == "yes") return true;
    if (s == "0" || s == "false" || s == "no") return false;
    throw ConfigError(option_, key, fmt::format("expected 0 or 1, got \"{}\"", s));
  }

  [[nodiscard]] std::string choice(const std::string& key, const std::vector<std::string>& choices, const std::string& def) const {
    if (!has(key)) return def;
    const auto& s = values_.at(key);
    if (std::find(choices.begin(), choices.end(), s) == choices.end())
      throw ConfigError(option_, key, fmt::format("expected one of {}, got \"{}\"", fmt::join(choices, ", "), s));
    return s;
  }

  [[nodiscard]] std::string text_or(const std::string& key, const std::string& def) const { return has(key) ? values_.at(key) : def; }

  [[nodiscard]] DType dtype(const std::vector<std::string>& choices, const std::string& def) const {
    return *dtype_from_name(choice("dtype", choices, def));
  }

  [[noreturn]] void fail(const std::string& key, const std::string& message) const { throw ConfigError(option_, key, message); }

 private:
  std::string option_;
  std::map<std::string, std::string> values_;
};

}  // namespace

KernelSpecArg parse_gemm_arg(const std::string& text) {
  const SpecArgs a("--gemm", text, {"m", "n", "k", "batch", "groups", "dtype", "scaling", "impl", "bias"});
  GemmDesc g;
  g.m = a.count("m");
  g.n = a.count("n");
  g.k = a.count("k");
  if (a.has("batch") && a.has("groups")) a.fail("groups", "give batch or groups, not both");
  g.batch = a.has("groups") ? a.count("groups") : a.count_or("batch", 1);
  g.dtype = a.dtype({"fp32", "tf32", "fp16", "bf16", "fp8"}, "bf16");
  g.block_scaled = a.choice("scaling", {"tensor", "block"}, "tensor") == "block";
  if (g.block_scaled && g.dtype != DType::kFp8) a.fail("scaling", "block scales apply to dtype=fp8 only");
  g.impl = *gemm_impl_from_name(a.choice("impl", {"cublas", "deepgemm", "triton"}, "cublas"));
  g.bias_epilogue = a.flag("bias");
  return {"--gemm", text, {g}};
}

KernelSpecArg parse_attention_arg(const std::string& text) {
  const SpecArgs a("--attention", text, {"batch", "heads", "kv_heads", "seq", "seq_q", "seq_kv", "head_dim", "head_dim_v", "causal",
                                         "window", "pass", "dtype", "impl"});
  AttentionDesc d;
  d.batch = a.count("batch");
  d.heads = a.count("heads");
  d.kv_heads = a.count_or("kv_heads", d.heads);
  if (d.kv_heads > d.heads || d.heads % d.kv_heads != 0) a.fail("kv_heads", "must divide heads");
  if (a.has("seq") && (a.has("seq_q") || a.has("seq_kv"))) a.fail("seq", "give seq, or seq_q and seq_kv");
  d.seq_q = a.has("seq") ? a.count("seq", 1, kMaxSequence) : a.count("seq_q", 1, kMaxSequence);
  d.seq_kv = a.has("seq") ? d.seq_q : a.count_or("seq_kv", d.seq_q, 1, kMaxSequence);
  d.head_dim = a.count("head_dim", 1, 1 << 16);
  if (a.has("head_dim_v")) d.v_head_dim = a.count("head_dim_v", 1, 1 << 16);
  d.causal = a.flag("causal");
  d.window = a.count_or("window", 0, 0, kMaxSequence);
  d.dtype = a.dtype({"fp16", "bf16", "fp8"}, "bf16");
  d.impl = *attention_kernel_from_name(a.choice("impl", {"flash2", "flash3", "cudnn", "triton", "tilelang"}, "flash2"));
  const std::string pass = a.choice("pass", {"forward", "backward", "both"}, "forward");
  KernelSpecArg out{"--attention", text, {}};
  if (pass != "backward") out.kernels.push_back(d);
  if (pass != "forward") {
    d.pass = AttentionPass::kBackward;
    out.kernels.push_back(d);
  }
  return out;
}

KernelSpecArg parse_memory_bound_arg(const std::string& text) {
  const SpecArgs a("--memory-bound", text, {"bytes", "op", "cold_l2", "elements", "thread_per_element"});
  if (!a.has("bytes")) a.fail("bytes", "missing key \"bytes\" (bytes read + written, e.g. 64MiB)");
  double bytes = 0;
  try {
    bytes = parse_quantity(a.text_or("bytes", ""), Dimension::kBytes);
  } catch (const std::invalid_argument& e) {
    a.fail("bytes", e.what());
  }
  if (bytes < 1) a.fail("bytes", "expected at least 1B");
  ElementwiseDesc e;
  e.op = a.text_or("op", "copy");
  e.elements = a.count_or("elements", static_cast<std::int64_t>(std::ceil(bytes)), 1, static_cast<std::int64_t>(std::ceil(bytes)));
  e.bytes_per_element = bytes / static_cast<double>(e.elements);
  e.flops_per_element = 0;
  e.cold_l2 = a.flag("cold_l2");
  e.thread_per_element = a.flag("thread_per_element");
  if (e.thread_per_element && !a.has("elements"))
    a.fail("thread_per_element", "needs \"elements\" (the threads the kernel launches, one per element)");
  return {"--memory-bound", text, {e}};
}

KernelSpecArg parse_embedding_arg(const std::string& text) {
  const SpecArgs a("--embedding", text, {"tables", "rows", "dim", "batch", "pooling", "distribution", "pass", "optimizer", "dtype",
                                         "unpooled", "storage"});
  EmbeddingDesc d;
  d.batch = a.count("batch");
  d.pass = a.choice("pass", {"forward", "backward"}, "forward") == "forward" ? EmbeddingPass::kForward : EmbeddingPass::kBackward;
  d.optimizer = embedding_optimizer_from_name(a.choice("optimizer", {"sgd", "rowwise_adagrad", "adam", "adagrad"}, "sgd"));
  d.weight_dtype = a.dtype({"fp32", "fp16", "bf16"}, "fp32");
  EmbeddingTableDesc t;
  t.rows = a.count("rows");
  t.dim = a.count("dim");
  t.pooling = a.number_or("pooling", 1, 1e-6, 1e6);
  t.sequence = a.flag("unpooled");
  t.storage = a.choice("storage", {"hbm", "uvm"}, "hbm") == "uvm" ? EmbeddingStorage::kHostUvm : EmbeddingStorage::kHbm;
  const std::string dist = a.text_or("distribution", "uniform");
  if (dist == "uniform") {
    t.distribution = IndexDistribution::uniform();
  } else if (dist.rfind("zipf:", 0) == 0) {
    double alpha = 0;
    const std::string v = dist.substr(5);
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), alpha);
    if (ec != std::errc() || end != v.data() + v.size() || !(alpha >= 0.01 && alpha <= 10))
      a.fail("distribution", fmt::format("expected zipf:ALPHA with ALPHA in [0.01, 10], got \"{}\"", dist));
    t.distribution = IndexDistribution::zipf(alpha);
  } else {
    a.fail("distribution", fmt::format("expected uniform or zipf:ALPHA, got \"{}\"", dist));
  }
  const std::int64_t tables = a.count("tables", 1, kMaxTables);
  d.tables.assign(static_cast<std::size_t>(tables), t);
  return {"--embedding", text, {d}};
}

}  // namespace perfcast
