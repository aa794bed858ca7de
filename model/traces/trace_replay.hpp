#pragma once
/// \file trace_replay.hpp
/// Replays measured iterations through the simulator (`perfcast replay`): every rank's
/// traced steps become one ExecutionGraph program, kernels keep their measured durations,
/// and the simulated step times are compared with the measured ones. The difference is
/// what the simulator's synchronization and CPU-overhead rules get wrong.
///
/// Graph, per rank, in host order (all host threads merged by time, as the reference
/// model replays one host clock, docs/reference-paper.md section 7):
///  - one op per GPU activity (kernel, memcpy, memset) on the lane of its stream: streams
///    with NCCL kernels -> communication; the non-NCCL stream with the most kernel time ->
///    compute; every other stream -> copy (the simulator has three lanes per rank, so
///    several side streams share the copy lane);
///  - NCCL kernels become collectives of one group of all traced ranks, matched by their
///    order on each rank; a collective's own duration is the minimum over ranks of its
///    measured duration (a measured NCCL kernel includes waiting for the slowest peer;
///    the last rank to arrive waits least). With one trace it keeps its measured duration;
///  - dependencies, after Algorithm 1 of the reference: a collective waits for the front
///    of the stream that issued it (the stream of the thread's previous launch); a
///    `cudaStreamWaitEvent` outside a collective call (a wait() on a collective, a
///    wait_stream) joins: the thread's next GPU op waits for the other lanes' fronts.
///    Dependencies the measurement contradicts (the consumer started before the producer
///    ended on the same GPU clock) step back to the latest op on that lane that had ended;
///  - host blocking: `cudaStreamSynchronize`/`cudaEventSynchronize` wait for the thread's
///    last GPU op, `cudaDeviceSynchronize` for all lanes, a device-to-pageable memcpy for
///    itself (a zero-length op on the awaited lane with `host_waits`);
///  - host time, measured: each op's `OpTiming::host_time` is the host time from the
///    previous op's launch returning to this op's launch returning (gaps, CPU op time and
///    the launch call, T1..T5 of the reference merged); time spent blocked in a sync is
///    not host time (the simulator recomputes the wait), nor is a launch call's wait for a
///    full launch queue: a call longer than the rank's typical launch call (10th percentile)
///    by more than kQueueStallMin, made while at least kQueueStallPending earlier launches
///    of its stream had not finished, counts only the typical call as host time, the rest as
///    `queue_blocked`, and the simulator's launch queue (HostSpec::launch_queue_depth)
///    recomputes the wait, so that a faster GPU shortens a GPU-bound step; markers at each step start carry
///    the host time up to the step boundary, the first one the rank's late start on the
///    aligned clock (see RankAlignment).
///
/// Measured step time: start-to-start of ProfilerStep#N (the last step: its own span);
/// simulated: the same boundaries on the simulated host clock.
///
/// Predicted kernels (ReplayKernels::kPredicted): every GPU activity whose shape the trace
/// gives (trace_kernels.hpp) gets our predictor's duration on the given system's GPU
/// (spec-derived, unless ReplayOptions::calibration gives a kernel calibration: the
/// system's automatic one in configs/calibration/ is not applied here, so that a replay
/// says what a given calibration does), and every NCCL kernel with a
/// message size the collective model's time for its group size on that system; the rest
/// keep their measured durations and are counted as unrecognized. Host times stay
/// measured. Each predicted op (kernels of one CPU op together) is compared with the sum
/// of its measured kernels; a collective with the minimum over the traced ranks of its
/// measured NCCL kernel (the kernel includes waiting for the slowest peer; with one
/// traced rank that wait stays in the measurement).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/sim/annotate.hpp"
#include "model/graph/execution_graph.hpp"
#include "model/traces/kineto_trace.hpp"
#include "model/sim/simulator.hpp"
#include "model/traces/trace_kernels.hpp"
#include "model/traces/trace_measurements.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

struct ExecutionTrace;
struct KernelCalibration;

/// Where kernel durations come from.
enum class ReplayKernels {
  kMeasured,   ///< the trace's (default)
  kPredicted,  ///< our predictors where the trace gives the shape (see file comment)
};

/// How each op's host time is taken.
enum class ReplayHostModel {
  kMeasured,  ///< the trace's own time for this op (default)
  kMean,      ///< the rank's mean host time per GPU op for every op (step markers stay measured)
};

