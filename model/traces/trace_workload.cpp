#include "model/traces/trace_workload.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/traces/execution_trace.hpp"
#include "model/traces/trace_kernels.hpp"
#include "model/traces/trace_replay.hpp"
#include "predictors/measurement.hpp"
#include "core/json_text.hpp"

namespace perfcast {
namespace {

using nlohmann::json;

/// Times are written in microseconds with nanosecond digits (Kineto's resolution is 1 us).
std::string us_text(Seconds s) { return fmt::format("{:.3f}us", s * 1e6); }
std::string bytes_text(Bytes b) { return fmt::format("{:.0f}B", b); }

const std::vector<std::string> kKinds = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                         "all_to_allv", "broadcast", "reduce"};

CollectiveKind kind_from_name(const std::string& n) {
  for (int k = 0; k <= static_cast<int>(CollectiveKind::kReduce); ++k)
    if (collective_name(static_cast<CollectiveKind>(k)) == n) return static_cast<CollectiveKind>(k);
  return CollectiveKind::kAllReduce;
}

}  // namespace

TraceWorkload import_trace_workload(const std::vector<KinetoTrace>& traces, const std::vector<const ExecutionTrace*>& ets,
                                    const std::string& name, ImportStats& stats) {
  ReplayOptions options;
  options.execution_traces = ets;
  const auto rg = build_replay_graph(traces, options);

  // Input order -> rank order, as build_replay_graph sorted them.
  std::vector<const KinetoTrace*> by_file;
  for (const auto& info : rg->ranks) {
    const auto it = std::find_if(traces.begin(), traces.end(), [&](const KinetoTrace& t) { return t.file == info.file; });
    by_file.push_back(&*it);
  }

  TraceWorkload w;
  w.name = name;
  w.graph = rg->graph;
  std::map<std::string, ImportStats::Reason> reasons;
  for (std::size_t r = 0; r < rg->ranks.size(); ++r) {
    const KinetoTrace& t = *by_file[r];
    const std::size_t input = static_cast<std::size_t>(by_file[r] - traces.data());
    const ExecutionTrace* et = ets.empty() ? nullptr : ets[input];
    if (et) stats.et_linked.push_back(et->linked);
    const auto shapes = trace_kernel_shapes(t, et);
    const ReplayRankInfo& info = rg->ranks[r];
    auto& ops = w.graph.ranks[r].ops;
    std::vector<Seconds> host;
    std::map<int, int> lead_op;  // lead activity -> op index in this rank's program
    for (std::size_t i = 0; i < ops.size(); ++i) {
      host.push_back(rg->timed.ops[r][i].host_time.value_or(0));
      const int ai = info.activity[i];
      if (ai < 0) continue;
      const GpuActivity& a = t.gpu[static_cast<std::size_t>(ai)];
      stats.ops++;
      const TraceKernelShape& sh = shapes[static_cast<std::size_t>(ai)];
      if (ops[i].collective) {
        const bool sized = w.graph.collectives[static_cast<std::size_t>(*ops[i].collective)].desc.bytes > 0;
        (sized ? stats.recognized : stats.unrecognized)++;
        (sized ? stats.recognized_time : stats.unrecognized_time) += a.duration;
        if (!sized) {
          auto& rs = reasons["NCCL kernel without a message size"];
          rs.count++;
          rs.time += a.duration;
        }
        continue;
      }
      if (sh.recognized() && sh.desc) {
        ops[i].kernels = {*sh.desc};
        lead_op[ai] = static_cast<int>(i);
      } else if (sh.recognized() && lead_op.count(sh.lead)) {
        ops[i].kernels = {MeasuredKernelDesc{a.name, 0.0}};  // predicted with its lead
      } else {
        ops[i].kernels = {MeasuredKernelDesc{a.name, a.duration}};
        stats.unrecognized++;
        stats.unrecognized_time += a.duration;
        auto& rs = reasons[sh.reason.empty() ? "group lead outside the imported steps" : sh.reason];
        rs.count++;
        rs.time += a.duration;
        continue;
      }
      stats.recognized++;
      stats.recognized_time += a.duration;
    }
    w.host_time.push_back(std::move(host));
    w.rank_ids.push_back(info.rank);
    Seconds measured = 0;
    for (Seconds m : info.measured) measured += m;
    w.measured_iteration.push_back(info.measured.empty() ? 0 : measured / static_cast<double>(info.measured.size()));
  }
  // Communicator sizes: the NCCL kernel's own (rank 0's trace), else the job's world size.
  int world = static_cast<int>(traces.size());
  for (const auto& t : traces)
    if (t.world_size) world = std::max(world, *t.world_size);
  w.group_size.assign(w.graph.collectives.size(), world);
  const auto& ops0 = w.graph.ranks[0].ops;
  for (std::size_t i = 0; i < ops0.size(); ++i) {
    const int ai = rg->ranks[0].activity[i];
    if (!ops0[i].collective || ai < 0) continue;
    const auto& c = by_file[0]->gpu[static_cast<std::size_t>(ai)].collective;
    if (c && c->group_size > 0) w.group_size[static_cast<std::size_t>(*ops0[i].collective)] = c->group_size;
  }
  for (std::size_t k = 0; k < w.graph.collectives.size(); ++k) w.collective_measured.push_back(rg->timed.collectives[k].time);
  for (auto& [reason, rs] : reasons) {
    rs.reason = reason;
    stats.reasons.push_back(rs);
  }
  std::sort(stats.reasons.begin(), stats.reasons.end(),
            [](const ImportStats::Reason& a, const ImportStats::Reason& b) { return a.time > b.time; });
  return w;
}

