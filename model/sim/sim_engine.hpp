#pragma once
/// \file sim_engine.hpp
/// The simulator's event engine (internal to model/sim; simulate() in simulator.cpp is the
/// entry point). See simulator.hpp for the rules it implements.
///
/// Data flow: Engine::run() sweeps the ranks round-robin; each RankCursor issues its
/// rank's ops in host order (issue_op) until one cannot start yet (a dependency, its
/// stream or a host wait still unresolved). Issuing an op appends a host segment and its
/// GPU events to the EventLog: kernels get their end at once; a collective's events stay
/// unresolved until CollectiveRendezvous has seen every rank of its group arrive, then
/// all start together. When no rank can advance, every rank must have finished its
/// iterations (else the graph deadlocks), and assemble_timeline() derives the iteration
/// ends and the steady-state period.

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "model/sim/simulator.hpp"

namespace perfcast::sim {

inline constexpr double kUnresolved = std::numeric_limits<double>::quiet_NaN();

/// All events of a run, in creation order; an event's end is kUnresolved until known.
class EventLog {
 public:
  /// `storage`: a vector whose capacity is reused (its contents are dropped).
  explicit EventLog(std::vector<TimelineEvent> storage) : events_(std::move(storage)) { events_.clear(); }

  int push(const TimelineEvent& ev) {
    events_.push_back(ev);
    return static_cast<int>(events_.size()) - 1;
  }
  [[nodiscard]] bool resolved(int e) const { return e < 0 || !std::isnan(events_[static_cast<std::size_t>(e)].end); }
  /// End of event `e`; 0 for "no event" (-1).
  [[nodiscard]] Seconds end_of(int e) const { return e < 0 ? 0.0 : events_[static_cast<std::size_t>(e)].end; }
  [[nodiscard]] TimelineEvent& at(int e) { return events_[static_cast<std::size_t>(e)]; }
  [[nodiscard]] std::size_t size() const { return events_.size(); }
  void reserve(std::size_t n) { events_.reserve(n); }
  [[nodiscard]] const std::vector<TimelineEvent>& events() const { return events_; }
  [[nodiscard]] std::vector<TimelineEvent> take() { return std::move(events_); }

 private:
  std::vector<TimelineEvent> events_;
};

/// Durations a contention pass imposes on events (by index); NaN or absent: the model's.
class DurationOverrides {
 public:
  explicit DurationOverrides(const std::vector<Seconds>* durations) : durations_(durations) {}
  [[nodiscard]] bool any() const { return durations_ != nullptr; }
  /// Duration of event `e`: the contention pass's if it set one, else `model`.
  [[nodiscard]] Seconds of(std::size_t e, Seconds model) const {
    if (durations_ == nullptr || e >= durations_->size() || std::isnan((*durations_)[e])) return model;
    return (*durations_)[e];
  }

 private:
  const std::vector<Seconds>* durations_;
};

/// Where one rank's host thread is: iteration, next op, host clock, and what set it.
struct RankCursor {
  int iter = 0;
  int op = 0;
  Seconds host = 0;
  Binding host_binding = Binding::kNone;
  int host_cause = -1;
  std::array<int, kStreamCount> stream_last{-1, -1, -1};  ///< last event per stream
  std::vector<int> op_last_event;  ///< current iteration, per op: its last event (or what it passed on)
  std::vector<int> op_prev_event;  ///< the same for the previous iteration (Op::prev_deps)
  std::vector<int> coll_seq;       ///< per group: collectives issued so far
  int waiting_event = -1;          ///< host blocked on an unresolved event
  int blocked_on = -1;             ///< the unresolved event the current op's last try stopped at
  bool done = false;
  /// A launched GPU event and its end as known when it was launched (kUnresolved for a
  /// collective, whose end the rendezvous sets later): a full launch queue waits for the
  /// oldest launch, and reading its end here spares a cache miss in the event log.
  struct Launch {
    int event = -1;
    Seconds end = 0;
  };
  /// Per stream: the last HostSpec::launch_queue_depth GPU events issued (a ring, filled
  /// lazily), and how many were issued in all.
  std::array<std::vector<Launch>, kStreamCount> launch_ring;
  std::array<std::size_t, kStreamCount> launches{};
};

/// Collective instances while their ranks arrive: the n-th collective a group issues is
/// the same instance on every member; it starts when the last member is ready.
class CollectiveRendezvous {
 public:
  CollectiveRendezvous(const TimedGraph& tg, EventLog& log, const DurationOverrides& overrides);
  /// Rank `rank` (cursor `st`, at op `st.op`) reached `collective` with its event `event`
  /// (start set, end unresolved). When it is the group's last member, every member's
  /// event starts at the latest ready time and lasts the collective's duration (the
  /// longest contention-stretched one among them). Throws SimulationError when the rank
  /// is not in the group or the group's instance at this position is another collective.
  void arrive(int rank, RankCursor& st, int collective, int event);

 private:
  struct Arrival {
    int collective = -1;  ///< ExecutionGraph::collectives index the first rank issued
    int first_rank = -1;
    int arrived = 0;
    Seconds max_ready = -std::numeric_limits<double>::infinity();
    int max_event = -1;       ///< event of the rank that arrived last in time
    std::vector<int> events;  ///< one per arrived rank
  };
  /// Name of the first op that issues collective `c` (for messages).
  [[nodiscard]] std::string collective_label(int c) const;
  void start_instance(Arrival& a, int collective);