/// With ReplayKernels::kPredicted, where a collective's duration comes from.
enum class ReplayCollectives {
  /// The model where every rank of the collective's communicator is traced, else the
  /// measurement (default): a traced rank's NCCL kernel also lasts while it waits for
  /// peers that arrive later, and without their traces nothing predicts that wait.
  kAuto,
  kModel,     ///< the collective model for its size and communicator, always
  kMeasured,  ///< the trace's (min over the traced ranks), always
};

struct ReplayOptions {
  ReplayHostModel host = ReplayHostModel::kMeasured;
  /// Also infer a dependency for every GPU op that started later than its launch, its
  /// stream predecessor and its rule dependencies explain (by more than 10 us): on the op
  /// of another stream that ended last before it started (within 10 us). Captures GPU
  /// contention (a kernel waiting for SMs a long kernel holds) and waits the rules miss;
  /// off by default, because it fits the replay to the measurement it is compared with.
  bool infer_waits = false;
  ReplayKernels kernels = ReplayKernels::kMeasured;
  ReplayCollectives collectives = ReplayCollectives::kAuto;  ///< kPredicted only
  /// The system that predicts kernels and collectives; required for kPredicted.
  const SystemSpec* system = nullptr;
  /// Execution traces linked to the Kineto traces, one per input trace in input order
  /// (nullptr entries allowed), or empty: more shapes (e.g. embedding output widths).
  std::vector<const ExecutionTrace*> execution_traces;
  /// kPredicted: kernel calibration applied where it covers a kernel's family
  /// (predict_with_calibration), else spec-derived; nullptr: spec-derived only.
  const KernelCalibration* calibration = nullptr;
  std::string calibration_file;  ///< for reports
  /// kPredicted: the per-family errors (ReplayResult::families) and the selected step
  /// error count only these ranks and steps (a held-out part of the trace); the
  /// simulation always runs every rank and step. Collectives are selected by step only.
  TraceSelection evaluate;
};

/// One predicted op (or collective) against its measurement.
struct KernelSample {
  TraceKernelFamily family = TraceKernelFamily::kOther;
  std::string label;       ///< kernel_label of the descriptor, or the collective
  Seconds measured = 0;    ///< sum of the op's measured kernels (collectives: min over ranks)
  Seconds predicted = 0;
  int kernels = 0;         ///< measured kernels in the op
  int rank = -1;           ///< the rank it ran on; -1 for collectives (all ranks)
  std::int64_t step = -1;  ///< ProfilerStep#N number of the step it was launched in
};

/// What the graph builder found in one rank's trace.
struct ReplayRankInfo {
  int rank = 0;                  ///< distributedInfo.rank (or position in the input)
  std::string file;
  int gpu_ops = 0;               ///< kernels, memcpys, memsets
  int collectives = 0;
  int host_syncs = 0;            ///< ops the host blocks on
  int joins = 0;                 ///< cudaStreamWaitEvent joins that added a dependency
  int stepped_back = 0;          ///< dependencies moved back because the measurement contradicted them
  int inferred = 0;              ///< dependencies added by ReplayOptions::infer_waits
  Seconds start_offset = 0;      ///< late start on the aligned clock
  Seconds host_time = 0;         ///< sum of the ops' host time
  Seconds launch_call_mean = 0;  ///< mean duration of kernel/memcpy launch calls (the reference's T4)
  Seconds blocked = 0;           ///< measured host time blocked in syncs (not host time)
  /// Measured time launch calls spent waiting for a full launch queue (not host time; the
  /// simulator's launch queue recomputes the wait), and how many calls waited.
  Seconds queue_blocked = 0;
  int queue_blocked_calls = 0;
  std::vector<int> step_markers; ///< op index of each step's marker, plus the end marker
  std::vector<std::int64_t> step_numbers;
  std::vector<Seconds> measured; ///< per step, see file comment
  std::vector<std::string> lanes;  ///< "stream 7 -> compute", ...
  /// Per op: measured GPU start and end on the simulated clock (the rank's first step
  /// starts at `start_offset`); NaN for markers and host syncs. For diagnostics.
  std::vector<Seconds> measured_start, measured_end;
  /// Per op: the KinetoTrace::gpu index it replays; -1 for markers and host syncs.
  std::vector<int> activity;
  /// ReplayKernels::kPredicted: predicted ops of this rank (collectives are in
  /// ReplayGraph::collective_samples), and the kernels that kept their measured time.
  std::vector<KernelSample> samples;
  int unrecognized = 0;
  Seconds unrecognized_time = 0;  ///< their measured GPU time
  int predicted_kernels = 0;      ///< kernels whose time came from a predictor (group members included)
};