std::string trace_workload_to_json(const TraceWorkload& w, const json& source) {
  json j;
  j["schema"] = "perfcast.workload";
  j["schema_version"] = "1.0";
  j["model"] = "trace";
  j["name"] = w.name;
  j["batch"] = w.batch;
  j["source"] = source;
  json measured = json::array();
  for (Seconds m : w.measured_iteration) measured.push_back(us_text(m));
  j["measured_iteration"] = measured;
  json colls = json::array();
  for (std::size_t k = 0; k < w.graph.collectives.size(); ++k) {
    const auto& c = w.graph.collectives[k];
    json e = {{"kind", std::string(collective_name(c.desc.kind))},
              {"bytes", bytes_text(c.desc.bytes)},
              {"group_size", w.group_size[k]}};
    if (w.collective_measured[k]) e["measured"] = us_text(*w.collective_measured[k]);
    colls.push_back(std::move(e));
  }
  j["collectives"] = colls;
  json ranks = json::array();
  for (std::size_t r = 0; r < w.graph.ranks.size(); ++r) {
    json ops = json::array();
    const auto& prog = w.graph.ranks[r].ops;
    for (std::size_t i = 0; i < prog.size(); ++i) {
      const Op& op = prog[i];
      json o = {{"name", op.name},
                {"phase", std::string(phase_name(op.phase))},
                {"stream", std::string(stream_name(op.stream))},
                {"host_time", us_text(w.host_time[r][i])}};
      if (!op.deps.empty()) o["deps"] = op.deps;
      if (op.host_waits) o["host_waits"] = true;
      if (op.collective) {
        o["collective"] = *op.collective;
      } else if (!op.kernels.empty()) {
        json ks = json::array();
        for (const auto& k : op.kernels) {
          if (const auto* m = std::get_if<MeasuredKernelDesc>(&k))
            ks.push_back({{"family", "measured"}, {"name", m->name}, {"duration", us_text(m->duration)}});
          else
            ks.push_back(kernel_to_json(k));
        }
        o["kernels"] = std::move(ks);
      }
      ops.push_back(std::move(o));
    }
    ranks.push_back({{"rank", w.rank_ids[r]}, {"ops", std::move(ops)}});
  }
  j["ranks"] = ranks;
  return json_text(j, 1) + "\n";
}

