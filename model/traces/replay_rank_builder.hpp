#pragma once
/// \file replay_rank_builder.hpp
/// One rank's replay program from its Kineto trace (internal to model/traces;
/// build_replay_graph in trace_replay.cpp is the entry point, and trace_replay.hpp states
/// the rules).
///
/// Data flow: ReplayRankBuilder::build() walks the runtime calls of the selected steps in
/// time order. Each step starts with a marker op; each call is dispatched by kind:
///  - a launch (kernel, memcpy, memset, NCCL kernel): one op per GPU activity, on the lane
///    of its stream (map_lanes), with its dependencies from the join and collective rules
///    (replay_dependencies.cpp) and its kernel measured or predicted (replay_kernel_source.cpp);
///  - a stream / device synchronize: a zero-length op with host_waits on what it awaits;
///  - a cudaStreamWaitEvent outside a collective call: a pending join for the thread's
///    next launch.
/// Every op carries the host time since the previous op (the `cursor_` on the trace
/// clock), and its measured start and end for the dependency rules and diagnostics.

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/traces/trace_replay.hpp"

namespace perfcast {
struct KernelCalibration;
}

namespace perfcast::replay {

/// Kineto timestamps are whole microseconds on one GPU clock: a consumer may appear to
/// start up to a tick before its producer ends. 2 us allows one tick on each side.
inline constexpr Seconds kDependencyTolerance = 2e-6;
/// How far back on a lane a contradicted dependency may step (bounds the work per op).
inline constexpr int kWalkBackLimit = 256;
inline constexpr Seconds kNoTime = std::numeric_limits<double>::quiet_NaN();
/// ReplayOptions::infer_waits: a start later than launch, stream and dependencies by more
/// than this is unexplained (kernel launch latency on an idle GPU is a few us), and a
/// producer must have ended within this before it.
inline constexpr Seconds kUnexplainedStart = 10e-6;
/// How many earlier ops infer_waits searches for the producer.
inline constexpr int kInferSearchLimit = 1024;
/// A launch call longer than the rank's typical launch call by more than this may be a wait
/// for a full launch queue (a launch call takes 2-10 us; the reference's T4 is 4 us).
inline constexpr Seconds kQueueStallMin = 5e-6;
/// ... when at least this many earlier launches on its stream were still unfinished when
/// it was called: half the queue depth CUDA is measured to hold (HostSpec::launch_queue_depth),
/// so that a slow call on a merely busy GPU does not count.
inline constexpr int kQueueStallPending = 512;

/// Per trace stream: launch-call starts and kernel ends, sorted, to count the launches a
/// call found pending (launched, not finished).
class PendingLaunches {
 public:
  explicit PendingLaunches(const KinetoTrace& t);
  /// Launches on `stream` called before `at` whose GPU work had not finished at `at`.
  [[nodiscard]] std::int64_t at(std::int64_t stream, Seconds at) const;

 private:
  std::unordered_map<std::int64_t, std::pair<std::vector<Seconds>, std::vector<Seconds>>> of_;
};
/// The rank's typical launch call that did not wait: the 10th percentile of its
/// non-blocking kernel / memcpy launch calls (0 if none). Not the median: in a GPU-bound
/// trace most calls wait for the queue.
[[nodiscard]] Seconds typical_launch_call(const KinetoTrace& t);

// ---- how trace records are read (replay_rules.cpp) ----
[[nodiscard]] bool is_stream_sync(std::string_view n);
[[nodiscard]] bool is_device_sync(std::string_view n);
[[nodiscard]] bool is_stream_wait(std::string_view n);
/// Copies the host waits for: the synchronous cudaMemcpy, and copies into pageable host
/// memory, which CUDA performs synchronously (CUDA Runtime API, "API synchronization
/// behavior": "For transfers from device memory to pageable host memory, the function
/// will return only once the copy has completed").
[[nodiscard]] bool host_blocking_copy(const GpuActivity& a, const RuntimeCall& c);

/// Trace stream -> simulator lane (see the file comment of trace_replay.hpp).
struct LaneMap {
  std::map<std::int64_t, Stream> of;
  std::vector<std::string> labels;
};
[[nodiscard]] LaneMap map_lanes(const KinetoTrace& t);
/// Backward when an enclosing CPU op is a backward / autograd op, optimizer when it is
/// an optimizer's, else forward.
[[nodiscard]] Phase phase_of(const KinetoTrace& t, int call);
/// The framework op a call belongs to: its top-level cpu_op, else its innermost
/// annotation, else the call itself.
[[nodiscard]] std::string op_label(const KinetoTrace& t, int call);

/// A host thread of the trace while its calls are replayed.
struct ThreadState {
  Stream current = Stream::kCompute;  ///< lane of the thread's last non-NCCL launch
  int last_gpu_op = -1;
  bool join_pending = false;
  std::array<std::size_t, kStreamCount> join_snapshot{};  ///< lane history sizes at the join
};

/// Builds one rank's program.
class ReplayRankBuilder {
 public:
  /// `shapes` and `gpu`: predicted kernels (both set) or measured ones (both null).
  ReplayRankBuilder(const KinetoTrace& t, int k0, int k1, Seconds offset, bool infer_waits, ReplayRankInfo& info,
                    const std::vector<TraceKernelShape>* shapes = nullptr, const GpuSpec* gpu = nullptr,
                    const KernelCalibration* calibration = nullptr);

