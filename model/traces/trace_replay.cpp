#include "model/traces/trace_replay.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "model/traces/execution_trace.hpp"
#include "model/traces/trace_stats.hpp"
#include "predictors/kernel_calibration.hpp"
#include "predictors/registry.hpp"
#include "topology/collective_calibration.hpp"
#include "core/json_reader.hpp"

namespace perfcast {
namespace {

/// Kineto timestamps are whole microseconds on one GPU clock: a consumer may appear to
/// start up to a tick before its producer ends. 2 us allows one tick on each side.
constexpr Seconds kDependencyTolerance = 2e-6;
/// How far back on a lane a contradicted dependency may step (bounds the work per op).
constexpr int kWalkBackLimit = 256;
constexpr Seconds kNoTime = std::numeric_limits<double>::quiet_NaN();
/// ReplayOptions::infer_waits: a start later than launch, stream and dependencies by more
/// than this is unexplained (kernel launch latency on an idle GPU is a few us), and a
/// producer must have ended within this before it.
constexpr Seconds kUnexplainedStart = 10e-6;
/// How many earlier ops infer_waits searches for the producer.
constexpr int kInferSearchLimit = 1024;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

bool is_stream_sync(std::string_view n) {
  return n == "cudaStreamSynchronize" || n == "cudaEventSynchronize" || n == "cuStreamSynchronize" ||
         n == "cuEventSynchronize";
}
bool is_device_sync(std::string_view n) { return n == "cudaDeviceSynchronize" || n == "cuCtxSynchronize"; }
bool is_stream_wait(std::string_view n) { return n == "cudaStreamWaitEvent" || n == "cuStreamWaitEvent"; }

/// Copies the host waits for: the synchronous cudaMemcpy, and copies into pageable host
/// memory, which CUDA performs synchronously (CUDA Runtime API, "API synchronization
/// behavior": "For transfers from device memory to pageable host memory, the function
/// will return only once the copy has completed").
bool host_blocking_copy(const GpuActivity& a, const RuntimeCall& c) {
  if (a.kind != GpuActivityKind::kMemcpy) return false;
  return c.name == "cudaMemcpy" || c.name == "cuMemcpyDtoH" || (contains(a.name, "DtoH") && contains(a.name, "Pageable"));
}

/// Trace stream -> simulator lane (see the file comment of trace_replay.hpp).
struct LaneMap {
  std::map<std::int64_t, Stream> of;
  std::vector<std::string> labels;
};

LaneMap map_lanes(const KinetoTrace& t) {
  std::set<std::int64_t> nccl, all;
  std::map<std::int64_t, Seconds> kernel_time;
  for (const auto& a : t.gpu) {
    all.insert(a.stream);
    if (a.is_nccl()) nccl.insert(a.stream);
    else if (a.kind == GpuActivityKind::kKernel) kernel_time[a.stream] += a.duration;
  }
  std::int64_t compute = -1;
  Seconds best = -1;
  for (const auto& [s, time] : kernel_time) {
    if (!nccl.count(s) && time > best) {
      best = time;
      compute = s;
    }
  }
  LaneMap m;
  for (auto s : all) {
    const Stream lane = nccl.count(s) ? Stream::kComm : s == compute ? Stream::kCompute : Stream::kCopy;
    m.of[s] = lane;
    m.labels.push_back(fmt::format("stream {} -> {}", s, stream_name(lane)));
  }
  return m;
}

Phase phase_of(const KinetoTrace& t, int call) {
  for (int o = t.runtime[static_cast<std::size_t>(call)].op; o >= 0; o = t.ops[static_cast<std::size_t>(o)].parent) {
    const std::string n = lower(t.ops[static_cast<std::size_t>(o)].name);
    if (contains(n, "backward") || n.rfind("autograd::", 0) == 0) return Phase::kBackward;
    if (contains(n, "optimizer")) return Phase::kOptimizer;
  }
  return Phase::kForward;
}

/// The framework op a call belongs to: its top-level cpu_op, else its innermost
/// annotation, else the call itself.
std::string op_label(const KinetoTrace& t, int call) {
  const RuntimeCall& c = t.runtime[static_cast<std::size_t>(call)];
  if (const int top = t.top_level_cpu_op(call); top >= 0) return t.ops[static_cast<std::size_t>(top)].name;
  if (c.op >= 0) return t.ops[static_cast<std::size_t>(c.op)].name;
  return c.name;
}

struct ThreadState {
  Stream current = Stream::kCompute;  ///< lane of the thread's last non-NCCL launch
  int last_gpu_op = -1;
  bool join_pending = false;
  std::array<std::size_t, kStreamCount> join_snapshot{};  ///< lane history sizes at the join
};

/// Builds one rank's program.
class RankBuilder {
 public:
  /// `shapes` and `gpu`: predicted kernels (both set) or measured ones (both null).
  RankBuilder(const KinetoTrace& t, int k0, int k1, Seconds offset, bool infer_waits, ReplayRankInfo& info,
              const std::vector<TraceKernelShape>* shapes = nullptr, const GpuSpec* gpu = nullptr,
              const KernelCalibration* calibration = nullptr)
      : t_(t), k0_(k0), k1_(k1), offset_(offset), infer_waits_(infer_waits), info_(info), lanes_(map_lanes(t)),
        shapes_(shapes), gpu_(gpu), calibration_(calibration) {
    has_nccl_.assign(t.ops.size(), 0);
    for (const auto& a : t.gpu) {
      if (!a.is_nccl() || a.launch < 0) continue;
      for (int o = t.runtime[static_cast<std::size_t>(a.launch)].op; o >= 0; o = t.ops[static_cast<std::size_t>(o)].parent)
        has_nccl_[static_cast<std::size_t>(o)] = 1;
    }
    info_.lanes = lanes_.labels;
  }

