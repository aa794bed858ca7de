/// \file sim_engine.cpp
/// The simulator's event engine: ranks issue their ops in host order; each op is a host
/// segment plus GPU events placed at max(launch, stream free, inputs ready).

#include "model/sim/sim_engine.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/deadline.hpp"

namespace perfcast::sim {

OpInputs::OpInputs(const ExecutionGraph& g) {
  ranks_.resize(g.ranks.size());
  for (std::size_t r = 0; r < g.ranks.size(); ++r) {
    RankInputs& in = ranks_[r];
    const auto& ops = g.ranks[r].ops;
    in.offset.reserve(2 * ops.size() + 1);
    in.offset.push_back(0);
    for (const Op& op : ops) {
      in.list.insert(in.list.end(), op.deps.begin(), op.deps.end());
      in.offset.push_back(static_cast<std::uint32_t>(in.list.size()));
      in.list.insert(in.list.end(), op.prev_deps.begin(), op.prev_deps.end());
      in.offset.push_back(static_cast<std::uint32_t>(in.list.size()));
    }
    if (in.list.size() > std::numeric_limits<std::uint32_t>::max())
      throw SimulationError(fmt::format("rank {} has {} op inputs; the simulator indexes at most 2^32", r, in.list.size()));
  }
}

Engine::Engine(const TimedGraph& tg, const HostSpec& host, int iterations, const std::vector<Seconds>* durations,
               Timeline storage, const OpInputs* inputs)
    : tg_(tg),
      g_(*tg.graph),
      inputs_(inputs),
      host_(host),
      iterations_(iterations),
      overrides_(durations),
      log_(std::move(storage.events)),
      rendezvous_(tg, log_, overrides_),
      iteration_end_(std::move(storage.iteration_end)) {
  const std::size_t world = g_.ranks.size();
  if (inputs_ == nullptr) inputs_ = &own_inputs_.emplace(g_);
  cursors_.resize(world);
  for (std::size_t r = 0; r < world; ++r) {
    cursors_[r].op_last_event.assign(g_.ranks[r].ops.size(), -1);
    cursors_[r].op_prev_event.assign(g_.ranks[r].ops.size(), -1);
    cursors_[r].coll_seq.assign(g_.groups.size(), 0);
    if (g_.ranks[r].ops.empty()) cursors_[r].done = true;
    reserve_launch_rings(cursors_[r], g_.ranks[r]);
  }
}

void Engine::reserve_launch_rings(RankCursor& st, const RankProgram& program) const {
  const auto depth = static_cast<std::size_t>(host_.launch_queue_depth);
  if (depth == 0) return;
  // GPU events per stream in one iteration: each kernel, or one per collective op.
  std::array<std::size_t, kStreamCount> per_iteration{};
  for (const Op& op : program.ops) per_iteration[static_cast<std::size_t>(op.stream)] += op.collective ? 1 : op.kernels.size();
  for (std::size_t s = 0; s < kStreamCount; ++s)
    st.launch_ring[s].reserve(std::min(depth, per_iteration[s] * static_cast<std::size_t>(iterations_)));
}

Timeline Engine::run() {
  std::size_t per_iteration = 0;
  for (const auto& prog : g_.ranks)
    for (const auto& op : prog.ops) per_iteration += 1 + std::max<std::size_t>(op.kernels.size(), 1);
  log_.reserve(per_iteration * static_cast<std::size_t>(iterations_));
  bool progress = true;
  while (progress) {
    progress = false;
    for (std::size_t r = 0; r < cursors_.size(); ++r) {
      while (step(static_cast<int>(r))) {
        progress = true;
        check_deadline();  // --timeout: a long simulation stops between two steps
      }
    }
  }
  for (const RankCursor& st : cursors_)
    if (!st.done) throw_deadlock();
  Timeline t = assemble_timeline(log_.take(), static_cast<int>(cursors_.size()), iterations_, std::move(iteration_end_));
  // Mirrored ranks (symmetric simulation) end their iterations when their representative does.
  for (std::size_t r = 0; r < t.iteration_end.size(); ++r)
    if (!g_.simulated(static_cast<int>(r))) t.iteration_end[r] = t.iteration_end[static_cast<std::size_t>(g_.representative(static_cast<int>(r)))];
  return t;
}

void Engine::throw_deadlock() const {
  for (std::size_t r = 0; r < cursors_.size(); ++r) {
    const RankCursor& st = cursors_[r];
    if (st.done) continue;
    throw SimulationError(fmt::format(
        "deadlock: rank {} cannot go on at op \"{}\" of iteration {}; its collectives do not match the other "
        "ranks' (different order or group)",
        r, g_.ranks[r].ops[static_cast<std::size_t>(st.op)].name, st.iter));
  }
  throw SimulationError("deadlock");
}

Seconds Engine::host_op_overhead(const Op& op) const {
  if (op.graph_launch) return host_.graph_launch_overhead;
  // Work the host does per table and per sample belongs to the framework, not to the CUDA
  // graph: it is paid whether or not the op's kernels are captured.
  const Seconds scaled = op.host_tables * host_.table_overhead + op.host_samples * host_.sample_overhead;
  if (op.same_call || op.captured) return scaled;
  if (op.phase == Phase::kBackward && !op.recompute && host_.backward_op_overhead) return *host_.backward_op_overhead + scaled;
  return host_.op_overhead + (op.moe_layer_start ? host_.moe_layer_overhead : 0) +
         (op.fp8_module ? host_.fp8_module_overhead : 0) + scaled;
}

void Engine::wait_host(RankCursor& st, int e) const { wait_host_until(st, e, log_.end_of(e)); }

void Engine::wait_host_until(RankCursor& st, int e, Seconds end) const {
  if (end > st.host) {
    st.host = end;
    st.host_binding = Binding::kDependency;
    st.host_cause = e;
  }
}

const RankCursor::Launch* Engine::queue_slot(const RankCursor& st, std::size_t s, int kernels) const {
  const auto depth = static_cast<std::size_t>(host_.launch_queue_depth);
  if (depth == 0 || kernels <= 0) return nullptr;
  // The op's last launch is number launches + k - 1; it fits once launch number
  // (launches + k - 1 - depth) has finished (streams run their launches in order).
  const std::size_t k = std::min(static_cast<std::size_t>(kernels), depth);
  const std::size_t last = st.launches[s] + k - 1;
  if (last < depth) return nullptr;
  return &st.launch_ring[s][(last - depth) % depth];
}

void Engine::record_launch(RankCursor& st, std::size_t s, int e) const {
  const auto depth = static_cast<std::size_t>(host_.launch_queue_depth);
  if (depth == 0) return;
  auto& ring = st.launch_ring[s];
  const RankCursor::Launch launch{e, log_.end_of(e)};
  // The ring grows to the queue depth as launches come (most ranks issue far fewer than
  // the depth per simulation), then wraps.
  if (ring.size() < depth)
    ring.push_back(launch);
  else
    ring[st.launches[s] % depth] = launch;
  st.launches[s]++;
}

void Engine::advance(RankCursor& st, int rank) const {
  if (++st.op == static_cast<int>(g_.ranks[static_cast<std::size_t>(rank)].ops.size())) {
    st.op = 0;
    std::swap(st.op_prev_event, st.op_last_event);
    std::fill(st.op_last_event.begin(), st.op_last_event.end(), -1);
    if (++st.iter == iterations_) st.done = true;
  }
}

void Engine::place(TimelineEvent& ev, Seconds launch, int seg, int stream_last, Seconds deps_end, int dep_event) const {
  const Seconds stream_free = log_.end_of(stream_last);
  ev.launch = launch;
  ev.start = launch;
  ev.binding = Binding::kHost;
  ev.cause = seg;
  if (stream_free > ev.start) {
    ev.start = stream_free;
    ev.binding = Binding::kStream;
    ev.cause = stream_last;
  }
  if (dep_event >= 0 && deps_end > ev.start) {
    ev.start = deps_end;
    ev.binding = Binding::kDependency;
    ev.cause = dep_event;
  }
  ev.host_delay = std::max(0.0, launch - std::max(stream_free, dep_event >= 0 ? deps_end : 0.0));
  if (ev.binding != Binding::kHost) ev.host_delay = 0;
}

bool Engine::dependencies_end(RankCursor& st, int rank, Seconds& deps_end, int& dep_event) const {
  deps_end = 0;
  dep_event = -1;
  auto take = [&](int e) {
    if (!log_.resolved(e)) {
      st.blocked_on = e;
      return false;
    }
    if (e >= 0 && (dep_event < 0 || log_.end_of(e) > deps_end)) {
      deps_end = log_.end_of(e);
      dep_event = e;
    }
    return true;
  };
  const auto r = static_cast<std::size_t>(rank), op = static_cast<std::size_t>(st.op);
  for (auto [d, end] = inputs_->deps(r, op); d != end; ++d)
    if (!take(st.op_last_event[static_cast<std::size_t>(*d)])) return false;
  for (auto [d, end] = inputs_->prev_deps(r, op); d != end; ++d)
    if (!take(st.op_prev_event[static_cast<std::size_t>(*d)])) return false;
  return true;
}

int Engine::issue_host_segment(RankCursor& st, int rank, const Op& op, const OpTiming& timing) {
  TimelineEvent seg;
  seg.rank = rank;
  seg.iteration = st.iter;
  seg.op = st.op;
  seg.lane = Lane::kHost;
  seg.start = st.host;
  seg.binding = st.host_binding;
  seg.cause = st.host_cause;
  const int seg_idx = log_.push(seg);
  st.host += timing.host_time.value_or(host_op_overhead(op));
  return seg_idx;
}

int Engine::issue_collective(RankCursor& st, int rank, const Op& op, int seg, int stream_last, Seconds deps_end,
                             int dep_event) {
  const auto s = static_cast<std::size_t>(op.stream);
  if (!op.captured) st.host += host_.launch_overhead;
  TimelineEvent ev;
  ev.rank = rank;
  ev.iteration = st.iter;
  ev.op = st.op;
  ev.lane = Lane::kComm;
  place(ev, st.host, seg, stream_last, deps_end, dep_event);
  ev.end = kUnresolved;  // set when every rank of the group has arrived
  const int last = log_.push(ev);
  if (!op.concurrent) record_launch(st, s, last);
  rendezvous_.arrive(rank, st, *op.collective, last);
  return last;
}

int Engine::issue_kernels(RankCursor& st, int rank, const Op& op, const OpTiming& timing, int seg, Seconds deps_end,
                          int dep_event) {
  const auto s = static_cast<std::size_t>(op.stream);
  int last = -1;
  for (std::size_t k = 0; k < op.kernels.size(); ++k) {
    const Estimate& est = timing.kernels[k];
    if (!op.captured) st.host += host_.launch_overhead * est.launches;
    TimelineEvent ev;
    ev.rank = rank;
    ev.iteration = st.iter;
    ev.op = st.op;
    ev.kernel = static_cast<int>(k);
    ev.lane = lane_of(op.stream);
    place(ev, st.host, seg, st.stream_last[s], k == 0 ? deps_end : 0.0, k == 0 ? dep_event : -1);
    ev.end = ev.start + overrides_.of(log_.size(), est.time * tg_.stretch(static_cast<std::size_t>(rank), static_cast<std::size_t>(st.op)));
    last = log_.push(ev);
    st.stream_last[s] = last;
    record_launch(st, s, last);
  }
  return last;
}

bool Engine::step(int rank) {
  RankCursor& st = cursors_[static_cast<std::size_t>(rank)];
  if (st.done) return false;
  if (st.waiting_event >= 0) {
    if (!log_.resolved(st.waiting_event)) return false;
    wait_host(st, st.waiting_event);
    st.waiting_event = -1;
    advance(st, rank);
    return true;
  }
  // An op that stopped at an unresolved event cannot go on before that event resolves: the
  // rank's state has not changed since, so its next try would stop there again.
  if (st.blocked_on >= 0) {
    if (!log_.resolved(st.blocked_on)) return false;
    st.blocked_on = -1;
  }
  const Op& op = g_.ranks[static_cast<std::size_t>(rank)].ops[static_cast<std::size_t>(st.op)];
  const OpTiming& timing = tg_.ops[static_cast<std::size_t>(rank)][static_cast<std::size_t>(st.op)];
  const auto s = static_cast<std::size_t>(op.stream);
  // A concurrent op (a part of a batched point-to-point call) queues behind nothing.
  const int stream_last = op.concurrent ? -1 : st.stream_last[s];
  if (!log_.resolved(stream_last)) {
    st.blocked_on = stream_last;
    return false;
  }
  Seconds deps_end = 0;
  int dep_event = -1;
  if (!dependencies_end(st, rank, deps_end, dep_event)) return false;
  // A full launch queue blocks the host until the stream's oldest pending launch finishes.
  if (const RankCursor::Launch* slot = op.concurrent ? nullptr : queue_slot(st, s, op.collective ? 1 : static_cast<int>(op.kernels.size()))) {
    const Seconds end = launch_end(*slot);
    if (std::isnan(end)) {
      st.blocked_on = slot->event;
      return false;
    }
    wait_host_until(st, slot->event, end);
  }

  const int seg = issue_host_segment(st, rank, op, timing);
  const int last = op.collective ? issue_collective(st, rank, op, seg, stream_last, deps_end, dep_event)
                                 : issue_kernels(st, rank, op, timing, seg, deps_end, dep_event);
  if (last >= 0 && !op.concurrent) st.stream_last[s] = last;
  // An op without GPU work passes its inputs on: its consumers wait for them.
  st.op_last_event[static_cast<std::size_t>(st.op)] = last >= 0 ? last : dep_event;
  log_.at(seg).end = st.host;
  st.host_binding = Binding::kStream;
  st.host_cause = seg;

  if (op.host_waits) {
    // An op without GPU work waits for its inputs (e.g. the end of a batched transfer).
    const int waited = last >= 0 ? last : dep_event;
    if (!log_.resolved(waited)) {
      st.waiting_event = waited;
      return true;
    }
    wait_host(st, waited);
  }
  advance(st, rank);
  return true;
}

Timeline assemble_timeline(std::vector<TimelineEvent> events, int world, int iterations,
                           std::vector<std::vector<Seconds>> iteration_end) {
  Timeline t;
  t.world = world;
  t.iterations = iterations;
  t.iteration_end = std::move(iteration_end);
  t.iteration_end.resize(static_cast<std::size_t>(world));
  for (auto& ends : t.iteration_end) ends.assign(static_cast<std::size_t>(iterations), 0.0);
  for (const auto& e : events) {
    auto& slot = t.iteration_end[static_cast<std::size_t>(e.rank)][static_cast<std::size_t>(e.iteration)];
    slot = std::max(slot, e.end);
  }
  // A host that runs ahead keeps later iterations' ends ordered.
  for (auto& ends : t.iteration_end)
    for (std::size_t k = 1; k < ends.size(); ++k) ends[k] = std::max(ends[k], ends[k - 1]);
  for (const auto& ends : t.iteration_end) {
    t.window_start = std::max(t.window_start, ends[ends.size() - 2]);
    t.window_end = std::max(t.window_end, ends.back());
  }
  t.iteration_time = t.window_end - t.window_start;
  t.events = std::move(events);
  return t;
}

}  // namespace perfcast::sim
