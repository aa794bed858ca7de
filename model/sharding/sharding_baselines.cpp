#include "model/sharding/sharding_baselines.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "model/graph/memory_estimate.hpp"
#include "model/sharding/plan_shapes.hpp"
#include "model/sharding/hugectr_planner.hpp"

namespace perfcast {
namespace {

/// Longest-first greedy: tables by cost, each onto the rank with the least accumulated
/// cost that still has memory for it (or the emptiest rank when none has).
ShardingPlan greedy(const DlrmSpec& w, const SystemSpec& s, const std::vector<double>& cost, const std::string& name) {
  const int n = s.world_size();
  const Bytes budget = embedding_budget(w, s);
  std::vector<std::size_t> order(w.tables.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return cost[a] > cost[b]; });
  std::vector<double> load(static_cast<std::size_t>(n), 0.0), mem(static_cast<std::size_t>(n), 0.0);
  ShardingPlan p;
  p.source = name;
  p.tables.resize(w.tables.size());
  for (std::size_t t : order) {
    const Bytes bytes = table_bytes(w, w.tables[t]);
    int best = -1;
    for (int r = 0; r < n; ++r) {
      const auto ur = static_cast<std::size_t>(r);
      if (mem[ur] + bytes > budget) continue;
      if (best < 0 || load[ur] < load[static_cast<std::size_t>(best)]) best = r;
    }
    if (best < 0) best = static_cast<int>(std::min_element(mem.begin(), mem.end()) - mem.begin());
    load[static_cast<std::size_t>(best)] += cost[t];
    mem[static_cast<std::size_t>(best)] += bytes;
    p.tables[t] = table_wise(w.tables[t], best);
  }
  return p;
}

/// TorchRec EmbeddingPerfEstimator for one table-wise or column-wise shard of width d
/// (docs/sharding-planners.md section 2.3), seconds: compute = (ids + lookups + outputs)
/// bytes x width penalty / HBM, backward compute 2x, output all-to-all both ways.
double torchrec_shard_perf(const DlrmSpec& w, const SystemSpec& s, const EmbeddingTableSpec& t, double d) {
  const double world = s.world_size();
  const double b = static_cast<double>(w.batch_size) / world;
  const double ids = b * t.pooling * world;            // I x W lookups for the global batch
  const double out = b * world * d * 4.0;              // O x W x d x 4
  const double read = ids * 8;
  const double lookup = ids * std::max(d, 32.0) * dtype_bytes(w.embedding_dtype);
  const double pen = d >= 128 ? 1.0 : d >= 64 ? 1.15 : 1.75;
  const double fwd = (read + lookup + out) * pen / s.gpu.memory_bandwidth;
  const double a2a_bw = s.nodes > 1 ? s.network.nic_bandwidth : std::max(s.fabric_bandwidth, 1e9);
  return fwd * 3 + 2 * out / a2a_bw;
}

ShardingPlan torchrec_greedy(const DlrmSpec& w, const SystemSpec& s) {
  const int n = s.world_size();
  const Bytes budget = embedding_budget(w, s);
  struct Piece {
    std::size_t table;
    std::int64_t col_offset, cols;
    double perf;
    Bytes bytes;
  };
  std::vector<Piece> pieces;
  std::vector<int> shards_of(w.tables.size(), 1);
  for (std::size_t t = 0; t < w.tables.size(); ++t) {
    const auto& spec = w.tables[t];
    const double tw = torchrec_shard_perf(w, s, spec, static_cast<double>(spec.dim));
    // Column-wise: shards of 128 columns (TorchRec's MIN_CW_DIM) when the dim allows it;
    // chosen when its largest shard is faster than the whole table.
    const std::int64_t k = spec.dim >= 256 && spec.dim % 128 == 0 ? std::min<std::int64_t>(spec.dim / 128, n) : 1;
    const double cw = k > 1 ? torchrec_shard_perf(w, s, spec, static_cast<double>(spec.dim) / k) : tw;
    shards_of[t] = static_cast<int>(cw < tw ? k : 1);
    const std::int64_t width = spec.dim / shards_of[t];
    for (int i = 0; i < shards_of[t]; ++i) {
      pieces.push_back({t, i * width, width, shards_of[t] > 1 ? cw : tw,
                        table_bytes(w, spec) * static_cast<double>(width) / static_cast<double>(spec.dim)});
    }
  }
  std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.perf > b.perf; });
  std::vector<double> load(static_cast<std::size_t>(n), 0.0), mem(static_cast<std::size_t>(n), 0.0);
  std::vector<std::vector<Shard>> shards(w.tables.size());
  for (const auto& pc : pieces) {
    int best = -1;
    for (int r = 0; r < n; ++r) {
      const auto ur = static_cast<std::size_t>(r);
      if (mem[ur] + pc.bytes > budget) continue;
      // Shards of one table go to different ranks, as TorchRec's partitioner does.
      bool taken = false;
      for (const auto& sh : shards[pc.table]) taken = taken || sh.rank == r;
      if (taken) continue;
      if (best < 0 || load[ur] < load[static_cast<std::size_t>(best)]) best = r;
    }
    if (best < 0) best = static_cast<int>(std::min_element(mem.begin(), mem.end()) - mem.begin());
    load[static_cast<std::size_t>(best)] += pc.perf;
    mem[static_cast<std::size_t>(best)] += pc.bytes;
    shards[pc.table].push_back(Shard{0, w.tables[pc.table].rows, pc.col_offset, pc.cols, best});
  }
  ShardingPlan p;
  p.source = "torchrec_greedy";
  for (std::size_t t = 0; t < w.tables.size(); ++t) {
    auto& sh = shards[t];
    std::sort(sh.begin(), sh.end(), [](const Shard& a, const Shard& b) { return a.col_offset < b.col_offset; });
    TableSharding ts{sh.size() > 1 ? ShardingType::kColumnWise : ShardingType::kTableWise, {}, sh};
    for (const auto& x : sh) ts.ranks.push_back(x.rank);
    p.tables.push_back(ts);
  }
  return p;
}

}  // namespace

