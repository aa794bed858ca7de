#include <algorithm>
#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/report/report.hpp"
#include "model/report/workload_metrics.hpp"
#include "perfcast/build_info.hpp"
#include "core/file_hash.hpp"
#include "core/utc_time.hpp"
#include "core/json_text.hpp"

namespace perfcast {
namespace {

nlohmann::json workload_json(const Workload& any) {
  if (const auto* d = std::get_if<DlrmSpec>(&any)) {
    nlohmann::json j = {{"name", d->name}, {"file", d->file}, {"batch_size", d->batch_size}, {"tables", d->tables.size()}};
    if (const std::size_t sequence = d->sequence_tables(); sequence > 0) j["sequence_tables"] = sequence;  // unpooled tables
    return j;
  }
  if (const auto* t = std::get_if<TraceWorkload>(&any)) {
    return {{"name", t->name}, {"file", t->file}, {"model", "trace"}, {"batch", t->batch},
            {"traced_ranks", t->graph.ranks.size()}, {"collectives", t->graph.collectives.size()}};
  }
  const auto& w = std::get<TransformerSpec>(any);
  nlohmann::json j = {{"name", w.name}, {"file", w.file}, {"model", "transformer"}, {"global_batch", w.global_batch},
                      {"micro_batch", w.micro_batch}, {"seq_len", w.seq_len}, {"layers", w.layers}, {"hidden", w.hidden},
                      {"parameters", w.parameters()},
                      {"parallelism", {{"tp", w.tp}, {"cp", w.cp}, {"pp", w.pp}, {"vp", w.vp}, {"dp", w.dp}, {"ep", w.ep}}}};
  if (w.attention == AttentionImpl::kFlash)
    j["attention_kernel"] = {{"kernel", attention_kernel_name(w.attention_kernel)}, {"basis", w.attention_kernel_basis}};
  if (w.moe.enabled()) {
    j["active_parameters"] = w.active_parameters();
    j["moe"] = {{"experts", w.moe.experts}, {"top_k", w.moe.top_k}, {"expert_tp", w.expert_tp()},
                {"dispatcher", w.moe.all_to_all ? "alltoall" : "allgather"}, {"load_imbalance", w.moe.load_imbalance},
                {"shared_expert_ffn_hidden", w.moe.shared_ffn}};
  }
  return j;
}

/// Per family: calibrated (file, measured on, held-out error) or spec-derived (basis).
nlohmann::json provenance_json(const std::vector<ProvenanceEntry>& entries) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : entries) {
    nlohmann::json j = {{"what", e.what}, {"calibrated", e.calibrated}, {"basis", e.basis}};
    if (e.set_by_user) j["set_by_user"] = true;
    if (e.calibrated) {
      j["file"] = e.source;
      j["measured_on"] = e.measured_on;
      j["heldout_geomean_abs_error"] = e.heldout_error >= 0 ? nlohmann::json(e.heldout_error) : nlohmann::json();
      if (e.public_measurements) {
        j["rows"] = e.rows;
        j["sources"] = e.sources;
      }
      if (!e.extrapolated.empty()) j["extrapolated"] = e.extrapolated;
    }
    out.push_back(j);
  }
  return out;
}

/// The files read, with their FNV-1a 64 content hashes (core/file_hash.hpp): the system (and
/// the system file whose GPU it names), the workload, then the runtime profile and the
/// calibration files the prediction used, each once.
nlohmann::json input_files(const Prediction& p) {
  std::vector<std::string> read{p.system.file, p.system.gpu_file, workload_file(p.workload)};
  if (p.runtime) read.push_back(p.runtime->file);
  read.push_back(p.kernel_calibration);
  for (const ProvenanceEntry& e : p.provenance) read.push_back(e.source);
  nlohmann::json files = nlohmann::json::array();
  std::vector<std::string> seen;
  for (const std::string& f : read) {
    if (f.empty() || std::find(seen.begin(), seen.end(), f) != seen.end()) continue;
    seen.push_back(f);
    files.push_back({{"file", f}, {"fnv1a64", file_fnv1a64(f)}});
  }
  return files;
}

nlohmann::json context(const Prediction& p) {
  nlohmann::json j = {
      {"perfcast_version", build_info::kVersion},
      {"git_commit", build_info::kGitCommit},
      {"date", utc_now_iso8601()},
      {"system", {{"name", p.system.name}, {"file", p.system.file}, {"gpu", p.system.gpu.name},
                  {"nodes", p.system.nodes}, {"gpus_per_node", p.system.gpus_per_node}}},
      {"workload", workload_json(p.workload)},
      {"plan", p.plan.source},
      {"inputs", input_files(p)},
      {"overrides", p.overrides},
      {"calibration", p.kernel_calibration.empty() ? std::string("none: spec-derived predictors") : p.kernel_calibration},
      {"kernel_predictors", p.kernel_calibration.empty() ? "spec-derived" : "calibrated where the calibration file covers a kernel, spec-derived otherwise"},
      {"collective_model", p.collective_model},
      {"iterations_simulated", p.timeline.iterations},
      {"provenance", provenance_json(p.provenance)},
  };
  if (const auto& x = p.steady_state) {
    // rank0_ops, like the timeline, then lists the first simulated count's ops.
    j["steady_state"] = {{"micro_batches", x->micro_batches}, {"micro_batches_simulated", x->simulated},
                         {"step_micro_batches", x->step}, {"per_step_s", x->per_step}};
  }
  return j;
}

