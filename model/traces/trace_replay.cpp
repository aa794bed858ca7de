/// \file trace_replay.cpp
/// build_replay_graph: the traces in rank order, the steps they share, one program per
/// rank (ReplayRankBuilder, replay_rank_builder.hpp), the collectives matched across
/// ranks (measured or predicted), the host model; replay_traces: the simulation of that
/// graph against the measured step times.

#include "model/traces/trace_replay.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "model/traces/execution_trace.hpp"
#include "model/traces/replay_rank_builder.hpp"
#include "model/traces/trace_stats.hpp"
#include "topology/collective_calibration.hpp"
#include "core/error_stats.hpp"
#include "core/json_reader.hpp"

namespace perfcast {
namespace {

using replay::kNoTime;

/// Replayed times are whole microseconds: |error| below 1e-6 is floored there in the
/// geometric means (core/error_stats.hpp).
constexpr double kReplayErrorFloor = 1e-6;

/// Traces ordered by rank; throws on duplicates.
std::vector<std::pair<int, const KinetoTrace*>> by_rank(const std::vector<KinetoTrace>& traces) {
  std::vector<std::pair<int, const KinetoTrace*>> out;
  for (std::size_t i = 0; i < traces.size(); ++i) out.emplace_back(replay_rank(traces, i), &traces[i]);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 1; i < out.size(); ++i) {
    if (out[i].first == out[i - 1].first)
      throw ConfigError(out[i].second->file, "/distributedInfo/rank",
                        fmt::format("rank {} is also the rank of {}; give one trace per rank", out[i].first,
                                    out[i - 1].second->file));
  }
  return out;
}

/// The input checks that need no trace contents.
void check_replay_inputs(const std::vector<KinetoTrace>& input, const ReplayOptions& options) {
  if (input.empty()) throw ConfigError("--kineto", "", "no trace given");
  if (options.kernels == ReplayKernels::kPredicted && !options.system)
    throw ConfigError("--system", "", "predicted kernels need a system file (--system configs/systems/...)");
  if (!options.execution_traces.empty() && options.execution_traces.size() != input.size())
    throw ConfigError("--et", "", fmt::format("{} execution traces for {} Kineto traces; give one per rank",
                                              options.execution_traces.size(), input.size()));
}

/// The ProfilerStep#N numbers every trace has.
std::set<std::int64_t> common_steps(const std::vector<KinetoTrace>& traces) {
  std::set<std::int64_t> common;
  for (const auto& s : traces[0].steps) common.insert(s.number);
  for (std::size_t r = 1; r < traces.size(); ++r) {
    std::set<std::int64_t> mine;
    for (const auto& s : traces[r].steps)
      if (common.count(s.number)) mine.insert(s.number);
    common = std::move(mine);
  }
  if (common.empty()) throw ConfigError(traces.back().file, "/traceEvents", "the traces share no ProfilerStep#N");
  return common;
}

/// Per trace, the first and last index of the common steps; throws when they are not
/// consecutive in a trace.
std::vector<std::pair<int, int>> step_ranges(const std::vector<KinetoTrace>& traces, const std::set<std::int64_t>& common) {
  std::vector<std::pair<int, int>> range(traces.size());
  for (std::size_t r = 0; r < traces.size(); ++r) {
    const auto& steps = traces[r].steps;
    auto index = [&](std::int64_t n) {
      return static_cast<int>(std::find_if(steps.begin(), steps.end(), [&](const TraceStep& s) { return s.number == n; }) -
                              steps.begin());
    };
    range[r] = {index(*common.begin()), index(*common.rbegin())};
    if (range[r].second - range[r].first + 1 != static_cast<int>(common.size()))
      throw ConfigError(traces[r].file, "/traceEvents",
                        fmt::format("steps {}..{} are not consecutive in this trace", *common.begin(), *common.rbegin()));
  }
  return range;
}

/// Per trace, its late start on the aligned clock (the earliest rank starts at 0).
std::vector<Seconds> start_offsets(const std::vector<KinetoTrace>& traces, const std::vector<std::pair<int, int>>& range) {
  const RankAlignment align = align_ranks(traces);
  std::vector<Seconds> start(traces.size());
  for (std::size_t r = 0; r < traces.size(); ++r)
    start[r] = traces[r].steps[static_cast<std::size_t>(range[r].first)].start + align.shift[r];
  const Seconds earliest = *std::min_element(start.begin(), start.end());
  for (auto& s : start) s -= earliest;
  return start;
}

/// Throws unless every rank ran the same number and kinds of NCCL kernels.
void check_collectives_match(const std::vector<KinetoTrace>& traces, const std::vector<std::vector<const GpuActivity*>>& nccl,
                             const std::set<std::int64_t>& common) {
  for (std::size_t r = 1; r < traces.size(); ++r) {
    if (nccl[r].size() != nccl[0].size())
      throw ConfigError(traces[r].file, "/traceEvents",
                        fmt::format("{} NCCL kernels in steps {}..{}, but {} has {}; the ranks must run the same "
                                    "collectives",
                                    nccl[r].size(), *common.begin(), *common.rbegin(), traces[0].file, nccl[0].size()));
    for (std::size_t k = 0; k < nccl[0].size(); ++k) {
      if (nccl[r][k]->collective->kind != nccl[0][k]->collective->kind)
        throw ConfigError(traces[r].file, "/traceEvents",
                          fmt::format("NCCL kernel {} is a {}, but in {} a {}; collectives differ between ranks", k,
                                      collective_name(nccl[r][k]->collective->kind), traces[0].file,
                                      collective_name(nccl[0][k]->collective->kind)));
    }
  }
}

/// The k-th NCCL kernel of every rank is one collective of the group of all: its
/// duration the minimum over ranks (measured), or the collective model's for its size
/// (predicted, with a sample against the measurement; ReplayCollectives decides).
void add_collectives(const std::vector<KinetoTrace>& traces, const std::vector<std::vector<const GpuActivity*>>& nccl,
                     const ReplayOptions& options, ReplayGraph& out) {
  const bool predicted = options.kernels == ReplayKernels::kPredicted;
  RankGroup all;
  for (std::size_t r = 0; r < traces.size(); ++r) all.ranks.push_back(static_cast<int>(r));
  out.graph.groups.push_back(all);
  std::unique_ptr<CollectiveModel> comm;
  if (predicted) comm = make_collective_model(*options.system);
  for (std::size_t k = 0; k < nccl[0].size(); ++k) {
    const TraceCollective& tc = *nccl[0][k]->collective;
    GraphCollective c;
    c.desc.kind = tc.kind == CollectiveKind::kAllToAllV ? CollectiveKind::kAllToAll : tc.kind;
    c.desc.bytes = tc.bytes;
    c.group = 0;
    out.graph.collectives.push_back(c);
    CollectiveEstimate e;
    e.time = std::numeric_limits<double>::infinity();
    for (std::size_t r = 0; r < traces.size(); ++r) e.time = std::min(e.time, nccl[r][k]->duration);
    e.algorithm = "measured";
    // The communicator's size: the trace's, else the world size, else the traced ranks.
    const int n = tc.group_size > 0 ? tc.group_size : traces[0].world_size.value_or(static_cast<int>(traces.size()));
    const bool all_traced = static_cast<int>(traces.size()) >= n;
    const bool model = options.collectives == ReplayCollectives::kModel ||
                       (options.collectives == ReplayCollectives::kAuto && all_traced);
    if (predicted && tc.bytes > 0 && !model) {
      out.measured_collectives++;
      if (!all_traced) out.untraced_communicator = std::max(out.untraced_communicator, n);
    } else if (predicted && tc.bytes > 0) {
      if (n > options.system->world_size())
        throw ConfigError(options.system->file, "/gpus_per_node",
                          fmt::format("the traced collectives run on {} ranks, the system has {} GPUs", n,
                                      options.system->world_size()));
      RankGroup g;
      for (int i = 0; i < n; ++i) g.ranks.push_back(i);
      KernelSample sample;
      sample.family = TraceKernelFamily::kCollective;
      sample.label = fmt::format("{} {} B on {} ranks", collective_name(c.desc.kind), tc.bytes, n);
      sample.measured = e.time;
      sample.kernels = static_cast<int>(traces.size());
      const int step = traces[0].step_of_activity(static_cast<int>(nccl[0][k] - traces[0].gpu.data()));
      if (step >= 0) sample.step = traces[0].steps[static_cast<std::size_t>(step)].number;
      e = comm->estimate(c.desc, g);
      sample.predicted = e.time;
      out.collective_samples.push_back(std::move(sample));
    } else if (predicted) {
      out.unrecognized_collectives++;
    }
    out.timed.collectives.push_back(e);
  }
}

/// ReplayHostModel::kMean: every op but the step markers gets its rank's mean host time.
void use_mean_host_time(ReplayGraph& out) {
  for (std::size_t r = 0; r < out.timed.ops.size(); ++r) {
    auto& timing = out.timed.ops[r];
    const auto& markers = out.ranks[r].step_markers;
    std::vector<char> is_marker(timing.size(), 0);
    for (int m : markers) is_marker[static_cast<std::size_t>(m)] = 1;
    Seconds sum = 0;
    int n = 0;
    for (std::size_t i = 0; i < timing.size(); ++i)
      if (!is_marker[i]) sum += *timing[i].host_time, ++n;
    const Seconds mean = n > 0 ? sum / n : 0;
    for (std::size_t i = 0; i < timing.size(); ++i)
      if (!is_marker[i]) timing[i].host_time = mean;
  }
}

}  // namespace