Bytes table_bytes(const DlrmSpec& w, const EmbeddingTableSpec& t) {
  return embedding_weight_and_state_bytes(w, static_cast<double>(t.rows), static_cast<double>(t.dim));
}

Bytes embedding_budget(const DlrmSpec& w, const SystemSpec& s) {
  ShardingPlan empty;
  empty.tables.resize(w.tables.size());
  const auto m = estimate_memory(w, empty, s);
  return m.front().capacity - m.front().total();
}

std::string capacity_hint(const DlrmSpec& w, const SystemSpec& s, bool memory_tiers) {
  double need = 0;
  for (const auto& t : w.tables) need += table_bytes(w, t);
  const Bytes per_rank = embedding_budget(w, s);
  const Bytes host_per_rank = s.host_memory.per_rank(s.gpus_per_node);
  const Bytes usable = std::max(per_rank, 0.0) + (memory_tiers ? host_per_rank : 0.0);
  const int n = s.world_size();
  if (usable > 0 && need <= usable * n) return "";
  std::string hint = fmt::format(
      "no plan can fit: the {} tables need {} (weights and optimizer state), {} rank{} hold{} at most {} for embeddings "
      "({} of HBM each after the {:.0f}% reserve, dense model, I/O buffers and activations{})",
      w.tables.size(), format_bytes(need), n, n == 1 ? "" : "s", n == 1 ? "s" : "", format_bytes(usable * n),
      format_bytes(std::max(per_rank, 0.0)), MemoryOptions{}.reserved_share * 100,
      memory_tiers ? fmt::format(", and {} of host memory", format_bytes(host_per_rank)) : "");
  if (usable > 0) {
    const auto gpus = static_cast<long long>(std::ceil(need / usable));
    hint += fmt::format("; at least {} such GPUs are needed (a system with more GPUs, or --set system.nodes=N where the "
                        "system has a network)", gpus);
  }
  if (!memory_tiers && host_per_rank > 0 && need <= (std::max(per_rank, 0.0) + host_per_rank) * n) {
    hint += "; with tables in host memory they could fit (shard --memory-tiers on)";
  }
  return hint;
}