  void build() {
    std::vector<std::vector<int>> calls(t_.steps.size());
    for (std::size_t i = 0; i < t_.runtime.size(); ++i) {
      const int k = t_.step_at(t_.runtime[i].start);
      if (k >= k0_ && k <= k1_) calls[static_cast<std::size_t>(k)].push_back(static_cast<int>(i));
    }
    cursor_ = t_.steps[static_cast<std::size_t>(k0_)].start;
    for (int k = k0_; k <= k1_; ++k) {
      const TraceStep& s = t_.steps[static_cast<std::size_t>(k)];
      marker(fmt::format("ProfilerStep#{}", s.number), k == k0_ ? offset_ : std::max(0.0, s.start - cursor_));
      cursor_ = std::max(cursor_, s.start);
      info_.step_numbers.push_back(s.number);
      info_.measured.push_back(t_.step_wall(k));
      step_number_ = s.number;
      for (int c : calls[static_cast<std::size_t>(k)]) process(c);
    }
    const auto next = static_cast<std::size_t>(k1_) + 1;
    const Seconds end = next < t_.steps.size() ? t_.steps[next].start : t_.steps[static_cast<std::size_t>(k1_)].end();
    marker("end", std::max(0.0, end - cursor_));
    info_.launch_call_mean = launch_calls_ > 0 ? launch_time_ / launch_calls_ : 0;
    const Seconds to_sim = offset_ - t_.steps[static_cast<std::size_t>(k0_)].start;
    for (std::size_t i = 0; i < measured_end_.size(); ++i) {
      info_.measured_start.push_back(measured_start_[i] + to_sim);
      info_.measured_end.push_back(measured_end_[i] + to_sim);
    }
  }

  RankProgram program;
  std::vector<OpTiming> timing;
  std::vector<const GpuActivity*> nccl;  ///< per collective op, in host order
  std::vector<int> nccl_ops;

 private:
  const KinetoTrace& t_;
  int k0_, k1_;
  Seconds offset_;
  bool infer_waits_;
  ReplayRankInfo& info_;
  LaneMap lanes_;
  const std::vector<TraceKernelShape>* shapes_;
  const GpuSpec* gpu_;
  const KernelCalibration* calibration_;
  std::int64_t step_number_ = -1;  ///< ProfilerStep#N being built
  std::unordered_map<int, std::size_t> sample_of_lead_;  ///< lead activity -> info_.samples index
  std::vector<char> has_nccl_;
  std::vector<Seconds> measured_start_, measured_end_;  ///< per op; NaN for markers and syncs
  std::array<std::vector<int>, kStreamCount> history_;  ///< ops per lane in issue order
  std::unordered_map<std::int64_t, ThreadState> threads_;
  std::unordered_map<std::int64_t, int> stream_last_;  ///< last op per trace stream
  int current_activity_ = -1;  ///< GPU activity of the op being pushed
  Seconds cursor_ = 0;  ///< host time (trace clock) up to which host time is accounted
  Seconds launch_time_ = 0;
  int launch_calls_ = 0;

