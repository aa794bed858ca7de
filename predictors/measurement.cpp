#include "predictors/measurement.hpp"
#include "core/json_text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace perfcast {
namespace {

std::string secs(Seconds s) { return fmt::format("{:.6g}us", s * 1e6); }
std::string hz(Hertz h) { return fmt::format("{:.6g}MHz", h / 1e6); }

DType dtype_of(const JsonObject& o, std::string_view key) {
  const JsonValue v = o.at(key);
  const std::string s = v.as_enum({"fp32", "tf32", "fp16", "bf16", "fp8"});
  return *dtype_from_name(s);
}

std::string copy_kind_name(CopyKind k) {
  switch (k) {
    case CopyKind::kHostToDevice: return "h2d";
    case CopyKind::kDeviceToHost: return "d2h";
    case CopyKind::kDeviceToDevice: return "d2d";
  }
  return "h2d";
}

nlohmann::json distribution_to_json(const IndexDistribution& d) {
  switch (d.kind) {
    case IndexDistribution::Kind::kUniform: return {{"kind", "uniform"}};
    case IndexDistribution::Kind::kZipf: return {{"kind", "zipf"}, {"alpha", d.alpha}};
    case IndexDistribution::Kind::kHotSet:
      return {{"kind", "hot_set"}, {"hot_rows", d.hot_rows_fraction}, {"hot_accesses", d.hot_access_fraction}};
    case IndexDistribution::Kind::kReuseHistogram: return {{"kind", "reuse_histogram"}, {"shares", d.reuse}};
  }
  return {{"kind", "uniform"}};
}

IndexDistribution distribution_from_json(const JsonObject& o) {
  const std::string kind = o.at("kind").as_enum({"uniform", "zipf", "hot_set", "reuse_histogram"});
  IndexDistribution d;
  if (kind == "zipf") d = IndexDistribution::zipf(o.at("alpha").as_number_in(0.01, 10));
  if (kind == "hot_set") d = IndexDistribution::hot_set(o.at("hot_rows").as_number_in(1e-9, 1), o.at("hot_accesses").as_number_in(0, 1));
  if (kind == "reuse_histogram") {
    const JsonArray a = o.array("shares");
    a.require_size(kReuseBins, kReuseBins);
    ReuseHistogram h{};
    for (std::size_t i = 0; i < kReuseBins; ++i) h[i] = a[i].as_number_in(0, 1);
    d = IndexDistribution::histogram(h);
  }
  o.finish();
  return d;
}

}  // namespace

TimingStats timing_stats(std::vector<Seconds> v, std::string timer) {
  if (v.empty()) throw std::invalid_argument("timing_stats: no samples");
  std::sort(v.begin(), v.end());
  TimingStats t;
  t.timer = std::move(timer);
  t.repetitions = static_cast<int>(v.size());
  auto quantile = [&](double q) {
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  t.median = quantile(0.5);
  t.p10 = quantile(0.1);
  t.p90 = quantile(0.9);
  t.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - t.mean) * (x - t.mean);
  t.stddev = v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0.0;
  // Identical samples (CUPTI times are whole nanoseconds) leave rounding noise of the mean
  // (1e-22 s), not a spread: anything under a billionth of the mean is written as 0.
  if (t.stddev <= 1e-9 * t.mean) t.stddev = 0;
  t.cv = t.mean > 0 ? t.stddev / t.mean : 0.0;
  return t;
}

nlohmann::json kernel_to_json(const KernelDesc& k) {
  // Keys added after schema 1.0 (block_scaled, implementation, cold_l2, thread_per_element, window) are written
  // only when they differ from their defaults, so earlier files and their readers agree.
  if (const auto* g = std::get_if<GemmDesc>(&k)) {
    nlohmann::json j = {{"family", "gemm"}, {"m", g->m}, {"n", g->n}, {"k", g->k}, {"batch", g->batch},
                        {"dtype", dtype_name(g->dtype)}, {"bias_epilogue", g->bias_epilogue}};
    if (g->block_scaled) j["block_scaled"] = true;
    if (g->impl != GemmImpl::kCublas) j["implementation"] = gemm_impl_name(g->impl);
    if (g->epilogue_inputs > 0) j["epilogue_inputs"] = g->epilogue_inputs;
    return j;
  }
  if (const auto* e = std::get_if<ElementwiseDesc>(&k)) {
    nlohmann::json j = {{"family", "elementwise"}, {"op", e->op}, {"elements", e->elements},
                        {"flops_per_element", e->flops_per_element}, {"bytes_per_element", e->bytes_per_element}};
    if (e->cold_l2) j["cold_l2"] = true;
    if (e->thread_per_element) j["thread_per_element"] = true;
    return j;
  }
  if (const auto* a = std::get_if<AttentionDesc>(&k)) {
    nlohmann::json j = {{"family", a->pass == AttentionPass::kForward ? "attention_forward" : "attention_backward"},
                        {"batch", a->batch}, {"heads", a->heads}, {"kv_heads", a->kv_heads}, {"seq_q", a->seq_q},
                        {"seq_kv", a->seq_kv}, {"head_dim", a->head_dim}, {"causal", a->causal},
                        {"dtype", dtype_name(a->dtype)}};
    if (a->v_head_dim > 0) j["head_dim_v"] = a->v_head_dim;
    if (a->window > 0) j["window"] = a->window;
    if (a->impl != AttentionKernel::kFlash2) j["implementation"] = attention_kernel_name(a->impl);
    return j;
  }
  if (const auto* m = std::get_if<MemcpyDesc>(&k)) {
    return {{"family", "memcpy"}, {"bytes", fmt::format("{:.0f}B", m->bytes)}, {"kind", copy_kind_name(m->kind)}};
  }
  if (const auto* e = std::get_if<EmbeddingDesc>(&k)) {
    nlohmann::json tables = nlohmann::json::array();
    for (const auto& t : e->tables) {
      tables.push_back({{"rows", t.rows}, {"dim", t.dim}, {"pooling", t.pooling}, {"distribution", distribution_to_json(t.distribution)}});
    }
    nlohmann::json j = {{"family", e->pass == EmbeddingPass::kForward ? "embedding_forward" : "embedding_backward"},
                        {"batch", e->batch}, {"weight_dtype", dtype_name(e->weight_dtype)},
                        {"optimizer", optimizer_name(e->optimizer)}, {"index_bytes", e->index_bytes}, {"tables", tables}};
    if (e->weighted) j["weighted"] = true;
    return j;
  }
  if (const auto* m = std::get_if<MeasuredKernelDesc>(&k)) return {{"family", "measured"}, {"name", m->name}};
  throw std::invalid_argument("kernel_to_json: no measurement format for " + kernel_family(k) + " kernels yet");
}