TraceWorkload parse_trace_workload(const JsonDocument& doc) {
  const JsonObject root(doc);
  root.require_schema("perfcast.workload", 1);
  if (root.string("model") != "trace") root.fail("model", "expected \"trace\"");
  TraceWorkload w;
  w.file = doc.file;
  w.name = root.string("name");
  w.batch = root.integer_or("batch", 0, 1LL << 50, 0);
  if (const auto src = root.find("source")) {  // free-form provenance; its "gpu" names the traced device
    const json& s = src->raw();
    if (s.is_object() && s.contains("gpu") && s["gpu"].is_string()) w.traced_gpu = s["gpu"].get<std::string>();
  }
  if (const auto m = root.find("measured_iteration")) {
    const JsonArray a = m->as_array();
    for (std::size_t i = 0; i < a.size(); ++i) w.measured_iteration.push_back(a[i].as_quantity(Dimension::kTime));
  }
  const JsonArray colls = root.array("collectives");
  for (std::size_t k = 0; k < colls.size(); ++k) {
    const JsonObject c = colls[k].as_object();
    GraphCollective gc;
    gc.desc.kind = kind_from_name(c.at("kind").as_enum(kKinds));
    if (gc.desc.kind == CollectiveKind::kAllToAllV) gc.desc.kind = CollectiveKind::kAllToAll;  // no pair matrix in traces
    gc.desc.bytes = c.quantity("bytes", Dimension::kBytes);
    if (gc.desc.bytes < 0) c.fail("bytes", "must be >= 0");
    gc.group = 0;
    w.group_size.push_back(static_cast<int>(c.integer("group_size", 1, 1 << 20)));
    const double measured = c.quantity_or("measured", Dimension::kTime, -1);
    w.collective_measured.push_back(measured >= 0 ? std::optional<Seconds>(measured) : std::nullopt);
    if (gc.desc.bytes <= 0 && measured < 0)
      c.fail("bytes", "a collective without a size needs its \"measured\" time");
    c.finish();
    w.graph.collectives.push_back(gc);
  }
  const JsonArray ranks = root.array("ranks");
  ranks.require_size(1, 1 << 16);
  RankGroup all;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const JsonObject rank = ranks[r].as_object();
    w.rank_ids.push_back(static_cast<int>(rank.integer("rank", 0, 1 << 20)));
    all.ranks.push_back(static_cast<int>(r));
    const JsonArray ops = rank.array("ops");
    RankProgram prog;
    std::vector<Seconds> host;
    std::vector<int> collective_order;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const JsonObject o = ops[i].as_object();
      Op op;
      op.name = o.string("name");
      const std::string phase = o.enum_or("phase", {"input", "forward", "backward", "optimizer"}, "forward");
      op.phase = phase == "input" ? Phase::kInput : phase == "backward" ? Phase::kBackward
                 : phase == "optimizer"                                 ? Phase::kOptimizer
                                                                        : Phase::kForward;
      const std::string stream = o.enum_or("stream", {"compute", "communication", "copy"}, "compute");
      op.stream = stream == "communication" ? Stream::kComm : stream == "copy" ? Stream::kCopy : Stream::kCompute;
      host.push_back(o.quantity_or("host_time", Dimension::kTime, 0));
      if (host.back() < 0) o.fail("host_time", "must be >= 0");
      if (const auto deps = o.find("deps")) {
        const JsonArray d = deps->as_array();
        for (std::size_t k = 0; k < d.size(); ++k) op.deps.push_back(static_cast<int>(d[k].as_integer(0, static_cast<std::int64_t>(i) - 1)));
      }
      op.host_waits = o.bool_or("host_waits", false);
      if (const auto c = o.find("collective")) {
        op.collective = static_cast<int>(c->as_integer(0, static_cast<std::int64_t>(w.graph.collectives.size()) - 1));
        collective_order.push_back(*op.collective);
      }
      if (const auto ks = o.find("kernels")) {
        if (op.collective) o.fail("kernels", "an op carries kernels or a collective, not both");
        const JsonArray a = ks->as_array();
        for (std::size_t k = 0; k < a.size(); ++k) {
          const JsonObject kd = a[k].as_object();
          const auto fam = kd.find("family");
          if (fam && fam->is_string() && fam->as_string() == "measured") {
            (void)kd.at("family");
            MeasuredKernelDesc m{kd.string("name"), kd.quantity("duration", Dimension::kTime)};
            if (m.duration < 0) kd.fail("duration", "must be >= 0");
            kd.finish();
            op.kernels.push_back(std::move(m));
          } else {
            op.kernels.push_back(kernel_from_json(kd));
          }
        }
      }
      o.finish();
      prog.ops.push_back(std::move(op));
    }
    rank.finish();
    // Every rank issues the collectives in the same order (the graph contract).
    for (std::size_t k = 0; k < collective_order.size(); ++k) {
      if (collective_order[k] != static_cast<int>(k))
        rank.fail("ops", fmt::format("collective {} is issued as the {}th; each rank issues collectives 0, 1, 2, ... in order",
                                     collective_order[k], k));
    }
    if (collective_order.size() != w.graph.collectives.size())
      rank.fail("ops", fmt::format("issues {} of the {} collectives", collective_order.size(), w.graph.collectives.size()));
    w.graph.ranks.push_back(std::move(prog));
    w.host_time.push_back(std::move(host));
  }
  w.graph.groups.push_back(all);
  if (!w.measured_iteration.empty() && w.measured_iteration.size() != w.graph.ranks.size())
    root.fail("measured_iteration", fmt::format("expected one time per rank ({})", w.graph.ranks.size()));
  root.finish();
  return w;
}

}  // namespace perfcast