  int push(Op op, Seconds host_time, Seconds measured_start, Seconds measured_end, std::vector<Estimate> kernels) {
    program.ops.push_back(std::move(op));
    OpTiming tm;
    tm.kernels = std::move(kernels);
    tm.host_time = host_time;
    info_.host_time += host_time;
    timing.push_back(std::move(tm));
    measured_start_.push_back(measured_start);
    measured_end_.push_back(measured_end);
    info_.activity.push_back(std::exchange(current_activity_, -1));
    return static_cast<int>(program.ops.size()) - 1;
  }

  void marker(std::string name, Seconds host_time) {
    Op op;
    op.name = std::move(name);
    op.phase = Phase::kInput;
    info_.step_markers.push_back(push(std::move(op), host_time, kNoTime, kNoTime, {}));
  }

  /// The latest op on `lane` among the first `upto` issued that had ended when the
  /// consumer started (measured); -1 if none within kWalkBackLimit.
  int consistent_producer(Stream lane, std::size_t upto, Seconds consumer_start) {
    const auto& h = history_[static_cast<std::size_t>(lane)];
    const std::size_t stop = upto > static_cast<std::size_t>(kWalkBackLimit) ? upto - kWalkBackLimit : 0;
    for (std::size_t j = upto; j > stop; --j) {
      const int op = h[j - 1];
      if (measured_end_[static_cast<std::size_t>(op)] <= consumer_start + kDependencyTolerance) {
        if (j != upto) info_.stepped_back++;
        return op;
      }
    }
    if (upto > 0) info_.stepped_back++;
    return -1;
  }

  /// ReplayOptions::infer_waits for one op about to be pushed.
  void infer_wait(Op& op, const GpuActivity& a, const RuntimeCall& c) {
    Seconds explained = c.end();
    if (const auto it = stream_last_.find(a.stream); it != stream_last_.end())
      explained = std::max(explained, measured_end_[static_cast<std::size_t>(it->second)]);
    for (int d : op.deps) explained = std::max(explained, measured_end_[static_cast<std::size_t>(d)]);
    if (a.start <= explained + kUnexplainedStart) return;
    int best = -1;
    const int n = static_cast<int>(measured_end_.size());
    for (int i = n - 1; i >= 0 && i >= n - kInferSearchLimit; --i) {
      const Seconds e = measured_end_[static_cast<std::size_t>(i)];
      if (std::isnan(e) || e > a.start + kDependencyTolerance || e < a.start - kUnexplainedStart) continue;
      if (best < 0 || e > measured_end_[static_cast<std::size_t>(best)]) best = i;
    }
    if (best >= 0) {
      op.deps.push_back(best);
      info_.inferred++;
    }
  }

  /// The kernel of activity `ai`: measured, or (predicted kernels) the lead's descriptor,
  /// a zero-length member of a predicted group, or measured when unrecognized.
  KernelDesc kernel_of(int ai, const GpuActivity& a) {
    if (!shapes_) return MeasuredKernelDesc{a.name, a.duration};
    const TraceKernelShape& sh = (*shapes_)[static_cast<std::size_t>(ai)];
    if (sh.recognized() && sh.family != TraceKernelFamily::kCollective) {
      if (sh.desc) {
        sample_of_lead_[ai] = info_.samples.size();
        KernelSample sample;
        sample.family = sh.family;
        sample.label = kernel_label(*sh.desc);
        sample.measured = a.duration;
        sample.kernels = 1;
        sample.rank = info_.rank;
        sample.step = step_number_;
        info_.samples.push_back(std::move(sample));
        info_.predicted_kernels++;
        return *sh.desc;
      }
      if (const auto it = sample_of_lead_.find(sh.lead); it != sample_of_lead_.end()) {
        KernelSample& sample = info_.samples[it->second];
        sample.measured += a.duration;
        sample.kernels++;
        info_.predicted_kernels++;
        return MeasuredKernelDesc{a.name, 0.0};  // predicted with its lead
      }
    }
    info_.unrecognized++;
    info_.unrecognized_time += a.duration;
    return MeasuredKernelDesc{a.name, a.duration};
  }

