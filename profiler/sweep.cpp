#include "profiler/sweep.hpp"

#include "profiler/bench_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "core/dtype.hpp"

namespace perfcast::profiler {

namespace {

/// Portable random numbers: std::mt19937_64's output sequence is fixed by the standard; the
/// std:: distributions are not, so the conversions below are written out.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : g_(seed) {}
  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(g_() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [0, n).
  std::size_t index(std::size_t n) { return static_cast<std::size_t>(uniform() * static_cast<double>(n)); }
  /// Log-uniform in [lo, hi] (lo > 0).
  double log_uniform(double lo, double hi) { return std::exp(uniform(std::log(lo), std::log(hi))); }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[index(v.size())];
  }

 private:
  std::mt19937_64 g_;
};

std::vector<std::string> string_list(const JsonObject& o, std::string_view key, const std::vector<std::string>& choices) {
  const auto a = o.array(key);
  a.require_size(1, 64);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(a[i].as_enum(choices));
  return out;
}

std::vector<std::int64_t> int_list(const JsonObject& o, std::string_view key, std::int64_t lo, std::int64_t hi) {
  const auto a = o.array(key);
  a.require_size(1, 1024);
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(a[i].as_integer(lo, hi));
  return out;
}

/// A [lo, hi] pair of numbers within [min, max], lo <= hi.
std::pair<double, double> range(const JsonObject& o, std::string_view key, double min, double max) {
  const auto a = o.array(key);
  a.require_size(2, 2);
  const double lo = a[0].as_number_in(min, max);
  const double hi = a[1].as_number_in(min, max);
  if (lo > hi) a.fail(fmt::format("expected [lo, hi] with lo <= hi, got [{:g}, {:g}]", lo, hi));
  return {lo, hi};
}

/// Geometric series {min, max, factor}: min, min*factor, ... <= max.
/// Values are byte strings ("4KiB") when `bytes`, else plain integers.
std::vector<double> geometric(const JsonObject& parent, std::string_view key, bool bytes) {
  const auto o = parent.object(key);
  const double lo = bytes ? o.quantity("min", Dimension::kBytes) : static_cast<double>(o.integer("min", 1, INT64_MAX));
  const double hi = bytes ? o.quantity("max", Dimension::kBytes) : static_cast<double>(o.integer("max", 1, INT64_MAX));
  const double factor = o.number_or("factor", 1.01, 1e6, 2.0);
  o.finish();
  if (lo <= 0 || hi < lo) parent.fail(key, fmt::format("expected 0 < min <= max, got min {:g}, max {:g}", lo, hi));
  std::vector<double> out;
  for (double v = lo; v <= hi * (1 + 1e-12); v *= factor) out.push_back(std::round(v));
  if (out.size() > 100000) parent.fail(key, "more than 100000 values");
  return out;
}

DType dtype_of(const std::string& s) { return *dtype_from_name(s); }

void gemm_random(const JsonObject& g, Rng& rng, std::vector<BenchCase>& out) {
  const auto count = g.integer("count", 1, 1000000);
  const auto dims = int_list(g, "dims", 1, 1 << 20);
  const auto dtypes = string_list(g, "dtypes", {"fp32", "tf32", "fp16", "bf16"});
  const auto transposes = g.has("transposes") ? string_list(g, "transposes", {"nn", "nt", "tn", "tt"})
                                              : std::vector<std::string>{"nn"};
  const auto batches = g.has("batch") ? int_list(g, "batch", 1, 1 << 20) : std::vector<std::int64_t>{1};
  const double max_bytes = g.quantity_or("max_bytes", Dimension::kBytes, 4.0 * (1ull << 30));
  g.finish();
  for (std::int64_t i = 0; i < count; ++i) {
    BenchCase c;
    c.generator = "gemm_random";
    GemmDesc d;
    // Redraw shapes over the memory cap (bounded; the smallest shape always fits or is an error).
    for (int attempt = 0;; ++attempt) {
      d.m = rng.pick(dims);
      d.k = rng.pick(dims);
      d.n = rng.pick(dims);
      d.batch = rng.pick(batches);
      d.dtype = dtype_of(rng.pick(dtypes));
      if (gemm_bytes(d) <= max_bytes) break;
      if (attempt > 1000) g.fail("max_bytes", "no GEMM shape of the generator fits under max_bytes");
    }
    const auto& t = rng.pick(transposes);
    c.trans_a = t[0] == 't';
    c.trans_b = t[1] == 't';
    c.kernel = d;
    out.push_back(std::move(c));
  }
}

void elementwise_grid(const JsonObject& g, std::vector<BenchCase>& out) {
  std::vector<std::string> names;
  for (const auto& op : elementwise_ops()) names.emplace_back(op.name);
  const auto ops = string_list(g, "ops", names);
  const auto elements = geometric(g, "elements", false);
  const auto cols = g.has("bias_cols") ? int_list(g, "bias_cols", 1, 1 << 24) : std::vector<std::int64_t>{1024};
  g.finish();
  for (const auto& op : ops) {
    const auto& info = *std::find_if(elementwise_ops().begin(), elementwise_ops().end(),
                                     [&](const ElementwiseOpInfo& i) { return op == i.name; });
    const auto& col_list = op == "bias_grad" ? cols : std::vector<std::int64_t>{0};
    for (auto bc : col_list) {
      for (double n : elements) {
        auto e = static_cast<std::int64_t>(n);
        if (bc > 0) e = std::max<std::int64_t>(bc, e / bc * bc);  // whole rows
        BenchCase c;
        c.generator = "elementwise_grid";
        c.bias_cols = bc;
        c.kernel = ElementwiseDesc{op, e, info.flops_per_element, info.bytes_per_element};
        out.push_back(std::move(c));
      }
    }
  }
}

void memcpy_grid(const JsonObject& g, std::vector<BenchCase>& out) {
  const auto kinds = string_list(g, "kinds", {"h2d", "d2h", "d2d"});
  const auto sizes = geometric(g, "sizes", true);
  const bool pinned = g.bool_or("pinned", true);
  g.finish();
  for (const auto& k : kinds) {
    for (double s : sizes) {
      BenchCase c;
      c.generator = "memcpy_grid";
      c.pinned = pinned;
      c.kernel = MemcpyDesc{s, k == "h2d" ? CopyKind::kHostToDevice : k == "d2h" ? CopyKind::kDeviceToHost
                                                                                : CopyKind::kDeviceToDevice};
      out.push_back(std::move(c));
    }
  }
}

void embedding_random(const JsonObject& g, Rng& rng, std::vector<BenchCase>& out) {
  const auto count = g.integer("count", 1, 1000000);
  const auto [b_lo, b_hi] = range(g, "batch", 1, 1 << 24);
  const auto [t_lo, t_hi] = range(g, "tables", 1, 4096);
  const auto [r_lo, r_hi] = range(g, "rows", 1, 1e12);
  const auto dims = int_list(g, "dims", 1, 1024);
  const auto [p_lo, p_hi] = range(g, "pooling", 1, 1e5);
  const auto dists = string_list(g, "distributions", {"uniform", "zipf", "hot_set"});
  const auto [a_lo, a_hi] = g.has("zipf_alpha") ? range(g, "zipf_alpha", 0.01, 10) : std::pair{1.05, 1.05};
  const auto [hr_lo, hr_hi] = g.has("hot_rows_fraction") ? range(g, "hot_rows_fraction", 1e-9, 0.999999)
                                                         : std::pair{0.01, 0.01};
  const auto [ha_lo, ha_hi] = g.has("hot_access_fraction") ? range(g, "hot_access_fraction", 0, 1)
                                                           : std::pair{0.9, 0.9};
  const auto dtypes = string_list(g, "dtypes", {"fp32", "fp16"});
  const auto passes = string_list(g, "passes", {"forward", "backward"});
  const double max_weight = g.quantity_or("max_weight_bytes", Dimension::kBytes, 32.0 * (1ull << 30));
  /// 2^31 - 1: the kernels' index count limit (kernels/embedding_bag.hpp).
  const auto max_indices = g.integer_or("max_indices", 1, (1ll << 31) - 1, 1ll << 28);
  g.finish();
  for (std::int64_t i = 0; i < count; ++i) {
    EmbeddingDesc e;
    e.batch = std::int64_t{1} << static_cast<int>(std::lround(std::log2(rng.log_uniform(b_lo, b_hi))));
    e.batch = std::clamp<std::int64_t>(e.batch, static_cast<std::int64_t>(b_lo), static_cast<std::int64_t>(b_hi));
    const auto ntables = static_cast<std::int64_t>(std::floor(rng.uniform(t_lo, t_hi + 1 - 1e-9)));
    e.weight_dtype = dtype_of(rng.pick(dtypes));
    e.pass = rng.pick(passes) == "forward" ? EmbeddingPass::kForward : EmbeddingPass::kBackward;
    const auto& dist = rng.pick(dists);
    IndexDistribution d;
    if (dist == "zipf") d = IndexDistribution::zipf(rng.uniform(a_lo, a_hi));
    if (dist == "hot_set") d = IndexDistribution::hot_set(rng.uniform(hr_lo, hr_hi), rng.uniform(ha_lo, ha_hi));
    for (std::int64_t t = 0; t < ntables; ++t) {
      EmbeddingTableDesc td;
      td.rows = static_cast<std::int64_t>(std::llround(rng.log_uniform(r_lo, r_hi)));
      td.dim = rng.pick(dims);
      td.pooling = static_cast<double>(std::llround(rng.log_uniform(p_lo, p_hi)));
      td.distribution = d;
      e.tables.push_back(td);
    }
    // Cap memory: shrink the largest tables' rows (not below r_lo) until the weights fit, then
    // the pooling until the indices fit. Shrinking keeps the draw sequence independent of the cap.
    while (embedding_weight_bytes(e) > max_weight) {
      auto& big = *std::max_element(e.tables.begin(), e.tables.end(), [](const auto& a, const auto& b) {
        return a.rows * a.dim < b.rows * b.dim;
      });
      if (big.rows <= static_cast<std::int64_t>(r_lo)) g.fail("max_weight_bytes", "the smallest tables do not fit under max_weight_bytes");
      big.rows = std::max(static_cast<std::int64_t>(r_lo), big.rows / 2);
    }
    while (embedding_index_count(e) > max_indices) {
      auto& big = *std::max_element(e.tables.begin(), e.tables.end(),
                                    [](const auto& a, const auto& b) { return a.pooling < b.pooling; });
      if (big.pooling <= 1) {
        e.batch /= 2;
        if (e.batch < 1) g.fail("max_indices", "no configuration fits under max_indices");
      } else {
        big.pooling = std::max(1.0, std::floor(big.pooling / 2));
      }
    }
    BenchCase c;
    c.generator = "embedding_random";
    c.kernel = std::move(e);
    out.push_back(std::move(c));
  }
}

}  // namespace

