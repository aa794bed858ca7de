#include <algorithm>

#include <fmt/format.h>

#include "model/report/report.hpp"
#include "model/report/workload_metrics.hpp"

namespace perfcast {
namespace {

/// A fused-attention kernel as users know it.
std::string_view attention_kernel_label(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::kFlash2: return "FlashAttention-2";
    case AttentionKernel::kFlash3: return "FlashAttention-3";
    case AttentionKernel::kCudnn: return "cuDNN fused attention, as Transformer Engine runs it";
    case AttentionKernel::kTriton: return "Triton";
    case AttentionKernel::kTileLang: return "TileLang";
  }
  return "?";
}

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string header(const Prediction& p) {
  std::string out = fmt::format("perfcast predict: {} on {} ({} x {}, {} rank{})\n", workload_name(p.workload), p.system.name,
                                p.system.nodes, p.system.gpus_per_node, p.system.world_size(),
                                p.system.world_size() > 1 ? "s" : "");
  if (const auto* d = std::get_if<DlrmSpec>(&p.workload)) {
    const std::size_t sequence = d->sequence_tables();
    const std::string seq = sequence > 0 ? fmt::format(" ({} sequence: unpooled, summed before the interaction)", sequence) : "";
    out += fmt::format("  global batch {}, {} embedding tables{}, plan: {}\n", d->batch_size, d->tables.size(), seq, p.plan.source);
  } else if (const auto* tw = std::get_if<TraceWorkload>(&p.workload)) {
    std::size_t ops = 0;
    for (const auto& r : tw->graph.ranks) ops += r.ops.size();
    out += fmt::format("  imported trace: {} traced rank{}, {} ops, {} collectives\n", tw->graph.ranks.size(),
                       tw->graph.ranks.size() > 1 ? "s" : "", ops, tw->graph.collectives.size());
  } else {
    const auto& w = std::get<TransformerSpec>(p.workload);
    const std::string cp = w.cp > 1 ? fmt::format(" cp {}", w.cp) : "", vp = w.vp > 1 ? fmt::format(" (vp {})", w.vp) : "";
    const std::string ep = w.ep > 1 ? fmt::format(" ep {}", w.ep) : "";
    out += fmt::format("  global batch {} x {} tokens, tp {}{} pp {}{} dp {}{}, {} micro-batches of {} per pipeline\n", w.global_batch,
                       w.seq_len, w.tp, cp, w.pp, vp, w.dp, ep, w.micro_batches(), w.micro_batch);
    if (w.attention == AttentionImpl::kFlash)
      out += fmt::format("  attention kernel: {} ({})\n", attention_kernel_label(w.attention_kernel), w.attention_kernel_basis);
    if (w.moe.enabled()) {
      const std::string shared = w.moe.shared_ffn > 0 ? fmt::format(" + shared experts of width {}", w.moe.shared_ffn) : "";
      out += fmt::format("  mixture of experts: {} experts{}, top-{}, {} dispatcher, expert TP {}{}; {:.3g} of {:.3g} parameters active\n",
                         w.moe.experts, shared, w.moe.top_k, w.moe.all_to_all ? "all-to-all" : "all-gather", w.expert_tp(),
                         w.moe.load_imbalance > 1 ? fmt::format(", busiest expert x{:.2f}", w.moe.load_imbalance) : ", balanced routing",
                         w.active_parameters(), w.parameters());
    }
    if (const auto& x = p.steady_state) {
      out += fmt::format("  simulated {}, {} and {} of the {} micro-batches; the steady state extrapolated at {} per {} (exact: "
                         "both increments agreed; --all-micro-batches simulates every one)\n",
                         x->simulated[0], x->simulated[1], x->simulated[2], x->micro_batches, format_time(x->per_step),
                         x->step == 1 ? std::string("micro-batch") : fmt::format("{} micro-batches", x->step));
    }
  }
  for (const auto& o : p.overrides) out += fmt::format("  what-if: {}\n", o);
  return out;
}

/// Samples per second: whole numbers from 10 on, three significant digits below (a video
/// diffusion step of a few samples takes seconds).
std::string format_rate(double per_s) { return per_s >= 10 ? fmt::format("{:.0f}", per_s) : fmt::format("{:.3g}", per_s); }

std::string throughput(const Prediction& p, const WorkloadMetrics& m) {
  std::string out = fmt::format("\npredicted iteration time: {}  ({} samples/s)\n", format_time(p.timeline.iteration_time),
                                format_rate(m.samples_per_s));
  if (!p.provenance.empty()) out += "  " + provenance_headline(p.provenance) + "\n";
  if (std::holds_alternative<TransformerSpec>(p.workload)) {
    out += fmt::format("  {:.0f} tokens/s; MFU {:.1f}% of {:.0f} TFLOP/s dense per GPU ({:.3g} model FLOPs per iteration: {})\n",
                       m.tokens_per_s, m.mfu * 100, m.peak_flops_per_gpu / 1e12, m.model_flops_per_iteration,
                       model_flops_formula(std::get<TransformerSpec>(p.workload)));
  }
  if (!m.tables.empty()) {
    double total = 0;
    const TableLookupRate* top = &m.tables.front();
    for (const auto& t : m.tables) {
      total += t.bandwidth_GBps;
      if (t.bandwidth_GBps > top->bandwidth_GBps) top = &t;
    }
    out += fmt::format("  embedding lookups: {:.1f} GB/s over {} tables (rows gathered per iteration / iteration time); "
                       "largest {} {:.1f} GB/s (--json lists every table)\n",
                       total, m.tables.size(), top->name, top->bandwidth_GBps);
  }
  return out;
}

struct RankRow {
  std::string label;
  RankBreakdown b;
  double memory_GiB = 0;
  bool fits = true;
};

std::string rank_row(const RankRow& r) {
  const auto& b = r.b;
  return fmt::format("{:>12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8.1f}G{}\n", r.label,
                     format_time(b.period), format_time(b.compute_busy), format_time(b.communication_busy),
                     format_time(b.exposed_communication), format_time(b.copy_busy), format_time(b.host_busy),
                     format_time(b.host_bound_idle), format_time(b.gpu_idle), r.memory_GiB, r.fits ? "" : "!");
}

/// Column-wise min, median (lower middle) or max over ranks: q in {0, 0.5, 1}.
RankRow column_statistic(const std::vector<RankRow>& rows, double q, const std::string& label) {
  RankRow out;
  out.label = label;
  auto pick = [&](auto field) {
    std::vector<double> v;
    for (const auto& r : rows) v.push_back(field(r));
    std::sort(v.begin(), v.end());
    return v[static_cast<std::size_t>(q * double(v.size() - 1))];
  };
  out.b.period = pick([](const RankRow& r) { return r.b.period; });
  out.b.compute_busy = pick([](const RankRow& r) { return r.b.compute_busy; });
  out.b.communication_busy = pick([](const RankRow& r) { return r.b.communication_busy; });
  out.b.exposed_communication = pick([](const RankRow& r) { return r.b.exposed_communication; });
  out.b.copy_busy = pick([](const RankRow& r) { return r.b.copy_busy; });
  out.b.host_busy = pick([](const RankRow& r) { return r.b.host_busy; });
  out.b.host_bound_idle = pick([](const RankRow& r) { return r.b.host_bound_idle; });
  out.b.gpu_idle = pick([](const RankRow& r) { return r.b.gpu_idle; });
  out.memory_GiB = pick([](const RankRow& r) { return r.memory_GiB; });
  return out;
}

/// "host memory (fused_uvm / fused_uvm_caching tables): rank 0 92.1 GiB of 209.5 GiB", the
/// rank using most; "" when no rank keeps tables in host memory.
std::string host_memory_line(const std::vector<RankMemory>& memory) {
  const RankMemory* most = nullptr;
  int ranks = 0;
  for (const auto& m : memory) {
    if (m.host <= 0) continue;
    ++ranks;
    if (!most || m.host > most->host) most = &m;
  }
  if (!most) return "";
  return fmt::format("host memory (fused_uvm / fused_uvm_caching tables) on {} rank{}: most on rank {}, {} of {}{}\n", ranks,
                     ranks == 1 ? "" : "s", most->rank, format_bytes(most->host), format_bytes(most->host_capacity),
                     most->fits_host() ? "" : " (does not fit)");
}

std::string rank_table(const Prediction& p) {
  const auto& ranks = p.analysis.ranks;
  if (ranks.empty()) return "";
  const NotableRanks n = notable_ranks(p.analysis);
  int max_mem = 0;
  std::vector<RankRow> rows;
  for (const auto& b : ranks) {
    const auto& m = p.memory[static_cast<std::size_t>(b.rank)];
    rows.push_back({std::to_string(b.rank), b, m.total() / kGiB, m.fits()});
    if (m.total() > p.memory[static_cast<std::size_t>(max_mem)].total()) max_mem = b.rank;
  }
  std::string out = "\nper rank, each over its own steady-state iteration:\n";
  out += fmt::format("{:>12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}\n", "rank", "iteration", "compute",
                     "comm", "exposed", "copy", "host", "host-bound", "gpu idle", "memory");
  auto tag = [&](int r) {
    std::string t;
    if (r == n.slowest) t += " slowest";
    if (r == n.critical) t += " critical";
    if (r == max_mem) t += " max-mem";
    return t;
  };
  if (ranks.size() <= 16) {
    for (const auto& r : rows) {
      std::string line = rank_row(r);
      if (const std::string t = tag(r.b.rank); !t.empty()) line.insert(line.size() - 1, " <-" + t);
      out += line;
    }
  } else {
    std::vector<int> shown;
    for (int r : {n.slowest, n.critical, max_mem}) {
      if (std::find(shown.begin(), shown.end(), r) != shown.end()) continue;
      shown.push_back(r);
      std::string line = rank_row(rows[static_cast<std::size_t>(r)]);
      line.insert(line.size() - 1, " <-" + tag(r));
      out += line;
    }
    out += fmt::format("{:>12} ({} more ranks: --json lists all)\n", "...", ranks.size() - shown.size());
  }
  out += rank_row(column_statistic(rows, 0, "min"));
  out += rank_row(column_statistic(rows, 0.5, "median"));
  out += rank_row(column_statistic(rows, 1, "max"));
  out += host_memory_line(p.memory);
  return out;
}

std::string iteration_split(const Prediction& p, const WorkloadMetrics& m) {
  if (m.breakdown.empty()) return "";
  const Seconds period = p.analysis.ranks[static_cast<std::size_t>(m.breakdown_rank)].period;
  std::string out = fmt::format("\niteration split of rank {} (critical path), {}:\n", m.breakdown_rank, format_time(period));
  for (const auto& part : m.breakdown) {
    out += fmt::format("  {:>11} {:>5.1f}%  {}\n", format_time(part.time), period > 0 ? part.time / period * 100 : 0.0, part.name);
  }
  return out;
}

/// The collectives of the graph grouped by kind, group shape and how they are timed: the
/// algorithm and protocol NCCL would choose, the link that bounds them and the basis of
/// the time (calibrated, calibrated at other node counts, spec-derived); the groups with
/// the most time first.
std::string collectives_table(const Prediction& p) {
  struct Row {
    std::string kind, algorithm, protocol, bound, basis;
    int ranks = 0, nodes = 0, count = 0;
    double min_bytes = 0, max_bytes = 0, time = 0;
  };
  std::vector<Row> rows;
  const auto& g = p.graph;
  for (std::size_t c = 0; c < g.collectives.size() && c < p.timed.collectives.size(); ++c) {
    const auto& col = g.collectives[c];
    const auto& e = p.timed.collectives[c];
    const auto& group = g.groups[static_cast<std::size_t>(col.group)];
    if (group.size() < 2) continue;
    std::vector<int> domains;
    for (int r : group.ranks) domains.push_back(p.system.domain_of(r));
    std::sort(domains.begin(), domains.end());
    const int nodes = static_cast<int>(std::unique(domains.begin(), domains.end()) - domains.begin());
    double bytes = col.desc.bytes;
    if (col.desc.kind == CollectiveKind::kAllToAllV) {
      bytes = 0;
      for (double b : col.desc.pair_bytes) bytes += b;
      bytes /= group.size();
    }
    Row key{std::string(collective_name(col.desc.kind)), e.algorithm, e.protocol, e.bottleneck, e.basis, group.size(), nodes};
    auto it = std::find_if(rows.begin(), rows.end(), [&](const Row& r) {
      return r.kind == key.kind && r.algorithm == key.algorithm && r.protocol == key.protocol && r.bound == key.bound &&
             r.basis == key.basis && r.ranks == key.ranks && r.nodes == key.nodes;
    });
    if (it == rows.end()) {
      key.min_bytes = key.max_bytes = bytes;
      rows.push_back(key);
      it = rows.end() - 1;
    }
    it->count++;
    it->min_bytes = std::min(it->min_bytes, bytes);
    it->max_bytes = std::max(it->max_bytes, bytes);
    it->time += e.time;
  }
  if (rows.empty()) return "";
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.time > b.time; });
  std::string out = "\ncollectives (grouped; bytes per rank; --json lists each):\n";
  out += fmt::format("  {:<14} {:>6} {:>5} {:>6} {:>21} {:>11}  {:<14} {:<6} {:<6} {}\n", "kind", "ranks", "nodes", "count", "bytes",
                     "time each", "algorithm", "proto", "bound", "time basis");
  const std::size_t shown = std::min<std::size_t>(rows.size(), 12);
  for (std::size_t i = 0; i < shown; ++i) {
    const Row& r = rows[i];
    const std::string bytes = r.min_bytes == r.max_bytes ? format_bytes(r.min_bytes)
                                                         : fmt::format("{}-{}", format_bytes(r.min_bytes), format_bytes(r.max_bytes));
    out += fmt::format("  {:<14} {:>6} {:>5} {:>6} {:>21} {:>11}  {:<14} {:<6} {:<6} {}\n", r.kind, r.ranks, r.nodes, r.count, bytes,
                       format_time(r.time / r.count), r.algorithm, r.protocol, r.bound, r.basis);
  }
  if (rows.size() > shown) out += fmt::format("  ({} more groups)\n", rows.size() - shown);
  return out;
}

}  // namespace

std::string render_text(const Prediction& p, int top_ops) {
  const WorkloadMetrics m = workload_metrics(p);
  std::string out = header(p);
  out += throughput(p, m);
  out += rank_table(p);
  out += iteration_split(p, m);
  out += collectives_table(p);
  out += "\ncritical path by op type (indices in op names shown as #):\n";
  const auto& cp = p.analysis.critical_path;
  const Seconds t = p.timeline.iteration_time;
  for (std::size_t i = 0; i < cp.size() && static_cast<int>(i) < top_ops; ++i) {
    const double share = t > 0 ? cp[i].time / t * 100 : 0;
    out += fmt::format("  {:>11} {:>5.1f}%  {} ({} event{})\n", format_time(cp[i].time), share, cp[i].label, cp[i].count,
                       cp[i].count > 1 ? "s" : "");
  }
  if (!p.warnings.empty()) {
    out += "\n";
    for (const auto& w : p.warnings) out += fmt::format("warning: {}\n", w);
  }
  return out;
}

}  // namespace perfcast