namespace {

/// Lookups per iteration per byte of a table: the tables that lose least by leaving HBM
/// come first.
double lookup_density(const DlrmSpec& w, const EmbeddingTableSpec& t) {
  return t.pooling / std::max(table_bytes(w, t), 1.0);
}

/// The rank most over its HBM capacity, or -1 when every rank fits its HBM.
int most_over_device(const std::vector<RankMemory>& m) {
  int worst = -1;
  for (const auto& r : m) {
    if (r.fits_device()) continue;
    if (worst < 0 || r.total() - r.capacity > m[static_cast<std::size_t>(worst)].total() - m[static_cast<std::size_t>(worst)].capacity)
      worst = r.rank;
  }
  return worst;
}

}  // namespace

ShardingPlan with_host_memory(const ShardingPlan& plan, const DlrmSpec& w, const SystemSpec& s) {
  ShardingPlan p = plan;
  constexpr double kMinLoadFactor = 0.01;
  for (std::size_t step = 0; step < 16 * p.tables.size() + 16; ++step) {
    const int rank = most_over_device(estimate_memory(w, p, s));
    if (rank < 0) break;
    // On `rank`: the HBM table of least lookup density, else the cached one.
    std::optional<std::size_t> to_host, to_shrink;
    for (std::size_t t = 0; t < p.tables.size(); ++t) {
      const auto& ts = p.tables[t];
      if (ts.type == ShardingType::kDataParallel) continue;
      const bool here = std::any_of(ts.shards.begin(), ts.shards.end(), [&](const Shard& sh) { return sh.rank == rank; });
      if (!here) continue;
      const double d = lookup_density(w, w.tables[t]);
      if (ts.storage == EmbeddingStorage::kHbm && (!to_host || d < lookup_density(w, w.tables[*to_host]))) to_host = t;
      if (ts.storage == EmbeddingStorage::kHostUvmCaching && ts.cache_load_factor > kMinLoadFactor &&
          (!to_shrink || d < lookup_density(w, w.tables[*to_shrink])))
        to_shrink = t;
    }
    if (to_host) {
      p.tables[*to_host].storage = EmbeddingStorage::kHostUvmCaching;
      p.tables[*to_host].cache_load_factor = kDefaultCacheLoadFactor;
    } else if (to_shrink) {
      auto& lf = p.tables[*to_shrink].cache_load_factor;
      lf = std::max(kMinLoadFactor, lf / 2);
    } else {
      break;
    }
  }
  return p;
}

std::vector<NamedPlan> baseline_plans(const DlrmSpec& w, const SystemSpec& s, std::uint64_t seed, bool memory_tiers) {
  const int n = s.world_size();
  std::vector<NamedPlan> out;
  ShardingPlan rr = default_plan(w, n);
  rr.source = "round_robin";
  out.push_back({"round_robin", rr});

  std::mt19937_64 rng(seed);
  ShardingPlan rnd;
  rnd.source = "random";
  for (const auto& t : w.tables) rnd.tables.push_back(table_wise(t, static_cast<int>(rng() % static_cast<std::uint64_t>(n))));
  out.push_back({"random", rnd});

  std::vector<double> size, lookup, size_lookup;
  for (const auto& t : w.tables) {
    size.push_back(table_bytes(w, t));
    lookup.push_back(static_cast<double>(t.dim) * t.pooling);
    size_lookup.push_back(static_cast<double>(t.dim) * t.pooling * std::log10(std::max<double>(static_cast<double>(t.rows), 10.0)));
  }
  out.push_back({"size_greedy", greedy(w, s, size, "size_greedy")});
  out.push_back({"lookup_greedy", greedy(w, s, lookup, "lookup_greedy")});
  out.push_back({"size_lookup_greedy", greedy(w, s, size_lookup, "size_lookup_greedy")});
  out.push_back({"torchrec_greedy", torchrec_greedy(w, s)});
  if (n > 1) {
    if (auto h = hugectr_auto_plan(w, s, hugectr_dgx_h100_options(s.nodes))) out.push_back({h->source, std::move(*h)});
  }
  if (!memory_tiers) return out;
  std::vector<NamedPlan> with_tiers;
  for (auto& b : out) {
    const bool fits = most_over_device(estimate_memory(w, b.plan, s)) < 0;
    with_tiers.push_back(b);
    if (fits) continue;
    ShardingPlan tiered = with_host_memory(b.plan, w, s);
    tiered.source = b.name + "+host_memory";
    with_tiers.push_back({tiered.source, std::move(tiered)});
  }
  return with_tiers;
}

}  // namespace perfcast