/// A replay graph with its timing; not copyable (`timed` points into `graph`).
struct ReplayGraph {
  ExecutionGraph graph;
  TimedGraph timed;
  std::vector<ReplayRankInfo> ranks;
  std::string gpu;               ///< device name of the first trace
  std::vector<std::string> inputs;
  std::vector<KernelSample> collective_samples;  ///< kPredicted: one per collective
  int unrecognized_collectives = 0;               ///< kPredicted: NCCL kernels without a size
  /// kPredicted: collectives that kept their measured duration (ReplayCollectives), and the
  /// largest communicator among them that the traces cover only in part (0: none).
  int measured_collectives = 0;
  int untraced_communicator = 0;

  ReplayGraph() = default;
  ReplayGraph(const ReplayGraph&) = delete;
  ReplayGraph& operator=(const ReplayGraph&) = delete;
};

/// Builds the graph of the steps common to all traces (one trace per rank; ranks from
/// distributedInfo, else input order). Throws ConfigError when two traces claim one rank,
/// the traces share no step, or their NCCL kernels differ in number or kind.
[[nodiscard]] std::unique_ptr<ReplayGraph> build_replay_graph(const std::vector<KinetoTrace>& traces,
                                                              const ReplayOptions& options = {});

struct ReplayStepResult {
  std::int64_t step = 0;
  Seconds measured = 0;
  Seconds simulated = 0;
  [[nodiscard]] double error() const { return measured > 0 ? simulated / measured - 1 : 0; }
};

struct ReplayRankResult {
  int rank = 0;
  std::vector<ReplayStepResult> steps;
  Seconds measured = 0;   ///< mean over steps
  Seconds simulated = 0;  ///< mean over steps
  [[nodiscard]] double error() const { return measured > 0 ? simulated / measured - 1 : 0; }
};

/// Per kernel family over all ranks (kPredicted).
struct FamilyError {
  std::string name;             ///< trace_family_name
  int count = 0;                ///< predicted ops (collectives: one per collective)
  double geomean_abs_error = 0; ///< geometric mean of |predicted / measured - 1|, each floored at 1e-6
  double bias = 0;              ///< predicted total / measured total - 1
  Seconds measured = 0, predicted = 0;
};

struct ReplayResult {
  std::unique_ptr<ReplayGraph> replay;
  Timeline timeline;
  std::vector<ReplayRankResult> ranks;
  ReplayOptions options;
  /// Geometric mean over ranks of |error| (floored at 1e-6), and the largest |error|.
  double geomean_abs_error = 0, max_abs_error = 0;
  /// The same over every (rank, step).
  double step_geomean_abs_error = 0, step_max_abs_error = 0;
  int step_count = 0;
  std::vector<FamilyError> families;  ///< kPredicted only; families with at least one op in options.evaluate
  /// Over the (rank, step) pairs of options.evaluate: summed measured and simulated step
  /// times (selected_error() = simulated / measured - 1 of the mean step) and their count.
  Seconds selected_measured = 0, selected_simulated = 0;
  int selected_steps = 0;
  [[nodiscard]] double selected_error() const { return selected_measured > 0 ? selected_simulated / selected_measured - 1 : 0; }
  std::string system;                 ///< kPredicted: system name and file
  int unrecognized = 0;               ///< kPredicted: kernels (all ranks) that kept their measured time
  Seconds unrecognized_time = 0;
  int predicted_kernels = 0;
};

/// Per-family errors of predicted ops (samples with a measured time > 0).
[[nodiscard]] std::vector<FamilyError> family_errors(const std::vector<const KernelSample*>& samples);

/// Builds, simulates (2 iterations of the traced window; the first is reported) and
/// compares. Throws ConfigError for bad traces, SimulationError if the graph cannot run.
[[nodiscard]] ReplayResult replay_traces(const std::vector<KinetoTrace>& traces, const ReplayOptions& options = {});

/// The rank replay gives trace `i`: its own (distributedInfo) when every trace has one, else
/// its position in `traces` for all of them.
[[nodiscard]] int replay_rank(const std::vector<KinetoTrace>& traces, std::size_t i);

}  // namespace perfcast