const std::vector<ElementwiseOpInfo>& elementwise_ops() {
  static const std::vector<ElementwiseOpInfo> kOps = {
      {"relu", 1, 8},        // y = max(x, 0): read x, write y
      {"add", 1, 12},        // z = x + y
      {"mul", 1, 12},        // z = x * y
      {"sigmoid", 4, 8},     // y = 1 / (1 + exp(-x)); 4 flops per the reference model
      {"bce", 7, 12},        // l = -(t log p + (1-t) log(1-p)): read p, t, write l; 7 flops per the reference model
      {"bias_grad", 1, 4},   // db[c] = sum_r dy[r, c]: read dy once (the [cols] output is negligible)
  };
  return kOps;
}

double gemm_bytes(const GemmDesc& g) {
  const double b = dtype_bytes(g.dtype);
  return static_cast<double>(g.batch) * b *
         (static_cast<double>(g.m) * g.k + static_cast<double>(g.k) * g.n + static_cast<double>(g.m) * g.n);
}

double embedding_weight_bytes(const EmbeddingDesc& e) {
  double s = 0;
  for (const auto& t : e.tables) s += static_cast<double>(t.rows) * static_cast<double>(t.dim);
  return s * dtype_bytes(e.weight_dtype);
}

std::int64_t embedding_index_count(const EmbeddingDesc& e) {
  std::int64_t per_bag = 0;
  for (const auto& t : e.tables) per_bag += static_cast<std::int64_t>(std::llround(t.pooling));
  return per_bag * e.batch;
}