KernelDesc kernel_from_json(const JsonObject& o) {
  const std::string family = o.at("family").as_enum({"gemm", "elementwise", "memcpy", "embedding_forward", "embedding_backward",
                                                      "measured", "attention_forward", "attention_backward"});
  KernelDesc out;
  if (family == "gemm") {
    GemmDesc g;
    g.m = o.integer("m", 1, 1LL << 40);
    g.n = o.integer("n", 1, 1LL << 40);
    g.k = o.integer("k", 1, 1LL << 40);
    g.batch = o.integer_or("batch", 1, 1LL << 40, 1);
    g.dtype = dtype_of(o, "dtype");
    g.bias_epilogue = o.bool_or("bias_epilogue", false);
    g.block_scaled = o.bool_or("block_scaled", false);
    if (g.block_scaled && g.dtype != DType::kFp8) o.fail("block_scaled", "block scales apply to fp8 GEMMs only");
    g.impl = *gemm_impl_from_name(o.enum_or("implementation", {"cublas", "deepgemm", "triton"}, "cublas"));
    g.epilogue_inputs = static_cast<int>(o.integer_or("epilogue_inputs", 0, 8, 0));
    out = g;
  } else if (family == "elementwise") {
    ElementwiseDesc e;
    e.op = o.string("op");
    e.elements = o.integer("elements", 0, 1LL << 50);
    e.flops_per_element = o.at("flops_per_element").as_number_in(0, 1e6);
    e.bytes_per_element = o.at("bytes_per_element").as_number_in(0, 1e6);
    e.cold_l2 = o.bool_or("cold_l2", false);
    e.thread_per_element = o.bool_or("thread_per_element", false);
    out = e;
  } else if (family == "attention_forward" || family == "attention_backward") {
    AttentionDesc a;
    a.pass = family == "attention_forward" ? AttentionPass::kForward : AttentionPass::kBackward;
    a.batch = o.integer("batch", 1, 1LL << 30);
    a.heads = o.integer("heads", 1, 1LL << 20);
    a.kv_heads = o.integer_or("kv_heads", 1, a.heads, a.heads);
    if (a.heads % a.kv_heads != 0) o.fail("kv_heads", "must divide heads");
    a.seq_q = o.integer("seq_q", 1, 1LL << 30);
    a.seq_kv = o.integer_or("seq_kv", 1, 1LL << 30, a.seq_q);
    a.head_dim = o.integer("head_dim", 1, 1 << 16);
    a.v_head_dim = o.integer_or("head_dim_v", 0, 1 << 16, 0);
    a.causal = o.bool_or("causal", false);
    a.window = o.integer_or("window", 0, 1LL << 30, 0);
    a.dtype = dtype_of(o, "dtype");
    a.impl = *attention_kernel_from_name(o.enum_or("implementation", {"flash2", "flash3", "cudnn", "triton", "tilelang"}, "flash2"));
    out = a;
  } else if (family == "memcpy") {
    MemcpyDesc m;
    m.bytes = o.quantity("bytes", Dimension::kBytes);
    const std::string kind = o.at("kind").as_enum({"h2d", "d2h", "d2d"});
    m.kind = kind == "h2d" ? CopyKind::kHostToDevice : kind == "d2h" ? CopyKind::kDeviceToHost : CopyKind::kDeviceToDevice;
    out = m;
  } else if (family == "measured") {
    out = MeasuredKernelDesc{o.string("name"), 0};
  } else {
    EmbeddingDesc e;
    e.pass = family == "embedding_forward" ? EmbeddingPass::kForward : EmbeddingPass::kBackward;
    e.batch = o.integer("batch", 1, 1LL << 40);
    e.weight_dtype = dtype_of(o, "weight_dtype");
    e.optimizer = embedding_optimizer_from_name(o.enum_or("optimizer", {"sgd", "rowwise_adagrad", "adam", "adagrad"}, "sgd"));
    e.index_bytes = static_cast<int>(o.integer_or("index_bytes", 4, 8, 8));
    e.weighted = o.bool_or("weighted", false);
    const JsonArray tables = o.array("tables");
    tables.require_size(1, 1 << 20);
    for (std::size_t i = 0; i < tables.size(); ++i) {
      const JsonObject t = tables[i].as_object();
      EmbeddingTableDesc d;
      d.rows = t.integer("rows", 1, 1LL << 40);
      d.dim = t.integer("dim", 1, 1 << 20);
      d.pooling = t.at("pooling").as_number_in(0, 1e6);
      d.distribution = distribution_from_json(t.object("distribution"));
      t.finish();
      e.tables.push_back(d);
    }
    out = e;
  }
  o.finish();
  return out;
}