std::unique_ptr<ReplayGraph> build_replay_graph(const std::vector<KinetoTrace>& input, const ReplayOptions& options) {
  check_replay_inputs(input, options);
  const bool predicted = options.kernels == ReplayKernels::kPredicted;
  const auto ranked = by_rank(input);
  std::vector<KinetoTrace> traces;  // in rank order, for alignment
  std::vector<const ExecutionTrace*> ets;  // in rank order
  traces.reserve(ranked.size());
  for (const auto& [_, t] : ranked) {
    traces.push_back(*t);
    const auto input_index = static_cast<std::size_t>(t - input.data());
    ets.push_back(options.execution_traces.empty() ? nullptr : options.execution_traces[input_index]);
  }
  const std::set<std::int64_t> common = common_steps(traces);
  const std::vector<std::pair<int, int>> range = step_ranges(traces, common);
  const std::vector<Seconds> offset = start_offsets(traces, range);

  auto out = std::make_unique<ReplayGraph>();
  out->gpu = traces[0].device_name();
  for (const auto& t : traces) out->inputs.push_back(t.file);
  std::vector<std::vector<const GpuActivity*>> nccl(traces.size());
  for (std::size_t r = 0; r < traces.size(); ++r) {
    ReplayRankInfo info;
    info.rank = ranked[r].first;
    info.file = traces[r].file;
    info.start_offset = offset[r];
    std::vector<TraceKernelShape> shapes;
    if (predicted) shapes = trace_kernel_shapes(traces[r], ets[r]);
    replay::ReplayRankBuilder b(traces[r], range[r].first, range[r].second, info.start_offset, options.infer_waits, info,
                                predicted ? &shapes : nullptr, predicted ? &options.system->gpu : nullptr,
                                predicted ? options.calibration : nullptr);
    b.build();
    out->graph.ranks.push_back(std::move(b.program));
    out->timed.ops.push_back(std::move(b.timing));
    nccl[r] = std::move(b.nccl);
    out->ranks.push_back(std::move(info));
  }
  check_collectives_match(traces, nccl, common);
  add_collectives(traces, nccl, options, *out);
  if (options.host == ReplayHostModel::kMean) use_mean_host_time(*out);
  out->timed.graph = &out->graph;
  return out;
}

