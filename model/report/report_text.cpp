#include <algorithm>

#include <fmt/format.h>

#include "model/report/report.hpp"

namespace perfcast {

std::string render_text(const Prediction& p, int top_ops) {
  std::string out;
  const auto& t = p.timeline;
  out += fmt::format("perfcast predict: {} on {} ({} x {}, {} rank{})\n", workload_name(p.workload), p.system.name,
                     p.system.nodes, p.system.gpus_per_node, p.system.world_size(), p.system.world_size() > 1 ? "s" : "");
  if (const auto* d = std::get_if<DlrmSpec>(&p.workload)) {
    out += fmt::format("  global batch {}, {} embedding tables, plan: {}\n", d->batch_size, d->tables.size(), p.plan.source);
  } else if (const auto* tw = std::get_if<TraceWorkload>(&p.workload)) {
    std::size_t ops = 0;
    for (const auto& r : tw->graph.ranks) ops += r.ops.size();
    out += fmt::format("  imported trace: {} traced rank{}, {} ops, {} collectives\n", tw->graph.ranks.size(),
                       tw->graph.ranks.size() > 1 ? "s" : "", ops, tw->graph.collectives.size());
  } else {
    const auto& w = std::get<TransformerSpec>(p.workload);
    out += fmt::format("  global batch {} x {} tokens, tp {} pp {} dp {}, {} micro-batches of {} per pipeline\n", w.global_batch,
                       w.seq_len, w.tp, w.pp, w.dp, w.micro_batches(), w.micro_batch);
  }
  for (const auto& o : p.overrides) out += fmt::format("  what-if: {}\n", o);
  out += fmt::format("\npredicted iteration time: {}  ({:.0f} samples/s)\n", format_time(t.iteration_time),
                     t.iteration_time > 0 ? workload_batch(p.workload) / t.iteration_time : 0.0);
  if (!p.provenance.empty()) out += "  " + provenance_headline(p.provenance) + "\n";
  out += "\n";

  out += fmt::format("{:>5} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>10}\n", "rank", "compute", "comm", "exposed",
                     "copy", "host-bound", "gpu idle", "memory");
  auto row = [&](const RankBreakdown& b) {
    const auto& m = p.memory[static_cast<std::size_t>(b.rank)];
    out += fmt::format("{:>5} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>9.1f}G{}\n", b.rank, format_time(b.compute_busy),
                       format_time(b.communication_busy), format_time(b.exposed_communication), format_time(b.copy_busy),
                       format_time(b.host_bound_idle), format_time(b.gpu_idle), m.total() / (1024.0 * 1024 * 1024),
                       m.fits() ? "" : "!");
  };
  const auto& ranks = p.analysis.ranks;
  if (ranks.size() <= 16) {
    for (const auto& b : ranks) row(b);
  } else {
    for (std::size_t i = 0; i < 4; ++i) row(ranks[i]);
    out += fmt::format("  ... {} more ranks (--json lists all)\n", ranks.size() - 8);
    for (std::size_t i = ranks.size() - 4; i < ranks.size(); ++i) row(ranks[i]);
  }

  out += "\nlongest ops on the critical path:\n";
  const auto& cp = p.analysis.critical_path;
  for (std::size_t i = 0; i < cp.size() && static_cast<int>(i) < top_ops; ++i) {
    const double share = t.iteration_time > 0 ? cp[i].time / t.iteration_time * 100 : 0;
    out += fmt::format("  {:>11} {:>5.1f}%  {}\n", format_time(cp[i].time), share, cp[i].label);
  }
  if (!p.warnings.empty()) {
    out += "\n";
    for (const auto& w : p.warnings) out += fmt::format("warning: {}\n", w);
  }
  return out;
}

}  // namespace perfcast