  /// Replays steps k0..k1 (trace step indices) into `program`, `timing` and `info`.
  void build();

  RankProgram program;
  std::vector<OpTiming> timing;
  std::vector<const GpuActivity*> nccl;  ///< per collective op, in host order

 private:
  // ---- ops (replay_rank_builder.cpp) ----
  int push(Op op, Seconds host_time, Seconds measured_start, Seconds measured_end, std::vector<Estimate> kernels);
  void marker(std::string name, Seconds host_time);
  void process(int ci);
  void launch(int ci, const RuntimeCall& c, ThreadState& th);
  void launch_activity(int ci, const RuntimeCall& c, ThreadState& th, int ai, bool first);
  void sync(int ci, const RuntimeCall& c, ThreadState& th);

  // ---- dependencies (replay_dependencies.cpp) ----
  /// The latest op on `lane` among the first `upto` issued that had ended when the
  /// consumer started (measured); -1 if none within kWalkBackLimit.
  int consistent_producer(Stream lane, std::size_t upto, Seconds consumer_start);
  /// A pending cudaStreamWaitEvent join: the op waits for the other lanes' fronts as
  /// they were at the join.
  void add_join_dependencies(Op& op, const GpuActivity& a, ThreadState& th);
  /// A collective waits for the front of the stream that issued it.
  void add_issuer_dependency(Op& op, const GpuActivity& a, const ThreadState& th);
  /// ReplayOptions::infer_waits for one op about to be pushed.
  void infer_wait(Op& op, const GpuActivity& a, const RuntimeCall& c);

  // ---- kernels (replay_kernel_source.cpp) ----
  /// The kernel of activity `ai`: measured, or (predicted kernels) the lead's descriptor,
  /// a zero-length member of a predicted group, or measured when unrecognized.
  KernelDesc kernel_of(int ai, const GpuActivity& a);
  /// The kernel op's kernel and its estimate (predicted or measured); records the
  /// prediction in its sample.
  Estimate kernel_estimate(int ai, const GpuActivity& a, Op& op);

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
  std::vector<char> has_nccl_;  ///< per CPU op: it (or an op inside it) launched an NCCL kernel
  std::vector<Seconds> measured_start_, measured_end_;  ///< per op; NaN for markers and syncs
  std::array<std::vector<int>, kStreamCount> history_;  ///< ops per lane in issue order
  std::unordered_map<std::int64_t, ThreadState> threads_;
  std::unordered_map<std::int64_t, int> stream_last_;  ///< last op per trace stream
  int current_activity_ = -1;  ///< GPU activity of the op being pushed
  Seconds typical_launch_ = 0;  ///< typical_launch_call(t_)
  PendingLaunches pending_;
  Seconds cursor_ = 0;  ///< host time (trace clock) up to which host time is accounted
  Seconds launch_time_ = 0;
  int launch_calls_ = 0;
};

}  // namespace perfcast::replay