  const TimedGraph& tg_;
  const ExecutionGraph& g_;
  EventLog& log_;
  const DurationOverrides& overrides_;
  std::vector<int> group_size_;
  /// [group][n]: the n-th collective instance issued on that group.
  std::vector<std::vector<Arrival>> arrivals_;
};

/// Every rank's op inputs in one flat array per rank, in op order (Op::deps and Op::prev_deps
/// live in an allocation per op; reading them op by op missed the cache on every step). Built
/// once per graph and shared by the engine runs of a simulation (the contention passes).
class OpInputs {
 public:
  /// Throws SimulationError when a rank has more inputs than 32-bit offsets index.
  explicit OpInputs(const ExecutionGraph& g);
  /// Rank `rank`'s op `op`: its deps, then its prev_deps.
  struct Range {
    const int* begin;
    const int* end;
  };
  [[nodiscard]] Range deps(std::size_t rank, std::size_t op) const {
    const RankInputs& in = ranks_[rank];
    return {in.list.data() + in.offset[2 * op], in.list.data() + in.offset[2 * op + 1]};
  }
  [[nodiscard]] Range prev_deps(std::size_t rank, std::size_t op) const {
    const RankInputs& in = ranks_[rank];
    return {in.list.data() + in.offset[2 * op + 1], in.list.data() + in.offset[2 * op + 2]};
  }

 private:
  /// Op i's deps are list[offset[2i] .. offset[2i+1]), its prev_deps list[offset[2i+1] .. offset[2i+2]).
  struct RankInputs {
    std::vector<std::uint32_t> offset;
    std::vector<int> list;
  };
  std::vector<RankInputs> ranks_;
};

/// One simulation pass over all ranks and iterations.
class Engine {
 public:
  /// `durations`: per event index, a duration that replaces the model's (contention
  /// passes); NaN or absent: the model's.
  /// `storage`: a finished timeline whose buffers this run reuses (its contents are dropped).
  /// `inputs`: the graph's OpInputs, shared by several runs (null: built for this run).
  Engine(const TimedGraph& tg, const HostSpec& host, int iterations, const std::vector<Seconds>* durations = nullptr,
         Timeline storage = {}, const OpInputs* inputs = nullptr);

  /// Runs every rank to the end; throws SimulationError on a deadlock.
  Timeline run();

 private:
  /// Issues rank `rank`'s next op, or resumes its host after a wait; false when it cannot
  /// go on yet (or is done).
  bool step(int rank);
  /// Latest end among the dependencies of rank `rank`'s current op (`dep_event` the event
  /// that set it, -1 if none); false, with `st.blocked_on` set to the first unresolved input,
  /// when one is unresolved.
  bool dependencies_end(RankCursor& st, int rank, Seconds& deps_end, int& dep_event) const;
  /// The host segment of the op: its Python/dispatcher cost.
  int issue_host_segment(RankCursor& st, int rank, const Op& op, const OpTiming& timing);
  /// The op's collective event (its end left to the rendezvous).
  /// `stream_last`: the event the collective queues behind (-1: none, a concurrent op).
  int issue_collective(RankCursor& st, int rank, const Op& op, int seg, int stream_last, Seconds deps_end, int dep_event);
  /// The op's kernels, back to back on its stream; the first waits for the dependencies.
  int issue_kernels(RankCursor& st, int rank, const Op& op, const OpTiming& timing, int seg, Seconds deps_end,
                    int dep_event);
  /// Host time of an op without a measured one: backward (autograd) ops pay
  /// HostSpec::backward_op_overhead when set, every other op op_overhead.
  [[nodiscard]] Seconds host_op_overhead(const Op& op) const;
  /// Moves the host past event `e` when it ends later.
  void wait_host(RankCursor& st, int e) const;
  /// The launch queue (HostSpec::launch_queue_depth): the launch on stream `s` that must
  /// finish before `kernels` more launches fit, or null when they fit.
  [[nodiscard]] const RankCursor::Launch* queue_slot(const RankCursor& st, std::size_t s, int kernels) const;
  /// End of launch `l`: the end recorded at launch, else the event log's (kUnresolved until known).
  [[nodiscard]] Seconds launch_end(const RankCursor::Launch& l) const { return std::isnan(l.end) ? log_.end_of(l.event) : l.end; }
  /// Moves the host past `end`, the end of event `e`, when it is later.
  void wait_host_until(RankCursor& st, int e, Seconds end) const;
  /// Records GPU event `e` as launched on stream `s`.
  void record_launch(RankCursor& st, std::size_t s, int e) const;
  /// Sizes each stream's launch ring once, for the launches `program` makes in the run (at
  /// most the queue depth), so that record_launch does not regrow it launch by launch.
  void reserve_launch_rings(RankCursor& st, const RankProgram& program) const;
  /// Next op; past the last, the next iteration (or done).
  void advance(RankCursor& st, int rank) const;
  /// Start of a GPU event from its three constraints (launch, stream free, inputs), with
  /// the binding one recorded.
  void place(TimelineEvent& ev, Seconds launch, int seg, int stream_last, Seconds deps_end, int dep_event) const;
  [[noreturn]] void throw_deadlock() const;

  const TimedGraph& tg_;
  const ExecutionGraph& g_;
  std::optional<OpInputs> own_inputs_;  ///< built here when the caller shares none
  const OpInputs* inputs_;
  HostSpec host_;
  int iterations_;
  DurationOverrides overrides_;
  EventLog log_;
  std::vector<RankCursor> cursors_;
  CollectiveRendezvous rendezvous_;
  std::vector<std::vector<Seconds>> iteration_end_;  ///< storage for Timeline::iteration_end
};

/// The timeline of a finished run: per rank and iteration the latest event end (kept
/// ordered when a host runs ahead), and the steady-state window of the last two.
/// `iteration_end`: storage reused.
[[nodiscard]] Timeline assemble_timeline(std::vector<TimelineEvent> events, int world, int iterations,
                                         std::vector<std::vector<Seconds>> iteration_end);

}  // namespace perfcast::sim