  static Seconds clamp_wait(Seconds gpu_end, const RuntimeCall& c) {
    return std::clamp(std::isnan(gpu_end) ? c.start : gpu_end, c.start, c.end());
  }

  void process(int ci) {
    const RuntimeCall& c = t_.runtime[static_cast<std::size_t>(ci)];
    ThreadState& th = threads_[c.tid];
    if (!c.activities.empty()) {
      launch(ci, c, th);
    } else if (is_stream_sync(c.name) || is_device_sync(c.name)) {
      sync(ci, c, th);
    } else if (is_stream_wait(c.name)) {
      const int inner = t_.innermost_cpu_op(ci);
      if (inner >= 0 && has_nccl_[static_cast<std::size_t>(inner)]) return;  // part of a collective call
      th.join_pending = true;
      for (int l = 0; l < kStreamCount; ++l) th.join_snapshot[static_cast<std::size_t>(l)] = history_[static_cast<std::size_t>(l)].size();
    }
  }

  void launch(int ci, const RuntimeCall& c, ThreadState& th) {
    bool first = true;
    for (int ai : c.activities) {
      const GpuActivity& a = t_.gpu[static_cast<std::size_t>(ai)];
      const bool blocking = host_blocking_copy(a, c);
      Seconds host = 0;
      if (first) host = std::max(0.0, (blocking ? c.start : c.end()) - cursor_);
      Op op;
      op.phase = phase_of(t_, ci);
      op.stream = a.is_nccl() ? Stream::kComm : lanes_.of.at(a.stream);
      op.host_waits = blocking;
      if (th.join_pending) {
        bool added = false;
        for (int l = 0; l < kStreamCount; ++l) {
          const auto lane = static_cast<Stream>(l);
          if (lane == op.stream) continue;
          const int d = consistent_producer(lane, th.join_snapshot[static_cast<std::size_t>(l)], a.start);
          if (d >= 0) {
            op.deps.push_back(d);
            added = true;
          }
        }
        if (added) info_.joins++;
        th.join_pending = false;
      }
      std::vector<Estimate> kernels;
      if (a.is_nccl()) {
        // The collective waits for the front of the stream that issued it.
        const Stream issuer = th.current == Stream::kComm ? Stream::kCompute : th.current;
        const int d = consistent_producer(issuer, history_[static_cast<std::size_t>(issuer)].size(), a.start);
        if (d >= 0) op.deps.push_back(d);
        op.name = a.collective->name.empty() ? std::string(collective_name(a.collective->kind)) : a.collective->name;
        op.collective = static_cast<int>(nccl.size());  // the k-th NCCL kernel is graph collective k
        info_.collectives++;
      } else {
        op.name = op_label(t_, ci);
        const KernelDesc k = kernel_of(ai, a);
        if (gpu_ && !std::holds_alternative<MeasuredKernelDesc>(k))
          kernels.push_back(predict_with_calibration(k, *gpu_, calibration_));
        else
          kernels.push_back(predict_kernel(k, GpuSpec{}));
        if (const auto it = sample_of_lead_.find(ai); it != sample_of_lead_.end() && shapes_->at(static_cast<std::size_t>(ai)).desc)
          info_.samples[it->second].predicted = kernels.back().time;
        op.kernels.push_back(k);
        info_.gpu_ops++;
      }
      if (infer_waits_) infer_wait(op, a, c);
      std::sort(op.deps.begin(), op.deps.end());
      op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
      const Stream lane = op.stream;
      stream_last_[a.stream] = static_cast<int>(program.ops.size());
      current_activity_ = ai;
      const int idx = push(std::move(op), host, a.start, a.end(), std::move(kernels));
      if (a.is_nccl()) {
        nccl.push_back(&a);
        nccl_ops.push_back(idx);
      } else {
        th.current = lane;
      }
      history_[static_cast<std::size_t>(lane)].push_back(idx);
      th.last_gpu_op = idx;
      if (blocking) {
        info_.host_syncs++;
        const Seconds done = clamp_wait(a.end(), c);
        info_.blocked += done - c.start;
        cursor_ = std::max(cursor_, done);
      } else if (first) {
        cursor_ = std::max(cursor_, c.end());
        launch_time_ += c.duration;
        launch_calls_++;
      }
      first = false;
    }
  }

