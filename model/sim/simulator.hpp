#pragma once
/// \file simulator.hpp
/// Simulates all ranks of a timed graph in one process.
///
/// Rules (docs/internals.md section 4):
///  - Per rank, one host thread and three GPU streams (compute, communication, copy).
///  - The host pays `op_overhead` per op (`backward_op_overhead`, when the system sets it, for
///    backward ops that are not recomputed forwards; the op's measured `OpTiming::host_time`
///    in trace replay) and `launch_overhead` per launch; a kernel starts
///    at max(its launch time, its stream being free, its inputs being ready).
///  - A collective starts on every rank of its group when the last rank has reached it
///    (its launch issued, its stream free, its inputs ready); it lasts as the collective
///    model says; consumers of its output wait for it.
///  - An op with `host_waits` blocks the host until it ends.
///  - The iteration repeats `iterations` times; the result is the steady-state period,
///    the end of the last iteration minus the end of the one before.
///
/// Every start is a max of earlier ends and host times, so the simulation resolves each
/// event once, in dependency order (a max-plus evaluation of the event graph). Each
/// event records which constraint set its start (`binding`, `cause`), which yields the
/// critical path afterwards.
///
/// Contention (SimulationOptions::contention, model/sim/link_contention.hpp): transfers that
/// overlap in time on the same PCIe link (host<->device copies, network traffic of
/// collectives through GPUDirect RDMA) or the same NIC share its bandwidth max-min fairly.
/// After a pass, a fluid simulation of those transfers from the pass's start times gives
/// their stretched durations; the pass is re-run with them until the durations repeat, or
/// a re-run moves the iteration time by at most `contention_tolerance` of it (at most
/// `contention_passes` passes). The passes need not reach a fixed point: transfers that
/// stretch each other across a pipeline can keep moving a few 1e-4 of the iteration time
/// from pass to pass. The order of events never depends on times, so
/// each pass yields the same events and only their times move.

#include <stdexcept>
#include <vector>

#include "model/sim/annotate.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

/// Where an event runs: the host thread or one of the GPU streams.
enum class Lane { kHost = 0, kCompute = 1, kComm = 2, kCopy = 3 };
inline constexpr int kLaneCount = 4;
[[nodiscard]] Lane lane_of(Stream s);
[[nodiscard]] std::string_view lane_name(Lane l);

/// What set an event's start.
enum class Binding {
  kNone,        ///< first event: time zero
  kHost,        ///< the host issued it late (launch time)
  kStream,      ///< the previous event on the same stream / host thread
  kDependency,  ///< an input produced by another stream, or a host wait
  kPeer,        ///< a collective waited for a slower rank
};

struct TimelineEvent {
  int rank = 0;
  int iteration = 0;
  int op = 0;
  int kernel = -1;   ///< index in Op::kernels; -1 for host segments and collectives
  Lane lane = Lane::kHost;
  Seconds start = 0, end = 0;
  Binding binding = Binding::kNone;
  int cause = -1;    ///< event whose end (or launch) set `start`; -1 if none
  Seconds launch = 0;      ///< host time the launch returned (GPU events)
  Seconds host_delay = 0;  ///< time the stream sat idle waiting for this launch
};

struct Timeline {
  int world = 0;
  int iterations = 0;
  std::vector<TimelineEvent> events;
  std::vector<std::vector<Seconds>> iteration_end;  ///< [rank][iteration]
  Seconds iteration_time = 0;                       ///< steady state
  Seconds window_start = 0;  ///< max over ranks of the end of iteration `iterations - 2`
  Seconds window_end = 0;    ///< max over ranks of the end of the last iteration
  int contention_passes = 0; ///< re-simulations the contention model ran (0: none shared a link)
};

struct SimulationOptions {
  int iterations = 3;  ///< >= 2; the last period is reported
  /// Share PCIe links and NICs between overlapping transfers; false: each runs at its solo
  /// speed (the collective and copy models' times, unchanged).
  bool contention = true;
  int contention_passes = 8;  ///< >= 1: at most this many re-simulations
  /// The passes end when a re-simulation moves the iteration time by at most this share
  /// of it (0: only when the durations repeat exactly).
  double contention_tolerance = 1e-4;
};

/// A graph that cannot run: collectives issued in different orders on different ranks.
class SimulationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[nodiscard]] Timeline simulate(const TimedGraph& graph, const HostSpec& host, const SimulationOptions& options = {});

/// The same, reusing the storage of `recycled` (an earlier result the caller is done
/// with): a caller that simulates many graphs (the sharding search) then does not
/// reallocate the event list every time. The result does not depend on `recycled`.
[[nodiscard]] Timeline simulate(const TimedGraph& graph, const HostSpec& host, const SimulationOptions& options,
                                Timeline&& recycled);

}  // namespace perfcast