std::string measurement_to_jsonl(const Measurement& m) {
  nlohmann::json j = {
      {"schema", "perfcast.measurement"},
      {"schema_version", "1.0"},
      {"kernel", kernel_to_json(m.kernel)},
      {"timing", {{"timer", m.timing.timer}, {"repetitions", m.timing.repetitions}, {"median", secs(m.timing.median)},
                  {"mean", secs(m.timing.mean)}, {"p10", secs(m.timing.p10)}, {"p90", secs(m.timing.p90)},
                  {"stddev", secs(m.timing.stddev)}, {"cv", m.timing.cv}}},
      {"device", {{"name", m.device.name}, {"sm_count", m.device.sm_count}, {"sm_clock", hz(m.device.sm_clock)},
                  {"memory_clock", hz(m.device.memory_clock)}, {"driver", m.device.driver},
                  {"cuda_runtime", m.device.cuda_runtime}, {"cublas", m.device.cublas}}},
      {"date", m.date},
      {"commit", m.commit},
  };
  if (!m.kernel_name.empty()) j["kernel_name"] = m.kernel_name;
  if (!m.source.empty()) j["source"] = m.source;
  return json_text(j) + "\n";
}

namespace {

/// A timing spread (stddev). perfcast profile up to faf104f wrote the zero spread of identical
/// samples as rounding noise ("4.34519e-16us", below the 1 ps that times may have): a spread
/// written in us under one picosecond reads as 0; anything else must be a valid time.
Seconds timing_spread(const JsonObject& t, std::string_view key) {
  if (!t.has(key)) return 0;
  if (t.at(key).is_string()) {
    const std::string text = t.string(key);
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() && std::isfinite(v) && v >= 0 && v < 1e-6 && std::string_view(end) == "us") return 0;
  }
  return t.quantity(key, Dimension::kTime);
}

}  // namespace

std::vector<Measurement> read_measurements(const std::filesystem::path& path) {
  std::vector<Measurement> out;
  for_each_json_line(path, "one measurement object per line", [&](const JsonDocument& doc) {
    const JsonObject root(doc);
    root.require_schema("perfcast.measurement", 1);
    Measurement m;
    m.kernel = kernel_from_json(root.object("kernel"));
    m.kernel_name = root.string_or("kernel_name", "");
    const JsonObject t = root.object("timing");
    m.timing.timer = t.at("timer").as_enum({"cupti", "cuda_events", "kineto"});
    m.timing.repetitions = static_cast<int>(t.integer("repetitions", 1, 1 << 30));
    m.timing.median = t.quantity("median", Dimension::kTime);
    if (m.timing.median <= 0) t.fail("median", "must be positive");
    m.timing.mean = t.quantity_or("mean", Dimension::kTime, m.timing.median);
    m.timing.p10 = t.quantity_or("p10", Dimension::kTime, m.timing.median);
    m.timing.p90 = t.quantity_or("p90", Dimension::kTime, m.timing.median);
    m.timing.stddev = timing_spread(t, "stddev");
    m.timing.cv = t.number_or("cv", 0, 1e6, 0);
    t.finish();
    const JsonObject d = root.object("device");
    m.device.name = d.string("name");
    m.device.sm_count = static_cast<int>(d.integer_or("sm_count", 0, 100000, 0));
    m.device.sm_clock = d.quantity_or("sm_clock", Dimension::kFrequency, 0);
    m.device.memory_clock = d.quantity_or("memory_clock", Dimension::kFrequency, 0);
    m.device.driver = d.string_or("driver", "");
    m.device.cuda_runtime = d.string_or("cuda_runtime", "");
    m.device.cublas = d.string_or("cublas", "");
    d.finish();
    m.date = root.string_or("date", "");
    m.commit = root.string_or("commit", "");
    m.source = root.string_or("source", "");
    root.finish();
    out.push_back(std::move(m));
  });
  return out;
}

}  // namespace perfcast