  void sync(int ci, const RuntimeCall& c, ThreadState& th) {
    Op op;
    op.name = c.name;
    op.phase = phase_of(t_, ci);
    op.host_waits = true;
    Seconds awaited_end = kNoTime;
    if (is_device_sync(c.name)) {
      op.stream = Stream::kCompute;
      for (const auto& h : history_) {
        if (h.empty()) continue;
        op.deps.push_back(h.back());
        const Seconds e = measured_end_[static_cast<std::size_t>(h.back())];
        awaited_end = std::isnan(awaited_end) ? e : std::max(awaited_end, e);
      }
    } else if (th.last_gpu_op >= 0) {
      op.stream = program.ops[static_cast<std::size_t>(th.last_gpu_op)].stream;
      op.deps.push_back(th.last_gpu_op);
      awaited_end = measured_end_[static_cast<std::size_t>(th.last_gpu_op)];
    }
    if (op.deps.empty()) return;  // nothing to wait for: plain host time
    std::sort(op.deps.begin(), op.deps.end());
    const KernelDesc k = MeasuredKernelDesc{c.name, 0.0};
    op.kernels.push_back(k);
    push(std::move(op), std::max(0.0, c.start - cursor_), kNoTime, kNoTime, {predict_kernel(k, GpuSpec{})});
    info_.host_syncs++;
    const Seconds done = clamp_wait(awaited_end, c);
    info_.blocked += done - c.start;
    cursor_ = std::max(cursor_, done);
  }
};

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

}  // namespace

std::unique_ptr<ReplayGraph> build_replay_graph(const std::vector<KinetoTrace>& input, const ReplayOptions& options) {
  if (input.empty()) throw ConfigError("--kineto", "", "no trace given");
  const bool predicted = options.kernels == ReplayKernels::kPredicted;
  if (predicted && !options.system)
    throw ConfigError("--system", "", "predicted kernels need a system file (--system configs/systems/...)");
  if (!options.execution_traces.empty() && options.execution_traces.size() != input.size())
    throw ConfigError("--et", "", fmt::format("{} execution traces for {} Kineto traces; give one per rank",
                                              options.execution_traces.size(), input.size()));
  const auto ranked = by_rank(input);
  std::vector<KinetoTrace> traces;  // in rank order, for alignment
  std::vector<const ExecutionTrace*> ets;  // in rank order
  traces.reserve(ranked.size());
  for (const auto& [_, t] : ranked) {
    traces.push_back(*t);
    const auto input_index = static_cast<std::size_t>(t - input.data());
    ets.push_back(options.execution_traces.empty() ? nullptr : options.execution_traces[input_index]);
  }

  // Steps every trace has, as a contiguous range in each.
  std::set<std::int64_t> common;
  for (const auto& s : traces[0].steps) common.insert(s.number);
  for (std::size_t r = 1; r < traces.size(); ++r) {
    std::set<std::int64_t> mine;
    for (const auto& s : traces[r].steps)
      if (common.count(s.number)) mine.insert(s.number);
    common = std::move(mine);
  }
  if (common.empty()) throw ConfigError(traces.back().file, "/traceEvents", "the traces share no ProfilerStep#N");
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

  // Late starts on the aligned clock.
  const RankAlignment align = align_ranks(traces);
  std::vector<Seconds> start(traces.size());
  for (std::size_t r = 0; r < traces.size(); ++r)
    start[r] = traces[r].steps[static_cast<std::size_t>(range[r].first)].start + align.shift[r];
  const Seconds earliest = *std::min_element(start.begin(), start.end());

  auto out = std::make_unique<ReplayGraph>();
  out->gpu = traces[0].device_name();
  for (const auto& t : traces) out->inputs.push_back(t.file);
  std::vector<std::vector<const GpuActivity*>> nccl(traces.size());
  std::vector<std::vector<int>> nccl_ops(traces.size());
  for (std::size_t r = 0; r < traces.size(); ++r) {
    ReplayRankInfo info;
    info.rank = ranked[r].first;
    info.file = traces[r].file;
    info.start_offset = start[r] - earliest;
    std::vector<TraceKernelShape> shapes;
    if (predicted) shapes = trace_kernel_shapes(traces[r], ets[r]);
    RankBuilder b(traces[r], range[r].first, range[r].second, info.start_offset, options.infer_waits, info,
                  predicted ? &shapes : nullptr, predicted ? &options.system->gpu : nullptr,
                  predicted ? options.calibration : nullptr);
    b.build();
    out->graph.ranks.push_back(std::move(b.program));
    out->timed.ops.push_back(std::move(b.timing));
    nccl[r] = std::move(b.nccl);
    nccl_ops[r] = std::move(b.nccl_ops);
    out->ranks.push_back(std::move(info));
  }

  // Collectives: the k-th NCCL kernel of every rank is one collective of the group of all.
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
  RankGroup all;
  for (std::size_t r = 0; r < traces.size(); ++r) all.ranks.push_back(static_cast<int>(r));
  out->graph.groups.push_back(all);
  std::unique_ptr<CollectiveModel> comm;
  if (predicted) comm = make_collective_model(*options.system);
  for (std::size_t k = 0; k < nccl[0].size(); ++k) {
    const TraceCollective& tc = *nccl[0][k]->collective;
    GraphCollective c;
    c.desc.kind = tc.kind == CollectiveKind::kAllToAllV ? CollectiveKind::kAllToAll : tc.kind;
    c.desc.bytes = tc.bytes;
    c.group = 0;
    out->graph.collectives.push_back(c);
    CollectiveEstimate e;
    e.time = std::numeric_limits<double>::infinity();
    for (std::size_t r = 0; r < traces.size(); ++r) e.time = std::min(e.time, nccl[r][k]->duration);
    e.algorithm = "measured";
    if (predicted && tc.bytes > 0) {
      // The communicator's size: the trace's, else the world size, else the traced ranks.
      const int n = tc.group_size > 0 ? tc.group_size : traces[0].world_size.value_or(static_cast<int>(traces.size()));
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
      out->collective_samples.push_back(std::move(sample));
    } else if (predicted) {
      out->unrecognized_collectives++;
    }
    out->timed.collectives.push_back(e);
  }

  if (options.host == ReplayHostModel::kMean) {
    for (std::size_t r = 0; r < traces.size(); ++r) {
      auto& timing = out->timed.ops[r];
      const auto& markers = out->ranks[r].step_markers;
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
  out->timed.graph = &out->graph;
  return out;
}

std::vector<FamilyError> family_errors(const std::vector<const KernelSample*>& samples) {
  std::vector<FamilyError> out;
  for (int f = 0; f < kTraceKernelFamilies; ++f) {
    const auto fam = static_cast<TraceKernelFamily>(f);
    FamilyError e;
    e.name = std::string(trace_family_name(fam));
    double log_sum = 0;
    for (const KernelSample* s : samples) {
      if (s->family != fam || s->measured <= 0) continue;
      e.count++;
      e.measured += s->measured;
      e.predicted += s->predicted;
      log_sum += std::log(std::max(std::fabs(s->predicted / s->measured - 1), 1e-6));
    }
    if (e.count == 0) continue;
    e.geomean_abs_error = std::exp(log_sum / e.count);
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
  double log_sum = 0, step_log_sum = 0;
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
      const double step_err = std::fabs(s.error());
      step_log_sum += std::log(std::max(step_err, 1e-6));
      res.step_max_abs_error = std::max(res.step_max_abs_error, step_err);
      res.step_count++;
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
    const double err = std::fabs(rr.error());
    log_sum += std::log(std::max(err, 1e-6));
    res.max_abs_error = std::max(res.max_abs_error, err);
    res.ranks.push_back(std::move(rr));
  }
  res.geomean_abs_error = res.ranks.empty() ? 0 : std::exp(log_sum / static_cast<double>(res.ranks.size()));
  res.step_geomean_abs_error = res.step_count == 0 ? 0 : std::exp(step_log_sum / res.step_count);
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