std::vector<FamilyError> family_errors(const std::vector<const KernelSample*>& samples) {
  std::vector<FamilyError> out;
  for (int f = 0; f < kTraceKernelFamilies; ++f) {
    const auto fam = static_cast<TraceKernelFamily>(f);
    FamilyError e;
    e.name = std::string(trace_family_name(fam));
    std::vector<double> errors;
    for (const KernelSample* s : samples) {
      if (s->family != fam || s->measured <= 0) continue;
      e.count++;
      e.measured += s->measured;
      e.predicted += s->predicted;
      errors.push_back(s->predicted / s->measured - 1);
    }
    if (e.count == 0) continue;
    e.geomean_abs_error = geomean_abs_error(errors, kReplayErrorFloor);
    e.bias = e.measured > 0 ? e.predicted / e.measured - 1 : 0;
    out.push_back(std::move(e));
  }
  return out;
}

ReplayResult replay_traces(const std::vector<KinetoTrace>& traces, const ReplayOptions& options) {
  ReplayResult res;
  res.options = options;
  res.replay = build_replay_graph(traces, options);
  const ReplayGraph& rg = *res.replay;
  HostSpec host;  // all host time comes from OpTiming::host_time
  host.op_overhead = 0;
  host.launch_overhead = 0;
  host.collective_launch_overhead = 0;
  SimulationOptions sim;
  sim.iterations = 2;  // the minimum; iteration 0 (the traced window as it ran) is reported
  res.timeline = simulate(rg.timed, host, sim);

  // Host time at each marker of iteration 0, per rank.
  std::vector<std::vector<Seconds>> host_end(rg.graph.ranks.size());
  for (std::size_t r = 0; r < host_end.size(); ++r) host_end[r].assign(rg.graph.ranks[r].ops.size(), kNoTime);
  for (const auto& e : res.timeline.events) {
    if (e.iteration == 0 && e.lane == Lane::kHost)
      host_end[static_cast<std::size_t>(e.rank)][static_cast<std::size_t>(e.op)] = e.end;
  }
  std::vector<double> rank_errors, step_errors;  // error = simulated / measured - 1
  for (std::size_t r = 0; r < rg.ranks.size(); ++r) {
    const ReplayRankInfo& info = rg.ranks[r];
    ReplayRankResult rr;
    rr.rank = info.rank;
    for (std::size_t k = 0; k < info.measured.size(); ++k) {
      ReplayStepResult s;
      s.step = info.step_numbers[k];
      s.measured = info.measured[k];
      s.simulated = host_end[r][static_cast<std::size_t>(info.step_markers[k + 1])] -
                    host_end[r][static_cast<std::size_t>(info.step_markers[k])];
      rr.measured += s.measured;
      rr.simulated += s.simulated;
      step_errors.push_back(s.error());
      if (options.evaluate.has_rank(info.rank) && options.evaluate.has_step(s.step)) {
        res.selected_measured += s.measured;
        res.selected_simulated += s.simulated;
        res.selected_steps++;
      }
      rr.steps.push_back(s);
    }
    if (!rr.steps.empty()) {
      rr.measured /= static_cast<double>(rr.steps.size());
      rr.simulated /= static_cast<double>(rr.steps.size());
    }
    rank_errors.push_back(rr.error());
    res.ranks.push_back(std::move(rr));
  }
  const ErrorSummary over_ranks = summarize_errors(rank_errors, kReplayErrorFloor);
  const ErrorSummary over_steps = summarize_errors(step_errors, kReplayErrorFloor);
  res.geomean_abs_error = over_ranks.geomean_abs;
  res.max_abs_error = over_ranks.max_abs;
  res.step_geomean_abs_error = over_steps.geomean_abs;
  res.step_max_abs_error = over_steps.max_abs;
  res.step_count = static_cast<int>(over_steps.count);
  if (options.kernels == ReplayKernels::kPredicted) {
    res.system = fmt::format("{} ({})", options.system->name, options.system->file);
    std::vector<const KernelSample*> all;
    for (const auto& info : rg.ranks) {
      for (const auto& s : info.samples)
        if (options.evaluate.has_rank(s.rank) && options.evaluate.has_step(s.step)) all.push_back(&s);
      res.unrecognized += info.unrecognized;
      res.unrecognized_time += info.unrecognized_time;
      res.predicted_kernels += info.predicted_kernels;
    }
    for (const auto& s : rg.collective_samples)
      if (options.evaluate.has_step(s.step)) all.push_back(&s);
    res.unrecognized += rg.unrecognized_collectives * static_cast<int>(rg.ranks.size());
    res.families = family_errors(all);
  }
  return res;
}

int replay_rank(const std::vector<KinetoTrace>& traces, std::size_t i) {
  const bool all_ranked = std::all_of(traces.begin(), traces.end(), [](const KinetoTrace& t) { return t.rank.has_value(); });
  return all_ranked ? *traces[i].rank : static_cast<int>(i);
}

}  // namespace perfcast