nlohmann::json exposed_by_group(const RankBreakdown& b) {
  nlohmann::json j = nlohmann::json::object();
  for (int k = 0; k < kCommGroupCount; ++k) j[std::string(comm_group_name(static_cast<CommGroup>(k)))] = b.exposed_by_group[static_cast<std::size_t>(k)];
  return j;
}

}  // namespace

std::string context_json(const Prediction& p) { return json_text(context(p)); }

std::string render_json(const Prediction& p) {
  nlohmann::json j;
  j["context"] = context(p);
  j["iteration_time_s"] = p.timeline.iteration_time;
  const WorkloadMetrics m = workload_metrics(p);
  j["samples_per_s"] = m.samples_per_s;
  if (std::holds_alternative<TransformerSpec>(p.workload)) {
    j["tokens_per_s"] = m.tokens_per_s;
    j["mfu"] = {{"value", m.mfu}, {"model_flops_per_iteration", m.model_flops_per_iteration},
                {"peak_flops_per_s_per_gpu", m.peak_flops_per_gpu}, {"gpus", p.system.world_size()},
                {"formula", std::string(model_flops_formula(std::get<TransformerSpec>(p.workload))) + "; MFU = model FLOPs / (iteration time x GPUs x dense peak)"}};
  }
  if (!m.tables.empty()) {
    nlohmann::json tables = nlohmann::json::array();
    for (const auto& t : m.tables)
      tables.push_back({{"table", t.name}, {"bytes_per_iteration", t.bytes_per_iteration}, {"bandwidth_GBps", t.bandwidth_GBps}});
    j["embedding_lookups"] = tables;
  }
  {
    nlohmann::json parts = nlohmann::json::array();
    for (const auto& part : m.breakdown) parts.push_back({{"part", part.name}, {"time_s", part.time}});
    j["iteration_split"] = {{"rank", m.breakdown_rank}, {"parts", parts}};
    const NotableRanks n = notable_ranks(p.analysis);
    j["notable_ranks"] = {{"slowest", n.slowest}, {"critical_path", n.critical}};
  }
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& b : p.analysis.ranks) {
    const auto& m = p.memory[static_cast<std::size_t>(b.rank)];
    ranks.push_back({
        {"rank", b.rank},
        {"period_s", b.period},
        {"compute_busy_s", b.compute_busy},
        {"communication_busy_s", b.communication_busy},
        {"exposed_communication_s", b.exposed_communication},
        {"exposed_communication_by_group_s", exposed_by_group(b)},
        {"copy_busy_s", b.copy_busy},
        {"exposed_copy_s", b.exposed_copy},
        {"critical_path_s", b.critical_path},
        {"host_busy_s", b.host_busy},
        {"host_bound_idle_s", b.host_bound_idle},
        {"gpu_idle_s", b.gpu_idle},
        {"memory", {{"embedding_bytes", m.embedding}, {"dense_bytes", m.dense}, {"io_bytes", m.io}, {"activation_bytes", m.activations},
                    {"reserved_bytes", m.reserved}, {"total_bytes", m.total()}, {"capacity_bytes", m.capacity},
                    {"fits", m.fits()}}},
    });
    if (m.host > 0) {  // tables in host memory: their bytes and the rank's share of the node's host memory
      ranks.back()["memory"]["host_bytes"] = m.host;
      ranks.back()["memory"]["host_capacity_bytes"] = m.host_capacity;
    }
  }
  j["ranks"] = ranks;
  nlohmann::json cp = nlohmann::json::array();
  for (const auto& e : p.analysis.critical_path) cp.push_back({{"op_type", e.label}, {"time_s", e.time}, {"events", e.count}});
  j["critical_path"] = cp;
  // Per-op predictions of rank 0 (one iteration), for inspection.
  nlohmann::json ops = nlohmann::json::array();
  const auto& prog = p.graph.ranks.front();
  for (std::size_t i = 0; i < prog.ops.size(); ++i) {
    const Op& op = prog.ops[i];
    nlohmann::json o = {{"name", op.name}, {"phase", phase_name(op.phase)}, {"stream", stream_name(op.stream)}};
    if (op.collective) {
      const auto& c = p.graph.collectives[static_cast<std::size_t>(*op.collective)];
      const auto& e = p.timed.collectives[static_cast<std::size_t>(*op.collective)];
      o["collective"] = {{"kind", collective_name(c.desc.kind)}, {"time_s", e.time}, {"algorithm", e.algorithm},
                         {"protocol", e.protocol}, {"bus_bandwidth_GBps", e.bus_bandwidth / 1e9}, {"bottleneck", e.bottleneck},
                         {"basis", e.basis}};
      if (c.desc.kind != CollectiveKind::kAllToAllV) o["collective"]["bytes"] = c.desc.bytes;
    } else {
      nlohmann::json ks = nlohmann::json::array();
      for (std::size_t k = 0; k < op.kernels.size(); ++k) {
        const auto& e = p.timed.ops.front()[i].kernels[k];
        ks.push_back({{"kernel", kernel_label(op.kernels[k])}, {"time_s", e.time}, {"predictor", e.predictor},
                      {"bound", e.bound}, {"calibrated", e.calibrated}});
      }
      o["kernels"] = ks;
    }
    ops.push_back(o);
  }
  j["rank0_ops"] = ops;
  j["warnings"] = p.warnings;
  return json_text(j, 2) + "\n";
}

}  // namespace perfcast
