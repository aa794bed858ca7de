#include "model/report/workload_metrics.hpp"

namespace perfcast {
namespace {

std::string fmt_group(int k) {
  return "exposed " + std::string(comm_group_name(static_cast<CommGroup>(k))) + " communication";
}

double transformer_flops_per_token(const TransformerSpec& w) {
  if (w.diffusion()) return dit_model_flops_per_sample(w) / double(w.seq_len);
  // MoE: the parameters a token meets (top_k experts per layer), as Megatron counts MoE FLOPs.
  // Scores and values: 2 x 3 (forward and backward) x s x n x (d_qk + d_v) per layer and
  // token: 12 L h s for standard attention where n x head_dim = h.
  const double attention = 6.0 * double(w.layers) * double(w.seq_len) * double(w.heads) * double(w.qk_dim() + w.v_dim());
  return 6.0 * w.active_parameters() + attention;
}

std::vector<BreakdownPart> split_iteration(const RankBreakdown& b, bool pipelined) {
  std::vector<BreakdownPart> parts;
  parts.push_back({"compute", b.compute_busy});
  for (int k = 0; k < kCommGroupCount; ++k) {
    const Seconds t = b.exposed_by_group[static_cast<std::size_t>(k)];
    if (t > 0) parts.push_back({fmt_group(k), t});
  }
  parts.push_back({"exposed copies", b.exposed_copy});
  const Seconds host_bound = std::min(b.host_bound_idle, b.gpu_idle);
  parts.push_back({"host-bound idle", host_bound});
  parts.push_back({pipelined ? "pipeline bubble and waits" : "waiting for other ranks", b.gpu_idle - host_bound});
  return parts;
}

}  // namespace

WorkloadMetrics workload_metrics(const Prediction& p) {
  WorkloadMetrics m;
  const Seconds t = p.timeline.iteration_time;
  if (t > 0) m.samples_per_s = double(workload_batch(p.workload)) / t;
  bool pipelined = false;
  if (const auto* w = std::get_if<TransformerSpec>(&p.workload)) {
    pipelined = w->pp > 1;
    const double tokens = double(w->global_batch) * double(w->seq_len);
    m.model_flops_per_iteration = tokens * transformer_flops_per_token(*w);
    m.peak_flops_per_gpu = p.system.gpu.peak(w->precision);
    if (t > 0) {
      m.tokens_per_s = tokens / t;
      if (m.peak_flops_per_gpu > 0)
        m.mfu = m.model_flops_per_iteration / (t * p.system.world_size() * m.peak_flops_per_gpu);
    }
  } else if (const auto* d = std::get_if<DlrmSpec>(&p.workload)) {
    for (const auto& tb : d->tables) {
      TableLookupRate r;
      r.name = tb.name;
      r.bytes_per_iteration = double(d->batch_size) * tb.pooling * double(tb.dim) * dtype_bytes(d->embedding_dtype);
      r.bandwidth_GBps = t > 0 ? r.bytes_per_iteration / t / 1e9 : 0;
      m.tables.push_back(r);
    }
  }
  if (!p.analysis.ranks.empty()) {
    m.breakdown_rank = notable_ranks(p.analysis).critical;
    m.breakdown = split_iteration(p.analysis.ranks[static_cast<std::size_t>(m.breakdown_rank)], pipelined);
  }
  return m;
}

}  // namespace perfcast