std::string case_label(const BenchCase& c) {
  std::string s = kernel_label(c.kernel);
  if (std::holds_alternative<GemmDesc>(c.kernel)) {
    s += fmt::format(" {}{}", c.trans_a ? 't' : 'n', c.trans_b ? 't' : 'n');
  }
  if (c.bias_cols > 0) s += fmt::format(" ({} cols)", c.bias_cols);
  return s;
}

Sweep parse_sweep(const JsonDocument& doc) {
  const JsonObject root(doc);
  root.require_schema("perfcast.sweep", 1);
  Sweep s;
  s.file = doc.file;
  s.name = root.string("name");
  s.seed = static_cast<std::uint64_t>(root.integer_or("seed", 0, INT64_MAX, 1));
  s.settings.warmup = static_cast<int>(root.integer_or("warmup", 0, 10000, 5));
  s.settings.repetitions = static_cast<int>(root.integer_or("repetitions", 1, 100000, 30));
  s.settings.flush_l2 = root.bool_or("flush_l2", true);
  const auto gens = root.array("generators");
  gens.require_size(1, 1000);
  Rng rng(s.seed);
  for (std::size_t i = 0; i < gens.size(); ++i) {
    const auto g = gens[i].as_object();
    const auto type = g.at("type").as_enum({"gemm_random", "elementwise_grid", "memcpy_grid", "embedding_random"});
    if (type == "gemm_random") gemm_random(g, rng, s.cases);
    if (type == "elementwise_grid") elementwise_grid(g, s.cases);
    if (type == "memcpy_grid") memcpy_grid(g, s.cases);
    if (type == "embedding_random") embedding_random(g, rng, s.cases);
  }
  // An elementwise kernel timed after the L2 flush reads its operands from HBM: say so in its
  // description, or the model serves working sets up to twice its L2 share from L2.
  if (s.settings.flush_l2)
    for (auto& c : s.cases)
      if (auto* e = std::get_if<ElementwiseDesc>(&c.kernel)) e->cold_l2 = true;
  // The elementwise kernels (not the bias-gradient reduction) run one thread per element up to
  // the launch cap: say so, as the model adds their waves of resident threads.
  for (auto& c : s.cases)
    if (auto* e = std::get_if<ElementwiseDesc>(&c.kernel))
      e->thread_per_element = e->op != "bias_grad" && bench::launches_thread_per_element(e->elements);
  root.finish();
  return s;
}

Sweep load_sweep(const std::filesystem::path& path) { return parse_sweep(load_json_file(path)); }

}  // namespace perfcast::profiler
